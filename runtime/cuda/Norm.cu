//===- Norm.cu - softmax and normalisation --------------------------------===//
//
// Softmax, layer norm, RMS norm and batch norm, with their gradients, on
// NormMath.h's formulas (shared with the host runtime). Rows whose elements
// are contiguous (softmax over the last dimension, layer and RMS norm) take
// a block per row. Sums that run down columns (the norms' weight and bias
// gradients) or over a whole channel (batch norm) would leave most of the
// GPU idle as one block per 32 columns or per channel, so they take two
// passes: blocks over (columns or channels) x chunks of rows write f32
// partial sums to the workspace's scratch slice, then a thread per column
// or channel adds its chunks in chunk order. The number of chunks comes from
// the shape alone (never from the device), and no floating-point sum uses
// atomics, so results are identical run to run. Softmax subtracts the row
// maximum first.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include "memopt/runtime/NormMath.h"

using namespace memopt::cuda;

//===----------------------------------------------------------------------===//
// Chunked column sums
//===----------------------------------------------------------------------===//

namespace {

/// The most partial sums a two-pass reduction keeps in the scratch slice
/// (4 MiB of its 16), and the most chunks per column.
constexpr int64_t kPartialFloats = int64_t(1) << 20;
constexpr int64_t kMaxChunks = 256;

/// Rows per chunk of the norms' parameter gradients: 8 per row-thread of a
/// kColTile x kColRows block.
constexpr int64_t kParamChunkRows = 8 * kColRows;

/// Elements per chunk of a batch-norm channel: 16 per thread of a
/// kRowBlock block.
constexpr int64_t kChannelChunk = 16 * kRowBlock;

/// How many chunks split sums of `length` terms into pieces of about `per`
/// terms when each chunk keeps `sums` partials (one per column or channel
/// and per quantity summed): at least 1, at most kMaxChunks, and few enough
/// that the partials fit in kPartialFloats. A function of the shape only.
int64_t chunkCount(int64_t length, int64_t per, int64_t sums) {
  int64_t chunks = (length + per - 1) / per;
  int64_t fit = kPartialFloats / (sums > 0 ? sums : 1);
  chunks = chunks < fit ? chunks : fit;
  chunks = chunks < kMaxChunks ? chunks : kMaxChunks;
  return chunks > 1 ? chunks : 1;
}

/// The sum of the partials partial[k * n + i] of sum i over the chunks k,
/// in chunk order.
__device__ __forceinline__ float sumOverChunks(const float *partial, int64_t i,
                                               int64_t n, int64_t chunks) {
  float total = partial[i];
  for (int64_t k = 1; k < chunks; ++k)
    total += partial[k * n + i];
  return total;
}

/// The second pass: out[i] = sumOverChunks(partial, i) (and likewise out2
/// from partial2, when given), a thread per sum.
template <typename W>
__global__ void sumChunksKernel(const float *partial, const float *partial2,
                                W *out, W *out2, int64_t chunks, int64_t n) {
  GRID_STRIDE(i, n) {
    out[i] = fromF32<W>(sumOverChunks(partial, i, n, chunks));
    if (partial2)
      out2[i] = fromF32<W>(sumOverChunks(partial2, i, n, chunks));
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

namespace {

/// Softmax / log-softmax of contiguous rows: a block per row.
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    softmaxRowsKernel(const T *x, T *y, int64_t rows, int64_t dim, bool isLog) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xs = x + r * dim;
    T *ys = y + r * dim;
    float2 ms = rowMaxExpSum<kRowBlock>(xs, dim, shared);
    float m = ms.x, s = ms.y;
    float logSum = logf(s), inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < dim; j += kRowBlock) {
      float v = toF32(xs[j]);
      ys[j] = fromF32<T>(isLog ? logSoftmaxValue(v, m, logSum)
                               : softmaxValue(v, m, inv));
    }
  }
}

/// The same along a strided middle dimension: a thread per (outer, inner).
template <typename T>
__global__ void softmaxStridedKernel(const T *x, T *y, int64_t outer,
                                     int64_t dim, int64_t inner, bool isLog) {
  GRID_STRIDE(t, outer * inner) {
    int64_t base = (t / inner) * dim * inner + t % inner;
    float m = -INFINITY;
    for (int64_t r = 0; r < dim; ++r)
      m = fmaxf(m, toF32(x[base + r * inner]));
    float s = 0.0f;
    for (int64_t r = 0; r < dim; ++r)
      s += softmaxExpTerm<float>(toF32(x[base + r * inner]), m);
    float logSum = logf(s), inv = 1.0f / s;
    for (int64_t r = 0; r < dim; ++r) {
      float v = toF32(x[base + r * inner]);
      y[base + r * inner] = fromF32<T>(isLog ? logSoftmaxValue(v, m, logSum)
                                             : softmaxValue(v, m, inv));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    softmaxGradRowsKernel(const T *y, const T *g, T *dx, int64_t rows,
                          int64_t dim, bool isLog) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *ys = y + r * dim;
    const T *gs = g + r * dim;
    T *out = dx + r * dim;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < dim; j += kRowBlock)
      s += softmaxGradTerm<float>(toF32(ys[j]), toF32(gs[j]), isLog);
    s = blockSum<kRowBlock>(s, shared);
    for (int64_t j = threadIdx.x; j < dim; j += kRowBlock)
      out[j] =
          fromF32<T>(softmaxGradValue(toF32(ys[j]), toF32(gs[j]), s, isLog));
  }
}

template <typename T>
__global__ void softmaxGradStridedKernel(const T *y, const T *g, T *dx,
                                         int64_t outer, int64_t dim,
                                         int64_t inner, bool isLog) {
  GRID_STRIDE(t, outer * inner) {
    int64_t base = (t / inner) * dim * inner + t % inner;
    float s = 0.0f;
    for (int64_t r = 0; r < dim; ++r) {
      int64_t k = base + r * inner;
      s += softmaxGradTerm<float>(toF32(y[k]), toF32(g[k]), isLog);
    }
    for (int64_t r = 0; r < dim; ++r) {
      int64_t k = base + r * inner;
      dx[k] = fromF32<T>(softmaxGradValue(toF32(y[k]), toF32(g[k]), s, isLog));
    }
  }
}

bool checkSoftmax(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                  int64_t outer, int64_t dim, int64_t inner,
                  std::initializer_list<const void *> pointers) {
  return checkFloatTensors(ctx, entry, dtype, {outer, dim, inner}, pointers) &&
         outer * dim * inner > 0;
}

void softmaxForward(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                    const void *input, void *out, int64_t outer, int64_t dim,
                    int64_t inner, bool isLog) {
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    const T *x = static_cast<const T *>(input);
    T *y = static_cast<T *>(out);
    if (inner == 1)
      softmaxRowsKernel<T><<<rowGrid(outer), kRowBlock, 0, ctx->stream>>>(
          x, y, outer, dim, isLog);
    else
      softmaxStridedKernel<T>
          <<<gridFor(outer * inner), kBlock, 0, ctx->stream>>>(x, y, outer, dim,
                                                               inner, isLog);
  });
  checkLaunch(ctx, entry, "softmaxKernel");
}

