//===- PlacementInternal.h - Shared pieces of the placer --------*- C++ -*-===//
//
// Private to lib/Planning: the problem in alignment units over compressed
// time, shared by the greedy portfolio (Placement.cpp) and the exact search
// (PlacementSearch.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_PLANNING_PLACEMENTINTERNAL_H
#define MEMOPT_LIB_PLANNING_PLACEMENTINTERNAL_H

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace memopt {
namespace detail {

/// The problem in units (see `unit`) over compressed time: buffer i is live in
/// slots [first[i], last[i]) and is size[i] units large. Only buffers that
/// can conflict with something (non-empty lifetime, non-zero size) appear.
struct UnitProblem {
  std::vector<size_t> original; // index into the caller's vector
  std::vector<int64_t> size;
  std::vector<int64_t> lower, upper; // original times, for orderings
  std::vector<uint32_t> first, last;
  size_t numSlots = 0;
  int64_t lowerBound = 0; // in units
  /// Bytes per unit: the alignment times the gcd of the aligned sizes.
  int64_t unit = 1;

  size_t numBuffers() const { return size.size(); }
};

/// The decision version of the problem ("do all buffers fit below
/// `capacity`?"), answered by a depth-first search over canonical solutions;
/// see the comment at the top of PlacementSearch.cpp.
class CapacitySearch {
public:
  enum class Result {
    Found,      ///< a placement within the capacity; see offsets()
    Infeasible, ///< proven: no placement fits
    Aborted,    ///< the node limit ran out first
    TimedOut,   ///< the deadline passed first
  };

  /// Number of static preorders solve() accepts as `heuristic`.
  static constexpr int numHeuristics = 3;

  explicit CapacitySearch(const UnitProblem &p);
  ~CapacitySearch();

  Result solve(int64_t capacity, int heuristic, uint64_t nodeLimit,
               std::chrono::steady_clock::time_point deadline);

  /// Offsets of the last placement solve() found.
  const std::vector<int64_t> &offsets() const;
  /// Nodes visited over all calls.
  uint64_t numNodes() const;

private:
  class Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace detail
} // namespace memopt

#endif // MEMOPT_LIB_PLANNING_PLACEMENTINTERNAL_H
