//===- Optimizer.cu - optimizer updates and loss scaling ------------------===//
//
// The updates' formulas are runtime/common's OptimizerMath.h, as on the
// host. The updates and the loss-scale ops read their scalars (step, skip,
// scale) on the device, so that no step waits for the host.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "memopt/runtime/OptimizerMath.h"
#include "memopt/runtime/QuantizeMath.h"

using namespace memopt::cuda;

namespace {

template <typename T>
__global__ void sgdKernel(const T *param, const T *grad, const T *buf,
                          const uint8_t *skip, T *newParam, T *newBuf,
                          int64_t n, SgdCoefficients c) {
  bool skipped = skip && *skip;
  GRID_STRIDE(i, n) {
    if (skipped) {
      newParam[i] = param[i];
      newBuf[i] = buf[i];
      continue;
    }
    float b = toF32(buf[i]);
    newParam[i] = fromF32<T>(sgdElement(c, toF32(param[i]), toF32(grad[i]), b));
    newBuf[i] = fromF32<T>(b);
  }
}

struct AdamWScalars {
  double lr, beta1, beta2, eps, weightDecay;
};

/// Whether an AdamW update may run at step `t64`: a skipped one always; else
/// a 1-based count, the error recorded once (under `site`) otherwise.
__device__ bool isUpdateCount(bool skipped, int64_t t64, int site,
                              memopt_device_error *error) {
  if (skipped || t64 >= 1)
    return true;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    raiseDeviceError(error, MEMOPT_ERROR_INVALID_ARGUMENT, site, t64, 0, 0);
  return false;
}

template <typename T>
__global__ void adamwKernel(const T *param, const T *grad, const T *expAvg,
                            const T *expAvgSq, const int64_t *step,
                            const uint8_t *skip, T *newParam, T *newExpAvg,
                            T *newExpAvgSq, int64_t n, AdamWScalars s,
                            memopt_device_error *error) {
  bool skipped = skip && *skip;
  int64_t t64 = *step;
  if (!isUpdateCount(skipped, t64, SiteAdamWStep, error))
    return;
  AdamWCoefficients c =
      adamwCoefficients(s.lr, s.beta1, s.beta2, s.eps, s.weightDecay, t64);
  GRID_STRIDE(i, n) {
    if (skipped) {
      newParam[i] = param[i];
      newExpAvg[i] = expAvg[i];
      newExpAvgSq[i] = expAvgSq[i];
      continue;
    }
    float mi = toF32(expAvg[i]), vi = toF32(expAvgSq[i]);
    float pi = adamwElement(c, toF32(param[i]), toF32(grad[i]), mi, vi);
    newExpAvg[i] = fromF32<T>(mi);
    newExpAvgSq[i] = fromF32<T>(vi);
    newParam[i] = fromF32<T>(pi);
  }
}

__constant__ float kSignedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
__constant__ float kUnsignedCode[256] = MEMOPT_DYNAMIC_UNSIGNED_CODE;

/// One thread block per block of kQuantBlock elements, one thread per
/// element: the host's adamw8bitBlock with the absmaxes reduced in shared
/// memory (a max, so the order does not matter: the same bits).
__global__ void adamw8bitKernel(const float *param, const float *grad,
                                const uint8_t *expAvg,
                                const uint8_t *expAvgSq, const int64_t *step,
                                const uint8_t *skip, float *newParam,
                                uint8_t *newExpAvg, uint8_t *newExpAvgSq,
                                int64_t n, AdamWScalars s,
                                memopt_device_error *error) {
  __shared__ float mMax[kQuantBlock], vMax[kQuantBlock];
  bool skipped = skip && *skip;
  int64_t t64 = *step;
  if (!isUpdateCount(skipped, t64, SiteAdamW8bitStep, error))
    return;
  int64_t block = blockIdx.x, j = threadIdx.x, i = block * kQuantBlock + j;
  const uint8_t *mCodes = quantizedCodes(expAvg, block);
  const uint8_t *vCodes = quantizedCodes(expAvgSq, block);
  uint8_t *newMCodes = quantizedCodes(newExpAvg, block);
  uint8_t *newVCodes = quantizedCodes(newExpAvgSq, block);
  float mAbsmax = *quantizedAbsmax(expAvg, block);
  float vAbsmax = *quantizedAbsmax(expAvgSq, block);
  bool inside = i < n;
  if (skipped) {
    if (inside)
      newParam[i] = param[i];
    newMCodes[j] = mCodes[j];
    newVCodes[j] = vCodes[j];
    if (j == 0) {
      *quantizedAbsmax(newExpAvg, block) = mAbsmax;
      *quantizedAbsmax(newExpAvgSq, block) = vAbsmax;
    }
    return;
  }
  AdamWCoefficients c =
      adamwCoefficients(s.lr, s.beta1, s.beta2, s.eps, s.weightDecay, t64);
  float m = 0.0f, v = 0.0f;
  if (inside) {
    m = kSignedCode[mCodes[j]] * mAbsmax;
    v = kUnsignedCode[vCodes[j]] * vAbsmax;
    newParam[i] = adamwElement(c, param[i], grad[i], m, v);
  }
  mMax[threadIdx.x] = inside ? fabsf(m) : 0.0f;
  vMax[threadIdx.x] = inside ? fabsf(v) : 0.0f;
  __syncthreads();
  for (int stride = kQuantBlock / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      mMax[threadIdx.x] = fmaxf(mMax[threadIdx.x], mMax[threadIdx.x + stride]);
      vMax[threadIdx.x] = fmaxf(vMax[threadIdx.x], vMax[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  float mTop = mMax[0], vTop = vMax[0];
  // Past n (m = v = 0): the code of 0, as on the host.
  newMCodes[j] =
      nearestCode(kSignedCode, m * (mTop > 0.0f ? 1.0f / mTop : 0.0f));
  newVCodes[j] =
      nearestCode(kUnsignedCode, v * (vTop > 0.0f ? 1.0f / vTop : 0.0f));
  if (j == 0) {
    *quantizedAbsmax(newExpAvg, block) = mTop;
    *quantizedAbsmax(newExpAvgSq, block) = vTop;
  }
}

__global__ void incrementKernel(const int64_t *step, const uint8_t *skip,
                                int64_t *out) {
  *out = (skip && *skip) ? *step : *step + 1;
}

__global__ void scaleLossKernel(const float *loss, const float *scale,
                                float *out) {
  *out = *loss * *scale;
}

__global__ void clearFlagKernel(uint8_t *flag) { *flag = 0; }

template <typename T>
__global__ void unscaleKernel(const float *scale, const T *grad, T *out,
                              int64_t n, uint8_t *foundInf) {
  float inv = static_cast<float>(1.0 / static_cast<double>(*scale));
  bool nonFinite = false;
  GRID_STRIDE(i, n) {
    float v = toF32(grad[i]);
    if (!isfinite(v))
      nonFinite = true;
    out[i] = fromF32<T>(v * inv);
  }
  // Every writer stores the same value: the race is benign.
  if (nonFinite)
    *foundInf = 1;
}

__global__ void updateScaleKernel(const float *scale, const int64_t *tracker,
                                  const uint8_t *foundInf, float *newScale,
                                  int64_t *newTracker, double growth,
                                  double backoff, int64_t interval) {
  int64_t count = *tracker;
  *newScale =
      updatedScale(*scale, count, *foundInf != 0, growth, backoff, interval);
  *newTracker = count;
}

} // namespace

void memopt_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                       const void *param, const void *grad,
                       const void *momentum_buffer, const uint8_t *skip,
                       void *new_param, void *new_momentum_buffer, int64_t n,
                       double lr, double momentum, double weight_decay) {
  const char *entry = "memopt_sgd_update";
  if (!checkFloatTensors(
          ctx, entry, dtype, {n},
          {param, grad, momentum_buffer, new_param, new_momentum_buffer}) ||
      isEmpty({n}))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    sgdKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(param), static_cast<const T *>(grad),
        static_cast<const T *>(momentum_buffer), skip,
        static_cast<T *>(new_param), static_cast<T *>(new_momentum_buffer), n,
        sgdCoefficients(lr * ctx->lrScale, momentum, weight_decay));
  });
  checkLaunch(ctx, entry, "sgdKernel");
}