void softmaxBackward(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                     const void *output, const void *grad, void *out,
                     int64_t outer, int64_t dim, int64_t inner, bool isLog) {
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    const T *y = static_cast<const T *>(output);
    const T *g = static_cast<const T *>(grad);
    T *dx = static_cast<T *>(out);
    if (inner == 1)
      softmaxGradRowsKernel<T><<<rowGrid(outer), kRowBlock, 0, ctx->stream>>>(
          y, g, dx, outer, dim, isLog);
    else
      softmaxGradStridedKernel<T>
          <<<gridFor(outer * inner), kBlock, 0, ctx->stream>>>(
              y, g, dx, outer, dim, inner, isLog);
  });
  checkLaunch(ctx, entry, "softmaxGradKernel");
}

} // namespace

void memopt_softmax(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t outer, int64_t dim, int64_t inner) {
  const char *entry = "memopt_softmax";
  if (checkSoftmax(ctx, entry, dtype, outer, dim, inner, {input, out}))
    softmaxForward(ctx, entry, dtype, input, out, outer, dim, inner, false);
}

void memopt_log_softmax(memopt_context *ctx, memopt_dtype dtype,
                        const void *input, void *out, int64_t outer,
                        int64_t dim, int64_t inner) {
  const char *entry = "memopt_log_softmax";
  if (checkSoftmax(ctx, entry, dtype, outer, dim, inner, {input, out}))
    softmaxForward(ctx, entry, dtype, input, out, outer, dim, inner, true);
}

