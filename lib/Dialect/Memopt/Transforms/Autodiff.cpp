//===- Autodiff.cpp - derive the training step ----------------------------===//
//
// Reverse-mode automatic differentiation of the module's loss function into
// one `@train_step` (docs/Pipeline.md, section 1).
//
// 1. Clone the forward ops into the new function.
// 2. Activity analysis, one forward sweep: a value is varied when it depends
//    on a parameter. Only varied values receive gradients.
// 3. Reverse sweep from d(loss) = 1: each op with a gradient on a result and
//    a varied operand builds its vector-Jacobian product through
//    DifferentiableOpInterface; the gradients of a value used several times
//    are summed. Backward ops carry the scope of the forward op they
//    differentiate.
// 4. Increment the step counter and update each parameter with AdamW or SGD.
//    With loss scaling (`memopt.loss_scale` on the loss function, set by
//    --memopt-mixed-precision), the reverse sweep starts from d(loss) =
//    scale, the parameters' gradients are unscaled and checked together
//    (memopt.unscale), every update and the increment are skipped when one is
//    not finite, and a dynamic scale is updated (memopt.update_scale), with
//    the semantics of PyTorch's GradScaler.
// 5. Remove ops whose results feed nothing (e.g. the gradient of an input).
//
// Linear in the number of ops. Follows the classic tape-free formulation of
// reverse mode on SSA (as in JAX's transpose of the linearised program).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Support/ByteSize.h"
#include "memopt/Support/ModelState.h"
#include "memopt/runtime/QuantizeMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Debug.h"


#define DEBUG_TYPE "memopt-autodiff"

namespace memopt {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {

/// One parameter's optimizer hyper-parameters: the pass options, or those of
/// its parameter group (`memopt.hparams`, as the exporter records a
/// torch.optim optimizer's groups).
struct Hyperparameters {
  double lr, beta1, beta2, eps, weightDecay, momentum;

  /// Overrides the values `hparams` names; reports an unknown name, or one
  /// that `kind` does not use, through `error`.
  LogicalResult override(DictionaryAttr hparams, OptimizerKind kind,
                         function_ref<InFlightDiagnostic()> error);
  /// Checks the ranges; reports the first value out of range through
  /// `error`, naming it as `what` followed by its name.
  LogicalResult verify(OptimizerKind kind, StringRef what,
                       function_ref<InFlightDiagnostic()> error) const;
};

struct AutodiffPass : public memopt::impl::AutodiffPassBase<AutodiffPass> {
  using Base::Base;

  void runOnOperation() override;

