//===- MixedPrecision.cpp - dtype assignment for mixed precision ----------===//
//
// Rewrites the `memopt.loss` function before autodiff, as PyTorch's autocast
// does at run time (Micikevicius et al. 2018, "Mixed Precision Training"):
//
// 1. One forward sweep in program order. Each op gets the dtype it runs in
//    from a table (getPolicy): the compute type for GEMM-like ops, f32 for
//    numerically sensitive ones, the widest of its float operands' current
//    dtypes for the rest; `memopt.precision` on the op overrides the table.
//    Slots whose dtype the op definition fixes (norm statistics, batch-norm
//    affine parameters and running statistics, losses) keep it; ops outside
//    the policy (constants, casts, the return) keep their original types.
//    Parameters (f32 master weights) and their views join an op's promotion
//    only when no other float operand does, so that a bias add after a
//    low-precision matmul stays in low precision, as autocast's linear.
// 2. An operand whose current dtype differs from the one its user runs in
//    gets a `memopt.cast`, created before its first such user and reused by
//    every later one: one cast per (value, dtype), so each parameter's
//    low-precision copy is made once per step, however often it is used.
// 3. Folding: a cast to the same type disappears, a cast of a cast whose
//    middle type is at least as wide as its source (A -> f32 -> B) becomes
//    one cast (A -> B, or nothing when A == B), and a cast of a constant
//    becomes a constant. Dead casts and constants are erased.
//
// Parameter arguments are never retyped: they stay the f32 master weights
// that the optimizer updates, and the backward of each cast brings their
// gradients back to f32 (CastOp's vector-Jacobian product).
//
// The loss scaling the backward needs is recorded as `memopt.loss_scale` on
// the function (memopt::LossScaleConfig), for --memopt-autodiff.
//
// O(n + u) for n ops and u operand uses.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Support/ByteSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <functional>

#define DEBUG_TYPE "memopt-mixed-precision"

namespace memopt {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {

/// What dtype an op runs in (docs/MixedPrecision.md, the policy table).
enum class Policy {
  /// The compute type: matmul, conv2d, the transposed convolution and the
  /// fused attention and linear cross-entropy (products and softmax sums
  /// accumulate in f32).
  Low,
  /// f32 inputs and outputs: exp, expm1, log, log1p, pow, rsqrt, softplus,
  /// tan, asin, acos, softmax, log_softmax, the norms, every loss.
  F32,
  /// Inputs as they come, f32 result: sums and means (accumulate in f32).
  F32Output,
  /// The widest of the float operands' dtypes: everything else.
  Widest,
  /// Not retyped: constants, casts and ops outside the forward op set.
  Keep,
};

struct MixedPrecisionPass
    : public memopt::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// Checks the options and builds the loss-scale configuration (none when
  /// loss scaling is off).
  LogicalResult parseOptions(Location loc, Type &lowType,
                             std::optional<LossScaleConfig> &scaling);
};

} // namespace

/// The policy of `op` by the table; overrides are handled by the caller.
static Policy getPolicy(Operation *op) {
  if (isa<MatmulOp, Conv2DOp, Conv2DGradInputOp, AttentionOp,
          LinearCrossEntropyOp>(op))
    return Policy::Low;
  // Batch norm is not here: as in autocast it runs in its input's dtype,
  // with f32 statistics, affine parameters and running statistics (the op
  // definition fixes those).
  if (isa<ExpOp, Expm1Op, LogOp, Log1pOp, PowScalarOp, RsqrtOp, SoftplusOp,
          TanOp, AsinOp, AcosOp, SoftmaxOp, LogSoftmaxOp, LayerNormOp,
          RmsNormOp, CrossEntropyOp, MseLossOp>(op))
    return Policy::F32;
  if (isa<ReduceSumOp, ReduceMeanOp>(op))
    return Policy::F32Output;
  // Backward helpers and optimizer ops have no place in a forward function;
  // if they appear, their types are the user's.
  if (isa<ConstantOp, CastOp, SgdUpdateOp, AdamWUpdateOp, IncrementOp,
          ScaleLossOp, UnscaleOp, UpdateScaleOp, KernelOp>(op) ||
      !isa<MemoptDialect>(op->getDialect()) ||
      op->getName().getStringRef().ends_with("_grad"))
    return Policy::Keep;
  return Policy::Widest;
}

/// Whether operand `index` of `op` keeps its dtype.
static bool isFixedOperand(Operation *op, unsigned index) {
  // Batch norm's affine parameters and running statistics are f32.
  if (isa<BatchNormOp>(op))
    return index >= 1;
  // The fused linear cross-entropy reads its weight as it is and rounds it
  // to the compute type a chunk at a time: an f32 master weight gets no
  // low-precision copy (the LM head's would be vocabulary x width).
  return isa<LinearCrossEntropyOp>(op) && index == 1;
}

