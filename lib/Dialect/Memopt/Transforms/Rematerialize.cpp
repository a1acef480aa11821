//===- Rematerialize.cpp - keep or recompute forward values ---------------===//
//
// Activation checkpointing on the tensor-level @train_step, as users do by
// hand with torch.utils.checkpoint, with the schedules of Chen et al. 2016
// (sqrt(n) segments), Griewank and Walther 2000 (revolve) and an exact
// dynamic program over a chain of heterogeneous stages (Beaumont et al.
// 2019) checked against the real buffer planner.
//
// 1. The forward ops are the backward slice of the loss and of the returned
//    "state" values; everything else but the terminator and the optimizer
//    update reads them as "the backward". Forward ops that read no "input" or
//    "label" argument (bias broadcasts, causal masks, position embeddings)
//    are "free": they never carry the forward and are recomputed wherever the
//    backward needs them. O(n).
// 2. Stages: the gaps between consecutive forward ops where exactly one
//    non-free value crosses (an articulation value of the forward graph) are
//    the candidate cuts; with `memopt.scope`s, only cuts where the top-level
//    module prefix (up to the first numeric path component, e.g.
//    `transformer.h.3`, else the first component) differs from the one the
//    stage started with are kept. O(n log n).
// 3. A strategy fills the set of forward values the backward reads as they
//    are and, for revolve, the advances that rebuild snapshots before a turn
//    (memopt/Remat/RematSchedule.h). budget also searches the forward as a
//    graph of values, exactly, when at most kMaxGraphSearchCandidates values
//    are read by the backward (parallel branches inside one stage); its plans
//    and the chain DP's are checked with the planner alike.
// 4. The rewrite walks the backward in program order; an operand that is a
//    forward value outside that set is recomputed: its producers are cloned
//    (post-order) right before the op, reading kept values, snapshots and
//    earlier clones of values the backward reads or of matmuls and
//    convolutions (cheap intermediates are cloned again rather than held),
//    and marked `memopt.recompute`. Before the first backward
//    use of stage i, the advances scheduled for the turns >= i run first. O(n)
//    clones per recomputed value at most once per turn.
//
// 0. Before a strategy (and with strategy=none), with cheap-recompute: the
//    minimal saved set (memopt/Remat/SavedSet.h), a minimum cut of the
//    forward graph's results that keeps the least bytes from which the
//    backward recomputes the rest by cheap ops; it is applied with step 4's
//    rewrite, and the strategy then starts from the rewritten step. Its
//    forms (parameter casts kept or cast again, residual streams kept or
//    rebuilt) and the step without it are planned on copies; the smallest
//    arena wins.
//
// Steps 1, 2 and 4 (the step graph and the rewrite) are RematGraph.cpp's;
// this file holds the strategies, the budget search and the pass.
//
// Bit-exactness: a clone is the same op with the same operands (by value)
// and attributes, and memopt ops on tensors are deterministic functions of
// those (dropout's mask is a function of its seed, stream and the step, which
// a recompute in the same step shares). Ops with memory effects are kept.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Remat/RematSchedule.h"
#include "memopt/Remat/SavedSet.h"

#include "RematGraph.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#include <limits>
#include <map>
#include <tuple>

#define DEBUG_TYPE "memopt-remat"

