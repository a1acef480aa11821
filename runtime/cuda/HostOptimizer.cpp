//===- HostOptimizer.cpp - optimizer offload's entries on the CPU ---------===//
//
// The memopt_host_* entries of optimizer offload (ZeRO-Offload: Ren et al.,
// "ZeRO-Offload: Democratizing Billion-Scale Model Training", 2021): the
// cast and the SGD, AdamW and 8-bit AdamW updates of runtime.h, run on the
// CPU over host memory that memopt_transfer filled (it waited for the
// stream, so nothing here calls CUDA). Each element is computed as the host
// runtime computes it: loaded into f32 (Float16.h), updated by the shared
// formulas (OptimizerMath.h, QuantizeMath.h), rounded once on the store,
// in a file compiled without contraction into FMAs (CMakeLists.txt), as
// the host runtime is. So an update gives the same bits here, on the host
// runtime and, for the device entries, on the GPU.
//
// The loops split [0, n) (whole blocks for 8-bit state) across threads once
// there is enough work to pay for starting them; each element is one
// thread's, so the result does not depend on the number of threads.
// O(n) work and memory traffic per call.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"

#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/Float16.h"
#include "memopt/runtime/OptimizerMath.h"
#include "memopt/runtime/QuantizeMath.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

using namespace memopt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// The most threads a loop uses: MEMOPT_NUM_THREADS (as for the host
/// runtime's kernels), else the machine's hardware threads.
int threadCount() {
  static const int count = [] {
    const char *value = std::getenv("MEMOPT_NUM_THREADS");
    long threads = value && *value ? std::strtol(value, nullptr, 10) : 0;
    if (threads < 1)
      threads = static_cast<long>(std::thread::hardware_concurrency());
    return static_cast<int>(std::clamp(threads, 1L, 256L));
  }();
  return count;
}

/// The fewest elements worth a thread of their own: starting one costs tens
/// of microseconds, an AdamW element a few nanoseconds.
constexpr int64_t kElementGrain = 1 << 16;

/// Calls body(begin, end) on disjoint ranges that cover [0, n), on up to
/// threadCount() threads, at least `grain` iterations each; returns when all
/// have run. A thread that cannot be started leaves its ranges to the
/// calling thread.
template <typename Body>
void parallelFor(int64_t n, int64_t grain, const Body &body) {
  if (n <= 0)
    return;
  int64_t chunks = std::min<int64_t>(threadCount(), n / grain);
  if (chunks < 2) {
    body(int64_t(0), n);
    return;
  }
  auto bound = [&](int64_t k) { return n * k / chunks; };
  std::vector<std::thread> threads;
  int64_t k = 1;
  try {
    for (; k < chunks; ++k)
      threads.emplace_back(body, bound(k), bound(k + 1));
  } catch (const std::system_error &) {
    for (int64_t rest = k; rest < chunks; ++rest)
      body(bound(rest), bound(rest + 1));
  }
  body(int64_t(0), bound(1));
  for (std::thread &thread : threads)
    thread.join();
}

//===----------------------------------------------------------------------===//
// Storage
//===----------------------------------------------------------------------===//

/// How the CPU reads and writes one element of each dtype: floats through
/// f32 (rounded to nearest even on the store), indices as int64_t.
struct F32Storage {
  using T = float;
  static constexpr bool isFloat = true;
  static float load(T x) { return x; }
  static T store(float x) { return x; }
};
struct F16Storage {
  using T = uint16_t;
  static constexpr bool isFloat = true;
  static float load(T x) { return halfBitsToFloat(x); }
  static T store(float x) { return floatToHalfBits(x); }
};
struct BF16Storage {
  using T = uint16_t;
  static constexpr bool isFloat = true;
  static float load(T x) { return bfloat16BitsToFloat(x); }
  static T store(float x) { return floatToBFloat16Bits(x); }
};
template <typename Index> struct IndexStorage {
  using T = Index;
  static constexpr bool isFloat = false;
};

/// Calls fn(Storage{}) for a float dtype (checked by the caller).
template <typename Fn> void dispatchFloat(memopt_dtype dtype, Fn &&fn) {
  switch (dtype) {
  case MEMOPT_F16:
    fn(F16Storage{});
    return;
  case MEMOPT_BF16:
    fn(BF16Storage{});
    return;
  default:
    fn(F32Storage{});
    return;
  }
}

/// Calls fn(Storage{}) for a float or index dtype (checked by the caller).
template <typename Fn> void dispatchNumber(memopt_dtype dtype, Fn &&fn) {
  switch (dtype) {
  case MEMOPT_I32:
    fn(IndexStorage<int32_t>{});
    return;
  case MEMOPT_I64:
    fn(IndexStorage<int64_t>{});
    return;
  default:
    dispatchFloat(dtype, fn);
    return;
  }
}