  /// The pass options as hyper-parameters.
  Hyperparameters getOptions() const {
    return {lr, beta1, beta2, eps, weightDecay, momentum};
  }
  /// Bits per moment element (32, or 8 for AdamW).
  unsigned getStateBits() const { return stateBits; }
};

} // namespace

LogicalResult
Hyperparameters::override(DictionaryAttr hparams, OptimizerKind kind,
                          function_ref<InFlightDiagnostic()> error) {
  bool adamw = kind == OptimizerKind::AdamW;
  for (NamedAttribute entry : hparams) {
    StringRef name = entry.getName().getValue();
    double *slot = llvm::StringSwitch<double *>(name)
                       .Case("lr", &lr)
                       .Case("weight_decay", &weightDecay)
                       .Case("beta1", adamw ? &beta1 : nullptr)
                       .Case("beta2", adamw ? &beta2 : nullptr)
                       .Case("eps", adamw ? &eps : nullptr)
                       .Case("momentum", adamw ? nullptr : &momentum)
                       .Default(nullptr);
    auto value = dyn_cast<FloatAttr>(entry.getValue());
    if (!slot || !value)
      return error() << "'" << MemoptDialect::kHparamsAttrName << "' entry '"
                     << name << "' is not a hyper-parameter of "
                     << (adamw ? "adamw" : "sgd")
                     << " with a float value (expected lr, weight_decay and "
                     << (adamw ? "beta1, beta2, eps" : "momentum") << ")";
    *slot = value.getValueAsDouble();
  }
  return success();
}

LogicalResult
Hyperparameters::verify(OptimizerKind kind, StringRef what,
                        function_ref<InFlightDiagnostic()> error) const {
  auto bad = [&](StringRef name, double value, StringRef range) {
    return error() << what << name << "' is " << formatNumber(value)
                   << ", expected " << range;
  };
  if (!(lr >= 0.0))
    return bad("lr", lr, ">= 0");
  if (!(weightDecay >= 0.0))
    return bad("weight-decay", weightDecay, ">= 0");
  if (kind == OptimizerKind::AdamW) {
    if (!(beta1 >= 0.0 && beta1 < 1.0))
      return bad("beta1", beta1, "in [0, 1)");
    if (!(beta2 >= 0.0 && beta2 < 1.0))
      return bad("beta2", beta2, "in [0, 1)");
    if (!(eps > 0.0 && eps < 1.0))
      return bad("eps", eps, "in (0, 1)");
  } else if (!(momentum >= 0.0)) {
    return bad("momentum", momentum, ">= 0");
  }
  return success();
}

/// The `kind` update of `param` by `grad` with hyper-parameters `h` and its
/// optimizer state `slots` at optimizer step `step`, skipped when `skip`
/// (loss scaling's overflow flag, null without) is set.
static Operation *buildUpdate(OpBuilder &b, Location loc, OptimizerKind kind,
                              const Hyperparameters &h, Value param,
                              Value grad, ValueRange slots, Value step,
                              Value skip) {
  Type type = param.getType();
  if (kind == OptimizerKind::AdamW)
    return AdamWUpdateOp::create(
        b, loc, type, slots[0].getType(), slots[1].getType(), param, grad,
        slots[0], slots[1], step, skip,
        b.getF64FloatAttr(h.lr), b.getF64FloatAttr(h.beta1),
        b.getF64FloatAttr(h.beta2), b.getF64FloatAttr(h.eps),
        b.getF64FloatAttr(h.weightDecay));
  return SgdUpdateOp::create(b, loc, type, type, param, grad, slots[0], skip,
                             b.getF64FloatAttr(h.lr),
                             b.getF64FloatAttr(h.momentum),
                             b.getF64FloatAttr(h.weightDecay));
}

/// Returns the role of argument `index` of `func`, if it has one.
static std::optional<ArgumentRole> roleOf(FunctionOpInterface func,
                                          unsigned index) {
  auto role =
      func.getArgAttrOfType<StringAttr>(index, MemoptDialect::kRoleAttrName);
  if (!role)
    return std::nullopt;
  return symbolizeArgumentRole(role.getValue());
}

/// The train step's arguments: the loss function's, then the optimizer
/// state ("optim"): each parameter's slots, the step counter and, with a
/// dynamic loss scale, the scale and its growth tracker.
struct StepSignature {
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  /// The "param" arguments, and the names of each one's state slots.
  SmallVector<unsigned> params;
  SmallVector<StringRef> slotNames;
  unsigned stepIndex = 0;
  /// The loss scale's argument (its growth tracker's is the next); 0 when
  /// the scale is not dynamic.
  unsigned scaleIndex = 0;
};

static StepSignature buildSignature(func::FuncOp loss, OptimizerKind kind,
                                    unsigned stateBits, bool dynamicScale) {
  Builder b(loss.getContext());
  StepSignature signature;
  signature.argTypes.assign(loss.getArgumentTypes().begin(),
                            loss.getArgumentTypes().end());
  for (unsigned i = 0; i < loss.getNumArguments(); ++i)
    signature.argAttrs.push_back(loss.getArgAttrDict(i));
  auto optimArg = [&](Type type, const Twine &name) {
    signature.argTypes.push_back(type);
    signature.argAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr(MemoptDialect::kRoleAttrName, b.getStringAttr("optim")),
         b.getNamedAttr(MemoptDialect::kNameAttrName,
                        b.getStringAttr(name))}));
  };
  for (unsigned i = 0; i < loss.getNumArguments(); ++i)
    if (roleOf(loss, i) == ArgumentRole::Param)
      signature.params.push_back(i);
  if (kind == OptimizerKind::AdamW)
    signature.slotNames = {"exp_avg", "exp_avg_sq"};
  else
    signature.slotNames = {"momentum_buffer"};
  for (unsigned p : signature.params) {
    StringRef name =
        loss.getArgAttrOfType<StringAttr>(p, MemoptDialect::kNameAttrName)
            .getValue();
    // 8-bit moments: the packed bytes of QuantizeMath.h, for parameters
    // large enough that the blocks pay.
    Type stateType = signature.argTypes[p];
    int64_t n = cast<RankedTensorType>(stateType).getNumElements();
    if (stateBits == 8 && n >= runtime::kQuantMinElements)
      stateType = RankedTensorType::get({runtime::quantizedStateBytes(n)},
                                        b.getIntegerType(8));
    for (StringRef slot : signature.slotNames)
      optimArg(stateType, "optimizer." + name + "." + slot);
  }
  auto stepType = RankedTensorType::get({}, b.getI64Type());
  signature.stepIndex = signature.argTypes.size();
  optimArg(stepType, "optimizer.step");
  if (dynamicScale) {
    signature.scaleIndex = signature.argTypes.size();
    optimArg(RankedTensorType::get({}, b.getF32Type()),
             "optimizer.loss_scale");
    optimArg(stepType, "optimizer.growth_tracker");
  }
  return signature;
}

