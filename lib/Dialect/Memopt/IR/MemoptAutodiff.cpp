//===- MemoptAutodiff.cpp - vector-Jacobian products of memopt ops --------===//
//
// Each differentiable op builds the gradients of its operands from the
// gradients of its results (DifferentiableOpInterface), out of forward ops
// where the product is a composition of them and backward helper ops where
// it is not (softmax_grad, layer_norm_grad, conv2d_grad_input, ...). Operands
// that carry no gradient (indices, masks, labels) get a null gradient.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace memopt;

namespace {
/// Shorthands for building gradient ops at one location.
struct GradBuilder {
  OpBuilder &b;
  Location loc;

  RankedTensorType type(Value value) const {
    return cast<RankedTensorType>(value.getType());
  }
  Value neg(Value x) { return NegOp::create(b, loc, type(x), x); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, type(x), x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, type(x), x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, type(x), x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, type(x), x, y); }
  Value scale(Value x, double factor) {
    return MulScalarOp::create(b, loc, type(x), x, b.getF64FloatAttr(factor));
  }
  Value shift(Value x, double offset) {
    return AddScalarOp::create(b, loc, type(x), x, b.getF64FloatAttr(offset));
  }
  template <typename OpT> Value unary(Value x) {
    return OpT::create(b, loc, type(x), x);
  }
  Value pow(Value x, double exponent) {
    return PowScalarOp::create(b, loc, type(x), x,
                               b.getF64FloatAttr(exponent));
  }
  Value splat(RankedTensorType t, double value) {
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), value)));
  }
  Value zeros(RankedTensorType t) { return splat(t, 0.0); }
  /// `value` where `gap` >= 0 (`inclusive`) or > 0, else 0: clamp_grad
  /// with min 0, the gate of the max ops' gradients.
  Value whereNonNegative(Value gap, Value value, bool inclusive = true) {
    return ClampGradOp::create(b, loc, type(gap), gap, value,
                               b.getF64FloatAttr(0.0), FloatAttr(),
                               b.getBoolAttr(inclusive));
  }
  Value reshape(Value x, RankedTensorType t) {
    if (x.getType() == t)
      return x;
    return ReshapeOp::create(b, loc, t, x);
  }
  Value castTo(Value x, Type elementType) {
    RankedTensorType t = type(x);
    if (t.getElementType() == elementType)
      return x;
    return CastOp::create(b, loc, t.clone(elementType), x);
  }
  /// Sums `x` over `dims` and reshapes the sum to `t`.
  Value sumTo(Value x, ArrayRef<int64_t> dims, RankedTensorType t) {
    if (dims.empty())
      return reshape(x, t);
    SmallVector<int64_t> shape;
    RankedTensorType xt = type(x);
    for (int64_t d = 0; d < xt.getRank(); ++d)
      if (!llvm::is_contained(dims, d))
        shape.push_back(xt.getDimSize(d));
    Value sum = ReduceSumOp::create(b, loc, xt.clone(shape), x, dims);
    return reshape(sum, t);
  }
};
} // namespace

/// The gradient flowing into the single result of `op`.
static Value singleGrad(ValueRange resultGrads) { return resultGrads.front(); }

/// Normalisations return their statistics for the backward only: a loss that
/// depends on them directly is not differentiated (rather than silently
/// dropping that gradient).
static LogicalResult rejectStatisticGrads(Operation *op,
                                          ValueRange resultGrads) {
  for (auto [index, grad] : llvm::enumerate(resultGrads.drop_front()))
    if (grad && index < 2)
      return op->emitOpError()
             << "cannot differentiate through its saved statistics (result #"
             << index + 1 << "): only the normalised result has a gradient";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVectorJacobianProduct(
    OpBuilder &, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Value g = singleGrad(resultGrads);
  grads.assign({g, g});
  return success();
}

LogicalResult SubOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  Value g = singleGrad(resultGrads);
  grads.assign({g, gb.neg(g)});
  return success();
}

