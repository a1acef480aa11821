//===- KernelCalls.cpp - memopt.kernel to its runtime call ----------------===//
//
// One `memopt.kernel` of the planned step becomes one `emitc.call_opaque` of
// its runtime entry (runtime.h). KernelLowering checks what every entry
// shares (the operands are addressable, the dtype arguments are the ones
// RuntimeDTypes.cpp binds, required attributes are present), then one method
// per family of kernels appends its entry's arguments: here elementwise,
// copies, layout, normalization and linear; collectives and dropout,
// losses, attention and the optimizer in TrainingKernelCalls.cpp. A family
// recognizes its kernels by their op class.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace memopt;
using namespace memopt::lowering;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

KernelLowering::KernelLowering(TrainStepLowering &step, KernelOp kernel)
    : step(step), kernel(kernel), name(kernel.getKernel()),
      attrs(kernel.getOpAttributes()), ins(kernel.getIns()),
      outs(kernel.getOuts()), loc(kernel.getLoc()),
      binding(lookupRuntimeDTypeBinding(name)), call(step.ctx) {}

LogicalResult KernelLowering::fail(const Twine &why) {
  return kernel.emitOpError() << "'" << name << "' cannot be lowered: " << why;
}

LogicalResult KernelLowering::expectCounts(size_t numIns, size_t numOuts,
                                           size_t maxIns) {
  maxIns = std::max(maxIns, numIns);
  if (ins.size() < numIns || ins.size() > maxIns || outs.size() != numOuts)
    return fail("expected " + Twine(numIns) +
                (maxIns > numIns ? " or " + Twine(maxIns) : Twine()) +
                " inputs and " + Twine(numOuts) + " outputs, got " +
                Twine(ins.size()) + " and " + Twine(outs.size()));
  return success();
}

LogicalResult KernelLowering::elementwise(StringRef kind, unsigned numIns,
                                          bool withValue) {
  if (failed(expectCounts(numIns, 1)))
    return failure();
  call.verbatim(kind).verbatim(dtypeArg(0));
  for (unsigned i = 0; i < numIns; ++i)
    ptr(ins[i]);
  if (withValue)
    call.f64(f64Attr("value"));
  ptr(outs[0]);
  call.i64(numel(outs[0]));
  return success();
}

void KernelLowering::microBatchOffset(int64_t elements) {
  if (!step.loopIndex) {
    call.i64(0);
    return;
  }
  Type indexType = step.builder.getIndexType();
  Value size = emitc::ConstantOp::create(step.builder, loc, indexType,
                                         step.builder.getIndexAttr(elements));
  call.value(
      emitc::MulOp::create(step.builder, loc, indexType, step.loopIndex, size));
}

StringRef KernelLowering::dtypeArg(unsigned slot) {
  usesBinding = true;
  SmallVector<Value> values;
  if (binding)
    values = binding->getValues(slot, ins, outs);
  if (values.empty()) {
    unbound = true;
    return "";
  }
  return dtype(values.front());
}

double KernelLowering::f64Attr(StringRef attrName) {
  if (auto attr = attrs.getAs<FloatAttr>(attrName))
    return attr.getValueAsDouble();
  setMissing(attrName);
  return 0.0;
}

int64_t KernelLowering::i64Attr(StringRef attrName,
                                std::optional<int64_t> def) {
  if (auto attr = attrs.getAs<IntegerAttr>(attrName))
    return attr.getInt();
  if (def)
    return *def;
  setMissing(attrName);
  return 0;
}

SmallVector<int64_t> KernelLowering::arrayAttr(StringRef attrName,
                                               ArrayRef<int64_t> def) {
  if (auto attr = attrs.getAs<DenseI64ArrayAttr>(attrName))
    return SmallVector<int64_t>(attr.asArrayRef());
  if (!def.empty())
    return SmallVector<int64_t>(def);
  setMissing(attrName);
  return SmallVector<int64_t>(2, 0);
}

