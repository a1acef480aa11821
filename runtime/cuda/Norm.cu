//===- Norm.cu - softmax and normalisation --------------------------------===//
//
// Softmax, layer norm, RMS norm and batch norm, with their gradients. Rows
// whose elements are contiguous (softmax over the last dimension, layer
// norm) take a block per row; the weight gradients of layer norm, whose
// sums run down columns, take 32 x 8 threads per 32 columns. Both
// accumulate in f32 in an order fixed by the launch shape, so results are
// identical run to run. Softmax subtracts the row maximum first.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace memopt::cuda;

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

namespace {

/// Softmax / log-softmax of contiguous rows: a block per row.
template <typename T>
__global__ void softmaxRowsKernel(const T *x, T *y, int64_t rows, int64_t dim,
                                  bool isLog) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xs = x + r * dim;
    T *ys = y + r * dim;
    float2 ms = rowMaxExpSum(xs, dim, shared);
    float m = ms.x, s = ms.y;
    float logSum = logf(s), inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      float v = toF32(xs[j]) - m;
      ys[j] = fromF32<T>(isLog ? v - logSum : expf(v) * inv);
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
      s += expf(toF32(x[base + r * inner]) - m);
    float logSum = logf(s), inv = 1.0f / s;
    for (int64_t r = 0; r < dim; ++r) {
      float v = toF32(x[base + r * inner]) - m;
      y[base + r * inner] = fromF32<T>(isLog ? v - logSum : expf(v) * inv);
    }
  }
}

template <typename T>
__global__ void softmaxGradRowsKernel(const T *y, const T *g, T *dx,
                                      int64_t rows, int64_t dim, bool isLog) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *ys = y + r * dim;
    const T *gs = g + r * dim;
    T *out = dx + r * dim;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      s += isLog ? toF32(gs[j]) : toF32(gs[j]) * toF32(ys[j]);
    s = blockSum(s, shared);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      float yv = toF32(ys[j]), gv = toF32(gs[j]);
      out[j] = fromF32<T>(isLog ? gv - expf(yv) * s : yv * (gv - s));
    }
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
      s += isLog ? toF32(g[k]) : toF32(g[k]) * toF32(y[k]);
    }
    for (int64_t r = 0; r < dim; ++r) {
      int64_t k = base + r * inner;
      float yv = toF32(y[k]), gv = toF32(g[k]);
      dx[k] = fromF32<T>(isLog ? gv - expf(yv) * s : yv * (gv - s));
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
      softmaxStridedKernel<T><<<gridFor(outer * inner), kBlock, 0,
                                ctx->stream>>>(x, y, outer, dim, inner, isLog);
  });
  checkLaunch(ctx, entry, "softmaxKernel");
}

