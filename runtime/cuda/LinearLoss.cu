//===- LinearLoss.cu - fused linear cross-entropy -------------------------===//
//
// memopt_linear_cross_entropy and its gradient without the [rows, classes]
// logits (Liger-Kernel's fused linear cross-entropy; torchtune's chunked
// output loss): `chunk` classes at a time, a cuBLASLt GEMM writes the chunk's
// f32 logits x w_c^T into the caller's scratch and kernels consume them.
//
//  - forward: a block per row folds the chunk (plus bias) into the row's
//    log-sum-exp, kept in `lse` itself (lse = logaddexp(lse, chunk's lse),
//    each chunk's own lse taken after subtracting its maximum), and keeps
//    the label's logit when the label falls in the chunk. The rows' losses
//    lse - label logit are then summed in two passes (Loss.cu's
//    launchLossTotal: per-block partials, then one block in block order).
//  - gradient: per chunk the logits are recomputed; dlogits = g * (exp(logit
//    - lse) - onehot) / count in f32, in place, and for a 16-bit dtype
//    rounded into the scratch's second part, the GEMMs' operand (the f32
//    copy then holds the rounded values too, so that all three gradients
//    read the same dlogits, as runtime/host does). grad_w's rows of the
//    chunk = dlogits^T x (one GEMM, written once), grad_bias's = the column
//    sums of dlogits (32 columns x 16 row-threads a block, fixed order), and
//    grad_x += dlogits w_c (a beta = 1 GEMM into grad_x itself for f32, into
//    the scratch's f32 accumulator otherwise, rounded once at the end).
//
// memopt_nf4_linear_cross_entropy and its gradient read an NF4-packed w (a
// frozen LM head): each chunk's rows are dequantized into the scratch's
// weight chunk in dtype (Nf4.cuh), and w has no gradient.
//
// Per-row state that must survive the GEMMs (the label logits of the
// forward, the label count of the gradient) lives in the workspace's scratch
// slice; the GEMMs use its library slice (WorkspaceLayout.h).
// Everything is deterministic: cuBLASLt with a cached algorithm, and kernels
// whose sums have an order fixed by the launch shape. Labels out of range
// are reported as memopt_cross_entropy reports them and count as ignored.
//
//===----------------------------------------------------------------------===//

#include "Nf4.cuh"

#include <cmath>

using namespace memopt::cuda;

namespace {

/// Row-threads of the bias gradient's column sums (kColTile columns each).
constexpr int kBiasRows = 16;

uint64_t round256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

/// c[m, n] = op(a) op(b) (+ c when `accumulate`); an empty inner extent
/// gives zero.
void product(memopt_context *ctx, const char *entry, memopt_dtype dtype,
             memopt_dtype outDtype, const void *a, const void *b, void *c,
             int64_t m, int64_t n, int64_t k, bool transA, bool transB,
             bool accumulate) {
  if (!isLive(ctx) || m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      MEMOPT_CUDA_CHECK(ctx, entry,
                        cudaMemsetAsync(c, 0,
                                        m * n * memopt_dtype_size(outDtype),
                                        ctx->stream));
    return;
  }
  gemm(ctx, entry, dtype, outDtype, a, b, c, m, n, k, transA, transB,
       accumulate ? 1.0f : 0.0f);
}

template <typename T>
__device__ __forceinline__ float biasAt(const T *bias, int64_t c) {
  return bias ? toF32(bias[c]) : 0.0f;
}

/// log(exp(a) + exp(b)), NaN if either is.
__device__ __forceinline__ float logAddExp(float a, float b) {
  if (isnan(a) || isnan(b))
    return NAN;
  float hi = fmaxf(a, b), lo = fminf(a, b);
  if (lo == -INFINITY || hi == INFINITY)
    return hi;
  return hi + log1pf(expf(lo - hi));
}

/// Folds logits [rows, width] (classes c0 ...) into lse and keeps the
/// label's logit: a block per row.
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    chunkLseKernel(const float *logits, const T *bias, bool is64,
                   const void *labels, float *lse, float *labelLogit,
                   int64_t rows, int64_t width, int64_t c0, bool first) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *row = logits + r * width;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      m = fmaxf(m, row[j] + biasAt(bias, c0 + j));
    m = blockMax<kRowBlock>(m, shared);
    float sum = 0.0f;
    if (m != -INFINITY)
      for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
        sum += expf(row[j] + biasAt(bias, c0 + j) - m);
    sum = blockSum<kRowBlock>(sum, shared);
    if (threadIdx.x == 0) {
      float chunk = m + logf(sum);
      lse[r] = first ? chunk : logAddExp(lse[r], chunk);
      int64_t label = loadIndex(is64, labels, r);
      if (label >= c0 && label < c0 + width)
        labelLogit[r] = row[label - c0] + biasAt(bias, label);
    }
  }
}

