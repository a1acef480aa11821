//===- MemoptOps.cpp - memopt operations ----------------------------------===//
//
// Verifiers, type inference, folders and custom assembly directives of the
// memopt ops. Each verifier computes the type an operand or result must have
// and reports a mismatch as "<what> has type 'A', expected 'B'", so that a
// user sees both the fault and the fix. Which element types may meet in one
// op (a matmul's f32 result of bf16 operands, a reduction's) is not decided
// here but by the runtime's dtype table, which every op checks through
// RuntimeDTypesTrait (RuntimeDTypes.cpp) before its verifier runs.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/runtime/QuantizeMath.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace memopt;

//===----------------------------------------------------------------------===//
// Custom assembly: `custom<SameTypes>(type($a), type($b), ...)`
//
// Operands and results that must share one type print it once; the parser
// gives every one of them the type it read. A mismatch can only be written
// in the generic form, where the op's verifier reports it.
//===----------------------------------------------------------------------===//

template <typename... Rest>
static ParseResult parseSameTypes(OpAsmParser &parser, Type &first,
                                  Rest &...rest) {
  if (parser.parseType(first))
    return failure();
  ((rest = first), ...);
  return success();
}

template <typename... Rest>
static void printSameTypes(OpAsmPrinter &printer, Operation *, Type first,
                           Rest...) {
  printer << first;
}

// `custom<ParamAndStateTypes>(p, g, new_p, m, v, new_m, new_v)`: `T` when
// the state has the parameter's type, `T state S` when it does not.
static ParseResult parseParamAndStateTypes(OpAsmParser &parser, Type &param,
                                           Type &grad, Type &newParam,
                                           Type &m, Type &v, Type &newM,
                                           Type &newV) {
  if (parser.parseType(param))
    return failure();
  grad = newParam = m = v = newM = newV = param;
  if (succeeded(parser.parseOptionalKeyword("state")) && parser.parseType(m))
    return failure();
  v = newM = newV = m;
  return success();
}

static void printParamAndStateTypes(OpAsmPrinter &printer, Operation *,
                                    Type param, Type, Type, Type m, Type, Type,
                                    Type) {
  printer << param;
  if (m != param)
    printer << " state " << m;
}

//===----------------------------------------------------------------------===//
// Verification helpers
//===----------------------------------------------------------------------===//

namespace {
/// A value with the name the op's syntax gives it ("lhs", "result", ...).
struct Named {
  StringRef name;
  Value value;
};
} // namespace

/// Formats a floating-point attribute value as a person would write it.
static std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Reports that `what` has type `actual` where `expected` is required.
static LogicalResult typeMismatch(Operation *op, StringRef what, Type actual,
                                  Type expected, StringRef why = {}) {
  InFlightDiagnostic diag = op->emitOpError()
                            << what << " has type " << actual << ", expected "
                            << expected;
  if (!why.empty())
    diag << " (" << why << ")";
  return diag;
}

static LogicalResult expectType(Operation *op, Named named, Type expected,
                                StringRef why = {}) {
  if (named.value.getType() == expected)
    return success();
  return typeMismatch(op, named.name, named.value.getType(), expected, why);
}

/// Checks that every value has the type of the first one.
static LogicalResult expectSameTypes(Operation *op,
                                     std::initializer_list<Named> values) {
  const Named &reference = *values.begin();
  std::string why = ("the type of " + reference.name).str();
  for (const Named &named : llvm::drop_begin(values))
    if (failed(expectType(op, named, reference.value.getType(), why)))
      return failure();
  return success();
}

/// Checks that `dim` indexes a dimension of a tensor of rank `rank`.
static LogicalResult expectDim(Operation *op, StringRef what, int64_t dim,
                               int64_t rank) {
  if (dim >= 0 && dim < rank)
    return success();
  return op->emitOpError() << what << " " << dim << " is outside [0, " << rank
                           << ")";
}

static LogicalResult expectCount(Operation *op, StringRef what,
                                 ArrayRef<int64_t> values, int64_t count) {
  if (static_cast<int64_t>(values.size()) == count)
    return success();
  return op->emitOpError() << "expected " << count << " " << what
                           << " (one per dimension), got " << values.size();
}

static LogicalResult expectRank(Operation *op, Named named, int64_t rank) {
  int64_t actual = tensorType(named.value).getRank();
  if (actual == rank)
    return success();
  return op->emitOpError() << named.name << " must have rank " << rank
                           << ", got " << named.value.getType();
}

static LogicalResult expectMinRank(Operation *op, Named named,
                                   int64_t minRank) {
  int64_t actual = tensorType(named.value).getRank();
  if (actual >= minRank)
    return success();
  return op->emitOpError() << named.name << " must have rank " << minRank
                           << " or more, got " << named.value.getType();
}

static LogicalResult expectPositive(Operation *op, StringRef what,
                                    ArrayRef<int64_t> values,
                                    int64_t minimum = 1) {
  for (int64_t value : values)
    if (value < minimum)
      return op->emitOpError() << what << " must be >= " << minimum
                               << ", got " << value;
  return success();
}

/// Checks `low <= value < high` (or `<= high` when `closed`).
static LogicalResult expectInRange(Operation *op, StringRef what,
                                   llvm::APFloat attrValue, double low,
                                   double high, bool closedHigh,
                                   bool closedLow = true) {
  double value = attrValue.convertToDouble();
  bool ok = (closedLow ? value >= low : value > low) &&
            (closedHigh ? value <= high : value < high);
  if (ok)
    return success();
  return op->emitOpError() << what << " must be in " << (closedLow ? "[" : "(")
                           << formatNumber(low) << ", " << formatNumber(high)
                           << (closedHigh ? "]" : ")") << ", got "
                           << formatNumber(value);
}

static LogicalResult expectNonNegative(Operation *op, StringRef what,
                                       llvm::APFloat value) {
  if (value.convertToDouble() >= 0.0)
    return success();
  return op->emitOpError() << what << " must be >= 0, got "
                           << formatNumber(value.convertToDouble());
}

