//===- LrSchedule.h - learning-rate schedules -------------------*- C++ -*-===//
//
// The factor a schedule multiplies every parameter group's learning rate by
// (memopt_set_lr_scale), as a function of the optimizer's 0-based step `it`:
// the number of updates done before this one (the `optimizer.step` counter,
// which a step that loss scaling skips does not advance). Each kind is the
// named reference's formula (REFERENCE.md, "LR schedules"):
//
//   constant  Hugging Face's get_constant_schedule_with_warmup:
//             it / W during the warmup, then 1.
//   linear    get_linear_schedule_with_warmup: it / W, then
//             max(0, (D - it) / (D - W)), D the total training steps.
//   cosine    get_cosine_schedule_with_warmup (half a cycle): it / W, then
//             max(0, 1/2 (1 + cos(pi p))), p = (it - W) / (D - W); with a
//             floor r = min_lr / lr its min-lr variant, r + (1 - r) of that.
//   nanogpt   nanoGPT's get_lr: (it + 1) / (W + 1) during the warmup, r after
//             D, r + 1/2 (1 + cos(pi (it - W) / (D - W))) (1 - r) between.
//
// W and D count in the `max(1, .)` of Hugging Face's code. Plain C++, shared
// by the driver and its unit tests.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_LRSCHEDULE_H
#define MEMOPT_RUNTIME_LRSCHEDULE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace memopt {
namespace runtime {

enum class LrScheduleKind { Constant, Linear, Cosine, NanoGpt };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  int64_t warmupSteps = 0;
  /// D: the step the decay ends at (linear, cosine, nanogpt).
  int64_t decaySteps = 0;
  /// r: the factor's floor, min_lr / lr (cosine, nanogpt).
  double minRatio = 0.0;

  /// Whether the factor is 1 at every step.
  bool isConstant() const {
    return kind == LrScheduleKind::Constant && warmupSteps == 0;
  }
};

inline std::optional<LrScheduleKind> parseLrScheduleKind(const std::string &s) {
  if (s == "constant")
    return LrScheduleKind::Constant;
  if (s == "linear")
    return LrScheduleKind::Linear;
  if (s == "cosine")
    return LrScheduleKind::Cosine;
  if (s == "nanogpt")
    return LrScheduleKind::NanoGpt;
  return std::nullopt;
}

inline const char *getLrScheduleKindName(LrScheduleKind kind) {
  switch (kind) {
  case LrScheduleKind::Constant:
    return "constant";
  case LrScheduleKind::Linear:
    return "linear";
  case LrScheduleKind::Cosine:
    return "cosine";
  case LrScheduleKind::NanoGpt:
    return "nanogpt";
  }
  return "?";
}

/// Why `s` is not a schedule ("" when it is one).
inline std::string checkLrSchedule(const LrSchedule &s) {
  if (s.warmupSteps < 0)
    return "the warmup steps are negative";
  if (!(s.minRatio >= 0.0 && s.minRatio <= 1.0))
    return "the minimum learning rate is not between 0 and the learning rate";
  if (s.kind == LrScheduleKind::Constant)
    return "";
  if (s.decaySteps <= 0)
    return "the schedule needs its decay steps (--decay-steps > 0)";
  if (s.warmupSteps > s.decaySteps ||
      (s.kind == LrScheduleKind::NanoGpt && s.warmupSteps == s.decaySteps))
    return "the warmup (" + std::to_string(s.warmupSteps) +
           " steps) does not end before the decay does (" +
           std::to_string(s.decaySteps) + " steps)";
  return "";
}

/// The factor at 0-based optimizer step `it` of a valid schedule.
inline double lrFactor(const LrSchedule &s, int64_t it) {
  const double pi = 3.14159265358979323846;
  double w = static_cast<double>(s.warmupSteps);
  double d = static_cast<double>(s.decaySteps);
  double t = static_cast<double>(it);
  double r = s.minRatio;
  if (s.kind == LrScheduleKind::NanoGpt) {
    if (it < s.warmupSteps)
      return (t + 1.0) / (w + 1.0);
    if (it > s.decaySteps)
      return r;
    double coefficient = 0.5 * (1.0 + std::cos(pi * (t - w) / (d - w)));
    return r + coefficient * (1.0 - r);
  }
  if (it < s.warmupSteps)
    return t / std::max(1.0, w);
  switch (s.kind) {
  case LrScheduleKind::Linear:
    return std::max(0.0, (d - t) / std::max(1.0, d - w));
  case LrScheduleKind::Cosine: {
    double progress = (t - w) / std::max(1.0, d - w);
    double factor = 0.5 * (1.0 + std::cos(pi * progress));
    return std::max(0.0, r + (1.0 - r) * factor);
  }
  default:
    return 1.0;
  }
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_LRSCHEDULE_H