__global__ void fillFloatsKernel(float *out, int64_t n, float value) {
  GRID_STRIDE(i, n) out[i] = value;
}

/// Turns the rows' label logits into their losses lse - label logit, in
/// place: 0 for an ignored row; as memopt_cross_entropy, a label out of
/// range is reported through the error record under `site` and contributes
/// nothing (the count still counts it).
__global__ void rowLossKernel(const float *lse, float *labelLogit, bool is64,
                              const void *labels, int64_t rows, int64_t classes,
                              int64_t ignore, int site,
                              memopt_device_error *error) {
  GRID_STRIDE(r, rows) {
    int64_t label = loadIndex(is64, labels, r);
    bool inRange = label >= 0 && label < classes;
    if (label != ignore && !inRange)
      raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, site, label, r,
                       classes);
    if (lse)
      labelLogit[r] =
          label != ignore && inRange ? lse[r] - labelLogit[r] : 0.0f;
  }
}

/// dlogits of a chunk, a block per row, in place over the f32 logits; with
/// `rounded`, rounded to T there and the f32 copy holds the rounded value.
template <typename T>
__global__ void chunkGradKernel(float *logits, T *rounded, const T *bias,
                                bool is64, const void *labels, const float *lse,
                                const float *gradLoss, const float *count,
                                int64_t rows, int64_t width, int64_t c0,
                                int64_t classes, int64_t ignore, bool mean) {
  float sc = lossGradScale(gradLoss, count, mean);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = loadIndex(is64, labels, r);
    bool ignored = label == ignore || label < 0 || label >= classes;
    float rowLse = lse[r];
    float *row = logits + r * width;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      float g = 0.0f;
      if (!ignored) {
        float p = expf(row[j] + biasAt(bias, c0 + j) - rowLse);
        g = sc * (p - (c0 + j == label ? 1.0f : 0.0f));
      }
      if (rounded) {
        T stored = fromF32<T>(g);
        rounded[r * width + j] = stored;
        g = toF32(stored);
      }
      row[j] = g;
    }
  }
}