/// The f32 tensor type of per-row statistics over the leading `rank`
/// dimensions of `input`.
static RankedTensorType statisticsType(RankedTensorType input, int64_t rank) {
  return RankedTensorType::get(input.getShape().take_front(rank),
                               Float32Type::get(input.getContext()));
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

#define MEMOPT_UNARY_VERIFIER(OP)                                              \
  LogicalResult OP::verify() {                                                 \
    return expectSameTypes(*this,                                              \
                           {{"operand 'input'", getInput()},                   \
                            {"result", getResult()}});                         \
  }
MEMOPT_UNARY_VERIFIER(NegOp)
MEMOPT_UNARY_VERIFIER(ExpOp)
MEMOPT_UNARY_VERIFIER(LogOp)
MEMOPT_UNARY_VERIFIER(SqrtOp)
MEMOPT_UNARY_VERIFIER(RsqrtOp)
MEMOPT_UNARY_VERIFIER(TanhOp)
MEMOPT_UNARY_VERIFIER(SigmoidOp)
MEMOPT_UNARY_VERIFIER(ReluOp)
MEMOPT_UNARY_VERIFIER(SiluOp)
MEMOPT_UNARY_VERIFIER(HardswishOp)
MEMOPT_UNARY_VERIFIER(HardsigmoidOp)
MEMOPT_UNARY_VERIFIER(MishOp)
MEMOPT_UNARY_VERIFIER(AbsOp)
MEMOPT_UNARY_VERIFIER(SignOp)
MEMOPT_UNARY_VERIFIER(SinOp)
MEMOPT_UNARY_VERIFIER(CosOp)
MEMOPT_UNARY_VERIFIER(ErfOp)
MEMOPT_UNARY_VERIFIER(Expm1Op)
MEMOPT_UNARY_VERIFIER(Log1pOp)
MEMOPT_UNARY_VERIFIER(SoftplusOp)
MEMOPT_UNARY_VERIFIER(TanOp)
MEMOPT_UNARY_VERIFIER(AsinOp)
MEMOPT_UNARY_VERIFIER(AcosOp)
MEMOPT_UNARY_VERIFIER(AtanOp)
MEMOPT_UNARY_VERIFIER(FloorOp)
MEMOPT_UNARY_VERIFIER(CeilOp)
MEMOPT_UNARY_VERIFIER(RoundOp)
MEMOPT_UNARY_VERIFIER(TruncOp)
MEMOPT_UNARY_VERIFIER(GeluOp)
MEMOPT_UNARY_VERIFIER(AddScalarOp)
MEMOPT_UNARY_VERIFIER(MulScalarOp)
MEMOPT_UNARY_VERIFIER(PowScalarOp)
#undef MEMOPT_UNARY_VERIFIER

#define MEMOPT_BINARY_VERIFIER(OP)                                             \
  LogicalResult OP::verify() {                                                 \
    return expectSameTypes(*this, {{"operand 'lhs'", getLhs()},                \
                                   {"operand 'rhs'", getRhs()},                \
                                   {"result", getResult()}});                  \
  }
MEMOPT_BINARY_VERIFIER(AddOp)
MEMOPT_BINARY_VERIFIER(SubOp)
MEMOPT_BINARY_VERIFIER(MulOp)
MEMOPT_BINARY_VERIFIER(DivOp)
MEMOPT_BINARY_VERIFIER(MaximumOp)
#undef MEMOPT_BINARY_VERIFIER

#define MEMOPT_ACTIVATION_GRAD_VERIFIER(OP, GETTER, NAME)                      \
  LogicalResult OP::verify() {                                                 \
    return expectSameTypes(*this, {{"operand '" NAME "'", GETTER()},           \
                                   {"operand 'grad'", getGrad()},              \
                                   {"result", getResult()}});                  \
  }
MEMOPT_ACTIVATION_GRAD_VERIFIER(ReluGradOp, getInput, "input")
MEMOPT_ACTIVATION_GRAD_VERIFIER(SiluGradOp, getInput, "input")
MEMOPT_ACTIVATION_GRAD_VERIFIER(HardswishGradOp, getInput, "input")
MEMOPT_ACTIVATION_GRAD_VERIFIER(HardsigmoidGradOp, getInput, "input")
MEMOPT_ACTIVATION_GRAD_VERIFIER(MishGradOp, getInput, "input")
MEMOPT_ACTIVATION_GRAD_VERIFIER(GeluGradOp, getInput, "input")
MEMOPT_ACTIVATION_GRAD_VERIFIER(TanhGradOp, getOutput, "output")
MEMOPT_ACTIVATION_GRAD_VERIFIER(SigmoidGradOp, getOutput, "output")
#undef MEMOPT_ACTIVATION_GRAD_VERIFIER

/// The bounds of a clamp: at least one, numbers, `min <= max`.
static LogicalResult verifyClampBounds(Operation *op,
                                       std::optional<APFloat> min,
                                       std::optional<APFloat> max) {
  if (!min && !max)
    return op->emitOpError() << "expected a 'min' or a 'max' bound";
  auto expectNumber = [&](StringRef name,
                          std::optional<APFloat> bound) -> LogicalResult {
    if (bound && bound->isNaN())
      return op->emitOpError() << "'" << name << "' must be a number, got nan";
    return success();
  };
  if (failed(expectNumber("min", min)) || failed(expectNumber("max", max)))
    return failure();
  if (min && max && min->convertToDouble() > max->convertToDouble())
    return op->emitOpError()
           << "'min' (" << formatNumber(min->convertToDouble())
           << ") must be <= 'max' (" << formatNumber(max->convertToDouble())
           << ")";
  return success();
}

LogicalResult ClampOp::verify() {
  if (failed(expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}})))
    return failure();
  return verifyClampBounds(*this, getMin(), getMax());
}

LogicalResult ClampGradOp::verify() {
  if (failed(expectSameTypes(*this, {{"operand 'input'", getInput()},
                                     {"operand 'grad'", getGrad()},
                                     {"result", getResult()}})))
    return failure();
  return verifyClampBounds(*this, getMin(), getMax());
}

LogicalResult CastOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  return expectType(*this, {"result", getResult()},
                    input.clone(result.getElementType()),
                    "a cast keeps the shape");
}

LogicalResult WhereOp::verify() {
  if (failed(expectSameTypes(*this,
                             {{"operand 'true_value'", getTrueValue()},
                              {"operand 'false_value'", getFalseValue()},
                              {"result", getResult()}})))
    return failure();
  RankedTensorType value = getTrueValue().getType();
  return expectType(*this, {"operand 'condition'", getCondition()},
                    value.clone(IntegerType::get(getContext(), 1)),
                    "the shape of the values");
}

LogicalResult CompareOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto lhs = dyn_cast<RankedTensorType>(operands[0].getType());
  if (!lhs)
    return failure();
  inferredReturnTypes.push_back(lhs.clone(IntegerType::get(context, 1)));
  return success();
}

LogicalResult CompareOp::verify() { return success(); }

LogicalResult MaskedFillOp::verify() {
  if (failed(expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}})))
    return failure();
  RankedTensorType input = getInput().getType();
  return expectType(*this, {"operand 'mask'", getMask()},
                    input.clone(IntegerType::get(getContext(), 1)),
                    "the shape of 'input'");
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  ConstantOp::Adaptor adaptor(operands, attributes, properties, regions);
  if (!adaptor.getValue())
    return failure();
  inferredReturnTypes.push_back(adaptor.getValue().getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  if (input.getElementType() != result.getElementType())
    return typeMismatch(*this, "result", result,
                        result.clone(input.getElementType()),
                        "a broadcast keeps the element type");
  if (failed(expectCount(*this, "'dims'", dims, input.getRank())))
    return failure();
  for (auto [index, dim] : llvm::enumerate(dims)) {
    if (failed(expectDim(*this, "'dims' entry", dim, result.getRank())))
      return failure();
    if (index > 0 && dims[index - 1] >= dim)
      return emitOpError() << "'dims' must be strictly increasing, got ["
                           << dims << "]";
    int64_t from = input.getDimSize(index);
    int64_t to = result.getDimSize(dim);
    if (from != to && from != 1)
      return emitOpError() << "operand dimension " << index << " (size "
                           << from << ") maps to result dimension " << dim
                           << " (size " << to
                           << "): sizes must be equal or the operand's 1";
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  if (input.getElementType() != result.getElementType())
    return typeMismatch(*this, "result", result,
                        result.clone(input.getElementType()),
                        "a reshape keeps the element type");
  if (input.getNumElements() != result.getNumElements())
    return emitOpError() << "result " << result << " has "
                         << result.getNumElements() << " elements, expected "
                         << input.getNumElements() << " (those of " << input
                         << ")";
  return success();
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = getInput().getType();
  ArrayRef<int64_t> perm = getPermutation();
  if (failed(expectCount(*this, "'perm' entries", perm, input.getRank())))
    return failure();
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t dim : perm) {
    if (failed(expectDim(*this, "'perm' entry", dim, input.getRank())))
      return failure();
    if (seen[dim])
      return emitOpError() << "'perm' must be a permutation, got [" << perm
                           << "]";
    seen[dim] = true;
    shape.push_back(input.getDimSize(dim));
  }
  return expectType(*this, {"result", getResult()}, input.clone(shape));
}

