//===- BatchRules.cpp - where an op's batch dimension goes ----------------===//
//
// The batch rules of --memopt-accumulate (step 2 of Accumulate.cpp), one
// method per family of ops.
//
//===----------------------------------------------------------------------===//

#include "BatchRules.h"

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace memopt;
using namespace memopt::accumulate;

/// Ops whose operands (other than masks) and result share one shape and
/// whose element i depends on element i of the operands (the unary, binary,
/// scalar and activation-gradient families carry ElementwiseTrait), or that
/// work along one non-batch dimension (softmax), or copy it to the other
/// memory.
static bool isSameShapeOp(Operation *op) {
  return op->hasTrait<ElementwiseTrait>() ||
         isa<GeluOp, ClampOp, GeluGradOp, ClampGradOp, WhereOp, MaskedFillOp,
             DropoutOp, CastOp, SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp,
             LogSoftmaxGradOp, TransferOp>(op);
}

/// Same-shape ops that are linear in their operands: a sum over the batch
/// stays one through them.
static bool isLinearOp(Operation *op) {
  if (auto cast = dyn_cast<CastOp>(op))
    return isa<FloatType>(cast.getInput().getType().getElementType()) &&
           isa<FloatType>(cast.getType().getElementType());
  return isa<AddOp, SubOp, MulScalarOp, NegOp, ScaleLossOp, TransferOp>(op);
}

