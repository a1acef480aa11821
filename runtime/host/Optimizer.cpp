//===- Optimizer.cpp - host optimizer updates and loss scaling ------------===//
//
// SGD and AdamW (the formulas of memopt/runtime/OptimizerMath.h, shared with
// the CUDA runtime), their memopt_host_* twins of optimizer offload, and
// GradScaler's unscale / non-finite check and scale update. A skipped step
// (found_inf) copies every input to its output, so an update applied in place
// leaves the state untouched.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include "memopt/runtime/OptimizerMath.h"
#include "memopt/runtime/QuantizeMath.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

using namespace memopt::host;

namespace {

bool isSkipped(const uint8_t *skip) { return skip && *skip; }

/// Copies `bytes` bytes from `src` to `dst` unless they alias.
void copyBytesIfDistinct(const void *src, void *dst, int64_t bytes) {
  if (src != dst)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

/// Copies `n` elements of `dtype` from `src` to `dst` unless they alias.
void copyIfDistinct(memopt_dtype dtype, const void *src, void *dst, int64_t n) {
  copyBytesIfDistinct(src, dst,
                      n * static_cast<int64_t>(memopt_dtype_size(dtype)));
}

/// AdamW's coefficients for update *step, or false (an error on `ctx`) when
/// *step is not a 1-based update count.
bool getAdamWCoefficients(memopt_context *ctx, const char *entry,
                          const int64_t *step, double lr, double beta1,
                          double beta2, double eps, double weightDecay,
                          AdamWCoefficients &c) {
  if (!checkUpdateCount(ctx, entry, *step))
    return false;
  c = adamwCoefficients(lr * ctx->lrScale, beta1, beta2, eps, weightDecay,
                        *step);
  return true;
}

/// memopt_sgd_update and memopt_host_sgd_update (host memory is the host
/// runtime's memory), whose errors name `entry`.
void sgdUpdate(memopt_context *ctx, const char *entry, memopt_dtype dtype,
               const void *param, const void *grad, const void *momentum_buffer,
               const uint8_t *skip, void *new_param, void *new_momentum_buffer,
               int64_t n, double lr, double momentum, double weight_decay) {
  if (!checkFloatTensors(
          ctx, entry, dtype, {n},
          {param, grad, momentum_buffer, new_param, new_momentum_buffer}) ||
      isEmpty({n}))
    return;
  if (isSkipped(skip)) {
    copyIfDistinct(dtype, param, new_param, n);
    copyIfDistinct(dtype, momentum_buffer, new_momentum_buffer, n);
    return;
  }
  SgdCoefficients c =
      sgdCoefficients(lr * ctx->lrScale, momentum, weight_decay);
  F32Input p(ctx, dtype, param, n);
  F32Input g(ctx, dtype, grad, n);
  F32Input buf(ctx, dtype, momentum_buffer, n);
  F32Output outP(ctx, dtype, new_param, n);
  F32Output outBuf(ctx, dtype, new_momentum_buffer, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float b = buf[i];
      outP[i] = sgdElement(c, p[i], g[i], b);
      outBuf[i] = b;
    }
  });
  outP.commit();
  outBuf.commit();
}