LogicalResult MulOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  Value g = singleGrad(resultGrads);
  grads.assign({gb.mul(g, getRhs()), gb.mul(g, getLhs())});
  return success();
}

LogicalResult DivOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d(l / r) = dl / r - dr * (l / r) / r.
  GradBuilder gb{builder, getLoc()};
  Value gOverRhs = gb.div(singleGrad(resultGrads), getRhs());
  grads.assign({gOverRhs, gb.neg(gb.mul(gOverRhs, getResult()))});
  return success();
}

LogicalResult AddScalarOp::buildVectorJacobianProduct(
    OpBuilder &, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({singleGrad(resultGrads)});
  return success();
}

LogicalResult MulScalarOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.scale(singleGrad(resultGrads),
                         getValue().convertToDouble())});
  return success();
}

LogicalResult PowScalarOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d(x^v) = v * x^(v - 1) dx.
  GradBuilder gb{builder, getLoc()};
  double v = getValue().convertToDouble();
  Value slope = gb.scale(gb.pow(getInput(), v - 1.0), v);
  grads.assign({gb.mul(singleGrad(resultGrads), slope)});
  return success();
}

LogicalResult NegOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.neg(singleGrad(resultGrads))});
  return success();
}

LogicalResult ExpOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.mul(singleGrad(resultGrads), getResult())});
  return success();
}

LogicalResult LogOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.div(singleGrad(resultGrads), getInput())});
  return success();
}

LogicalResult SqrtOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d sqrt(x) = dx / (2 sqrt(x)).
  GradBuilder gb{builder, getLoc()};
  grads.assign(
      {gb.div(singleGrad(resultGrads), gb.scale(getResult(), 2.0))});
  return success();
}

LogicalResult RsqrtOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d x^(-1/2) = -1/2 x^(-3/2) dx = -1/2 rsqrt(x)^3 dx.
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.scale(
      gb.mul(singleGrad(resultGrads), gb.pow(getResult(), 3.0)), -0.5)});
  return success();
}

LogicalResult TanhOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({TanhGradOp::create(builder, getLoc(), getType(), getResult(),
                                   singleGrad(resultGrads))});
  return success();
}

LogicalResult SigmoidOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({SigmoidGradOp::create(builder, getLoc(), getType(),
                                      getResult(), singleGrad(resultGrads))});
  return success();
}

LogicalResult ReluOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({ReluGradOp::create(builder, getLoc(), getType(), getInput(),
                                   singleGrad(resultGrads))});
  return success();
}

LogicalResult SiluOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({SiluGradOp::create(builder, getLoc(), getType(), getInput(),
                                   singleGrad(resultGrads))});
  return success();
}

LogicalResult HardswishOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({HardswishGradOp::create(builder, getLoc(), getType(),
                                        getInput(), singleGrad(resultGrads))});
  return success();
}

LogicalResult HardsigmoidOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({HardsigmoidGradOp::create(
      builder, getLoc(), getType(), getInput(), singleGrad(resultGrads))});
  return success();
}

LogicalResult MishOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({MishGradOp::create(builder, getLoc(), getType(), getInput(),
                                   singleGrad(resultGrads))});
  return success();
}

LogicalResult AbsOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // sign(x) dx: 0 at 0, as torch.abs.
  GradBuilder gb{builder, getLoc()};
  grads.assign(
      {gb.mul(singleGrad(resultGrads), gb.unary<SignOp>(getInput()))});
  return success();
}

LogicalResult SinOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.mul(singleGrad(resultGrads), gb.unary<CosOp>(getInput()))});
  return success();
}

LogicalResult CosOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.mul(singleGrad(resultGrads),
                       gb.neg(gb.unary<SinOp>(getInput())))});
  return success();
}

