//===- Elementwise.cu - elementwise kernels, dropout, optimizers -----------===//
//
// One grid-stride kernel template per family (unary, binary, scalar,
// activation gradient, clamp), instantiated per storage type with the op as a
// runtime switch, so that the number of instantiations (and nvcc's compile
// time) stays small. Math is f32 as in runtime/host/Elementwise.cpp; results
// are rounded once to the storage type.
//
// Dropout draws the exact stream of runtime/host/Random.cpp. The optimizer
// updates and the loss-scale ops read their scalars (step, skip, scale) on
// the device, so that no step waits for the host.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/OptimizerMath.h"

#include <cmath>

using namespace memopt::cuda;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__device__ float applyUnary(int op, float x) {
  switch (op) {
  case MEMOPT_UNARY_NEG:
    return -x;
  case MEMOPT_UNARY_EXP:
    return expf(x);
  case MEMOPT_UNARY_LOG:
    return logf(x);
  case MEMOPT_UNARY_SQRT:
    return sqrtf(x);
  case MEMOPT_UNARY_RSQRT:
    return 1.0f / sqrtf(x);
  case MEMOPT_UNARY_TANH:
    return tanhf(x);
  case MEMOPT_UNARY_SIGMOID:
    return sigmoid(x);
  case MEMOPT_UNARY_RELU:
    return x > 0.0f || isnan(x) ? x : 0.0f;
  case MEMOPT_UNARY_SILU:
    return x * sigmoid(x);
  case MEMOPT_UNARY_GELU:
    return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
  case MEMOPT_UNARY_GELU_TANH:
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCoeff * x * x * x)));
  case MEMOPT_UNARY_HARDSWISH:
    return hardswish(x);
  case MEMOPT_UNARY_HARDSIGMOID:
    return hardsigmoid(x);
  case MEMOPT_UNARY_MISH:
    return mish(x);
  }
  return x;
}

__device__ float applyBinary(int op, float a, float b) {
  switch (op) {
  case MEMOPT_BINARY_ADD:
    return a + b;
  case MEMOPT_BINARY_SUB:
    return a - b;
  case MEMOPT_BINARY_MUL:
    return a * b;
  case MEMOPT_BINARY_DIV:
    return a / b;
  case MEMOPT_BINARY_MAXIMUM:
    if (isnan(a) || isnan(b))
      return NAN;
    return a > b ? a : b;
  }
  return a;
}

__device__ float applyActivationGrad(int op, float v, float g) {
  switch (op) {
  case MEMOPT_GRAD_RELU:
    return v > 0.0f ? g : 0.0f;
  case MEMOPT_GRAD_SILU: {
    float s = sigmoid(v);
    return g * s * (1.0f + v * (1.0f - s));
  }
  case MEMOPT_GRAD_TANH:
    return g * (1.0f - v * v);
  case MEMOPT_GRAD_SIGMOID:
    return g * v * (1.0f - v);
  case MEMOPT_GRAD_GELU: {
    float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    return g * (cdf + v * pdf);
  }
  case MEMOPT_GRAD_GELU_TANH: {
    float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    float t = tanhf(inner);
    float dInner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    return g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dInner);
  }
  case MEMOPT_GRAD_HARDSWISH:
    return hardswishGrad(v, g);
  case MEMOPT_GRAD_HARDSIGMOID:
    return hardsigmoidGrad(v, g);
  case MEMOPT_GRAD_MISH:
    return mishGrad(v, g);
  }
  return g;
}

template <typename T>
__global__ void unaryKernel(int op, const T *x, T *y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = fromF32<T>(applyUnary(op, toF32(x[i])));
}

template <typename T>
__global__ void binaryKernel(int op, const T *a, const T *b, T *y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = fromF32<T>(applyBinary(op, toF32(a[i]), toF32(b[i])));
}

template <typename T>
__global__ void scalarKernel(int op, const T *x, float v, T *y, int64_t n) {
  GRID_STRIDE(i, n) {
    float xi = toF32(x[i]);
    float r = op == MEMOPT_SCALAR_ADD   ? xi + v
              : op == MEMOPT_SCALAR_MUL ? xi * v
                                        : powf(xi, v);
    y[i] = fromF32<T>(r);
  }
}

