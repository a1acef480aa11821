//===- OffloadActivations.cpp - saved activations in host memory ----------===//
//
// The alternative to recomputing an activation (docs/Offload.md): the
// device copies it to the host once the forward is done with it and copies
// it back when the backward needs it, so it takes no device memory in
// between.
//
// On the tensor-level @train_step (after --memopt-remat, before
// --memopt-accumulate), with the forward and backward of remat's StepGraph:
// every forward value that reads the step's data (not a weight's cast or
// another free value) and that a backward op reads gets
//
//   %h = memopt.transfer %v to host      after its last forward reader
//   %d = memopt.transfer %h to device    before its first backward reader
//
// and every backward reader reads %d. What remat recomputes is not saved
// and stays as it is; what it keeps goes to the host. A value whose first
// backward reader comes before its last forward one (an interleaved step)
// is left on the device. The copies move bytes, so the step computes what it
// computed before, bit for bit.
//
// Linear in the size of the step.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "RematGraph.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace memopt {
#define GEN_PASS_DEF_OFFLOADACTIVATIONSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct OffloadActivationsPass
    : public memopt::impl::OffloadActivationsPassBase<OffloadActivationsPass> {
  using Base::Base;

  void runOnOperation() override;
};
} // namespace

/// `op`'s ancestor in `body`.
static Operation *getTopLevel(Operation *op, Block *body) {
  while (op && op->getBlock() != body)
    op = op->getParentOp();
  return op;
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

void OffloadActivationsPass::runOnOperation() {
  FailureOr<FunctionOpInterface> func =
      findTrainStep(getOperation(), "offload activations");
  if (failed(func))
    return signalPassFailure();
  // In the micro-batch loop the forward and the backward are one op.
  for (Operation &op : func->getFunctionBody().front())
    if (isa<scf::ForOp>(op)) {
      op.emitOpError() << "holds the step's forward and backward: run "
                          "--memopt-offload-activations before "
                          "--memopt-accumulate";
      return signalPassFailure();
    }
  remat::StepGraph graph;
  if (failed(graph.build(*func)))
    return signalPassFailure();

  DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(graph.body->without_terminator()))
    position[&op] = index;
  OpBuilder b(func->getContext());
  // In program order, so that the IR does not depend on hashing.
  for (Operation *def : graph.forwardOps) {
    if (graph.freeOps.contains(def))
      continue;
    for (Value value : def->getResults()) {
      if (!graph.readByBackward.contains(value) ||
          !isa<RankedTensorType>(value.getType()))
        continue;
      Operation *lastForward = def, *firstBackward = nullptr;
      SmallVector<OpOperand *> backwardUses;
      for (OpOperand &use : value.getUses()) {
        Operation *user = getTopLevel(use.getOwner(), graph.body);
        if (!user || user == graph.body->getTerminator())
          continue;
        if (graph.forward.contains(user)) {
          if (position[user] > position[lastForward])
            lastForward = user;
          continue;
        }
        backwardUses.push_back(&use);
        if (!firstBackward || position[user] < position[firstBackward])
          firstBackward = user;
      }
      if (!firstBackward || position[firstBackward] < position[lastForward])
        continue;
      b.setInsertionPointAfter(lastForward);
      Value onHost = createTransfer(b, value, MemoryKind::Host, def);
      b.setInsertionPoint(firstBackward);
      Value back = createTransfer(b, onHost, MemoryKind::Device, firstBackward);
      for (OpOperand *use : backwardUses)
        use->set(back);
    }
  }
}