static int64_t getRank(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

static ArrayRef<int64_t> getShape(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

namespace {

/// The propagation rule of one op (step 2 of the file comment), from its
/// operands' kinds: what the op's results are, and which uniform operands
/// must be rebuilt at the micro-batch shape. One method per family of ops,
/// which returns nullopt for an op that is not one of the family's.
class RuleInference {
public:
  /// `split`: the parts the IR's batch is cut into, of `batchSize`
  /// examples in all; `allowBatchNorm`: the pass's allow-batch-norm.
  RuleInference(Operation *op, ArrayRef<BatchKind> in, int64_t microBatches,
                int64_t split, int64_t batchSize, bool allowBatchNorm)
      : op(op), in(in), microBatches(microBatches), split(split),
        batchSize(batchSize), allowBatchNorm(allowBatchNorm),
        numResults(op->getNumResults()) {
    rule.sliceOperand.assign(op->getNumOperands(), -1);
  }

  FailureOr<OpRule> infer();

private:
  using Result = std::optional<FailureOr<OpRule>>;
  Result inferElementwise();
  Result inferShape();
  Result inferLinear();
  Result inferNorm();
  Result inferConvolution();
  Result inferLoss();

  /// The rule with every result of `kind`.
  OpRule all(BatchKind kind) {
    rule.results.assign(numResults, kind);
    return rule;
  }
  FailureOr<OpRule> fail(const Twine &why) {
    return op->emitOpError() << "cannot be split into " << microBatches
                             << " micro-batches: " << why;
  }

  Operation *op;
  ArrayRef<BatchKind> in;
  int64_t microBatches, split, batchSize;
  bool allowBatchNorm;
  unsigned numResults;
  OpRule rule;
  /// The batch dimension shared by the batched operands, if any, and
  /// whether an operand is a sum over the batch or a per-micro-batch
  /// statistic.
  std::optional<int64_t> dim;
  bool anyPartial = false, anyLocal = false;
};

} // namespace

FailureOr<OpRule> RuleInference::infer() {
  if (llvm::all_of(in, [](BatchKind k) { return k.isUniform(); }))
    return all(BatchKind::uniform());
  for (BatchKind k : in) {
    anyPartial |= k.isPartial();
    anyLocal |= k.isLocal();
    if (!k.isBatched())
      continue;
    if (dim && *dim != k.dim && isSameShapeOp(op))
      return fail("its operands have their batch dimension at different "
                  "positions");
    if (!dim)
      dim = k.dim;
  }

  for (auto family :
       {&RuleInference::inferElementwise, &RuleInference::inferShape,
        &RuleInference::inferLinear, &RuleInference::inferNorm,
        &RuleInference::inferConvolution, &RuleInference::inferLoss})
    if (Result result = (this->*family)())
      return *result;
  return fail("no rule says where its batch dimension goes");
}

/// Elementwise ops, and the loss scaling.
RuleInference::Result RuleInference::inferElementwise() {
  if (isSameShapeOp(op)) {
    if (dim) {
      if (anyPartial || anyLocal)
        return fail("it combines per-item values with a sum over the batch");
      if (auto softmax = op->getAttrOfType<IntegerAttr>("dim"))
        if (softmax.getInt() == *dim)
          return fail("it normalises along the batch dimension");
      for (auto [i, k] : llvm::enumerate(in))
        if (k.isUniform() &&
            getRank(op->getOperand(i)) == getRank(op->getResult(0)))
          rule.sliceOperand[i] = *dim;
      return all(BatchKind::batched(*dim));
    }
    if (anyPartial) {
      // Filling a sum's elements with zeros under a batch-independent mask
      // (the backward of a masked_fill) keeps it a sum.
      auto fill = dyn_cast<MaskedFillOp>(op);
      bool keepsSum = fill && fill.getValue().isZero() && in[0].isPartial() &&
                      in[1].isUniform();
      // Adding 0 (Python's sum() of losses starts with it) keeps it too.
      auto addScalar = dyn_cast<AddScalarOp>(op);
      keepsSum |= addScalar && addScalar.getValue().isZero();
      // So does scaling it by a batch-independent value (a mean's divisor
      // that --memopt-accumulate hoisted).
      bool scaled =
          in.size() == 2 &&
          ((isa<MulOp, DivOp>(op) && in[0].isPartial() && in[1].isUniform()) ||
           (isa<MulOp>(op) && in[0].isUniform() && in[1].isPartial()));
      bool linear =
          keepsSum || scaled ||
          (isLinearOp(op) && !anyLocal &&
           (isa<MulScalarOp, NegOp, CastOp>(op) ||
            llvm::all_of(in, [](BatchKind k) { return k.isPartial(); })));
      if (!linear)
        return fail("it is not linear in a value summed over the batch (a "
                    "loss or a gradient)");
      return all(BatchKind::partial());
    }
    return all(BatchKind::local());
  }
  if (isa<ScaleLossOp>(op)) {
    if (!in[0].isPartial() || !in[1].isUniform())
      return fail("it must scale the loss by a batch-independent scale");
    return all(BatchKind::partial());
  }
  return std::nullopt;
}

/// Broadcasts, transposes, reshapes, slices and concatenations.
RuleInference::Result RuleInference::inferShape() {
  // Single-input shape ops: a sum or a statistic stays one.
  if (isa<BroadcastOp, ReshapeOp, TransposeOp, SliceOp, SliceGradOp>(op) &&
      !dim)
    return all(anyPartial ? BatchKind::partial() : BatchKind::local());

  if (auto broadcast = dyn_cast<BroadcastOp>(op))
    return all(BatchKind::batched(broadcast.getDims()[*dim]));
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    return all(BatchKind::batched(llvm::find(perm, *dim) - perm.begin()));
  }
  if (isa<ReshapeOp>(op)) {
    // Row-major: the batch dimension maps to the result dimension e whose
    // leading extents multiply to the operand's leading extents, and whose
    // extent is the operand dimension's or the batch's (B*T -> [B, T],
    // a batch of one included), or else one that K divides (e.g.
    // [B, T, C] -> [B*T, C] splits the leading dim).
    ArrayRef<int64_t> from = getShape(op->getOperand(0));
    ArrayRef<int64_t> to = getShape(op->getResult(0));
    int64_t leading = 1;
    for (int64_t d = 0; d < *dim; ++d)
      leading *= from[d];
    for (int64_t e = 0, prefix = 1;
         e < static_cast<int64_t>(to.size()) && prefix <= leading;
         prefix *= to[e++])
      if (prefix == leading && (to[e] == from[*dim] || to[e] == batchSize))
        return all(BatchKind::batched(e));
    int64_t prefix = 1;
    for (int64_t e = 0; e < static_cast<int64_t>(to.size()); ++e) {
      if (prefix == leading && to[e] % split == 0 && to[e] > 1)
        return all(BatchKind::batched(e));
      prefix *= to[e];
      if (prefix > leading)
        break;
    }
    return fail("the reshape does not keep the batch dimension as one "
                "dimension that the micro-batches divide");
  }
  if (isa<SliceOp, SliceGradOp>(op)) {
    ArrayRef<int64_t> starts = op->getAttrOfType<DenseI64ArrayAttr>("starts");
    ArrayRef<int64_t> limits = op->getAttrOfType<DenseI64ArrayAttr>("limits");
    ArrayRef<int64_t> strides = op->getAttrOfType<DenseI64ArrayAttr>("strides");
    int64_t full = isa<SliceOp>(op) ? getShape(op->getOperand(0))[*dim]
                                    : getShape(op->getResult(0))[*dim];
    if (starts[*dim] != 0 || strides[*dim] != 1 || limits[*dim] != full)
      return fail("it slices the batch dimension");
    return all(BatchKind::batched(*dim));
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    if (anyPartial || anyLocal || static_cast<int64_t>(concat.getDim()) == *dim)
      return fail("it concatenates along the batch dimension or mixes sums "
                  "over the batch with per-item values");
    for (auto [i, k] : llvm::enumerate(in))
      if (k.isUniform())
        rule.sliceOperand[i] = *dim;
    return all(BatchKind::batched(*dim));
  }
  return std::nullopt;
}

/// Reductions, matmuls and embeddings.
RuleInference::Result RuleInference::inferLinear() {
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op)) {
    ArrayRef<int64_t> dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
    if (!dim) {
      if (anyPartial && isa<ReduceMaxOp>(op))
        return fail("the maximum of a sum over the batch is not a sum");
      return all(anyPartial ? BatchKind::partial() : BatchKind::local());
    }
    if (!llvm::is_contained(dims, *dim))
      return all(BatchKind::batched(
          *dim - llvm::count_if(dims, [&](int64_t d) { return d < *dim; })));
    if (isa<ReduceMaxOp>(op))
      return fail("a maximum over the batch is not a sum over micro-batches");
    return all(BatchKind::partial());
  }
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    int64_t rl = getRank(matmul.getLhs()), rr = getRank(matmul.getRhs());
    int64_t rres = getRank(matmul.getResult());
    int64_t lhsM = matmul.getTransposeLhs() ? rl - 1 : rl - 2;
    int64_t lhsK = matmul.getTransposeLhs() ? rl - 2 : rl - 1;
    int64_t rhsK = matmul.getTransposeRhs() ? rr - 1 : rr - 2;
    int64_t rhsN = matmul.getTransposeRhs() ? rr - 2 : rr - 1;
    BatchKind l = in[0], r = in[1];
    if (anyLocal || (l.isPartial() && !r.isUniform()) ||
        (r.isPartial() && !l.isUniform()))
      return fail("it multiplies a sum over the batch by a batch-dependent "
                  "value");
    if (anyPartial)
      return all(BatchKind::partial());
    if (l.isBatched() && r.isBatched()) {
      if (l.dim == lhsK && r.dim == rhsK)
        return all(BatchKind::partial());
      if (l.dim < rl - 2 && l.dim == r.dim && rl == rr)
        return all(BatchKind::batched(l.dim));
      return fail("its operands' batch dimensions do not line up");
    }
    if (l.isBatched()) {
      if (l.dim < rl - 2) {
        if (rr > 2)
          rule.sliceOperand[1] = l.dim;
        return all(BatchKind::batched(l.dim + (rres - rl)));
      }
      if (l.dim == lhsM)
        return all(BatchKind::batched(rres - 2));
      return fail("it contracts the batch dimension with a batch-independent "
                  "operand");
    }
    if (r.dim < rr - 2) {
      if (rl > 2)
        rule.sliceOperand[0] = r.dim;
      return all(BatchKind::batched(r.dim + (rres - rr)));
    }
    if (r.dim == rhsN)
      return all(BatchKind::batched(rres - 1));
    return fail("it contracts the batch dimension with a batch-independent "
                "operand");
  }
  if (isa<Nf4MatmulOp>(op)) {
    // A product with a frozen (batch-independent) weight: linear in lhs,
    // whose rows and leading dimensions are the result's.
    BatchKind l = in[0];
    if (!in[1].isUniform() || l.isLocal())
      return fail("its weight or its input is not a per-example value");
    if (!l.isBatched())
      return all(l);
    if (l.dim == getRank(op->getOperand(0)) - 1)
      return fail("it contracts the batch dimension with its weight");
    return all(BatchKind::batched(l.dim));
  }
  if (isa<EmbeddingOp>(op)) {
    int64_t indexRank = getRank(op->getOperand(1));
    // Fixed rows of a table whose columns hold the batch (a flip or an
    // index_select of activations, the batch moved past the looked-up
    // dimension): the batch column of each row.
    if (in[0].isBatched() && in[0].dim > 0 && in[1].isUniform())
      return all(BatchKind::batched(indexRank + in[0].dim - 1));
    if (!in[0].isUniform() || !in[1].isBatched())
      return fail("the table must not depend on the batch");
    return all(BatchKind::batched(in[1].dim));
  }
  if (isa<EmbeddingGradOp>(op)) {
    int64_t indexRank = getRank(op->getOperand(1));
    // Rows scattered to fixed rows keep the batch in their columns.
    if (in[0].isBatched() && in[0].dim >= indexRank && in[1].isUniform())
      return all(BatchKind::batched(in[0].dim - indexRank + 1));
    // Linear in the gradient: a summed gradient looked up at fixed rows
    // (position embeddings) stays a sum.
    if (in[0].isPartial() && in[1].isUniform())
      return all(BatchKind::partial());
    if (!in[0].isBatched() || !in[1].isBatched())
      return fail("expected per-item gradients and indices");
    return all(BatchKind::partial());
  }
  return std::nullopt;
}