LogicalResult ErfOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d erf(x) = 2 / sqrt(pi) e^(-x^2) dx.
  GradBuilder gb{builder, getLoc()};
  Value x = getInput();
  Value density = gb.unary<ExpOp>(gb.neg(gb.mul(x, x)));
  grads.assign({gb.mul(singleGrad(resultGrads),
                       gb.scale(density, 1.1283791670955126))});
  return success();
}

LogicalResult Expm1Op::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d (e^x - 1) = (y + 1) dx.
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.mul(singleGrad(resultGrads), gb.shift(getResult(), 1.0))});
  return success();
}

LogicalResult Log1pOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({gb.div(singleGrad(resultGrads), gb.shift(getInput(), 1.0))});
  return success();
}

LogicalResult SoftplusOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // sigmoid(x) dx; above the threshold, where softplus is x, sigmoid(x)
  // rounds to 1 in f32, as PyTorch's softplus_backward.
  GradBuilder gb{builder, getLoc()};
  grads.assign(
      {gb.mul(singleGrad(resultGrads), gb.unary<SigmoidOp>(getInput()))});
  return success();
}

LogicalResult SincOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d sinc(x) = (cos(pi x) - sinc(x)) / x dx, and 0 at x = 0, the point
  // PyTorch's sinc_backward masks too.
  GradBuilder gb{builder, getLoc()};
  Value x = getInput();
  Value slope = gb.div(
      gb.sub(gb.unary<CosOp>(gb.scale(x, 3.141592653589793)), getResult()), x);
  Value atZero = CompareOp::create(builder, getLoc(), ComparePredicate::Eq, x,
                                   gb.zeros(gb.type(x)));
  slope = MaskedFillOp::create(builder, getLoc(), getType(), slope, atZero,
                               builder.getF64FloatAttr(0.0));
  grads.assign({gb.mul(singleGrad(resultGrads), slope)});
  return success();
}

LogicalResult TanOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d tan(x) = (1 + y^2) dx.
  GradBuilder gb{builder, getLoc()};
  Value y = getResult();
  grads.assign({gb.mul(singleGrad(resultGrads), gb.shift(gb.mul(y, y), 1.0))});
  return success();
}

/// The gradient of arcsin (`sign` 1) or arccos (-1): sign / sqrt(1 - x^2).
static Value buildArcSineGradient(GradBuilder &gb, Value x, Value grad,
                                  double sign) {
  Value root = gb.unary<RsqrtOp>(gb.shift(gb.neg(gb.mul(x, x)), 1.0));
  Value product = gb.mul(grad, root);
  return sign < 0 ? gb.neg(product) : product;
}

LogicalResult AsinOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({buildArcSineGradient(gb, getInput(), singleGrad(resultGrads),
                                     1.0)});
  return success();
}

LogicalResult AcosOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign({buildArcSineGradient(gb, getInput(), singleGrad(resultGrads),
                                     -1.0)});
  return success();
}

LogicalResult AtanOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // d arctan(x) = dx / (1 + x^2).
  GradBuilder gb{builder, getLoc()};
  Value x = getInput();
  grads.assign({gb.div(singleGrad(resultGrads), gb.shift(gb.mul(x, x), 1.0))});
  return success();
}

// Piecewise constant: no gradient reaches the input (PyTorch's is 0).
#define MEMOPT_ZERO_GRADIENT(OP)                                               \
  LogicalResult OP::buildVectorJacobianProduct(                                \
      OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {                \
    grads.assign({Value()});                                                   \
    return success();                                                          \
  }
MEMOPT_ZERO_GRADIENT(SignOp)
MEMOPT_ZERO_GRADIENT(FloorOp)
MEMOPT_ZERO_GRADIENT(CeilOp)
MEMOPT_ZERO_GRADIENT(RoundOp)
MEMOPT_ZERO_GRADIENT(TruncOp)
#undef MEMOPT_ZERO_GRADIENT

LogicalResult ClampOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({ClampGradOp::create(builder, getLoc(), getType(), getInput(),
                                    singleGrad(resultGrads), getMinAttr(),
                                    getMaxAttr(), getInclusiveAttr())});
  return success();
}