namespace memopt {
#define GEN_PASS_DEF_REMATERIALIZEPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;
using namespace memopt::remat;

/// Seconds of exact placement search for the budget candidates closest to
/// the budget when the heuristics fit none: the default time limit of
/// --memopt-plan-buffers, which plans the final step.
static constexpr double kExactCheckSeconds = 1.0;

namespace {

struct RematerializePass
    : public memopt::impl::RematerializePassBase<RematerializePass> {
  using Base::Base;
  RematerializePass(const RematerializePass &other)
      : Base(other), planningOptions(other.planningOptions) {}

  void runOnOperation() override;

  /// What the copies are planned with: the pipeline's options, or the
  /// `planning` text's (bufferization and planning alone by default).
  std::shared_ptr<const PlanningPipelineOptions> planningOptions;
  /// planningOptions, or the `planning` text over release-gradients=false.
  FailureOr<std::shared_ptr<const PlanningPipelineOptions>>
  getPlanningOptions() const;

  /// The decision of a strategy: what the backward reads as is, and the
  /// advances of revolve.
  struct Decision {
    DenseSet<Value> kept;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> advancesBefore;
    int64_t recomputedStages = 0;
  };

  /// Applies `decision` to `func` (whose graph is `graph`).
  void apply(const StepGraph &graph, const Decision &decision);

  Decision fromSchedule(const StepGraph &graph, const ChainSchedule &schedule);
  Decision fromChainPlan(const StepGraph &graph,
                         const std::vector<StageChoice> &plan);
  Decision fromGraphPlan(const StepGraph &graph, const std::vector<int> &keep);
  Decision selective(const StepGraph &graph);
  Decision minimalSaved(const StepGraph &graph);

  /// A budget plan: a chain plan (StageChoice per stage) or a general-graph
  /// one (a keep flag per candidate of StepGraph::getValueGraph).
  struct BudgetPlan {
    bool graph = false;
    std::vector<int> choices;
    bool operator<(const BudgetPlan &other) const {
      return std::tie(graph, choices) < std::tie(other.graph, other.choices);
    }
    bool operator==(const BudgetPlan &other) const {
      return graph == other.graph && choices == other.choices;
    }
  };
  Decision fromBudgetPlan(const StepGraph &graph, const BudgetPlan &plan);

  /// The planned arena of the module with `plan` applied to a copy (with
  /// `runPlanner` false, only applies it: -1, and lastCloneFlops is set).
  /// The placement runs its heuristics, and its exact search for
  /// `timeLimit` seconds.
  FailureOr<int64_t> getPlannedArena(const BudgetPlan &plan,
                                     bool runPlanner = true,
                                     double timeLimit = 0);
  /// The planned arena of `module` after --memopt-bufferize and
  /// --memopt-plan-buffers as the pipeline runs them (placement search of
  /// `timeLimit` seconds after the heuristics).
  /// The arena --memopt-bufferize and --memopt-plan-buffers give `module`
  /// after the passes the pipeline runs between them and remat
  /// (--memopt-release-gradients, --memopt-accumulate).
  FailureOr<int64_t> planArena(ModuleOp module, double timeLimit);
  /// The decision of a strategy other than budget on `graph` (`slots`:
  /// revolve's snapshots).
  Decision chooseDecision(const StepGraph &graph, StringRef kind,
                          int64_t *slots);
  /// Rewrites the step of `target` by strategy `kind` (not budget), from its
  /// minimal saved set when `minimal`.
  LogicalResult rewriteStep(ModuleOp target, StringRef kind, bool minimal,
                            int64_t *slots);
  /// The planned arena of rewriteStep on a copy (placement heuristics).
  FailureOr<int64_t> planStrategy(StringRef kind, bool minimal);
  LogicalResult runBudget(FunctionOpInterface func, StepGraph &graph);
  /// budget on `target` (the pass's module or a copy of it), from its
  /// minimal saved set when `minimal`.
  LogicalResult runBudgetOn(ModuleOp target, bool minimal);
  /// Whether `kind` starts from the minimal saved set, in the form (the
  /// recastParams and keepResidual it sets) that plans the smallest arena.
  bool chooseMinimalForm(FunctionOpInterface func, StringRef kind);
  /// The module whose copies the budget search plans (getPlannedArena).
  ModuleOp searchRoot;
  /// The plan runBudget applied last.
  BudgetPlan chosenPlan;
  /// Applies a budget plan to the step of `graph`.
  void applyBudgetPlan(const StepGraph &graph, const BudgetPlan &plan);

  int64_t lastClones = 0, lastCloneFlops = 0, lastRecomputedStages = 0;
  /// The minimal saved set's clones and their FLOPs.
  int64_t cheapClones = 0, cheapFlops = 0;
  /// Whether the minimal saved set casts parameters again in the backward
  /// instead of keeping their low-precision copies from the forward.
  bool recastParams = false;
  /// Whether the minimal saved set keeps the values of residual streams
  /// (getResidualBoundaries) instead of rebuilding them.
  bool keepResidual = true;
  /// budget: candidates of the general-graph model, and which model's plan
  /// won ("chain" or "graph").
  int64_t graphCandidates = 0;
  StringRef budgetSearch;
};

} // namespace

RematerializePass::Decision
RematerializePass::fromSchedule(const StepGraph &graph,
                                const ChainSchedule &schedule) {
  Decision decision;
  int64_t n = graph.getNumStages();
  for (int64_t i = 1; i < n; ++i)
    if (schedule.keptInForward[i])
      decision.kept.insert(graph.boundaries[i]);
  if (schedule.firstKeptStage >= 1 && schedule.firstKeptStage < n)
    decision.kept.insert(graph.boundaries[schedule.firstKeptStage]);
  for (int64_t i = std::max<int64_t>(schedule.firstKeptStage, 0); i < n; ++i)
    for (Value value : graph.savedByStage[i])
      decision.kept.insert(value);
  decision.advancesBefore = schedule.advancesBefore;
  decision.recomputedStages = schedule.getRecomputedStages();
  return decision;
}

RematerializePass::Decision
RematerializePass::fromChainPlan(const StepGraph &graph,
                                 const std::vector<StageChoice> &plan) {
  Decision decision;
  for (auto [i, choice] : llvm::enumerate(plan)) {
    if (choice == StageChoice::Continue)
      continue;
    if (i > 0)
      decision.kept.insert(graph.boundaries[i]);
    if (choice == StageChoice::Keep)
      for (Value value : graph.savedByStage[i])
        decision.kept.insert(value);
    else
      ++decision.recomputedStages;
  }
  return decision;
}

RematerializePass::Decision
RematerializePass::fromGraphPlan(const StepGraph &graph,
                                 const std::vector<int> &keep) {
  Decision decision;
  SmallVector<Operation *> ops;
  std::vector<GraphValue> values = graph.getValueGraph(ops);
  size_t next = 0;
  for (auto [i, value] : llvm::enumerate(values))
    if (value.kind == GraphValue::Kind::Candidate && keep[next++])
      for (Value result : ops[i]->getResults())
        decision.kept.insert(result);
  return decision;
}

RematerializePass::Decision
RematerializePass::fromBudgetPlan(const StepGraph &graph,
                                  const BudgetPlan &plan) {
  if (plan.graph)
    return fromGraphPlan(graph, plan.choices);
  std::vector<StageChoice> chain;
  for (int choice : plan.choices)
    chain.push_back(static_cast<StageChoice>(choice));
  return fromChainPlan(graph, chain);
}

RematerializePass::Decision
RematerializePass::selective(const StepGraph &graph) {
  Decision decision;
  for (Operation *op : graph.forwardOps) {
    if (graph.freeOps.contains(op) ||
        isSelectiveCandidate(op, graph.freeOps, graph.forward))
      continue;
    for (Value result : op->getResults())
      decision.kept.insert(result);
  }
  return decision;
}

/// Whether the step casts a parameter argument (mixed precision's
/// low-precision copies).
static bool hasParamCasts(FunctionOpInterface func) {
  bool found = false;
  func.walk([&](CastOp cast) {
    auto arg = dyn_cast<BlockArgument>(cast.getInput());
    auto role = arg ? func.getArgAttrOfType<StringAttr>(
                          arg.getArgNumber(), MemoptDialect::kRoleAttrName)
                    : StringAttr();
    found |= role && role.getValue() == "param";
  });
  return found;
}

RematerializePass::Decision
RematerializePass::minimalSaved(const StepGraph &graph) {
  // One node per result of a forward op. A parameter's low-precision cast
  // (a free cast) is made once per step and read as it is, unless
  // `recastParams`; other free values (masks, bias broadcasts, constants)
  // are nodes like the rest, which cost nothing to recompute from the
  // arguments.
  Decision decision;
  DenseMap<Value, int64_t> index;
  SmallVector<Value> results;
  DenseSet<Value> residual;
  if (keepResidual)
    residual = getResidualBoundaries(graph);
  for (Operation *op : graph.forwardOps)
    for (Value result : op->getResults()) {
      if (graph.freeOps.contains(op) && isa<CastOp>(op) && !recastParams) {
        decision.kept.insert(result);
        continue;
      }
      index[result] = static_cast<int64_t>(results.size());
      results.push_back(result);
    }
  std::vector<SavedSetValue> values(results.size());
  for (auto [i, result] : llvm::enumerate(results)) {
    Operation *op = result.getDefiningOp();
    values[i].bytes = getAlignedBytes(result);
    values[i].recomputable =
        isCheapToRecompute(op) && !residual.contains(result);
    for (Value operand : op->getOperands())
      if (auto it = index.find(operand); it != index.end())
        values[i].operands.push_back(it->second);
  }
  for (Operation *op : graph.backwardOps)
    for (Value operand : op->getOperands())
      if (auto it = index.find(operand); it != index.end())
        values[it->second].readByBackward = true;
  std::vector<bool> keep = chooseSavedSet(values);
  for (auto [i, result] : llvm::enumerate(results))
    if (keep[i])
      decision.kept.insert(result);
  return decision;
}

void RematerializePass::apply(const StepGraph &graph,
                              const Decision &decision) {
  Recomputer recomputer(graph);
  for (Operation *op : graph.forwardOps) {
    // Never clone an op with side effects: the backward reads its results.
    bool pure = isRecomputable(op);
    for (Value result : op->getResults())
      if (!pure || decision.kept.contains(result))
        recomputer.available[result] = result;
  }
  recomputer.advancesBefore = decision.advancesBefore;
  recomputer.run();
  lastClones = recomputer.numClones;
  lastCloneFlops = recomputer.cloneFlops;
}

FailureOr<int64_t> RematerializePass::getPlannedArena(const BudgetPlan &plan,
                                                      bool runPlanner,
                                                      double timeLimit) {
  OwningOpRef<ModuleOp> copy(searchRoot.clone());
  FailureOr<FunctionOpInterface> func = findTrainStep(*copy, "rematerialize");
  if (failed(func))
    return failure();
  StepGraph graph;
  if (failed(graph.build(*func)))
    return failure();
  apply(graph, fromBudgetPlan(graph, plan));
  if (!runPlanner)
    return -1;
  return planArena(*copy, timeLimit);
}

FailureOr<int64_t> RematerializePass::planArena(ModuleOp module,
                                                double timeLimit) {
  // 0 s: the placer's heuristics, a bound. A copy that cannot be planned (a
  // batch the micro-batches do not divide) fails quietly: the pipeline's own
  // passes report it, once. (With the activations offloaded, every
  // candidate of a copy moves: a search of the offload's within each of
  // remat's would multiply them.)
  ++plannerChecks;
  return planCopyArena(module, planningOptions, timeLimit,
                       ActivationPlanning::All);
}

namespace {

/// The budget strategy's search (runBudget): candidate plans of the chain
/// and graph models, each checked once with the buffer planner; the fitting
/// plan of least recompute wins.
class RecomputeSearch {
public:
  using BudgetPlan = RematerializePass::BudgetPlan;

