//===- FuseKernels.cpp - fused attention and linear cross-entropy ---------===//
//
// Rewrites the `memopt.loss` function, before mixed precision and autodiff,
// so that the score matrices of attention and the logits of a language
// model's head never exist (docs/Fusion.md):
//
// 1. Attention. For each `memopt.softmax` over the last dimension, walk its
//    input back through `mul_scalar`s and up to two `masked_fill`s to a
//    `matmul(q, k)` with `transpose_rhs` (or of `q` and a transpose of `k`
//    over its last two dimensions), and its result forward through an
//    optional `dropout` to a `matmul(p, v)`. When every value in between has
//    exactly one use (nothing else reads a score-sized tensor), the chain
//    becomes one `memopt.attention`: the scale is the product of the
//    scalars, a scalar applied after the fill also scales the fill value,
//    and the dropout's attributes move over unchanged (the fused kernel
//    draws the same mask). A mask made by a broadcast becomes the
//    broadcast's source with unit dimensions where the broadcast added
//    some (the op broadcasts unit dimensions); a mask that is a constant,
//    possibly seen through reshapes, broadcasts, slices and transposes, and
//    is exactly "key index > query index" in every batch element becomes
//    `causal`. Two fills fuse when they fill the same value and one of them
//    is causal (a causal mask and a padding mask): the op masks a score
//    that either masks.
// 2. Linear cross-entropy. For each `memopt.cross_entropy`, walk its logits
//    back through reshapes that keep the class dimension last, an optional
//    `add` of a broadcast `[classes]` bias, to `matmul(x, w)` with
//    `transpose_rhs` and `w` a `[classes, width]` matrix, each value used
//    once. The chain becomes one `memopt.linear_cross_entropy` of `x`
//    reshaped to the labels' shape plus the width. The chunk is the option,
//    or the most classes whose f32 logits for every row fit in one f32 copy
//    of `x`, at least 1 MiB: the scratch is the size of an activation. When
//    that chunk holds every class, the fused op would save nothing (its
//    scratch is the logits) and is not formed unless the option asks. A
//    cross-entropy with label smoothing is left unfused: the fused kernels
//    do not smooth.
//
// Both rewrites erase the ops they replace and the views, broadcasts and
// constants left without users. Linear in the number of ops.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <cmath>

namespace memopt {
#define GEN_PASS_DEF_FUSEKERNELSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {

struct FuseKernelsPass
    : public memopt::impl::FuseKernelsPassBase<FuseKernelsPass> {
  using Base::Base;

  void runOnOperation() override;
};

} // namespace

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// The op defining `value` if it is an `OpTy` whose result has no other use.
template <typename OpTy>
static OpTy singleUseProducer(Value value) {
  auto op = value.getDefiningOp<OpTy>();
  if (!op || !value.hasOneUse())
    return nullptr;
  return op;
}

/// Whether `perm` swaps the last two dimensions and keeps the others.
static bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 1] != rank - 2 || perm[rank - 2] != rank - 1)
    return false;
  for (int64_t i = 0; i + 2 < rank; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

/// Element `index` of `value` when it is a constant seen through views
/// (reshape, broadcast, slice, transpose), as a bool; nullopt otherwise.
static std::optional<bool> getViewedConstant(Value value,
                                             SmallVector<int64_t> index) {
  while (true) {
    Operation *op = value.getDefiningOp();
    if (auto constant = dyn_cast_or_null<ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense || !dense.getElementType().isInteger(1))
        return std::nullopt;
      if (dense.isSplat())
        return dense.getSplatValue<bool>();
      int64_t flat = 0;
      for (auto [i, size] : llvm::enumerate(dense.getType().getShape()))
        flat = flat * size + index[i];
      return *(dense.getValues<bool>().begin() + flat);
    }
    if (auto reshape = dyn_cast_or_null<ReshapeOp>(op)) {
      int64_t flat = 0;
      for (auto [i, size] : llvm::enumerate(tensorType(value).getShape()))
        flat = flat * size + index[i];
      ArrayRef<int64_t> shape = tensorType(reshape.getInput()).getShape();
      index.assign(shape.size(), 0);
      for (int64_t i = shape.size() - 1; i >= 0; --i) {
        index[i] = flat % shape[i];
        flat /= shape[i];
      }
      value = reshape.getInput();
    } else if (auto broadcast = dyn_cast_or_null<BroadcastOp>(op)) {
      ArrayRef<int64_t> shape = tensorType(broadcast.getInput()).getShape();
      SmallVector<int64_t> inner;
      for (auto [i, dim] : llvm::enumerate(broadcast.getDims()))
        inner.push_back(shape[i] == 1 ? 0 : index[dim]);
      index = std::move(inner);
      value = broadcast.getInput();
    } else if (auto slice = dyn_cast_or_null<SliceOp>(op)) {
      for (auto [i, start] : llvm::enumerate(slice.getStarts()))
        index[i] = start + index[i] * slice.getStrides()[i];
      value = slice.getInput();
    } else if (auto transpose = dyn_cast_or_null<TransposeOp>(op)) {
      SmallVector<int64_t> inner(index.size());
      for (auto [i, dim] : llvm::enumerate(transpose.getPermutation()))
        inner[dim] = index[i];
      index = std::move(inner);
      value = transpose.getInput();
    } else {
      return std::nullopt;
    }
  }
}