void memopt_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                         const void *param, const void *grad,
                         const void *exp_avg, const void *exp_avg_sq,
                         const int64_t *step, const uint8_t *skip,
                         void *new_param, void *new_exp_avg,
                         void *new_exp_avg_sq, int64_t n, double lr,
                         double beta1, double beta2, double eps,
                         double weight_decay) {
  const char *entry = "memopt_adamw_update";
  if (!checkFloatTensors(ctx, entry, dtype, {n},
                         {param, grad, exp_avg, exp_avg_sq, new_param,
                          new_exp_avg, new_exp_avg_sq}) ||
      !checkPointers(ctx, entry, 1, {step}) || isEmpty({n}))
    return;
  AdamWScalars scalars{lr * ctx->lrScale, beta1, beta2, eps, weight_decay};
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    adamwKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(param), static_cast<const T *>(grad),
        static_cast<const T *>(exp_avg), static_cast<const T *>(exp_avg_sq),
        step, skip, static_cast<T *>(new_param), static_cast<T *>(new_exp_avg),
        static_cast<T *>(new_exp_avg_sq), n, scalars, ctx->deviceError);
  });
  checkLaunch(ctx, entry, "adamwKernel");
}

void memopt_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                             const void *param, const void *grad,
                             const void *exp_avg, const void *exp_avg_sq,
                             const int64_t *step, const uint8_t *skip,
                             void *new_param, void *new_exp_avg,
                             void *new_exp_avg_sq, int64_t n, double lr,
                             double beta1, double beta2, double eps,
                             double weight_decay) {
  const char *entry = "memopt_adamw8bit_update";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {param, grad, new_param}) ||
      !checkPointers(ctx, entry, 1,
                     {exp_avg, exp_avg_sq, new_exp_avg, new_exp_avg_sq,
                      step}) ||
      isEmpty({n}))
    return;
  AdamWScalars scalars{lr * ctx->lrScale, beta1, beta2, eps, weight_decay};
  adamw8bitKernel<<<static_cast<unsigned>(quantizedBlocks(n)), kQuantBlock, 0,
                    ctx->stream>>>(
      static_cast<const float *>(param), static_cast<const float *>(grad),
      static_cast<const uint8_t *>(exp_avg),
      static_cast<const uint8_t *>(exp_avg_sq), step, skip,
      static_cast<float *>(new_param), static_cast<uint8_t *>(new_exp_avg),
      static_cast<uint8_t *>(new_exp_avg_sq), n, scalars, ctx->deviceError);
  checkLaunch(ctx, entry, "adamw8bitKernel");
}

