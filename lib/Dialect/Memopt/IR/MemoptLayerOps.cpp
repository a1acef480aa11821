//===- MemoptLayerOps.cpp - verifiers of the layer and training ops -------===//
//
// Verifiers and type inference of the linear layers, embeddings,
// convolution and pooling, dropout, fused attention, the losses, the
// optimizer updates and loss scaling (the other ops: MemoptOps.cpp).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/runtime/QuantizeMath.h"

#include "OpVerification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace memopt;
using namespace memopt::verification;

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
    return op->emitOpError()
           << "'" << shapeName << "' must have positive extents, got ["
           << shape[0] << ", " << shape[1] << "]";
  int64_t numel = 0;
  if (llvm::MulOverflow(shape[0], shape[1], numel))
    return op->emitOpError()
           << "'" << shapeName << "' has more than 2^63 elements";
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
                         << " has " << lhs.getShape().back() << ", the weight ["
                         << weight[0] << ", " << weight[1] << "] has " << k;
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
    return op.emitOpError()
           << "'groups' (" << groups << ") must divide the input channels ("
           << channels << ") and the output channels (" << outChannels << ")";
  if (filterType.getDimSize(1) != channels / groups)
    return op.emitOpError()
           << filter.name << " " << filterType << " has "
           << filterType.getDimSize(1) << " input channels per group, expected "
           << channels / groups << " (input channels / groups)";
  SmallVector<int64_t> shape = {inputType.getDimSize(0), outChannels};
  for (int d = 0; d < 2; ++d) {
    std::optional<int64_t> size = windowOutputSize(
        inputType.getDimSize(2 + d), filterType.getDimSize(2 + d),
        op.getStrides()[d], op.getPadding()[d], op.getDilations()[d]);
    if (!size)
      return op.emitOpError()
             << "'padding' or 'dilations' overflow 64-bit sizes";
    if (*size <= 0)
      return op.emitOpError()
             << "the filter " << filterType
             << " does not fit in the padded input " << inputType;
    shape.push_back(*size);
  }
  return inputType.clone(shape);
}

LogicalResult Conv2DOp::verify() {
  FailureOr<RankedTensorType> expected =
      inferConvType(*this, {"operand 'input'", getInput()},
                    {"operand 'filter'", getFilter()});
  if (failed(expected))
    return failure();
  return expectType(*this, {"result", getResult()}, *expected);
}

LogicalResult Conv2DGradInputOp::verify() {
  FailureOr<RankedTensorType> expected = inferConvType(
      *this, {"result", getResult()}, {"operand 'filter'", getFilter()});
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
static FailureOr<RankedTensorType> inferPoolType(Operation *op, Named input,
                                                 ArrayRef<int64_t> kernel,
                                                 ArrayRef<int64_t> strides,
                                                 ArrayRef<int64_t> padding) {
  if (failed(expectRank(op, input, 4)) ||
      failed(expectPositive(op, "'kernel' entry", kernel)) ||
      failed(expectPositive(op, "'strides' entry", strides)) ||
      failed(expectPositive(op, "'padding' entry", padding, 0)))
    return failure();
  RankedTensorType type = tensorType(input.value);
  SmallVector<int64_t> shape(type.getShape().take_front(2));
  for (int d = 0; d < 2; ++d) {
    if (padding[d] > kernel[d] / 2)
      return op->emitOpError()
             << "'padding' entry " << padding[d] << " exceeds half the kernel ("
             << kernel[d] << ")";
    std::optional<int64_t> size = windowOutputSize(
        type.getDimSize(2 + d), kernel[d], strides[d], padding[d]);
    if (!size)
      return op->emitOpError() << "'kernel' or 'padding' overflow 64-bit sizes";
    if (*size <= 0)
      return op->emitOpError() << "the kernel [" << kernel
                               << "] does not fit in the padded input " << type;
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
  FailureOr<RankedTensorType> expected = inferPoolType(
      *this, {"result", getResult()}, getKernel(), getStrides(), getPadding());
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
    return emitOpError() << "'shared' must be between 0 and the rank " << rank
                         << ", got " << getShared();
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
    return op->emitOpError()
           << "operand 'k' " << kType
           << " has a width other than operand 'q''s (" << d << ")";
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
      broadcastable =
          maskType.getDimSize(i) == 1 || maskType.getDimSize(i) == scores[i];
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
  Type expectedLse = RankedTensorType::get(qType.getShape().drop_back(),
                                           Float32Type::get(op->getContext()));
  if (lse != expectedLse)
    return typeMismatch(op, "'lse'", lse, expectedLse, "one f32 per query row");
  if (!std::isfinite(scale))
    return op->emitOpError()
           << "'scale' must be finite, got " << formatNumber(scale);
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
  if (bias &&
      failed(expectType(op, {"operand 'bias'", bias}, xType.clone({classes}),
                        "one per class, as 'w'")))
    return failure();
  RankedTensorType labelsType = tensorType(labels);
  if (failed(expectType(op, {"operand 'labels'", labels},
                        labelsType.clone(xType.getShape().drop_back()),
                        "the shape of 'x' without its width")))
    return failure();
  if (failed(
          expectType(op, {"'lse'", lse},
                     RankedTensorType::get(labelsType.getShape(),
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
static LogicalResult verifyNf4LinearCrossEntropy(Operation *op, Value x,
                                                 TypedValue<RankedTensorType> w,
                                                 ArrayRef<int64_t> wShape,
                                                 Value labels, Value bias,
                                                 Value lse, int64_t chunk) {
  if (failed(expectMinRank(op, {"operand 'x'", x}, 1)) ||
      failed(verifyNf4Weight(op, "w", w, "w_shape", wShape)))
    return failure();
  int64_t dim = tensorType(x).getShape().back();
  if (wShape[1] != dim)
    return op->emitOpError()
           << "'w_shape' [" << wShape[0] << ", " << wShape[1]
           << "] must be [classes, " << dim << "] (the width of 'x')";
  return verifyLinearCrossEntropy(op, x, wShape[0], labels, bias, lse, chunk);
}

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyLinearCrossEntropy(*this, getX(), getW(), getLabels(), getBias(),
                                  getLse(), getChunk());
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
      failed(
          expectType(*this, {"result 'grad_x'", getGradX()}, getX().getType())))
    return failure();
  return verifyBiasGradient(*this, getBias(), getGradBias());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyLinearCrossEntropy(*this, getX(), getW(), getLabels(),
                                      getBias(), getLse(), getChunk())) ||
      failed(
          expectType(*this, {"result 'grad_x'", getGradX()}, getX().getType())))
    return failure();
  if (failed(
          expectType(*this, {"result 'grad_w'", getGradW()}, getW().getType())))
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
  return expectSameTypes(*this,
                         {{"operand 'exp_avg'", getExpAvg()},
                          {"operand 'exp_avg_sq'", getExpAvgSq()},
                          {"result 'new_exp_avg'", getNewExpAvg()},
                          {"result 'new_exp_avg_sq'", getNewExpAvgSq()}});
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

LogicalResult
UnscaleOp::inferReturnTypes(MLIRContext *context, std::optional<Location>,
                            ValueRange operands, DictionaryAttr,
                            OpaqueProperties, RegionRange,
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
