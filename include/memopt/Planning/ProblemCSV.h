//===- ProblemCSV.h - Placement problems as CSV files -----------*- C++ -*-===//
//
// The CSV format of shared/benchmarks/dsa: a header `id,lower,upper,size`
// (optionally followed by `,offset`, which is ignored), then one buffer per
// line.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNING_PROBLEMCSV_H
#define MEMOPT_PLANNING_PROBLEMCSV_H

#include "memopt/Planning/Placement.h"

#include <istream>
#include <string>
#include <vector>

namespace memopt {

/// The largest buffer size the reader accepts (1 TiB).
constexpr int64_t kMaxBufferSize = int64_t(1) << 40;

/// The largest sum of all buffer sizes the reader accepts (1 PiB), and the
/// most buffers: with alignment padding (at most 2^30 per buffer) every
/// arena stays below 2^50 + 2^31 * 2^30 < 2^63, far from int64 overflow.
constexpr int64_t kMaxTotalSize = int64_t(1) << 50;
constexpr size_t kMaxBuffers = size_t(1) << 31;

/// Parses a placement problem from `input`. `name` is used in messages. On
/// failure returns false and sets `error` to one line `name:line: problem`.
/// Rejects a wrong header, a wrong field count, non-integer fields, a
/// negative or too large size, an empty lifetime (upper <= lower), a
/// duplicate id, and more than kMaxBuffers buffers or kMaxTotalSize bytes. Blank lines and a trailing '\r' are allowed.
bool parseProblemCSV(std::istream &input, const std::string &name,
                     std::vector<Buffer> &buffers, std::string &error);

/// Reads and parses the file at `path`; a file that cannot be opened is an
/// error as well.
bool readProblemCSV(const std::string &path, std::vector<Buffer> &buffers,
                    std::string &error);

} // namespace memopt

#endif // MEMOPT_PLANNING_PROBLEMCSV_H