LogicalResult GeluOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({GeluGradOp::create(builder, getLoc(), getType(), getInput(),
                                   singleGrad(resultGrads),
                                   getApproximateAttr())});
  return success();
}

/// Whether `grad`, a cotangent nothing reads yet, is a 16-bit matmul result
/// that can be written in f32 instead: the GEMM accumulates in f32, so the
/// widened result is that accumulator unrounded, and neither the 16-bit
/// result nor its cast is ever made. A weight's gradient under mixed
/// precision is the common case (a 16-bit copy of an f32 parameter feeds the
/// product).
static bool widenProductToF32(Value grad) {
  if (!grad.use_empty() || !grad.getDefiningOp<MatmulOp>())
    return false;
  auto type = cast<RankedTensorType>(grad.getType());
  grad.setType(type.clone(Float32Type::get(grad.getContext())));
  return true;
}

LogicalResult CastOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  Value grad = singleGrad(resultGrads);
  Type inputElement = getInput().getType().getElementType();
  if (!isa<FloatType>(inputElement) ||
      !isa<FloatType>(getType().getElementType())) {
    // An index carries no gradient, and a float made an index passes none.
    grads.assign({Value()});
    return success();
  }
  if (inputElement.isF32() && !getType().getElementType().isF32() &&
      widenProductToF32(grad)) {
    grads.assign({grad});
    return success();
  }
  grads.assign({gb.castTo(grad, inputElement)});
  return success();
}

LogicalResult WhereOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  Value g = singleGrad(resultGrads);
  Value zeros = gb.zeros(getType());
  grads.assign({Value(),
                WhereOp::create(builder, getLoc(), getType(), getCondition(),
                                g, zeros),
                WhereOp::create(builder, getLoc(), getType(), getCondition(),
                                zeros, g)});
  return success();
}

LogicalResult MaskedFillOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({MaskedFillOp::create(builder, getLoc(), getType(),
                                     singleGrad(resultGrads), getMask(),
                                     builder.getF64FloatAttr(0.0)),
                Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // Sum over the new dimensions and over the operand's size-1 dimensions
  // that were repeated.
  GradBuilder gb{builder, getLoc()};
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getType();
  SmallVector<int64_t> reduced;
  for (int64_t d = 0; d < result.getRank(); ++d) {
    const int64_t *it = llvm::find(getDims(), d);
    if (it == getDims().end()) {
      reduced.push_back(d);
      continue;
    }
    int64_t operandDim = it - getDims().begin();
    if (input.getDimSize(operandDim) != result.getDimSize(d))
      reduced.push_back(d);
  }
  grads.assign({gb.sumTo(singleGrad(resultGrads), reduced, input)});
  return success();
}

LogicalResult ReshapeOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  grads.assign(
      {gb.reshape(singleGrad(resultGrads), getInput().getType())});
  return success();
}

LogicalResult TransposeOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [index, dim] : llvm::enumerate(perm))
    inverse[dim] = index;
  grads.assign({TransposeOp::create(builder, getLoc(), getInput().getType(),
                                    singleGrad(resultGrads), inverse)});
  return success();
}

LogicalResult SliceOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({SliceGradOp::create(builder, getLoc(), getInput().getType(),
                                    singleGrad(resultGrads), getStarts(),
                                    getLimits(), getStrides())});
  return success();
}

LogicalResult SliceGradOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({SliceOp::create(builder, getLoc(), getGrad().getType(),
                                singleGrad(resultGrads), getStarts(),
                                getLimits(), getStrides())});
  return success();
}