/// Computes the type of slicing `input`, or reports why the slice is invalid.
static FailureOr<RankedTensorType>
inferSliceType(Operation *op, RankedTensorType input, ArrayRef<int64_t> starts,
               ArrayRef<int64_t> limits, ArrayRef<int64_t> strides) {
  int64_t rank = input.getRank();
  if (failed(expectCount(op, "'starts'", starts, rank)) ||
      failed(expectCount(op, "'limits'", limits, rank)) ||
      failed(expectCount(op, "'strides'", strides, rank)) ||
      failed(expectPositive(op, "'strides' entry", strides)))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (starts[d] < 0 || starts[d] > limits[d] ||
        limits[d] > input.getDimSize(d))
      return op->emitOpError()
             << "dimension " << d << ": need 0 <= start <= limit <= "
             << input.getDimSize(d) << ", got start " << starts[d]
             << " and limit " << limits[d];
    shape.push_back(llvm::divideCeil(limits[d] - starts[d], strides[d]));
  }
  return input.clone(shape);
}

LogicalResult SliceOp::verify() {
  FailureOr<RankedTensorType> expected = inferSliceType(
      *this, getInput().getType(), getStarts(), getLimits(), getStrides());
  if (failed(expected))
    return failure();
  return expectType(*this, {"result", getResult()}, *expected);
}

LogicalResult SliceGradOp::verify() {
  FailureOr<RankedTensorType> expected = inferSliceType(
      *this, getResult().getType(), getStarts(), getLimits(), getStrides());
  if (failed(expected))
    return failure();
  return expectType(*this, {"operand 'grad'", getGrad()}, *expected,
                    "the slice of the result type");
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  RankedTensorType first = tensorType(getInputs().front());
  if (failed(expectDim(*this, "'dim'", getDim(), first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    if (index == 0)
      continue;
    RankedTensorType type = tensorType(input);
    SmallVector<int64_t> expected(first.getShape());
    expected[getDim()] = type.getRank() == first.getRank()
                             ? type.getDimSize(getDim())
                             : expected[getDim()];
    std::string name = ("input #" + Twine(index)).str();
    if (failed(expectType(*this, {name, input}, first.clone(expected),
                          "all inputs match the first except along 'dim'")))
      return failure();
    shape[getDim()] += type.getDimSize(getDim());
  }
  return expectType(*this, {"result", getResult()}, first.clone(shape));
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

static LogicalResult verifyReduce(Operation *op, RankedTensorType input,
                                  ArrayRef<int64_t> dims, Value result) {
  SmallVector<int64_t> shape;
  for (auto [index, dim] : llvm::enumerate(dims)) {
    if (failed(expectDim(op, "'dims' entry", dim, input.getRank())))
      return failure();
    if (index > 0 && dims[index - 1] >= dim)
      return op->emitOpError()
             << "'dims' must be sorted and unique, got [" << dims << "]";
  }
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(input.getDimSize(d));
  // The element types are the dtype table's (memopt_reduce's row).
  return expectType(op, {"result", result}, tensorType(result).clone(shape),
                    "the input without the reduced dimensions");
}

LogicalResult ReduceSumOp::verify() {
  return verifyReduce(*this, getInput().getType(), getDims(), getResult());
}
LogicalResult ReduceMeanOp::verify() {
  return verifyReduce(*this, getInput().getType(), getDims(), getResult());
}
LogicalResult ReduceMaxOp::verify() {
  return verifyReduce(*this, getInput().getType(), getDims(), getResult());
}
LogicalResult ReduceSumSquaresOp::verify() {
  return verifyReduce(*this, getInput().getType(), getDims(), getResult());
}

LogicalResult SoftmaxOp::verify() {
  if (failed(expectDim(*this, "'dim'", getDim(),
                       getInput().getType().getRank())))
    return failure();
  return expectSameTypes(
      *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
}

LogicalResult LogSoftmaxOp::verify() {
  if (failed(expectDim(*this, "'dim'", getDim(),
                       getInput().getType().getRank())))
    return failure();
  return expectSameTypes(
      *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
}

LogicalResult SoftmaxGradOp::verify() {
  if (failed(expectDim(*this, "'dim'", getDim(),
                       getOutput().getType().getRank())))
    return failure();
  return expectSameTypes(*this, {{"operand 'output'", getOutput()},
                                 {"operand 'grad'", getGrad()},
                                 {"result", getResult()}});
}

LogicalResult LogSoftmaxGradOp::verify() {
  if (failed(expectDim(*this, "'dim'", getDim(),
                       getOutput().getType().getRank())))
    return failure();
  return expectSameTypes(*this, {{"operand 'output'", getOutput()},
                                 {"operand 'grad'", getGrad()},
                                 {"result", getResult()}});
}

/// Checks that `weight` covers trailing dimensions of `input` and returns
/// the number of leading (per-row) dimensions.
static FailureOr<int64_t> verifyNormWeight(Operation *op,
                                           RankedTensorType input,
                                           Value weight) {
  RankedTensorType weightType = tensorType(weight);
  int64_t rank = weightType.getRank();
  if (rank < 1 || rank > input.getRank())
    return op->emitOpError()
           << "operand 'weight' must have rank 1 to " << input.getRank()
           << " (the normalised trailing dimensions of " << input
           << "), got " << weightType;
  ArrayRef<int64_t> trailing = input.getShape().take_back(rank);
  if (weightType.getShape() != trailing)
    return typeMismatch(op, "operand 'weight'", weightType,
                        weightType.clone(trailing),
                        "the trailing dimensions of the input");
  return input.getRank() - rank;
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = getInput().getType();
  FailureOr<int64_t> rows = verifyNormWeight(*this, input, getWeight());
  if (failed(rows) ||
      failed(expectInRange(*this, "'eps'", getEpsilon(), 0.0, 1.0,
                           /*closedHigh=*/false, /*closedLow=*/false)) ||
      failed(expectSameTypes(*this, {{"operand 'weight'", getWeight()},
                                     {"operand 'bias'", getBias()}})) ||
      failed(expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}})))
    return failure();
  RankedTensorType stats = statisticsType(input, *rows);
  if (failed(expectType(*this, {"result 'mean'", getMean()}, stats,
                        "f32 over the leading dimensions")))
    return failure();
  return expectType(*this, {"result 'rstd'", getRstd()}, stats,
                    "f32 over the leading dimensions");
}

LogicalResult LayerNormGradOp::verify() {
  RankedTensorType input = getInput().getType();
  FailureOr<int64_t> rows = verifyNormWeight(*this, input, getWeight());
  if (failed(rows) ||
      failed(expectSameTypes(*this, {{"operand 'input'", getInput()},
                                     {"operand 'grad'", getGrad()},
                                     {"result 'grad_input'", getGradInput()}})) ||
      failed(expectSameTypes(*this,
                             {{"operand 'weight'", getWeight()},
                              {"result 'grad_weight'", getGradWeight()},
                              {"result 'grad_bias'", getGradBias()}})))
    return failure();
  RankedTensorType stats = statisticsType(input, *rows);
  if (failed(expectType(*this, {"operand 'mean'", getMean()}, stats,
                        "f32 over the leading dimensions")))
    return failure();
  return expectType(*this, {"operand 'rstd'", getRstd()}, stats,
                    "f32 over the leading dimensions");
}

LogicalResult RmsNormOp::verify() {
  RankedTensorType input = getInput().getType();
  FailureOr<int64_t> rows = verifyNormWeight(*this, input, getWeight());
  if (failed(rows) ||
      failed(expectInRange(*this, "'eps'", getEpsilon(), 0.0, 1.0,
                           /*closedHigh=*/false, /*closedLow=*/false)) ||
      failed(expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}})))
    return failure();
  return expectType(*this, {"result 'rstd'", getRstd()},
                    statisticsType(input, *rows),
                    "f32 over the leading dimensions");
}

