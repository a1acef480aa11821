//===- Precision.h - the compute precision of a step -------------*- C++
//-*-===//
//
// The precision a training step computes in (docs/MixedPrecision.md), with
// the one spelling every tool and pass accepts: none (FP32), bf16 or fp16.
// The llvm::cl parser below lets a pass or pipeline option hold the enum,
// so the name is parsed, checked and printed here alone.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_SUPPORT_PRECISION_H
#define MEMOPT_SUPPORT_PRECISION_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace memopt {

/// FP32 throughout, or FP32 master weights with BF16 or FP16 compute.
enum class Precision { F32, BF16, F16 };

/// The precisions by name, for messages: "none, bf16 or fp16", or with
/// `extra` (a value the calling tool adds) "none, bf16, fp16 or auto".
std::string listPrecisions(llvm::StringRef extra = "");

/// `name` (none, bf16 or fp16) as a precision; nullopt for anything else.
std::optional<Precision> parsePrecision(llvm::StringRef name);

/// The name parsePrecision reads: "none", "bf16" or "fp16".
llvm::StringRef getPrecisionName(Precision precision);

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os,
                                     Precision precision) {
  return os << getPrecisionName(precision);
}

} // namespace memopt

namespace llvm::cl {

/// Reads a memopt::Precision option with parsePrecision, so that a pass
/// option, a pipeline option and a command-line flag accept the same names
/// and reject others with the same message.
template <>
class parser<memopt::Precision> : public basic_parser<memopt::Precision> {
public:
  explicit parser(Option &option) : basic_parser(option) {}

  /// True on error, as llvm::cl's parsers.
  bool parse(Option &option, StringRef, StringRef value,
             memopt::Precision &result) {
    if (std::optional<memopt::Precision> precision =
            memopt::parsePrecision(value)) {
      result = *precision;
      return false;
    }
    return option.error("unknown value '" + value + "' (expected " +
                        memopt::listPrecisions() + ")");
  }

  StringRef getValueName() const override { return "precision"; }

  void printOptionDiff(const Option &option, memopt::Precision value,
                       OptVal defaultValue, size_t globalWidth) const {
    printOptionName(option, globalWidth);
    outs() << "= " << memopt::getPrecisionName(value);
    if (defaultValue.hasValue())
      outs() << " (default: "
             << memopt::getPrecisionName(defaultValue.getValue()) << ")";
    outs() << "\n";
  }
};

} // namespace llvm::cl

#endif // MEMOPT_SUPPORT_PRECISION_H
