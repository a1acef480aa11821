//===- ClipGradients.cpp - global-norm gradient clipping ------------------===//
//
// `torch.nn.utils.clip_grad_norm_(trained parameters, max_norm)` between the
// backward and the optimizer updates of `@train_step`, computed as PyTorch
// computes it:
//
//   norm = sqrt(sum over the updates' gradients g of sum(g * g))
//   coef = min(1, (1 / (norm + 1e-6)) * max_norm)      (f32, as its tensors)
//   g   *= coef                                        before each update
//
// The gradients are the operands of the updates, so the pass composes with
// whatever ran before it: under loss scaling they are the unscaled ones (the
// unscale_ -> clip -> step order of GradScaler; a non-finite gradient still
// skips the step through `found_inf`), with the micro-batch loop the sums
// over the whole batch, with data parallelism every rank's sum, and under
// ZeRO each rank's shards, whose partial sums of squares are added over the
// ranks. The norm is returned as the new value of an f32 optim argument,
// `optimizer.grad_norm`, for the driver to print.
//
// Strategy `recompute` keeps gradient release exact: the ops that compute
// the gradients and nothing the forward returns are cloned, as one block,
// after the last value they read from the forward; each clone of a gradient
// is reduced to its sum of squares where it is made, so it dies there. The
// coefficient then exists before the original backward starts, and each
// update can follow its own gradient (--memopt-release-gradients). The
// clones compute the same bits as the originals, so both strategies clip
// by the same coefficient.
//
// Linear in the size of the step.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Support/ByteSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>

namespace memopt {
#define GEN_PASS_DEF_CLIPGRADIENTSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct ClipGradientsPass
    : public memopt::impl::ClipGradientsPassBase<ClipGradientsPass> {
  using Base::Base;

  void runOnOperation() override;
};
} // namespace

/// The gradient operand of an optimizer update.
static OpOperand &getGradOperand(Operation *update) {
  return update->getOpOperand(1); // param, grad, ... for both updates
}

/// Whether `update` carries a loss-scaling skip.
static bool isSkippable(Operation *update) {
  if (auto adamw = dyn_cast<AdamWUpdateOp>(update))
    return bool(adamw.getSkip());
  return bool(cast<SgdUpdateOp>(update).getSkip());
}

/// The ops of `block` that `roots` depend on, themselves included.
static DenseSet<Operation *> getAncestors(Block &block, ArrayRef<Value> roots) {
  DenseSet<Operation *> ancestors;
  SmallVector<Value> worklist(roots);
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !(def = block.findAncestorOpInBlock(*def)) ||
        !ancestors.insert(def).second)
      continue;
    def->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        worklist.push_back(operand);
    });
  }
  return ancestors;
}

/// Strategy `recompute`: clones the ops that compute the gradients of
/// `updates` (and nothing that the forward returns) after the last value
/// they read, and returns each gradient's clone (the gradient itself when
/// the forward computes it).
static SmallVector<Value> cloneBackward(Block &block, ArrayRef<Operation *> updates,
                                        int64_t &numCloned) {
  SmallVector<Value> grads = llvm::map_to_vector(
      updates, [](Operation *u) { return getGradOperand(u).get(); });
  // The forward: what the loss and the returned state (batch norm's running
  // statistics) depend on; the updates' own results are the backward's.
  SmallVector<Value> forwardRoots;
  for (Value returned : block.getTerminator()->getOperands()) {
    Operation *def = returned.getDefiningOp();
    if (def && !isa<AdamWUpdateOp, SgdUpdateOp, IncrementOp>(def))
      forwardRoots.push_back(returned);
  }
  DenseSet<Operation *> forward = getAncestors(block, forwardRoots);
  DenseSet<Operation *> backward = getAncestors(block, grads);
  SmallVector<Operation *> cloned;
  Operation *lastRead = nullptr;
  for (Operation &op : block) {
    if (!backward.contains(&op) || forward.contains(&op))
      continue;
    cloned.push_back(&op);
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && (def = block.findAncestorOpInBlock(*def)) &&
          (!backward.contains(def) || forward.contains(def)) &&
          (!lastRead || lastRead->isBeforeInBlock(def)))
        lastRead = def;
    }
  }
  numCloned = cloned.size();
  OpBuilder b(block.getParentOp()->getContext());
  if (lastRead)
    b.setInsertionPointAfter(lastRead);
  else
    b.setInsertionPointToStart(&block);
  IRMapping mapping;
  for (Operation *op : cloned)
    b.clone(*op, mapping);
  return llvm::map_to_vector(
      grads, [&](Value g) { return mapping.lookupOrDefault(g); });
}

