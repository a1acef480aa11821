//===- OffloadActivations.cpp - saved activations in host memory ----------===//
//
// The alternative to recomputing an activation (docs/Offload.md): the
// device copies it to the host once the forward is done with it and copies
// it back when the backward needs it, so it takes no device memory in
// between.
//
// On the tensor-level @train_step (after --memopt-remat, before
// --memopt-accumulate), with the forward and backward of remat's StepGraph,
// the candidates are the forward values that read the step's data (not a
// weight's cast or another free value) and that a backward op reads. Each
// one moved gets
//
//   %h = memopt.transfer %v to host      after its last forward reader
//   %d = memopt.transfer %h to device    before its first backward reader
//
// and every backward reader reads %d. What remat recomputes is not saved
// and stays as it is. A value whose first backward reader comes before its
// last forward one (an interleaved step) is left on the device. The copies
// move bytes, so the step computes what it computed before, bit for bit.
//
// Without a budget every candidate moves. With one, the fewest candidates,
// largest first, whose move plans the device arena within it: a binary
// search over how many, each count checked by planning a copy of the step
// with the passes after this one (as --memopt-remat checks its candidates),
// assuming that moving more never plans a larger arena. When even moving
// every candidate does not fit, every candidate moves.
//
// Linear in the size of the step, times log2(candidates) + 1 plans with a
// budget.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "RematGraph.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

namespace memopt {
#define GEN_PASS_DEF_OFFLOADACTIVATIONSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {

/// A saved value that may move, and where its copies go.
struct Candidate {
  Value value;
  Operation *lastForward = nullptr;
  Operation *firstBackward = nullptr;
  SmallVector<OpOperand *> backwardUses;
  int64_t bytes = 0;
};

struct OffloadActivationsPass
    : public memopt::impl::OffloadActivationsPassBase<OffloadActivationsPass> {
  using Base::Base;

  void runOnOperation() override;

  /// The planned device arena of a copy of the module with the first
  /// `count` candidates of the size order moved.
  FailureOr<int64_t> planWith(size_t count);

  /// The passes after this one, as the pipeline runs them (bufferization
  /// and planning alone for memopt-opt).
  std::shared_ptr<const PlanningPipelineOptions> planningOptions;
};

} // namespace

/// `op`'s ancestor in `body`.
static Operation *getTopLevel(Operation *op, Block *body) {
  while (op && op->getBlock() != body)
    op = op->getParentOp();
  return op;
}

/// The candidates of the step in `module`, in program order.
static FailureOr<SmallVector<Candidate>> findCandidates(ModuleOp module) {
  FailureOr<FunctionOpInterface> func =
      findTrainStep(module, "offload activations");
  if (failed(func))
    return failure();
  // In the micro-batch loop the forward and the backward are one op.
  for (Operation &op : func->getFunctionBody().front())
    if (isa<scf::ForOp>(op))
      return op.emitOpError()
             << "holds the step's forward and backward: run "
                "--memopt-offload-activations before --memopt-accumulate";
  remat::StepGraph graph;
  if (failed(graph.build(*func)))
    return failure();

  DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(graph.body->without_terminator()))
    position[&op] = index;
  SmallVector<Candidate> candidates;
  for (Operation *def : graph.forwardOps) {
    if (graph.freeOps.contains(def))
      continue;
    for (Value value : def->getResults()) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type || !graph.readByBackward.contains(value))
        continue;
      Candidate candidate{value, def};
      for (OpOperand &use : value.getUses()) {
        Operation *user = getTopLevel(use.getOwner(), graph.body);
        if (!user || user == graph.body->getTerminator())
          continue;
        if (graph.forward.contains(user)) {
          if (position[user] > position[candidate.lastForward])
            candidate.lastForward = user;
          continue;
        }
        candidate.backwardUses.push_back(&use);
        if (!candidate.firstBackward ||
            position[user] < position[candidate.firstBackward])
          candidate.firstBackward = user;
      }
      if (!candidate.firstBackward ||
          position[candidate.firstBackward] < position[candidate.lastForward])
        continue;
      candidate.bytes = getCopyBytes(type);
      candidates.push_back(std::move(candidate));
    }
  }
  return candidates;
}