/// Whether result `index` of `op` has a dtype the op definition fixes.
static bool isFixedResult(Operation *op, unsigned index) {
  if (isa<LayerNormOp, RmsNormOp, BatchNormOp>(op))
    return index >= 1; // the f32 statistics
  if (isa<AttentionOp>(op))
    return index == 1; // the f32 log-sum-exp
  // The f32 loss (and the linear cross-entropy's log-sum-exp).
  return isa<CrossEntropyOp, MseLossOp, LinearCrossEntropyOp>(op);
}

static bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

static Type getElementType(Type type) {
  return cast<RankedTensorType>(type).getElementType();
}

/// Whether converting `from` to `to` is exact for every value.
static bool isLossless(Type from, Type to) {
  return from == to || (isa<FloatType>(from) && to.isF32());
}

/// The widest of two float element types: equal ones stay, f16 and bf16
/// (neither holds the other) promote to f32.
static Type getWidest(Type a, Type b) {
  if (!a)
    return b;
  if (a == b)
    return a;
  return Float32Type::get(a.getContext());
}

LogicalResult
MixedPrecisionPass::parseOptions(Location loc, Type &lowType,
                                 std::optional<LossScaleConfig> &scaling) {
  MLIRContext *ctx = loc.getContext();
  auto bad = [&]() {
    InFlightDiagnostic diag = emitError(loc);
    diag << "--memopt-mixed-precision option ";
    return diag;
  };
  if (computeType == Precision::BF16)
    lowType = BFloat16Type::get(ctx);
  else
    lowType = Float16Type::get(ctx);

  // BF16 has f32's exponent range and needs no scaling; f16 does.
  std::string mode = lossScale;
  if (mode.empty())
    mode = computeType == Precision::F16 ? "dynamic" : "none";
  if (mode == "none") {
    scaling.reset();
    return success();
  }
  LossScaleConfig config;
  if (mode == "dynamic") {
    config.dynamic = true;
    config.scale = lossScaleInit;
  } else {
    double value = 0;
    if (StringRef(mode).trim().getAsDouble(value) || !std::isfinite(value) ||
        value <= 0)
      return bad() << "'loss-scale' is '" << mode
                   << "', expected dynamic, none or a positive number";
    config.dynamic = false;
    config.scale = value;
  }
  if (config.dynamic) {
    if (!(lossScaleInit > 0) || !std::isfinite(lossScaleInit))
      return bad() << "'loss-scale-init' is " << formatNumber(lossScaleInit)
                   << ", expected a positive number";
    if (!(growthFactor > 1) || !std::isfinite(growthFactor))
      return bad() << "'growth-factor' is " << formatNumber(growthFactor)
                   << ", expected a number > 1";
    if (!(backoffFactor > 0 && backoffFactor < 1))
      return bad() << "'backoff-factor' is " << formatNumber(backoffFactor)
                   << ", expected a number in (0, 1)";
    if (growthInterval < 1)
      return bad() << "'growth-interval' is "
                   << static_cast<int64_t>(growthInterval)
                   << ", expected an integer >= 1";
    config.growthFactor = growthFactor;
    config.backoffFactor = backoffFactor;
    config.growthInterval = growthInterval;
  }
  scaling = config;
  return success();
}

/// Folds the casts of `body` (step 3 of the file comment).
static void foldCasts(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(body)) {
    auto castOp = dyn_cast<CastOp>(&op);
    if (!castOp)
      continue;
    Value input = castOp.getInput();
    Type resultType = castOp.getType();
    if (input.getType() == resultType) {
      castOp.replaceAllUsesWith(input);
      castOp.erase();
      continue;
    }
    if (auto inner = input.getDefiningOp<CastOp>()) {
      Value source = inner.getInput();
      if (isLossless(getElementType(source.getType()),
                     getElementType(input.getType()))) {
        if (source.getType() == resultType) {
          castOp.replaceAllUsesWith(source);
          castOp.erase();
        } else {
          castOp.getInputMutable().assign(source);
        }
        continue;
      }
    }
    if (auto constant = input.getDefiningOp<ConstantOp>()) {
      auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
      auto to = dyn_cast<FloatType>(getElementType(resultType));
      if (!dense || !to)
        continue;
      const llvm::fltSemantics &semantics = to.getFloatSemantics();
      Attribute converted = dense.mapValues(to, [&](const APFloat &value) {
        APFloat rounded = value;
        bool losesInfo = false;
        rounded.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
        return rounded.bitcastToAPInt();
      });
      OpBuilder b(castOp);
      auto folded = ConstantOp::create(b, castOp.getLoc(),
                                       cast<ElementsAttr>(converted));
      castOp.replaceAllUsesWith(folded.getResult());
      castOp.erase();
    }
  }
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<CastOp, ConstantOp>(op) && isOpTriviallyDead(&op))
      op.erase();
}