SmallVector<int64_t> KernelLowering::pairAttr(StringRef attrName,
                                              ArrayRef<int64_t> def) {
  SmallVector<int64_t> pair = arrayAttr(attrName, def);
  if (pair.size() != 2) {
    setMissing(attrName + "' pair");
    pair.assign(2, 0);
  }
  return pair;
}

SmallVector<int64_t> KernelLowering::perDimAttr(StringRef attrName,
                                                size_t rank) {
  SmallVector<int64_t> values = arrayAttr(attrName);
  if (values.size() != rank && !missing)
    setMissing(attrName + "' of " + Twine(rank) + " entries");
  return values;
}

StringRef KernelLowering::reduction() {
  auto attr = attrs.getAs<LossReductionAttr>("reduction");
  return attr && attr.getValue() == LossReduction::Sum
             ? "MEMOPT_REDUCTION_SUM"
             : "MEMOPT_REDUCTION_MEAN";
}

bool KernelLowering::geluTanh() {
  auto attr = attrs.getAs<GeluApproximationAttr>("approximate");
  return attr && attr.getValue() == GeluApproximation::Tanh;
}

LogicalResult TrainStepLowering::lowerKernel(KernelOp kernel) {
  return KernelLowering(*this, kernel).lower();
}

LogicalResult KernelLowering::lower() {
  for (auto [index, v] : llvm::enumerate(kernel->getOperands()))
    if (!step.getPointer(v))
      return fail("operand #" + Twine(index) +
                  " is not a function argument, a planned allocation or a "
                  "view of one");
  call.value(step.context);
  std::optional<LogicalResult> built;
  for (auto family :
       {&KernelLowering::lowerElementwise, &KernelLowering::lowerCopies,
        &KernelLowering::lowerLayout, &KernelLowering::lowerNormalization,
        &KernelLowering::lowerLinear,
        &KernelLowering::lowerCollectivesAndDropout,
        &KernelLowering::lowerLosses, &KernelLowering::lowerAttention,
        &KernelLowering::lowerOptimizer}) {
    built = (this->*family)();
    if (built)
      break;
  }
  if (!built)
    return fail("no runtime entry computes it");
  if (failed(*built))
    return failure();

  if (missing)
    return fail("it has no valid '" + missingName + "' attribute");
  // The entry is the binding's (RuntimeDTypes.cpp) unless the family chose
  // one the table does not list (copies, the step counter, loss scaling).
  if (callee.empty() && binding)
    callee = binding->entry;
  if (callee.empty())
    return fail("no runtime entry computes it");
  if (usesBinding && (unbound || !binding || binding->entry != callee))
    return fail("its dtype arguments are not bound to " + callee +
                "'s (lib/Dialect/Memopt/IR/RuntimeDTypes.cpp)");
  for (Value v : llvm::concat<Value>(ins, outs))
    if (!isAddressable(typeOf(v).getElementType()))
      return fail("the runtime has no dtype for its operand types");
  // Optimizer offload: the host entry of the same signature.
  if (runsOnHost(kernel)) {
    if (!hasHostEntry(name) || callee == "memopt_copy_from_host")
      return fail("it is marked memopt.on_host, but it has no host entry "
                  "(the optimizer updates, casts, splat constants, adds, "
                  "scale_by and reduce_sum_squares have one)");
    StringRef entry = callee;
    entry.consume_front("memopt_");
    hostCallee = ("memopt_host_" + entry).str();
    callee = hostCallee;
  }
  step.emitCall(loc, callee, call);
  return success();
}

