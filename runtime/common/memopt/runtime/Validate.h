//===- Validate.h - argument checks shared by the runtimes ------*- C++ -*-===//
//
// The argument validation and shape arithmetic of runtime.h's entries, written
// once for runtime/host and runtime/cuda so that the two accept the same
// arguments and report the same messages (unittests/Runtime/
// ArgumentErrorCases.h runs one list of argument errors against both).
// Header-only C++17 for g++ and for nvcc's host code; no device code.
//
// Every dtype decision goes through checkDTypes, which reads the entry's row
// of the dtype table (DTypeRules.h) that the compiler's verifiers read too.
//
// A check returns true when its arguments are valid; otherwise it records the
// first error through the runtime's recordError and returns false. Every
// check also returns false, recording nothing, on a context that holds an
// error (or is null), so an entry whose first step is a check is a no-op
// there. The two hooks below are defined by each runtime (HostRuntime.cpp,
// Context.cu); a program links exactly one runtime.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_VALIDATE_H
#define MEMOPT_RUNTIME_VALIDATE_H

#include "memopt/runtime.h"
#include "memopt/runtime/DTypeRules.h"

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#if defined(__GNUC__)
#define MEMOPT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define MEMOPT_PRINTF(fmt, args)
#endif

namespace memopt {
namespace runtime {

/// Records the first error: "<entry>: <vprintf-formatted message>" (the
/// CUDA runtime appends the module scope). Defined by each runtime.
void recordError(memopt_context *ctx, memopt_status status, const char *entry,
                 const char *format, va_list args);

/// True when `ctx` runs entries (it exists and holds no error); the CUDA
/// runtime then notes `entry`, to name it in asynchronous errors. Defined by
/// each runtime.
bool enterEntry(memopt_context *ctx, const char *entry);

/// recordError with printf-style arguments.
MEMOPT_PRINTF(4, 5)
inline void setError(memopt_context *ctx, memopt_status status,
                     const char *entry, const char *format, ...) {
  va_list args;
  va_start(args, format);
  recordError(ctx, status, entry, format, args);
  va_end(args);
}

/// Records MEMOPT_ERROR_INVALID_ARGUMENT and returns false.
MEMOPT_PRINTF(3, 4)
inline bool invalid(memopt_context *ctx, const char *entry, const char *format,
                    ...) {
  va_list args;
  va_start(args, format);
  recordError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, format, args);
  va_end(args);
  return false;
}

/// memopt_set_lr_scale's check: a finite factor >= 0.
inline bool checkLrScale(memopt_context *ctx, double scale) {
  if (scale >= 0.0 && scale <= std::numeric_limits<double>::max())
    return true;
  return invalid(ctx, "memopt_set_lr_scale",
                 "the learning-rate factor %g is not a finite number >= 0",
                 scale);
}

/// The text of a recorded error: "<entry>: <message>".
inline std::string formatError(const char *entry, const char *format,
                               va_list args) {
  char buffer[512];
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  return std::string(entry) + ": " + buffer;
}

//===----------------------------------------------------------------------===//
// Dtypes
//===----------------------------------------------------------------------===//

/// memopt_dtype_size: bytes of one element, 0 for an unknown dtype.
inline size_t dtypeSize(memopt_dtype dtype) {
  static const size_t sizes[] = {4, 2, 2, 4, 8, 1};
  return isKnownDType(dtype) ? sizes[dtype] : 0;
}

/// True for F32, F16 and BF16.
inline bool isFloatType(memopt_dtype dtype) {
  return inDTypeSet(kFloatDTypes, dtype);
}

//===----------------------------------------------------------------------===//
// Basic checks
//===----------------------------------------------------------------------===//

/// Checks `entry`'s dtype arguments, in its argument order, against its row
/// of the dtype table (DTypeRules.h), which the compiler's verifiers read
/// too: every dtype decision of the runtimes is made here.
inline bool checkDTypes(memopt_context *ctx, const char *entry,
                        std::initializer_list<memopt_dtype> dtypes) {
  if (!enterEntry(ctx, entry))
    return false;
  const DTypeRule *rule = findDTypeRule(entry);
  if (!rule || rule->numSlots != static_cast<int>(dtypes.size()))
    return invalid(ctx, entry, "no dtype rule with %d dtype arguments",
                   static_cast<int>(dtypes.size()));
  return acceptsDTypes(*rule, dtypes.begin()) ||
         invalid(ctx, entry, "%s",
                 describeDTypeRejection(*rule, dtypes.begin()).c_str());
}

/// The element size of `dtype` after checking it against `entry`'s row (an
/// entry that moves elements of any dtype), or 0 after a failed check.
inline size_t checkElementSize(memopt_context *ctx, const char *entry,
                               memopt_dtype dtype) {
  return checkDTypes(ctx, entry, {dtype}) ? dtypeSize(dtype) : 0;
}

/// Checks that every extent is >= 0.
inline bool checkExtents(memopt_context *ctx, const char *entry,
                         std::initializer_list<int64_t> extents) {
  if (!enterEntry(ctx, entry))
    return false;
  for (int64_t extent : extents) {
    if (extent < 0)
      return invalid(ctx, entry, "negative extent %lld",
                     static_cast<long long>(extent));
  }
  return true;
}

/// Checks that no pointer is null, unless the tensors have `n` <= 0
/// elements.
inline bool checkPointers(memopt_context *ctx, const char *entry, int64_t n,
                          std::initializer_list<const void *> pointers) {
  if (!enterEntry(ctx, entry))
    return false;
  for (const void *pointer : pointers) {
    if (!pointer && n > 0)
      return invalid(ctx, entry, "null buffer");
  }
  return true;
}

/// Checks that 0 <= op <= last.
inline bool checkOp(memopt_context *ctx, const char *entry, int op, int last) {
  return enterEntry(ctx, entry) &&
         ((op >= 0 && op <= last) || invalid(ctx, entry, "unknown op %d", op));
}

/// True when an entry whose arguments passed their checks has nothing to
/// compute: one of `extents` is 0. Both runtimes then return at once,
/// before reading any scalar the arguments point to (a step count, a loss
/// scale), so an empty tensor is a no-op on the host and on the GPU alike.
inline bool isEmpty(std::initializer_list<int64_t> extents) {
  for (int64_t extent : extents)
    if (extent == 0)
      return true;
  return false;
}

/// Tensors of one dtype argument (any its row accepts) and `extents`
/// elements (their product) at `pointers`: the checks of every elementwise
/// entry.
inline bool checkFloatTensors(memopt_context *ctx, const char *entry,
                              memopt_dtype dtype,
                              std::initializer_list<int64_t> extents,
                              std::initializer_list<const void *> pointers) {
  if (!checkDTypes(ctx, entry, {dtype}) || !checkExtents(ctx, entry, extents))
    return false;
  int64_t n = 1;
  for (int64_t extent : extents)
    n *= extent;
  return checkPointers(ctx, entry, n, pointers);
}

/// The checks of an elementwise entry with op `op` in [0, last].
inline bool checkElementwise(memopt_context *ctx, const char *entry, int op,
                             int last, memopt_dtype dtype, int64_t n,
                             std::initializer_list<const void *> pointers) {
  return checkFloatTensors(ctx, entry, dtype, {n}, pointers) &&
         checkOp(ctx, entry, op, last);
}

//===----------------------------------------------------------------------===//
// Entry families
//===----------------------------------------------------------------------===//

/// memopt_dropout's probability.
inline bool checkProbability(memopt_context *ctx, const char *entry, double p) {
  return enterEntry(ctx, entry) &&
         ((p >= 0.0 && p <= 1.0) ||
          invalid(ctx, entry, "probability %g outside [0, 1]", p));
}

/// memopt_dropout's mask group: positive and dividing the element count.
inline bool checkGroup(memopt_context *ctx, const char *entry, int64_t n,
                       int64_t group) {
  return enterEntry(ctx, entry) &&
         ((group > 0 && n % group == 0) ||
          invalid(ctx, entry,
                  "a mask group of %lld that does not divide %lld elements",
                  static_cast<long long>(group), static_cast<long long>(n)));
}

/// The bounds of memopt_clamp and memopt_clamp_grad: numbers (infinite for
/// a missing one), lo <= hi.
inline bool checkClampBounds(memopt_context *ctx, const char *entry, double lo,
                             double hi) {
  // False for a NaN bound too.
  return enterEntry(ctx, entry) &&
         (lo <= hi ||
          invalid(ctx, entry, "bounds [%g, %g] are not lo <= hi", lo, hi));
}

/// memopt_reduce: everything but the data.
inline bool checkReduce(memopt_context *ctx, const char *entry,
                        memopt_reduce_op op, memopt_dtype inDtype,
                        const void *input, memopt_dtype outDtype, void *out,
                        int64_t outer, int64_t reduced, int64_t inner) {
  if (!checkDTypes(ctx, entry, {inDtype, outDtype}) ||
      !checkExtents(ctx, entry, {outer, reduced, inner}))
    return false;
  if (!checkOp(ctx, entry, op, MEMOPT_REDUCE_SUM_SQUARES))
    return false;
  if (op == MEMOPT_REDUCE_MAX && reduced == 0)
    return invalid(ctx, entry, "max over an empty extent");
  return checkPointers(ctx, entry, outer * inner, {input, out});
}

/// Layer and RMS norm and their gradients on [rows, cols]: `tensors` have
/// rows * cols elements, `stats` (mean, rstd) rows, `params` cols.
inline bool checkNorm(memopt_context *ctx, const char *entry,
                      memopt_dtype dtype, memopt_dtype wDtype, int64_t rows,
                      int64_t cols, std::initializer_list<const void *> tensors,
                      std::initializer_list<const void *> stats,
                      std::initializer_list<const void *> params) {
  if (!checkDTypes(ctx, entry, {dtype, wDtype}) ||
      !checkExtents(ctx, entry, {rows, cols}))
    return false;
  // A row of no values has no mean or scale.
  if (rows > 0 && cols == 0)
    return invalid(ctx, entry, "cannot normalise %lld empty rows",
                   static_cast<long long>(rows));
  return checkPointers(ctx, entry, rows * cols, tensors) &&
         checkPointers(ctx, entry, rows, stats) &&
         checkPointers(ctx, entry, cols, params);
}

/// Batch norm and its gradient on [batch, channels, spatial]; training
/// (the forward) needs more than one value per channel.
inline bool checkBatchNorm(memopt_context *ctx, const char *entry,
                           memopt_dtype dtype, int64_t batch, int64_t channels,
                           int64_t spatial, bool training,
                           std::initializer_list<const void *> tensors,
                           std::initializer_list<const void *> perChannel) {
  if (!checkDTypes(ctx, entry, {dtype}) ||
      !checkExtents(ctx, entry, {batch, channels, spatial}))
    return false;
  int64_t count = batch * spatial;
  if (training && channels > 0 && count < 2)
    return invalid(ctx, entry,
                   "training needs more than one value per channel, got %lld",
                   static_cast<long long>(count));
  return checkPointers(ctx, entry, batch * channels * spatial, tensors) &&
         checkPointers(ctx, entry, channels, perChannel);
}

/// memopt_matmul: dtypes, extents and batch sizes; `batch` receives the
/// number of products (the larger batch, 0 if either operand has none).
inline bool checkMatmul(memopt_context *ctx, const char *entry,
                        memopt_dtype dtype, memopt_dtype outDtype,
                        int64_t batchA, int64_t batchB, int64_t m, int64_t n,
                        int64_t k, int64_t &batch) {
  if (!checkDTypes(ctx, entry, {dtype, outDtype}) ||
      !checkExtents(ctx, entry, {batchA, batchB, m, n, k}))
    return false;
  if (batchA != batchB && batchA != 1 && batchB != 1)
    return invalid(
        ctx, entry, "batch sizes %lld and %lld differ and neither is 1",
        static_cast<long long>(batchA), static_cast<long long>(batchB));
  batch = batchA == 0 || batchB == 0 ? 0 : batchA > batchB ? batchA : batchB;
  return true;
}

/// memopt_nf4_matmul: the dtype, the extents, the buffers, and a scratch
/// that holds at least one column of op(w) in f32 (4 k bytes) when there is
/// a product to compute.
inline bool checkNf4Matmul(memopt_context *ctx, const char *entry,
                           memopt_dtype dtype, const void *a, const void *w,
                           const void *c, const void *scratch,
                           uint64_t scratchBytes, int64_t m, int64_t n,
                           int64_t k) {
  if (!checkDTypes(ctx, entry, {dtype}) ||
      !checkExtents(ctx, entry, {m, n, k}) ||
      !checkPointers(ctx, entry, m * n, {c}) ||
      !checkPointers(ctx, entry, m * n * k, {a, w}))
    return false;
  uint64_t column = 4 * static_cast<uint64_t>(k);
  if (m > 0 && n > 0 && k > 0 && (!scratch || scratchBytes < column))
    return invalid(ctx, entry,
                   "scratch of %llu bytes is smaller than one column of "
                   "op(w) (%llu bytes)",
                   static_cast<unsigned long long>(scratch ? scratchBytes : 0),
                   static_cast<unsigned long long>(column));
  return true;
}

/// memopt_embedding and its gradient: everything but the buffers. A
/// `paddingIdx` (the gradient's; negative: none) is a row of the table.
inline bool checkEmbedding(memopt_context *ctx, const char *entry,
                           memopt_dtype dtype, memopt_dtype indexDtype,
                           int64_t numIndices, int64_t numRows, int64_t dim,
                           int64_t paddingIdx = -1) {
  if (!checkDTypes(ctx, entry, {dtype, indexDtype}) ||
      !checkExtents(ctx, entry, {numIndices, numRows, dim}))
    return false;
  if (paddingIdx >= numRows)
    return invalid(ctx, entry, "padding_idx %lld outside [0, %lld)",
                   static_cast<long long>(paddingIdx),
                   static_cast<long long>(numRows));
  return true;
}

/// Checks that `reduction` is MEAN or SUM.
inline bool checkReduction(memopt_context *ctx, const char *entry,
                           memopt_loss_reduction reduction) {
  return enterEntry(ctx, entry) && (reduction == MEMOPT_REDUCTION_MEAN ||
                                    reduction == MEMOPT_REDUCTION_SUM ||
                                    invalid(ctx, entry, "unknown reduction %d",
                                            static_cast<int>(reduction)));
}

/// Cross-entropy and its gradient: `scalar` is the loss (or its incoming
/// gradient), `perRow` the buffers that are null only without rows; the
/// label smoothing lies in [0, 1).
inline bool checkCrossEntropy(memopt_context *ctx, const char *entry,
                              memopt_dtype dtype, memopt_dtype labelDtype,
                              memopt_loss_reduction reduction, int64_t rows,
                              int64_t classes, const void *scalar,
                              std::initializer_list<const void *> perRow,
                              double labelSmoothing = 0.0) {
  if (!checkDTypes(ctx, entry, {dtype, labelDtype}) ||
      !checkReduction(ctx, entry, reduction) ||
      !checkExtents(ctx, entry, {rows, classes}) ||
      !checkPointers(ctx, entry, 1, {scalar}) ||
      !checkPointers(ctx, entry, rows, perRow))
    return false;
  if (!(labelSmoothing >= 0.0 && labelSmoothing < 1.0))
    return invalid(ctx, entry, "label smoothing %g outside [0, 1)",
                   labelSmoothing);
  return true;
}

/// Fused attention and its gradient: everything but the buffers' contents.
/// `tensors` are the float buffers (q, k, v, out, ...), null only when empty.
inline bool checkAttention(memopt_context *ctx, const char *entry,
                           memopt_dtype dtype, const uint8_t *mask,
                           const int64_t *maskStrides, const float *lse,
                           int64_t batch, int64_t heads, int64_t sq,
                           int64_t sk, int64_t d, int64_t dv, double scale,
                           double dropoutP,
                           std::initializer_list<const void *> tensors) {
  if (!checkDTypes(ctx, entry, {dtype}) ||
      !checkExtents(ctx, entry, {batch, heads, sq, sk, d, dv}) ||
      !checkProbability(ctx, entry, dropoutP) ||
      !checkPointers(ctx, entry, batch * heads * sq * sk, tensors) ||
      !checkPointers(ctx, entry, batch * heads * sq, {lse}))
    return false;
  if (!(scale == scale) || scale == 1.0 / 0.0 || scale == -1.0 / 0.0)
    return invalid(ctx, entry, "scale %g is not finite", scale);
  if (mask && !maskStrides)
    return invalid(ctx, entry, "a mask without strides");
  if (mask)
    for (int i = 0; i < 4; ++i)
      if (maskStrides[i] < 0)
        return invalid(ctx, entry, "negative mask stride %lld",
                       static_cast<long long>(maskStrides[i]));
  return true;
}

/// The fused linear cross-entropy's checks: the dtypes, the reduction, the
/// extents, the buffers, the chunk and a scratch of `needed` bytes.
inline bool checkLinearLoss(memopt_context *ctx, const char *entry,
                            std::initializer_list<memopt_dtype> dtypes,
                            memopt_loss_reduction reduction, int64_t rows,
                            int64_t dim, int64_t classes, int64_t chunk,
                            const void *scratch, uint64_t scratchBytes,
                            uint64_t needed, const void *scalar,
                            std::initializer_list<const void *> tensors) {
  if (!checkDTypes(ctx, entry, dtypes) ||
      !checkReduction(ctx, entry, reduction) ||
      !checkExtents(ctx, entry, {rows, classes, dim}) ||
      !checkPointers(ctx, entry, 1, {scalar}) ||
      !checkPointers(ctx, entry, rows, tensors))
    return false;
  if (chunk < 1 || (classes > 0 && chunk > classes))
    return invalid(ctx, entry, "chunk %lld outside [1, %lld]",
                   static_cast<long long>(chunk),
                   static_cast<long long>(classes));
  if (scratchBytes < needed || (!scratch && needed > 0))
    return invalid(ctx, entry, "scratch of %llu bytes, %llu needed",
                   static_cast<unsigned long long>(scratch ? scratchBytes : 0),
                   static_cast<unsigned long long>(needed));
  return true;
}

/// The fused linear cross-entropy and its gradient. `scratch` must hold
/// memopt_linear_cross_entropy_scratch_bytes(dtype, wDtype, rows, dim, chunk,
/// grad).
inline bool checkLinearCrossEntropy(
    memopt_context *ctx, const char *entry, memopt_dtype dtype,
    memopt_dtype wDtype, memopt_dtype labelDtype,
    memopt_loss_reduction reduction, int64_t rows, int64_t dim,
    int64_t classes, int64_t chunk, const void *scratch,
    uint64_t scratchBytes, int grad, const void *scalar,
    std::initializer_list<const void *> tensors) {
  return checkLinearLoss(ctx, entry, {dtype, wDtype, labelDtype}, reduction,
                         rows, dim, classes, chunk, scratch, scratchBytes,
                         memopt_linear_cross_entropy_scratch_bytes(
                             dtype, wDtype, rows, dim, chunk, grad),
                         scalar, tensors);
}

/// The NF4 fused linear cross-entropy and its gradient: as above, with a
/// scratch of memopt_nf4_linear_cross_entropy_scratch_bytes(dtype, rows, dim,
/// chunk, grad).
inline bool checkNf4LinearCrossEntropy(
    memopt_context *ctx, const char *entry, memopt_dtype dtype,
    memopt_dtype labelDtype, memopt_loss_reduction reduction, int64_t rows,
    int64_t dim, int64_t classes, int64_t chunk, const void *scratch,
    uint64_t scratchBytes, int grad, const void *scalar,
    std::initializer_list<const void *> tensors) {
  return checkLinearLoss(ctx, entry, {dtype, labelDtype}, reduction, rows, dim,
                         classes, chunk, scratch, scratchBytes,
                         memopt_nf4_linear_cross_entropy_scratch_bytes(
                             dtype, rows, dim, chunk, grad),
                         scalar, tensors);
}

/// MSE and its gradient, likewise over `n` elements.
inline bool checkMseLoss(memopt_context *ctx, const char *entry,
                         memopt_dtype dtype, memopt_loss_reduction reduction,
                         int64_t n, const void *scalar,
                         std::initializer_list<const void *> tensors) {
  return checkDTypes(ctx, entry, {dtype}) &&
         checkReduction(ctx, entry, reduction) &&
         checkExtents(ctx, entry, {n}) &&
         checkPointers(ctx, entry, 1, {scalar}) &&
         checkPointers(ctx, entry, n, tensors);
}

/// memopt_label_count.
inline bool checkLabelCount(memopt_context *ctx, const char *entry,
                            memopt_dtype labelDtype, const void *labels,
                            const float *count, int64_t n) {
  return checkDTypes(ctx, entry, {labelDtype}) &&
         checkExtents(ctx, entry, {n}) &&
         checkPointers(ctx, entry, 1, {count}) &&
         checkPointers(ctx, entry, n, {labels});
}

/// memopt_unscale: every gradient's dtype passes the entry's rule.
inline bool checkUnscale(memopt_context *ctx, const char *entry,
                         const float *scale, int64_t numTensors,
                         const memopt_dtype *dtypes, const void *const *grads,
                         void *const *results, const int64_t *sizes,
                         const uint8_t *foundInf) {
  if (!checkExtents(ctx, entry, {numTensors}) ||
      !checkPointers(ctx, entry, 1, {scale, foundInf}) ||
      !checkPointers(ctx, entry, numTensors, {dtypes, grads, results, sizes}))
    return false;
  for (int64_t j = 0; j < numTensors; ++j) {
    if (!checkFloatTensors(ctx, entry, dtypes[j], {sizes[j]},
                           {grads[j], results[j]}))
      return false;
  }
  return true;
}

/// ZeRO's collectives (memopt_reduce_scatter_sum, memopt_all_gather,
/// memopt_all_slice) on slices of `shard` elements: whether the arguments
/// are valid and there is anything to move (an empty slice is a no-op).
inline bool checkShardEntry(memopt_context *ctx, const char *entry,
                            memopt_dtype dtype, const void *input, void *out,
                            int64_t shard) {
  return checkFloatTensors(ctx, entry, dtype, {shard}, {input, out}) &&
         shard > 0;
}

/// AdamW's step count where the entry reads it on the CPU (the host runtime,
/// the CUDA runtime's memopt_host_* entries): a 1-based update count.
inline bool checkUpdateCount(memopt_context *ctx, const char *entry,
                             int64_t step) {
  return step >= 1 ||
         invalid(ctx, entry, "step %lld is not a 1-based update count",
                 static_cast<long long>(step));
}

/// memopt_transfer: a known direction and, unless `bytes` is 0, both
/// buffers.
inline bool checkTransfer(memopt_context *ctx, const char *entry,
                          memopt_transfer_direction direction, const void *src,
                          const void *dst, uint64_t bytes) {
  if (!enterEntry(ctx, entry))
    return false;
  if (direction != MEMOPT_TO_HOST && direction != MEMOPT_TO_DEVICE)
    return invalid(ctx, entry, "unknown direction %d",
                   static_cast<int>(direction));
  return checkPointers(ctx, entry, bytes ? 1 : 0, {src, dst});
}

/// The slot of memopt_transfer_start / memopt_transfer_wait, and whether
/// it holds a copy as the entry expects (`inFlight`: the slots that do).
template <typename SlotSet>
inline bool checkTransferSlot(memopt_context *ctx, const char *entry,
                              int64_t slot, const SlotSet &inFlight,
                              bool expectInFlight) {
  if (slot < 0 || slot >= MEMOPT_MAX_TRANSFER_SLOTS)
    return invalid(ctx, entry, "slot %lld is outside [0, %d)",
                   static_cast<long long>(slot), MEMOPT_MAX_TRANSFER_SLOTS);
  if (inFlight.test(static_cast<size_t>(slot)) != expectInFlight)
    return invalid(ctx, entry,
                   expectInFlight
                       ? "slot %lld holds no copy (memopt_transfer_start)"
                       : "slot %lld still holds a copy not waited for",
                   static_cast<long long>(slot));
  return true;
}

/// memopt_update_scale.
inline bool checkUpdateScale(memopt_context *ctx, const char *entry,
                             std::initializer_list<const void *> scalars,
                             int64_t growthInterval) {
  return checkPointers(ctx, entry, 1, scalars) &&
         (growthInterval >= 1 ||
          invalid(ctx, entry, "growth interval %lld is not positive",
                  static_cast<long long>(growthInterval)));
}

//===----------------------------------------------------------------------===//
// Convolution and pooling geometry
//===----------------------------------------------------------------------===//

/// The geometry of memopt_conv2d and its gradients; checkConv fills oh, ow.
/// The output extent of a convolution along one axis, floor((in + 2 pad -
/// dil (k - 1) - 1) / stride) + 1, or -1 when the dilated window is larger
/// than the padded input (checkConv rejects those). stride, dil > 0.
constexpr int64_t convOutputExtent(int64_t in, int64_t k, int64_t stride,
                                   int64_t pad, int64_t dil) {
  int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? -1 : span / stride + 1;
}

struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int64_t oh, ow;
  /// Input and output channels per group.
  constexpr int64_t cg() const { return c / groups; }
  constexpr int64_t og() const { return o / groups; }
  /// The im2col matrix of one image and group: [cg * kh * kw, oh * ow].
  constexpr int64_t colRows() const { return cg() * kh * kw; }
  constexpr int64_t colCols() const { return oh * ow; }
  constexpr int64_t inputSize() const { return n * c * h * w; }
  constexpr int64_t filterSize() const { return o * colRows(); }
  constexpr int64_t outputSize() const { return n * o * oh * ow; }
};