  /// The search for the plan that fits `budget` bytes of arena, with the
  /// gradient updates released into the backward when `released`.
  RecomputeSearch(RematerializePass &pass, FunctionOpInterface func,
                  const StepGraph &graph, int64_t budget, bool released);

  /// Runs the search; fitting() is then the plan, if one fits.
  LogicalResult run();
  const std::optional<BudgetPlan> &fitting() const { return best; }
  /// The smallest arena of every plan checked.
  int64_t smallestArena() const { return smallest; }

private:
  static BudgetPlan toChainPlan(const std::vector<StageChoice> &plan);
  static BudgetPlan toGraphPlan(const std::vector<bool> &keep);
  /// The model's peak of a plan (without gradients and transients).
  int64_t getModelPeak(const BudgetPlan &plan) const;
  std::optional<BudgetPlan> solveChain(int64_t bound) const;
  std::optional<BudgetPlan> solveGraph(int64_t bound) const;
  /// Plans `plan` once (its arena is then in `arenas`) and keeps it when it
  /// fits with less recompute than the best so far.
  LogicalResult consider(const BudgetPlan &plan);
  /// Tightens the model's bound by what the planner adds on top of it
  /// (gradient buffers, transients) until the planned arena fits, then
  /// gives the slack the planner left back to the model while that still
  /// fits.
  LogicalResult tighten(function_ref<std::optional<BudgetPlan>(int64_t)> solve);
  /// Blocks (recompute every stage but the last), when it recomputes less
  /// than the plan that fits or none fits.
  LogicalResult considerBlocks();
  /// No plan fits: the chain's least memory and the graph model's frontier,
  /// from keeping everything down to its least memory (the arena is not
  /// monotone in the model's peak).
  LogicalResult considerLeastMemory();
  /// No plan fits with the heuristics: the closest three planned as the
  /// pipeline's placement does by default (its exact search too).
  LogicalResult checkClosestExactly();