/// Elementwise kernels (unary, binary, scalar, activation gradients) and
/// reductions.
std::optional<LogicalResult> KernelLowering::lowerElementwise() {
  // The family is the binding's entry, the op its op code; gelu's tanh
  // approximation is the code's _TANH form.
  StringRef entry = binding ? binding->entry : StringRef();
  std::string kind = binding ? binding->opCode.str() : std::string();
  if ((is<GeluOp, GeluGradOp>()) && geluTanh())
    kind += "_TANH";
  if (entry == "memopt_unary" || entry == "memopt_scalar") {
    if (failed(elementwise(kind, 1, entry == "memopt_scalar")))
      return failure();
  } else if (entry == "memopt_binary" || entry == "memopt_activation_grad") {
    if (failed(elementwise(kind, 2, false)))
      return failure();
  } else if (entry == "memopt_compare") {
    auto predicate = attrs.getAs<ComparePredicateAttr>("predicate");
    if (!predicate)
      return fail("it has no comparison predicate");
    std::string code =
        ("MEMOPT_COMPARE_" + stringifyComparePredicate(predicate.getValue()))
            .str();
    if (failed(elementwise(StringRef(code).upper(), 2, false)))
      return failure();
  } else if (entry == "memopt_reduce") {
    if (failed(expectCounts(1, 1)))
      return failure();
    // Collapse to [outer, reduced, inner]: the reduced dimensions of extent
    // above 1 must form one run (extent-1 dimensions fit anywhere).
    ArrayRef<int64_t> shape = shapeOf(ins[0]);
    SmallVector<int64_t> dims = arrayAttr("dims");
    int64_t lo = shape.size(), hi = -1;
    for (int64_t d : dims)
      if (d >= 0 && d < static_cast<int64_t>(shape.size()) && shape[d] != 1) {
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
    std::array<int64_t, 3> extents = {numel(ins[0]), 1, 1};
    if (hi >= 0) {
      for (int64_t d = lo; d <= hi; ++d)
        if (shape[d] != 1 && !llvm::is_contained(dims, d))
          return fail("reduced dimensions are not contiguous");
      extents = {product(shape.take_front(lo)),
                 product(shape.slice(lo, hi - lo + 1)),
                 product(shape.drop_front(hi + 1))};
    }
    call.verbatim(kind).verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(outs[0]);
    call.i64(extents[0]).i64(extents[1]).i64(extents[2]);
  } else {
    return std::nullopt;
  }
  return success();
}

/// Constants, copies, casts and selections.
std::optional<LogicalResult> KernelLowering::lowerCopies() {
  if (is<ConstantOp>()) {
    if (failed(expectCounts(0, 1)))
      return failure();
    auto value = attrs.getAs<DenseElementsAttr>("value");
    if (!value)
      return fail("its 'value' is not a dense elements attribute");
    Type elementType = typeOf(outs[0]).getElementType();
    if (value.getNumElements() != numel(outs[0]) ||
        value.getElementType() != elementType)
      return fail("its 'value' does not match the output buffer");
    if (value.isSplat()) {
      double fill;
      if (elementType.isInteger(1))
        fill = value.getSplatValue<bool>() ? 1.0 : 0.0;
      else if (isa<IntegerType>(elementType))
        fill = static_cast<double>(value.getSplatValue<APInt>().getSExtValue());
      else
        fill = value.getSplatValue<APFloat>().convertToDouble();
      call.verbatim(dtypeArg(0));
      ptr(outs[0]);
      call.i64(numel(outs[0])).f64(fill);
    } else {
      std::string data = step.getConstantData(value, elementType);
      callee = "memopt_copy_from_host";
      ptr(outs[0]);
      call.verbatim(data).i64(numel(outs[0]) * getElementBytes(elementType));
    }
  } else if (is<TransferOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    auto to = attrs.getAs<MemoryKindAttr>("to");
    if (!to)
      return fail("it has no valid 'to' attribute");
    // With a slot (--memopt-overlap-transfers) the copy starts here and
    // its memopt.transfer_wait ends it.
    auto slot = attrs.getAs<IntegerAttr>("slot");
    if (attrs.contains("slot") && !slot)
      return fail("it has no valid 'slot' attribute");
    callee = slot ? "memopt_transfer_start" : "memopt_transfer";
    call.verbatim(to.getValue() == MemoryKind::Host ? "MEMOPT_TO_HOST"
                                                    : "MEMOPT_TO_DEVICE");
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(outs[0]) *
             getElementBytes(typeOf(outs[0]).getElementType()));
    if (slot)
      call.i64(slot.getInt());
  } else if (is<ReshapeOp>()) {
    // Also the copies --memopt-bufferize inserts (equal in and out types).
    if (failed(expectCounts(1, 1)))
      return failure();
    callee = "memopt_copy";
    ptr(outs[0]);
    ptr(ins[0]);
    call.i64(numel(outs[0]) *
             getElementBytes(typeOf(outs[0]).getElementType()));
  } else if (is<CastOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (is<WhereOp>()) {
    if (failed(expectCounts(3, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(ins[2]);
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (is<MaskedFillOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    call.f64(f64Attr("value"));
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (is<ScaleByOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (is<ClampOp, ClampGradOp>()) {
    // A missing bound is an infinite one; `inclusive` defaults to true.
    bool isGrad = is<ClampGradOp>();
    if (failed(expectCounts(isGrad ? 2 : 1, 1)))
      return failure();
    auto bound = [&](StringRef attrName, double missingValue) {
      auto attr = attrs.getAs<FloatAttr>(attrName);
      return attr ? attr.getValueAsDouble() : missingValue;
    };
    call.verbatim(dtypeArg(0));
    for (Value in : ins)
      ptr(in);
    call.f64(bound("min", -INFINITY)).f64(bound("max", INFINITY));
    if (isGrad) {
      auto inclusive = attrs.getAs<BoolAttr>("inclusive");
      call.i32(!inclusive || inclusive.getValue() ? 1 : 0);
    }
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else {
    return std::nullopt;
  }
  return success();
}

/// Broadcasts, transposes, slices and concatenations.
std::optional<LogicalResult> KernelLowering::lowerLayout() {
  if (is<BroadcastOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.i64(shapeOf(ins[0]).size())
        .verbatim(step.getI64Array(shapeOf(ins[0])))
        .verbatim(step.getI64Array(perDimAttr("dims", shapeOf(ins[0]).size())));
    ptr(outs[0]);
    call.i64(shapeOf(outs[0]).size())
        .verbatim(step.getI64Array(shapeOf(outs[0])));
  } else if (is<TransposeOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.i64(shapeOf(ins[0]).size())
        .verbatim(step.getI64Array(shapeOf(ins[0])))
        .verbatim(step.getI64Array(
            perDimAttr("permutation", shapeOf(ins[0]).size())));
    ptr(outs[0]);
  } else if (is<SliceOp, SliceGradOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    bool isGrad = is<SliceGradOp>();
    // The shape argument is the sliced tensor's: the input of a slice, the
    // result of its gradient.
    ArrayRef<int64_t> fullShape = shapeOf(isGrad ? outs[0] : ins[0]);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.i64(fullShape.size())
        .verbatim(step.getI64Array(fullShape))
        .verbatim(step.getI64Array(perDimAttr("starts", fullShape.size())))
        .verbatim(step.getI64Array(perDimAttr("limits", fullShape.size())))
        .verbatim(step.getI64Array(perDimAttr("strides", fullShape.size())));
    ptr(outs[0]);
  } else if (is<ConcatOp>()) {
    if (ins.empty() || failed(expectCounts(ins.size(), 1)))
      return ins.empty() ? fail("it has no inputs") : failure();
    int64_t dim = i64Attr("dim");
    ArrayRef<int64_t> outShape = shapeOf(outs[0]);
    if (dim < 0 || dim >= static_cast<int64_t>(outShape.size()))
      return fail("'dim' is out of range");
    SmallVector<int64_t> sizes =
        llvm::map_to_vector(ins, [&](Value v) { return shapeOf(v)[dim]; });
    // A local array of the input pointers.
    std::string inputs = step.getGlobalName("inputs");
    // `{{` prints one brace; `{}` is an operand.
    std::string format = "const void *" + inputs + "[] = {{";
    for (size_t j = 0; j < ins.size(); ++j)
      format += j ? ", {}" : "{}";
    format += "};";
    emitc::VerbatimOp::create(
        step.builder, loc, step.builder.getStringAttr(format),
        llvm::map_to_vector(ins, [&](Value v) { return step.getPointer(v); }));
    call.verbatim(dtypeArg(0)).i64(ins.size()).verbatim(inputs);
    call.verbatim(step.getI64Array(sizes));
    ptr(outs[0]);
    call.i64(product(outShape.take_front(dim)))
        .i64(product(outShape.drop_front(dim + 1)));
  } else {
    return std::nullopt;
  }
  return success();
}

/// Softmaxes and the norms, with their gradients.
std::optional<LogicalResult> KernelLowering::lowerNormalization() {
  if (is<SoftmaxOp, LogSoftmaxOp>()) {
    if (failed(expectCounts(1, 1)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(ins[0]);
    int64_t dim = i64Attr("dim");
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
      return fail("'dim' is out of range");
    auto extents = collapseAround(shape, dim);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(extents[0]).i64(extents[1]).i64(extents[2]);
  } else if (is<SoftmaxGradOp, LogSoftmaxGradOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(ins[0]);
    int64_t dim = i64Attr("dim");
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
      return fail("'dim' is out of range");
    auto extents = collapseAround(shape, dim);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(extents[0]).i64(extents[1]).i64(extents[2]);
  } else if (is<LayerNormOp, RmsNormOp>()) {
    bool isLayer = is<LayerNormOp>();
    if (failed(expectCounts(isLayer ? 3 : 2, isLayer ? 3 : 2)))
      return failure();
    int64_t cols = numel(ins[1]);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(ins[1]);
    if (isLayer)
      ptr(ins[2]);
    for (Value out : outs)
      ptr(out);
    call.i64(numel(ins[0]) / cols).i64(cols).f64(f64Attr("epsilon"));
  } else if (is<LayerNormGradOp, RmsNormGradOp>()) {
    bool isLayer = is<LayerNormGradOp>();
    if (failed(expectCounts(isLayer ? 5 : 4, isLayer ? 3 : 2)))
      return failure();
    int64_t cols = numel(ins[2]);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    call.verbatim(dtypeArg(1));
    for (Value in : ArrayRef<Value>(ins).drop_front(2))
      ptr(in);
    for (Value out : outs)
      ptr(out);
    call.i64(numel(ins[1]) / cols).i64(cols);
  } else if (is<BatchNormOp, BatchNormGradOp>()) {
    bool isGrad = is<BatchNormGradOp>();
    if (failed(isGrad ? expectCounts(5, 3) : expectCounts(5, 5)))
      return failure();
    Value input = isGrad ? ins[1] : ins[0];
    ArrayRef<int64_t> shape = shapeOf(input);
    if (shape.size() < 2)
      return fail("the input has rank below 2");
    call.verbatim(dtypeArg(0));
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.i64(shape[0]).i64(shape[1]).i64(product(shape.drop_front(2)));
    if (!isGrad)
      call.f64(f64Attr("epsilon")).f64(f64Attr("momentum"));
  } else {
    return std::nullopt;
  }
  return success();
}

/// Matmuls, embeddings, convolutions and pooling.
std::optional<LogicalResult> KernelLowering::lowerLinear() {
  if (is<MatmulOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    ArrayRef<int64_t> a = shapeOf(ins[0]), b = shapeOf(ins[1]),
                      c = shapeOf(outs[0]);
    if (a.size() < 2 || b.size() < 2 || c.size() < 2)
      return fail("an operand has rank below 2");
    bool transA = attrs.contains("transpose_lhs");
    bool transB = attrs.contains("transpose_rhs");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(product(a.drop_back(2)))
        .i64(product(b.drop_back(2)))
        .i64(c[c.size() - 2])
        .i64(c.back())
        .i64(transA ? a[a.size() - 2] : a.back())
        .i32(transA)
        .i32(transB)
        .verbatim(dtypeArg(1));
  } else if (is<Nf4MatmulOp>()) {
    // lhs, packed weight -> result, scratch.
    if (failed(expectCounts(2, 2)))
      return failure();
    ArrayRef<int64_t> c = shapeOf(outs[0]);
    auto weight = attrs.getAs<DenseI64ArrayAttr>("rhs_shape");
    if (c.size() < 2 || !weight || weight.size() != 2)
      return fail("the result has rank below 2 or the weight no shape");
    bool transB = attrs.contains("transpose_rhs");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    ptr(outs[1]);
    call.i64(numel(outs[1]) * 4)
        .i64(numel(outs[0]) / c.back())
        .i64(c.back())
        .i64(weight[transB ? 1 : 0])
        .i32(transB);
  } else if (is<EmbeddingOp, EmbeddingGradOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    bool isGrad = is<EmbeddingGradOp>();
    ArrayRef<int64_t> table = shapeOf(isGrad ? outs[0] : ins[0]);
    if (table.size() != 2)
      return fail("the table is not a matrix");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(numel(ins[1])).i64(table[0]).i64(table[1]);
    if (isGrad)
      call.i64(i64Attr("padding_idx", -1));
  } else if (is<Conv2DOp, Conv2DGradInputOp, Conv2DGradFilterOp>()) {
    if (failed(expectCounts(2, 1)))
      return failure();
    // The forward's input [n, c, h, w] and filter [o, c / groups, kh, kw].
    Value input = is<Conv2DOp>()            ? ins[0]
                  : is<Conv2DGradInputOp>() ? outs[0]
                                            : ins[1];
    Value filter = is<Conv2DGradFilterOp>() ? outs[0] : ins[1];
    ArrayRef<int64_t> x = shapeOf(input), f = shapeOf(filter);
    if (x.size() != 4 || f.size() != 4)
      return fail("the input or filter is not 4-D");
    SmallVector<int64_t> strides = pairAttr("strides", {1, 1});
    SmallVector<int64_t> padding = pairAttr("padding", {0, 0});
    SmallVector<int64_t> dilations = pairAttr("dilations", {1, 1});
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(x[0]).i64(x[1]).i64(x[2]).i64(x[3]);
    call.i64(f[0]).i64(f[2]).i64(f[3]);
    call.i64(strides[0]).i64(strides[1]);
    call.i64(padding[0]).i64(padding[1]);
    call.i64(dilations[0]).i64(dilations[1]);
    call.i64(i64Attr("groups", 1));
  } else if (is<MaxPool2DOp, AvgPool2DOp, MaxPool2DGradOp, AvgPool2DGradOp>()) {
    bool isMaxGrad = is<MaxPool2DGradOp>();
    bool isGrad = isMaxGrad || is<AvgPool2DGradOp>();
    if (failed(expectCounts(isMaxGrad ? 2 : 1, 1)))
      return failure();
    ArrayRef<int64_t> x = shapeOf(isGrad ? outs[0] : ins[0]);
    if (x.size() != 4)
      return fail("the input is not 4-D");
    SmallVector<int64_t> window = pairAttr("kernel");
    SmallVector<int64_t> strides = pairAttr("strides");
    SmallVector<int64_t> padding = pairAttr("padding", {0, 0});
    call.verbatim(dtypeArg(0));
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.i64(x[0]).i64(x[1]).i64(x[2]).i64(x[3]);
    call.i64(window[0]).i64(window[1]);
    call.i64(strides[0]).i64(strides[1]);
    call.i64(padding[0]).i64(padding[1]);
  } else {
    return std::nullopt;
  }
  return success();
}