/// Validates `s` and computes its output extents.
inline bool checkConv(memopt_context *ctx, const char *entry,
                      memopt_dtype dtype, ConvShape &s) {
  if (!checkDTypes(ctx, entry, {dtype}) ||
      !checkExtents(ctx, entry,
                    {s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.ph, s.pw}))
    return false;
  if (s.sh <= 0 || s.sw <= 0 || s.dh <= 0 || s.dw <= 0 || s.groups <= 0 ||
      s.c % s.groups != 0 || s.o % s.groups != 0)
    return invalid(
        ctx, entry,
        "invalid strides (%lld, %lld), dilations (%lld, %lld) or groups "
        "%lld for %lld input and %lld output channels",
        static_cast<long long>(s.sh), static_cast<long long>(s.sw),
        static_cast<long long>(s.dh), static_cast<long long>(s.dw),
        static_cast<long long>(s.groups), static_cast<long long>(s.c),
        static_cast<long long>(s.o));
  s.oh = convOutputExtent(s.h, s.kh, s.sh, s.ph, s.dh);
  s.ow = convOutputExtent(s.w, s.kw, s.sw, s.pw, s.dw);
  if (s.oh < 0 || s.ow < 0)
    return invalid(
        ctx, entry,
        "kernel %lldx%lld (dilated) exceeds the padded %lldx%lld input",
        static_cast<long long>(s.kh), static_cast<long long>(s.kw),
        static_cast<long long>(s.h), static_cast<long long>(s.w));
  return true;
}

