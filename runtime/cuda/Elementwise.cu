//===- Elementwise.cu - elementwise kernels -------------------------------===//
//
// One grid-stride kernel template per family (unary, binary, scalar,
// activation gradient, clamp), instantiated per storage type with the op as a
// runtime switch, so that the number of instantiations (and nvcc's compile
// time) stays small. Math is f32 as in runtime/host/Elementwise.cpp; results
// are rounded once to the storage type.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "memopt/runtime/ActivationMath.h"

#include <cmath>

using namespace memopt::cuda;

namespace {

template <typename T>
__global__ void unaryKernel(int op, const T *x, T *y, int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = fromF32<T>(unaryValue(static_cast<memopt_unary_op>(op), toF32(x[i])));
}

template <typename T>
__global__ void binaryKernel(int op, const T *a, const T *b, T *y, int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = fromF32<T>(
      binaryValue(static_cast<memopt_binary_op>(op), toF32(a[i]), toF32(b[i])));
}

/// Widens a stored element for a comparison: floats to f32 (exact), indices
/// to int64.
__device__ __forceinline__ int64_t comparable(int32_t v) { return v; }
__device__ __forceinline__ int64_t comparable(int64_t v) { return v; }
template <typename T> __device__ __forceinline__ float comparable(T v) {
  return toF32(v);
}

template <typename T>
__global__ void compareKernel(int op, const T *a, const T *b, uint8_t *y,
                              int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = compareValue(static_cast<memopt_compare_op>(op), comparable(a[i]),
                      comparable(b[i]));
}

template <typename T>
__global__ void scalarKernel(int op, const T *x, float v, T *y, int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = fromF32<T>(
      scalarValue(static_cast<memopt_scalar_op>(op), toF32(x[i]), v));
}

template <typename T>
__global__ void activationGradKernel(int op, const T *v, const T *g, T *y,
                                     int64_t n) {
  GRID_STRIDE(i, n)
  y[i] = fromF32<T>(activationGradValue(
      static_cast<memopt_activation_grad_op>(op), toF32(v[i]), toF32(g[i])));
}

template <typename T>
__global__ void clampKernel(const T *x, float lo, float hi, T *y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = fromF32<T>(clampValue(toF32(x[i]), lo, hi));
}

template <typename T>
__global__ void scaleByKernel(const T *x, const float *factor, T *y,
                              int64_t n) {
  float f = *factor;
  GRID_STRIDE(i, n) y[i] = fromF32<T>(toF32(x[i]) * f);
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
  if (!checkElementwise(ctx, entry, op, kLastUnaryOp, dtype, n,
                        {input, out}) ||
      isEmpty({n}))
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
      isEmpty({n}))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    binaryKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        op, static_cast<const T *>(lhs), static_cast<const T *>(rhs),
        static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "binaryKernel");
}

void memopt_compare(memopt_context *ctx, memopt_compare_op op,
                    memopt_dtype dtype, const void *lhs, const void *rhs,
                    uint8_t *out, int64_t n) {
  const char *entry = "memopt_compare";
  if (!checkElementwise(ctx, entry, op, MEMOPT_COMPARE_GE, dtype, n,
                        {lhs, rhs, out}) ||
      isEmpty({n}))
    return;
  auto launch = [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    compareKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        op, static_cast<const T *>(lhs), static_cast<const T *>(rhs), out, n);
  };
  if (dtype == MEMOPT_I32)
    launch(static_cast<int32_t *>(nullptr));
  else if (dtype == MEMOPT_I64)
    launch(static_cast<int64_t *>(nullptr));
  else
    dispatchFloat(dtype, launch);
  checkLaunch(ctx, entry, "compareKernel");
}

void memopt_scalar(memopt_context *ctx, memopt_scalar_op op, memopt_dtype dtype,
                   const void *input, double value, void *out, int64_t n) {
  const char *entry = "memopt_scalar";
  if (!checkElementwise(ctx, entry, op, MEMOPT_SCALAR_POW, dtype, n,
                        {input, out}) ||
      isEmpty({n}))
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
      isEmpty({n}))
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
      !checkClampBounds(ctx, entry, lo, hi) || isEmpty({n}))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    clampKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<float>(lo),
        static_cast<float>(hi), static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "clampKernel");
}

void memopt_scale_by(memopt_context *ctx, memopt_dtype dtype,
                     const void *input, const float *factor, void *out,
                     int64_t n) {
  const char *entry = "memopt_scale_by";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkPointers(ctx, entry, 1, {factor}) || isEmpty({n}))
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    scaleByKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), factor, static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "scaleByKernel");
}

void memopt_clamp_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const void *grad, double lo,
                       double hi, int inclusive, void *out, int64_t n) {
  const char *entry = "memopt_clamp_grad";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, grad, out}) ||
      !checkClampBounds(ctx, entry, lo, hi) || isEmpty({n}))
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
