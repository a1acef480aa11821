//===- Norm.cpp - host softmax and normalisation kernels ------------------===//
//
// Softmax and log-softmax (+grads) along the middle extent of
// [outer, dim, inner], and layer, RMS and batch normalisation (+grads).
// Statistics and every sum accumulate in double in a fixed order (laneSum,
// HostRuntime.h), then round to f32 once; per-element arithmetic is f32.
// The formulas themselves are NormMath.h's, shared with the CUDA kernels.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include "memopt/runtime/NormMath.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace memopt::host;
using namespace memopt::runtime;

namespace {

/// Computes softmax (or log-softmax) of each [dim] column with stride
/// `inner`.
void softmaxForward(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t outer, int64_t dim, int64_t inner,
                    bool isLog) {
  int64_t n = outer * dim * inner;
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(outer * inner, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      int64_t o = k / inner, i = k % inner;
      const float *xs = x.get() + o * dim * inner + i;
      float *ys = y.get() + o * dim * inner + i;
      float maxValue = -INFINITY;
      for (int64_t r = 0; r < dim; ++r)
        maxValue = std::fmax(maxValue, xs[r * inner]);
      // A row without a finite maximum gives NaN, as in PyTorch.
      float shift = maxValue;
      double sum = 0.0;
      for (int64_t r = 0; r < dim; ++r)
        sum += softmaxExpTerm<double>(xs[r * inner], shift);
      if (isLog) {
        float logSum = static_cast<float>(std::log(sum));
        for (int64_t r = 0; r < dim; ++r)
          ys[r * inner] = logSoftmaxValue(xs[r * inner], shift, logSum);
      } else {
        float inv = static_cast<float>(1.0 / sum);
        for (int64_t r = 0; r < dim; ++r)
          ys[r * inner] = softmaxValue(xs[r * inner], shift, inv);
      }
    }
  });
  y.commit();
}

void softmaxBackward(memopt_context *ctx, memopt_dtype dtype,
                     const void *output, const void *grad, void *out,
                     int64_t outer, int64_t dim, int64_t inner, bool isLog) {
  int64_t n = outer * dim * inner;
  F32Input y(ctx, dtype, output, n);
  F32Input g(ctx, dtype, grad, n);
  F32Output dx(ctx, dtype, out, n);
  parallelFor(outer * inner, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / inner, i = item % inner;
      int64_t base = o * dim * inner + i;
      double sum = 0.0;
      for (int64_t r = 0; r < dim; ++r) {
        int64_t k = base + r * inner;
        sum += softmaxGradTerm<double>(y[k], g[k], isLog);
      }
      float s = static_cast<float>(sum);
      for (int64_t r = 0; r < dim; ++r) {
        int64_t k = base + r * inner;
        dx[k] = softmaxGradValue(y[k], g[k], s, isLog);
      }
    }
  });
  dx.commit();
}

/// Layer norm of one row: out = (x - mean) * rstd * w + b.
void layerNormRow(const float *xs, const float *w, const float *b, float *ys,
                  int64_t cols, double eps, float &mean, float &rstd) {
  double mu = laneSum(cols, [&](int64_t j) { return double(xs[j]); }) /
              static_cast<double>(cols);
  double sq =
      laneSum(cols, [&](int64_t j) { return squaredDeviation(xs[j], mu); });
  double var = sq / static_cast<double>(cols);
  float m = static_cast<float>(mu);
  float s = static_cast<float>(reciprocalStd(var, eps));
  for (int64_t j = 0; j < cols; ++j)
    ys[j] = affineNormValue(xs[j], m, s, w[j], b[j]);
  mean = m;
  rstd = s;
}

} // namespace

void memopt_softmax(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t outer, int64_t dim, int64_t inner) {
  if (checkFloatTensors(ctx, "memopt_softmax", dtype, {outer, dim, inner},
                        {input, out}))
    softmaxForward(ctx, dtype, input, out, outer, dim, inner, false);
}

void memopt_log_softmax(memopt_context *ctx, memopt_dtype dtype,
                        const void *input, void *out, int64_t outer,
                        int64_t dim, int64_t inner) {
  if (checkFloatTensors(ctx, "memopt_log_softmax", dtype, {outer, dim, inner},
                        {input, out}))
    softmaxForward(ctx, dtype, input, out, outer, dim, inner, true);
}

void memopt_softmax_grad(memopt_context *ctx, memopt_dtype dtype,
                         const void *output, const void *grad, void *out,
                         int64_t outer, int64_t dim, int64_t inner) {
  if (checkFloatTensors(ctx, "memopt_softmax_grad", dtype, {outer, dim, inner},
                        {output, grad, out}))
    softmaxBackward(ctx, dtype, output, grad, out, outer, dim, inner, false);
}

