//===- RematSchedule.h - checkpoint schedules on chains ----------*- C++ -*-===//
//
// The algorithms of --memopt-remat that need no IR: Griewank and Walther's
// binomial checkpointing (revolve) on a chain of stages, Chen et al.'s sqrt(n)
// segments, and the exact dynamic program that picks, for a chain of stages
// with heterogeneous sizes and costs, the least recompute that fits a memory
// bound, and the exact keep/recompute search on small general graphs. Plain
// C++ on plain data, unit-tested with gtest (unittests/Remat).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_REMATSCHEDULE_H
#define MEMOPT_REMAT_REMATSCHEDULE_H

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace memopt {

/// The closed form of the least number of forward steps that reversing a
/// chain of `steps` steps with `snapshots` checkpoints needs (REFERENCE.md):
/// with r the smallest integer such that C(s + r, s) >= l,
/// t(l, s) = r * l - C(s + r, s + 1). Requires steps >= 1, snapshots >= 1.
int64_t getRevolveForwardSteps(int64_t steps, int64_t snapshots);

/// The logarithmic number of snapshots for a chain of `steps` stages: the
/// smallest s >= 1 with C(2s, s) >= steps (s is about log4 of the length).
int64_t getLogarithmicSnapshots(int64_t steps);

/// A checkpoint schedule on a chain of stages 0..n-1. Boundary i (1 <= i < n)
/// is the value that enters stage i. The forward runs every stage once and
/// keeps the boundaries in `keptInForward`; the backward visits the stages
/// from n-1 down to 0 (each visit a "turn"); before turn i it runs the
/// advances in `advancesBefore[i]`, each of which recomputes boundary `to`
/// from the snapshot at boundary `from` (0 = the step's arguments), keeping
/// only boundary `to`. A turn recomputes its stage from its input boundary,
/// except for the stages in [firstKeptStage, n), whose values the forward
/// keeps.
struct ChainSchedule {
  /// keptInForward[i]: boundary i is kept by the forward (index 0 unused).
  std::vector<bool> keptInForward;
  /// advancesBefore[i]: (from, to) boundary pairs recomputed before turn i.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> advancesBefore;
  /// The stages from here on keep all their values (no recompute).
  int64_t firstKeptStage = 0;

  /// Stage evaluations the backward repeats: the length of every advance
  /// plus one per recomputed turn.
  int64_t getRecomputedStages() const;
  /// The largest number of boundaries held at once (forward-kept ones plus
  /// advance snapshots), over the backward.
  int64_t getMaxSnapshots() const;
};

/// Binomial checkpointing (revolve) of `stages` stages with `snapshots`
/// boundary slots: an optimal schedule, whose getRecomputedStages() equals
/// getRevolveForwardSteps(stages, snapshots). O(l^2 s) for the split table.
ChainSchedule buildRevolveSchedule(int64_t stages, int64_t snapshots);

/// Keep every boundary (one recompute per stage but the last).
ChainSchedule buildBlocksSchedule(int64_t stages);

/// Chen et al.'s sqrt(n): keep every ceil(sqrt(n))-th boundary; a segment is
/// recomputed as a whole at its first turn; the last segment is kept.
ChainSchedule buildSqrtSchedule(int64_t stages);

/// One stage of the chain that the budget dynamic program sees.
struct ChainStage {
  /// Bytes of the value that enters the stage (0 for stage 0).
  int64_t inputBytes = 0;
  /// Bytes of the stage's values that its backward reads.
  int64_t savedBytes = 0;
  /// Cost of running the stage's forward once (FLOPs).
  int64_t flops = 0;
};

/// What the budget plan does with one stage.
enum class StageChoice {
  /// Keep the stage's input and every value its backward reads.
  Keep,
  /// Keep the stage's input; recompute this stage and the following
  /// Continue stages at their first turn.
  Checkpoint,
  /// Part of the segment of the nearest Checkpoint stage before it.
  Continue,
};

/// The memory and recompute of a chain plan under the segment model: the
/// backward of a kept stage holds everything kept before it plus the stage's
/// input and saved values; that of a recomputed segment holds everything
/// kept before it, the segment's input and the saved values of all its
/// stages.
struct ChainCost {
  int64_t peakBytes = 0;
  int64_t recomputeFlops = 0;
};

/// Evaluates `plan` (one choice per stage; stage 0 is never Continue).
/// std::nullopt for an invalid plan.
std::optional<ChainCost> evaluateChainPlan(const std::vector<ChainStage> &chain,
                                           const std::vector<StageChoice> &plan);

/// The plan of least recompute FLOPs whose peak (evaluateChainPlan) is at
/// most `budgetBytes`, by an exact dynamic program over (stage, bytes kept so
/// far) with memoization of the reachable states; among plans of equal
/// recompute, the lowest peak. std::nullopt when none fits.
std::optional<std::vector<StageChoice>>
solveChainBudget(const std::vector<ChainStage> &chain, int64_t budgetBytes);

/// The smallest peak any plan reaches (the dynamic program with recompute
/// ignored).
int64_t getMinimumChainPeak(const std::vector<ChainStage> &chain);


/// The most candidate values the exact graph search (solveGraphBudget)
/// accepts; above it, --memopt-remat keeps to the chain dynamic program.
constexpr int64_t kMaxGraphSearchCandidates = 20;

/// One forward value (the results of one forward op) of the general-graph
/// budget search. Values are in topological (program) order.
struct GraphValue {
  enum class Kind {
    /// The search decides whether the backward keeps or recomputes it.
    Candidate,
    /// Always kept (ops with side effects).
    Kept,
    /// Never kept: recomputed whenever a recompute needs it.
    Recomputed,
  };
  Kind kind = Kind::Recomputed;
  /// Bytes of its results.
  int64_t bytes = 0;
  /// FLOPs of running its op once.
  int64_t flops = 0;
  /// Indices of the earlier values its op reads.
  std::vector<int64_t> operands;
  /// Positions (in backward program order) of the first and last backward
  /// reads; -1 when the backward does not read it.
  int64_t firstUse = -1;
  int64_t lastUse = -1;
};

/// The memory and recompute of a keep/recompute choice on a graph. A kept
/// value lives from the forward to its last backward read; a recomputed one
/// that the backward reads is cloned before its first backward read and lives
/// until its last; the recompute runs every op that a non-kept value the
/// backward reads depends on through non-kept values, once (clones are
/// reused). peakBytes is the largest sum of live bytes at position 0 and at
/// each first backward read.
struct GraphCost {
  int64_t peakBytes = 0;
  int64_t recomputeFlops = 0;
};

/// Evaluates `keep` (one flag per Candidate value, in order). std::nullopt
/// when `keep` does not have one flag per candidate.
std::optional<GraphCost> evaluateGraphPlan(const std::vector<GraphValue> &graph,
                                           const std::vector<bool> &keep);

/// The choice of least recompute FLOPs whose peak (evaluateGraphPlan) is at
/// most `budgetBytes` (among equal recompute, the lowest peak), by
/// branch-and-bound over the candidates: the peak with the undecided ones
/// recomputed and the recompute with them kept bound every completion, since
/// keeping more never lowers the peak nor raises the recompute. Exact;
/// std::nullopt when none fits or there are more than
/// kMaxGraphSearchCandidates candidates.
std::optional<std::vector<bool>>
solveGraphBudget(const std::vector<GraphValue> &graph, int64_t budgetBytes);

} // namespace memopt

#endif // MEMOPT_REMAT_REMATSCHEDULE_H