namespace {

/// Assigns each op of a loss function its compute type (its policy, or its
/// memopt.precision override) and casts its operands to it, one op at a
/// time in program order.
class DTypeAssigner {
public:
  DTypeAssigner(func::FuncOp loss, Type lowType)
      : lowType(lowType), f32(Float32Type::get(loss.getContext())) {
    // Weights, trained or frozen, and below their views (broadcasts,
    // reshapes, transposes, slices).
    for (unsigned i = 0; i < loss.getNumArguments(); ++i)
      if (auto role = loss.getArgAttrOfType<StringAttr>(
              i, MemoptDialect::kRoleAttrName)) {
        std::optional<ArgumentRole> kind = symbolizeArgumentRole(role.getValue());
        if (kind && isWeightRole(*kind))
          fromParams.insert(loss.getArgument(i));
      }
  }

  /// Retypes `op` and casts its operands; returns whether it now computes
  /// in a type below f32.
  bool assign(Operation &op);

private:
  /// The type `op` computes in (null: it keeps its original types); may
  /// turn `policy` into Low for a memopt.precision override.
  Type getComputeType(Operation &op, Policy &policy);
  /// `v` as `type` for `user`: a cast made once per value and type, or a
  /// parameter's view retyped.
  Value castTo(Value v, Type type, Operation *user);
  /// The type `v` had before the pass.
  Type getOriginalType(Value v) const {
    Type type = original.lookup(v);
    return type ? type : v.getType();
  }

  Type lowType, f32;
  DenseMap<Value, Type> original;
  DenseMap<std::pair<Value, Type>, Value> casts;
  DenseSet<Value> fromParams;
};

} // namespace

Value DTypeAssigner::castTo(Value v, Type type, Operation *user) {
  if (v.getType() == type)
    return v;
  // A view of a parameter that only `user` reads is retyped instead: the
  // cast moves to the (smaller) parameter, before its broadcast.
  Operation *view = v.getDefiningOp();
  if (view && fromParams.contains(v) && v.hasOneUse() &&
      isa<BroadcastOp, ReshapeOp, TransposeOp, SliceOp>(view)) {
    Value source = view->getOperand(0);
    view->setOperand(0, castTo(source,
                               cast<RankedTensorType>(source.getType())
                                   .clone(getElementType(type)),
                               view));
    v.setType(type);
    return v;
  }
  Value &cached = casts[{v, type}];
  if (!cached) {
    OpBuilder b(user);
    auto castOp = CastOp::create(b, user->getLoc(), type, v);
    if (Attribute scope = user->getAttr(MemoptDialect::kScopeAttrName))
      castOp->setAttr(MemoptDialect::kScopeAttrName, scope);
    cached = castOp;
  }
  return cached;
}

Type DTypeAssigner::getComputeType(Operation &op, Policy &policy) {
  if (auto precision =
          op.getAttrOfType<StringAttr>(MemoptDialect::kPrecisionAttrName);
      precision && policy != Policy::Keep) {
    policy = Policy::Low;
    return llvm::StringSwitch<Type>(precision.getValue())
        .Case("f32", f32)
        .Case("bf16", BFloat16Type::get(op.getContext()))
        .Case("f16", Float16Type::get(op.getContext()))
        .Default(Type());
  }
  if (policy == Policy::Low)
    return lowType;
  if (policy == Policy::F32)
    return f32;
  if (policy != Policy::Widest)
    return Type();
  // Master weights are f32 storage, not f32 data: they join the promotion
  // only when nothing else does (nn.Linear's bias add runs in the product's
  // dtype, as autocast's linear does).
  Type fromData, fromAll;
  for (auto [index, operand] : llvm::enumerate(op.getOperands())) {
    if (isFixedOperand(&op, index) || !isFloatTensor(operand.getType()))
      continue;
    Type element = getElementType(operand.getType());
    fromAll = getWidest(fromAll, element);
    if (!fromParams.contains(operand))
      fromData = getWidest(fromData, element);
  }
  if (isa<BroadcastOp, ReshapeOp, TransposeOp, SliceOp>(op) &&
      fromParams.contains(op.getOperand(0)))
    fromParams.insert(op.getResult(0));
  return fromData ? fromData : fromAll;
}