/// memopt_adamw_update and memopt_host_adamw_update.
void adamwUpdate(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                 const void *param, const void *grad, const void *exp_avg,
                 const void *exp_avg_sq, const int64_t *step,
                 const uint8_t *skip, void *new_param, void *new_exp_avg,
                 void *new_exp_avg_sq, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay) {
  if (!checkFloatTensors(ctx, entry, dtype, {n},
                         {param, grad, exp_avg, exp_avg_sq, new_param,
                          new_exp_avg, new_exp_avg_sq}) ||
      !checkPointers(ctx, entry, 1, {step}) || isEmpty({n}))
    return;
  if (isSkipped(skip)) {
    copyIfDistinct(dtype, param, new_param, n);
    copyIfDistinct(dtype, exp_avg, new_exp_avg, n);
    copyIfDistinct(dtype, exp_avg_sq, new_exp_avg_sq, n);
    return;
  }
  AdamWCoefficients c;
  if (!getAdamWCoefficients(ctx, entry, step, lr, beta1, beta2, eps,
                            weight_decay, c))
    return;
  F32Input p(ctx, dtype, param, n);
  F32Input g(ctx, dtype, grad, n);
  F32Input m(ctx, dtype, exp_avg, n);
  F32Input v(ctx, dtype, exp_avg_sq, n);
  F32Output outP(ctx, dtype, new_param, n);
  F32Output outM(ctx, dtype, new_exp_avg, n);
  F32Output outV(ctx, dtype, new_exp_avg_sq, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    // Element i reads only index i of the inputs before writing index i of
    // the outputs, which may be the inputs themselves (runtime.h), so the
    // loop has no carried dependence and may be vectorized.
    const float *pi = p.get(), *gi = g.get(), *mi = m.get(), *vi = v.get();
    float *po = outP.get(), *mo = outM.get(), *vo = outV.get();
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      float mNew = mi[i], vNew = vi[i];
      po[i] = adamwElement(c, pi[i], gi[i], mNew, vNew);
      mo[i] = mNew;
      vo[i] = vNew;
    }
  });
  outP.commit();
  outM.commit();
  outV.commit();
}

/// memopt_adamw8bit_update and memopt_host_adamw8bit_update.
void adamw8bitUpdate(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                     const void *param, const void *grad, const void *exp_avg,
                     const void *exp_avg_sq, const int64_t *step,
                     const uint8_t *skip, void *new_param, void *new_exp_avg,
                     void *new_exp_avg_sq, int64_t n, double lr, double beta1,
                     double beta2, double eps, double weight_decay) {
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {param, grad, new_param}) ||
      !checkPointers(ctx, entry, 1,
                     {exp_avg, exp_avg_sq, new_exp_avg, new_exp_avg_sq,
                      step}) ||
      isEmpty({n}))
    return;
  auto *mIn = static_cast<const uint8_t *>(exp_avg);
  auto *vIn = static_cast<const uint8_t *>(exp_avg_sq);
  auto *mOut = static_cast<uint8_t *>(new_exp_avg);
  auto *vOut = static_cast<uint8_t *>(new_exp_avg_sq);
  if (isSkipped(skip)) {
    copyIfDistinct(dtype, param, new_param, n);
    copyBytesIfDistinct(exp_avg, new_exp_avg, quantizedStateBytes(n));
    copyBytesIfDistinct(exp_avg_sq, new_exp_avg_sq, quantizedStateBytes(n));
    return;
  }
  AdamWCoefficients c;
  if (!getAdamWCoefficients(ctx, entry, step, lr, beta1, beta2, eps,
                            weight_decay, c))
    return;
  static const float signedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
  static const float unsignedCode[256] = MEMOPT_DYNAMIC_UNSIGNED_CODE;
  F32Input p(ctx, dtype, param, n);
  F32Input g(ctx, dtype, grad, n);
  F32Output outP(ctx, dtype, new_param, n);
  // The codes past n in the last block are the code of 0: a checkpoint's
  // bytes depend on the state alone, and a ZeRO shard padded with zeros
  // holds the same bytes.
  uint8_t zeroM = nearestCode(signedCode, 0.0f);
  uint8_t zeroV = nearestCode(unsignedCode, 0.0f);
  parallelFor(quantizedBlocks(n), kElementGrain / kQuantBlock,
              [&](int64_t first, int64_t last) {
                float m[kQuantBlock], v[kQuantBlock];
                for (int64_t b = first; b < last; ++b) {
                  int64_t begin = b * kQuantBlock;
                  int64_t count = std::min(kQuantBlock, n - begin);
                  uint8_t *mCodes = quantizedCodes(mOut, b);
                  uint8_t *vCodes = quantizedCodes(vOut, b);
                  adamw8bitBlock(c, signedCode, unsignedCode,
                                 p.get() + begin, g.get() + begin,
                                 quantizedCodes(mIn, b),
                                 *quantizedAbsmax(mIn, b),
                                 quantizedCodes(vIn, b),
                                 *quantizedAbsmax(vIn, b), count,
                                 outP.get() + begin, m, v, mCodes,
                                 *quantizedAbsmax(mOut, b), vCodes,
                                 *quantizedAbsmax(vOut, b));
                  std::fill(mCodes + count, mCodes + kQuantBlock, zeroM);
                  std::fill(vCodes + count, vCodes + kQuantBlock, zeroV);
                }
              });
  outP.commit();
}

} // namespace