LogicalResult RmsNormGradOp::verify() {
  RankedTensorType input = getInput().getType();
  FailureOr<int64_t> rows = verifyNormWeight(*this, input, getWeight());
  if (failed(rows) ||
      failed(expectSameTypes(*this, {{"operand 'input'", getInput()},
                                     {"operand 'grad'", getGrad()},
                                     {"result 'grad_input'", getGradInput()}})) ||
      failed(expectSameTypes(*this,
                             {{"operand 'weight'", getWeight()},
                              {"result 'grad_weight'", getGradWeight()}})))
    return failure();
  return expectType(*this, {"operand 'rstd'", getRstd()},
                    statisticsType(input, *rows),
                    "f32 over the leading dimensions");
}

/// Checks the per-channel tensors of batch normalisation: each is
/// `tensor<C x f32>` with C the input's dimension 1.
static LogicalResult verifyChannels(Operation *op, Value input,
                                    std::initializer_list<Named> perChannel) {
  if (failed(expectMinRank(op, {"operand 'input'", input}, 2)))
    return failure();
  RankedTensorType inputType = tensorType(input);
  auto expected = RankedTensorType::get({inputType.getDimSize(1)},
                                        Float32Type::get(op->getContext()));
  for (const Named &named : perChannel)
    if (failed(expectType(op, named, expected,
                          "f32 per channel (dimension 1 of the input)")))
      return failure();
  return success();
}

LogicalResult BatchNormOp::verify() {
  if (failed(verifyChannels(*this, getInput(),
                            {{"operand 'weight'", getWeight()},
                             {"operand 'bias'", getBias()},
                             {"operand 'running_mean'", getRunningMean()},
                             {"operand 'running_var'", getRunningVar()},
                             {"result 'mean'", getMean()},
                             {"result 'rstd'", getRstd()},
                             {"result 'new_running_mean'", getNewRunningMean()},
                             {"result 'new_running_var'",
                              getNewRunningVar()}})) ||
      failed(expectInRange(*this, "'eps'", getEpsilon(), 0.0, 1.0,
                           /*closedHigh=*/false, /*closedLow=*/false)) ||
      failed(expectInRange(*this, "'momentum'", getMomentum(), 0.0, 1.0,
                           /*closedHigh=*/true)))
    return failure();
  return expectSameTypes(
      *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
}

LogicalResult BatchNormGradOp::verify() {
  if (failed(expectSameTypes(*this, {{"operand 'input'", getInput()},
                                     {"operand 'grad'", getGrad()},
                                     {"result 'grad_input'", getGradInput()}})))
    return failure();
  return verifyChannels(*this, getInput(),
                        {{"operand 'weight'", getWeight()},
                         {"operand 'mean'", getMean()},
                         {"operand 'rstd'", getRstd()},
                         {"result 'grad_weight'", getGradWeight()},
                         {"result 'grad_bias'", getGradBias()}});
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (failed(expectMinRank(*this, {"operand 'lhs'", getLhs()}, 2)) ||
      failed(expectMinRank(*this, {"operand 'rhs'", getRhs()}, 2)))
    return failure();
  RankedTensorType lhs = getLhs().getType();
  RankedTensorType rhs = getRhs().getType();
  RankedTensorType result = getResult().getType();
  if (lhs.getElementType() != rhs.getElementType())
    return typeMismatch(*this, "operand 'rhs'", rhs,
                        rhs.clone(lhs.getElementType()),
                        "the element type of 'lhs'");

  ArrayRef<int64_t> lhsShape = lhs.getShape(), rhsShape = rhs.getShape();
  int64_t m = lhsShape[lhs.getRank() - (getTransposeLhs() ? 1 : 2)];
  int64_t kLhs = lhsShape[lhs.getRank() - (getTransposeLhs() ? 2 : 1)];
  int64_t kRhs = rhsShape[rhs.getRank() - (getTransposeRhs() ? 1 : 2)];
  int64_t n = rhsShape[rhs.getRank() - (getTransposeRhs() ? 2 : 1)];
  if (kLhs != kRhs)
    return emitOpError() << "contracting dimensions differ: 'lhs' " << lhs
                         << " has " << kLhs << ", 'rhs' " << rhs << " has "
                         << kRhs;

  ArrayRef<int64_t> lhsBatch = lhsShape.drop_back(2);
  ArrayRef<int64_t> rhsBatch = rhsShape.drop_back(2);
  if (!lhsBatch.empty() && !rhsBatch.empty() && lhsBatch != rhsBatch)
    return emitOpError() << "batch dimensions differ: 'lhs' " << lhs
                         << ", 'rhs' " << rhs
                         << " (they must be equal, or one operand a matrix)";
  SmallVector<int64_t> shape(lhsBatch.empty() ? rhsBatch : lhsBatch);
  shape.append({m, n});

  // The result's element type is the dtype table's (memopt_matmul's row).
  return expectType(*this, {"result", getResult()}, result.clone(shape));
}

//===----------------------------------------------------------------------===//
// Nf4MatmulOp
//===----------------------------------------------------------------------===//

/// Checks that `packed` (operand `name`) holds the NF4 bytes of a weight of
/// shape `shape` (attribute `shapeName`).
static LogicalResult verifyNf4Weight(Operation *op, StringRef name,
                                     TypedValue<RankedTensorType> packed,
                                     StringRef shapeName,
                                     ArrayRef<int64_t> shape) {
  if (shape[0] <= 0 || shape[1] <= 0)
    return op->emitOpError() << "'" << shapeName
                             << "' must have positive extents, got ["
                             << shape[0] << ", " << shape[1] << "]";
  int64_t numel = 0;
  if (llvm::MulOverflow(shape[0], shape[1], numel))
    return op->emitOpError() << "'" << shapeName
                             << "' has more than 2^63 elements";
  auto bytes = static_cast<int64_t>(memopt_nf4_packed_bytes(numel));
  std::string what = ("operand '" + name + "'").str();
  std::string why = ("the NF4 bytes of the '" + shapeName + "' weight").str();
  return expectType(op, {what, packed}, packed.getType().clone({bytes}), why);
}

LogicalResult Nf4MatmulOp::verify() {
  if (failed(expectMinRank(*this, {"operand 'lhs'", getLhs()}, 2)))
    return failure();
  ArrayRef<int64_t> weight = getRhsShape();
  if (failed(verifyNf4Weight(*this, "rhs", getRhs(), "rhs_shape", weight)))
    return failure();
  RankedTensorType lhs = getLhs().getType();
  bool transposed = getTransposeRhs();
  int64_t k = weight[transposed ? 1 : 0], n = weight[transposed ? 0 : 1];
  if (lhs.getShape().back() != k)
    return emitOpError() << "contracting dimensions differ: 'lhs' " << lhs
                         << " has " << lhs.getShape().back()
                         << ", the weight [" << weight[0] << ", " << weight[1]
                         << "] has " << k;
  SmallVector<int64_t> shape(lhs.getShape().drop_back());
  shape.push_back(n);
  return expectType(*this, {"result", getResult()}, lhs.clone(shape));
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

/// Checks that `paddingIdx`, when given, names a row of `table`.
static LogicalResult verifyPaddingIdx(Operation *op,
                                      std::optional<int64_t> paddingIdx,
                                      RankedTensorType table) {
  int64_t rows = table.getDimSize(0);
  if (!paddingIdx || (*paddingIdx >= 0 && *paddingIdx < rows))
    return success();
  return op->emitOpError() << "'padding_idx' must be a row of the " << table
                           << " table, in [0, " << rows << "), got "
                           << *paddingIdx;
}

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, {"operand 'weight'", getWeight()}, 2)) ||
      failed(verifyPaddingIdx(*this, getPaddingIdx(), getWeight().getType())))
    return failure();
  RankedTensorType weight = getWeight().getType();
  SmallVector<int64_t> shape(getIndices().getType().getShape());
  shape.push_back(weight.getDimSize(1));
  return expectType(*this, {"result", getResult()}, weight.clone(shape),
                    "the index shape followed by the row size");
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(expectRank(*this, {"result", getResult()}, 2)) ||
      failed(verifyPaddingIdx(*this, getPaddingIdx(), getResult().getType())))
    return failure();
  RankedTensorType table = getResult().getType();
  SmallVector<int64_t> shape(getIndices().getType().getShape());
  shape.push_back(table.getDimSize(1));
  return expectType(*this, {"operand 'grad'", getGrad()}, table.clone(shape),
                    "the index shape followed by the row size");
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Output extent of a window of `kernel` elements sliding over `size`, or
/// std::nullopt when the padded input or the dilated window does not fit in
/// 64 bits (attributes are user input: the arithmetic must not overflow).
static std::optional<int64_t> windowOutputSize(int64_t size, int64_t kernel,
                                               int64_t stride, int64_t padding,
                                               int64_t dilation = 1) {
  std::optional<int64_t> span = llvm::checkedMul(dilation, kernel - 1);
  if (span)
    span = llvm::checkedAdd(*span, int64_t(1));
  std::optional<int64_t> padded = llvm::checkedMul(padding, int64_t(2));
  if (padded)
    padded = llvm::checkedAdd(size, *padded);
  if (!span || !padded)
    return std::nullopt;
  if (*padded < *span)
    return 0;
  return (*padded - *span) / stride + 1;
}

