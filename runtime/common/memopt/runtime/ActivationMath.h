//===- ActivationMath.h - the elementwise formulas -------------*- C++ -*-===//
//
// The per-element formulas of memopt_unary, memopt_binary, memopt_scalar
// and memopt_activation_grad (unaryValue, binaryValue, scalarValue,
// activationGradValue), and
// the hard activations, mish and clamp with their gradients, in the order of
// operations of PyTorch 1.13's CPU kernels
// (aten/src/ATen/native/cpu/Activation.cpp, UnaryOpsKernel.cpp) and with
// their NaN behaviour, which differs between the ops: a NaN input gets a
// NaN forward value everywhere, while the gradient at NaN is `grad` for
// hardswish and the exclusive clamp (hardtanh, relu6) and 0 for hardsigmoid
// and the inclusive clamp (torch.clamp). Written once for the host loops
// (runtime/host/Elementwise.cpp) and the CUDA kernels
// (runtime/cuda/Elementwise.cu), f32 in and out.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_ACTIVATIONMATH_H
#define MEMOPT_RUNTIME_ACTIVATIONMATH_H

#include "memopt/runtime.h"
#include "memopt/runtime/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace memopt {
namespace runtime {

/// e^y in double for |y| <= 700, within 1e-11 of it relatively, from
/// arithmetic alone (no libm call), so that a host loop of it vectorizes:
/// e^y = 2^n e^r with n = round(y / ln 2) and |r| <= ln(2) / 2. Adding
/// 1.5 2^52 rounds y / ln 2 to an integer whose low bits are n, and 2^n is
/// built from them; e^r is its Taylor polynomial of degree 9.
inline double expArithmetic(double y) {
  constexpr double kRoundShift = 0x1.8p52;
  double shifted = y * 0x1.71547652b82fep0 + kRoundShift;
  double n = shifted - kRoundShift;
  double r = y - n * 0x1.62e42fefa39efp-1;
  double p = 1.0 / 362880;
  for (double c : {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24,
                   1.0 / 6, 0.5, 1.0, 1.0})
    p = p * r + c;
  uint64_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  bits = (bits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

/// e^x of an f32: CUDA's expf on a device; on the host expArithmetic
/// rounded once, within half an ulp plus 1e-11 of the value (glibc's expf:
/// 0.502 ulp), and a loop of it vectorizes.
MEMOPT_HOST_DEVICE inline float expf32(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  // e^x rounds to 0 in f32 below -110 and overflows above 89; NaN fails
  // both comparisons and propagates.
  double y = x < -110.0f ? -110.0 : x > 89.0f ? 89.0 : x;
  return static_cast<float>(expArithmetic(y));
#endif
}

/// tanh of an f32: CUDA's tanhf on a device; on the host computed in double
/// from expArithmetic and rounded once, within 0.5003 ulp of the exact value
/// over every f32 (glibc's tanhf: 2.19 ulp), and a loop of it vectorizes.
MEMOPT_HOST_DEVICE inline float tanhf32(float x) {
#ifdef __CUDA_ARCH__
  return tanhf(x);
#else
  // tanh(10) rounds to 1 in f32; NaN fails the comparison and propagates.
  double a = std::fabs(static_cast<double>(x));
  a = a > 10.0 ? 10.0 : a;
  double e = expArithmetic(2.0 * a);
  // (e - 1) / (e + 1) loses e's relative precision in e - 1 near 0, where
  // a - a^3 / 3 is tanh a to f32 precision instead.
  double t = a < 0x1p-10 ? a * (1.0 - a * a * (1.0 / 3)) : (e - 1.0) / (e + 1.0);
  return std::copysign(static_cast<float>(t), x);
#endif
}

/// min(max(x, lo), hi); NaN stays NaN (torch.clamp).
MEMOPT_HOST_DEVICE inline float clampValue(float x, float lo, float hi) {
  return x < lo ? lo : x > hi ? hi : x;
}

/// Whether the gradient of a clamp to [lo, hi] passes at `x`. Inclusive
/// (torch.clamp's backward): lo <= x <= hi, false at NaN. Exclusive
/// (hardtanh_backward): not x <= lo and not x >= hi, true at NaN. An
/// infinite bound is a missing one and excludes nothing.
MEMOPT_HOST_DEVICE inline bool clampPasses(float x, float lo, float hi,
                                           bool inclusive) {
  if (inclusive)
    return x >= lo && x <= hi;
  bool belowLo = lo != -INFINITY && x <= lo;
  bool aboveHi = hi != INFINITY && x >= hi;
  return !belowLo && !aboveHi;
}

/// min(max(x + 3, 0), 6), NaN propagating.
MEMOPT_HOST_DEVICE inline float relu6Shifted(float x) {
  return clampValue(x + 3.0f, 0.0f, 6.0f);
}

/// x * min(max(x + 3, 0), 6) / 6.
MEMOPT_HOST_DEVICE inline float hardswish(float x) {
  return x * relu6Shifted(x) / 6.0f;
}

/// min(max(x + 3, 0), 6) / 6.
MEMOPT_HOST_DEVICE inline float hardsigmoid(float x) {
  return relu6Shifted(x) / 6.0f;
}

/// hardswish_backward: 0 below -3, grad * (x / 3 + 1/2) up to 3, grad above
/// (and at NaN).
MEMOPT_HOST_DEVICE inline float hardswishGrad(float x, float g) {
  if (x < -3.0f)
    return 0.0f;
  if (x <= 3.0f)
    return g * (x / 3.0f + 0.5f);
  return g;
}

/// hardsigmoid_backward: grad / 6 strictly inside (-3, 3), else 0.
MEMOPT_HOST_DEVICE inline float hardsigmoidGrad(float x, float g) {
  return x > -3.0f && x < 3.0f ? g * (1.0f / 6.0f) : 0.0f;
}

/// log(1 + e^x); x itself above 20, where that is what it rounds to in f32
/// (PyTorch's softplus threshold), so e^x never overflows.
MEMOPT_HOST_DEVICE inline float softplus(float x) {
  return x > 20.0f ? x : std::log1p(expf32(x));
}

/// x * tanh(softplus(x)).
MEMOPT_HOST_DEVICE inline float mish(float x) {
  return x * tanhf32(softplus(x));
}

/// grad * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x)).
MEMOPT_HOST_DEVICE inline float mishGrad(float x, float g) {
  float s = 1.0f / (1.0f + expf32(-x));
  float t = tanhf32(softplus(x));
  return g * (t + x * s * (1.0f - t * t));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

/// 1 / (1 + e^-x).
MEMOPT_HOST_DEVICE inline float sigmoid(float x) {
  return 1.0f / (1.0f + expf32(-x));
}

/// sin(pi x) / (pi x), 1 at 0; the product rounded to f32 as torch.sinc's.
MEMOPT_HOST_DEVICE inline float sinc(float x) {
  if (x == 0.0f)
    return 1.0f;
  float product = 3.14159265358979323846f * x;
  return std::sin(product) / product;
}

/// The last of memopt_unary's ops.
constexpr memopt_unary_op kLastUnaryOp = MEMOPT_UNARY_SINC;

/// -1, 0 or 1 by the sign of x; NaN stays NaN (torch.sign).
MEMOPT_HOST_DEVICE inline float signValue(float x) {
  return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
}

/// memopt_unary's op applied to x.
MEMOPT_HOST_DEVICE inline float unaryValue(memopt_unary_op op, float x) {
  switch (op) {
  case MEMOPT_UNARY_NEG:
    return -x;
  case MEMOPT_UNARY_EXP:
    return expf32(x);
  case MEMOPT_UNARY_LOG:
    return std::log(x);
  case MEMOPT_UNARY_SQRT:
    return std::sqrt(x);
  case MEMOPT_UNARY_RSQRT:
    return 1.0f / std::sqrt(x);
  case MEMOPT_UNARY_TANH:
    return tanhf32(x);
  case MEMOPT_UNARY_SIGMOID:
    return sigmoid(x);
  case MEMOPT_UNARY_RELU:
    // NaN (x != x) propagates, as torch.relu.
    return x > 0.0f || x != x ? x : 0.0f;
  case MEMOPT_UNARY_SILU:
    return x * sigmoid(x);
  case MEMOPT_UNARY_GELU:
    return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  case MEMOPT_UNARY_GELU_TANH:
    return 0.5f * x *
           (1.0f + tanhf32(kSqrt2OverPi * (x + kGeluCoeff * x * x * x)));
  case MEMOPT_UNARY_HARDSWISH:
    return hardswish(x);
  case MEMOPT_UNARY_HARDSIGMOID:
    return hardsigmoid(x);
  case MEMOPT_UNARY_MISH:
    return mish(x);
  case MEMOPT_UNARY_ABS:
    return std::fabs(x);
  case MEMOPT_UNARY_SIGN:
    return signValue(x);
  case MEMOPT_UNARY_SIN:
    return std::sin(x);
  case MEMOPT_UNARY_COS:
    return std::cos(x);
  case MEMOPT_UNARY_ERF:
    return std::erf(x);
  case MEMOPT_UNARY_EXPM1:
    return std::expm1(x);
  case MEMOPT_UNARY_LOG1P:
    return std::log1p(x);
  case MEMOPT_UNARY_SOFTPLUS:
    return softplus(x);
  case MEMOPT_UNARY_TAN:
    return std::tan(x);
  case MEMOPT_UNARY_ASIN:
    return std::asin(x);
  case MEMOPT_UNARY_ACOS:
    return std::acos(x);
  case MEMOPT_UNARY_ATAN:
    return std::atan(x);
  case MEMOPT_UNARY_FLOOR:
    return std::floor(x);
  case MEMOPT_UNARY_CEIL:
    return std::ceil(x);
  case MEMOPT_UNARY_ROUND:
    // The default rounding mode (to nearest, ties to even) is the one
    // memopt runs under, on the host and on CUDA.
    return std::nearbyint(x);
  case MEMOPT_UNARY_TRUNC:
    return std::trunc(x);
  case MEMOPT_UNARY_SINC:
    return sinc(x);
  }
  return x;
}

/// memopt_binary's op applied to a and b; maximum propagates NaN.
MEMOPT_HOST_DEVICE inline float binaryValue(memopt_binary_op op, float a,
                                            float b) {
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
    if (a != a || b != b)
      return NAN;
    return a > b ? a : b;
  }
  return a;
}

/// memopt_cast of a float to the index type T (int32_t or int64_t), as
/// PyTorch's `.long()` / `.int()` on x86: truncated toward zero; NaN, the
/// infinities and values outside T's range give T's lowest value, which is
/// what the processor's truncating conversion returns for them.
template <typename T>
MEMOPT_HOST_DEVICE inline T indexFromFloat(float x) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "int32_t or int64_t");
  const float bound = sizeof(T) == 8 ? 0x1p63f : 0x1p31f;
  return x >= -bound && x < bound ? static_cast<T>(x) : static_cast<T>(-bound);
}

/// memopt_compare's op applied to a and b (floats or indices): C's
/// operators, so that every ordered comparison with a NaN is false.
template <typename T>
MEMOPT_HOST_DEVICE inline bool compareValue(memopt_compare_op op, T a, T b) {
  switch (op) {
  case MEMOPT_COMPARE_EQ:
    return a == b;
  case MEMOPT_COMPARE_NE:
    return a != b;
  case MEMOPT_COMPARE_LT:
    return a < b;
  case MEMOPT_COMPARE_LE:
    return a <= b;
  case MEMOPT_COMPARE_GT:
    return a > b;
  case MEMOPT_COMPARE_GE:
    return a >= b;
  }
  return false;
}

/// memopt_scalar's op applied to x and the scalar v.
MEMOPT_HOST_DEVICE inline float scalarValue(memopt_scalar_op op, float x,
                                            float v) {
  switch (op) {
  case MEMOPT_SCALAR_ADD:
    return x + v;
  case MEMOPT_SCALAR_MUL:
    return x * v;
  case MEMOPT_SCALAR_POW:
    return std::pow(x, v);
  }
  return x;
}

/// memopt_activation_grad's op: the gradient g times the activation's
/// derivative, given its input v (its output for tanh and sigmoid).
MEMOPT_HOST_DEVICE inline float
activationGradValue(memopt_activation_grad_op op, float v, float g) {
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
    float pdf = kInvSqrt2Pi * expf32(-0.5f * v * v);
    return g * (cdf + v * pdf);
  }
  case MEMOPT_GRAD_GELU_TANH: {
    float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    float t = tanhf32(inner);
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

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_ACTIVATIONMATH_H