void memopt_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                       const void *param, const void *grad,
                       const void *momentum_buffer, const uint8_t *skip,
                       void *new_param, void *new_momentum_buffer, int64_t n,
                       double lr, double momentum, double weight_decay) {
  sgdUpdate(ctx, "memopt_sgd_update", dtype, param, grad, momentum_buffer, skip,
            new_param, new_momentum_buffer, n, lr, momentum, weight_decay);
}

void memopt_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                         const void *param, const void *grad,
                         const void *exp_avg, const void *exp_avg_sq,
                         const int64_t *step, const uint8_t *skip,
                         void *new_param, void *new_exp_avg,
                         void *new_exp_avg_sq, int64_t n, double lr,
                         double beta1, double beta2, double eps,
                         double weight_decay) {
  adamwUpdate(ctx, "memopt_adamw_update", dtype, param, grad, exp_avg,
              exp_avg_sq, step, skip, new_param, new_exp_avg, new_exp_avg_sq, n,
              lr, beta1, beta2, eps, weight_decay);
}

void memopt_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                             const void *param, const void *grad,
                             const void *exp_avg, const void *exp_avg_sq,
                             const int64_t *step, const uint8_t *skip,
                             void *new_param, void *new_exp_avg,
                             void *new_exp_avg_sq, int64_t n, double lr,
                             double beta1, double beta2, double eps,
                             double weight_decay) {
  adamw8bitUpdate(ctx, "memopt_adamw8bit_update", dtype, param, grad, exp_avg,
                  exp_avg_sq, step, skip, new_param, new_exp_avg,
                  new_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay);
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
  sgdUpdate(ctx, "memopt_host_sgd_update", dtype, param, grad, momentum_buffer,
            skip, new_param, new_momentum_buffer, n, lr, momentum,
            weight_decay);
}

void memopt_host_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                              const void *param, const void *grad,
                              const void *exp_avg, const void *exp_avg_sq,
                              const int64_t *step, const uint8_t *skip,
                              void *new_param, void *new_exp_avg,
                              void *new_exp_avg_sq, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weight_decay) {
  adamwUpdate(ctx, "memopt_host_adamw_update", dtype, param, grad, exp_avg,
              exp_avg_sq, step, skip, new_param, new_exp_avg, new_exp_avg_sq, n,
              lr, beta1, beta2, eps, weight_decay);
}

void memopt_host_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                                  const void *param, const void *grad,
                                  const void *exp_avg, const void *exp_avg_sq,
                                  const int64_t *step, const uint8_t *skip,
                                  void *new_param, void *new_exp_avg,
                                  void *new_exp_avg_sq, int64_t n, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay) {
  adamw8bitUpdate(ctx, "memopt_host_adamw8bit_update", dtype, param, grad,
                  exp_avg, exp_avg_sq, step, skip, new_param, new_exp_avg,
                  new_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay);
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

void memopt_increment(memopt_context *ctx, const int64_t *step,
                      const uint8_t *skip, int64_t *out) {
  if (!checkPointers(ctx, "memopt_increment", 1, {step, out}))
    return;
  *out = isSkipped(skip) ? *step : *step + 1;
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
