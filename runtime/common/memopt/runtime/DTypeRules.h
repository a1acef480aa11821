//===- DTypeRules.h - the dtypes each runtime entry accepts -----*- C++ -*-===//
//
// The one statement of which `memopt_dtype` arguments each entry of
// runtime.h accepts: `kDTypeRules`, one row per entry that takes dtype
// arguments. Both runtimes check their arguments through it (Validate.h's
// checkDTypes), and the compiler's verifiers check the element types of each
// op and of each memopt.kernel against the row of the entry it lowers to
// (include/memopt/Dialect/Memopt/IR/RuntimeDTypes.h), so IR that verifies
// never makes a call that the runtime rejects for its dtypes.
// unittests/DTypeRules walks every row against the host runtime and the
// verifiers.
//
// A row names the entry, its dtype arguments in the entry's order, each with
// the set of dtypes it accepts on its own, and at most one tie between two of
// them ("out_dtype is dtype or f32"). Adding an entry adds one row; an entry
// that computes another's on other memory (offload's memopt_host_*) instead
// names that entry in kDTypeTwins and reads its row.
//
// Header-only C++17 without MLIR: the host runtime, nvcc's host code and the
// compiler include it alike.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_DTYPERULES_H
#define MEMOPT_RUNTIME_DTYPERULES_H