void softmaxBackward(memopt_context *ctx, const char *entry,
                     memopt_dtype dtype, const void *output, const void *grad,
                     void *out, int64_t outer, int64_t dim, int64_t inner,
                     bool isLog) {
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    const T *y = static_cast<const T *>(output);
    const T *g = static_cast<const T *>(grad);
    T *dx = static_cast<T *>(out);
    if (inner == 1)
      softmaxGradRowsKernel<T><<<rowGrid(outer), kRowBlock, 0, ctx->stream>>>(
          y, g, dx, outer, dim, isLog);
    else
      softmaxGradStridedKernel<T><<<gridFor(outer * inner), kBlock, 0,
                                    ctx->stream>>>(y, g, dx, outer, dim, inner,
                                                   isLog);
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
__global__ void layerNormKernel(const T *x, const W *w, const W *b, T *y,
                                float *mean, float *rstd, int64_t rows,
                                int64_t cols, float eps, bool rms) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xs = x + r * cols;
    T *ys = y + r * cols;
    float mu = 0.0f;
    if (!rms) {
      float s = 0.0f;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        s += toF32(xs[j]);
      mu = blockSum(s, shared) / static_cast<float>(cols);
    }
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float d = toF32(xs[j]) - mu;
      sq += d * d;
    }
    float var = blockSum(sq, shared) / static_cast<float>(cols);
    float s = rsqrtf(var + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = (toF32(xs[j]) - mu) * s * toF32(w[j]);
      if (!rms)
        v += toF32(b[j]);
      ys[j] = fromF32<T>(v);
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
__global__ void layerNormGradInputKernel(const T *dy, const T *x, const W *w,
                                         const float *mean, const float *rstd,
                                         T *dx, int64_t rows, int64_t cols,
                                         bool rms) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *dys = dy + r * cols;
    const T *xs = x + r * cols;
    float m = rms ? 0.0f : mean[r], s = rstd[r];
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float g = toF32(dys[j]) * toF32(w[j]);
      float xv = toF32(xs[j]);
      sumG += g;
      sumGX += rms ? g * xv : g * ((xv - m) * s);
    }
    sumG = blockSum(sumG, shared);
    sumGX = blockSum(sumGX, shared);
    float meanG = sumG / static_cast<float>(cols);
    float meanGX = sumGX / static_cast<float>(cols);
    T *out = dx + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float g = toF32(dys[j]) * toF32(w[j]);
      float xv = toF32(xs[j]);
      float v = rms ? s * g - xv * (meanGX * s * s * s)
                    : s * (g - meanG - ((xv - m) * s) * meanGX);
      out[j] = fromF32<T>(v);
    }
  }
}

/// The weight (and bias) gradients: 32 columns per block, fixed order.
template <typename T, typename W>
__global__ void layerNormGradWeightKernel(const T *dy, const T *x,
                                          const float *mean, const float *rstd,
                                          W *dw, W *db, int64_t rows,
                                          int64_t cols, bool rms) {
  __shared__ float pw[kColRows][kColTile + 1];
  __shared__ float pb[kColRows][kColTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t col = blockIdx.x * int64_t(kColTile) + tx;
  float accW = 0.0f, accB = 0.0f;
  if (col < cols) {
    for (int64_t r = ty; r < rows; r += kColRows) {
      float g = toF32(dy[r * cols + col]);
      float xv = toF32(x[r * cols + col]);
      float xhat = rms ? xv * rstd[r] : (xv - mean[r]) * rstd[r];
      accW += g * xhat;
      accB += g;
    }
  }
  pw[ty][tx] = accW;
  pb[ty][tx] = accB;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float tw = 0.0f, tb = 0.0f;
    for (int r = 0; r < kColRows; ++r) {
      tw += pw[r][tx];
      tb += pb[r][tx];
    }
    dw[col] = fromF32<W>(tw);
    if (!rms)
      db[col] = fromF32<W>(tb);
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

void launchNormGrad(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                    const void *grad, const void *input, memopt_dtype w_dtype,
                    const void *weight, const float *mean, const float *rstd,
                    void *grad_input, void *grad_weight, void *grad_bias,
                    int64_t rows, int64_t cols, bool rms) {
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    dispatchFloat(w_dtype, [&](auto wtag) {
      using W = MEMOPT_STORAGE(wtag);
      layerNormGradInputKernel<T, W>
          <<<rowGrid(rows), kRowBlock, 0, ctx->stream>>>(
              static_cast<const T *>(grad), static_cast<const T *>(input),
              static_cast<const W *>(weight), mean, rstd,
              static_cast<T *>(grad_input), rows, cols, rms);
      layerNormGradWeightKernel<T, W>
          <<<static_cast<unsigned>((cols + kColTile - 1) / kColTile),
             dim3(kColTile, kColRows), 0, ctx->stream>>>(
              static_cast<const T *>(grad), static_cast<const T *>(input), mean,
              rstd, static_cast<W *>(grad_weight), static_cast<W *>(grad_bias),
              rows, cols, rms);
    });
  });
  checkLaunch(ctx, entry, "layerNormGradKernels");
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
  launchNormGrad(ctx, entry, dtype, grad, input, w_dtype, weight, nullptr,
                 rstd, grad_input, grad_weight, nullptr, rows, cols, true);
}