void memopt_softmax_grad(memopt_context *ctx, memopt_dtype dtype,
                         const void *output, const void *grad, void *out,
                         int64_t outer, int64_t dim, int64_t inner) {
  const char *entry = "memopt_softmax_grad";
  if (checkSoftmax(ctx, entry, dtype, outer, dim, inner, {output, grad, out}))
    softmaxBackward(ctx, entry, dtype, output, grad, out, outer, dim, inner,
                    false);
}

void memopt_log_softmax_grad(memopt_context *ctx, memopt_dtype dtype,
                             const void *output, const void *grad, void *out,
                             int64_t outer, int64_t dim, int64_t inner) {
  const char *entry = "memopt_log_softmax_grad";
  if (checkSoftmax(ctx, entry, dtype, outer, dim, inner, {output, grad, out}))
    softmaxBackward(ctx, entry, dtype, output, grad, out, outer, dim, inner,
                    true);
}

//===----------------------------------------------------------------------===//
// Layer norm and RMS norm
//===----------------------------------------------------------------------===//

namespace {

template <typename T, typename W>
__global__ void __launch_bounds__(kRowBlock)
    layerNormKernel(const T *x, const W *w, const W *b, T *y, float *mean,
                    float *rstd, int64_t rows, int64_t cols, float eps,
                    bool rms) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xs = x + r * cols;
    T *ys = y + r * cols;
    float mu = 0.0f;
    if (!rms) {
      float s = 0.0f;
      for (int64_t j = threadIdx.x; j < cols; j += kRowBlock)
        s += toF32(xs[j]);
      mu = blockSum<kRowBlock>(s, shared) / static_cast<float>(cols);
    }
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += kRowBlock)
      sq += rms ? squareTerm<float>(toF32(xs[j]))
                : squaredDeviation<float>(toF32(xs[j]), mu);
    float var = blockSum<kRowBlock>(sq, shared) / static_cast<float>(cols);
    float s = reciprocalStd<float>(var, eps);
    for (int64_t j = threadIdx.x; j < cols; j += kRowBlock) {
      float xv = toF32(xs[j]), wv = toF32(w[j]);
      ys[j] = fromF32<T>(rms ? rmsNormValue(xv, s, wv)
                             : affineNormValue(xv, mu, s, wv, toF32(b[j])));
    }
    if (threadIdx.x == 0) {
      if (!rms)
        mean[r] = mu;
      rstd[r] = s;
    }
  }
}