LogicalResult ConcatOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Value g = singleGrad(resultGrads);
  RankedTensorType result = getType();
  int64_t dim = getDim();
  int64_t offset = 0;
  grads.clear();
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> starts(result.getRank(), 0);
    SmallVector<int64_t> limits(result.getShape());
    SmallVector<int64_t> strides(result.getRank(), 1);
    starts[dim] = offset;
    limits[dim] = offset + type.getDimSize(dim);
    offset = limits[dim];
    grads.push_back(SliceOp::create(builder, getLoc(), type, g, starts, limits,
                                    strides));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

/// Broadcasts the gradient of a reduction back to the reduced input's shape.
static Value broadcastReduced(OpBuilder &builder, Location loc, Value grad,
                              RankedTensorType input, ArrayRef<int64_t> dims) {
  GradBuilder gb{builder, loc};
  grad = gb.castTo(grad, input.getElementType());
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      kept.push_back(d);
  return BroadcastOp::create(builder, loc, input, grad, kept);
}

LogicalResult ReduceSumOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({broadcastReduced(builder, getLoc(), singleGrad(resultGrads),
                                 getInput().getType(), getDims())});
  return success();
}

LogicalResult ReduceMeanOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  RankedTensorType input = getInput().getType();
  int64_t count = 1;
  for (int64_t d : getDims())
    count *= input.getDimSize(d);
  Value spread = broadcastReduced(builder, getLoc(), singleGrad(resultGrads),
                                  input, getDims());
  grads.assign({gb.scale(spread, 1.0 / static_cast<double>(count))});
  return success();
}

LogicalResult MaximumOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // torch.maximum's gradient: to the larger operand, half to each at a tie.
  // With d = lhs - rhs, clamp_grad with min 0 passes the gradient where
  // d >= 0 (inclusive) or d > 0 (exclusive); their mean is g, g / 2 or 0,
  // each exact, and rhs gets the rest.
  GradBuilder gb{builder, getLoc()};
  Value grad = singleGrad(resultGrads);
  Value gap = gb.sub(getLhs(), getRhs());
  Value lhs = gb.scale(gb.add(gb.whereNonNegative(gap, grad),
                              gb.whereNonNegative(gap, grad, false)),
                       0.5);
  grads.assign({lhs, gb.sub(grad, lhs)});
  return success();
}

LogicalResult ReduceMaxOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // torch.amax's gradient: the result's gradient split evenly among the
  // elements equal to the maximum. x - max is exactly 0 at those and below
  // 0 elsewhere, so clamp_grad with min 0 passes a value exactly at them:
  // once to count the ties, once for the gradient.
  GradBuilder gb{builder, getLoc()};
  RankedTensorType input = getInput().getType();
  Value peak =
      broadcastReduced(builder, getLoc(), getResult(), input, getDims());
  Value gap = gb.sub(getInput(), peak);
  Value ones = gb.splat(input, 1.0);
  RankedTensorType result = getType();
  Value ties = ReduceSumOp::create(builder, getLoc(), result,
                                   gb.whereNonNegative(gap, ones), getDims());
  Value share = gb.div(gb.castTo(singleGrad(resultGrads),
                                 result.getElementType()),
                       ties);
  grads.assign({gb.whereNonNegative(
      gap, broadcastReduced(builder, getLoc(), share, input, getDims()))});
  return success();
}

LogicalResult SoftmaxOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({SoftmaxGradOp::create(builder, getLoc(), getType(),
                                      getResult(), singleGrad(resultGrads),
                                      getDimAttr())});
  return success();
}

LogicalResult LogSoftmaxOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({LogSoftmaxGradOp::create(builder, getLoc(), getType(),
                                         getResult(), singleGrad(resultGrads),
                                         getDimAttr())});
  return success();
}

LogicalResult LayerNormOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  if (failed(rejectStatisticGrads(*this, resultGrads)))
    return failure();
  // The statistics are by-products: only the normalised result carries a
  // gradient.
  Value g = resultGrads[0];
  if (!g) {
    grads.assign(getNumOperands(), Value());
    return success();
  }
  auto op = LayerNormGradOp::create(
      builder, getLoc(), getInput().getType(), getWeight().getType(),
      getBias().getType(), g, getInput(), getWeight(), getMean(), getRstd());
  grads.assign(
      {op.getGradInput(), op.getGradWeight(), op.getGradBias()});
  return success();
}