#include "memopt/runtime.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace memopt {
namespace runtime {

//===----------------------------------------------------------------------===//
// Dtypes and sets of them
//===----------------------------------------------------------------------===//

/// The number of memopt_dtype values, F32 to I1.
constexpr int kNumDTypes = 6;

/// Whether `dtype` is one of the kNumDTypes values.
constexpr bool isKnownDType(memopt_dtype dtype) {
  return static_cast<unsigned>(dtype) < static_cast<unsigned>(kNumDTypes);
}

/// The name of a dtype for messages ("f32", ...).
inline const char *dtypeName(memopt_dtype dtype) {
  static const char *const names[] = {"f32", "f16", "bf16", "i32", "i64", "i1"};
  return isKnownDType(dtype) ? names[dtype] : "unknown dtype";
}

/// The enumerator that names `dtype` in C ("MEMOPT_F32", ...), for generated
/// code; "" for an unknown dtype.
inline const char *dtypeEnumName(memopt_dtype dtype) {
  static const char *const names[] = {"MEMOPT_F32", "MEMOPT_F16", "MEMOPT_BF16",
                                      "MEMOPT_I32", "MEMOPT_I64", "MEMOPT_I1"};
  return isKnownDType(dtype) ? names[dtype] : "";
}

/// A set of dtypes: bit d stands for memopt_dtype d.
using DTypeSet = unsigned;

constexpr DTypeSet dtypeBit(memopt_dtype dtype) { return 1u << dtype; }

constexpr DTypeSet kF32 = dtypeBit(MEMOPT_F32);
/// Float storage: what every float kernel loads and stores.
constexpr DTypeSet kFloatDTypes =
    dtypeBit(MEMOPT_F32) | dtypeBit(MEMOPT_F16) | dtypeBit(MEMOPT_BF16);
/// Indices and labels.
constexpr DTypeSet kIndexDTypes = dtypeBit(MEMOPT_I32) | dtypeBit(MEMOPT_I64);
/// Every dtype: entries that move elements of any size.
constexpr DTypeSet kAnyDType = (1u << kNumDTypes) - 1;

constexpr bool inDTypeSet(DTypeSet set, memopt_dtype dtype) {
  return isKnownDType(dtype) && ((set >> dtype) & 1u) != 0;
}

/// The names of `set`'s dtypes in enum order, joined by `separator`.
inline std::string describeDTypeSet(DTypeSet set,
                                    const char *separator = ", ") {
  std::string text;
  for (int d = 0; d < kNumDTypes; ++d) {
    memopt_dtype dtype = static_cast<memopt_dtype>(d);
    if (!inDTypeSet(set, dtype))
      continue;
    if (!text.empty())
      text += separator;
    text += dtypeName(dtype);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

/// One dtype argument of an entry: its name in runtime.h and the dtypes it
/// accepts on its own.
struct DTypeSlot {
  const char *name;
  DTypeSet accepts;
};

/// A tie between two dtype arguments: slot `slot` must have slot `of`'s
/// dtype or one in `orAlso`, unless slot `of`'s dtype is in `anyWhenOfIn`.
struct DTypeTie {
  /// -1: the row has no tie.
  int slot;
  int of;
  DTypeSet orAlso;
  DTypeSet anyWhenOfIn;
  /// The entry's message when the tie fails: a printf format whose two %s
  /// are the names of slot `slot`'s and slot `of`'s dtypes.
  const char *message;
};

/// The most dtype arguments an entry takes.
constexpr int kMaxDTypeSlots = 3;

/// The dtype arguments an entry accepts: every slot's dtype in that slot's
/// set, and the tie (if any) holds.
struct DTypeRule {
  /// The entry's name in runtime.h ("memopt_reduce").
  const char *entry;
  int numSlots;
  DTypeSlot slots[kMaxDTypeSlots];
  DTypeTie tie;
};

namespace rules {
constexpr DTypeSlot floats(const char *name) { return {name, kFloatDTypes}; }
constexpr DTypeSlot indices(const char *name) { return {name, kIndexDTypes}; }
constexpr DTypeSlot anyDType(const char *name) { return {name, kAnyDType}; }
constexpr DTypeSlot numbers(const char *name) {
  return {name, kFloatDTypes | kIndexDTypes};
}
constexpr DTypeSlot f32(const char *name) { return {name, kF32}; }
constexpr DTypeTie kNoTie = {-1, -1, 0, 0, nullptr};
constexpr DTypeRule row(const char *entry, DTypeSlot slot) {
  return {entry, 1, {slot, {nullptr, 0}, {nullptr, 0}}, kNoTie};
}
constexpr DTypeRule row(const char *entry, DTypeSlot first, DTypeSlot second,
                        DTypeTie tie = kNoTie) {
  return {entry, 2, {first, second, {nullptr, 0}}, tie};
}
constexpr DTypeRule row(const char *entry, DTypeSlot first, DTypeSlot second,
                        DTypeSlot third, DTypeTie tie = kNoTie) {
  return {entry, 3, {first, second, third}, tie};
}
} // namespace rules

/// The table: every entry of runtime.h that takes memopt_dtype arguments,
/// in runtime.h's order. An entry's argument checks read its row by name.
inline constexpr DTypeRule kDTypeRules[] = {
    // Memory, casts and selection.
    rules::row("memopt_fill", rules::anyDType("dtype")),
    rules::row("memopt_cast", rules::numbers("in_dtype"),
               rules::numbers("out_dtype")),
    rules::row("memopt_where", rules::anyDType("dtype")),
    rules::row("memopt_masked_fill", rules::floats("dtype")),
    // Elementwise families.
    rules::row("memopt_compare", rules::numbers("dtype")),
    rules::row("memopt_unary", rules::floats("dtype")),
    rules::row("memopt_binary", rules::floats("dtype")),
    rules::row("memopt_scalar", rules::floats("dtype")),
    rules::row("memopt_activation_grad", rules::floats("dtype")),
    rules::row("memopt_clamp", rules::floats("dtype")),
    rules::row("memopt_scale_by", rules::floats("dtype")),
    rules::row("memopt_clamp_grad", rules::floats("dtype")),
    // Shapes move elements of any dtype.
    rules::row("memopt_broadcast", rules::anyDType("dtype")),
    rules::row("memopt_transpose", rules::anyDType("dtype")),
    rules::row("memopt_slice", rules::anyDType("dtype")),
    rules::row("memopt_slice_grad", rules::anyDType("dtype")),
    rules::row("memopt_concat", rules::anyDType("dtype")),
    // Reductions accumulate in f32 and round once on the store, so the
    // result may be the input's dtype or f32, and an f32 input may go to any
    // float result: the last pass of a reduction that bufferization splits
    // over runs of dimensions reads an f32 intermediate and writes the op's
    // bf16/f16 result (a convolution bias's gradient under BF16).
    rules::row("memopt_reduce", rules::floats("in_dtype"),
               rules::floats("out_dtype"),
               {1, 0, kF32, kF32,
                "result dtype %s is neither the input's (%s) nor f32, and "
                "the input is not f32"}),
    rules::row("memopt_softmax", rules::floats("dtype")),
    rules::row("memopt_log_softmax", rules::floats("dtype")),
    rules::row("memopt_softmax_grad", rules::floats("dtype")),
    rules::row("memopt_log_softmax_grad", rules::floats("dtype")),
    // Norms: the input's dtype and the weights' are independent (FP32
    // master weights of a BF16 model's norms).
    rules::row("memopt_layer_norm", rules::floats("dtype"),
               rules::floats("w_dtype")),
    rules::row("memopt_layer_norm_grad", rules::floats("dtype"),
               rules::floats("w_dtype")),
    rules::row("memopt_rms_norm", rules::floats("dtype"),
               rules::floats("w_dtype")),
    rules::row("memopt_rms_norm_grad", rules::floats("dtype"),
               rules::floats("w_dtype")),
    rules::row("memopt_batch_norm", rules::floats("dtype")),
    rules::row("memopt_batch_norm_grad", rules::floats("dtype")),
    // Products accumulate in f32; the result is rounded to the operands'
    // dtype or kept in f32 (the compute type).
    rules::row("memopt_matmul", rules::floats("dtype"),
               rules::floats("out_dtype"),
               {1, 0, kF32, 0,
                "result dtype %s is neither the operands' (%s) nor f32"}),
    // The NF4 weight is bytes; the input and the result share a dtype.
    rules::row("memopt_nf4_matmul", rules::floats("dtype")),
    rules::row("memopt_embedding", rules::floats("dtype"),
               rules::indices("index_dtype")),
    rules::row("memopt_embedding_grad", rules::floats("dtype"),
               rules::indices("index_dtype")),
    rules::row("memopt_conv2d", rules::floats("dtype")),
    rules::row("memopt_conv2d_grad_input", rules::floats("dtype")),
    rules::row("memopt_conv2d_grad_filter", rules::floats("dtype")),
    rules::row("memopt_max_pool2d", rules::floats("dtype")),
    rules::row("memopt_max_pool2d_grad", rules::floats("dtype")),
    rules::row("memopt_avg_pool2d", rules::floats("dtype")),
    rules::row("memopt_avg_pool2d_grad", rules::floats("dtype")),
    // Fused attention.
    rules::row("memopt_attention", rules::floats("dtype")),
    rules::row("memopt_attention_grad", rules::floats("dtype")),
    // Randomness.
    rules::row("memopt_dropout", rules::floats("dtype")),
    // Collectives: the f32 accumulators and counts of data parallelism, and
    // ZeRO's shards of gradients (f32) and parameters.
    rules::row("memopt_all_reduce_sum", rules::f32("dtype")),
    rules::row("memopt_reduce_scatter_sum", rules::f32("dtype")),
    rules::row("memopt_all_gather", rules::floats("dtype")),
    rules::row("memopt_all_slice", rules::floats("dtype")),
    // Losses: logits and labels.
    rules::row("memopt_cross_entropy", rules::floats("dtype"),
               rules::indices("label_dtype")),
    rules::row("memopt_label_count", rules::indices("label_dtype")),
    rules::row("memopt_cross_entropy_grad", rules::floats("dtype"),
               rules::indices("label_dtype")),
    // The fused linear cross-entropy computes in dtype and reads its weight
    // in dtype or as an f32 master weight.
    rules::row("memopt_linear_cross_entropy", rules::floats("dtype"),
               rules::floats("w_dtype"), rules::indices("label_dtype"),
               {1, 0, kF32, 0, "w dtype %s is neither x's (%s) nor f32"}),
    rules::row("memopt_linear_cross_entropy_grad", rules::floats("dtype"),
               rules::floats("w_dtype"), rules::indices("label_dtype"),
               {1, 0, kF32, 0, "w dtype %s is neither x's (%s) nor f32"}),
    // The NF4 weight is bytes.
    rules::row("memopt_nf4_linear_cross_entropy", rules::floats("dtype"),
               rules::indices("label_dtype")),
    rules::row("memopt_nf4_linear_cross_entropy_grad", rules::floats("dtype"),
               rules::indices("label_dtype")),
    rules::row("memopt_mse_loss", rules::floats("dtype")),
    rules::row("memopt_mse_loss_grad", rules::floats("dtype")),
    // Optimizers and loss scaling; memopt_unscale's rule holds for each
    // entry of its `dtypes` array.
    rules::row("memopt_sgd_update", rules::floats("dtype")),
    rules::row("memopt_adamw_update", rules::floats("dtype")),
    // 8-bit moments update f32 master weights.
    rules::row("memopt_adamw8bit_update", rules::f32("dtype")),
    rules::row("memopt_unscale", rules::floats("dtypes[j]")),
};

/// The number of rows.
constexpr int kNumDTypeRules =
    static_cast<int>(sizeof(kDTypeRules) / sizeof(kDTypeRules[0]));

/// An entry that computes what another entry computes, on other memory, and
/// takes its dtype arguments in the same order: it reads that entry's row.
struct DTypeTwin {
  const char *entry;
  const char *of;
};

/// The twins: the host-memory entries of optimizer offload (runtime.h's
/// "Host memory (offload)"), which accept exactly what their device
/// counterparts accept.
inline constexpr DTypeTwin kDTypeTwins[] = {
    {"memopt_host_cast", "memopt_cast"},
    {"memopt_host_sgd_update", "memopt_sgd_update"},
    {"memopt_host_adamw_update", "memopt_adamw_update"},
    {"memopt_host_adamw8bit_update", "memopt_adamw8bit_update"},
    {"memopt_host_fill", "memopt_fill"},
    {"memopt_host_binary", "memopt_binary"},
    {"memopt_host_scale_by", "memopt_scale_by"},
    {"memopt_host_reduce", "memopt_reduce"},
};

/// The row of `entry` (a twin's: its counterpart's), or nullptr when it
/// takes no dtype arguments.
inline const DTypeRule *findDTypeRule(const char *entry) {
  for (const DTypeRule &rule : kDTypeRules)
    if (std::strcmp(rule.entry, entry) == 0)
      return &rule;
  for (const DTypeTwin &twin : kDTypeTwins)
    if (std::strcmp(twin.entry, entry) == 0)
      return findDTypeRule(twin.of);
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Checks and messages
//===----------------------------------------------------------------------===//

/// What findDTypeViolation returns when `rule` accepts the dtypes.
constexpr int kDTypesAccepted = -1;
/// What findDTypeViolation returns when only the tie fails.
constexpr int kDTypeTieViolated = kMaxDTypeSlots;

/// The first of `rule`'s conditions that `dtypes` (rule.numSlots of them, in
/// the entry's argument order) violate: the index of the first slot whose
/// dtype is outside its set, kDTypeTieViolated, or kDTypesAccepted.
constexpr int findDTypeViolation(const DTypeRule &rule,
                                 const memopt_dtype *dtypes) {
  for (int i = 0; i < rule.numSlots; ++i)
    if (!inDTypeSet(rule.slots[i].accepts, dtypes[i]))
      return i;
  const DTypeTie &tie = rule.tie;
  if (tie.slot < 0)
    return kDTypesAccepted;
  memopt_dtype dtype = dtypes[tie.slot], of = dtypes[tie.of];
  if (dtype == of || inDTypeSet(tie.orAlso, dtype) ||
      inDTypeSet(tie.anyWhenOfIn, of))
    return kDTypesAccepted;
  return kDTypeTieViolated;
}

/// Whether `rule` accepts `dtypes`.
constexpr bool acceptsDTypes(const DTypeRule &rule,
                             const memopt_dtype *dtypes) {
  return findDTypeViolation(rule, dtypes) == kDTypesAccepted;
}

/// Why `dtype` is not in `set`, as an entry reports it after its name.
inline std::string describeDTypeMismatch(DTypeSet set, memopt_dtype dtype) {
  char text[160];
  int value = static_cast<int>(dtype);
  if (set == kAnyDType)
    std::snprintf(text, sizeof(text), "unknown dtype %d", value);
  else if (set == kFloatDTypes)
    std::snprintf(text, sizeof(text),
                  "expected a float dtype (f32, f16, bf16), got %s (%d)",
                  dtypeName(dtype), value);
  else if (set == kIndexDTypes)
    std::snprintf(text, sizeof(text),
                  "expected an index dtype (i32, i64), got %s (%d)",
                  dtypeName(dtype), value);
  else
    std::snprintf(text, sizeof(text), "expected a dtype in (%s), got %s (%d)",
                  describeDTypeSet(set).c_str(), dtypeName(dtype), value);
  return text;
}

/// Why `rule` rejects `dtypes`: the message its entry records after
/// "<entry>: ". Empty when the rule accepts them.
inline std::string describeDTypeRejection(const DTypeRule &rule,
                                          const memopt_dtype *dtypes) {
  int violation = findDTypeViolation(rule, dtypes);
  if (violation == kDTypesAccepted)
    return "";
  if (violation != kDTypeTieViolated)
    return describeDTypeMismatch(rule.slots[violation].accepts,
                                 dtypes[violation]);
  char text[256];
  std::snprintf(text, sizeof(text), rule.tie.message,
                dtypeName(dtypes[rule.tie.slot]),
                dtypeName(dtypes[rule.tie.of]));
  return text;
}

/// The rule in words, for diagnostics and documentation: "in_dtype in {f32,
/// f16, bf16}, out_dtype in {f32, f16, bf16}; out_dtype is in_dtype or f32,
/// or any when in_dtype is f32".
inline std::string describeDTypeRule(const DTypeRule &rule) {
  std::string text;
  for (int i = 0; i < rule.numSlots; ++i) {
    text += i ? ", " : "";
    text += std::string(rule.slots[i].name) + " in {" +
            describeDTypeSet(rule.slots[i].accepts) + "}";
  }
  const DTypeTie &tie = rule.tie;
  if (tie.slot < 0)
    return text;
  const char *slot = rule.slots[tie.slot].name, *of = rule.slots[tie.of].name;
  text += std::string("; ") + slot + " is " + of;
  if (tie.orAlso)
    text += " or " + describeDTypeSet(tie.orAlso, " or ");
  if (tie.anyWhenOfIn)
    text += std::string(", or any when ") + of + " is " +
            describeDTypeSet(tie.anyWhenOfIn, " or ");
  return text;
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_DTYPERULES_H
