//===- Loss.cu - losses and the label count -------------------------------===//
//
// A cross-entropy row is a block per row that subtracts the row maximum
// first. Every scalar (a loss's total, the count of kept labels) is a sum
// over many blocks in two passes: each of up to kPartialBlocks blocks adds
// its grid-stride share into an f32 partial in the workspace's scratch
// slice, then one block adds the partials in block order. The number of
// blocks comes from the problem's size alone, so each sum has one order run
// to run and no atomics are used. The formulas are LossMath.h's, shared with
// the host runtime.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include "memopt/runtime/LossMath.h"

using namespace memopt::cuda;

namespace {

/// loss[r] = logsumexp(row) - (1 - eps) row[label] - eps mean(row) (0 for
/// ignored rows), a block per row; labels out of range are reported and
/// count as ignored.
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    crossEntropyRowsKernel(const T *logits, bool is64, const void *labels,
                           float *rowLoss, int64_t rows, int64_t classes,
                           int64_t ignore, float eps,
                           memopt_device_error *error) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = loadIndex(is64, labels, r);
    bool ignored = label == ignore;
    if (!ignored && (label < 0 || label >= classes)) {
      if (threadIdx.x == 0)
        raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE,
                         SiteCrossEntropy, label, r, classes);
      ignored = true;
    }
    if (ignored) {
      if (threadIdx.x == 0)
        rowLoss[r] = 0.0f;
      continue;
    }
    const T *row = logits + r * classes;
    float2 ms = rowMaxExpSum<kRowBlock>(row, classes, shared);
    float lse = logSumExpValue<float>(ms.x, ms.y);
    // The smoothing term's sum of logits; eps is the same for the block.
    float total = 0.0f;
    if (eps != 0.0f) {
      for (int64_t j = threadIdx.x; j < classes; j += kRowBlock)
        total += toF32(row[j]);
      total = blockSum<kRowBlock>(total, shared);
    }
    if (threadIdx.x == 0)
      rowLoss[r] = crossEntropyRowLoss<float>(lse, toF32(row[label]), total,
                                              eps, classes);
  }
}

/// The first pass of a label count or a cross-entropy's total: block b
/// writes the sum of `rowLoss` (when given) over its grid-stride rows to
/// partialLoss[b], and the number of those rows whose label is not `ignore`
/// to partialCount[b].
__global__ void __launch_bounds__(kRowBlock)
    labelPartialKernel(const float *rowLoss, bool is64, const void *labels,
                       int64_t rows, int64_t ignore, float *partialLoss,
                       float *partialCount) {
  __shared__ float shared[32];
  float loss = 0.0f, count = 0.0f;
  GRID_STRIDE(r, rows) {
    if (rowLoss)
      loss += rowLoss[r];
    count += loadIndex(is64, labels, r) != ignore ? 1.0f : 0.0f;
  }
  count = blockSum<kRowBlock>(count, shared);
  if (rowLoss)
    loss = blockSum<kRowBlock>(loss, shared);
  if (threadIdx.x == 0) {
    partialCount[blockIdx.x] = count;
    if (rowLoss)
      partialLoss[blockIdx.x] = loss;
  }
}

/// The final pass, one block of kPartialBlocks threads: the sum of the
/// `blocks` partials in block order, reduced by LossMath.h's reducedLoss
/// with the count the sum of `partialCount` (when given) or `n`.
__global__ void __launch_bounds__(kPartialBlocks)
    sumPartialsKernel(const float *partial, const float *partialCount,
                      int blocks, float n, bool mean, float *out) {
  __shared__ float shared[32];
  int t = threadIdx.x;
  float total =
      blockSum<kPartialBlocks>(t < blocks ? partial[t] : 0.0f, shared);
  float count = n;
  if (partialCount)
    count =
        blockSum<kPartialBlocks>(t < blocks ? partialCount[t] : 0.0f, shared);
  if (t == 0)
    *out = reducedLoss<float>(total, count, mean);
}

