//===- EvalStep.cpp - the evaluation step from the loss function ----------===//
//
// Rewrites the module's `memopt.loss` function into `@eval_step`: what
// `model.eval(); with torch.no_grad(): loss = model(x, y)` computes.
//
//  - Dropout is the identity: `memopt.dropout` is replaced by its input and
//    `memopt.attention` gets `dropout_p` 0.
//  - Batch norm normalises with the running statistics, as PyTorch's
//    inference kernel does: per channel `scale = weight / sqrt(var + eps)`
//    and `shift = bias - mean * scale`, then `x * scale + shift` in f32;
//    the running statistics are read, never updated.
//  - No backward and no update: the function returns the loss and then
//    each parameter, state and optimizer argument itself, the step
//    contract of --memopt-bufferize with nothing updated, so the planning
//    passes compile it as they compile `@train_step`, into an arena of its
//    own with no saved activations.
//
// Run it after --memopt-fuse-kernels and --memopt-mixed-precision (the
// forward's kernels and dtypes are the training step's), in a module of its
// own: memopt-compile compiles a copy of the input for the evaluation step.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace memopt {
#define GEN_PASS_DEF_EVALSTEPPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct EvalStepPass : public memopt::impl::EvalStepPassBase<EvalStepPass> {
  using Base::Base;

  void runOnOperation() override;
};
} // namespace

/// `batchNorm` in inference mode; returns false (after an error) when its
/// batch statistics are read.
static bool replaceWithInference(BatchNormOp batchNorm) {
  if (!batchNorm.getMean().use_empty() || !batchNorm.getRstd().use_empty()) {
    batchNorm.emitOpError() << "has its batch statistics read: the "
                               "evaluation step has no backward to read them";
    return false;
  }
  OpBuilder b(batchNorm);
  Location loc = batchNorm.getLoc();
  auto channelType = cast<RankedTensorType>(batchNorm.getWeight().getType());
  Value shifted = AddScalarOp::create(b, loc, channelType,
                                      batchNorm.getRunningVar(),
                                      batchNorm.getEpsilonAttr());
  Value invStd = RsqrtOp::create(b, loc, channelType, shifted);
  Value scale =
      MulOp::create(b, loc, channelType, batchNorm.getWeight(), invStd);
  Value centre =
      MulOp::create(b, loc, channelType, batchNorm.getRunningMean(), scale);
  Value shift =
      SubOp::create(b, loc, channelType, batchNorm.getBias(), centre);
  Value input = batchNorm.getInput();
  auto resultType = cast<RankedTensorType>(batchNorm.getResult().getType());
  auto wide = resultType.clone(b.getF32Type());
  if (cast<RankedTensorType>(input.getType()) != wide)
    input = CastOp::create(b, loc, wide, input);
  DenseI64ArrayAttr channels = b.getDenseI64ArrayAttr({1});
  Value y = MulOp::create(b, loc, wide, input,
                          BroadcastOp::create(b, loc, wide, scale, channels));
  y = AddOp::create(b, loc, wide, y,
                    BroadcastOp::create(b, loc, wide, shift, channels));
  if (wide != resultType)
    y = CastOp::create(b, loc, resultType, y);
  // The new ops belong to the batch norm's module scope.
  if (Attribute scope = batchNorm->getAttr(MemoptDialect::kScopeAttrName))
    for (Operation *op = shifted.getDefiningOp(); op != batchNorm;
         op = op->getNextNode())
      op->setAttr(MemoptDialect::kScopeAttrName, scope);
  batchNorm.getResult().replaceAllUsesWith(y);
  batchNorm.getNewRunningMean().replaceAllUsesWith(batchNorm.getRunningMean());
  batchNorm.getNewRunningVar().replaceAllUsesWith(batchNorm.getRunningVar());
  batchNorm.erase();
  return true;
}

void EvalStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp loss;
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(MemoptDialect::kLossAttrName) && !func.isExternal())
      loss = func;
  if (!loss) {
    module.emitError() << "no function marked 'memopt.loss' to build the "
                          "evaluation step from";
    return signalPassFailure();
  }

  SmallVector<Operation *> ops;
  loss.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops) {
    if (auto dropout = dyn_cast<DropoutOp>(op)) {
      dropout.getResult().replaceAllUsesWith(dropout.getInput());
      dropout.erase();
    } else if (auto attention = dyn_cast<AttentionOp>(op)) {
      attention.setDropoutPAttr(
          Builder(attention).getF64FloatAttr(0.0));
    } else if (auto batchNorm = dyn_cast<BatchNormOp>(op)) {
      if (!replaceWithInference(batchNorm))
        return signalPassFailure();
    }
  }

  // The step contract with nothing updated: the loss, then every argument
  // that a training step would update, unchanged.
  // (A loss function that returns its state's new values after the loss
  // now returns the state arguments themselves.)
  Block &body = loss.getBody().front();
  Operation *terminator = body.getTerminator();
  terminator->eraseOperands(1, terminator->getNumOperands() - 1);
  for (BlockArgument arg : body.getArguments()) {
    auto role = loss.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  MemoptDialect::kRoleAttrName);
    std::optional<ArgumentRole> kind =
        role ? symbolizeArgumentRole(role.getValue()) : std::nullopt;
    if (kind == ArgumentRole::Param || kind == ArgumentRole::State ||
        kind == ArgumentRole::Optim || kind == ArgumentRole::ParamCopy)
      terminator->insertOperands(terminator->getNumOperands(), arg);
  }
  loss.setType(FunctionType::get(loss.getContext(), body.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  for (StringRef name :
       {MemoptDialect::kLossAttrName, MemoptDialect::kLossScaleAttrName,
        MemoptDialect::kOptimizerAttrName})
    loss->removeAttr(name);
  loss->setAttr(MemoptDialect::kEvalStepAttrName, UnitAttr::get(&getContext()));
  loss.setName("eval_step");
}