/// Computes the result type of a conv2d of `input` by `filter`, or reports
/// why the convolution is invalid.
template <typename ConvOp>
static FailureOr<RankedTensorType> inferConvType(ConvOp op, Named input,
                                                 Named filter) {
  Operation *raw = op.getOperation();
  if (failed(expectRank(raw, input, 4)) || failed(expectRank(raw, filter, 4)) ||
      failed(expectPositive(raw, "'strides' entry", op.getStrides())) ||
      failed(expectPositive(raw, "'dilations' entry", op.getDilations())) ||
      failed(expectPositive(raw, "'padding' entry", op.getPadding(), 0)) ||
      failed(expectPositive(raw, "'groups'", {op.getGroupsAttr().getInt()})))
    return failure();
  RankedTensorType inputType = tensorType(input.value);
  RankedTensorType filterType = tensorType(filter.value);
  if (inputType.getElementType() != filterType.getElementType())
    return typeMismatch(raw, filter.name, filterType,
                        filterType.clone(inputType.getElementType()),
                        "the element type of the input");
  int64_t groups = op.getGroupsAttr().getInt();
  int64_t channels = inputType.getDimSize(1);
  int64_t outChannels = filterType.getDimSize(0);
  if (channels % groups != 0 || outChannels % groups != 0)
    return op.emitOpError() << "'groups' (" << groups
                            << ") must divide the input channels ("
                            << channels << ") and the output channels ("
                            << outChannels << ")";
  if (filterType.getDimSize(1) != channels / groups)
    return op.emitOpError()
           << filter.name << " " << filterType << " has "
           << filterType.getDimSize(1)
           << " input channels per group, expected " << channels / groups
           << " (input channels / groups)";
  SmallVector<int64_t> shape = {inputType.getDimSize(0), outChannels};
  for (int d = 0; d < 2; ++d) {
    std::optional<int64_t> size = windowOutputSize(
        inputType.getDimSize(2 + d), filterType.getDimSize(2 + d),
        op.getStrides()[d], op.getPadding()[d], op.getDilations()[d]);
    if (!size)
      return op.emitOpError()
             << "'padding' or 'dilations' overflow 64-bit sizes";
    if (*size <= 0)
      return op.emitOpError() << "the filter " << filterType
                              << " does not fit in the padded input "
                              << inputType;
    shape.push_back(*size);
  }
  return inputType.clone(shape);
}

LogicalResult Conv2DOp::verify() {
  FailureOr<RankedTensorType> expected = inferConvType(
      *this, {"operand 'input'", getInput()}, {"operand 'filter'", getFilter()});
  if (failed(expected))
    return failure();
  return expectType(*this, {"result", getResult()}, *expected);
}

LogicalResult Conv2DGradInputOp::verify() {
  FailureOr<RankedTensorType> expected =
      inferConvType(*this, {"result", getResult()},
                    {"operand 'filter'", getFilter()});
  if (failed(expected))
    return failure();
  return expectType(*this, {"operand 'grad'", getGrad()}, *expected,
                    "the conv2d of the result type by the filter");
}