void memopt_log_softmax_grad(memopt_context *ctx, memopt_dtype dtype,
                             const void *output, const void *grad, void *out,
                             int64_t outer, int64_t dim, int64_t inner) {
  if (checkFloatTensors(ctx, "memopt_log_softmax_grad", dtype,
                        {outer, dim, inner}, {output, grad, out}))
    softmaxBackward(ctx, dtype, output, grad, out, outer, dim, inner, true);
}

//===----------------------------------------------------------------------===//
// Layer and RMS normalisation
//===----------------------------------------------------------------------===//

void memopt_layer_norm(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, memopt_dtype w_dtype,
                       const void *weight, const void *bias, void *out,
                       float *mean, float *rstd, int64_t rows, int64_t cols,
                       double eps) {
  const char *entry = "memopt_layer_norm";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols, {input, out},
                 {mean, rstd}, {weight, bias}))
    return;
  F32Input x(ctx, dtype, input, rows * cols);
  F32Input w(ctx, w_dtype, weight, cols);
  F32Input b(ctx, w_dtype, bias, cols);
  F32Output y(ctx, dtype, out, rows * cols);
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      layerNormRow(x.get() + r * cols, w.get(), b.get(), y.get() + r * cols,
                   cols, eps, mean[r], rstd[r]);
  });
  y.commit();
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
                 {weight, grad_weight, grad_bias}))
    return;
  int64_t n = rows * cols;
  F32Input dy(ctx, dtype, grad, n);
  F32Input x(ctx, dtype, input, n);
  F32Input w(ctx, w_dtype, weight, cols);
  F32Output dx(ctx, dtype, grad_input, n);
  // The parameter gradients column by column, each summed over the rows in
  // order, then the input gradient row by row (it may overwrite `grad`).
  std::vector<float> dwF(static_cast<size_t>(cols));
  std::vector<float> dbF(static_cast<size_t>(cols));
  parallelFor(cols, rowGrain(rows), [&](int64_t first, int64_t last) {
    std::vector<double> dw(static_cast<size_t>(last - first), 0.0);
    std::vector<double> db(static_cast<size_t>(last - first), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *dys = dy.get() + r * cols;
      const float *xs = x.get() + r * cols;
      float m = mean[r], s = rstd[r];
      for (int64_t j = first; j < last; ++j) {
        dw[j - first] += layerNormWeightGradTerm<double>(dys[j], xs[j], m, s);
        db[j - first] += dys[j];
      }
    }
    std::copy(dw.begin(), dw.end(), dwF.begin() + first);
    std::copy(db.begin(), db.end(), dbF.begin() + first);
  });
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *dys = dy.get() + r * cols;
      const float *xs = x.get() + r * cols;
      float m = mean[r], s = rstd[r];
      double sumG = laneSum(cols, [&](int64_t j) {
        return layerNormGradTermG<double>(dys[j], w[j]);
      });
      double sumGX = laneSum(cols, [&](int64_t j) {
        return layerNormGradTermGX<double>(dys[j], w[j], xs[j], m, s);
      });
      float meanG = static_cast<float>(sumG / static_cast<double>(cols));
      float meanGX = static_cast<float>(sumGX / static_cast<double>(cols));
      float *dxs = dx.get() + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        dxs[j] = layerNormGradValue(dys[j], w[j], xs[j], m, s, meanG, meanGX);
    }
  });
  dx.commit();
  storeF32(w_dtype, dwF.data(), grad_weight, cols);
  storeF32(w_dtype, dbF.data(), grad_bias, cols);
}

void memopt_rms_norm(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     memopt_dtype w_dtype, const void *weight, void *out,
                     float *rstd, int64_t rows, int64_t cols, double eps) {
  const char *entry = "memopt_rms_norm";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols, {input, out}, {rstd},
                 {weight}))
    return;
  F32Input x(ctx, dtype, input, rows * cols);
  F32Input w(ctx, w_dtype, weight, cols);
  F32Output y(ctx, dtype, out, rows * cols);
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xs = x.get() + r * cols;
      double sq =
          laneSum(cols, [&](int64_t j) { return squareTerm<double>(xs[j]); });
      float s = static_cast<float>(
          reciprocalStd(sq / static_cast<double>(cols), eps));
      float *ys = y.get() + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        ys[j] = rmsNormValue(xs[j], s, w[j]);
      rstd[r] = s;
    }
  });
  y.commit();
}

