//===- TrainingKernelCalls.cpp - the training step's own kernel calls ----===//
//
// The families of KernelLowering (KernelCalls.cpp) that only a training step
// has: data parallelism's collectives and dropout, the losses, the fused
// attention, the optimizer updates and loss scaling.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace memopt;
using namespace memopt::lowering;

/// Data parallelism's and ZeRO's collectives, and dropout.
std::optional<LogicalResult> KernelLowering::lowerCollectivesAndDropout() {
  if (is<shard::AllReduceOp>()) {
    // Data parallelism's sum over the ranks (--memopt-accumulate), in place
    // when bufferization gave it its operand's buffer.
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (is<shard::ReduceScatterOp, shard::AllSliceOp,
                shard::AllGatherOp>()) {
    // ZeRO's shards (--memopt-shard-optimizer): each call names the size of
    // one rank's slice, the smaller of its two buffers.
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(std::min(numel(ins[0]), numel(outs[0])));
  } else if (is<DropoutOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    // `offset` is 0: one call covers the whole tensor (runtime.h).
    ArrayRef<int64_t> shape = shapeOf(outs[0]);
    int64_t shared = i64Attr("shared", 0);
    if (shared < 0 || shared > static_cast<int64_t>(shape.size()))
      return fail("'shared' is outside the rank");
    int64_t group = 1;
    for (int64_t size : shape.take_back(shared))
      group *= size;
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(outs[0]))
        .i64(group)
        .f64(f64Attr("p"))
        .i64(i64Attr("seed"))
        .i64(i64Attr("stream"));
    // Inside the micro-batch loop: micro-batch i covers mask bits
    // [i * numel / group, (i + 1) * numel / group) of the full batch's
    // numbering. (With every dimension shared, one bit serves all
    // micro-batches, as it serves the full batch: offset 0.)
    if (static_cast<size_t>(shared) < shape.size())
      microBatchOffset(numel(outs[0]) / group);
    else
      call.i64(0);
  } else {
    return std::nullopt;
  }
  return success();
}