  RematerializePass &pass;
  int64_t budget;
  std::vector<ChainStage> chain;
  std::vector<GraphValue> values;
  bool searchGraph;
  /// The bytes of gradient buffers the model's bound starts below the budget.
  int64_t gradientBytes = 0;
  std::map<BudgetPlan, int64_t> arenas;
  std::optional<BudgetPlan> best;
  int64_t bestFlops = 0;
  int64_t smallest = std::numeric_limits<int64_t>::max();
};

} // namespace

RecomputeSearch::RecomputeSearch(RematerializePass &pass,
                                 FunctionOpInterface func,
                                 const StepGraph &graph, int64_t budget,
                                 bool released)
    : pass(pass), budget(budget), chain(graph.getNumStages()) {
  for (int64_t i = 0; i < graph.getNumStages(); ++i) {
    chain[i].inputBytes = i ? getAlignedBytes(graph.boundaries[i]) : 0;
    for (Value value : graph.savedByStage[i])
      chain[i].savedBytes += getAlignedBytes(value);
    chain[i].flops = graph.stageFlops[i];
  }
  // The general-graph model, searched exactly when it has few candidates.
  SmallVector<Operation *> valueOps;
  values = graph.getValueGraph(valueOps);
  pass.graphCandidates = llvm::count_if(values, [](const GraphValue &value) {
    return value.kind == GraphValue::Kind::Candidate;
  });
  searchGraph = pass.graphCandidates <= kMaxGraphSearchCandidates;
  // Every parameter's gradient is a scratch buffer live until the optimizer
  // update: start the model's bound below the budget by all of them, or,
  // when the updates are released into the backward, by the largest.
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role =
        func.getArgAttrOfType<StringAttr>(i, MemoptDialect::kRoleAttrName);
    if (!role || role.getValue() != "param")
      continue;
    int64_t bytes = getAlignedBytes(func.getArgument(i));
    gradientBytes =
        released ? std::max(gradientBytes, bytes) : gradientBytes + bytes;
  }
}