LogicalResult RmsNormOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  if (failed(rejectStatisticGrads(*this, resultGrads)))
    return failure();
  Value g = resultGrads[0];
  if (!g) {
    grads.assign(getNumOperands(), Value());
    return success();
  }
  auto op = RmsNormGradOp::create(builder, getLoc(), getInput().getType(),
                                  getWeight().getType(), g, getInput(),
                                  getWeight(), getRstd());
  grads.assign({op.getGradInput(), op.getGradWeight()});
  return success();
}

LogicalResult BatchNormOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  if (failed(rejectStatisticGrads(*this, resultGrads)))
    return failure();
  // Running statistics are state, not differentiated.
  Value g = resultGrads[0];
  if (!g) {
    grads.assign(getNumOperands(), Value());
    return success();
  }
  auto op = BatchNormGradOp::create(
      builder, getLoc(), getInput().getType(), getWeight().getType(),
      getBias().getType(), g, getInput(), getWeight(), getMean(), getRstd());
  grads.assign({op.getGradInput(), op.getGradWeight(), op.getGradBias(),
                Value(), Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Nf4MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult Nf4MatmulOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // y = x op(W) gives dx = dy op(W)^T: the same packed weight, the other
  // orientation. The weight is frozen: it has no gradient.
  GradBuilder gb{builder, getLoc()};
  RankedTensorType lhsType = getLhs().getType();
  Value g = gb.castTo(singleGrad(resultGrads), lhsType.getElementType());
  Value dLhs = Nf4MatmulOp::create(builder, getLoc(), lhsType, g, getRhs(),
                                   getRhsShape(), !getTransposeRhs());
  grads.assign({dLhs, Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

/// Collapses the leading dimensions of a rank >= 2 tensor into its rows.
static Value flattenRows(GradBuilder &gb, Value x) {
  RankedTensorType t = gb.type(x);
  int64_t cols = t.getShape().back();
  return gb.reshape(x, t.clone({t.getNumElements() / cols, cols}));
}

LogicalResult MatmulOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // With C = op(A) op(B), dop(A) = dC op(B)^T and dop(B) = op(A)^T dC; the
  // transposes are folded into the products' flags. A matrix operand shared
  // by every batch element gets the sum over the batch, computed as one
  // product over the flattened rows.
  GradBuilder gb{builder, getLoc()};
  Location loc = getLoc();
  Value lhs = getLhs(), rhs = getRhs();
  RankedTensorType lhsType = getLhs().getType(), rhsType = getRhs().getType();
  Value g = gb.castTo(singleGrad(resultGrads), lhsType.getElementType());
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  int64_t rankL = lhsType.getRank(), rankR = rhsType.getRank();
  auto matmul = [&](Type type, Value x, Value y, bool tx, bool ty) -> Value {
    return MatmulOp::create(builder, loc, type, x, y, tx, ty);
  };

  // Gradient of lhs.
  Value dLhs;
  if (rankL == 2 && rankR > 2) {
    // Shared lhs: sum over the batch of per-element products.
    RankedTensorType batched = cast<RankedTensorType>(
        gb.type(g).clone(llvm::to_vector(llvm::concat<const int64_t>(
            rhsType.getShape().drop_back(2), lhsType.getShape()))));
    Value perBatch = ta ? matmul(batched, rhs, g, tb, true)
                        : matmul(batched, g, rhs, false, !tb);
    SmallVector<int64_t> batchDims =
        llvm::to_vector(llvm::seq<int64_t>(0, rankR - 2));
    dLhs = gb.sumTo(perBatch, batchDims, lhsType);
  } else if (!ta) {
    dLhs = matmul(lhsType, g, rhs, false, !tb);
  } else {
    dLhs = matmul(lhsType, rhs, g, tb, true);
  }

  // Gradient of rhs.
  Value dRhs;
  if (rankR == 2 && rankL > 2 && !ta) {
    // Shared rhs (nn.Linear on a batched input): one product over the rows.
    Value rows = flattenRows(gb, lhs);
    Value gRows = flattenRows(gb, g);
    dRhs = tb ? matmul(rhsType, gRows, rows, true, false)
              : matmul(rhsType, rows, gRows, true, false);
  } else if (rankR == 2 && rankL > 2) {
    RankedTensorType batched = cast<RankedTensorType>(
        gb.type(g).clone(llvm::to_vector(llvm::concat<const int64_t>(
            lhsType.getShape().drop_back(2), rhsType.getShape()))));
    Value perBatch = tb ? matmul(batched, g, lhs, true, true)
                        : matmul(batched, lhs, g, false, false);
    SmallVector<int64_t> batchDims =
        llvm::to_vector(llvm::seq<int64_t>(0, rankL - 2));
    dRhs = gb.sumTo(perBatch, batchDims, rhsType);
  } else if (!tb) {
    dRhs = matmul(rhsType, lhs, g, !ta, false);
  } else {
    dRhs = matmul(rhsType, g, lhs, true, ta);
  }
  grads.assign({dLhs, dRhs});
  return success();
}

//===----------------------------------------------------------------------===//
// Embeddings, convolution, pooling, dropout
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({EmbeddingGradOp::create(
                    builder, getLoc(), getWeight().getType(),
                    singleGrad(resultGrads), getIndices(), getPaddingIdxAttr()),
                Value()});
  return success();
}

/// A scatter-add: each row of `grad` receives the result gradient's row its
/// index names. The rows a `padding_idx` skipped would need a zero
/// gradient, which the lookup does not give: that form is refused.
LogicalResult EmbeddingGradOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  if (getPaddingIdxAttr())
    return emitOpError()
           << "with 'padding_idx' has no gradient rule (its skipped rows "
              "would need a zero gradient)";
  grads.assign({EmbeddingOp::create(builder, getLoc(), getGrad().getType(),
                                    singleGrad(resultGrads), getIndices(),
                                    IntegerAttr()),
                Value()});
  return success();
}

LogicalResult Conv2DOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Value g = singleGrad(resultGrads);
  Value dInput = Conv2DGradInputOp::create(
      builder, getLoc(), getInput().getType(), g, getFilter(), getStrides(),
      getPadding(), getDilations(), getGroups());
  Value dFilter = Conv2DGradFilterOp::create(
      builder, getLoc(), getFilter().getType(), g, getInput(), getStrides(),
      getPadding(), getDilations(), getGroups());
  grads.assign({dInput, dFilter});
  return success();
}