LogicalResult Conv2DGradFilterOp::verify() {
  FailureOr<RankedTensorType> expected = inferConvType(
      *this, {"operand 'input'", getInput()}, {"result", getResult()});
  if (failed(expected))
    return failure();
  return expectType(*this, {"operand 'grad'", getGrad()}, *expected,
                    "the conv2d of the input by the result type");
}

/// Computes the result type of pooling `input`, or reports why the pooling
/// is invalid.
static FailureOr<RankedTensorType>
inferPoolType(Operation *op, Named input, ArrayRef<int64_t> kernel,
              ArrayRef<int64_t> strides, ArrayRef<int64_t> padding) {
  if (failed(expectRank(op, input, 4)) ||
      failed(expectPositive(op, "'kernel' entry", kernel)) ||
      failed(expectPositive(op, "'strides' entry", strides)) ||
      failed(expectPositive(op, "'padding' entry", padding, 0)))
    return failure();
  RankedTensorType type = tensorType(input.value);
  SmallVector<int64_t> shape(type.getShape().take_front(2));
  for (int d = 0; d < 2; ++d) {
    if (padding[d] > kernel[d] / 2)
      return op->emitOpError() << "'padding' entry " << padding[d]
                               << " exceeds half the kernel (" << kernel[d]
                               << ")";
    std::optional<int64_t> size = windowOutputSize(
        type.getDimSize(2 + d), kernel[d], strides[d], padding[d]);
    if (!size)
      return op->emitOpError() << "'kernel' or 'padding' overflow 64-bit sizes";
    if (*size <= 0)
      return op->emitOpError() << "the kernel [" << kernel
                               << "] does not fit in the padded input "
                               << type;
    shape.push_back(*size);
  }
  return type.clone(shape);
}

LogicalResult MaxPool2DOp::verify() {
  FailureOr<RankedTensorType> expected =
      inferPoolType(*this, {"operand 'input'", getInput()}, getKernel(),
                    getStrides(), getPadding());
  if (failed(expected))
    return failure();
  return expectType(*this, {"result", getResult()}, *expected);
}

LogicalResult AvgPool2DOp::verify() {
  FailureOr<RankedTensorType> expected =
      inferPoolType(*this, {"operand 'input'", getInput()}, getKernel(),
                    getStrides(), getPadding());
  if (failed(expected))
    return failure();
  return expectType(*this, {"result", getResult()}, *expected);
}

LogicalResult MaxPool2DGradOp::verify() {
  if (failed(expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}})))
    return failure();
  FailureOr<RankedTensorType> expected =
      inferPoolType(*this, {"operand 'input'", getInput()}, getKernel(),
                    getStrides(), getPadding());
  if (failed(expected))
    return failure();
  return expectType(*this, {"operand 'grad'", getGrad()}, *expected,
                    "the pooled input type");
}

LogicalResult AvgPool2DGradOp::verify() {
  FailureOr<RankedTensorType> expected =
      inferPoolType(*this, {"result", getResult()}, getKernel(), getStrides(),
                    getPadding());
  if (failed(expected))
    return failure();
  return expectType(*this, {"operand 'grad'", getGrad()}, *expected,
                    "the pooled result type");
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  if (failed(expectInRange(*this, "'p'", getP(), 0.0, 1.0,
                           /*closedHigh=*/false)))
    return failure();
  int64_t stream = getStreamAttr().getInt();
  if (stream < 0)
    return emitOpError() << "'stream' must be >= 0, got " << stream;
  int64_t rank = getType().getRank();
  if (getShared() > static_cast<uint64_t>(rank))
    return emitOpError() << "'shared' must be between 0 and the rank "
                         << rank << ", got " << getShared();
  return expectSameTypes(
      *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
}

int64_t DropoutOp::getGroupSize() {
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t group = 1;
  for (int64_t size : shape.take_back(getShared()))
    group *= size;
  return group;
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

/// The checks shared by memopt.attention and its gradient: shapes of q, k,
/// v, the mask, out and lse, and the attributes.
static LogicalResult verifyAttention(Operation *op, Value q, Value k, Value v,
                                     Value mask, Type out, Type lse,
                                     double scale, llvm::APFloat dropoutP,
                                     int64_t stream) {
  for (Named named : {Named{"operand 'q'", q}, Named{"operand 'k'", k},
                      Named{"operand 'v'", v}}) {
    int64_t rank = tensorType(named.value).getRank();
    if (rank < 2 || rank > 4)
      return op->emitOpError()
             << named.name << " must have rank 2 to 4 ([batch, heads, "
             << "sequence, width] without any of the first two), got "
             << named.value.getType();
  }
  RankedTensorType qType = tensorType(q), kType = tensorType(k),
                   vType = tensorType(v);
  int64_t rank = qType.getRank();
  Type element = qType.getElementType();
  for (Named named : {Named{"operand 'k'", k}, Named{"operand 'v'", v}}) {
    RankedTensorType type = tensorType(named.value);
    if (type.getRank() != rank || type.getElementType() != element ||
        type.getShape().drop_back(2) != qType.getShape().drop_back(2))
      return op->emitOpError()
             << named.name << " has type " << type
             << ", expected the element type and batch dimensions of "
             << "operand 'q' " << qType;
  }
  int64_t d = qType.getDimSize(rank - 1);
  int64_t sk = kType.getDimSize(rank - 2), dv = vType.getDimSize(rank - 1);
  if (kType.getDimSize(rank - 1) != d)
    return op->emitOpError() << "operand 'k' " << kType
                             << " has a width other than operand 'q''s ("
                             << d << ")";
  if (vType.getDimSize(rank - 2) != sk)
    return op->emitOpError() << "operand 'v' " << vType
                             << " has a sequence length other than operand "
                             << "'k''s (" << sk << ")";
  SmallVector<int64_t> scores(qType.getShape().drop_back());
  scores.push_back(sk);
  if (mask) {
    RankedTensorType maskType = tensorType(mask);
    bool broadcastable = maskType.getRank() == rank;
    for (int64_t i = 0; broadcastable && i < rank; ++i)
      broadcastable = maskType.getDimSize(i) == 1 ||
                      maskType.getDimSize(i) == scores[i];
    if (!broadcastable)
      return op->emitOpError()
             << "operand 'mask' " << maskType << " does not broadcast to the "
             << "scores' shape " << RankedTensorType::get(scores, element)
             << " (each dimension equal or 1)";
  }
  SmallVector<int64_t> outShape(qType.getShape().drop_back());
  outShape.push_back(dv);
  if (out != qType.clone(outShape))
    return typeMismatch(op, "the output", out, qType.clone(outShape),
                        "operand 'q''s batch and sequence, operand 'v''s "
                        "width");
  Type expectedLse = RankedTensorType::get(
      qType.getShape().drop_back(), Float32Type::get(op->getContext()));
  if (lse != expectedLse)
    return typeMismatch(op, "'lse'", lse, expectedLse,
                        "one f32 per query row");
  if (!std::isfinite(scale))
    return op->emitOpError() << "'scale' must be finite, got "
                             << formatNumber(scale);
  if (failed(expectInRange(op, "'dropout'", dropoutP, 0.0, 1.0,
                           /*closedHigh=*/false)))
    return failure();
  if (stream < 0)
    return op->emitOpError() << "'stream' must be >= 0, got " << stream;
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getQ(), getK(), getV(), getMask(),
                         getOut().getType(), getLse().getType(),
                         getScale().convertToDouble(), getDropoutP(),
                         getStream());
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttention(*this, getQ(), getK(), getV(), getMask(),
                         getOut().getType(), getLse().getType(),
                         getScale().convertToDouble(), getDropoutP(),
                         getStream());
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Checks that `labels` has the shape of `logits` without its class
/// dimension.
static LogicalResult verifyLabels(Operation *op, Value logits, Value labels) {
  if (failed(expectMinRank(op, {"operand 'logits'", logits}, 1)))
    return failure();
  RankedTensorType logitsType = tensorType(logits);
  RankedTensorType labelsType = tensorType(labels);
  return expectType(op, {"operand 'labels'", labels},
                    labelsType.clone(logitsType.getShape().drop_back()),
                    "the shape of 'logits' without the class dimension");
}

/// Checks that the label smoothing lies in [0, 1).
static LogicalResult verifyLabelSmoothing(Operation *op,
                                          llvm::APFloat labelSmoothing) {
  return expectInRange(op, "'label_smoothing'", labelSmoothing, 0.0, 1.0,
                       /*closedHigh=*/false);
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLabelSmoothing(*this, getLabelSmoothing())))
    return failure();
  return verifyLabels(*this, getLogits(), getLabels());
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyLabelSmoothing(*this, getLabelSmoothing())) ||
      failed(verifyLabels(*this, getLogits(), getLabels())))
    return failure();
  return expectSameTypes(
      *this, {{"operand 'logits'", getLogits()}, {"result", getResult()}});
}