/// Whether the i1 `mask` ([..., sq, sk]) is a constant, possibly seen
/// through views, that is true exactly where the key index exceeds the
/// query index, in every leading index.
static bool isCausalMask(Value mask) {
  RankedTensorType type = tensorType(mask);
  if (type.getRank() < 2 || !type.getElementType().isInteger(1))
    return false;
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0, e = type.getNumElements(); n < e; ++n) {
    for (int64_t i = shape.size() - 1, rest = n; i >= 0; --i) {
      index[i] = rest % shape[i];
      rest /= shape[i];
    }
    int64_t i = index[shape.size() - 2], j = index.back();
    std::optional<bool> masked = getViewedConstant(mask, index);
    if (!masked || *masked != (j > i))
      return false;
  }
  return true;
}

/// The mask as the fused op takes it: the source of a broadcast, with unit
/// dimensions where the broadcast added dimensions (the op broadcasts every
/// unit dimension itself), else the mask. `shape` receives that shape.
static Value getMaskSource(Value mask, SmallVectorImpl<int64_t> &shape) {
  RankedTensorType type = tensorType(mask);
  shape.assign(type.getShape().begin(), type.getShape().end());
  auto broadcast = mask.getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return mask;
  shape.assign(type.getRank(), 1);
  ArrayRef<int64_t> source = tensorType(broadcast.getInput()).getShape();
  for (auto [i, dim] : llvm::enumerate(broadcast.getDims()))
    shape[dim] = source[i];
  return broadcast.getInput();
}

/// Erases `replaced` (users before producers), then the views, broadcasts
/// and constants that only they read (the mask and what builds it, a
/// transposed operand).
static void eraseReplaced(ArrayRef<Operation *> replaced) {
  llvm::SmallPtrSet<Operation *, 8> erased(replaced.begin(), replaced.end());
  SmallVector<Operation *> candidates;
  for (Operation *op : replaced) {
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp();
          producer && !erased.contains(producer))
        candidates.push_back(producer);
    op->erase();
  }
  while (!candidates.empty()) {
    Operation *op = candidates.pop_back_val();
    if (erased.contains(op) || !op->use_empty() ||
        !isa<ConstantOp, BroadcastOp, ReshapeOp, SliceOp, TransposeOp>(op))
      continue;
    erased.insert(op);
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        candidates.push_back(producer);
    op->erase();
  }
}

namespace {
/// The ops of one attention chain and what the fused op takes from them.
struct AttentionMatch {
  SoftmaxOp softmax;
  DropoutOp dropout; // null without dropout
  MatmulOp pv, qk;
  /// The mul_scalar and masked_fill ops between q k^T and the softmax.
  SmallVector<Operation *> chain;
  /// Each fill with its value times the scalars applied after it.
  SmallVector<std::pair<MaskedFillOp, double>, 2> fills;
  double scale = 1.0;
  Value q, k, v;
  bool causal = false;
  /// The non-causal mask (null without) in the shape the op takes.
  Value mask;
  SmallVector<int64_t> maskShape;
  double maskValue = -INFINITY;
};
} // namespace

