//===- ReleaseGradients.cpp - optimizer updates inside the backward -------===//
//
// Moves each parameter's optimizer update (`memopt.adamw_update`,
// `memopt.sgd_update`) of `@train_step` from the end of the step to the
// earliest point where it computes the same thing, so that the gradient's
// buffer dies there instead of living until every gradient exists (the
// optimizer-in-backward of PyTorch's hooks and of LOMO). An update may run
// once
//
//  1. every operand is computed: its gradient is complete (the last add of
//     its contributions), and the step counter is incremented; and
//  2. nothing else reads the parameter's old value any more: the update's
//     result is written over the parameter's buffer by bufferization, so
//     every other reader of the parameter (the backward's matmuls, casts,
//     remat clones) and of a reshape of it (a view of the same buffer) must
//     come first.
//
// The update then follows the latest of those ops. The step counter's
// `memopt.increment`, which reads only the counter, moves right before the
// earliest update. Each update computes exactly what it computed at the end of the
// step (its operands are the same values), so the parameters are
// bit-identical to the ordinary step's.
//
// The step is left as it is when it updates under a loss scale
// (`memopt.unscale`, or `skip_if` on the updates): dynamic loss scaling
// decides to skip the whole step only once every gradient is known to be
// finite, so no update may run before the last gradient. With gradient
// accumulation the gradients are sums over the micro-batch loop, complete
// only after it: --memopt-accumulate runs after this pass, and memopt-compile
// applies it with one micro-batch only.
//
// Linear in the size of the body.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace memopt {
#define GEN_PASS_DEF_RELEASEGRADIENTSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct ReleaseGradientsPass
    : public memopt::impl::ReleaseGradientsPassBase<ReleaseGradientsPass> {
  using Base::Base;

  void runOnOperation() override;
};
} // namespace

/// The later of `a` and `b` in `block` (either may be null).
static Operation *later(Operation *a, Operation *b) {
  if (!a || !b)
    return a ? a : b;
  return a->isBeforeInBlock(b) ? b : a;
}

/// The op of `block` that must precede `update`: the latest definition of
/// its operands and the latest other reader of its parameter or of a view
/// of it. Null when nothing must.
static Operation *getEarliestPredecessor(Operation *update, Block &block) {
  Operation *latest = nullptr;
  for (Value operand : update->getOperands())
    if (Operation *def = operand.getDefiningOp())
      latest = later(latest, block.findAncestorOpInBlock(*def));
  SmallVector<Value> readers = {update->getOperand(0)};
  while (!readers.empty()) {
    for (Operation *user : readers.pop_back_val().getUsers()) {
      if (user == update)
        continue;
      latest = later(latest, block.findAncestorOpInBlock(*user));
      if (isa<ReshapeOp>(user))
        readers.push_back(user->getResult(0));
    }
  }
  return latest;
}

void ReleaseGradientsPass::runOnOperation() {
  FailureOr<FunctionOpInterface> step =
      findTrainStep(getOperation(), "release the gradients of");
  if (failed(step))
    return signalPassFailure();
  Block &block = step->getFunctionBody().front();

  SmallVector<Operation *> updates;
  IncrementOp increment;
  for (Operation &op : block) {
    if (isa<UnscaleOp, scf::ForOp>(op))
      return; // Loss scaling or accumulation: see the header.
    if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
      if (adamw.getSkip())
        return;
      updates.push_back(&op);
    } else if (auto sgd = dyn_cast<SgdUpdateOp>(op)) {
      if (sgd.getSkip())
        return;
      updates.push_back(&op);
    } else if (auto inc = dyn_cast<IncrementOp>(op)) {
      increment = inc;
    }
  }
  // The counter reads only its argument: out of the way first, then right
  // before the earliest update.
  if (increment)
    increment->moveBefore(&block.front());
  Operation *earliest = nullptr;
  for (Operation *update : updates) {
    Operation *predecessor = getEarliestPredecessor(update, block);
    if (predecessor)
      update->moveAfter(predecessor);
    else
      update->moveBefore(&block.front());
    if (!earliest || update->isBeforeInBlock(earliest))
      earliest = update;
    ++numReleased;
  }
  if (increment && earliest)
    increment->moveBefore(earliest);
}