/// The checks shared by the fused linear cross-entropies and their
/// gradients but the weight's, for `classes` classes.
static LogicalResult verifyLinearCrossEntropy(Operation *op, Value x,
                                              int64_t classes, Value labels,
                                              Value bias, Value lse,
                                              int64_t chunk) {
  RankedTensorType xType = tensorType(x);
  if (bias && failed(expectType(op, {"operand 'bias'", bias},
                                xType.clone({classes}),
                                "one per class, as 'w'")))
    return failure();
  RankedTensorType labelsType = tensorType(labels);
  if (failed(expectType(op, {"operand 'labels'", labels},
                        labelsType.clone(xType.getShape().drop_back()),
                        "the shape of 'x' without its width")))
    return failure();
  if (failed(expectType(op, {"'lse'", lse},
                        RankedTensorType::get(
                            labelsType.getShape(),
                            Float32Type::get(op->getContext())),
                        "one f32 per item")))
    return failure();
  if (chunk < 1 || chunk > std::max<int64_t>(classes, 1))
    return op->emitOpError() << "'chunk' must be in [1, " << classes
                             << "] (the classes), got " << chunk;
  return success();
}

/// memopt.linear_cross_entropy's and its gradient's checks: w is [classes,
/// width of x] (its element type is x's or f32: the dtype table's).
static LogicalResult verifyLinearCrossEntropy(Operation *op, Value x, Value w,
                                              Value labels, Value bias,
                                              Value lse, int64_t chunk) {
  if (failed(expectMinRank(op, {"operand 'x'", x}, 1)) ||
      failed(expectRank(op, {"operand 'w'", w}, 2)))
    return failure();
  RankedTensorType wType = tensorType(w);
  int64_t dim = tensorType(x).getShape().back(), classes = wType.getDimSize(0);
  if (wType.getDimSize(1) != dim)
    return expectType(op, {"operand 'w'", w}, wType.clone({classes, dim}),
                      "[classes, width of 'x']");
  return verifyLinearCrossEntropy(op, x, classes, labels, bias, lse, chunk);
}

/// memopt.nf4_linear_cross_entropy's and its gradient's checks: w holds the
/// NF4 bytes of a [classes, width of x] weight.
static LogicalResult
verifyNf4LinearCrossEntropy(Operation *op, Value x,
                            TypedValue<RankedTensorType> w,
                            ArrayRef<int64_t> wShape, Value labels, Value bias,
                            Value lse, int64_t chunk) {
  if (failed(expectMinRank(op, {"operand 'x'", x}, 1)) ||
      failed(verifyNf4Weight(op, "w", w, "w_shape", wShape)))
    return failure();
  int64_t dim = tensorType(x).getShape().back();
  if (wShape[1] != dim)
    return op->emitOpError() << "'w_shape' [" << wShape[0] << ", "
                             << wShape[1] << "] must be [classes, " << dim
                             << "] (the width of 'x')";
  return verifyLinearCrossEntropy(op, x, wShape[0], labels, bias, lse, chunk);
}

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyLinearCrossEntropy(*this, getX(), getW(), getLabels(),
                                  getBias(), getLse(), getChunk());
}

LogicalResult Nf4LinearCrossEntropyOp::verify() {
  return verifyNf4LinearCrossEntropy(*this, getX(), getW(), getWShape(),
                                     getLabels(), getBias(), getLse(),
                                     getChunk());
}

/// The bias gradient of a fused linear cross-entropy's gradient: there
/// exactly when there is a bias, of its type.
static LogicalResult verifyBiasGradient(Operation *op, Value bias,
                                        Value gradBias) {
  if (static_cast<bool>(bias) != static_cast<bool>(gradBias))
    return op->emitOpError()
           << "has a bias gradient exactly when it has a bias";
  if (bias)
    return expectType(op, {"result 'grad_bias'", gradBias}, bias.getType());
  return success();
}

LogicalResult Nf4LinearCrossEntropyGradOp::verify() {
  if (failed(verifyNf4LinearCrossEntropy(*this, getX(), getW(), getWShape(),
                                         getLabels(), getBias(), getLse(),
                                         getChunk())) ||
      failed(expectType(*this, {"result 'grad_x'", getGradX()},
                        getX().getType())))
    return failure();
  return verifyBiasGradient(*this, getBias(), getGradBias());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyLinearCrossEntropy(*this, getX(), getW(), getLabels(),
                                      getBias(), getLse(), getChunk())) ||
      failed(expectType(*this, {"result 'grad_x'", getGradX()},
                        getX().getType())))
    return failure();
  if (failed(expectType(*this, {"result 'grad_w'", getGradW()},
                        getW().getType())))
    return failure();
  return verifyBiasGradient(*this, getBias(), getGradBias());
}

// The operand and result types say all there is to check.
LogicalResult LabelCountOp::verify() { return success(); }

LogicalResult MseLossOp::verify() {
  return expectSameTypes(*this, {{"operand 'input'", getInput()},
                                 {"operand 'target'", getTarget()}});
}

