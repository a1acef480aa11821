//===- Placement.h - Static buffer placement --------------------*- C++ -*-===//
//
// Offsets for buffers with known lifetimes in one arena (the dynamic storage
// allocation problem). Plain C++ on plain data: the PlanBuffers pass and the
// memopt-plan tool are thin wrappers over placeBuffers().
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNING_PLACEMENT_H
#define MEMOPT_PLANNING_PLACEMENT_H

#include <cstdint>
#include <string>
#include <vector>

namespace memopt {

/// One buffer to place: live over the half-open interval [lower, upper) of
/// program time, `size` bytes large. `id` is only carried for diagnostics.
struct Buffer {
  int64_t id = 0;
  int64_t lower = 0;
  int64_t upper = 0;
  int64_t size = 0;
};

/// Knobs of placeBuffers().
struct PlacementOptions {
  /// Every offset is a multiple of this, and every size is rounded up to it
  /// before placement. memopt's pass uses 256; the CSV tool defaults to 1.
  int64_t alignment = 1;
  /// Wall-clock budget, in seconds, counted from the start of the call: the
  /// heuristics (the first greedy order always runs to completion) use up to
  /// heuristicShare of it, then the exact search (only when no heuristic
  /// reached the lower bound) runs until this much time has passed. Zero runs
  /// the whole greedy portfolio and nothing else.
  double timeLimitSeconds = 1.0;
  /// The exact search is skipped above this many buffers: its per-node cost is
  /// linear in the problem size, so it cannot improve very large instances.
  size_t exactSearchMaxBuffers = 2000;
  /// Share of the time left after the heuristics that the exact search spends
  /// first on asking whether everything fits in the lower bound, before it
  /// bisects between the lower bound and the best arena found.
  double lowerBoundShare = 0.5;
  /// Share of the time limit for the heuristics: further greedy orders and
  /// the improvement loop stop when it is spent (the first order always runs;
  /// with a time limit of 0 the whole portfolio runs and nothing else).
  double heuristicShare = 0.3;
  /// At most this many rounds of the improvement loop (re-placing with the
  /// buffers that hold up the arena moved to the front of the order). The
  /// cap keeps the result independent of machine speed whenever the loop
  /// ends by it rather than by heuristicShare.
  int improvementRounds = 64;
  /// False skips the greedy portfolio and the improvement loop, so that the
  /// exact search starts from all buffers stacked; for testing the search.
  bool runHeuristics = true;
};

/// The result of placeBuffers().
struct Placement {
  /// Offset of each buffer, in the order the buffers were given.
  std::vector<int64_t> offsets;
  /// max(offset + aligned size); 0 when there are no buffers.
  int64_t arenaSize = 0;
  /// computeLowerBound() of the same problem with the same alignment.
  int64_t lowerBound = 0;
  /// Which method produced `offsets`: a greedy order ("greedy-by-size-start",
  /// ...), "greedy-improved", "exact", "stacked" (runHeuristics off),
  /// "trivial", or "no-reuse" (stackBuffers()).
  std::string method;
  /// True when the arena is proven minimal: it equals the lower bound, or the
  /// exact search refuted every smaller capacity.
  bool provenOptimal = false;
  /// Nodes visited by the exact search (0 when it did not run).
  uint64_t searchNodes = 0;
};

/// Rounds `value` up to a multiple of `alignment` (which must be >= 1).
int64_t alignUp(int64_t value, int64_t alignment);

/// The largest total (aligned) size of the buffers live at one instant. No
/// placement can use a smaller arena. O(n log n).
int64_t computeLowerBound(const std::vector<Buffer> &buffers,
                          int64_t alignment = 1);

/// Places `buffers` in one arena so that two buffers whose lifetimes overlap
/// never overlap in memory, trying to minimise the arena size.
///
/// Preconditions (checked by the callers that read user input): sizes are in
/// [0, 2^40], alignment is in [1, 2^30]. Buffers with an empty lifetime
/// (upper <= lower) or a zero size conflict with nothing and get offset 0.
/// Deterministic: the same input and options give the same placement unless
/// a time budget cuts the improvement loop or the exact search at a different
/// point.
Placement placeBuffers(const std::vector<Buffer> &buffers,
                       const PlacementOptions &options = {});

/// Places every buffer in its own bytes, whatever its lifetime: offsets
/// back to back in the order given, each size rounded up to `alignment`
/// (which must be >= 1), so that no two buffers share a byte. The arena is
/// the sum of the aligned sizes. The baseline of --memopt-plan-buffers
/// with reuse=false (docs/BufferReuse.md); method "no-reuse", and
/// provenOptimal only when that sum equals the lower bound. O(n log n).
Placement stackBuffers(const std::vector<Buffer> &buffers,
                       int64_t alignment = 1);

} // namespace memopt

#endif // MEMOPT_PLANNING_PLACEMENT_H