/// memopt_cast's conversion of one element, as the host runtime's: between
/// floats through f32; a float to an index by indexFromFloat; an index to a
/// float through int64_t and f32; between indices by truncation to the
/// result's width.
template <typename In, typename Out>
typename Out::T castElement(typename In::T x) {
  using OutT = typename Out::T;
  if constexpr (In::isFloat && Out::isFloat)
    return Out::store(In::load(x));
  else if constexpr (In::isFloat)
    return indexFromFloat<OutT>(In::load(x));
  else if constexpr (Out::isFloat)
    return Out::store(static_cast<float>(static_cast<int64_t>(x)));
  else
    return static_cast<OutT>(static_cast<int64_t>(x));
}

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

/// AdamW's coefficients for update *step, or false (an error naming
/// `entry`) when *step is not a 1-based update count.
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

} // namespace

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

void memopt_host_cast(memopt_context *ctx, memopt_dtype in_dtype,
                      const void *input, memopt_dtype out_dtype, void *output,
                      int64_t n) {
  const char *entry = "memopt_host_cast";
  if (!checkDTypes(ctx, entry, {in_dtype, out_dtype}) ||
      !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {input, output}) || isEmpty({n}))
    return;
  if (in_dtype == out_dtype) {
    copyIfDistinct(in_dtype, input, output, n);
    return;
  }
  dispatchNumber(in_dtype, [&](auto in) {
    dispatchNumber(out_dtype, [&](auto out) {
      using In = decltype(in);
      using Out = decltype(out);
      auto *x = static_cast<const typename In::T *>(input);
      auto *y = static_cast<typename Out::T *>(output);
      parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = castElement<In, Out>(x[i]);
      });
    });
  });
}

void memopt_host_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                            const void *param, const void *grad,
                            const void *momentum_buffer, const uint8_t *skip,
                            void *new_param, void *new_momentum_buffer,
                            int64_t n, double lr, double momentum,
                            double weight_decay) {
  const char *entry = "memopt_host_sgd_update";
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
  dispatchFloat(dtype, [&](auto storage) {
    using S = decltype(storage);
    using T = typename S::T;
    auto *p = static_cast<const T *>(param);
    auto *g = static_cast<const T *>(grad);
    auto *buf = static_cast<const T *>(momentum_buffer);
    auto *outP = static_cast<T *>(new_param);
    auto *outBuf = static_cast<T *>(new_momentum_buffer);
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float b = S::load(buf[i]);
        float pNew = sgdElement(c, S::load(p[i]), S::load(g[i]), b);
        outP[i] = S::store(pNew);
        outBuf[i] = S::store(b);
      }
    });
  });
}

void memopt_host_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                              const void *param, const void *grad,
                              const void *exp_avg, const void *exp_avg_sq,
                              const int64_t *step, const uint8_t *skip,
                              void *new_param, void *new_exp_avg,
                              void *new_exp_avg_sq, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weight_decay) {
  const char *entry = "memopt_host_adamw_update";
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
  dispatchFloat(dtype, [&](auto storage) {
    using S = decltype(storage);
    using T = typename S::T;
    auto *p = static_cast<const T *>(param);
    auto *g = static_cast<const T *>(grad);
    auto *m = static_cast<const T *>(exp_avg);
    auto *v = static_cast<const T *>(exp_avg_sq);
    auto *outP = static_cast<T *>(new_param);
    auto *outM = static_cast<T *>(new_exp_avg);
    auto *outV = static_cast<T *>(new_exp_avg_sq);
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      // Element i reads index i of the inputs before it writes index i of
      // the outputs, which may be the inputs themselves.
      for (int64_t i = begin; i < end; ++i) {
        float mNew = S::load(m[i]), vNew = S::load(v[i]);
        float pNew = adamwElement(c, S::load(p[i]), S::load(g[i]), mNew, vNew);
        outP[i] = S::store(pNew);
        outM[i] = S::store(mNew);
        outV[i] = S::store(vNew);
      }
    });
  });
}

void memopt_host_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                                  const void *param, const void *grad,
                                  const void *exp_avg, const void *exp_avg_sq,
                                  const int64_t *step, const uint8_t *skip,
                                  void *new_param, void *new_exp_avg,
                                  void *new_exp_avg_sq, int64_t n, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay) {
  const char *entry = "memopt_host_adamw8bit_update";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {param, grad, new_param}) ||
      !checkPointers(
          ctx, entry, 1,
          {exp_avg, exp_avg_sq, new_exp_avg, new_exp_avg_sq, step}) ||
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
  // The dtype row admits f32 parameters only.
  auto *p = static_cast<const float *>(param);
  auto *g = static_cast<const float *>(grad);
  auto *outP = static_cast<float *>(new_param);
  // The codes past n in the last block are the code of 0, as on the host.
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
                  adamw8bitBlock(
                      c, signedCode, unsignedCode, p + begin, g + begin,
                      quantizedCodes(mIn, b), *quantizedAbsmax(mIn, b),
                      quantizedCodes(vIn, b), *quantizedAbsmax(vIn, b), count,
                      outP + begin, m, v, mCodes, *quantizedAbsmax(mOut, b),
                      vCodes, *quantizedAbsmax(vOut, b));
                  std::fill(mCodes + count, mCodes + kQuantBlock, zeroM);
                  std::fill(vCodes + count, vCodes + kQuantBlock, zeroV);
                }
              });
}
