//===- Elementwise.cpp - host elementwise kernels -------------------------===//
//
// Unary, binary and scalar arithmetic, activation gradients and clamp.
// Every kernel stages f16/bf16 operands in f32, computes in f32 and rounds
// once into the output dtype.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"
#include "memopt/runtime/ActivationMath.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace memopt::host;
using namespace memopt::runtime;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

inline float applyUnary(memopt_unary_op op, float x) {
  switch (op) {
  case MEMOPT_UNARY_NEG:
    return -x;
  case MEMOPT_UNARY_EXP:
    return std::exp(x);
  case MEMOPT_UNARY_LOG:
    return std::log(x);
  case MEMOPT_UNARY_SQRT:
    return std::sqrt(x);
  case MEMOPT_UNARY_RSQRT:
    return 1.0f / std::sqrt(x);
  case MEMOPT_UNARY_TANH:
    return std::tanh(x);
  case MEMOPT_UNARY_SIGMOID:
    return sigmoid(x);
  case MEMOPT_UNARY_RELU:
    // NaN propagates, as torch.relu.
    return x > 0.0f || std::isnan(x) ? x : 0.0f;
  case MEMOPT_UNARY_SILU:
    return x * sigmoid(x);
  case MEMOPT_UNARY_GELU:
    return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  case MEMOPT_UNARY_GELU_TANH:
    return 0.5f * x *
           (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCoeff * x * x * x)));
  case MEMOPT_UNARY_HARDSWISH:
    return hardswish(x);
  case MEMOPT_UNARY_HARDSIGMOID:
    return hardsigmoid(x);
  case MEMOPT_UNARY_MISH:
    return mish(x);
  }
  return x;
}

inline float applyBinary(memopt_binary_op op, float a, float b) {
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
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<float>::quiet_NaN();
    return a > b ? a : b;
  }
  return a;
}

inline float applyActivationGrad(memopt_activation_grad_op op, float v,
                                 float g) {
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
    float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    return g * (cdf + v * pdf);
  }
  case MEMOPT_GRAD_GELU_TANH: {
    float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    float t = std::tanh(inner);
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

/// Calls body(std::integral_constant<int, op>{}) for op in [K, Count): one
/// loop per op with the op a constant, so that the compiler folds its switch
/// and vectorizes what it can.
template <int K, int Count, typename Body>
void withConstantOp(int op, Body &&body) {
  if constexpr (K < Count) {
    if (op == K)
      body(std::integral_constant<int, K>{});
    else
      withConstantOp<K + 1, Count>(op, body);
  }
}

} // namespace

void memopt_unary(memopt_context *ctx, memopt_unary_op op, memopt_dtype dtype,
                  const void *input, void *out, int64_t n) {
  const char *entry = "memopt_unary";
  if (!checkElementwise(ctx, entry, op, MEMOPT_UNARY_MISH, dtype, n,
                        {input, out}))
    return;
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  withConstantOp<0, MEMOPT_UNARY_MISH + 1>(op, [&](auto k) {
    constexpr auto kOp = static_cast<memopt_unary_op>(decltype(k)::value);
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = applyUnary(kOp, x[i]);
    });
  });
  y.commit();
}

void memopt_binary(memopt_context *ctx, memopt_binary_op op, memopt_dtype dtype,
                   const void *lhs, const void *rhs, void *out, int64_t n) {
  const char *entry = "memopt_binary";
  if (!checkElementwise(ctx, entry, op, MEMOPT_BINARY_MAXIMUM, dtype, n,
                        {lhs, rhs, out}))
    return;
  F32Input a(ctx, dtype, lhs, n);
  F32Input b(ctx, dtype, rhs, n);
  F32Output y(ctx, dtype, out, n);
  withConstantOp<0, MEMOPT_BINARY_MAXIMUM + 1>(op, [&](auto k) {
    constexpr auto kOp = static_cast<memopt_binary_op>(decltype(k)::value);
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = applyBinary(kOp, a[i], b[i]);
    });
  });
  y.commit();
}

void memopt_scalar(memopt_context *ctx, memopt_scalar_op op, memopt_dtype dtype,
                   const void *input, double value, void *out, int64_t n) {
  const char *entry = "memopt_scalar";
  if (!checkElementwise(ctx, entry, op, MEMOPT_SCALAR_POW, dtype, n,
                        {input, out}))
    return;
  float v = static_cast<float>(value);
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      switch (op) {
      case MEMOPT_SCALAR_ADD:
        y[i] = x[i] + v;
        break;
      case MEMOPT_SCALAR_MUL:
        y[i] = x[i] * v;
        break;
      case MEMOPT_SCALAR_POW:
        y[i] = std::pow(x[i], v);
        break;
      }
    }
  });
  y.commit();
}

void memopt_activation_grad(memopt_context *ctx, memopt_activation_grad_op op,
                            memopt_dtype dtype, const void *x_or_y,
                            const void *grad, void *out, int64_t n) {
  const char *entry = "memopt_activation_grad";
  if (!checkElementwise(ctx, entry, op, MEMOPT_GRAD_MISH, dtype, n,
                        {x_or_y, grad, out}))
    return;
  F32Input v(ctx, dtype, x_or_y, n);
  F32Input g(ctx, dtype, grad, n);
  F32Output y(ctx, dtype, out, n);
  withConstantOp<0, MEMOPT_GRAD_MISH + 1>(op, [&](auto k) {
    constexpr auto kOp =
        static_cast<memopt_activation_grad_op>(decltype(k)::value);
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = applyActivationGrad(kOp, v[i], g[i]);
    });
  });
  y.commit();
}

void memopt_clamp(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  double lo, double hi, void *out, int64_t n) {
  const char *entry = "memopt_clamp";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkClampBounds(ctx, entry, lo, hi))
    return;
  float l = static_cast<float>(lo), h = static_cast<float>(hi);
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = clampValue(x[i], l, h);
  });
  y.commit();
}

void memopt_clamp_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const void *grad, double lo,
                       double hi, int inclusive, void *out, int64_t n) {
  const char *entry = "memopt_clamp_grad";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, grad, out}) ||
      !checkClampBounds(ctx, entry, lo, hi))
    return;
  float l = static_cast<float>(lo), h = static_cast<float>(hi);
  F32Input x(ctx, dtype, input, n);
  F32Input g(ctx, dtype, grad, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = clampPasses(x[i], l, h, inclusive != 0) ? g[i] : 0.0f;
  });
  y.commit();
}
