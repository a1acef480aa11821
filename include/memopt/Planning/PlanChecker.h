//===- PlanChecker.h - Independent check of a buffer placement --*- C++ -*-===//
//
// Verifies a placement without trusting the placer: it shares no code with
// Placement.cpp beyond the Buffer type.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNING_PLANCHECKER_H
#define MEMOPT_PLANNING_PLANCHECKER_H

#include "memopt/Planning/Placement.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memopt {

/// Checks that `offsets` (one per buffer, same order) is a valid placement of
/// `buffers` in an arena of `arenaSize` bytes: every offset is a non-negative
/// multiple of `alignment`, every buffer lies inside [0, arenaSize), and no two
/// buffers whose lifetimes overlap share a byte. Sizes are taken as given (not
/// rounded up). Returns std::nullopt when the placement is valid, otherwise a
/// message naming the offending buffer id(s). O(n log n).
std::optional<std::string> checkPlacement(const std::vector<Buffer> &buffers,
                                          const std::vector<int64_t> &offsets,
                                          int64_t arenaSize,
                                          int64_t alignment = 1);

} // namespace memopt

#endif // MEMOPT_PLANNING_PLANCHECKER_H