bool DTypeAssigner::assign(Operation &op) {
  for (Value result : op.getResults())
    original[result] = result.getType();
  Policy policy = getPolicy(&op);
  Type computeType = getComputeType(op, policy);

  // Operands: the compute type where the op runs in one, else as before.
  for (OpOperand &use : op.getOpOperands()) {
    Value operand = use.get();
    Type want = getOriginalType(operand);
    if (computeType && isFloatTensor(want) &&
        !isFixedOperand(&op, use.getOperandNumber()))
      want = cast<RankedTensorType>(want).clone(computeType);
    if (policy == Policy::F32Output)
      want = operand.getType();
    if (operand.getType() != want)
      use.set(castTo(operand, want, &op));
  }

  // Results.
  Type resultElement = policy == Policy::F32Output ? f32 : computeType;
  if (!resultElement)
    return false;
  for (OpResult result : op.getResults())
    if (isFloatTensor(result.getType()) &&
        !isFixedResult(&op, result.getResultNumber()))
      result.setType(
          cast<RankedTensorType>(result.getType()).clone(resultElement));
  return computeType && computeType != f32;
}

/// A frozen weight that the step reads only through casts to one 16-bit
/// type is stored in that type: the argument takes the cast's type and the
/// casts go. Nothing trains it, so no f32 master is needed: this is what
/// lets a LoRA fine-tune's base take 2 bytes per parameter. The driver
/// rounds the checkpoint's f32 tensor once at load and saves the f32 tensor
/// it loaded (docs/Training.md).
static void storeFrozenInLowPrecision(func::FuncOp loss) {
  SmallVector<Type> argTypes(loss.getArgumentTypes());
  bool changed = false;
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    auto role =
        loss.getArgAttrOfType<StringAttr>(i, MemoptDialect::kRoleAttrName);
    BlockArgument arg = loss.getArgument(i);
    if (!role || role.getValue() != stringifyArgumentRole(ArgumentRole::Frozen) ||
        arg.use_empty())
      continue;
    Type lowType;
    bool onlyCasts = llvm::all_of(arg.getUsers(), [&](Operation *user) {
      auto cast = dyn_cast<CastOp>(user);
      if (!cast || cast.getType().getElementType().getIntOrFloatBitWidth() != 16)
        return false;
      if (!lowType)
        lowType = cast.getType();
      return cast.getType() == lowType;
    });
    if (!onlyCasts)
      continue;
    arg.setType(lowType);
    argTypes[i] = lowType;
    for (Operation *user : llvm::make_early_inc_range(arg.getUsers())) {
      user->getResult(0).replaceAllUsesWith(arg);
      user->erase();
    }
    changed = true;
  }
  if (changed)
    loss.setFunctionType(FunctionType::get(loss.getContext(), argTypes,
                                           loss.getResultTypes()));
}

void MixedPrecisionPass::runOnOperation() {
  // FP32 throughout: the step keeps the dtypes it has.
  if (computeType == Precision::F32)
    return markAllAnalysesPreserved();
  ModuleOp module = getOperation();
  Type lowType;
  std::optional<LossScaleConfig> scaling;
  if (failed(parseOptions(module.getLoc(), lowType, scaling)))
    return signalPassFailure();

  FailureOr<FunctionOpInterface> found =
      findLossFunction(module, "--memopt-mixed-precision");
  auto loss = succeeded(found) ? dyn_cast<func::FuncOp>(found->getOperation())
                               : func::FuncOp();
  if (!loss)
    return signalPassFailure();
  if (!llvm::hasSingleElement(loss.getBody())) {
    loss.emitError() << "cannot assign dtypes in a loss function with control "
                        "flow (more than one block)";
    return signalPassFailure();
  }
  Block &body = loss.getBody().front();

  DTypeAssigner assigner(loss, lowType);
  unsigned lowOps = 0;
  for (Operation &op : llvm::make_early_inc_range(body))
    if (!isa<CastOp>(op) && assigner.assign(op))
      ++lowOps;

  foldCasts(body);
  if (frozenInComputeType)
    storeFrozenInLowPrecision(loss);
  unsigned castCount = 0;
  body.walk([&](CastOp) { ++castCount; });
  numCasts = castCount;
  numLowPrecisionOps = lowOps;

  if (scaling)
    loss->setAttr(MemoptDialect::kLossScaleAttrName,
                  buildLossScaleAttr(&getContext(), *scaling));
  else
    loss->removeAttr(MemoptDialect::kLossScaleAttrName);
}
