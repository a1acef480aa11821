//===- Optimizer.cpp - host optimizer updates and loss scaling ------------===//
//
// SGD and AdamW and their memopt_host_* twins of optimizer offload (the
// loops of memopt/runtime/HostUpdate.h, shared with the CUDA runtime's
// memopt_host_* entries, on the worker threads), and GradScaler's unscale /
// non-finite check and scale update.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include "memopt/runtime/HostUpdate.h"
#include "memopt/runtime/OptimizerMath.h"

#include <atomic>
#include <cmath>

using namespace memopt::host;

namespace {

/// HostUpdate.h's loops on the worker threads.
const auto split = [](int64_t n, int64_t width, const auto &body) {
  parallelFor(n, kElementGrain / width, body);
};

} // namespace

void memopt_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                       const void *param, const void *grad,
                       const void *momentum_buffer, const uint8_t *skip,
                       void *new_param, void *new_momentum_buffer, int64_t n,
                       double lr, double momentum, double weight_decay) {
  cpu::sgdUpdate(ctx, "memopt_sgd_update", split, dtype, param, grad,
                 momentum_buffer, skip, new_param, new_momentum_buffer, n, lr,
                 momentum, weight_decay);
}

void memopt_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                         const void *param, const void *grad,
                         const void *exp_avg, const void *exp_avg_sq,
                         const int64_t *step, const uint8_t *skip,
                         void *new_param, void *new_exp_avg,
                         void *new_exp_avg_sq, int64_t n, double lr,
                         double beta1, double beta2, double eps,
                         double weight_decay) {
  cpu::adamwUpdate(ctx, "memopt_adamw_update", split, dtype, param, grad,
                   exp_avg, exp_avg_sq, step, skip, new_param, new_exp_avg,
                   new_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay);
}

void memopt_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                             const void *param, const void *grad,
                             const void *exp_avg, const void *exp_avg_sq,
                             const int64_t *step, const uint8_t *skip,
                             void *new_param, void *new_exp_avg,
                             void *new_exp_avg_sq, int64_t n, double lr,
                             double beta1, double beta2, double eps,
                             double weight_decay) {
  cpu::adamw8bitUpdate(ctx, "memopt_adamw8bit_update", split, dtype, param,
                       grad, exp_avg, exp_avg_sq, step, skip, new_param,
                       new_exp_avg, new_exp_avg_sq, n, lr, beta1, beta2, eps,
                       weight_decay);
}

//===----------------------------------------------------------------------===//
// Host memory (offload): host memory is this runtime's memory, so each
// memopt_host_* update is its device counterpart under its own name.
//===----------------------------------------------------------------------===//

void memopt_host_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                            const void *param, const void *grad,
                            const void *momentum_buffer, const uint8_t *skip,
                            void *new_param, void *new_momentum_buffer,
                            int64_t n, double lr, double momentum,
                            double weight_decay) {
  cpu::sgdUpdate(ctx, "memopt_host_sgd_update", split, dtype, param, grad,
                 momentum_buffer, skip, new_param, new_momentum_buffer, n, lr,
                 momentum, weight_decay);
}

void memopt_host_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                              const void *param, const void *grad,
                              const void *exp_avg, const void *exp_avg_sq,
                              const int64_t *step, const uint8_t *skip,
                              void *new_param, void *new_exp_avg,
                              void *new_exp_avg_sq, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weight_decay) {
  cpu::adamwUpdate(ctx, "memopt_host_adamw_update", split, dtype, param, grad,
                   exp_avg, exp_avg_sq, step, skip, new_param, new_exp_avg,
                   new_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay);
}

void memopt_host_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                                  const void *param, const void *grad,
                                  const void *exp_avg, const void *exp_avg_sq,
                                  const int64_t *step, const uint8_t *skip,
                                  void *new_param, void *new_exp_avg,
                                  void *new_exp_avg_sq, int64_t n, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay) {
  cpu::adamw8bitUpdate(ctx, "memopt_host_adamw8bit_update", split, dtype, param,
                       grad, exp_avg, exp_avg_sq, step, skip, new_param,
                       new_exp_avg, new_exp_avg_sq, n, lr, beta1, beta2, eps,
                       weight_decay);
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

void memopt_increment(memopt_context *ctx, const int64_t *step,
                      const uint8_t *skip, int64_t *out) {
  if (!checkPointers(ctx, "memopt_increment", 1, {step, out}))
    return;
  *out = cpu::isSkipped(skip) ? *step : *step + 1;
}

void memopt_scale_loss(memopt_context *ctx, const float *loss,
                       const float *scale, float *out) {
  if (!checkPointers(ctx, "memopt_scale_loss", 1, {loss, scale, out}))
    return;
  *out = *loss * *scale;
}

void memopt_unscale(memopt_context *ctx, const float *scale,
                    int64_t num_tensors, const memopt_dtype *dtypes,
                    const void *const *grads, void *const *results,
                    const int64_t *sizes, uint8_t *found_inf) {
  const char *entry = "memopt_unscale";
  if (!checkUnscale(ctx, entry, scale, num_tensors, dtypes, grads, results,
                    sizes, found_inf))
    return;
  float inv = static_cast<float>(1.0 / static_cast<double>(*scale));
  std::atomic<bool> anyNonFinite{false};
  for (int64_t j = 0; j < num_tensors; ++j) {
    int64_t n = sizes[j];
    F32Input g(ctx, dtypes[j], grads[j], n);
    F32Output out(ctx, dtypes[j], results[j], n);
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      bool nonFinite = false;
      for (int64_t i = begin; i < end; ++i) {
        float v = g[i];
        nonFinite |= !std::isfinite(v);
        out[i] = v * inv;
      }
      if (nonFinite)
        anyNonFinite.store(true, std::memory_order_relaxed);
    });
    out.commit();
  }
  *found_inf = anyNonFinite.load(std::memory_order_relaxed) ? 1 : 0;
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
  int64_t tracker = *growth_tracker;
  *new_scale = updatedScale(*scale, tracker, *found_inf != 0, growth_factor,
                            backoff_factor, growth_interval);
  *new_growth_tracker = tracker;
}