RecomputeSearch::BudgetPlan
RecomputeSearch::toChainPlan(const std::vector<StageChoice> &plan) {
  BudgetPlan result;
  for (StageChoice choice : plan)
    result.choices.push_back(static_cast<int>(choice));
  return result;
}

RecomputeSearch::BudgetPlan
RecomputeSearch::toGraphPlan(const std::vector<bool> &keep) {
  BudgetPlan result{/*graph=*/true, {}};
  for (bool flag : keep)
    result.choices.push_back(flag);
  return result;
}

int64_t RecomputeSearch::getModelPeak(const BudgetPlan &plan) const {
  if (plan.graph) {
    std::vector<bool> keep(plan.choices.begin(), plan.choices.end());
    return evaluateGraphPlan(values, keep)->peakBytes;
  }
  std::vector<StageChoice> stages;
  for (int choice : plan.choices)
    stages.push_back(static_cast<StageChoice>(choice));
  return evaluateChainPlan(chain, stages)->peakBytes;
}

std::optional<RecomputeSearch::BudgetPlan>
RecomputeSearch::solveChain(int64_t bound) const {
  if (auto plan = solveChainBudget(chain, bound))
    return toChainPlan(*plan);
  return std::nullopt;
}

std::optional<RecomputeSearch::BudgetPlan>
RecomputeSearch::solveGraph(int64_t bound) const {
  if (auto keep = solveGraphBudget(values, bound))
    return toGraphPlan(*keep);
  return std::nullopt;
}

LogicalResult RecomputeSearch::consider(const BudgetPlan &plan) {
  if (arenas.count(plan))
    return success();
  FailureOr<int64_t> arena = pass.getPlannedArena(plan);
  if (failed(arena))
    return failure();
  arenas[plan] = *arena;
  // The FLOPs of the clones the plan really needs (getPlannedArena applied
  // it), not the model's estimate.
  int64_t flops = pass.lastCloneFlops;
  LLVM_DEBUG(llvm::dbgs() << "budget: " << (plan.graph ? "graph" : "chain")
                          << " plan with " << flops
                          << " recompute FLOPs -> arena " << *arena << "\n");
  if (*arena <= budget && (!best || flops < bestFlops))
    best = plan, bestFlops = flops;
  return success();
}

LogicalResult RecomputeSearch::tighten(
    function_ref<std::optional<BudgetPlan>(int64_t)> solve) {
  std::optional<BudgetPlan> found;
  int64_t bound = std::max<int64_t>(budget - gradientBytes, 0);
  for (int attempt = 0; attempt < 12; ++attempt) {
    std::optional<BudgetPlan> plan = solve(bound);
    if (!plan || arenas.count(*plan))
      break;
    if (failed(consider(*plan)))
      return failure();
    if (arenas[*plan] <= budget) {
      found = plan;
      break;
    }
    int64_t model = getModelPeak(*plan);
    bound = std::min(bound - 256, budget - (arenas[*plan] - model));
  }
  // The gradient estimate is pessimistic: give the slack back (a few more
  // checks at most).
  for (int attempt = 0; found && attempt < 4; ++attempt) {
    int64_t slack = budget - arenas[*found];
    if (slack < 256)
      break;
    bound += slack;
    std::optional<BudgetPlan> plan = solve(bound);
    if (!plan || arenas.count(*plan))
      continue;
    if (failed(consider(*plan)))
      return failure();
    if (arenas[*plan] <= budget)
      found = plan;
    else
      bound -= (arenas[*plan] - budget) + slack / 2;
  }
  return success();
}

LogicalResult RecomputeSearch::considerBlocks() {
  std::vector<StageChoice> blocks(chain.size(), StageChoice::Checkpoint);
  blocks.back() = StageChoice::Keep;
  // Nothing to count when it was checked already.
  if (arenas.count(toChainPlan(blocks)))
    return success();
  if (failed(pass.getPlannedArena(toChainPlan(blocks), /*runPlanner=*/false)))
    return failure();
  if (!best || pass.lastCloneFlops < bestFlops)
    return consider(toChainPlan(blocks));
  return success();
}

LogicalResult RecomputeSearch::considerLeastMemory() {
  std::optional<std::vector<StageChoice>> leastMemory =
      solveChainBudget(chain, getMinimumChainPeak(chain));
  if (leastMemory && failed(consider(toChainPlan(*leastMemory))))
    return failure();
  // Each plan of least recompute below the previous one's model peak (16 at
  // most).
  std::optional<BudgetPlan> step =
      searchGraph ? solveGraph(std::numeric_limits<int64_t>::max())
                  : std::nullopt;
  for (int checks = 0; step && checks < 16; ++checks) {
    if (failed(consider(*step)))
      return failure();
    step = solveGraph(getModelPeak(*step) - 1);
  }
  return success();
}