void ClipGradientsPass::runOnOperation() {
  FailureOr<FunctionOpInterface> found =
      findTrainStep(getOperation(), "clip the gradients of");
  if (failed(found))
    return signalPassFailure();
  auto func = dyn_cast<func::FuncOp>(found->getOperation());
  if (!func)
    return signalPassFailure();
  if (!(maxNorm > 0) || !std::isfinite(maxNorm)) {
    func.emitOpError() << "cannot clip the gradients to a norm of "
                       << formatNumber(maxNorm)
                       << ": the largest norm must be a positive number";
    return signalPassFailure();
  }
  bool recompute = strategy == "recompute";
  if (!recompute && strategy != "keep") {
    func.emitOpError() << "unknown clipping strategy '" << strategy
                       << "' (expected keep or recompute)";
    return signalPassFailure();
  }
  Block &block = func.getBody().front();
  SmallVector<Operation *> updates;
  bool sharded = false, looped = false, scaled = false;
  for (Operation &op : block) {
    looped |= isa<scf::ForOp>(op);
    scaled |= isa<UnscaleOp>(op);
    if (!isa<AdamWUpdateOp, SgdUpdateOp>(op))
      continue;
    updates.push_back(&op);
    scaled |= isSkippable(&op);
    // ZeRO: the update reads the rank's slice of the parameter, or its
    // sharded master (an argument marked memopt.shard_of).
    auto arg = dyn_cast<BlockArgument>(op.getOperand(0));
    sharded |= bool(op.getOperand(0).getDefiningOp<shard::AllSliceOp>()) ||
               (arg && func.getArgAttr(arg.getArgNumber(),
                                       MemoptDialect::kShardOfAttrName));
  }
  if (updates.empty()) {
    func.emitOpError() << "has no optimizer update: there is no gradient to "
                          "clip (every parameter is frozen)";
    return signalPassFailure();
  }
  if (recompute && (looped || scaled)) {
    func.emitOpError()
        << "cannot recompute the backward for clipping: the step "
        << (looped ? "accumulates micro-batches or ranks"
                   : "skips updates under loss scaling")
        << ", so its updates wait for every gradient anyway (use "
           "strategy keep)";
    return signalPassFailure();
  }

  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  Location loc = func.getLoc();
  auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
  SmallVector<Value> normed;
  if (recompute) {
    int64_t numCloned = 0;
    normed = cloneBackward(block, updates, numCloned);
    numRecomputed = numCloned;
  } else
    normed = llvm::map_to_vector(
        updates, [](Operation *u) { return getGradOperand(u).get(); });

  // Each gradient's sum of squares where it is made; the coefficient after
  // the last of them.
  SmallVector<Value> squares;
  Operation *last = nullptr;
  for (Value g : normed) {
    if (Operation *def = g.getDefiningOp())
      b.setInsertionPointAfter(block.findAncestorOpInBlock(*def));
    else
      b.setInsertionPointToStart(&block);
    auto type = cast<RankedTensorType>(g.getType());
    auto dims = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    auto sum = ReduceSumSquaresOp::create(b, loc, scalar, g,
                                          b.getDenseI64ArrayAttr(dims));
    squares.push_back(sum);
    if (!last || last->isBeforeInBlock(sum))
      last = sum;
  }
  b.setInsertionPointAfter(last);
  Value total = squares.front();
  for (Value sum : ArrayRef<Value>(squares).drop_front())
    total = AddOp::create(b, loc, scalar, total, sum);
  if (sharded)
    total = shard::AllReduceOp::create(b, loc, total, kRanksGridName,
                                       ArrayRef<shard::GridAxis>{0},
                                       shard::ReductionKind::Sum)
                .getResult();
  Value norm = SqrtOp::create(b, loc, scalar, total);
  Value shifted =
      AddScalarOp::create(b, loc, scalar, norm, b.getF64FloatAttr(1e-6));
  Value one = ConstantOp::create(
      b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(1.0)));
  Value inverse = DivOp::create(b, loc, scalar, one, shifted);
  Value unclamped =
      MulScalarOp::create(b, loc, scalar, inverse, b.getF64FloatAttr(maxNorm));
  auto coef = ClampOp::create(b, loc, scalar, unclamped, FloatAttr(),
                              b.getF64FloatAttr(1.0), b.getBoolAttr(true));

  for (Operation *update : updates) {
    OpOperand &grad = getGradOperand(update);
    if (update->isBeforeInBlock(coef)) {
      update->emitOpError() << "runs before the last gradient: clip the "
                               "gradients before releasing them";
      return signalPassFailure();
    }
    Operation *def = grad.get().getDefiningOp();
    def = def ? block.findAncestorOpInBlock(*def) : nullptr;
    b.setInsertionPointAfter(def && coef->isBeforeInBlock(def) ? def
                                                               : coef.getOperation());
    grad.set(ScaleByOp::create(b, loc, grad.get().getType(), grad.get(), coef));
    ++numClipped;
  }

  // The norm, returned as the new value of `optimizer.grad_norm`.
  NamedAttribute attrs[] = {
      b.getNamedAttr(MemoptDialect::kRoleAttrName,
                     b.getStringAttr(stringifyArgumentRole(ArgumentRole::Optim))),
      b.getNamedAttr(MemoptDialect::kNameAttrName,
                     b.getStringAttr("optimizer.grad_norm"))};
  unsigned index = func.getNumArguments();
  if (failed(func.insertArgument(index, scalar, b.getDictionaryAttr(attrs),
                                 loc))) {
    func.emitOpError() << "cannot add the 'optimizer.grad_norm' argument";
    return signalPassFailure();
  }
  Operation *terminator = block.getTerminator();
  terminator->insertOperands(terminator->getNumOperands(), norm);
  SmallVector<Type> results(func.getResultTypes());
  results.push_back(scalar);
  func.setType(FunctionType::get(ctx, block.getArgumentTypes(), results));
}
