//===- MemoptOps.cpp - memopt operations ----------------------------------===//
//
// Verifiers, type inference, folders and custom assembly directives of the
// memopt ops (the layers, losses and optimizer updates: MemoptLayerOps.cpp). Each verifier computes the type an operand or result must have
// and reports a mismatch as "<what> has type 'A', expected 'B'", so that a
// user sees both the fault and the fix. Which element types may meet in one
// op (a matmul's f32 result of bf16 operands, a reduction's) is not decided
// here but by the runtime's dtype table, which every op checks through
// RuntimeDTypesTrait (RuntimeDTypes.cpp) before its verifier runs.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/runtime/QuantizeMath.h"

#include "OpVerification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace memopt;
using namespace memopt::verification;

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
// Elementwise ops
//===----------------------------------------------------------------------===//

// The unary, binary, scalar and activation-gradient families define theirs
// in ODS; gelu and its gradient, which have an attribute, here.
LogicalResult GeluOp::verify() {
  return expectSameTypes(
      *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
}

LogicalResult GeluGradOp::verify() {
  return expectSameTypes(*this, {{"operand 'input'", getInput()},
                                 {"operand 'grad'", getGrad()},
                                 {"result", getResult()}});
}

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

LogicalResult TransferWaitOp::verify() {
  int64_t slot = getSlotAttr().getInt();
  if (slot < 0)
    return emitOpError() << "waits on slot " << slot
                         << "; slots are non-negative";
  if (getSource().getType() != getTarget().getType())
    return emitOpError() << "copies " << getSource().getType() << " to "
                         << getTarget().getType() << "; a copy keeps the type";
  return success();
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
//===----------------------------------------------------------------------===//
// Memories (optimizer offload)
//===----------------------------------------------------------------------===//

bool memopt::runsOnHost(Operation *op) {
  return op->hasAttr(MemoptDialect::kOnHostAttrName);
}

bool memopt::hasHostEntry(StringRef name) {
  return isOpNamed<AdamWUpdateOp, SgdUpdateOp, CastOp, ConstantOp, AddOp,
                   ScaleByOp, ReduceSumSquaresOp>(name);
}

Value memopt::getBufferRoot(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>()) {
    if (view.getViewSource() == value)
      break;
    value = view.getViewSource();
  }
  return value;
}

std::optional<int64_t> memopt::getTransferSlot(Operation *op) {
  auto kernel = dyn_cast<KernelOp>(op);
  if (!kernel || kernel.getKernel() != TransferOp::getOperationName())
    return std::nullopt;
  if (auto slot = kernel.getOpAttributes().getAs<IntegerAttr>("slot"))
    return slot.getInt();
  return std::nullopt;
}

bool memopt::racesWithCopy(Operation *op, Value source, Value target) {
  Value sourceRoot = getBufferRoot(source), targetRoot = getBufferRoot(target);
  bool races = false;
  op->walk([&](Operation *nested) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if (!effects)
      return WalkResult::advance();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      Value buffer = effect.getValue();
      if (!buffer)
        continue;
      Value root = getBufferRoot(buffer);
      bool writes =
          isa<MemoryEffects::Write, MemoryEffects::Free>(effect.getEffect());
      if (root == targetRoot || (writes && root == sourceRoot))
        races = true;
    }
    return races ? WalkResult::interrupt() : WalkResult::advance();
  });
  return races;
}

/// The memory a `memopt.memory` attribute names (absent: the device).
static MemoryKind getMarkedMemory(Attribute attr) {
  auto name = dyn_cast_or_null<StringAttr>(attr);
  return name && name.getValue() == "host" ? MemoryKind::Host
                                           : MemoryKind::Device;
}

MemoryKind memopt::getMemoryKind(Value value) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      // A loop-carried value lives where its initial value does.
      if (auto loop =
              dyn_cast<LoopLikeOpInterface>(arg.getOwner()->getParentOp())) {
        if (OpOperand *init = loop.getTiedLoopInit(arg)) {
          value = init->get();
          continue;
        }
        return MemoryKind::Device;
      }
      auto func =
          dyn_cast_or_null<FunctionOpInterface>(arg.getOwner()->getParentOp());
      if (!func || arg.getOwner() != &func.getFunctionBody().front())
        return MemoryKind::Device;
      return getMarkedMemory(
          func.getArgAttr(arg.getArgNumber(), MemoptDialect::kMemoryAttrName));
    }
    Operation *op = value.getDefiningOp();
    if (auto transfer = dyn_cast<TransferOp>(op))
      return transfer.getTo();
    if (runsOnHost(op))
      return MemoryKind::Host;
    if (auto loop = dyn_cast<LoopLikeOpInterface>(op)) {
      if (BlockArgument iterArg =
              loop.getTiedLoopRegionIterArg(cast<OpResult>(value))) {
        value = loop.getTiedLoopInit(iterArg)->get();
        continue;
      }
      return MemoryKind::Device;
    }
    if (auto view = dyn_cast<ViewLikeOpInterface>(op)) {
      value = view.getViewSource();
      continue;
    }
    return getMarkedMemory(op->getAttr(MemoptDialect::kMemoryAttrName));
  }
}

#include "memopt/Dialect/Memopt/IR/MemoptOps.cpp.inc"