template <typename T>
__global__ void activationGradKernel(int op, const T *v, const T *g, T *y,
                                     int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = fromF32<T>(applyActivationGrad(op, toF32(v[i]), toF32(g[i])));
}

template <typename T>
__global__ void clampKernel(const T *x, float lo, float hi, T *y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = fromF32<T>(clampValue(toF32(x[i]), lo, hi));
}

template <typename T>
__global__ void clampGradKernel(const T *x, const T *g, float lo, float hi,
                                bool inclusive, T *y, int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = clampPasses(toF32(x[i]), lo, hi, inclusive) ? g[i] : fromF32<T>(0.0f);
}

} // namespace

void memopt_unary(memopt_context *ctx, memopt_unary_op op, memopt_dtype dtype,
                  const void *input, void *out, int64_t n) {
  const char *entry = "memopt_unary";
  if (!checkElementwise(ctx, entry, op, MEMOPT_UNARY_MISH, dtype, n,
                        {input, out}) ||
      n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    unaryKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        op, static_cast<const T *>(input), static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "unaryKernel");
}

void memopt_binary(memopt_context *ctx, memopt_binary_op op, memopt_dtype dtype,
                   const void *lhs, const void *rhs, void *out, int64_t n) {
  const char *entry = "memopt_binary";
  if (!checkElementwise(ctx, entry, op, MEMOPT_BINARY_MAXIMUM, dtype, n,
                        {lhs, rhs, out}) ||
      n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    binaryKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        op, static_cast<const T *>(lhs), static_cast<const T *>(rhs),
        static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "binaryKernel");
}

void memopt_scalar(memopt_context *ctx, memopt_scalar_op op, memopt_dtype dtype,
                   const void *input, double value, void *out, int64_t n) {
  const char *entry = "memopt_scalar";
  if (!checkElementwise(ctx, entry, op, MEMOPT_SCALAR_POW, dtype, n,
                        {input, out}) ||
      n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    scalarKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        op, static_cast<const T *>(input), static_cast<float>(value),
        static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "scalarKernel");
}

void memopt_activation_grad(memopt_context *ctx, memopt_activation_grad_op op,
                            memopt_dtype dtype, const void *x_or_y,
                            const void *grad, void *out, int64_t n) {
  const char *entry = "memopt_activation_grad";
  if (!checkElementwise(ctx, entry, op, MEMOPT_GRAD_MISH, dtype, n,
                        {x_or_y, grad, out}) ||
      n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    activationGradKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        op, static_cast<const T *>(x_or_y), static_cast<const T *>(grad),
        static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "activationGradKernel");
}

void memopt_clamp(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  double lo, double hi, void *out, int64_t n) {
  const char *entry = "memopt_clamp";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkClampBounds(ctx, entry, lo, hi) || n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    clampKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<float>(lo),
        static_cast<float>(hi), static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "clampKernel");
}

void memopt_clamp_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const void *grad, double lo,
                       double hi, int inclusive, void *out, int64_t n) {
  const char *entry = "memopt_clamp_grad";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, grad, out}) ||
      !checkClampBounds(ctx, entry, lo, hi) || n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    clampGradKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<const T *>(grad),
        static_cast<float>(lo), static_cast<float>(hi), inclusive != 0,
        static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "clampGradKernel");
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

void memopt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                          uint32_t result[4]) {
  philox4x32_10(counter[0], counter[1], counter[2], counter[3], key[0], key[1],
                result);
}