/// The one function marked `memopt.loss` of `module`: one block of memopt
/// ops. Reports why not otherwise.
static FailureOr<func::FuncOp> findLossFunction(ModuleOp module) {
  FailureOr<FunctionOpInterface> found =
      memopt::findLossFunction(module, "--memopt-autodiff");
  if (failed(found))
    return failure();
  auto loss = dyn_cast<func::FuncOp>(found->getOperation());
  if (!loss)
    return found->emitError() << "is not a func.func";
  if (!llvm::hasSingleElement(loss.getBody()))
    return loss.emitError() << "cannot differentiate a loss function with "
                               "control flow (more than one block)";
  for (Operation &op : loss.getBody().front().without_terminator())
    if (!isa<MemoptDialect>(op.getDialect()))
      return op.emitError()
             << "cannot differentiate '" << op.getName()
             << "': only memopt ops may appear in a loss function";
  return loss;
}

/// Runs the forward's vector-Jacobian products in reverse order at the end
/// of `b`'s block, accumulating into `grads` (seeded with the loss's) the
/// gradient of every `varied` value; each backward op takes its forward
/// op's scope. Counts the ops built in `gradientOps`.
static LogicalResult buildReverseSweep(OpBuilder &b,
                                       ArrayRef<Operation *> forwardOps,
                                       const DenseSet<Value> &varied,
                                       DenseMap<Value, Value> &grads,
                                       unsigned &gradientOps) {
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults())
      resultGrads.push_back(grads.lookup(result));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }) ||
        llvm::none_of(op->getOperands(),
                      [&](Value v) { return varied.contains(v); }))
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable) {
      op->emitError() << "'" << op->getName()
                      << "' is not differentiable, but the loss depends on "
                         "it through a parameter";
      return failure();
    }
    Operation *last = &b.getInsertionBlock()->back();
    SmallVector<Value> operandGrads;
    // On failure the op has reported why.
    if (failed(differentiable.buildVectorJacobianProduct(b, resultGrads,
                                                         operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands()) {
      op->emitError() << "the gradient of '" << op->getName() << "' has "
                      << operandGrads.size() << " operand gradients, expected "
                      << op->getNumOperands();
      return failure();
    }
    // Backward ops speak in the forward op's scope.
    Attribute scope = op->getAttr(MemoptDialect::kScopeAttrName);
    for (Operation *it = last->getNextNode(); it; it = it->getNextNode()) {
      ++gradientOps;
      if (scope)
        it->setAttr(MemoptDialect::kScopeAttrName, scope);
    }
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!grad || !varied.contains(operand))
        continue;
      Value &sum = grads[operand];
      if (!sum) {
        sum = grad;
        continue;
      }
      sum = AddOp::create(b, op->getLoc(), sum.getType(), sum, grad);
      ++gradientOps;
      if (scope)
        sum.getDefiningOp()->setAttr(MemoptDialect::kScopeAttrName, scope);
    }
  }
  return success();
}