/// The input gradient, a block per row.
template <typename T, typename W>
__global__ void __launch_bounds__(kRowBlock)
    layerNormGradInputKernel(const T *dy, const T *x, const W *w,
                             const float *mean, const float *rstd, T *dx,
                             int64_t rows, int64_t cols, bool rms) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *dys = dy + r * cols;
    const T *xs = x + r * cols;
    float m = rms ? 0.0f : mean[r], s = rstd[r];
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += kRowBlock) {
      float g = toF32(dys[j]), wv = toF32(w[j]), xv = toF32(xs[j]);
      if (rms) {
        sumGX += rmsNormGradTerm<float>(g, wv, xv);
      } else {
        sumG += layerNormGradTermG<float>(g, wv);
        sumGX += layerNormGradTermGX<float>(g, wv, xv, m, s);
      }
    }
    if (!rms)
      sumG = blockSum<kRowBlock>(sumG, shared);
    sumGX = blockSum<kRowBlock>(sumGX, shared);
    float meanG = sumG / static_cast<float>(cols);
    float meanGX = sumGX / static_cast<float>(cols);
    float c = rms ? rmsNormGradCoupling<float>(sumGX, cols, s) : 0.0f;
    T *out = dx + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += kRowBlock) {
      float g = toF32(dys[j]), wv = toF32(w[j]), xv = toF32(xs[j]);
      out[j] =
          fromF32<T>(rms ? rmsNormGradValue(g, wv, xv, s, c)
                         : layerNormGradValue(g, wv, xv, m, s, meanG, meanGX));
    }
  }
}

/// The first pass of the weight (and bias) gradients: block (i, k) sums
/// columns [32 i, 32 i + 32) over rows [k chunkRows, (k + 1) chunkRows),
/// each of its kColRows row-threads every kColRows-th row, then the
/// row-threads in order, into row k of `dw` and `db` (the partials; with
/// one chunk, the gradients themselves).
template <typename T, typename Out>
__global__ void __launch_bounds__(kColBlock)
    normParamGradKernel(const T *dy, const T *x, const float *mean,
                        const float *rstd, Out *dw, Out *db, int64_t rows,
                        int64_t cols, int64_t chunkRows, bool rms) {
  __shared__ float pw[kColRows][kColTile + 1];
  __shared__ float pb[kColRows][kColTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t col = blockIdx.x * int64_t(kColTile) + tx;
  int64_t begin = blockIdx.y * chunkRows;
  int64_t end = begin + chunkRows < rows ? begin + chunkRows : rows;
  float accW = 0.0f, accB = 0.0f;
  if (col < cols) {
    for (int64_t r = begin + ty; r < end; r += kColRows) {
      float g = toF32(dy[r * cols + col]);
      float xv = toF32(x[r * cols + col]);
      accW += rms ? rmsNormWeightGradTerm<float>(g, xv, rstd[r])
                  : layerNormWeightGradTerm<float>(g, xv, mean[r], rstd[r]);
      accB += g;
    }
  }
  pw[ty][tx] = accW;
  pb[ty][tx] = accB;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float tw = pw[0][tx], tb = pb[0][tx];
    for (int k = 1; k < kColRows; ++k) {
      tw += pw[k][tx];
      tb += pb[k][tx];
    }
    dw[blockIdx.y * cols + col] = fromF32<Out>(tw);
    if (!rms)
      db[blockIdx.y * cols + col] = fromF32<Out>(tb);
  }
}

void launchNorm(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                const void *input, memopt_dtype w_dtype, const void *weight,
                const void *bias, void *out, float *mean, float *rstd,
                int64_t rows, int64_t cols, double eps, bool rms) {
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    dispatchFloat(w_dtype, [&](auto wtag) {
      using W = MEMOPT_STORAGE(wtag);
      layerNormKernel<T, W><<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
          static_cast<const T *>(input), static_cast<const W *>(weight),
          static_cast<const W *>(bias), static_cast<T *>(out), mean, rstd, rows,
          cols, static_cast<float>(eps), rms);
    });
  });
  checkLaunch(ctx, entry, "layerNormKernel");
}