/// The geometry of the pooling entries; checkPool fills oh, ow.
struct PoolShape {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
  int64_t oh, ow;
  constexpr int64_t inputSize() const { return n * c * h * w; }
  constexpr int64_t outputSize() const { return n * c * oh * ow; }
};

/// Validates `s` (floor mode, padding at most half the window, so every
/// window holds an input element) and computes its output extents.
inline bool checkPool(memopt_context *ctx, const char *entry,
                      memopt_dtype dtype, PoolShape &s) {
  if (!checkDTypes(ctx, entry, {dtype}) ||
      !checkExtents(ctx, entry, {s.n, s.c, s.h, s.w, s.ph, s.pw}))
    return false;
  if (s.kh <= 0 || s.kw <= 0 || s.sh <= 0 || s.sw <= 0 || 2 * s.ph > s.kh ||
      2 * s.pw > s.kw || s.h + 2 * s.ph < s.kh || s.w + 2 * s.pw < s.kw)
    return invalid(ctx, entry,
                   "invalid window %lldx%lld, strides (%lld, %lld) or padding "
                   "(%lld, %lld) for a %lldx%lld input",
                   static_cast<long long>(s.kh), static_cast<long long>(s.kw),
                   static_cast<long long>(s.sh), static_cast<long long>(s.sw),
                   static_cast<long long>(s.ph), static_cast<long long>(s.pw),
                   static_cast<long long>(s.h), static_cast<long long>(s.w));
  s.oh = (s.h + 2 * s.ph - s.kh) / s.sh + 1;
  s.ow = (s.w + 2 * s.pw - s.kw) / s.sw + 1;
  return true;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// The number of elements of `shape`.
inline int64_t numElements(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/// Row-major element strides of `shape`.
inline std::vector<int64_t> rowMajorStrides(int64_t rank,
                                            const int64_t *shape) {
  std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Checks that `shape` is a shape of `rank` dimensions.
inline bool checkShape(memopt_context *ctx, const char *entry, int64_t rank,
                       const int64_t *shape) {
  if (!enterEntry(ctx, entry))
    return false;
  if (rank < 0 || (rank > 0 && !shape))
    return invalid(ctx, entry, "invalid rank %lld",
                   static_cast<long long>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] < 0)
      return invalid(ctx, entry, "negative size %lld in dimension %lld",
                     static_cast<long long>(shape[d]),
                     static_cast<long long>(d));
  }
  return true;
}

/// memopt_broadcast's shapes and dimension map.
inline bool checkBroadcast(memopt_context *ctx, const char *entry,
                           int64_t inRank, const int64_t *inShape,
                           const int64_t *dims, int64_t outRank,
                           const int64_t *outShape) {
  if (!checkShape(ctx, entry, inRank, inShape) ||
      !checkShape(ctx, entry, outRank, outShape))
    return false;
  for (int64_t i = 0; i < inRank; ++i) {
    int64_t d = dims[i];
    if (d < 0 || d >= outRank || (i > 0 && d <= dims[i - 1]) ||
        (inShape[i] != outShape[d] && inShape[i] != 1))
      return invalid(ctx, entry,
                     "input dimension %lld (size %lld) cannot map to result "
                     "dimension %lld",
                     static_cast<long long>(i),
                     static_cast<long long>(inShape[i]),
                     static_cast<long long>(d));
  }
  return true;
}

/// memopt_transpose's shape and permutation.
inline bool checkTranspose(memopt_context *ctx, const char *entry, int64_t rank,
                           const int64_t *inShape, const int64_t *perm) {
  if (!checkShape(ctx, entry, rank, inShape))
    return false;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
      return invalid(ctx, entry, "invalid permutation entry %lld at %lld",
                     static_cast<long long>(perm[i]),
                     static_cast<long long>(i));
    seen[perm[i]] = true;
  }
  return true;
}