namespace {

/// The training step built from the loss function `loss`, in the order of
/// runOnOperation's steps; each method appends to the step's entry block.
class TrainStepBuilder {
public:
  TrainStepBuilder(AutodiffPass &pass, func::FuncOp loss, OptimizerKind kind,
                   std::optional<LossScaleConfig> lossScale);

  /// Each parameter's hyper-parameters: the pass options, overridden by its
  /// `memopt.hparams`; checks that the loss function's `memopt.optimizer`,
  /// if any, is the pass's optimizer.
  LogicalResult readHyperparameters();
  /// Creates `train_step` with the signature, results and attributes.
  void createStep();
  /// 1. Clones the forward into the step.
  void cloneForward();
  /// 2-3. Seeds the loss's gradient (the scale under loss scaling) and
  /// sweeps the forward in reverse over the values the parameters vary.
  LogicalResult differentiate(unsigned &gradientOps);
  /// 4. Unscales and checks the gradients, counts the step and updates each
  /// parameter and its optimizer state, then the dynamic loss scale.
  void updateParameters();
  /// Returns the loss and the new arguments; 5. removes what feeds nothing
  /// (gradients of inputs and labels).
  void finish();

private:
  /// The role of argument `i` of the step: the forward's, then the
  /// optimizer state's.
  std::optional<ArgumentRole> roleOfArgument(unsigned i) {
    return i < numForwardArgs ? roleOf(loss, i) : ArgumentRole::Optim;
  }
  Value argument(unsigned i) { return entry->getArgument(i); }
  void updateLossScale();

  AutodiffPass &pass;
  func::FuncOp loss;
  OptimizerKind kind;
  std::optional<LossScaleConfig> lossScale;
  OpBuilder b;
  Location loc;
  unsigned numForwardArgs;
  StepSignature signature;
  Block *entry = nullptr;
  SmallVector<Operation *> forwardOps;
  Value lossValue;
  /// The forward's new values of the "state" arguments.
  SmallVector<Value> newState;
  DenseMap<Value, Value> grads;
  /// The loss scale (null without loss scaling) and the overflow flag of
  /// the unscaled gradients (null without a gradient to check).
  Value scale, foundInf;
  /// Argument index -> its new value.
  DenseMap<unsigned, Value> updated;
  /// Parameter argument index -> its hyper-parameters.
  DenseMap<unsigned, Hyperparameters> hyperparameters;
};

} // namespace

TrainStepBuilder::TrainStepBuilder(AutodiffPass &pass, func::FuncOp loss,
                                   OptimizerKind kind,
                                   std::optional<LossScaleConfig> lossScale)
    : pass(pass), loss(loss), kind(kind), lossScale(lossScale), b(loss),
      loc(loss.getLoc()), numForwardArgs(loss.getNumArguments()),
      signature(buildSignature(loss, kind, pass.getStateBits(),
                               lossScale && lossScale->dynamic)) {}

LogicalResult TrainStepBuilder::readHyperparameters() {
  StringRef optimizer = kind == OptimizerKind::AdamW ? "adamw" : "sgd";
  if (auto recorded = loss->getAttrOfType<StringAttr>(
          MemoptDialect::kOptimizerAttrName);
      recorded && recorded.getValue() != optimizer)
    return loss.emitOpError()
           << "was exported for the optimizer '" << recorded.getValue()
           << "' (" << MemoptDialect::kOptimizerAttrName
           << "), but the step is built for '" << optimizer << "'";
  for (unsigned p : signature.params) {
    Hyperparameters h = pass.getOptions();
    auto error = [&] {
      return loss.emitOpError() << "parameter '"
                                << loss.getArgAttrOfType<StringAttr>(
                                       p, MemoptDialect::kNameAttrName)
                                       .getValue()
                                << "': ";
    };
    if (auto hparams = loss.getArgAttrOfType<DictionaryAttr>(
            p, MemoptDialect::kHparamsAttrName)) {
      if (failed(h.override(hparams, kind, error)) ||
          failed(h.verify(kind, "hyper-parameter '", error)))
        return failure();
    }
    hyperparameters[p] = h;
  }
  return success();
}

