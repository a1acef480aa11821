//===- ByteSize.cpp - sizes as users write and read them ------------------===//

#include "memopt/Support/ByteSize.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

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

/// `count` in the largest of `units` (each `base` times the previous) that
/// keeps it at least 1, with two decimals; below `base`, the whole count in
/// the first unit.
static std::string formatWithUnit(int64_t count, double base,
                                  llvm::ArrayRef<const char *> units) {
  if (count < base)
    return std::to_string(count) + " " + units.front();
  double value = static_cast<double>(count);
  size_t unit = 0;
  while (value >= base && unit + 1 < units.size()) {
    value /= base;
    ++unit;
  }
  return llvm::formatv("{0:f2} {1}", value, units[unit]).str();
}

std::string memopt::formatBytes(int64_t bytes) {
  return formatWithUnit(bytes, 1024.0, {"B", "KiB", "MiB", "GiB", "TiB"});
}

std::string memopt::formatFlops(int64_t flops) {
  return formatWithUnit(flops, 1000.0,
                        {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"});
}

std::string memopt::formatSeconds(double seconds) {
  if (seconds >= 1.0)
    return llvm::formatv("{0:f3} s", seconds).str();
  return llvm::formatv("{0:f2} ms", seconds * 1e3).str();
}

std::string memopt::formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}