/// Forward: softmax -> (dropout) -> matmul(p, v).
static bool matchProbabilities(SoftmaxOp softmax, AttentionMatch &m) {
  RankedTensorType scoresType = softmax.getType();
  int64_t rank = scoresType.getRank();
  if (static_cast<int64_t>(softmax.getDim()) != rank - 1 || rank < 2 ||
      rank > 4)
    return false;
  m.softmax = softmax;
  Value probs = softmax.getResult();
  if (!probs.hasOneUse())
    return false;
  m.dropout = dyn_cast<DropoutOp>(*probs.getUsers().begin());
  if (m.dropout && m.dropout.getShared() != 0)
    return false;
  if (m.dropout) {
    probs = m.dropout.getResult();
    if (!probs.hasOneUse())
      return false;
  }
  m.pv = dyn_cast<MatmulOp>(*probs.getUsers().begin());
  return m.pv && m.pv.getLhs() == probs && !m.pv.getTransposeLhs() &&
         !m.pv.getTransposeRhs() &&
         tensorType(m.pv.getRhs()).getRank() == rank &&
         m.pv.getType().getElementType() == scoresType.getElementType();
}

/// Backward from the softmax: (masked_fill, mul_scalar in any order) <-
/// q k^T, with k given transposed or as transpose(k') over the last two
/// dimensions, and q, k, v and the scores of one element type.
static bool matchScores(AttentionMatch &m) {
  RankedTensorType scoresType = m.softmax.getType();
  int64_t rank = scoresType.getRank();
  Value scores = m.softmax.getInput();
  while (true) {
    if (auto mul = singleUseProducer<MulScalarOp>(scores)) {
      m.scale *= mul.getValue().convertToDouble();
      m.chain.push_back(mul);
      scores = mul.getInput();
    } else if (auto masked = singleUseProducer<MaskedFillOp>(scores);
               masked && m.fills.size() < 2) {
      m.fills.push_back(
          {masked, masked.getValue().convertToDouble() * m.scale});
      m.chain.push_back(masked);
      scores = masked.getInput();
    } else {
      break;
    }
  }
  m.qk = singleUseProducer<MatmulOp>(scores);
  if (!m.qk || m.qk.getTransposeLhs() ||
      tensorType(m.qk.getLhs()).getRank() != rank ||
      tensorType(m.qk.getRhs()).getRank() != rank)
    return false;
  m.q = m.qk.getLhs();
  m.k = m.qk.getRhs();
  m.v = m.pv.getRhs();
  if (!m.qk.getTransposeRhs()) {
    auto transpose = m.k.getDefiningOp<TransposeOp>();
    if (!transpose || !swapsLastTwo(transpose.getPermutation()))
      return false;
    m.k = transpose.getInput();
  }
  Type element = tensorType(m.q).getElementType();
  return tensorType(m.k).getElementType() == element &&
         tensorType(m.v).getElementType() == element &&
         scoresType.getElementType() == element;
}

/// One fill, or two with one value of which one is causal: (causal or
/// mask) ? value : score. `causalMasks` caches which mask sources are
/// causal.
static bool matchMasks(AttentionMatch &m, DenseMap<Value, bool> &causalMasks) {
  for (auto [fill, value] : m.fills) {
    SmallVector<int64_t> shape;
    Value source = getMaskSource(fill.getMask(), shape);
    auto [it, inserted] = causalMasks.try_emplace(source, false);
    if (inserted)
      it->second = isCausalMask(source);
    if (it->second && !m.causal) {
      m.causal = true;
    } else if (!m.mask) {
      m.mask = source;
      m.maskShape = shape;
    } else {
      return false; // Two masks that are not causal: no op merges them.
    }
    if (value != m.fills.front().second)
      return false;
    m.maskValue = value;
  }
  return std::isfinite(m.scale);
}