/// Layer, RMS and batch norms, with their gradients.
RuleInference::Result RuleInference::inferNorm() {
  if (isa<LayerNormOp, RmsNormOp>(op)) {
    int64_t normalised = getRank(op->getOperand(1));
    if (!in[0].isBatched() ||
        in[0].dim >= getRank(op->getOperand(0)) - normalised ||
        llvm::any_of(in.drop_front(),
                     [](BatchKind k) { return !k.isUniform(); }))
      return fail("the batch dimension must be a leading, not normalised, "
                  "dimension of the input and the weights must not depend on "
                  "the batch");
    return all(BatchKind::batched(in[0].dim));
  }
  if (isa<LayerNormGradOp, RmsNormGradOp>(op)) {
    if (!in[0].isBatched() || !in[1].isBatched() || !in[2].isUniform())
      return fail("expected per-item gradients and batch-independent weights");
    rule.results.assign(numResults, BatchKind::partial());
    rule.results[0] = BatchKind::batched(in[0].dim);
    return rule;
  }
  if (isa<BatchNormOp>(op)) {
    if (!in[0].isBatched() || in[0].dim != 0 ||
        llvm::any_of(in.drop_front(),
                     [](BatchKind k) { return !k.isUniform(); }))
      return fail("batch norm must normalise a batch along dimension 0");
    if (!allowBatchNorm) {
      int64_t full = getShape(op->getOperand(0))[0];
      return op->emitOpError()
             << "computes its statistics over each micro-batch of "
             << full / split << " instead of the full batch of " << full
             << " (micro-batches=" << static_cast<int64_t>(microBatches)
             << "), which changes the result; pass allow-batch-norm=true "
                "(memopt-compile --accumulate-allow-batch-norm) to accept "
                "per-micro-batch statistics";
    }
    rule.results.assign(numResults, BatchKind::local());
    rule.results[0] = BatchKind::batched(0);
    return rule;
  }
  if (isa<BatchNormGradOp>(op)) {
    if (!in[0].isBatched() || !in[1].isBatched() || !in[2].isUniform())
      return fail("expected per-item gradients and batch-independent weights");
    rule.results.assign(numResults, BatchKind::partial());
    rule.results[0] = BatchKind::batched(0);
    return rule;
  }
  return std::nullopt;
}