/// The weight (and, unless `rms`, bias) gradients in the two passes of
/// chunked column sums; one chunk needs no second pass and no scratch.
template <typename T, typename W>
bool launchNormParamGrad(memopt_context *ctx, const char *entry, const T *dy,
                         const T *x, const float *mean, const float *rstd,
                         W *dw, W *db, int64_t rows, int64_t cols, bool rms) {
  int64_t chunks = chunkCount(rows, kParamChunkRows, 2 * cols);
  int64_t chunkRows = (rows + chunks - 1) / chunks;
  dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile),
            static_cast<unsigned>(chunks));
  dim3 block(kColTile, kColRows);
  if (chunks == 1) {
    normParamGradKernel<T, W><<<grid, block, 0, ctx->stream>>>(
        dy, x, mean, rstd, dw, db, rows, cols, chunkRows, rms);
    return checkLaunch(ctx, entry, "normParamGradKernel");
  }
  float *partialW = scratchFloats(ctx, entry, 2 * chunks * cols);
  if (!partialW)
    return false;
  float *partialB = partialW + chunks * cols;
  normParamGradKernel<T, float><<<grid, block, 0, ctx->stream>>>(
      dy, x, mean, rstd, partialW, partialB, rows, cols, chunkRows, rms);
  if (!checkLaunch(ctx, entry, "normParamGradKernel"))
    return false;
  sumChunksKernel<W><<<gridFor(cols), kBlock, 0, ctx->stream>>>(
      partialW, rms ? nullptr : partialB, dw, db, chunks, cols);
  return checkLaunch(ctx, entry, "sumChunksKernel");
}

void launchNormGrad(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                    const void *grad, const void *input, memopt_dtype w_dtype,
                    const void *weight, const float *mean, const float *rstd,
                    void *grad_input, void *grad_weight, void *grad_bias,
                    int64_t rows, int64_t cols, bool rms) {
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    dispatchFloat(w_dtype, [&](auto wtag) {
      using W = MEMOPT_STORAGE(wtag);
      const T *dy = static_cast<const T *>(grad);
      const T *x = static_cast<const T *>(input);
      // The parameter gradients first: the input gradient may overwrite
      // `grad`. Without rows they are zeros.
      if (!launchNormParamGrad(ctx, entry, dy, x, mean, rstd,
                               static_cast<W *>(grad_weight),
                               static_cast<W *>(grad_bias), rows, cols, rms))
        return;
      if (rows > 0) {
        layerNormGradInputKernel<T, W>
            <<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
                dy, x, static_cast<const W *>(weight), mean, rstd,
                static_cast<T *>(grad_input), rows, cols, rms);
        checkLaunch(ctx, entry, "layerNormGradInputKernel");
      }
    });
  });
}

} // namespace

void memopt_layer_norm(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, memopt_dtype w_dtype,
                       const void *weight, const void *bias, void *out,
                       float *mean, float *rstd, int64_t rows, int64_t cols,
                       double eps) {
  const char *entry = "memopt_layer_norm";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols, {input, out},
                 {mean, rstd}, {weight, bias}) ||
      isEmpty({rows}))
    return;
  if (cols == 0) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, "empty rows");
    return;
  }
  launchNorm(ctx, entry, dtype, input, w_dtype, weight, bias, out, mean, rstd,
             rows, cols, eps, false);
}

void memopt_layer_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            memopt_dtype w_dtype, const void *weight,
                            const float *mean, const float *rstd,
                            void *grad_input, void *grad_weight,
                            void *grad_bias, int64_t rows, int64_t cols) {
  const char *entry = "memopt_layer_norm_grad";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols,
                 {grad, input, grad_input}, {mean, rstd},
                 {weight, grad_weight, grad_bias}) ||
      cols == 0)
    return;
  launchNormGrad(ctx, entry, dtype, grad, input, w_dtype, weight, mean, rstd,
                 grad_input, grad_weight, grad_bias, rows, cols, false);
}