/// The shape and attributes of memopt_slice and memopt_slice_grad.
inline bool checkSlice(memopt_context *ctx, const char *entry, int64_t rank,
                       const int64_t *inShape, const int64_t *starts,
                       const int64_t *limits, const int64_t *strides) {
  if (!checkShape(ctx, entry, rank, inShape))
    return false;
  for (int64_t d = 0; d < rank; ++d) {
    if (strides[d] <= 0 || starts[d] < 0 || limits[d] > inShape[d] ||
        starts[d] > limits[d])
      return invalid(
          ctx, entry,
          "invalid slice [%lld:%lld:%lld] of dimension %lld (size %lld)",
          static_cast<long long>(starts[d]), static_cast<long long>(limits[d]),
          static_cast<long long>(strides[d]), static_cast<long long>(d),
          static_cast<long long>(inShape[d]));
  }
  return true;
}

/// The strided gather of broadcast, transpose and slice: element i of the
/// row-major result over `shape` is the input element at base + sum(index[d]
/// * step[d]) (a slice gradient scatters through the same view).
struct StridedView {
  std::vector<int64_t> shape, step;
  int64_t base = 0;
  int64_t size() const {
    return numElements(static_cast<int64_t>(shape.size()), shape.data());
  }
};

/// The view of a checked broadcast: size-1 input dimensions repeat.
inline StridedView broadcastView(int64_t inRank, const int64_t *inShape,
                                 const int64_t *dims, int64_t outRank,
                                 const int64_t *outShape) {
  StridedView view{std::vector<int64_t>(outShape, outShape + outRank),
                   std::vector<int64_t>(static_cast<size_t>(outRank), 0)};
  std::vector<int64_t> inStrides = rowMajorStrides(inRank, inShape);
  for (int64_t i = 0; i < inRank; ++i)
    view.step[dims[i]] = inShape[i] == 1 ? 0 : inStrides[i];
  return view;
}