/// The losses and the label count.
std::optional<LogicalResult> KernelLowering::lowerLosses() {
  if (is<CrossEntropyOp, CrossEntropyGradOp>()) {
    bool isGrad = is<CrossEntropyGradOp>();
    if (failed(expectCounts(isGrad ? 3 : 2, 1)))
      return failure();
    ArrayRef<int64_t> logits = shapeOf(ins[0]);
    if (logits.empty())
      return fail("the logits are a scalar");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(ins[1]);
    if (isGrad)
      ptr(ins[2]);
    ptr(outs[0]);
    auto labelSmoothing = attrs.getAs<FloatAttr>("label_smoothing");
    call.i64(numel(ins[1]))
        .i64(logits.back())
        .i64(i64Attr("ignore_index", -100))
        .verbatim(reduction())
        .f64(labelSmoothing ? labelSmoothing.getValueAsDouble() : 0.0);
  } else if (is<LinearCrossEntropyOp, LinearCrossEntropyGradOp,
                Nf4LinearCrossEntropyOp, Nf4LinearCrossEntropyGradOp>()) {
    bool isGrad = name.ends_with("_grad");
    // Forward: x, w, labels[, bias] -> loss, lse, scratch. Gradient: x, w,
    // labels, lse, grad[, bias] -> grad_x, grad_w[, grad_bias], scratch. An
    // NF4 w (its shape an attribute) has no dtype argument and no gradient.
    auto nf4Shape = attrs.getAs<DenseI64ArrayAttr>("w_shape");
    bool nf4 = is<Nf4LinearCrossEntropyOp, Nf4LinearCrossEntropyGradOp>();
    if (nf4 && (!nf4Shape || nf4Shape.size() != 2))
      return fail("the NF4 weight has no shape");
    size_t numIns = isGrad ? 5 : 3;
    bool hasBias = ins.size() > numIns;
    size_t numWeightGrads = isGrad && !nf4;
    size_t numOuts = isGrad ? 2 + numWeightGrads + hasBias : 3;
    if (failed(expectCounts(numIns, numOuts, numIns + 1)))
      return failure();
    ArrayRef<int64_t> x = shapeOf(ins[0]);
    if (x.empty())
      return fail("x is a scalar");
    Value scratch = outs.back();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    if (!nf4)
      call.verbatim(dtypeArg(1));
    optionalPtr(hasBias ? std::optional<Value>(ins.back()) : std::nullopt);
    call.verbatim(dtypeArg(nf4 ? 1 : 2));
    ptr(ins[2]);
    if (isGrad) {
      ptr(ins[3]); // lse
      ptr(ins[4]); // grad
      for (size_t i = 0; i <= numWeightGrads; ++i)
        ptr(outs[i]); // grad_x[, grad_w]
      optionalPtr(hasBias ? std::optional<Value>(outs[1 + numWeightGrads])
                          : std::nullopt);
    } else {
      ptr(outs[0]); // loss
      ptr(outs[1]); // lse
    }
    ptr(scratch);
    call.i64(numel(scratch) * 4);
    call.i64(numel(ins[2]))
        .i64(x.back())
        .i64(nf4 ? nf4Shape[0] : shapeOf(ins[1])[0])
        .i64(i64Attr("chunk"))
        .i64(i64Attr("ignore_index", -100))
        .verbatim(reduction());
  } else if (is<LabelCountOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(ins[0])).i64(i64Attr("ignore_index", -100));
  } else if (is<MseLossOp, MseLossGradOp>()) {
    bool isGrad = is<MseLossGradOp>();
    if (failed(expectCounts(isGrad ? 3 : 2, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.i64(numel(ins[0])).verbatim(reduction());
  } else {
    return std::nullopt;
  }
  return success();
}

/// Memory-efficient attention and its gradient.
std::optional<LogicalResult> KernelLowering::lowerAttention() {
  if (is<AttentionOp, AttentionGradOp>()) {
    bool isGrad = is<AttentionGradOp>();
    size_t numTensors = isGrad ? 6 : 3;
    if (failed(expectCounts(numTensors, isGrad ? 3 : 2, numTensors + 1)))
      return failure();
    std::optional<Value> mask;
    if (ins.size() > numTensors)
      mask = ins.back();
    ArrayRef<int64_t> q = shapeOf(ins[0]), k = shapeOf(ins[1]),
                      v = shapeOf(ins[2]);
    int64_t rank = q.size();
    if (rank < 2 || rank > 4)
      return fail("q is not 2-D to 4-D");
    // (batch, heads) from the leading dimensions; the mask's strides in
    // (batch, heads, query, key) order, 0 where it broadcasts.
    int64_t batch = rank >= 3 ? q[0] : 1, heads = rank == 4 ? q[1] : 1;
    SmallVector<int64_t> maskStrides;
    if (mask) {
      ArrayRef<int64_t> m = shapeOf(*mask);
      SmallVector<int64_t> strides(rank, 0);
      int64_t stride = 1;
      for (int64_t i = rank - 1; i >= 0; --i) {
        strides[i] = m[i] == 1 ? 0 : stride;
        stride *= m[i];
      }
      maskStrides = {rank >= 3 ? strides[0] : 0, rank == 4 ? strides[1] : 0,
                     strides[rank - 2], strides[rank - 1]};
    }
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(ins[2]);
    optionalPtr(mask);
    call.verbatim(step.getI64Array(maskStrides));
    if (isGrad) {
      ptr(ins[3]);
      ptr(ins[4]);
      ptr(ins[5]);
    }
    for (Value out : outs)
      ptr(out);
    call.i64(batch).i64(heads).i64(q[rank - 2]).i64(k[rank - 2]);
    call.i64(q[rank - 1]).i64(v[rank - 1]);
    call.f64(f64Attr("scale")).i64(attrs.get("causal") ? 1 : 0);
    auto maskValue = attrs.getAs<FloatAttr>("mask_value");
    call.f64(maskValue ? maskValue.getValueAsDouble() : -INFINITY);
    auto dropoutP = attrs.getAs<FloatAttr>("dropout_p");
    call.f64(dropoutP ? dropoutP.getValueAsDouble() : 0.0)
        .i64(i64Attr("seed", 0))
        .i64(i64Attr("stream", 0));
    // Micro-batch i draws the dropout mask of its score elements in the
    // full batch's numbering: offset i * (its score count).
    microBatchOffset(batch * heads * q[rank - 2] * k[rank - 2]);
  } else {
    return std::nullopt;
  }
  return success();
}

/// The optimizer updates and loss scaling.
std::optional<LogicalResult> KernelLowering::lowerOptimizer() {
  if (is<SgdUpdateOp>()) {
    if (failed(expectCounts(3, 2, 4)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(ins[2]);
    optionalPtr(ins.size() == 4 ? std::optional<Value>(ins[3]) : std::nullopt);
    ptr(outs[0]);
    ptr(outs[1]);
    call.i64(numel(ins[0]))
        .f64(f64Attr("lr"))
        .f64(f64Attr("momentum"))
        .f64(f64Attr("weight_decay"));
  } else if (is<AdamWUpdateOp>()) {
    if (failed(expectCounts(5, 3, 6)))
      return failure();
    // 8-bit moments (packed bytes) update f32 parameters only.
    if (typeOf(ins[2]).getElementType().isInteger(8)) {
      callee = "memopt_adamw8bit_update";
      call.verbatim("MEMOPT_F32");
    } else {
      call.verbatim(dtypeArg(0));
    }
    for (Value v : ArrayRef<Value>(ins).take_front(5))
      ptr(v);
    optionalPtr(ins.size() == 6 ? std::optional<Value>(ins[5]) : std::nullopt);
    for (Value v : outs)
      ptr(v);
    call.i64(numel(ins[0]))
        .f64(f64Attr("lr"))
        .f64(f64Attr("beta1"))
        .f64(f64Attr("beta2"))
        .f64(f64Attr("eps"))
        .f64(f64Attr("weight_decay"));
  } else if (is<IncrementOp>()) {
    if (failed(expectCounts(1, 1, 2)))
      return failure();
    callee = "memopt_increment";
    ptr(ins[0]);
    optionalPtr(ins.size() == 2 ? std::optional<Value>(ins[1]) : std::nullopt);
    ptr(outs[0]);
  } else if (is<ScaleLossOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    callee = "memopt_scale_loss";
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
  } else if (is<UnscaleOp>()) {
    if (ins.size() < 2 || outs.size() != ins.size())
      return fail("expected the scale and N gradients in, N results and "
                  "found_inf out");
    size_t n = ins.size() - 1;
    ArrayRef<Value> grads = ArrayRef<Value>(ins).drop_front();
    ArrayRef<Value> results = ArrayRef<Value>(outs).drop_back();
    // Local arrays of the dtypes and of the gradient and result pointers.
    std::string dtypes = step.getGlobalName("dtypes");
    std::string dtypeList;
    SmallVector<Value> dtypeValues;
    if (binding)
      dtypeValues = binding->getValues(0, ins, outs);
    usesBinding = true;
    unbound |= dtypeValues.size() != grads.size();
    for (Value g : dtypeValues)
      dtypeList += (dtypeList.empty() ? "" : ", ") + dtype(g).str();
    emitc::VerbatimOp::create(step.builder, loc,
                              "const memopt_dtype " + dtypes + "[] = {" +
                                  dtypeList + "};");
    std::string gradArray =
        step.emitPointerArray(loc, "const void *", "grads", grads);
    std::string resultArray =
        step.emitPointerArray(loc, "void *", "results", results);
    SmallVector<int64_t> sizes =
        llvm::map_to_vector(grads, [&](Value v) { return numel(v); });
    ptr(ins[0]);
    call.i64(n).verbatim(dtypes).verbatim(gradArray).verbatim(resultArray);
    call.verbatim(step.getI64Array(sizes));
    ptr(outs.back());
  } else if (is<UpdateScaleOp>()) {
    if (failed(expectCounts(3, 2)))
      return failure();
    callee = "memopt_update_scale";
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.f64(f64Attr("growth_factor"))
        .f64(f64Attr("backoff_factor"))
        .i64(i64Attr("growth_interval"));
  } else {
    return std::nullopt;
  }
  return success();
}

//===----------------------------------------------------------------------===//
