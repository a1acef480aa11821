//===- Loss.cu - losses and the label count -------------------------------===//
//
// A cross-entropy row is a block per row that subtracts the row maximum
// first; scalar losses reduce per-row (or per-block) partials in the
// workspace with one block, in a fixed order, so results are identical run
// to run.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace memopt::cuda;

namespace {

/// Blocks of the first pass of a scalar loss (fixed for determinism).
constexpr int kLossBlocks = 256;

/// loss[r] = logsumexp(row) - (1 - eps) row[label] - eps mean(row) (0 for
/// ignored rows), a block per row; labels out of range are reported and
/// count as ignored.
template <typename T>
__global__ void
crossEntropyRowsKernel(const T *logits, bool is64, const void *labels,
                       float *rowLoss, int64_t rows, int64_t classes,
                       int64_t ignore, float eps, memopt_device_error *error) {
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
    float2 ms = rowMaxExpSum(row, classes, shared);
    float m = ms.x, s = ms.y;
    // The smoothing term's sum of logits; eps is the same for the block.
    float total = 0.0f;
    if (eps != 0.0f) {
      for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
        total += toF32(row[j]);
      total = blockSum(total, shared);
    }
    if (threadIdx.x == 0)
      rowLoss[r] = m + logf(s) - (1.0f - eps) * toF32(row[label]) -
                   (eps != 0.0f ? eps * (total / classes) : 0.0f);
  }
}

/// Number of rows whose label is not `ignore`, one block.
__device__ float countLabels(bool is64, const void *labels, int64_t rows,
                             int64_t ignore, float *shared) {
  float count = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    count += loadIndex(is64, labels, r) != ignore ? 1.0f : 0.0f;
  return blockSum(count, shared);
}

__global__ void crossEntropyTotalKernel(const float *rowLoss, bool is64,
                                        const void *labels, int64_t rows,
                                        int64_t ignore, bool mean,
                                        float *loss) {
  __shared__ float shared[32];
  float s = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    s += rowLoss[r];
  s = blockSum(s, shared);
  float count = countLabels(is64, labels, rows, ignore, shared);
  if (threadIdx.x == 0)
    *loss = mean ? (count > 0.0f ? s / count : NAN) : s;
}

__global__ void countLabelsKernel(bool is64, const void *labels, int64_t rows,
                                  int64_t ignore, float *count) {
  __shared__ float shared[32];
  float c = countLabels(is64, labels, rows, ignore, shared);
  if (threadIdx.x == 0)
    *count = c;
}

template <typename T>
__global__ void
crossEntropyGradKernel(const T *logits, bool is64, const void *labels,
                       const float *gradLoss, const float *count, T *dx,
                       int64_t rows, int64_t classes, int64_t ignore, bool mean,
                       float on, float off, memopt_device_error *error) {
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
      for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
        drow[j] = fromF32<T>(0.0f);
      continue;
    }
    const T *row = logits + r * classes;
    float2 ms = rowMaxExpSum(row, classes, shared);
    float m = ms.x, s = ms.y;
    float lse = m + logf(s);
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
      float p = expf(toF32(row[j]) - lse);
      drow[j] = fromF32<T>(sc * (p - (j == label ? on : off)));
    }
  }
}

template <typename T>
__global__ void msePartialKernel(const T *x, const T *t, int64_t n,
                                 float *partial) {
  __shared__ float shared[32];
  float s = 0.0f;
  GRID_STRIDE(i, n) {
    float d = toF32(x[i]) - toF32(t[i]);
    s += d * d;
  }
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

__global__ void mseTotalKernel(const float *partial, int blocks, int64_t n,
                               bool mean, float *loss) {
  __shared__ float shared[32];
  float s = threadIdx.x < blocks ? partial[threadIdx.x] : 0.0f;
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    *loss = mean ? (n ? s / static_cast<float>(n) : NAN) : s;
}

template <typename T>
__global__ void mseGradKernel(const T *x, const T *t, const float *gradLoss,
                              T *dx, int64_t n, bool mean) {
  double scale = 2.0 * *gradLoss;
  if (mean && n)
    scale /= static_cast<double>(n);
  float s = static_cast<float>(scale);
  GRID_STRIDE(i, n) dx[i] = fromF32<T>(s * (toF32(x[i]) - toF32(t[i])));
}

} // namespace

void memopt_label_count(memopt_context *ctx, memopt_dtype label_dtype,
                        const void *labels, float *count, int64_t n,
                        int64_t ignore_index) {
  const char *entry = "memopt_label_count";
  if (!checkLabelCount(ctx, entry, label_dtype, labels, count, n))
    return;
  countLabelsKernel<<<1, 1024, 0, ctx->stream>>>(
      label_dtype == MEMOPT_I64, labels, n, ignore_index, count);
  checkLaunch(ctx, entry, "countLabelsKernel");
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
  float *rowLoss = scratchFloats(ctx, entry, rows > 0 ? rows : 1);
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
  crossEntropyTotalKernel<<<1, 1024, 0, ctx->stream>>>(
      rowLoss, is64, labels, rows, ignore_index,
      reduction == MEMOPT_REDUCTION_MEAN, loss);
  checkLaunch(ctx, entry, "crossEntropyTotalKernel");
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
  float *count = scratchFloats(ctx, entry, 1);
  if (!count)
    return;
  bool is64 = label_dtype == MEMOPT_I64;
  countLabelsKernel<<<1, 1024, 0, ctx->stream>>>(is64, labels, rows,
                                                 ignore_index, count);
  if (!checkLaunch(ctx, entry, "countLabelsKernel"))
    return;
  // The smoothed target at the label and elsewhere, as runtime/host.
  double off = classes ? label_smoothing / classes : 0.0;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    crossEntropyGradKernel<T><<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
        static_cast<const T *>(logits), is64, labels, grad_loss, count,
        static_cast<T *>(out), rows, classes, ignore_index,
        reduction == MEMOPT_REDUCTION_MEAN,
        static_cast<float>(1.0 - label_smoothing + off),
        static_cast<float>(off), ctx->deviceError);
  });
  checkLaunch(ctx, entry, "crossEntropyGradKernel");
}

void memopt_mse_loss(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     const void *target, float *loss, int64_t n,
                     memopt_loss_reduction reduction) {
  const char *entry = "memopt_mse_loss";
  if (!checkMseLoss(ctx, entry, dtype, reduction, n, loss, {input, target}))
    return;
  float *partial = scratchFloats(ctx, entry, kLossBlocks);
  if (!partial)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    msePartialKernel<T><<<kLossBlocks, kRowBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<const T *>(target), n,
        partial);
  });
  if (!checkLaunch(ctx, entry, "msePartialKernel"))
    return;
  mseTotalKernel<<<1, kLossBlocks, 0, ctx->stream>>>(
      partial, kLossBlocks, n, reduction == MEMOPT_REDUCTION_MEAN, loss);
  checkLaunch(ctx, entry, "mseTotalKernel");
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