/// out[j] = sum over rows of x[r, j], rounded once: 32 columns x kBiasRows
/// row-threads a block, fixed order.
template <typename T>
__global__ void columnSumKernel(const float *x, int64_t rows, int64_t width,
                                T *out) {
  __shared__ float partial[kBiasRows][kColTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t col = blockIdx.x * int64_t(kColTile) + tx;
  float acc = 0.0f;
  if (col < width)
    for (int64_t r = ty; r < rows; r += kBiasRows)
      acc += x[r * width + col];
  partial[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && col < width) {
    float total = partial[0][tx];
    for (int r = 1; r < kBiasRows; ++r)
      total += partial[r][tx];
    out[col] = fromF32<T>(total);
  }
}

template <typename T>
__global__ void roundKernel(const float *in, T *out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = fromF32<T>(in[i]);
}

/// The scratch's parts (runtime.h's memopt_linear_cross_entropy_scratch_bytes):
/// the f32 chunk; for the 16-bit gradient the 16-bit chunk and the f32
/// grad_x accumulator; for an f32 w under a 16-bit dtype, one chunk of w
/// rounded to dtype; for an NF4 w, one chunk of w dequantized to dtype in
/// the f32-sized part memopt_nf4_linear_cross_entropy_scratch_bytes adds.
struct Scratch {
  float *logits;
  void *rounded;
  float *gradX;
  void *weightChunk;
};

/// The weight [classes, dim]: stored in `dtype` (a float dtype), or NF4
/// packed (`nf4`).
struct Weight {
  const void *data;
  memopt_dtype dtype;
  bool nf4;
  int64_t classes;
};

Scratch scratchParts(memopt_dtype dtype, const Weight &w, void *scratch,
                     int64_t rows, int64_t dim, int64_t chunk, int grad) {
  uint64_t r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(chunk);
  char *base = static_cast<char *>(scratch);
  Scratch s{static_cast<float *>(scratch), nullptr, nullptr, nullptr};
  if ((dtype == MEMOPT_F32 && !w.nf4) || !base)
    return s;
  uint64_t offset = round256(r * c * 4);
  if (grad && dtype != MEMOPT_F32) {
    s.rounded = base + offset;
    s.gradX = reinterpret_cast<float *>(base + offset + round256(r * c * 2));
    offset += round256(r * c * 2) + round256(r * static_cast<uint64_t>(dim) * 4);
  }
  s.weightChunk = base + offset;
  return s;
}

/// Rows [first, first + count) of w as dtype holds them: a view of w, or,
/// for an f32 w under a 16-bit dtype or an NF4 w, the rows rounded or
/// dequantized into the scratch.
const void *weightRows(memopt_context *ctx, const char *entry,
                       memopt_dtype dtype, const Weight &w,
                       const Scratch &parts, int64_t first, int64_t count,
                       int64_t dim) {
  int64_t n = count * dim;
  if (w.nf4) {
    dispatchFloat(dtype, [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      nf4DequantizeKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          static_cast<const uint8_t *>(w.data), w.classes * dim, count, dim,
          dim, first * dim, static_cast<T *>(parts.weightChunk));
    });
    checkLaunch(ctx, entry, "nf4DequantizeKernel");
    return parts.weightChunk;
  }
  const char *rows = static_cast<const char *>(w.data) +
                     first * dim * memopt_dtype_size(w.dtype);
  if (w.dtype == dtype)
    return rows;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    roundKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        reinterpret_cast<const float *>(rows),
        static_cast<T *>(parts.weightChunk), n);
  });
  checkLaunch(ctx, entry, "roundKernel");
  return parts.weightChunk;
}

/// The forward of both entries, their arguments checked.
void linearLoss(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                const void *x, const Weight &w, const void *bias,
                memopt_dtype label_dtype, const void *labels, float *loss,
                float *lse, void *scratch, int64_t rows, int64_t dim,
                int64_t chunk, int64_t ignore_index,
                memopt_loss_reduction reduction) {
  // Scratch: the rows' label logits (then losses), then the total's
  // partials.
  float *labelLogit = scratchFloats(
      ctx, entry, rows + 2 * int64_t(partialBlocks(rows, kRowBlock)));
  if (!labelLogit)
    return;
  bool is64 = label_dtype == MEMOPT_I64;
  int64_t classes = w.classes;
  Scratch parts = scratchParts(dtype, w, scratch, rows, dim, chunk, /*grad=*/0);
  float *logits = parts.logits;
  if (rows > 0 && classes == 0) {
    fillFloatsKernel<<<gridFor(rows), kBlock, 0, ctx->stream>>>(lse, rows,
                                                                -INFINITY);
    if (!checkLaunch(ctx, entry, "fillFloatsKernel"))
      return;
  }
  for (int64_t c0 = 0; rows > 0 && c0 < classes && isLive(ctx); c0 += chunk) {
    int64_t width = classes - c0 < chunk ? classes - c0 : chunk;
    const void *wc = weightRows(ctx, entry, dtype, w, parts, c0, width, dim);
    if (!isLive(ctx))
      return;
    product(ctx, entry, dtype, MEMOPT_F32, x, wc, logits, rows, width, dim,
            /*transA=*/false, /*transB=*/true,
            /*accumulate=*/false);
    if (!isLive(ctx))
      return;
    dispatchFloat(dtype, [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      chunkLseKernel<T><<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
          logits, static_cast<const T *>(bias), is64, labels, lse, labelLogit,
          rows, width, c0, c0 == 0);
    });
    if (!checkLaunch(ctx, entry, "chunkLseKernel"))
      return;
  }
  // The rows' losses, then their total in two passes (Loss.cu).
  rowLossKernel<<<gridFor(rows), kBlock, 0, ctx->stream>>>(
      lse, labelLogit, is64, labels, rows, classes, ignore_index,
      SiteCrossEntropy, ctx->deviceError);
  if (!checkLaunch(ctx, entry, "rowLossKernel"))
    return;
  launchLossTotal(ctx, entry, labelLogit, is64, labels, rows, ignore_index,
                  reduction == MEMOPT_REDUCTION_MEAN, labelLogit + rows, loss);
}