void TrainStepBuilder::createStep() {
  // Results: the loss, then the new value of every param, state and optim
  // argument in argument order.
  ArrayRef<Type> argTypes = signature.argTypes;
  SmallVector<Type> resultTypes = {loss.getResultTypes().front()};
  for (unsigned i = 0; i < argTypes.size(); ++i) {
    std::optional<ArgumentRole> role = roleOfArgument(i);
    if (role == ArgumentRole::Param || role == ArgumentRole::State ||
        role == ArgumentRole::Optim)
      resultTypes.push_back(argTypes[i]);
  }
  auto step = func::FuncOp::create(b, loc, "train_step",
                                   b.getFunctionType(argTypes, resultTypes));
  step.setAllArgAttrs(signature.argAttrs);
  step->setAttr(MemoptDialect::kTrainStepAttrName, b.getUnitAttr());
  if (lossScale)
    step->setAttr(MemoptDialect::kLossScaleAttrName,
                  loss->getAttr(MemoptDialect::kLossScaleAttrName));
  entry = step.addEntryBlock();
  b.setInsertionPointToEnd(entry);
}

void TrainStepBuilder::cloneForward() {
  IRMapping map;
  for (unsigned i = 0; i < numForwardArgs; ++i)
    map.map(loss.getArgument(i), argument(i));
  Block &forwardBody = loss.getBody().front();
  for (Operation &op : forwardBody.without_terminator())
    forwardOps.push_back(b.clone(op, map));
  auto forwardReturn = cast<func::ReturnOp>(forwardBody.getTerminator());
  lossValue = map.lookup(forwardReturn.getOperand(0));
  for (Value v : forwardReturn.getOperands().drop_front())
    newState.push_back(map.lookup(v));
}

LogicalResult TrainStepBuilder::differentiate(unsigned &gradientOps) {
  // Activity analysis: the values the parameters vary.
  DenseSet<Value> varied;
  for (unsigned p : signature.params)
    varied.insert(argument(p));
  for (Operation *op : forwardOps)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      varied.insert(op->result_begin(), op->result_end());

  // d(scale * loss) / d(loss) = scale: the seed of a scaled backward.
  auto scaleType = RankedTensorType::get({}, b.getF32Type());
  if (lossScale && lossScale->dynamic)
    scale = argument(signature.scaleIndex);
  else if (lossScale)
    scale = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(scaleType, b.getF32FloatAttr(lossScale->scale)));
  auto one = DenseElementsAttr::get(cast<ShapedType>(lossValue.getType()),
                                    b.getF32FloatAttr(1.0));
  grads[lossValue] = scale ? scale : ConstantOp::create(b, loc, one);
  return buildReverseSweep(b, forwardOps, varied, grads, gradientOps);
}

void TrainStepBuilder::updateParameters() {
  ArrayRef<unsigned> params = signature.params;
  ArrayRef<StringRef> slotNames = signature.slotNames;
  if (scale) {
    SmallVector<unsigned> withGrad;
    SmallVector<Value> scaled;
    for (unsigned p : params)
      if (Value g = grads.lookup(argument(p))) {
        withGrad.push_back(p);
        scaled.push_back(g);
      }
    if (!scaled.empty()) {
      auto unscale = UnscaleOp::create(b, loc, scale, scaled);
      for (auto [p, g] : llvm::zip(withGrad, unscale.getResults()))
        grads[argument(p)] = g;
      foundInf = unscale.getFoundInf();
    }
  }
  auto stepType = RankedTensorType::get({}, b.getI64Type());
  Value newStep = IncrementOp::create(b, loc, stepType,
                                      argument(signature.stepIndex), foundInf);
  unsigned slot = numForwardArgs;
  for (unsigned p : params) {
    Value param = argument(p);
    Value grad = grads.lookup(param);
    if (!grad) {
      // No gradient reaches it: as torch.optim with a None gradient, the
      // parameter and its optimizer state stay as they are (no weight
      // decay either).
      updated[p] = param;
      for (unsigned i = 0; i < slotNames.size(); ++i)
        updated[slot + i] = argument(slot + i);
      slot += slotNames.size();
      continue;
    }
    Attribute scope;
    if (Operation *use = param.use_empty() ? nullptr : *param.user_begin())
      scope = use->getAttr(MemoptDialect::kScopeAttrName);
    Operation *update = buildUpdate(
        b, loc, kind, hyperparameters[p], param, grad,
        entry->getArguments().slice(slot, slotNames.size()), newStep, foundInf);
    if (scope)
      update->setAttr(MemoptDialect::kScopeAttrName, scope);
    updated[p] = update->getResult(0);
    for (unsigned i = 0; i < slotNames.size(); ++i)
      updated[slot + i] = update->getResult(1 + i);
    slot += slotNames.size();
  }
  updated[signature.stepIndex] = newStep;
  if (lossScale && lossScale->dynamic)
    updateLossScale();
}