/// y = conv2d_grad_input(x, w) is linear in x and in w: with Z = conv2d(·,
/// w) its adjoint map, dx = conv2d(dy, w) and dw is the filter gradient of
/// that convolution, conv2d_grad_filter(x, dy).
LogicalResult Conv2DGradInputOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Value g = singleGrad(resultGrads);
  Value dGrad = Conv2DOp::create(builder, getLoc(), getGrad().getType(), g,
                                 getFilter(), getStrides(), getPadding(),
                                 getDilations(), getGroups());
  Value dFilter = Conv2DGradFilterOp::create(
      builder, getLoc(), getFilter().getType(), getGrad(), g, getStrides(),
      getPadding(), getDilations(), getGroups());
  grads.assign({dGrad, dFilter});
  return success();
}

LogicalResult MaxPool2DOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({MaxPool2DGradOp::create(
      builder, getLoc(), getInput().getType(), singleGrad(resultGrads),
      getInput(), getKernel(), getStrides(), getPadding())});
  return success();
}

LogicalResult AvgPool2DOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({AvgPool2DGradOp::create(
      builder, getLoc(), getInput().getType(), singleGrad(resultGrads),
      getKernel(), getStrides(), getPadding())});
  return success();
}

LogicalResult DropoutOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  // The same counter-based mask and scale: no mask is saved.
  grads.assign({DropoutOp::create(builder, getLoc(), getType(),
                                  singleGrad(resultGrads), getPAttr(),
                                  getSeedAttr(), getStreamAttr(),
                                  getSharedAttr())});
  return success();
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  if (resultGrads[1])
    return emitOpError() << "cannot differentiate through its log-sum-exp "
                            "(result #1): only the output has a gradient";
  if (!resultGrads[0]) {
    grads.assign(getNumOperands(), Value());
    return success();
  }
  // The backward recomputes the scores from q, k and the saved lse; the
  // mask and every attribute are the forward's.
  SmallVector<Value> operands{getQ(), getK(), getV(), getOut(), getLse(),
                              resultGrads[0]};
  if (getMask())
    operands.push_back(getMask());
  auto grad = AttentionGradOp::create(
      builder, getLoc(),
      TypeRange{getQ().getType(), getK().getType(), getV().getType()},
      operands, (*this)->getAttrs());
  grads.assign({grad.getGradQ(), grad.getGradK(), grad.getGradV()});
  if (getMask())
    grads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  grads.assign({CrossEntropyGradOp::create(
                    builder, getLoc(), getLogits().getType(), getLogits(),
                    getLabels(), singleGrad(resultGrads), getIgnoreIndexAttr(),
                    getReductionAttr(), getLabelSmoothingAttr()),
                Value()});
  return success();
}

