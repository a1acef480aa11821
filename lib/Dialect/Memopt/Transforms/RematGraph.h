//===- RematGraph.h - the step graph that remat rewrites --------*- C++ -*-===//
//
// The forward graph of the tensor-level @train_step cut into a chain of
// stages (steps 1 and 2 of Rematerialize.cpp), the rewrite that clones
// forward producers into the backward (step 4), and the facts about ops both
// use. Private to lib/Dialect/Memopt/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_REMATGRAPH_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_REMATGRAPH_H

#include "memopt/Remat/RematSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace memopt::remat {

/// a + b for FLOP counts, which saturate (CostModel) rather than overflow.
int64_t addFlops(int64_t a, int64_t b);

/// Bytes of a statically shaped tensor, rounded up to the planner's 256-byte
/// alignment; 0 when unknown.
int64_t getAlignedBytes(mlir::Value value);

/// Ops the rewrite may clone: no memory effects, no regions, some result.
bool isRecomputable(mlir::Operation *op);

/// Ops the minimal saved set may recompute in the backward: every op the
/// rewrite can clone but the FLOP-heavy ones, whose recompute the user
/// chooses with a strategy.
bool isCheapToRecompute(mlir::Operation *op);

/// Ops the selective strategy recomputes: cheap per element, or the
/// attention score product (a matmul of two activations).
bool isSelectiveCandidate(mlir::Operation *op,
                          const mlir::DenseSet<mlir::Operation *> &freeOps,
                          const mlir::DenseSet<mlir::Operation *> &forward);

/// The forward graph of @train_step and its chain of stages.
struct StepGraph {
  mlir::Block *body = nullptr;
  /// Forward ops, in program order, and as a set.
  mlir::SmallVector<mlir::Operation *> forwardOps;
  mlir::DenseSet<mlir::Operation *> forward;
  /// Forward ops that read no input or label.
  mlir::DenseSet<mlir::Operation *> freeOps;
  /// Backward and optimizer ops, in program order (not the terminator).
  mlir::SmallVector<mlir::Operation *> backwardOps;
  /// stageOf[op] for every non-free forward op.
  mlir::DenseMap<mlir::Operation *, int64_t> stageOf;
  /// boundaries[i]: the value entering stage i (null for stage 0).
  mlir::SmallVector<mlir::Value> boundaries;
  /// i for boundaries[i].
  mlir::DenseMap<mlir::Value, int64_t> boundaryIndex;
  /// Forward values the backward reads.
  mlir::DenseSet<mlir::Value> readByBackward;
  /// Forward values the backward reads, by stage (non-free only).
  mlir::SmallVector<mlir::SmallVector<mlir::Value>> savedByStage;
  /// FLOPs of each stage's ops.
  mlir::SmallVector<int64_t> stageFlops;
  int64_t forwardFlops = 0;

  int64_t getNumStages() const {
    return static_cast<int64_t>(boundaries.size());
  }
  bool isForwardValue(mlir::Value v) const {
    mlir::Operation *def = v.getDefiningOp();
    return def && forward.contains(def);
  }

  /// Splits the step of `func` into forward and backward, and the forward's
  /// non-free ops into stages.
  mlir::LogicalResult build(mlir::FunctionOpInterface func);

  /// The forward as the general-graph search sees it: one value per non-free
  /// forward op, in program order (`ops`), with backward read positions;
  /// values the backward reads are candidates, ops with side effects are
  /// kept, other values are recomputed when needed.
  std::vector<GraphValue>
  getValueGraph(mlir::SmallVectorImpl<mlir::Operation *> &ops) const;

private:
  /// The ops the loss and the new "state" values depend on (`forward`).
  void findForward(mlir::FunctionOpInterface func);
  /// Splits the body into forwardOps and backwardOps, and marks the forward
  /// ops that read no input or label (directly or through other ops) free.
  void classifyOps(mlir::FunctionOpInterface func);
  /// Cuts the chain of non-free forward ops into stages at the gaps crossed
  /// by exactly one value (stageOf, boundaries).
  void cutStages();
  /// What each stage saves for the backward, and its FLOPs.
  void measureStages();
};

/// The stage boundaries that cheap ops compute from the previous boundary: a
/// residual stream (x + f(x) after each block). One form of the minimal
/// saved set keeps these: rebuilding the stream's last value from the
/// blocks' outputs recomputes every block's sum at the start of the
/// backward, each held until its own block's gradient reads it, which can
/// plan more than keeping them.
mlir::DenseSet<mlir::Value> getResidualBoundaries(const StepGraph &graph);

/// Clones forward producers into the backward on demand.
class Recomputer {
public:
  explicit Recomputer(const StepGraph &graph) : graph(graph) {}

  /// Forward values the backward reads directly.
  mlir::DenseMap<mlir::Value, mlir::Value> available;
  /// (from, to) boundary advances to run before each turn.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> advancesBefore;
  int64_t numClones = 0;
  int64_t cloneFlops = 0;

  /// Rewrites every backward operand that is a forward value not available.
  void run();

private:
  /// Runs the advances of every turn from `nextTurn` down to `stage`.
  void startTurns(int64_t stage, mlir::OpBuilder &builder);
  mlir::Value
  lookup(mlir::Value value,
         const mlir::DenseMap<mlir::Value, mlir::Value> &cache) const;
  /// A value equal to forward value `value` at the builder's point: cloned
  /// producers in post-order, recorded in `cache`.
  mlir::Value materialize(mlir::Value value,
                          mlir::DenseMap<mlir::Value, mlir::Value> &cache,
                          mlir::OpBuilder &builder);

  const StepGraph &graph;
  int64_t nextTurn = 0;
};

} // namespace memopt::remat

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_REMATGRAPH_H