//===----------------------------------------------------------------------===//
// Batch norm
//===----------------------------------------------------------------------===//

namespace {

template <typename T>
__global__ void batchNormKernel(const T *x, const float *w, const float *b,
                                const float *runMean, const float *runVar,
                                T *y, float *mean, float *rstd, float *newMean,
                                float *newVar, int64_t batch, int64_t channels,
                                int64_t spatial, float eps, double momentum) {
  __shared__ float shared[32];
  int64_t c = blockIdx.x;
  int64_t count = batch * spatial;
  auto at = [&](int64_t i) {
    return ((i / spatial) * channels + c) * spatial + i % spatial;
  };
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    s += toF32(x[at(i)]);
  float mu = blockSum(s, shared) / static_cast<float>(count);
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float d = toF32(x[at(i)]) - mu;
    sq += d * d;
  }
  sq = blockSum(sq, shared);
  float var = sq / static_cast<float>(count);
  float r = rsqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    int64_t k = at(i);
    y[k] = fromF32<T>((toF32(x[k]) - mu) * r * w[c] + b[c]);
  }
  if (threadIdx.x == 0) {
    double unbiased = static_cast<double>(sq) / static_cast<double>(count - 1);
    double oldMean = runMean[c], oldVar = runVar[c];
    mean[c] = mu;
    rstd[c] = r;
    newMean[c] = static_cast<float>((1.0 - momentum) * oldMean + momentum * mu);
    newVar[c] =
        static_cast<float>((1.0 - momentum) * oldVar + momentum * unbiased);
  }
}

template <typename T>
__global__ void batchNormGradKernel(const T *dy, const T *x, const float *w,
                                    const float *mean, const float *rstd,
                                    T *dx, float *dw, float *db, int64_t batch,
                                    int64_t channels, int64_t spatial) {
  __shared__ float shared[32];
  int64_t c = blockIdx.x;
  int64_t count = batch * spatial;
  auto at = [&](int64_t i) {
    return ((i / spatial) * channels + c) * spatial + i % spatial;
  };
  float m = mean[c], r = rstd[c];
  float sumG = 0.0f, sumGX = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    int64_t k = at(i);
    float g = toF32(dy[k]);
    sumG += g;
    sumGX += g * ((toF32(x[k]) - m) * r);
  }
  sumG = blockSum(sumG, shared);
  sumGX = blockSum(sumGX, shared);
  float meanG = count ? sumG / static_cast<float>(count) : 0.0f;
  float meanGX = count ? sumGX / static_cast<float>(count) : 0.0f;
  float scale = w[c] * r;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    int64_t k = at(i);
    float xhat = (toF32(x[k]) - m) * r;
    dx[k] = fromF32<T>(scale * (toF32(dy[k]) - meanG - xhat * meanGX));
  }
  if (threadIdx.x == 0) {
    dw[c] = sumGX;
    db[c] = sumG;
  }
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
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    batchNormKernel<T><<<static_cast<unsigned>(channels), kRowBlock, 0,
                         ctx->stream>>>(
        static_cast<const T *>(input), weight, bias, running_mean, running_var,
        static_cast<T *>(out), mean, rstd, new_running_mean, new_running_var,
        batch, channels, spatial, static_cast<float>(eps), momentum);
  });
  checkLaunch(ctx, entry, "batchNormKernel");
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
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    batchNormGradKernel<T><<<static_cast<unsigned>(channels), kRowBlock, 0,
                             ctx->stream>>>(
        static_cast<const T *>(grad), static_cast<const T *>(input), weight,
        mean, rstd, static_cast<T *>(grad_input), grad_weight, grad_bias,
        batch, channels, spatial);
  });
  checkLaunch(ctx, entry, "batchNormGradKernel");
}