namespace {

/// One thread per Philox block of four elements (j = offset + i, block j /
/// 4), as the host draws them.
template <typename T>
__global__ void dropoutKernel(const T *x, T *y, int64_t n, uint32_t threshold,
                              float scale, uint32_t k0, uint32_t k1,
                              uint64_t step, uint64_t offset) {
  uint64_t firstBlock = offset / 4;
  uint64_t lastBlock = (offset + static_cast<uint64_t>(n) - 1) / 4;
  uint64_t numBlocks = lastBlock - firstBlock + 1;
  for (uint64_t b = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
       b < numBlocks; b += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t block = firstBlock + b;
    uint32_t bits[4];
    philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                  static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                  k0, k1, bits);
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t j = block * 4 + lane;
      if (j < offset || j >= offset + static_cast<uint64_t>(n))
        continue;
      int64_t i = static_cast<int64_t>(j - offset);
      bool keep = (bits[lane] >> 8) >= threshold;
      y[i] = fromF32<T>(keep ? toF32(x[i]) * scale : 0.0f);
    }
  }
}

/// Elements sharing a mask bit (stochastic depth, dropout2d): one thread
/// per element draws its group's Philox block.
template <typename T>
__global__ void groupDropoutKernel(const T *x, T *y, int64_t n, int64_t group,
                                   uint32_t threshold, float scale,
                                   uint32_t k0, uint32_t k1, uint64_t step,
                                   uint64_t offset) {
  GRID_STRIDE(i, n) {
    uint64_t j = offset + static_cast<uint64_t>(i / group);
    uint64_t block = j / 4;
    uint32_t bits[4];
    philox4x32_10(static_cast<uint32_t>(block),
                  static_cast<uint32_t>(block >> 32),
                  static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                  k0, k1, bits);
    bool keep = (bits[j % 4] >> 8) >= threshold;
    y[i] = fromF32<T>(keep ? toF32(x[i]) * scale : 0.0f);
  }
}

} // namespace

void memopt_dropout(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t n, int64_t group, double p,
                    uint64_t seed, uint64_t stream, uint64_t offset) {
  const char *entry = "memopt_dropout";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkProbability(ctx, entry, p) || !checkGroup(ctx, entry, n, group) ||
      n == 0)
    return;
  uint64_t mixed = seed ^ (stream * 0x9E3779B97F4A7C15ull);
  uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));
  float scale = static_cast<float>(1.0 / (1.0 - p));
  uint32_t k0 = static_cast<uint32_t>(mixed),
           k1 = static_cast<uint32_t>(mixed >> 32);
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    if (group == 1) {
      uint64_t numBlocks = (offset + n - 1) / 4 - offset / 4 + 1;
      dropoutKernel<T><<<gridFor(static_cast<int64_t>(numBlocks)), kBlock, 0,
                         ctx->stream>>>(
          static_cast<const T *>(input), static_cast<T *>(out), n, threshold,
          scale, k0, k1, ctx->step, offset);
    } else {
      groupDropoutKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          static_cast<const T *>(input), static_cast<T *>(out), n, group,
          threshold, scale, k0, k1, ctx->step, offset);
    }
  });
  checkLaunch(ctx, entry, "dropoutKernel");
}

//===----------------------------------------------------------------------===//
// Optimizer updates and loss scaling
//===----------------------------------------------------------------------===//

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

template <typename T>
__global__ void adamwKernel(const T *param, const T *grad, const T *expAvg,
                            const T *expAvgSq, const int64_t *step,
                            const uint8_t *skip, T *newParam, T *newExpAvg,
                            T *newExpAvgSq, int64_t n, AdamWScalars s,
                            memopt_device_error *error) {
  bool skipped = skip && *skip;
  int64_t t64 = *step;
  if (!skipped && t64 < 1) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      raiseDeviceError(error, MEMOPT_ERROR_INVALID_ARGUMENT, SiteAdamWStep,
                       t64, 0, 0);
    return;
  }
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
      n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    sgdKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(param), static_cast<const T *>(grad),
        static_cast<const T *>(momentum_buffer), skip,
        static_cast<T *>(new_param), static_cast<T *>(new_momentum_buffer), n,
        sgdCoefficients(lr, momentum, weight_decay));
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
      !checkPointers(ctx, entry, 1, {step}) || n == 0)
    return;
  AdamWScalars scalars{lr, beta1, beta2, eps, weight_decay};
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
          scale, static_cast<const T *>(grads[j]),
          static_cast<T *>(results[j]), n, found_inf);
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
