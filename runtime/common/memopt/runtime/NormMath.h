//===- NormMath.h - the softmax and normalisation formulas ------*- C++ -*-===//
//
// The per-element formulas of softmax, log-softmax, layer norm, RMS norm and
// batch norm and of their gradients, given a row's (or channel's)
// statistics, and the terms whose sums make those statistics. Written once
// for the host loops (runtime/host/Norm.cpp) and the CUDA kernels
// (runtime/cuda/Norm.cu), so that the host unit tests exercise the
// arithmetic the GPU runs.
//
// Sums are the two runtimes' own business: the host accumulates in double in
// a fixed lane order, the CUDA kernels in f32 in an order fixed by the launch
// shape. The formulas that produce a term of such a sum are templates over
// the accumulator type `Acc` (double on the host, float on the device); each
// spells out the host's operations, order and types exactly, so the host's
// results did not change by a bit when they moved here. Per-element values
// are f32 in both runtimes.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_NORMMATH_H
#define MEMOPT_RUNTIME_NORMMATH_H

#include "memopt/runtime/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace memopt {
namespace runtime {

//===----------------------------------------------------------------------===//
// Softmax and log-softmax along a row with maximum `shift`
//===----------------------------------------------------------------------===//

/// A term of the row's sum of exponentials: exp(x - shift), in f32 (the
/// sum may be wider).
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc softmaxExpTerm(float x, float shift) {
  return static_cast<Acc>(std::exp(x - shift));
}

/// softmax(x) = exp(x - shift) / sum, given inv = 1 / sum.
MEMOPT_HOST_DEVICE inline float softmaxValue(float x, float shift, float inv) {
  return std::exp(x - shift) * inv;
}

/// log_softmax(x) = x - shift - log(sum), given logSum = log(sum).
MEMOPT_HOST_DEVICE inline float logSoftmaxValue(float x, float shift,
                                                float logSum) {
  return x - shift - logSum;
}

/// A term of the gradient's row sum: g (log-softmax) or g * y (softmax).
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc softmaxGradTerm(float y, float g, bool isLog) {
  return isLog ? static_cast<Acc>(g) : static_cast<Acc>(g) * y;
}

/// The input gradient of one element given the row sum `s` of
/// softmaxGradTerm: y (g - s) for softmax, where y is softmax's output;
/// g - exp(y) s for log-softmax, where y is log-softmax's output.
MEMOPT_HOST_DEVICE inline float softmaxGradValue(float y, float g, float s,
                                                 bool isLog) {
  return isLog ? g - std::exp(y) * s : y * (g - s);
}

//===----------------------------------------------------------------------===//
// Layer norm, RMS norm and batch norm
//===----------------------------------------------------------------------===//

/// A term of the variance's sum: (x - mean)^2.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc squaredDeviation(float x, Acc mean) {
  Acc d = x - mean;
  return d * d;
}

/// A term of RMS norm's sum of squares: x^2.
template <typename Acc> MEMOPT_HOST_DEVICE inline Acc squareTerm(float x) {
  return static_cast<Acc>(x) * x;
}

/// 1 / sqrt(var + eps), the reciprocal standard deviation.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc reciprocalStd(Acc var, Acc eps) {
  return Acc(1) / std::sqrt(var + eps);
}

/// The normalised value (x - mean) * rstd.
MEMOPT_HOST_DEVICE inline float normalized(float x, float mean, float rstd) {
  return (x - mean) * rstd;
}

/// Layer norm and batch norm: (x - mean) * rstd * w + b.
MEMOPT_HOST_DEVICE inline float affineNormValue(float x, float mean, float rstd,
                                                float w, float b) {
  return (x - mean) * rstd * w + b;
}

/// RMS norm: x * rstd * w.
MEMOPT_HOST_DEVICE inline float rmsNormValue(float x, float rstd, float w) {
  return x * rstd * w;
}

/// The terms of layer norm's input-gradient row sums: g = dy * w (sum of
/// g) and g * xhat with xhat = (x - mean) * rstd (sum of g * xhat).
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc layerNormGradTermG(float dy, float w) {
  return static_cast<Acc>(dy * w);
}
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc layerNormGradTermGX(float dy, float w, float x,
                                                  float mean, float rstd) {
  float xhat = normalized(x, mean, rstd);
  return static_cast<Acc>(dy * w) * xhat;
}

/// Layer norm's input gradient of one element, given the row means of g
/// and g * xhat: rstd (g - meanG - xhat meanGX).
MEMOPT_HOST_DEVICE inline float layerNormGradValue(float dy, float w, float x,
                                                   float mean, float rstd,
                                                   float meanG, float meanGX) {
  float xhat = normalized(x, mean, rstd);
  return rstd * (dy * w - meanG - xhat * meanGX);
}

/// A term of RMS norm's input-gradient row sum: dy * w * x.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc rmsNormGradTerm(float dy, float w, float x) {
  return static_cast<Acc>(dy) * w * x;
}

/// RMS norm's input gradient couples the elements of a row through
/// c = sum(dy w x) / cols * rstd^3 (d/dx_j of x_i rstd is rstd delta_ij -
/// x_i x_j rstd^3 / cols).
template <typename Acc>
MEMOPT_HOST_DEVICE inline float rmsNormGradCoupling(Acc sumGX, int64_t cols,
                                                    float rstd) {
  return static_cast<float>(sumGX / static_cast<Acc>(cols) * rstd * rstd *
                            rstd);
}

/// RMS norm's input gradient of one element: rstd dy w - x c.
MEMOPT_HOST_DEVICE inline float rmsNormGradValue(float dy, float w, float x,
                                                 float rstd, float c) {
  return rstd * dy * w - x * c;
}

/// The terms of the parameter gradients' column sums: dy * xhat for layer
/// norm's weight, dy * x * rstd for RMS norm's, dy for the bias.
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc layerNormWeightGradTerm(float dy, float x,
                                                      float mean, float rstd) {
  float xhat = normalized(x, mean, rstd);
  return static_cast<Acc>(dy) * xhat;
}
template <typename Acc>
MEMOPT_HOST_DEVICE inline Acc rmsNormWeightGradTerm(float dy, float x,
                                                    float rstd) {
  return static_cast<Acc>(dy) * x * rstd;
}

/// Batch norm's input gradient of one element, given scale = w * rstd and
/// the channel means of dy and dy * xhat.
MEMOPT_HOST_DEVICE inline float batchNormGradValue(float dy, float x,
                                                   float mean, float rstd,
                                                   float scale, float meanG,
                                                   float meanGX) {
  float xhat = normalized(x, mean, rstd);
  return scale * (dy - meanG - xhat * meanGX);
}

/// A running statistic's update, in double as torch's batch_norm:
/// (1 - momentum) old + momentum value.
MEMOPT_HOST_DEVICE inline float runningStatistic(double old, double value,
                                                 double momentum) {
  return static_cast<float>((1.0 - momentum) * old + momentum * value);
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_NORMMATH_H
