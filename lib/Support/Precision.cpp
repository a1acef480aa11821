//===- Precision.cpp - the compute precision of a step
//---------------------===//

#include "memopt/Support/Precision.h"

#include "llvm/ADT/StringSwitch.h"

using namespace memopt;

std::optional<Precision> memopt::parsePrecision(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Precision>>(name)
      .Case("none", Precision::F32)
      .Case("bf16", Precision::BF16)
      .Case("fp16", Precision::F16)
      .Default(std::nullopt);
}

llvm::StringRef memopt::getPrecisionName(Precision precision) {
  switch (precision) {
  case Precision::F32:
    return "none";
  case Precision::BF16:
    return "bf16";
  case Precision::F16:
    return "fp16";
  }
  llvm_unreachable("unknown precision");
}

std::string memopt::listPrecisions(llvm::StringRef extra) {
  if (extra.empty())
    return "none, bf16 or fp16";
  return ("none, bf16, fp16 or " + extra).str();
}