LogicalResult RecomputeSearch::checkClosestExactly() {
  std::vector<std::pair<int64_t, BudgetPlan>> closest;
  for (const auto &[plan, arena] : arenas)
    closest.emplace_back(arena, plan);
  llvm::sort(closest,
             [](const auto &a, const auto &b) { return a.first < b.first; });
  closest.resize(std::min<size_t>(closest.size(), 3));
  for (const auto &[heuristic, plan] : closest) {
    FailureOr<int64_t> arena =
        pass.getPlannedArena(plan, /*runPlanner=*/true, kExactCheckSeconds);
    if (failed(arena))
      return failure();
    smallest = std::min(smallest, *arena);
    if (*arena <= budget && (!best || pass.lastCloneFlops < bestFlops))
      best = plan, bestFlops = pass.lastCloneFlops;
  }
  return success();
}

LogicalResult RecomputeSearch::run() {
  auto chainModel = [&](int64_t bound) { return solveChain(bound); };
  auto graphModel = [&](int64_t bound) { return solveGraph(bound); };
  // Keeping everything first: when it fits, nothing needs recomputing (the
  // model, which sees the whole batch, would recompute under a micro-batch
  // loop that shrinks every activation K-fold). Blocks and the least-memory
  // plans are candidates too: the model may misjudge either.
  std::vector<StageChoice> keepAll(chain.size(), StageChoice::Keep);
  if (failed(consider(toChainPlan(keepAll))))
    return failure();
  if (!best && failed(tighten(chainModel)))
    return failure();
  if ((!best || bestFlops > 0) && searchGraph && failed(tighten(graphModel)))
    return failure();
  if (failed(considerBlocks()))
    return failure();
  if (!best && failed(considerLeastMemory()))
    return failure();
  // The heuristics bound the final plan, which also searches exactly and can
  // be smaller: before giving up, plan the closest candidates exactly.
  for (const auto &entry : arenas)
    smallest = std::min(smallest, entry.second);
  if (!best)
    return checkClosestExactly();
  return success();
}

LogicalResult RematerializePass::runBudget(FunctionOpInterface func,
                                           StepGraph &graph) {
  RecomputeSearch search(*this, func, graph, budget,
                         /*released=*/planningOptions->microBatches == 1 &&
                             planningOptions->dataParallel == 1 &&
                             planningOptions->releaseGradients &&
                             (planningOptions->clipGradNorm <= 0 ||
                              planningOptions->clipStrategy == "recompute"));
  if (failed(search.run()))
    return failure();
  if (!search.fitting())
    return func.emitOpError()
           << "--memopt-remat: the budget of " << budget.getValue()
           << " bytes is below the smallest reachable peak, "
           << search.smallestArena()
           << " bytes (planned arena with the least memory remat finds)";
  chosenPlan = *search.fitting();
  applyBudgetPlan(graph, *search.fitting());
  return success();
}

void RematerializePass::applyBudgetPlan(const StepGraph &graph,
                                        const BudgetPlan &plan) {
  Decision decision = fromBudgetPlan(graph, plan);
  lastRecomputedStages = decision.recomputedStages;
  budgetSearch = plan.graph ? "graph" : "chain";
  apply(graph, decision);
}

bool memopt::isRematStrategy(StringRef strategy) {
  return llvm::is_contained(kRematStrategies, strategy);
}

std::string memopt::listRematStrategies() {
  std::string list;
  for (auto [index, name] : llvm::enumerate(kRematStrategies)) {
    if (index > 0)
      list += index + 1 == std::size(kRematStrategies) ? " or " : ", ";
    list += name;
  }
  return list;
}

RematerializePass::Decision
RematerializePass::chooseDecision(const StepGraph &graph, StringRef kind,
                                  int64_t *slots) {
  int64_t n = graph.getNumStages();
  if (kind == "none")
    return Decision();
  if (kind == "selective")
    return selective(graph);
  if (kind == "blocks")
    return fromSchedule(graph, buildBlocksSchedule(n));
  if (kind == "sqrt")
    return fromSchedule(graph, buildSqrtSchedule(n));
  *slots = snapshots ? snapshots.getValue() : getLogarithmicSnapshots(n);
  return fromSchedule(graph, buildRevolveSchedule(n, *slots));
}