/// Convolutions and pooling.
RuleInference::Result RuleInference::inferConvolution() {
  if (isa<Conv2DOp, Conv2DGradInputOp, MaxPool2DOp, AvgPool2DOp,
          AvgPool2DGradOp, MaxPool2DGradOp>(op)) {
    if (!in[0].isBatched() || in[0].dim != 0 ||
        (isa<Conv2DOp, Conv2DGradInputOp>(op) && !in[1].isUniform()) ||
        (isa<MaxPool2DGradOp>(op) && (!in[1].isBatched() || in[1].dim != 0)))
      return fail("expected a batch along dimension 0 of NCHW images and "
                  "batch-independent filters");
    return all(BatchKind::batched(0));
  }
  if (isa<Conv2DGradFilterOp>(op)) {
    if (!in[0].isBatched() || in[0].dim != 0 || !in[1].isBatched() ||
        in[1].dim != 0)
      return fail("expected a batch along dimension 0 of NCHW images");
    return all(BatchKind::partial());
  }
  return std::nullopt;
}

/// Attention and the losses, fused or not.
RuleInference::Result RuleInference::inferLoss() {
  if (isa<AttentionOp, AttentionGradOp>(op)) {
    // q, k, v (and out, lse, grad_out) split along the leading batch
    // dimension, where the dropout's element numbering puts micro-batch i
    // at offset i * (its score count); the mask is shared or split with
    // them.
    bool maskLast = isa<AttentionGradOp>(op);
    unsigned numTensors =
        op->getNumOperands() - (op->getNumOperands() == (maskLast ? 7u : 4u));
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      bool isMask = i >= numTensors;
      if (isMask ? !(in[i].isUniform() || (in[i].isBatched() && in[i].dim == 0))
                 : !(in[i].isBatched() && in[i].dim == 0))
        return fail("expected q, k and v batched along dimension 0 "
                    "(batch, heads, sequence, width)");
      // A batch-independent mask with a batch dimension is rebuilt at the
      // micro-batch's.
      if (isMask && in[i].isUniform() &&
          cast<RankedTensorType>(op->getOperand(i).getType()).getDimSize(0) > 1)
        rule.sliceOperand[i] = 0;
    }
    return all(BatchKind::batched(0));
  }
  if (isa<LinearCrossEntropyOp, LinearCrossEntropyGradOp,
          Nf4LinearCrossEntropyOp, Nf4LinearCrossEntropyGradOp>(op)) {
    // x, labels (and lse) per item; w, bias and the incoming gradient
    // shared.
    bool isGrad =
        isa<LinearCrossEntropyGradOp, Nf4LinearCrossEntropyGradOp>(op);
    bool ok = in[0].isBatched() && in[2].isBatched() &&
              in[2].dim == in[0].dim && in[1].isUniform();
    for (unsigned i = 3; ok && i < op->getNumOperands(); ++i)
      ok = (isGrad && i == 3) ? in[i].isBatched() && in[i].dim == in[0].dim
                              : in[i].isUniform();
    if (!ok)
      return fail("expected per-item inputs, labels and log-sum-exps and a "
                  "batch-independent weight, bias and incoming gradient");
    rule.results.assign(numResults, BatchKind::partial());
    rule.results[isGrad ? 0 : 1] = BatchKind::batched(in[0].dim);
    return rule;
  }
  if (isa<CrossEntropyOp, CrossEntropyGradOp, MseLossOp, MseLossGradOp>(op)) {
    // logits/input and labels/target are batched along one dimension; the
    // target of an MSE may be batch-independent (rebuilt per micro-batch).
    if (!in[0].isBatched() ||
        (isa<CrossEntropyOp, CrossEntropyGradOp>(op) &&
         (!in[1].isBatched() || in[1].dim != in[0].dim)) ||
        (op->getNumOperands() == 3 && !in[2].isUniform()))
      return fail("expected per-item predictions and labels and a "
                  "batch-independent incoming gradient");
    if (isa<MseLossOp, MseLossGradOp>(op)) {
      if (in[1].isUniform())
        rule.sliceOperand[1] = in[0].dim;
      else if (!in[1].isBatched() || in[1].dim != in[0].dim)
        return fail("the target's batch dimension differs from the input's");
    }
    return all(isa<CrossEntropyOp, MseLossOp>(op)
                   ? BatchKind::partial()
                   : BatchKind::batched(in[0].dim));
  }
  return std::nullopt;
}

FailureOr<OpRule> accumulate::inferBatchRule(Operation *op,
                                             ArrayRef<BatchKind> in,
                                             int64_t microBatches,
                                             int64_t split, int64_t batchSize,
                                             bool allowBatchNorm) {
  return RuleInference(op, in, microBatches, split, batchSize, allowBatchNorm)
      .infer();
}