/// The VJP of a fused linear cross-entropy: its gradient op `GradOpT` from
/// the forward's operands, its log-sum-exp and the loss's gradient. The
/// weight has a gradient (GradOpT's second result) unless it is NF4.
template <typename GradOpT, typename OpT>
static LogicalResult buildLinearLossGradient(OpT op, OpBuilder &builder,
                                             ValueRange resultGrads,
                                             SmallVectorImpl<Value> &grads) {
  if (resultGrads[1])
    return op.emitOpError() << "cannot differentiate through its log-sum-exp "
                               "(result #1): only the loss has a gradient";
  constexpr bool hasWeightGrad = std::is_same_v<OpT, LinearCrossEntropyOp>;
  SmallVector<Value> operands{op.getX(), op.getW(), op.getLabels(),
                              op.getLse(),
                              singleGrad(resultGrads.take_front())};
  SmallVector<Type> types{op.getX().getType()};
  if (hasWeightGrad)
    types.push_back(op.getW().getType());
  if (op.getBias()) {
    operands.push_back(op.getBias());
    types.push_back(op.getBias().getType());
  }
  auto grad = GradOpT::create(builder, op.getLoc(), types, operands,
                              op->getAttrs());
  grads.assign({grad.getGradX(),
                hasWeightGrad ? grad->getResult(1) : Value(), Value()});
  if (op.getBias())
    grads.push_back(grad.getGradBias());
  return success();
}

LogicalResult LinearCrossEntropyOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  return buildLinearLossGradient<LinearCrossEntropyGradOp>(
      *this, builder, resultGrads, grads);
}

LogicalResult Nf4LinearCrossEntropyOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  return buildLinearLossGradient<Nf4LinearCrossEntropyGradOp>(
      *this, builder, resultGrads, grads);
}

LogicalResult MseLossOp::buildVectorJacobianProduct(
    OpBuilder &builder, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  GradBuilder gb{builder, getLoc()};
  Value dInput = MseLossGradOp::create(builder, getLoc(),
                                       getInput().getType(), getInput(),
                                       getTarget(), singleGrad(resultGrads),
                                       getReductionAttr());
  grads.assign({dInput, gb.neg(dInput)});
  return success();
}