/// The view of a checked transpose.
inline StridedView transposeView(int64_t rank, const int64_t *inShape,
                                 const int64_t *perm) {
  StridedView view;
  std::vector<int64_t> inStrides = rowMajorStrides(rank, inShape);
  for (int64_t i = 0; i < rank; ++i) {
    view.shape.push_back(inShape[perm[i]]);
    view.step.push_back(inStrides[perm[i]]);
  }
  return view;
}

/// The view of a checked slice.
inline StridedView sliceView(int64_t rank, const int64_t *inShape,
                             const int64_t *starts, const int64_t *limits,
                             const int64_t *strides) {
  StridedView view;
  std::vector<int64_t> inStrides = rowMajorStrides(rank, inShape);
  for (int64_t d = 0; d < rank; ++d) {
    view.shape.push_back((limits[d] - starts[d] + strides[d] - 1) / strides[d]);
    view.step.push_back(inStrides[d] * strides[d]);
    view.base += starts[d] * inStrides[d];
  }
  return view;
}

/// memopt_concat's extents and buffers; `total` receives sum(sizes).
inline bool checkConcat(memopt_context *ctx, const char *entry,
                        int64_t numInputs, const void *const *inputs,
                        const int64_t *sizes, const void *out, int64_t outer,
                        int64_t inner, int64_t &total) {
  if (!checkExtents(ctx, entry, {numInputs, outer, inner}) ||
      !checkPointers(ctx, entry, numInputs, {inputs, sizes}))
    return false;
  total = 0;
  for (int64_t j = 0; j < numInputs; ++j) {
    if (!checkExtents(ctx, entry, {sizes[j]}) ||
        !checkPointers(ctx, entry, outer * sizes[j] * inner, {inputs[j]}))
      return false;
    total += sizes[j];
  }
  return checkPointers(ctx, entry, outer * total * inner, {out});
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_VALIDATE_H
