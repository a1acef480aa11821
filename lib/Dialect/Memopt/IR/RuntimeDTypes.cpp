//===- RuntimeDTypes.cpp - element types vs runtime dtype rules -----------===//
//
// The binding of each memopt op to the dtype arguments of its runtime entry
// (each op names its entry and dtype sources in ODS: Memopt_RuntimeCall),
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

/// One row of the binding table: op `opName` calls `entry`, whose dtype
/// arguments read `sources` in the entry's order, with op code `opCode`
/// when the entry serves a family of ops.
struct Binding {
  StringRef opName;
  const char *entry;
  SmallVector<DTypeSource, runtime::kMaxDTypeSlots> sources;
  const char *opCode;
};

/// The rows of the ops of other dialects that memopt lowers to runtime
/// calls: the collectives of data parallelism's sum and ZeRO's shards
/// (upstream shard ops, by name: this library does not depend on that
/// dialect). memopt's own ops name their call in ODS
/// (Memopt_RuntimeCall, bindOpsThatNameTheirCall).
std::vector<Binding> buildForeignBindings() {
  DTypeSource in0 = operand(0);
  return {
      Binding{"shard.all_reduce", "memopt_all_reduce_sum", {in0}, ""},
      Binding{"shard.reduce_scatter", "memopt_reduce_scatter_sum", {in0}, ""},
      Binding{"shard.all_gather", "memopt_all_gather", {in0}, ""},
      Binding{"shard.all_slice", "memopt_all_slice", {in0}, ""},
  };
}

/// The dtype sources that ODS spells "in0, out0" or "ins1"; an empty list
/// for a malformed one, whose op then fails to verify (no rule has zero
/// dtype arguments) and unittests/DTypeRules names it.
SmallVector<DTypeSource, runtime::kMaxDTypeSlots>
parseDTypeSources(StringRef text) {
  SmallVector<DTypeSource, runtime::kMaxDTypeSlots> sources;
  SmallVector<StringRef> items;
  text.split(items, ',');
  for (StringRef item : items) {
    item = item.trim();
    unsigned index;
    if (item.consume_front("ins") && !item.getAsInteger(10, index))
      sources.push_back(operandsFrom(index));
    else if (item.consume_front("in") && !item.getAsInteger(10, index))
      sources.push_back(operand(index));
    else if (item.consume_front("out") && !item.getAsInteger(10, index))
      sources.push_back(result(index));
    else
      return {};
  }
  return sources;
}

/// Whether `OpT` names its runtime call (ODS: kRuntimeEntry, kRuntimeOpCode).
template <typename OpT, typename = void>
struct NamesItsCall : std::false_type {};
template <typename OpT>
struct NamesItsCall<OpT, std::void_t<decltype(OpT::kRuntimeEntry),
                                     decltype(OpT::kRuntimeOpCode),
                                     decltype(OpT::kRuntimeDTypeSources)>>
    : std::true_type {};

/// The bindings of the ops of `OpTs` that name their call: the entry, op
/// code and dtype sources they name.
template <typename... OpTs>
void bindOpsThatNameTheirCall(std::vector<Binding> &rows) {
  auto add = [&](auto *op) {
    using OpT = std::remove_pointer_t<decltype(op)>;
    if constexpr (NamesItsCall<OpT>::value)
      rows.push_back({OpT::getOperationName(), OpT::kRuntimeEntry,
                      parseDTypeSources(OpT::kRuntimeDTypeSources),
                      OpT::kRuntimeOpCode});
  };
  (add(static_cast<OpTs *>(nullptr)), ...);
}

std::vector<Binding> buildAllBindings() {
  std::vector<Binding> rows = buildForeignBindings();
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
