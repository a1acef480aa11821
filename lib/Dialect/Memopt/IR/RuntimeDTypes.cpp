//===- RuntimeDTypes.cpp - element types vs runtime dtype rules -----------===//
//
// The binding of each memopt op to the dtype arguments of its runtime entry,
// and the check of its element types against that entry's row of the
// runtime's dtype table. The table (memopt/runtime/DTypeRules.h) says which
// dtypes an entry accepts; this file says only which operand or result each
// dtype argument reads, which is also what the EmitC lowering passes.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/RuntimeDTypes.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace memopt;

std::optional<memopt_dtype> memopt::getRuntimeDType(Type type) {
  type = getElementTypeOrSelf(type);
  if (type.isF32())
    return MEMOPT_F32;
  if (type.isF16())
    return MEMOPT_F16;
  if (type.isBF16())
    return MEMOPT_BF16;
  if (type.isSignlessInteger(32))
    return MEMOPT_I32;
  if (type.isSignlessInteger(64))
    return MEMOPT_I64;
  if (type.isSignlessInteger(1))
    return MEMOPT_I1;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The bindings
//===----------------------------------------------------------------------===//

namespace {
constexpr DTypeSource operand(unsigned index) {
  return {DTypeSource::Kind::Operand, index};
}
constexpr DTypeSource result(unsigned index) {
  return {DTypeSource::Kind::Result, index};
}
constexpr DTypeSource operandsFrom(unsigned index) {
  return {DTypeSource::Kind::OperandsFrom, index};
}

/// One row of the binding table: op `OpT` calls `entry`, whose dtype
/// arguments read `sources` in the entry's order, with op code `opCode`
/// when the entry serves a family of ops.
struct Binding {
  StringRef opName;
  const char *entry;
  SmallVector<DTypeSource, runtime::kMaxDTypeSlots> sources;
  const char *opCode;
};

template <typename OpT>
Binding bind(const char *entry, std::initializer_list<DTypeSource> sources,
             const char *opCode = "") {
  return {OpT::getOperationName(), entry, sources, opCode};
}

/// One row per op whose runtime entry takes dtype arguments, in the order
/// of runtime.h, but the ops that name their call in ODS (the unary,
/// binary, scalar and activation-gradient families;
/// bindOpsThatNameTheirCall). The sources are those the lowering
/// passes (lib/Conversion/MemoptToEmitC reads them through this table).
std::vector<Binding> buildBindings() {
  DTypeSource in0 = operand(0), in1 = operand(1), in2 = operand(2),
              out0 = result(0);
  return {
      // Memory, casts and selection. A splat constant is a memopt_fill.
      bind<ConstantOp>("memopt_fill", {out0}),
      bind<CastOp>("memopt_cast", {in0, out0}),
      bind<WhereOp>("memopt_where", {out0}),
      bind<MaskedFillOp>("memopt_masked_fill", {in0}),
      // Elementwise families.
      bind<CompareOp>("memopt_compare", {in0}),
      bind<GeluOp>("memopt_unary", {in0}, "MEMOPT_UNARY_GELU"),
      bind<GeluGradOp>("memopt_activation_grad", {in0}, "MEMOPT_GRAD_GELU"),
      bind<ClampOp>("memopt_clamp", {in0}),
      bind<ScaleByOp>("memopt_scale_by", {in0}),
      bind<ClampGradOp>("memopt_clamp_grad", {in0}),
      // Shapes.
      bind<BroadcastOp>("memopt_broadcast", {in0}),
      bind<TransposeOp>("memopt_transpose", {in0}),
      bind<SliceOp>("memopt_slice", {in0}),
      bind<SliceGradOp>("memopt_slice_grad", {in0}),
      bind<ConcatOp>("memopt_concat", {out0}),
      // Reductions, softmax, normalisation.
      bind<ReduceSumOp>("memopt_reduce", {in0, out0}, "MEMOPT_REDUCE_SUM"),
      bind<ReduceMeanOp>("memopt_reduce", {in0, out0}, "MEMOPT_REDUCE_MEAN"),
      bind<ReduceMaxOp>("memopt_reduce", {in0, out0}, "MEMOPT_REDUCE_MAX"),
      bind<ReduceSumSquaresOp>("memopt_reduce", {in0, out0},
                               "MEMOPT_REDUCE_SUM_SQUARES"),
      bind<SoftmaxOp>("memopt_softmax", {in0}),
      bind<LogSoftmaxOp>("memopt_log_softmax", {in0}),
      bind<SoftmaxGradOp>("memopt_softmax_grad", {in0}),
      bind<LogSoftmaxGradOp>("memopt_log_softmax_grad", {in0}),
      bind<LayerNormOp>("memopt_layer_norm", {in0, in1}),
      bind<LayerNormGradOp>("memopt_layer_norm_grad", {in0, in2}),
      bind<RmsNormOp>("memopt_rms_norm", {in0, in1}),
      bind<RmsNormGradOp>("memopt_rms_norm_grad", {in0, in2}),
      bind<BatchNormOp>("memopt_batch_norm", {in0}),
      bind<BatchNormGradOp>("memopt_batch_norm_grad", {in1}),
      // Products, embeddings, convolution, pooling.
      bind<MatmulOp>("memopt_matmul", {in0, out0}),
      bind<Nf4MatmulOp>("memopt_nf4_matmul", {in0}),
      bind<EmbeddingOp>("memopt_embedding", {in0, in1}),
      bind<EmbeddingGradOp>("memopt_embedding_grad", {in0, in1}),
      bind<Conv2DOp>("memopt_conv2d", {in0}),
      bind<Conv2DGradInputOp>("memopt_conv2d_grad_input", {in0}),
      bind<Conv2DGradFilterOp>("memopt_conv2d_grad_filter", {in0}),
      bind<MaxPool2DOp>("memopt_max_pool2d", {in0}),
      bind<MaxPool2DGradOp>("memopt_max_pool2d_grad", {in0}),
      bind<AvgPool2DOp>("memopt_avg_pool2d", {in0}),
      bind<AvgPool2DGradOp>("memopt_avg_pool2d_grad", {in0}),
      // Fused attention, randomness.
      bind<AttentionOp>("memopt_attention", {in0}),
      bind<AttentionGradOp>("memopt_attention_grad", {in0}),
      bind<DropoutOp>("memopt_dropout", {in0}),
      // Collectives: data parallelism's sum and ZeRO's shards (upstream
      // shard ops, by name: this library does not depend on that dialect).
      Binding{"shard.all_reduce", "memopt_all_reduce_sum", {in0}, ""},
      Binding{"shard.reduce_scatter", "memopt_reduce_scatter_sum", {in0}, ""},
      Binding{"shard.all_gather", "memopt_all_gather", {in0}, ""},
      Binding{"shard.all_slice", "memopt_all_slice", {in0}, ""},
      // Losses.
      bind<CrossEntropyOp>("memopt_cross_entropy", {in0, in1}),
      bind<LabelCountOp>("memopt_label_count", {in0}),
      bind<CrossEntropyGradOp>("memopt_cross_entropy_grad", {in0, in1}),
      bind<LinearCrossEntropyOp>("memopt_linear_cross_entropy",
                                 {in0, in1, in2}),
      bind<LinearCrossEntropyGradOp>("memopt_linear_cross_entropy_grad",
                                     {in0, in1, in2}),
      bind<Nf4LinearCrossEntropyOp>("memopt_nf4_linear_cross_entropy",
                                    {in0, in2}),
      bind<Nf4LinearCrossEntropyGradOp>("memopt_nf4_linear_cross_entropy_grad",
                                        {in0, in2}),
      bind<MseLossOp>("memopt_mse_loss", {in0}),
      bind<MseLossGradOp>("memopt_mse_loss_grad", {in0}),
      // Optimizers and loss scaling.
      bind<SgdUpdateOp>("memopt_sgd_update", {in0}),
      bind<AdamWUpdateOp>("memopt_adamw_update", {in0}),
      bind<UnscaleOp>("memopt_unscale", {operandsFrom(1)}),
  };
}

/// Whether `OpT` names its runtime call (ODS: kRuntimeEntry, kRuntimeOpCode).
template <typename OpT, typename = void>
struct NamesItsCall : std::false_type {};
template <typename OpT>
struct NamesItsCall<OpT, std::void_t<decltype(OpT::kRuntimeEntry),
                                     decltype(OpT::kRuntimeOpCode)>>
    : std::true_type {};

/// The bindings of the ops of `OpTs` that name their call: the entry and op
/// code they name, the dtype of operand 0.
template <typename... OpTs>
void bindOpsThatNameTheirCall(std::vector<Binding> &rows) {
  auto add = [&](auto *op) {
    using OpT = std::remove_pointer_t<decltype(op)>;
    if constexpr (NamesItsCall<OpT>::value)
      rows.push_back(
          bind<OpT>(OpT::kRuntimeEntry, {operand(0)}, OpT::kRuntimeOpCode));
  };
  (add(static_cast<OpTs *>(nullptr)), ...);
}

std::vector<Binding> buildAllBindings() {
  std::vector<Binding> rows = buildBindings();
  bindOpsThatNameTheirCall<
#define GET_OP_LIST
#include "memopt/Dialect/Memopt/IR/MemoptOps.cpp.inc"
      >(rows);
  return rows;
}

/// The bindings with their rows resolved, built once.
struct BindingTable {
  BindingTable() {
    for (Binding &row : buildAllBindings()) {
      const runtime::DTypeRule *rule = runtime::findDTypeRule(row.entry);
      // A row naming an entry without a rule, or with another number of
      // dtype arguments, is a bug in the table above: the op then fails to
      // verify, and unittests/DTypeRules names it.
      if (rule && rule->numSlots != static_cast<int>(row.sources.size()))
        rule = nullptr;
      bindings.push_back(
          {row.opName, row.entry, row.opCode, rule, row.sources});
    }
    for (const RuntimeDTypeBinding &binding : bindings)
      byName[binding.opName] = &binding;
  }

  std::vector<RuntimeDTypeBinding> bindings;
  llvm::StringMap<const RuntimeDTypeBinding *> byName;
};

const BindingTable &getBindingTable() {
  static const BindingTable table;
  return table;
}
} // namespace

ArrayRef<RuntimeDTypeBinding> memopt::getRuntimeDTypeBindings() {
  return getBindingTable().bindings;
}

const RuntimeDTypeBinding *memopt::lookupRuntimeDTypeBinding(StringRef opName) {
  return getBindingTable().byName.lookup(opName);
}

SmallVector<Value> RuntimeDTypeBinding::getValues(unsigned slot,
                                                  ValueRange operands,
                                                  ValueRange results) const {
  if (slot >= sources.size())
    return {};
  DTypeSource source = sources[slot];
  switch (source.kind) {
  case DTypeSource::Kind::Operand:
    if (source.index < operands.size())
      return {operands[source.index]};
    return {};
  case DTypeSource::Kind::Result:
    if (source.index < results.size())
      return {results[source.index]};
    return {};
  case DTypeSource::Kind::OperandsFrom:
    if (source.index > operands.size())
      return {};
    return SmallVector<Value>(operands.drop_front(source.index));
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

/// "operand #0", or for a memopt.kernel "input #0": the value that supplies
/// dtype argument `slot`, the `index`-th of a variadic source.
static std::string describeSource(Operation *op,
                                  const RuntimeDTypeBinding &binding,
                                  unsigned slot, size_t index) {
  DTypeSource source = binding.sources[slot];
  bool kernel = isa<KernelOp>(op);
  bool isResult = source.kind == DTypeSource::Kind::Result;
  std::string what = isResult ? (kernel ? "output" : "result")
                              : (kernel ? "input" : "operand");
  return what + " #" + std::to_string(source.index + index) + " as " +
         binding.rule->slots[slot].name;
}

/// Reports that `binding`'s rule rejects `dtypes`, read from the `index`-th
/// value of each variadic source: the element types, where they come from,
/// the entry's message and its rule.
static LogicalResult reportRejection(Operation *op,
                                     const RuntimeDTypeBinding &binding,
                                     const memopt_dtype *dtypes,
                                     ArrayRef<size_t> indices) {
  const runtime::DTypeRule &rule = *binding.rule;
  unsigned numSlots = rule.numSlots;
  InFlightDiagnostic diag =
      op->emitOpError() << (numSlots == 1 ? "element type " : "element types ");
  for (unsigned slot = 0; slot < numSlots; ++slot)
    diag << (slot == 0              ? ""
             : slot + 1 == numSlots ? " and "
                                    : ", ")
         << runtime::dtypeName(dtypes[slot]) << " ("
         << describeSource(op, binding, slot, indices[slot]) << ")";
  diag << (numSlots == 1 ? " is" : " are") << " rejected by the runtime's "
       << rule.entry << ": " << runtime::describeDTypeRejection(rule, dtypes)
       << " (it accepts " << runtime::describeDTypeRule(rule) << ")";
  return diag;
}

LogicalResult memopt::verifyRuntimeDTypes(Operation *op, StringRef opName,
                                          ValueRange operands,
                                          ValueRange results) {
  const RuntimeDTypeBinding *binding = lookupRuntimeDTypeBinding(opName);
  if (!binding)
    return success();
  if (!binding->rule)
    return op->emitOpError()
           << "is bound to runtime entry " << binding->entry
           << ", which has no dtype rule with " << binding->sources.size()
           << " dtype arguments (RuntimeDTypes.cpp, DTypeRules.h)";
  const runtime::DTypeRule &rule = *binding->rule;
  unsigned numSlots = binding->sources.size();

  // One combination per value of a variadic source (memopt_unscale's
  // gradients); a slot with one value takes part in each.
  SmallVector<SmallVector<Value>, runtime::kMaxDTypeSlots> values;
  size_t numCombinations = 1;
  for (unsigned slot = 0; slot < numSlots; ++slot) {
    values.push_back(binding->getValues(slot, operands, results));
    // Too few operands or results: the op's own verifier reports it.
    if (values.back().empty())
      return success();
    numCombinations = std::max(numCombinations, values.back().size());
  }

  for (size_t k = 0; k < numCombinations; ++k) {
    memopt_dtype dtypes[runtime::kMaxDTypeSlots];
    SmallVector<size_t, runtime::kMaxDTypeSlots> indices;
    for (unsigned slot = 0; slot < numSlots; ++slot) {
      indices.push_back(std::min(k, values[slot].size() - 1));
      Value value = values[slot][indices.back()];
      std::optional<memopt_dtype> dtype = getRuntimeDType(value.getType());
      if (!dtype)
        return op->emitOpError()
               << "has element type " << getElementTypeOrSelf(value) << " on "
               << describeSource(op, *binding, slot, indices.back()) << " of "
               << rule.entry << ", which the runtime has no dtype for";
      dtypes[slot] = *dtype;
    }
    if (!runtime::acceptsDTypes(rule, dtypes))
      return reportRejection(op, *binding, dtypes, indices);
  }
  return success();
}