LogicalResult RematerializePass::rewriteStep(ModuleOp target, StringRef kind,
                                             bool minimal, int64_t *slots) {
  FailureOr<FunctionOpInterface> func = findTrainStep(target, "rematerialize");
  if (failed(func))
    return failure();
  StepGraph graph;
  if (failed(graph.build(*func)))
    return failure();
  if (minimal) {
    apply(graph, minimalSaved(graph));
    cheapClones = lastClones;
    cheapFlops = lastCloneFlops;
    numCheapRecomputedOps = cheapClones;
    graph = StepGraph();
    if (failed(graph.build(*func)))
      return failure();
  }
  lastClones = lastCloneFlops = 0;
  if (kind == "none")
    return success();
  Decision decision = chooseDecision(graph, kind, slots);
  lastRecomputedStages = decision.recomputedStages;
  apply(graph, decision);
  return success();
}

FailureOr<int64_t> RematerializePass::planStrategy(StringRef kind,
                                                   bool minimal) {
  OwningOpRef<ModuleOp> copy(getOperation().clone());
  int64_t slots = 0;
  if (failed(rewriteStep(*copy, kind, minimal, &slots)))
    return failure();
  return planArena(*copy, 0);
}

LogicalResult RematerializePass::runBudgetOn(ModuleOp target, bool minimal) {
  int64_t slots = 0;
  if (minimal && failed(rewriteStep(target, "none", /*minimal=*/true, &slots)))
    return failure();
  FailureOr<FunctionOpInterface> func = findTrainStep(target, "rematerialize");
  StepGraph graph;
  if (failed(func) || failed(graph.build(*func)))
    return failure();
  searchRoot = target;
  return runBudget(*func, graph);
}

bool RematerializePass::chooseMinimalForm(FunctionOpInterface func,
                                          StringRef kind) {
  // The strategy (for budget: none, the search's starting point) runs on
  // copies, from the minimal saved set and from the step as it is, and the
  // one that plans the smaller arena (the minimal saved set on a tie) is
  // applied; with the activations offloaded, the minimal saved set. Its
  // recompute shortens lifetimes, but its transients, or a strategy's recompute
  // of stages around it, can raise a peak. The minimal saved set has up to four
  // forms: keeping each parameter's low-precision copy from the forward (under
  // mixed precision) or casting it again in the backward, and keeping a
  // residual stream's values or rebuilding them from the blocks' outputs (the
  // fewest bytes kept); the smallest plan decides, keeping on a tie (no
  // recompute for nothing).
  StringRef compared = kind == "budget" ? StringRef("none") : kind;
  bool planned = true;
  std::optional<int64_t> best;
  bool bestRecast = false, bestResidual = true;
  bool paramCasts = hasParamCasts(func);
  for (bool residual : {true, false})
    for (bool recast : {false, true}) {
      if (recast && !paramCasts)
        continue;
      recastParams = recast;
      keepResidual = residual;
      FailureOr<int64_t> arena = planStrategy(compared, /*minimal=*/true);
      planned &= succeeded(arena);
      LLVM_DEBUG(if (succeeded(arena)) llvm::dbgs()
                 << "remat " << compared << " from the minimal saved set"
                 << (recast ? ", casting parameters again" : "")
                 << (residual ? "" : ", rebuilding residual streams")
                 << ": arena " << *arena << "\n");
      if (succeeded(arena) && (!best || *arena < *best)) {
        best = *arena;
        bestRecast = recast;
        bestResidual = residual;
      }
    }
  // When the copies cannot be planned (a batch the micro-batches do not
  // divide): the minimal saved set's first form, and the pipeline's own
  // passes say what is wrong.
  recastParams = planned && bestRecast;
  keepResidual = !planned || bestResidual;
  // With the saved values in host memory, what is saved crosses the host
  // link twice a step: the fewest bytes saved wins.
  std::optional<OffloadChoice> offload = parseOffload(planningOptions->offload);
  if (!planned || (offload && offload->activations))
    return true;
  FailureOr<int64_t> without = planStrategy(compared, /*minimal=*/false);
  LLVM_DEBUG(if (succeeded(without)) llvm::dbgs()
             << "remat " << compared << ": arena " << *without << "\n");
  return failed(without) || *best <= *without;
}

FailureOr<std::shared_ptr<const PlanningPipelineOptions>>
RematerializePass::getPlanningOptions() const {
  if (planningOptions && planningText.empty())
    return planningOptions;
  auto options = std::make_shared<PlanningPipelineOptions>();
  // After remat alone, memopt-opt runs the passes its user names.
  options->releaseGradients = false;
  options->overlapTransfers = false;
  if (failed(options->parseFromString(planningText)))
    return failure();
  return std::shared_ptr<const PlanningPipelineOptions>(std::move(options));
}

std::unique_ptr<Pass> memopt::createRematerializePass(
    const RematerializePassOptions &options,
    std::shared_ptr<const PlanningPipelineOptions> planning) {
  auto pass = std::make_unique<RematerializePass>(options);
  pass->planningOptions = std::move(planning);
  return pass;
}