/// Indices of `candidates`, largest first, then in program order.
static SmallVector<unsigned> orderBySize(ArrayRef<Candidate> candidates) {
  SmallVector<unsigned> order(candidates.size());
  for (unsigned i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    return candidates[a].bytes > candidates[b].bytes;
  });
  return order;
}

/// A transfer of `value` to `to`, with `scope`'s scope.
static Value createTransfer(OpBuilder &b, Value value, MemoryKind to,
                            Operation *scope) {
  auto op = TransferOp::create(b, value.getLoc(), value,
                               MemoryKindAttr::get(b.getContext(), to));
  if (Attribute attr = scope->getAttr(MemoptDialect::kScopeAttrName))
    op->setAttr(MemoptDialect::kScopeAttrName, attr);
  return op;
}

/// Moves the first `count` of `candidates` in `order` to the host and back.
static void moveToHost(MutableArrayRef<Candidate> candidates,
                       ArrayRef<unsigned> order, size_t count) {
  if (candidates.empty())
    return;
  OpBuilder b(candidates.front().value.getContext());
  for (unsigned index : order.take_front(count)) {
    Candidate &candidate = candidates[index];
    b.setInsertionPointAfter(candidate.lastForward);
    Value onHost = createTransfer(b, candidate.value, MemoryKind::Host,
                                  candidate.value.getDefiningOp());
    b.setInsertionPoint(candidate.firstBackward);
    Value back =
        createTransfer(b, onHost, MemoryKind::Device, candidate.firstBackward);
    for (OpOperand *use : candidate.backwardUses)
      use->set(back);
  }
}

FailureOr<int64_t> OffloadActivationsPass::planWith(size_t count) {
  OwningOpRef<ModuleOp> copy(getOperation().clone());
  // A copy that cannot be planned fails quietly: the pipeline's own passes
  // report it, once, on the step itself.
  ScopedDiagnosticHandler quiet(copy->getContext(),
                                [](Diagnostic &) { return success(); });
  FailureOr<SmallVector<Candidate>> candidates = findCandidates(*copy);
  if (failed(candidates))
    return failure();
  moveToHost(*candidates, orderBySize(*candidates), count);
  // The passes after this one; 0 s: the placer's heuristics, as remat's
  // checks.
  std::shared_ptr<const PlanningPipelineOptions> after = planningOptions;
  if (!after) {
    auto alone = std::make_shared<PlanningPipelineOptions>();
    alone->releaseGradients = false;
    alone->overlapTransfers = false;
    after = std::move(alone);
  }
  return planCopyArena(*copy, after, /*placementSeconds=*/0.0,
                       ActivationPlanning::Skipped);
}

void OffloadActivationsPass::runOnOperation() {
  if (budget < 0) {
    getOperation().emitError()
        << "--memopt-offload-activations: budget must be a non-negative "
           "number of bytes, got "
        << budget.getValue();
    return signalPassFailure();
  }
  FailureOr<SmallVector<Candidate>> candidates = findCandidates(getOperation());
  if (failed(candidates))
    return signalPassFailure();
  SmallVector<unsigned> order = orderBySize(*candidates);
  size_t count = candidates->size();
  if (budget > 0) {
    auto fits = [&](size_t moved) {
      FailureOr<int64_t> arena = planWith(moved);
      return succeeded(arena) && *arena <= budget;
    };
    // The fewest that fit; every one when none do.
    if (fits(count)) {
      size_t low = 0;
      while (low < count) {
        size_t middle = low + (count - low) / 2;
        if (fits(middle))
          count = middle;
        else
          low = middle + 1;
      }
    }
  }
  moveToHost(*candidates, order, count);
}

std::unique_ptr<Pass> memopt::createOffloadActivationsPass(
    const OffloadActivationsPassOptions &options,
    std::shared_ptr<const PlanningPipelineOptions> planning) {
  auto pass = std::make_unique<OffloadActivationsPass>(options);
  pass->planningOptions = std::move(planning);
  return pass;
}