void memopt_increment(memopt_context *ctx, const int64_t *step,
                      const uint8_t *skip, int64_t *out) {
  const char *entry = "memopt_increment";
  if (!checkPointers(ctx, entry, 1, {step, out}))
    return;
  incrementKernel<<<1, 1, 0, ctx->stream>>>(step, skip, out);
  checkLaunch(ctx, entry, "incrementKernel");
}

void memopt_scale_loss(memopt_context *ctx, const float *loss,
                       const float *scale, float *out) {
  const char *entry = "memopt_scale_loss";
  if (!checkPointers(ctx, entry, 1, {loss, scale, out}))
    return;
  scaleLossKernel<<<1, 1, 0, ctx->stream>>>(loss, scale, out);
  checkLaunch(ctx, entry, "scaleLossKernel");
}

void memopt_unscale(memopt_context *ctx, const float *scale,
                    int64_t num_tensors, const memopt_dtype *dtypes,
                    const void *const *grads, void *const *results,
                    const int64_t *sizes, uint8_t *found_inf) {
  const char *entry = "memopt_unscale";
  if (!checkUnscale(ctx, entry, scale, num_tensors, dtypes, grads, results,
                    sizes, found_inf))
    return;
  clearFlagKernel<<<1, 1, 0, ctx->stream>>>(found_inf);
  if (!checkLaunch(ctx, entry, "clearFlagKernel"))
    return;
  for (int64_t j = 0; j < num_tensors; ++j) {
    int64_t n = sizes[j];
    if (n == 0)
      continue;
    dispatchFloat(dtypes[j], [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      unscaleKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          scale, static_cast<const T *>(grads[j]), static_cast<T *>(results[j]),
          n, found_inf);
    });
    if (!checkLaunch(ctx, entry, "unscaleKernel"))
      return;
  }
}

void memopt_update_scale(memopt_context *ctx, const float *scale,
                         const int64_t *growth_tracker,
                         const uint8_t *found_inf, float *new_scale,
                         int64_t *new_growth_tracker, double growth_factor,
                         double backoff_factor, int64_t growth_interval) {
  const char *entry = "memopt_update_scale";
  if (!checkUpdateScale(
          ctx, entry,
          {scale, growth_tracker, found_inf, new_scale, new_growth_tracker},
          growth_interval))
    return;
  updateScaleKernel<<<1, 1, 0, ctx->stream>>>(
      scale, growth_tracker, found_inf, new_scale, new_growth_tracker,
      growth_factor, backoff_factor, growth_interval);
  checkLaunch(ctx, entry, "updateScaleKernel");
}