/// The gradient of both entries, their arguments checked; grad_w is NULL
/// for an NF4 w.
void linearLossGrad(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                    const void *x, const Weight &w, const void *bias,
                    memopt_dtype label_dtype, const void *labels,
                    const float *lse, const float *grad_loss, void *grad_x,
                    void *grad_w, void *grad_bias, void *scratch, int64_t rows,
                    int64_t dim, int64_t chunk, int64_t ignore_index,
                    memopt_loss_reduction reduction) {
  int64_t classes = w.classes;
  // Scratch: the label count, then its partials.
  float *count = scratchFloats(ctx, entry, 1 + partialBlocks(rows, kRowBlock));
  if (!count)
    return;
  bool is64 = label_dtype == MEMOPT_I64;
  bool mean = reduction == MEMOPT_REDUCTION_MEAN;
  size_t size = memopt_dtype_size(dtype);
  rowLossKernel<<<gridFor(rows), kBlock, 0, ctx->stream>>>(
      nullptr, nullptr, is64, labels, rows, classes, ignore_index,
      SiteCrossEntropyGrad, ctx->deviceError);
  if (!checkLaunch(ctx, entry, "rowLossKernel") ||
      !launchLabelCount(ctx, entry, is64, labels, rows, ignore_index, count + 1,
                        count))
    return;
  if (classes == 0) {
    if (rows * dim > 0)
      MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaMemsetAsync(grad_x, 0, rows * dim * size, ctx->stream));
    return;
  }
  Scratch parts = scratchParts(dtype, w, scratch, rows, dim, chunk, /*grad=*/1);
  // The GEMMs' dlogits operand: the f32 chunk itself, or its 16-bit copy.
  const void *dlogits = dtype == MEMOPT_F32 ? parts.logits : parts.rounded;
  void *gradXAcc = dtype == MEMOPT_F32 ? grad_x : parts.gradX;
  for (int64_t c0 = 0; c0 < classes && isLive(ctx); c0 += chunk) {
    int64_t width = classes - c0 < chunk ? classes - c0 : chunk;
    const void *wc = weightRows(ctx, entry, dtype, w, parts, c0, width, dim);
    if (!isLive(ctx))
      return;
    product(ctx, entry, dtype, MEMOPT_F32, x, wc, parts.logits, rows, width,
            dim, /*transA=*/false, /*transB=*/true,
            /*accumulate=*/false);
    if (!isLive(ctx))
      return;
    dispatchFloat(dtype, [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      if (rows > 0) {
        chunkGradKernel<T><<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
            parts.logits, static_cast<T *>(parts.rounded),
            static_cast<const T *>(bias), is64, labels, lse, grad_loss, count,
            rows, width, c0, classes, ignore_index, mean);
        if (!checkLaunch(ctx, entry, "chunkGradKernel"))
          return;
      }
      if (grad_bias) {
        columnSumKernel<T>
            <<<static_cast<unsigned>((width + kColTile - 1) / kColTile),
               dim3(kColTile, kBiasRows), 0, ctx->stream>>>(
                parts.logits, rows, width, static_cast<T *>(grad_bias) + c0);
        checkLaunch(ctx, entry, "columnSumKernel");
      }
    });
    if (!isLive(ctx))
      return;
    // grad_w's rows of the chunk: [width, rows] x [rows, dim].
    if (grad_w)
      product(ctx, entry, dtype, w.dtype, dlogits, x,
              static_cast<char *>(grad_w) +
                  c0 * dim * memopt_dtype_size(w.dtype),
              width, dim, rows,
              /*transA=*/true, /*transB=*/false, /*accumulate=*/false);
    // grad_x (+)= [rows, width] x [width, dim], in f32.
    product(ctx, entry, dtype, MEMOPT_F32, dlogits, wc, gradXAcc, rows, dim,
            width, /*transA=*/false, /*transB=*/false,
            /*accumulate=*/c0 > 0);
  }
  if (dtype == MEMOPT_F32 || rows * dim == 0 || !isLive(ctx))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    roundKernel<T><<<gridFor(rows * dim), kBlock, 0, ctx->stream>>>(
        parts.gradX, static_cast<T *>(grad_x), rows * dim);
  });
  checkLaunch(ctx, entry, "roundKernel");
}

} // namespace

