//===- OptimizerMath.h - the optimizer formulas of the runtimes -*- C++ -*-===//
//
// SGD and AdamW in the order of operations of torch.optim's single-tensor
// implementations (hyper-parameters combined in double and rounded to f32
// once per update, elementwise math in f32), and GradScaler's scale update.
// Written once for the CPU loops (HostUpdate.h: the host runtime, and the
// CUDA runtime's host entries of optimizer offload) and the CUDA
// kernels (runtime/cuda/Elementwise.cu), so that the two runtimes compute
// the same formulas.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_OPTIMIZERMATH_H
#define MEMOPT_RUNTIME_OPTIMIZERMATH_H

#include "memopt/runtime/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace memopt {
namespace runtime {

/// SGD's hyper-parameters in f32.
struct SgdCoefficients {
  float lr, momentum, decay;
};

MEMOPT_HOST_DEVICE inline SgdCoefficients
sgdCoefficients(double lr, double momentum, double weightDecay) {
  return {static_cast<float>(lr), static_cast<float>(momentum),
          static_cast<float>(weightDecay)};
}

/// One element of an SGD update: the new parameter; `buf` (the momentum
/// buffer) becomes its new value.
MEMOPT_HOST_DEVICE inline float sgdElement(const SgdCoefficients &c, float p,
                                           float g, float &buf) {
  float d = g + c.decay * p;
  buf = buf * c.momentum + d;
  return p - c.lr * buf;
}

/// AdamW's hyper-parameters and bias corrections for update `step` (1-based),
/// in f32.
struct AdamWCoefficients {
  float decayFactor, lerpWeight, beta2, oneMinusBeta2, negStepSize,
      biasCorrection2Sqrt, eps;
};

MEMOPT_HOST_DEVICE inline AdamWCoefficients
adamwCoefficients(double lr, double beta1, double beta2, double eps,
                  double weightDecay, int64_t step) {
  double t = static_cast<double>(step);
  double biasCorrection1 = 1.0 - std::pow(beta1, t);
  return {static_cast<float>(1.0 - lr * weightDecay),
          static_cast<float>(1.0 - beta1),
          static_cast<float>(beta2),
          static_cast<float>(1.0 - beta2),
          static_cast<float>(-(lr / biasCorrection1)),
          static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t))),
          static_cast<float>(eps)};
}

/// One element of an AdamW update: the new parameter; `m` and `v` (the
/// moments) become their new values.
MEMOPT_HOST_DEVICE inline float adamwElement(const AdamWCoefficients &c,
                                             float p, float g, float &m,
                                             float &v) {
  float decayed = p * c.decayFactor;
  // Tensor.lerp_ as PyTorch evaluates it: both forms, then a select (no
  // branch, so that a CPU loop over elements vectorizes).
  float fromM = m + c.lerpWeight * (g - m);
  float fromG = g - (g - m) * (1.0f - c.lerpWeight);
  m = c.lerpWeight < 0.5f ? fromM : fromG;
  v = v * c.beta2 + c.oneMinusBeta2 * (g * g);
  float denom = std::sqrt(v) / c.biasCorrection2Sqrt + c.eps;
  return decayed + c.negStepSize * (m / denom);
}

/// GradScaler's update: the scale backs off after a step with non-finite
/// gradients and grows after `interval` finite ones (unless it would
/// overflow); `tracker` counts the finite steps since the last change and
/// becomes its new value.
MEMOPT_HOST_DEVICE inline float updatedScale(float scale, int64_t &tracker,
                                             bool foundInf, double growth,
                                             double backoff,
                                             int64_t interval) {
  if (foundInf) {
    tracker = 0;
    return static_cast<float>(scale * backoff);
  }
  if (tracker + 1 < interval) {
    ++tracker;
    return scale;
  }
  tracker = 0;
  float grown = static_cast<float>(scale * growth);
  return std::isfinite(grown) ? grown : scale;
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_OPTIMIZERMATH_H
