//===- ByteSize.h - sizes as users write and read them ------------*- C++ -*-===//
//
// Parses the memory sizes of memopt's command lines ("24GiB", "80GB",
// "1.5 GiB", "4096") and formats the bytes, FLOPs, seconds and numbers
// memopt prints.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_SUPPORT_BYTESIZE_H
#define MEMOPT_SUPPORT_BYTESIZE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace memopt {

/// Parses a non-negative size: a number (decimals allowed) followed by an
/// optional unit, B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
/// (powers of 1000), case-insensitive, with optional spaces between. The
/// result is rounded down to whole bytes. std::nullopt for anything else,
/// a negative number, or a size that does not fit in int64_t.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

/// Formats a byte count with a binary unit: "512 B", "37.54 KiB", "1.50 GiB".
std::string formatBytes(int64_t bytes);

/// Formats a FLOP count with a decimal unit: "812 FLOP", "1.25 MFLOP",
/// "3.10 GFLOP".
std::string formatFlops(int64_t flops);

/// Formats a duration: "1.234 s", or "12.34 ms" below a second.
std::string formatSeconds(double seconds);

/// Formats a number as "%g" prints it, as a user types it: "1.5", "0.001",
/// "1e-08" (not 1.500000e+00).
std::string formatNumber(double value);

} // namespace memopt

#endif // MEMOPT_SUPPORT_BYTESIZE_H