void memopt_rms_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *grad, const void *input,
                          memopt_dtype w_dtype, const void *weight,
                          const float *rstd, void *grad_input,
                          void *grad_weight, int64_t rows, int64_t cols) {
  const char *entry = "memopt_rms_norm_grad";
  if (!checkNorm(ctx, entry, dtype, w_dtype, rows, cols,
                 {grad, input, grad_input}, {rstd}, {weight, grad_weight}))
    return;
  int64_t n = rows * cols;
  F32Input dy(ctx, dtype, grad, n);
  F32Input x(ctx, dtype, input, n);
  F32Input w(ctx, w_dtype, weight, cols);
  F32Output dx(ctx, dtype, grad_input, n);
  // The weight gradient first: the input gradient may overwrite `grad`.
  std::vector<float> dwF(static_cast<size_t>(cols));
  parallelFor(cols, rowGrain(rows), [&](int64_t first, int64_t last) {
    std::vector<double> dw(static_cast<size_t>(last - first), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *dys = dy.get() + r * cols;
      const float *xs = x.get() + r * cols;
      float s = rstd[r];
      for (int64_t j = first; j < last; ++j)
        dw[j - first] += rmsNormWeightGradTerm<double>(dys[j], xs[j], s);
    }
    std::copy(dw.begin(), dw.end(), dwF.begin() + first);
  });
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *dys = dy.get() + r * cols;
      const float *xs = x.get() + r * cols;
      float s = rstd[r];
      double sumGX = laneSum(cols, [&](int64_t j) {
        return rmsNormGradTerm<double>(dys[j], w[j], xs[j]);
      });
      float c = rmsNormGradCoupling(sumGX, cols, s);
      float *dxs = dx.get() + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        dxs[j] = rmsNormGradValue(dys[j], w[j], xs[j], s, c);
    }
  });
  dx.commit();
  storeF32(w_dtype, dwF.data(), grad_weight, cols);
}

//===----------------------------------------------------------------------===//
// Batch normalisation
//===----------------------------------------------------------------------===//

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
  int64_t count = batch * spatial, n = batch * channels * spatial;
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(channels, rowGrain(count), [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      double sum = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        const float *xs = x.get() + (b * channels + c) * spatial;
        sum += laneSum(spatial, [&](int64_t s) { return double(xs[s]); });
      }
      double mu = sum / static_cast<double>(count);
      double sq = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        const float *xs = x.get() + (b * channels + c) * spatial;
        sq += laneSum(spatial,
                      [&](int64_t s) { return squaredDeviation(xs[s], mu); });
      }
      double var = sq / static_cast<double>(count);
      float m = static_cast<float>(mu);
      float r = static_cast<float>(reciprocalStd(var, eps));
      for (int64_t b = 0; b < batch; ++b) {
        const float *xs = x.get() + (b * channels + c) * spatial;
        float *ys = y.get() + (b * channels + c) * spatial;
        for (int64_t s = 0; s < spatial; ++s)
          ys[s] = affineNormValue(xs[s], m, r, weight[c], bias[c]);
      }
      double unbiased = sq / static_cast<double>(count - 1);
      double oldMean = running_mean[c], oldVar = running_var[c];
      mean[c] = m;
      rstd[c] = r;
      new_running_mean[c] = runningStatistic(oldMean, mu, momentum);
      new_running_var[c] = runningStatistic(oldVar, unbiased, momentum);
    }
  });
  y.commit();
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
  int64_t n = batch * channels * spatial, count = batch * spatial;
  F32Input dy(ctx, dtype, grad, n);
  F32Input x(ctx, dtype, input, n);
  F32Output dx(ctx, dtype, grad_input, n);
  parallelFor(channels, rowGrain(count), [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      float m = mean[c], r = rstd[c];
      double sumG = 0.0, sumGX = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        const float *dys = dy.get() + (b * channels + c) * spatial;
        const float *xs = x.get() + (b * channels + c) * spatial;
        sumG += laneSum(spatial, [&](int64_t s) { return double(dys[s]); });
        sumGX += laneSum(spatial, [&](int64_t s) {
          return layerNormWeightGradTerm<double>(dys[s], xs[s], m, r);
        });
      }
      float meanG = count ? static_cast<float>(sumG / count) : 0.0f;
      float meanGX = count ? static_cast<float>(sumGX / count) : 0.0f;
      float scale = weight[c] * r;
      for (int64_t b = 0; b < batch; ++b) {
        int64_t base = (b * channels + c) * spatial;
        for (int64_t s = 0; s < spatial; ++s)
          dx[base + s] = batchNormGradValue(dy[base + s], x[base + s], m, r,
                                            scale, meanG, meanGX);
      }
      grad_weight[c] = static_cast<float>(sumGX);
      grad_bias[c] = static_cast<float>(sumG);
    }
  });
  dx.commit();
}