void memopt_rms_norm(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     memopt_dtype w_dtype, const void *weight, void *out,
                     float *rstd, int64_t rows, int64_t cols, double eps) {
  const char *entry = "memopt_rms_norm";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols, {input, out}, {rstd},
                 {weight}) ||
      isEmpty({rows}))
    return;
  if (cols == 0) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, "empty rows");
    return;
  }
  launchNorm(ctx, entry, dtype, input, w_dtype, weight, nullptr, out, nullptr,
             rstd, rows, cols, eps, true);
}

void memopt_rms_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *grad, const void *input,
                          memopt_dtype w_dtype, const void *weight,
                          const float *rstd, void *grad_input,
                          void *grad_weight, int64_t rows, int64_t cols) {
  const char *entry = "memopt_rms_norm_grad";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols,
                 {grad, input, grad_input}, {rstd}, {weight, grad_weight}) ||
      cols == 0)
    return;
  launchNormGrad(ctx, entry, dtype, grad, input, w_dtype, weight, nullptr, rstd,
                 grad_input, grad_weight, nullptr, rows, cols, true);
}

//===----------------------------------------------------------------------===//
// Batch norm
//===----------------------------------------------------------------------===//

namespace {

/// A batch-norm channel's elements in chunks: the chunk count and size of
/// a channel of `count` elements when `channels` channels each keep `sums`
/// partials per chunk.
struct ChannelChunks {
  int64_t chunks, size;
};

ChannelChunks channelChunks(int64_t count, int64_t channels, int64_t sums) {
  int64_t chunks = chunkCount(count, kChannelChunk, sums * channels);
  return {chunks, (count + chunks - 1) / chunks};
}

/// Index of element i of channel c in a [batch, channels, spatial] tensor.
__device__ __forceinline__ int64_t channelElement(int64_t i, int64_t c,
                                                  int64_t channels,
                                                  int64_t spatial) {
  return ((i / spatial) * channels + c) * spatial + i % spatial;
}

/// The first passes of batch norm's statistics: block (c, k) sums chunk k of
/// channel c, x (mean == null) or (x - mean[c])^2, into
/// partial[k * channels + c].
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    batchNormPartialKernel(const T *x, const float *mean, float *partial,
                           int64_t channels, int64_t spatial, int64_t count,
                           int64_t chunkSize) {
  __shared__ float shared[32];
  int64_t c = blockIdx.x, k = blockIdx.y;
  int64_t begin = k * chunkSize;
  int64_t end = begin + chunkSize < count ? begin + chunkSize : count;
  float mu = mean ? mean[c] : 0.0f;
  float s = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kRowBlock) {
    float v = toF32(x[channelElement(i, c, channels, spatial)]);
    s += mean ? squaredDeviation<float>(v, mu) : v;
  }
  s = blockSum<kRowBlock>(s, shared);
  if (threadIdx.x == 0)
    partial[k * channels + c] = s;
}

/// mean[c] from the partial sums, a thread per channel.
__global__ void batchNormMeanKernel(const float *partial, float *mean,
                                    int64_t channels, int64_t count,
                                    int64_t chunks) {
  GRID_STRIDE(c, channels) {
    mean[c] =
        sumOverChunks(partial, c, channels, chunks) / static_cast<float>(count);
  }
}

/// rstd[c] and the running statistics from the partial sums of squares, a
/// thread per channel (the new running statistics may overwrite the old).
__global__ void batchNormStatsKernel(const float *partial, const float *mean,
                                     const float *runMean, const float *runVar,
                                     float *rstd, float *newMean, float *newVar,
                                     int64_t channels, int64_t count,
                                     int64_t chunks, float eps,
                                     double momentum) {
  GRID_STRIDE(c, channels) {
    float sq = sumOverChunks(partial, c, channels, chunks);
    float var = sq / static_cast<float>(count);
    rstd[c] = reciprocalStd<float>(var, eps);
    double unbiased = static_cast<double>(sq) / static_cast<double>(count - 1);
    double oldMean = runMean[c], oldVar = runVar[c];
    newMean[c] = runningStatistic(oldMean, mean[c], momentum);
    newVar[c] = runningStatistic(oldVar, unbiased, momentum);
  }
}

