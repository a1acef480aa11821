//===- ActivationMath.h - hard activations, mish and clamp ------*- C++ -*-===//
//
// The elementwise formulas of hardswish, hardsigmoid, mish and clamp and
// their gradients, in the order of operations of PyTorch 1.13's CPU kernels
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

#include <cmath>

#ifndef MEMOPT_HOST_DEVICE
#ifdef __CUDACC__
#define MEMOPT_HOST_DEVICE __host__ __device__
#else
#define MEMOPT_HOST_DEVICE
#endif
#endif

namespace memopt {
namespace runtime {

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
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

/// x * tanh(softplus(x)).
MEMOPT_HOST_DEVICE inline float mish(float x) {
  return x * std::tanh(softplus(x));
}

/// grad * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x)).
MEMOPT_HOST_DEVICE inline float mishGrad(float x, float g) {
  float sigmoid = 1.0f / (1.0f + std::exp(-x));
  float t = std::tanh(softplus(x));
  return g * (t + x * sigmoid * (1.0f - t * t));
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_ACTIVATIONMATH_H