void RematerializePass::runOnOperation() {
  StringRef kind = strategy;
  ModuleOp module = getOperation();
  if (!isRematStrategy(kind)) {
    module.emitError() << "--memopt-remat: unknown strategy '" << kind
                       << "' (expected " << listRematStrategies() << ")";
    return signalPassFailure();
  }
  if (budget < 0) {
    module.emitError() << "--memopt-remat: budget must be a non-negative "
                          "number of bytes, got "
                       << budget.getValue();
    return signalPassFailure();
  }
  if (snapshots < 0) {
    module.emitError() << "--memopt-remat: snapshots must be >= 0 (0: the "
                          "logarithmic choice), got "
                       << snapshots.getValue();
    return signalPassFailure();
  }
  if (kind == "budget" && budget == 0) {
    module.emitError()
        << "--memopt-remat: strategy=budget needs budget=<bytes>";
    return signalPassFailure();
  }
  if (kind == "auto")
    kind = budget > 0 ? "budget" : "none";
  if (kind == "none" && !cheapRecompute)
    return markAllAnalysesPreserved();
  FailureOr<std::shared_ptr<const PlanningPipelineOptions>> planning =
      getPlanningOptions();
  if (failed(planning)) {
    module.emitError() << "--memopt-remat: invalid planning='"
                       << planningText.getValue() << "'";
    return signalPassFailure();
  }
  planningOptions = *planning;

  FailureOr<FunctionOpInterface> func = findTrainStep(module, "rematerialize");
  if (failed(func))
    return signalPassFailure();
  StepGraph graph;
  if (failed(graph.build(*func)))
    return signalPassFailure();
  numStages = graph.getNumStages();
  forwardFlops = graph.forwardFlops;
  LLVM_DEBUG({
    llvm::dbgs() << "remat: " << graph.getNumStages() << " stages\n";
    for (auto [i, boundary] : llvm::enumerate(graph.boundaries))
      if (boundary)
        llvm::dbgs() << "  boundary " << i << ": " << boundary << "\n";
  });
  int64_t n = graph.getNumStages();
  int64_t slots = 0;
  // Account first (chooseMinimalForm): from the minimal saved set, in its
  // best form, or from the step as it is.
  bool minimal = cheapRecompute && chooseMinimalForm(*func, kind);
  cheapClones = cheapFlops = 0;
  if (kind == "budget") {
    // From the minimal saved set first, on a copy: the search cannot undo
    // it, and a smaller arena may only be reachable from the step as it is
    // (a chain strategy's recompute without it). Quietly; on failure the
    // search runs again from the step as it is, and reports.
    bool done = false;
    if (minimal) {
      OwningOpRef<ModuleOp> copy(module.clone());
      LogicalResult searched = failure();
      {
        ScopedDiagnosticHandler quiet(module.getContext(),
                                      [](Diagnostic &) { return success(); });
        searched = runBudgetOn(*copy, /*minimal=*/true);
      }
      // The same rewrite and plan on the step itself (both deterministic).
      if (succeeded(searched)) {
        if (failed(rewriteStep(module, "none", /*minimal=*/true, &slots)))
          return signalPassFailure();
        graph = StepGraph();
        if (failed(graph.build(*func)))
          return signalPassFailure();
        applyBudgetPlan(graph, chosenPlan);
        done = true;
      }
    }
    if (!done) {
      cheapClones = cheapFlops = 0;
      if (failed(runBudgetOn(module, /*minimal=*/false)))
        return signalPassFailure();
    }
  } else if (failed(rewriteStep(module, kind, minimal, &slots))) {
    return signalPassFailure();
  }
  if (kind == "none") {
    recomputeFlops = cheapFlops;
    if (printSummary)
      llvm::errs() << "remat: strategy=none cheap_recomputed_ops="
                   << cheapClones << " recompute_flops=" << cheapFlops << "\n";
    return;
  }
  recomputedStages = lastRecomputedStages;
  numRecomputedOps = lastClones;
  recomputeFlops = addFlops(cheapFlops, lastCloneFlops);
  if (printSummary)
    llvm::errs() << "remat: strategy=" << kind << " stages=" << n
                 << " snapshots=" << slots
                 << " recomputed_stages=" << lastRecomputedStages
                 << " recomputed_ops=" << lastClones
                 << " recompute_flops=" << lastCloneFlops
                 << " forward_flops=" << graph.forwardFlops;
  if (printSummary && kind == "budget") {
    llvm::errs() << " graph_candidates=" << graphCandidates;
    if (graphCandidates > kMaxGraphSearchCandidates)
      llvm::errs() << " (over " << kMaxGraphSearchCandidates
                   << ": chain dynamic program only)";
    llvm::errs() << " plan=" << budgetSearch;
  }
  if (printSummary && cheapRecompute)
    llvm::errs() << " cheap_recomputed_ops=" << cheapClones;
  if (printSummary)
    llvm::errs() << "\n";
}
