//===- ByteSize.cpp - sizes as users write and read them ------------------===//

#include "memopt/Support/ByteSize.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace memopt;

std::optional<int64_t> memopt::parseByteSize(llvm::StringRef text) {
  text = text.trim();
  size_t unitStart = text.find_first_not_of("0123456789.");
  llvm::StringRef number = text.substr(0, unitStart);
  llvm::StringRef unit =
      unitStart == llvm::StringRef::npos ? "" : text.substr(unitStart).trim();
  double value;
  if (number.empty() || number.getAsDouble(value) || !std::isfinite(value) ||
      value < 0)
    return std::nullopt;
  std::optional<double> scale =
      llvm::StringSwitch<std::optional<double>>(unit.lower())
          .Cases({"", "b"}, 1.0)
          .Case("kib", 1024.0)
          .Case("mib", 1024.0 * 1024)
          .Case("gib", 1024.0 * 1024 * 1024)
          .Case("tib", 1024.0 * 1024 * 1024 * 1024)
          .Case("kb", 1e3)
          .Case("mb", 1e6)
          .Case("gb", 1e9)
          .Case("tb", 1e12)
          .Default(std::nullopt);
  if (!scale)
    return std::nullopt;
  double bytes = std::floor(value * *scale);
  // 2^63 is the first double that does not fit.
  if (bytes >= 9223372036854775808.0)
    return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::string memopt::formatBytes(int64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return llvm::formatv("{0:f2} {1}", value, units[unit]).str();
}

std::string memopt::formatFlops(int64_t flops) {
  static const char *const units[] = {"FLOP",  "kFLOP", "MFLOP",
                                      "GFLOP", "TFLOP", "PFLOP"};
  if (flops < 1000)
    return std::to_string(flops) + " FLOP";
  double value = static_cast<double>(flops);
  int unit = 0;
  while (value >= 1000.0 && unit < 5) {
    value /= 1000.0;
    ++unit;
  }
  return llvm::formatv("{0:f2} {1}", value, units[unit]).str();
}