LogicalResult MseLossGradOp::verify() {
  return expectSameTypes(*this, {{"operand 'input'", getInput()},
                                 {"operand 'target'", getTarget()},
                                 {"result", getResult()}});
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

LogicalResult SgdUpdateOp::verify() {
  if (failed(expectNonNegative(*this, "'lr'", getLr())) ||
      failed(expectNonNegative(*this, "'momentum'", getMomentum())) ||
      failed(expectNonNegative(*this, "'weight_decay'", getWeightDecay())))
    return failure();
  return expectSameTypes(
      *this, {{"operand 'param'", getParam()},
              {"operand 'grad'", getGrad()},
              {"operand 'momentum_buffer'", getMomentumBuffer()},
              {"result 'new_param'", getNewParam()},
              {"result 'new_momentum_buffer'", getNewMomentumBuffer()}});
}

LogicalResult AdamWUpdateOp::verify() {
  if (failed(expectNonNegative(*this, "'lr'", getLr())) ||
      failed(expectInRange(*this, "'beta1'", getBeta1(), 0.0, 1.0,
                           /*closedHigh=*/false)) ||
      failed(expectInRange(*this, "'beta2'", getBeta2(), 0.0, 1.0,
                           /*closedHigh=*/false)) ||
      failed(expectInRange(*this, "'eps'", getEps(), 0.0, 1.0,
                           /*closedHigh=*/false, /*closedLow=*/false)) ||
      failed(expectNonNegative(*this, "'weight_decay'", getWeightDecay())))
    return failure();
  if (failed(expectSameTypes(*this, {{"operand 'param'", getParam()},
                                     {"operand 'grad'", getGrad()},
                                     {"result 'new_param'", getNewParam()}})))
    return failure();
  if (!hasQuantizedState())
    return expectSameTypes(*this,
                           {{"operand 'param'", getParam()},
                            {"operand 'exp_avg'", getExpAvg()},
                            {"operand 'exp_avg_sq'", getExpAvgSq()},
                            {"result 'new_exp_avg'", getNewExpAvg()},
                            {"result 'new_exp_avg_sq'", getNewExpAvgSq()}});
  // 8-bit moments: the packed bytes of the parameter's elements.
  if (!tensorType(getParam()).getElementType().isF32())
    return emitOpError() << "has 8-bit moments, which update f32 parameters "
                            "only, not "
                         << getParam().getType();
  int64_t n = tensorType(getParam()).getNumElements();
  auto packed = RankedTensorType::get({runtime::quantizedStateBytes(n)},
                                      IntegerType::get(getContext(), 8));
  if (failed(expectType(*this, {"operand 'exp_avg'", getExpAvg()}, packed,
                        "the packed 8-bit moments of the parameter")))
    return failure();
  return expectSameTypes(*this, {{"operand 'exp_avg'", getExpAvg()},
                                 {"operand 'exp_avg_sq'", getExpAvgSq()},
                                 {"result 'new_exp_avg'", getNewExpAvg()},
                                 {"result 'new_exp_avg_sq'", getNewExpAvgSq()}});
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

LogicalResult UnscaleOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  // Operands are the scale followed by the gradients.
  for (Value grad : operands.drop_front())
    inferredReturnTypes.push_back(grad.getType());
  inferredReturnTypes.push_back(
      RankedTensorType::get({}, IntegerType::get(context, 1)));
  return success();
}

LogicalResult UnscaleOp::verify() {
  if (getGrads().empty())
    return emitOpError() << "needs at least one gradient";
  return success();
}

LogicalResult ScaleByOp::verify() {
  return expectSameTypes(
      *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
}

LogicalResult UpdateScaleOp::verify() {
  double growth = getGrowthFactor().convertToDouble();
  if (growth <= 1.0)
    return emitOpError() << "'growth' must be > 1, got "
                         << formatNumber(growth);
  if (failed(expectInRange(*this, "'backoff'", getBackoffFactor(), 0.0, 1.0,
                           /*closedHigh=*/false, /*closedLow=*/false)))
    return failure();
  int64_t interval = getGrowthIntervalAttr().getInt();
  if (interval < 1)
    return emitOpError() << "'interval' must be >= 1, got " << interval;
  return success();
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

LogicalResult KernelOp::verify() {
  StringRef kernel = getKernel();
  std::optional<RegisteredOperationName> op =
      RegisteredOperationName::lookup(kernel, getContext());
  // Besides memopt's ops, a kernel runs the upstream collectives of data
  // parallelism and ZeRO (--memopt-accumulate, --memopt-shard-optimizer).
  bool isCollective = isCollectiveKernel(kernel);
  if ((!kernel.starts_with("memopt.") && !isCollective) || !op ||
      op->getTypeID() == TypeID::get<KernelOp>())
    return emitOpError() << "'" << kernel
                         << "' is not a memopt tensor op";
  if (getOuts().empty())
    return emitOpError() << "needs at least one output buffer";
  // Bufferization may write kernels no tensor op had (the f32 passes of a
  // split reduction): check them against the runtime's dtype table too.
  return verifyRuntimeDTypes(*this, kernel, getIns(), getOuts());
}

void KernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &input : getInsMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &input,
                         SideEffects::DefaultResource::get());
  for (OpOperand &output : getOutsMutable())
    effects.emplace_back(MemoryEffects::Write::get(), &output,
                         SideEffects::DefaultResource::get());
}

//===----------------------------------------------------------------------===//
// InPlaceOpInterface: the (result, operand) pairs an update entry may write
// in place (runtime.h: each new state over the state it replaces). The
// elementwise ops, softmax, cast, increment and scale_loss keep the
// interface's default, any result over any operand.
//===----------------------------------------------------------------------===//

static bool isPairOf(unsigned resultIndex, unsigned operandIndex,
                     ArrayRef<std::pair<unsigned, unsigned>> pairs) {
  return llvm::is_contained(pairs, std::make_pair(resultIndex, operandIndex));
}

bool SgdUpdateOp::mayWriteResultOver(unsigned resultIndex,
                                     unsigned operandIndex) {
  // new_param over param, new_momentum_buffer over momentum_buffer.
  return isPairOf(resultIndex, operandIndex, {{0, 0}, {1, 2}});
}

bool AdamWUpdateOp::mayWriteResultOver(unsigned resultIndex,
                                       unsigned operandIndex) {
  // new_param, new_exp_avg and new_exp_avg_sq over their old values.
  return isPairOf(resultIndex, operandIndex, {{0, 0}, {1, 2}, {2, 3}});
}

bool BatchNormOp::mayWriteResultOver(unsigned resultIndex,
                                     unsigned operandIndex) {
  // The new running mean and variance over the old ones.
  return isPairOf(resultIndex, operandIndex, {{3, 3}, {4, 4}});
}

bool UpdateScaleOp::mayWriteResultOver(unsigned resultIndex,
                                       unsigned operandIndex) {
  // The new scale and growth tracker over the old ones.
  return isPairOf(resultIndex, operandIndex, {{0, 0}, {1, 1}});
}

bool ScaleByOp::mayWriteResultOver(unsigned resultIndex,
                                   unsigned operandIndex) {
  // Every element reads the factor: only the input may be overwritten.
  return operandIndex == 0;
}

bool UnscaleOp::mayWriteResultOver(unsigned resultIndex,
                                   unsigned operandIndex) {
  // results[j] over grads[j] (operand j + 1, after the scale), and only
  // that: the entry goes through the tensors one after the other. The last
  // result, found_inf, has an operand of its own.
  return resultIndex + 1 < getNumResults() && operandIndex == resultIndex + 1;
}

#define GET_OP_CLASSES
#include "memopt/Dialect/Memopt/IR/MemoptOps.cpp.inc"