void memopt_linear_cross_entropy(memopt_context *ctx, memopt_dtype dtype,
                                 const void *x, const void *w,
                                 memopt_dtype w_dtype, const void *bias,
                                 memopt_dtype label_dtype, const void *labels,
                                 float *loss, float *lse, void *scratch,
                                 uint64_t scratch_bytes, int64_t rows,
                                 int64_t dim, int64_t classes, int64_t chunk,
                                 int64_t ignore_index,
                                 memopt_loss_reduction reduction) {
  const char *entry = "memopt_linear_cross_entropy";
  if (checkLinearCrossEntropy(ctx, entry, dtype, w_dtype, label_dtype,
                              reduction, rows, dim, classes, chunk, scratch,
                              scratch_bytes, /*grad=*/0, loss,
                              {x, w, labels, lse}))
    linearLoss(ctx, entry, dtype, x, Weight{w, w_dtype, false, classes}, bias,
               label_dtype, labels, loss, lse, scratch, rows, dim, chunk,
               ignore_index, reduction);
}

void memopt_linear_cross_entropy_grad(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    memopt_dtype w_dtype, const void *bias, memopt_dtype label_dtype,
    const void *labels, const float *lse, const float *grad_loss, void *grad_x,
    void *grad_w, void *grad_bias, void *scratch, uint64_t scratch_bytes,
    int64_t rows, int64_t dim, int64_t classes, int64_t chunk,
    int64_t ignore_index, memopt_loss_reduction reduction) {
  const char *entry = "memopt_linear_cross_entropy_grad";
  if (checkLinearCrossEntropy(ctx, entry, dtype, w_dtype, label_dtype,
                              reduction, rows, dim, classes, chunk, scratch,
                              scratch_bytes, /*grad=*/1, grad_loss,
                              {x, w, labels, lse, grad_x}))
    linearLossGrad(ctx, entry, dtype, x, Weight{w, w_dtype, false, classes},
                   bias, label_dtype, labels, lse, grad_loss, grad_x, grad_w,
                   grad_bias, scratch, rows, dim, chunk, ignore_index,
                   reduction);
}

void memopt_nf4_linear_cross_entropy(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    const void *bias, memopt_dtype label_dtype, const void *labels,
    float *loss, float *lse, void *scratch, uint64_t scratch_bytes,
    int64_t rows, int64_t dim, int64_t classes, int64_t chunk,
    int64_t ignore_index, memopt_loss_reduction reduction) {
  const char *entry = "memopt_nf4_linear_cross_entropy";
  if (checkNf4LinearCrossEntropy(ctx, entry, dtype, label_dtype, reduction,
                                 rows, dim, classes, chunk, scratch,
                                 scratch_bytes, /*grad=*/0, loss,
                                 {x, w, labels, lse}))
    linearLoss(ctx, entry, dtype, x, Weight{w, dtype, true, classes}, bias,
               label_dtype, labels, loss, lse, scratch, rows, dim, chunk,
               ignore_index, reduction);
}

void memopt_nf4_linear_cross_entropy_grad(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    const void *bias, memopt_dtype label_dtype, const void *labels,
    const float *lse, const float *grad_loss, void *grad_x, void *grad_bias,
    void *scratch, uint64_t scratch_bytes, int64_t rows, int64_t dim,
    int64_t classes, int64_t chunk, int64_t ignore_index,
    memopt_loss_reduction reduction) {
  const char *entry = "memopt_nf4_linear_cross_entropy_grad";
  if (checkNf4LinearCrossEntropy(ctx, entry, dtype, label_dtype, reduction,
                                 rows, dim, classes, chunk, scratch,
                                 scratch_bytes, /*grad=*/1, grad_loss,
                                 {x, w, labels, lse, grad_x}))
    linearLossGrad(ctx, entry, dtype, x, Weight{w, dtype, true, classes},
                   bias, label_dtype, labels, lse, grad_loss, grad_x,
                   /*grad_w=*/nullptr, grad_bias, scratch, rows, dim, chunk,
                   ignore_index, reduction);
}