template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    crossEntropyGradKernel(const T *logits, bool is64, const void *labels,
                           const float *gradLoss, const float *count, T *dx,
                           int64_t rows, int64_t classes, int64_t ignore,
                           bool mean, SmoothedTarget target,
                           memopt_device_error *error) {
  __shared__ float shared[32];
  float sc = lossGradScale(gradLoss, count, mean);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = loadIndex(is64, labels, r);
    T *drow = dx + r * classes;
    bool ignored = label == ignore;
    if (!ignored && (label < 0 || label >= classes)) {
      if (threadIdx.x == 0)
        raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE,
                         SiteCrossEntropyGrad, label, r, classes);
      ignored = true;
    }
    if (ignored) {
      for (int64_t j = threadIdx.x; j < classes; j += kRowBlock)
        drow[j] = fromF32<T>(0.0f);
      continue;
    }
    const T *row = logits + r * classes;
    float2 ms = rowMaxExpSum<kRowBlock>(row, classes, shared);
    float lse = logSumExpValue<float>(ms.x, ms.y);
    for (int64_t j = threadIdx.x; j < classes; j += kRowBlock)
      drow[j] = fromF32<T>(crossEntropyGradValue<float>(
          toF32(row[j]), lse, j == label, sc, target));
  }
}

/// The first pass of the squared error: block b's grid-stride share of the
/// sum into partial[b].
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    msePartialKernel(const T *x, const T *t, int64_t n, float *partial) {
  __shared__ float shared[32];
  float s = 0.0f;
  GRID_STRIDE(i, n) { s += squaredErrorTerm<float>(toF32(x[i]), toF32(t[i])); }
  s = blockSum<kRowBlock>(s, shared);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

template <typename T>
__global__ void mseGradKernel(const T *x, const T *t, const float *gradLoss,
                              T *dx, int64_t n, bool mean) {
  float s = mseGradScale(*gradLoss, mean, n);
  GRID_STRIDE(i, n) {
    dx[i] = fromF32<T>(mseGradValue(s, toF32(x[i]), toF32(t[i])));
  }
}

} // namespace

bool memopt::cuda::launchLabelCount(memopt_context *ctx, const char *entry,
                                    bool is64, const void *labels, int64_t rows,
                                    int64_t ignore, float *partial,
                                    float *count) {
  int blocks = partialBlocks(rows, kRowBlock);
  labelPartialKernel<<<blocks, kRowBlock, 0, ctx->stream>>>(
      nullptr, is64, labels, rows, ignore, nullptr, partial);
  if (!checkLaunch(ctx, entry, "labelPartialKernel"))
    return false;
  sumPartialsKernel<<<1, kPartialBlocks, 0, ctx->stream>>>(
      partial, nullptr, blocks, 0.0f, false, count);
  return checkLaunch(ctx, entry, "sumPartialsKernel");
}

bool memopt::cuda::launchLossTotal(memopt_context *ctx, const char *entry,
                                   const float *rowLoss, bool is64,
                                   const void *labels, int64_t rows,
                                   int64_t ignore, bool mean, float *partial,
                                   float *loss) {
  int blocks = partialBlocks(rows, kRowBlock);
  float *partialLoss = partial, *partialCount = partial + blocks;
  labelPartialKernel<<<blocks, kRowBlock, 0, ctx->stream>>>(
      rowLoss, is64, labels, rows, ignore, partialLoss, partialCount);
  if (!checkLaunch(ctx, entry, "labelPartialKernel"))
    return false;
  sumPartialsKernel<<<1, kPartialBlocks, 0, ctx->stream>>>(
      partialLoss, partialCount, blocks, 0.0f, mean, loss);
  return checkLaunch(ctx, entry, "sumPartialsKernel");
}

void memopt_label_count(memopt_context *ctx, memopt_dtype label_dtype,
                        const void *labels, float *count, int64_t n,
                        int64_t ignore_index) {
  const char *entry = "memopt_label_count";
  if (!checkLabelCount(ctx, entry, label_dtype, labels, count, n))
    return;
  float *partial = scratchFloats(ctx, entry, partialBlocks(n, kRowBlock));
  if (partial)
    launchLabelCount(ctx, entry, label_dtype == MEMOPT_I64, labels, n,
                     ignore_index, partial, count);
}