template <typename T>
__global__ void batchNormApplyKernel(const T *x, const float *w, const float *b,
                                     const float *mean, const float *rstd, T *y,
                                     int64_t n, int64_t channels,
                                     int64_t spatial) {
  GRID_STRIDE(k, n) {
    int64_t c = (k / spatial) % channels;
    y[k] =
        fromF32<T>(affineNormValue(toF32(x[k]), mean[c], rstd[c], w[c], b[c]));
  }
}

/// The first pass of batch norm's gradient: block (c, k) sums dy and dy *
/// xhat over chunk k of channel c into partialG and partialGX.
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    batchNormGradPartialKernel(const T *dy, const T *x, const float *mean,
                               const float *rstd, float *partialG,
                               float *partialGX, int64_t channels,
                               int64_t spatial, int64_t count,
                               int64_t chunkSize) {
  __shared__ float shared[32];
  int64_t c = blockIdx.x, k = blockIdx.y;
  int64_t begin = k * chunkSize;
  int64_t end = begin + chunkSize < count ? begin + chunkSize : count;
  float m = mean[c], r = rstd[c];
  float sumG = 0.0f, sumGX = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kRowBlock) {
    int64_t e = channelElement(i, c, channels, spatial);
    float g = toF32(dy[e]);
    sumG += g;
    sumGX += layerNormWeightGradTerm<float>(g, toF32(x[e]), m, r);
  }
  sumG = blockSum<kRowBlock>(sumG, shared);
  sumGX = blockSum<kRowBlock>(sumGX, shared);
  if (threadIdx.x == 0) {
    partialG[k * channels + c] = sumG;
    partialGX[k * channels + c] = sumGX;
  }
}

/// The input gradient, elementwise, from the channel sums in dw and db.
template <typename T>
__global__ void
batchNormGradInputKernel(const T *dy, const T *x, const float *w,
                         const float *mean, const float *rstd, const float *dw,
                         const float *db, T *dx, int64_t n, int64_t channels,
                         int64_t spatial, int64_t count) {
  GRID_STRIDE(k, n) {
    int64_t c = (k / spatial) % channels;
    float meanG = db[c] / static_cast<float>(count);
    float meanGX = dw[c] / static_cast<float>(count);
    dx[k] =
        fromF32<T>(batchNormGradValue(toF32(dy[k]), toF32(x[k]), mean[c],
                                      rstd[c], w[c] * rstd[c], meanG, meanGX));
  }
}

bool launchBatchNorm(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                     const void *input, const float *weight, const float *bias,
                     const float *running_mean, const float *running_var,
                     void *out, float *mean, float *rstd,
                     float *new_running_mean, float *new_running_var,
                     int64_t batch, int64_t channels, int64_t spatial,
                     double eps, double momentum) {
  int64_t count = batch * spatial, n = batch * channels * spatial;
  ChannelChunks chunks = channelChunks(count, channels, 1);
  float *partial = scratchFloats(ctx, entry, chunks.chunks * channels);
  if (!partial)
    return false;
  dim3 grid(static_cast<unsigned>(channels),
            static_cast<unsigned>(chunks.chunks));
  unsigned perChannel = gridFor(channels);
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    const T *x = static_cast<const T *>(input);
    // The mean, then the squared deviations from it (two passes, as the host
    // runtime), then the normalisation.
    batchNormPartialKernel<T><<<grid, kRowBlock, 0, ctx->stream>>>(
        x, nullptr, partial, channels, spatial, count, chunks.size);
    batchNormMeanKernel<<<perChannel, kBlock, 0, ctx->stream>>>(
        partial, mean, channels, count, chunks.chunks);
    batchNormPartialKernel<T><<<grid, kRowBlock, 0, ctx->stream>>>(
        x, mean, partial, channels, spatial, count, chunks.size);
    batchNormStatsKernel<<<perChannel, kBlock, 0, ctx->stream>>>(
        partial, mean, running_mean, running_var, rstd, new_running_mean,
        new_running_var, channels, count, chunks.chunks,
        static_cast<float>(eps), momentum);
    batchNormApplyKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        x, weight, bias, mean, rstd, static_cast<T *>(out), n, channels,
        spatial);
  });
  return checkLaunch(ctx, entry, "batchNormKernels");
}

