//===- LossMath.h - the loss formulas of the runtimes -----------*- C++ -*-===//
//
// The per-row and per-element formulas of softmax cross-entropy (label
// smoothing, ignore_index's mean) and of mean squared error, and of their
// gradients. Written once for the host loops (runtime/host/Loss.cpp) and
// the CUDA kernels (runtime/cuda/Loss.cu), so that the host unit tests
// exercise the arithmetic the GPU runs.
//
// As in NormMath.h, formulas that feed or read a sum are templates over the
// accumulator type `Acc`: double on the host, float on the device, each
// keeping the host's exact operations and types. Scalar factors (the
// gradient's scale, the smoothed targets) are computed in double in both
// runtimes and rounded to f32 once.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_LOSSMATH_H
#define MEMOPT_RUNTIME_LOSSMATH_H

#include "memopt/runtime/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace memopt {
namespace runtime {

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

/// A term of a row's sum of exponentials, given the row maximum `max`:
/// exp(x - max), in the accumulator's precision.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc logSumExpTerm(float x, float max) {
  return std::exp(static_cast<Acc>(x) - max);
}

/// log(sum(exp(row))) = max + log(sum(exp(row - max))).
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc logSumExpValue(float max, Acc sum) {
  return max + std::log(sum);
}

/// The loss of one kept row against the target smoothed by `eps`,
/// (1 - eps) onehot + eps / classes: lse - (1 - eps) z[label] - eps *
/// sum(z) / classes, where sumLogits = sum(z) (read only when eps != 0).
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc crossEntropyRowLoss(Acc lse, float labelLogit,
                                                  Acc sumLogits, Acc eps,
                                                  int64_t classes) {
  if (eps == Acc(0))
    return lse - labelLogit;
  return lse - (Acc(1) - eps) * labelLogit -
         eps * sumLogits / static_cast<Acc>(classes);
}

/// The smoothed target's value at the label (`on`) and elsewhere (`off`):
/// 1 and 0 without smoothing.
struct SmoothedTarget {
  float on, off;
};

MEMOPT_HOST_DEVICE inline SmoothedTarget smoothedTarget(double eps,
                                                        int64_t classes) {
  double off = classes ? eps / classes : 0.0;
  return {static_cast<float>(1.0 - eps + off), static_cast<float>(off)};
}

/// The factor of a cross-entropy's gradient: the incoming gradient, divided
/// by the count of kept labels under MEAN, and 0 when every label is ignored
/// (the loss is then NaN, the gradient is not).
MEMOPT_HOST_DEVICE inline float crossEntropyGradScale(double gradLoss,
                                                      bool mean, double count) {
  double scale = gradLoss;
  if (mean)
    scale = count != 0.0 ? scale / count : 0.0;
  return static_cast<float>(scale);
}

/// The gradient of a kept row's loss at logit x: scale * (softmax(x) -
/// target), softmax(x) = exp(x - lse) rounded to f32.
template <typename Acc>
MEMOPT_HOST_DEVICE inline float crossEntropyGradValue(float x, Acc lse,
                                                      bool isLabel, float scale,
                                                      SmoothedTarget target) {
  float p = static_cast<float>(std::exp(static_cast<Acc>(x) - lse));
  return scale * (p - (isLabel ? target.on : target.off));
}

//===----------------------------------------------------------------------===//
// Reductions and mean squared error
//===----------------------------------------------------------------------===//

/// A loss's total under the reduction: total / count under MEAN (NaN when
/// nothing counts, 0 / 0 as PyTorch), total under SUM.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc reducedLoss(Acc total, Acc count, bool mean) {
  if (!mean)
    return total;
  return count != Acc(0) ? total / count : static_cast<Acc>(NAN);
}

/// A term of the squared error's sum: (x - t)^2, the difference in f32.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc squaredErrorTerm(float x, float t) {
  float d = x - t;
  return static_cast<Acc>(d) * d;
}

/// The factor of the squared error's gradient: 2 gradLoss, over n under
/// MEAN.
MEMOPT_HOST_DEVICE inline float mseGradScale(double gradLoss, bool mean,
                                             int64_t n) {
  double scale = 2.0 * gradLoss;
  if (mean && n)
    scale /= static_cast<double>(n);
  return static_cast<float>(scale);
}

/// The squared error's gradient at one element: scale (x - t).
MEMOPT_HOST_DEVICE inline float mseGradValue(float scale, float x, float t) {
  return scale * (x - t);
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_LOSSMATH_H