/// Replaces the matched chain by one memopt.attention.
static void buildAttention(AttentionMatch &m) {
  OpBuilder builder(m.pv);
  Value mask = m.mask;
  if (mask && tensorType(mask).getShape() != ArrayRef(m.maskShape)) {
    mask = ReshapeOp::create(builder, m.pv.getLoc(),
                             tensorType(mask).clone(m.maskShape), mask);
  }
  MLIRContext *ctx = builder.getContext();
  SmallVector<Type> types{
      m.pv.getType(),
      RankedTensorType::get(m.softmax.getType().getShape().drop_back(),
                            Float32Type::get(ctx))};
  SmallVector<Value> operands{m.q, m.k, m.v};
  if (mask)
    operands.push_back(mask);
  SmallVector<NamedAttribute> attrs{
      builder.getNamedAttr("scale", builder.getF64FloatAttr(m.scale))};
  if (m.causal)
    attrs.push_back(builder.getNamedAttr("causal", builder.getUnitAttr()));
  if (!m.fills.empty())
    attrs.push_back(builder.getNamedAttr("mask_value",
                                         builder.getF64FloatAttr(m.maskValue)));
  if (m.dropout) {
    attrs.push_back(builder.getNamedAttr("dropout_p", m.dropout.getPAttr()));
    attrs.push_back(builder.getNamedAttr("seed", m.dropout.getSeedAttr()));
    attrs.push_back(builder.getNamedAttr("stream", m.dropout.getStreamAttr()));
  }
  if (Attribute scope = m.softmax->getAttr(MemoptDialect::kScopeAttrName))
    attrs.push_back(
        builder.getNamedAttr(MemoptDialect::kScopeAttrName, scope));
  auto attention =
      AttentionOp::create(builder, m.pv.getLoc(), types, operands, attrs);
  m.pv.getResult().replaceAllUsesWith(attention.getOut());
  SmallVector<Operation *> replaced{m.pv};
  if (m.dropout)
    replaced.push_back(m.dropout);
  replaced.push_back(m.softmax);
  replaced.append(m.chain);
  replaced.push_back(m.qk);
  eraseReplaced(replaced);
}

/// Forms one memopt.attention from the chain that ends in `softmax`, or
/// returns false and changes nothing.
static bool fuseAttention(SoftmaxOp softmax,
                          DenseMap<Value, bool> &causalMasks) {
  AttentionMatch match;
  if (!matchProbabilities(softmax, match) || !matchScores(match) ||
      !matchMasks(match, causalMasks))
    return false;
  buildAttention(match);
  return true;
}

/// The default chunk: the most classes whose f32 logits for every row take
/// no more than one f32 copy of `x` ([rows, width]), at least 1 MiB.
static int64_t defaultChunk(int64_t rows, int64_t width, int64_t classes) {
  int64_t budget = std::max<int64_t>(rows * width * 4, int64_t(1) << 20);
  int64_t chunk = budget / std::max<int64_t>(rows * 4, 1);
  return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(classes, 1));
}