void TrainStepBuilder::updateLossScale() {
  unsigned scaleIndex = signature.scaleIndex;
  Value tracker = argument(scaleIndex + 1);
  if (!foundInf) // no gradient to check: nothing can overflow
    foundInf = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, b.getI1Type()),
                               false));
  auto update =
      UpdateScaleOp::create(b, loc, scale, tracker, foundInf,
                            b.getF64FloatAttr(lossScale->growthFactor),
                            b.getF64FloatAttr(lossScale->backoffFactor),
                            b.getI64IntegerAttr(lossScale->growthInterval));
  updated[scaleIndex] = update.getNewScale();
  updated[scaleIndex + 1] = update.getNewGrowthTracker();
}

void TrainStepBuilder::finish() {
  SmallVector<Value> results = {lossValue};
  unsigned stateIndex = 0;
  for (unsigned i = 0; i < signature.argTypes.size(); ++i) {
    std::optional<ArgumentRole> role = roleOfArgument(i);
    if (role == ArgumentRole::State)
      results.push_back(newState[stateIndex++]);
    else if (role == ArgumentRole::Param || role == ArgumentRole::Optim)
      results.push_back(updated.lookup(i));
  }
  func::ReturnOp::create(b, loc, results);
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  std::optional<OptimizerKind> kind = parseOptimizerKind(optimizer);
  if (!kind) {
    emitError(module.getLoc())
        << "unknown optimizer '" << optimizer
        << "' for --memopt-autodiff (expected adamw or sgd)";
    return signalPassFailure();
  }
  if (failed(getOptions().verify(*kind, "--memopt-autodiff option '", [&] {
        return emitError(module.getLoc());
      })))
    return signalPassFailure();
  if (stateBits != 32 && (stateBits != 8 || *kind != OptimizerKind::AdamW)) {
    emitError(module.getLoc())
        << "--memopt-autodiff option 'state-bits' is " << getStateBits()
        << ", expected 32, or 8 with adamw";
    return signalPassFailure();
  }

  FailureOr<func::FuncOp> found = findLossFunction(module);
  if (failed(found))
    return signalPassFailure();
  func::FuncOp loss = *found;

  // Loss scaling: a dynamic scale and its growth tracker are optimizer state.
  std::optional<LossScaleConfig> lossScale;
  if (Attribute attr = loss->getAttr(MemoptDialect::kLossScaleAttrName)) {
    FailureOr<LossScaleConfig> config =
        parseLossScaleAttr(attr, [&] { return loss.emitOpError(); });
    if (failed(config))
      return signalPassFailure();
    lossScale = *config;
  }

  TrainStepBuilder step(*this, loss, *kind, lossScale);
  if (failed(step.readHyperparameters()))
    return signalPassFailure();
  step.createStep();
  step.cloneForward();
  unsigned gradientOps = 0;
  if (failed(step.differentiate(gradientOps)))
    return signalPassFailure();
  step.updateParameters();
  step.finish();
  numGradientOps = gradientOps;
  loss.erase();
}