void memopt_cross_entropy(memopt_context *ctx, memopt_dtype dtype,
                          const void *logits, memopt_dtype label_dtype,
                          const void *labels, float *loss, int64_t rows,
                          int64_t classes, int64_t ignore_index,
                          memopt_loss_reduction reduction,
                          double label_smoothing) {
  const char *entry = "memopt_cross_entropy";
  if (!checkCrossEntropy(ctx, entry, dtype, label_dtype, reduction, rows,
                         classes, loss, {logits, labels}, label_smoothing))
    return;
  // Scratch: the rows' losses, then the blocks' partial losses and counts.
  int blocks = partialBlocks(rows, kRowBlock);
  float *rowLoss = scratchFloats(ctx, entry, rows + 2 * int64_t(blocks));
  if (!rowLoss)
    return;
  bool is64 = label_dtype == MEMOPT_I64;
  if (rows > 0) {
    dispatchFloat(dtype, [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      crossEntropyRowsKernel<T><<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
          static_cast<const T *>(logits), is64, labels, rowLoss, rows, classes,
          ignore_index, static_cast<float>(label_smoothing), ctx->deviceError);
    });
    if (!checkLaunch(ctx, entry, "crossEntropyRowsKernel"))
      return;
  }
  launchLossTotal(ctx, entry, rowLoss, is64, labels, rows, ignore_index,
                  reduction == MEMOPT_REDUCTION_MEAN, rowLoss + rows, loss);
}

void memopt_cross_entropy_grad(memopt_context *ctx, memopt_dtype dtype,
                               const void *logits, memopt_dtype label_dtype,
                               const void *labels, const float *grad_loss,
                               void *out, int64_t rows, int64_t classes,
                               int64_t ignore_index,
                               memopt_loss_reduction reduction,
                               double label_smoothing) {
  const char *entry = "memopt_cross_entropy_grad";
  if (!checkCrossEntropy(ctx, entry, dtype, label_dtype, reduction, rows,
                         classes, grad_loss, {logits, labels, out},
                         label_smoothing) ||
      isEmpty({rows}))
    return;
  // Scratch: the count, then the label count's partials.
  float *count = scratchFloats(ctx, entry, 1 + partialBlocks(rows, kRowBlock));
  if (!count)
    return;
  bool is64 = label_dtype == MEMOPT_I64;
  if (!launchLabelCount(ctx, entry, is64, labels, rows, ignore_index, count + 1,
                        count))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    crossEntropyGradKernel<T><<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
        static_cast<const T *>(logits), is64, labels, grad_loss, count,
        static_cast<T *>(out), rows, classes, ignore_index,
        reduction == MEMOPT_REDUCTION_MEAN,
        smoothedTarget(label_smoothing, classes), ctx->deviceError);
  });
  checkLaunch(ctx, entry, "crossEntropyGradKernel");
}

void memopt_mse_loss(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     const void *target, float *loss, int64_t n,
                     memopt_loss_reduction reduction) {
  const char *entry = "memopt_mse_loss";
  if (!checkMseLoss(ctx, entry, dtype, reduction, n, loss, {input, target}))
    return;
  int blocks = partialBlocks(n, kRowBlock);
  float *partial = scratchFloats(ctx, entry, blocks);
  if (!partial)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    msePartialKernel<T><<<blocks, kRowBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<const T *>(target), n,
        partial);
  });
  if (!checkLaunch(ctx, entry, "msePartialKernel"))
    return;
  sumPartialsKernel<<<1, kPartialBlocks, 0, ctx->stream>>>(
      partial, nullptr, blocks, static_cast<float>(n),
      reduction == MEMOPT_REDUCTION_MEAN, loss);
  checkLaunch(ctx, entry, "sumPartialsKernel");
}

void memopt_mse_loss_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const void *target,
                          const float *grad_loss, void *out, int64_t n,
                          memopt_loss_reduction reduction) {
  const char *entry = "memopt_mse_loss_grad";
  if (!checkMseLoss(ctx, entry, dtype, reduction, n, grad_loss,
                    {input, target, out}) ||
      isEmpty({n}))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    mseGradKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<const T *>(target),
        grad_loss, static_cast<T *>(out), n,
        reduction == MEMOPT_REDUCTION_MEAN);
  });
  checkLaunch(ctx, entry, "mseGradKernel");
}