bool launchBatchNormGrad(memopt_context *ctx, const char *entry,
                         memopt_dtype dtype, const void *grad,
                         const void *input, const float *weight,
                         const float *mean, const float *rstd, void *grad_input,
                         float *grad_weight, float *grad_bias, int64_t batch,
                         int64_t channels, int64_t spatial) {
  int64_t count = batch * spatial, n = batch * channels * spatial;
  ChannelChunks chunks = channelChunks(count, channels, 2);
  float *partialG = scratchFloats(ctx, entry, 2 * chunks.chunks * channels);
  if (!partialG)
    return false;
  float *partialGX = partialG + chunks.chunks * channels;
  dim3 grid(static_cast<unsigned>(channels),
            static_cast<unsigned>(chunks.chunks));
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    const T *dy = static_cast<const T *>(grad);
    const T *x = static_cast<const T *>(input);
    batchNormGradPartialKernel<T><<<grid, kRowBlock, 0, ctx->stream>>>(
        dy, x, mean, rstd, partialG, partialGX, channels, spatial, count,
        chunks.size);
    // grad_weight = sum(dy * xhat), grad_bias = sum(dy).
    sumChunksKernel<float><<<gridFor(channels), kBlock, 0, ctx->stream>>>(
        partialGX, partialG, grad_weight, grad_bias, chunks.chunks, channels);
    batchNormGradInputKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        dy, x, weight, mean, rstd, grad_weight, grad_bias,
        static_cast<T *>(grad_input), n, channels, spatial, count);
  });
  return checkLaunch(ctx, entry, "batchNormGradKernels");
}

} // namespace

void memopt_batch_norm(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const float *weight,
                       const float *bias, const float *running_mean,
                       const float *running_var, void *out, float *mean,
                       float *rstd, float *new_running_mean,
                       float *new_running_var, int64_t batch, int64_t channels,
                       int64_t spatial, double eps, double momentum) {
  const char *entry = "memopt_batch_norm";
  if (!checkBatchNorm(ctx, entry, dtype, batch, channels, spatial,
                      /*training=*/true, {input, out},
                      {weight, bias, running_mean, running_var, mean, rstd,
                       new_running_mean, new_running_var}) ||
      isEmpty({channels}))
    return;
  if (channels > 65535 * 16) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, "too many channels");
    return;
  }
  launchBatchNorm(ctx, entry, dtype, input, weight, bias, running_mean,
                  running_var, out, mean, rstd, new_running_mean,
                  new_running_var, batch, channels, spatial, eps, momentum);
}

void memopt_batch_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            const float *weight, const float *mean,
                            const float *rstd, void *grad_input,
                            float *grad_weight, float *grad_bias, int64_t batch,
                            int64_t channels, int64_t spatial) {
  const char *entry = "memopt_batch_norm_grad";
  if (!checkBatchNorm(ctx, entry, dtype, batch, channels, spatial,
                      /*training=*/false, {grad, input, grad_input},
                      {weight, mean, rstd, grad_weight, grad_bias}) ||
      isEmpty({channels}))
    return;
  if (channels > 65535 * 16) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, "too many channels");
    return;
  }
  launchBatchNormGrad(ctx, entry, dtype, grad, input, weight, mean, rstd,
                      grad_input, grad_weight, grad_bias, batch, channels,
                      spatial);
}