/// Forms one memopt.linear_cross_entropy from the chain that ends in `ce`,
/// or returns false and changes nothing.
static bool fuseLinearLoss(CrossEntropyOp ce, int64_t chunkOption) {
  // The fused kernels compute the plain cross-entropy only.
  if (!ce.getLabelSmoothing().isZero())
    return false;
  RankedTensorType logitsType = tensorType(ce.getLogits());
  int64_t classes = logitsType.getShape().back();
  SmallVector<Operation *> chain;
  Value logits = ce.getLogits();
  while (auto reshape = singleUseProducer<ReshapeOp>(logits)) {
    if (tensorType(reshape.getInput()).getShape().back() != classes)
      return false;
    chain.push_back(reshape);
    logits = reshape.getInput();
  }
  Value bias;
  if (auto add = singleUseProducer<AddOp>(logits)) {
    for (auto [matmulSide, biasSide] :
         {std::pair{add.getLhs(), add.getRhs()},
          std::pair{add.getRhs(), add.getLhs()}}) {
      auto broadcast = biasSide.getDefiningOp<BroadcastOp>();
      if (!broadcast || !matmulSide.getDefiningOp<MatmulOp>() ||
          tensorType(broadcast.getInput()).getRank() != 1 ||
          broadcast.getDims().back() !=
              tensorType(biasSide).getRank() - 1)
        continue;
      bias = broadcast.getInput();
      chain.push_back(add);
      logits = matmulSide;
      break;
    }
    if (!bias)
      return false;
  }
  auto matmul = singleUseProducer<MatmulOp>(logits);
  if (!matmul || matmul.getTransposeLhs())
    return false;
  Value x = matmul.getLhs(), w = matmul.getRhs();
  if (!matmul.getTransposeRhs()) {
    auto transpose = w.getDefiningOp<TransposeOp>();
    if (!transpose || !swapsLastTwo(transpose.getPermutation()))
      return false;
    w = transpose.getInput();
  }
  RankedTensorType xType = tensorType(x), wType = tensorType(w);
  if (wType.getRank() != 2 || wType.getDimSize(0) != classes ||
      matmul.getType().getElementType() != xType.getElementType() ||
      (bias && tensorType(bias).getElementType() != xType.getElementType()))
    return false;

  RankedTensorType labelsType = tensorType(ce.getLabels());
  int64_t width = xType.getShape().back();
  int64_t rows = labelsType.getNumElements();
  int64_t chunk = chunkOption > 0 ? std::min(chunkOption, classes)
                                  : defaultChunk(rows, width, classes);
  // One chunk of every class holds the whole f32 logits matrix: nothing to
  // save, and the backward would recompute it.
  if (chunkOption <= 0 && chunk >= classes)
    return false;

  OpBuilder builder(ce);
  SmallVector<int64_t> xShape(labelsType.getShape());
  xShape.push_back(width);
  if (xType.getShape() != ArrayRef<int64_t>(xShape)) {
    auto reshaped = ReshapeOp::create(builder, ce.getLoc(),
                                      xType.clone(xShape), x);
    if (Attribute scope = ce->getAttr(MemoptDialect::kScopeAttrName))
      reshaped->setAttr(MemoptDialect::kScopeAttrName, scope);
    x = reshaped;
  }
  SmallVector<Value> operands{x, w, ce.getLabels()};
  if (bias)
    operands.push_back(bias);
  SmallVector<NamedAttribute> attrs{
      builder.getNamedAttr("chunk", builder.getI64IntegerAttr(chunk)),
      builder.getNamedAttr("ignore_index", ce.getIgnoreIndexAttr()),
      builder.getNamedAttr("reduction", ce.getReductionAttr())};
  if (Attribute scope = matmul->getAttr(MemoptDialect::kScopeAttrName))
    attrs.push_back(
        builder.getNamedAttr(MemoptDialect::kScopeAttrName, scope));
  SmallVector<Type> types{
      ce.getType(),
      RankedTensorType::get(labelsType.getShape(), builder.getF32Type())};
  auto fused = LinearCrossEntropyOp::create(builder, ce.getLoc(), types,
                                            operands, attrs);
  ce.getResult().replaceAllUsesWith(fused.getLoss());
  SmallVector<Operation *> replaced{ce};
  replaced.append(chain);
  replaced.push_back(matmul);
  eraseReplaced(replaced);
  return true;
}

void FuseKernelsPass::runOnOperation() {
  getOperation().walk([&](func::FuncOp func) {
    if (!func->hasAttr(MemoptDialect::kLossAttrName))
      return;
    SmallVector<SoftmaxOp> softmaxes;
    SmallVector<CrossEntropyOp> losses;
    func.walk([&](Operation *op) {
      if (auto softmax = dyn_cast<SoftmaxOp>(op))
        softmaxes.push_back(softmax);
      else if (auto ce = dyn_cast<CrossEntropyOp>(op))
        losses.push_back(ce);
    });
    // One answer per mask value: layers share their mask.
    DenseMap<Value, bool> causalMasks;
    if (attention)
      for (SoftmaxOp softmax : softmaxes)
        numAttention += fuseAttention(softmax, causalMasks);
    if (lmLoss)
      for (CrossEntropyOp ce : losses)
        numLinearLoss += fuseLinearLoss(ce, lmLossChunk);
  });
}
