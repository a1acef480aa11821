//===- HostUpdate.h - optimizer updates and casts on the CPU ----*- C++ -*-===//
//
// The SGD, AdamW and 8-bit AdamW updates and the cast of runtime.h as CPU
// loops: the host runtime's update entries and memopt_host_* twins
// (runtime/host/Optimizer.cpp) and the CUDA runtime's memopt_host_* entries
// of optimizer offload (runtime/cuda/HostOptimizer.cpp), written once so
// that they give the same bits. Each element is loaded into f32 (Float16.h),
// updated by the shared formulas (OptimizerMath.h, QuantizeMath.h) and
// rounded once on the store; the files that include this one are compiled
// without contraction into FMAs (-ffp-contract=off). Header-only C++17 for
// the host compiler; no device code.
//
// Each runtime splits the loops over its own threads through a `split`:
// split(n, width, body) calls body(begin, end) on disjoint ranges that cover
// [0, n), an iteration being `width` elements (1, or a whole block of 8-bit
// state), and returns when all have run. Each element is one iteration's,
// so the result does not depend on the split. The entries' checks are
// Validate.h's; `ctx` is the runtime's memopt_context, whose lrScale scales
// the learning rate. A skipped step (found_inf) copies every input to its
// output, so an update applied in place leaves the state untouched.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOSTUPDATE_H
#define MEMOPT_RUNTIME_HOSTUPDATE_H

#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/Float16.h"
#include "memopt/runtime/OptimizerMath.h"
#include "memopt/runtime/QuantizeMath.h"
#include "memopt/runtime/Validate.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace memopt {
namespace runtime {
namespace cpu {

//===----------------------------------------------------------------------===//
// Storage
//===----------------------------------------------------------------------===//

/// How the CPU reads and writes one element of each dtype: floats through
/// f32 (rounded to nearest even on the store), indices as themselves.
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

/// memopt_cast's conversion of one element: between floats through f32; a
/// float to an index by indexFromFloat; an index to a float through int64_t
/// and f32; between indices by truncation to the result's width.
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

inline bool isSkipped(const uint8_t *skip) { return skip && *skip; }

/// Copies `bytes` bytes from `src` to `dst` unless they alias.
inline void copyBytesIfDistinct(const void *src, void *dst, int64_t bytes) {
  if (src != dst)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

/// Copies `n` elements of `dtype` from `src` to `dst` unless they alias.
inline void copyIfDistinct(memopt_dtype dtype, const void *src, void *dst,
                           int64_t n) {
  copyBytesIfDistinct(src, dst, n * static_cast<int64_t>(dtypeSize(dtype)));
}

/// AdamW's coefficients for update *step, or false (an error naming
/// `entry`) when *step is not a 1-based update count.
template <typename Context>
bool getAdamWCoefficients(Context *ctx, const char *entry, const int64_t *step,
                          double lr, double beta1, double beta2, double eps,
                          double weightDecay, AdamWCoefficients &c) {
  if (!checkUpdateCount(ctx, entry, *step))
    return false;
  c = adamwCoefficients(lr * ctx->lrScale, beta1, beta2, eps, weightDecay,
                        *step);
  return true;
}

//===----------------------------------------------------------------------===//
// Entries, whose errors name `entry`
//===----------------------------------------------------------------------===//

/// memopt_cast over memory the CPU reads; each element is read before it
/// is written, so input and output may alias.
template <typename Context, typename Split>
void cast(Context *ctx, const char *entry, const Split &split,
          memopt_dtype inDtype, const void *input, memopt_dtype outDtype,
          void *output, int64_t n) {
  if (!checkDTypes(ctx, entry, {inDtype, outDtype}) ||
      !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {input, output}) || isEmpty({n}))
    return;
  if (inDtype == outDtype) {
    copyIfDistinct(inDtype, input, output, n);
    return;
  }
  dispatchNumber(inDtype, [&](auto in) {
    dispatchNumber(outDtype, [&](auto out) {
      using In = decltype(in);
      using Out = decltype(out);
      auto *x = static_cast<const typename In::T *>(input);
      auto *y = static_cast<typename Out::T *>(output);
      split(n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = castElement<In, Out>(x[i]);
      });
    });
  });
}

/// memopt_sgd_update over memory the CPU reads.
template <typename Context, typename Split>
void sgdUpdate(Context *ctx, const char *entry, const Split &split,
               memopt_dtype dtype, const void *param, const void *grad,
               const void *momentumBuffer, const uint8_t *skip, void *newParam,
               void *newMomentumBuffer, int64_t n, double lr, double momentum,
               double weightDecay) {
  if (!checkFloatTensors(
          ctx, entry, dtype, {n},
          {param, grad, momentumBuffer, newParam, newMomentumBuffer}) ||
      isEmpty({n}))
    return;
  if (isSkipped(skip)) {
    copyIfDistinct(dtype, param, newParam, n);
    copyIfDistinct(dtype, momentumBuffer, newMomentumBuffer, n);
    return;
  }
  SgdCoefficients c = sgdCoefficients(lr * ctx->lrScale, momentum, weightDecay);
  dispatchFloat(dtype, [&](auto storage) {
    using S = decltype(storage);
    using T = typename S::T;
    auto *p = static_cast<const T *>(param);
    auto *g = static_cast<const T *>(grad);
    auto *buf = static_cast<const T *>(momentumBuffer);
    auto *outP = static_cast<T *>(newParam);
    auto *outBuf = static_cast<T *>(newMomentumBuffer);
    split(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float b = S::load(buf[i]);
        float pNew = sgdElement(c, S::load(p[i]), S::load(g[i]), b);
        outP[i] = S::store(pNew);
        outBuf[i] = S::store(b);
      }
    });
  });
}

/// memopt_adamw_update over memory the CPU reads.
template <typename Context, typename Split>
void adamwUpdate(Context *ctx, const char *entry, const Split &split,
                 memopt_dtype dtype, const void *param, const void *grad,
                 const void *expAvg, const void *expAvgSq, const int64_t *step,
                 const uint8_t *skip, void *newParam, void *newExpAvg,
                 void *newExpAvgSq, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weightDecay) {
  if (!checkFloatTensors(
          ctx, entry, dtype, {n},
          {param, grad, expAvg, expAvgSq, newParam, newExpAvg, newExpAvgSq}) ||
      !checkPointers(ctx, entry, 1, {step}) || isEmpty({n}))
    return;
  if (isSkipped(skip)) {
    copyIfDistinct(dtype, param, newParam, n);
    copyIfDistinct(dtype, expAvg, newExpAvg, n);
    copyIfDistinct(dtype, expAvgSq, newExpAvgSq, n);
    return;
  }
  AdamWCoefficients c;
  if (!getAdamWCoefficients(ctx, entry, step, lr, beta1, beta2, eps,
                            weightDecay, c))
    return;
  dispatchFloat(dtype, [&](auto storage) {
    using S = decltype(storage);
    using T = typename S::T;
    auto *p = static_cast<const T *>(param);
    auto *g = static_cast<const T *>(grad);
    auto *m = static_cast<const T *>(expAvg);
    auto *v = static_cast<const T *>(expAvgSq);
    auto *outP = static_cast<T *>(newParam);
    auto *outM = static_cast<T *>(newExpAvg);
    auto *outV = static_cast<T *>(newExpAvgSq);
    split(n, 1, [&](int64_t begin, int64_t end) {
    // Element i reads only index i of the inputs before writing index i
    // of the outputs, which may be the inputs themselves (runtime.h), so
    // the loop has no carried dependence and may be vectorized.
#pragma GCC ivdep
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

/// memopt_adamw8bit_update over memory the CPU reads.
template <typename Context, typename Split>
void adamw8bitUpdate(Context *ctx, const char *entry, const Split &split,
                     memopt_dtype dtype, const void *param, const void *grad,
                     const void *expAvg, const void *expAvgSq,
                     const int64_t *step, const uint8_t *skip, void *newParam,
                     void *newExpAvg, void *newExpAvgSq, int64_t n, double lr,
                     double beta1, double beta2, double eps,
                     double weightDecay) {
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {param, grad, newParam}) ||
      !checkPointers(ctx, entry, 1,
                     {expAvg, expAvgSq, newExpAvg, newExpAvgSq, step}) ||
      isEmpty({n}))
    return;
  if (isSkipped(skip)) {
    copyIfDistinct(dtype, param, newParam, n);
    copyBytesIfDistinct(expAvg, newExpAvg, quantizedStateBytes(n));
    copyBytesIfDistinct(expAvgSq, newExpAvgSq, quantizedStateBytes(n));
    return;
  }
  AdamWCoefficients c;
  if (!getAdamWCoefficients(ctx, entry, step, lr, beta1, beta2, eps,
                            weightDecay, c))
    return;
  static const float signedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
  static const float unsignedCode[256] = MEMOPT_DYNAMIC_UNSIGNED_CODE;
  // The dtype row admits f32 parameters only.
  auto *p = static_cast<const float *>(param);
  auto *g = static_cast<const float *>(grad);
  auto *outP = static_cast<float *>(newParam);
  auto *mIn = static_cast<const uint8_t *>(expAvg);
  auto *vIn = static_cast<const uint8_t *>(expAvgSq);
  auto *mOut = static_cast<uint8_t *>(newExpAvg);
  auto *vOut = static_cast<uint8_t *>(newExpAvgSq);
  // The codes past n in the last block are the code of 0: a checkpoint's
  // bytes depend on the state alone, and a ZeRO shard padded with zeros
  // holds the same bytes.
  uint8_t zeroM = nearestCode(signedCode, 0.0f);
  uint8_t zeroV = nearestCode(unsignedCode, 0.0f);
  split(quantizedBlocks(n), kQuantBlock, [&](int64_t first, int64_t last) {
    float m[kQuantBlock], v[kQuantBlock];
    for (int64_t b = first; b < last; ++b) {
      int64_t begin = b * kQuantBlock;
      int64_t count = std::min(kQuantBlock, n - begin);
      uint8_t *mCodes = quantizedCodes(mOut, b);
      uint8_t *vCodes = quantizedCodes(vOut, b);
      adamw8bitBlock(c, signedCode, unsignedCode, p + begin, g + begin,
                     quantizedCodes(mIn, b), *quantizedAbsmax(mIn, b),
                     quantizedCodes(vIn, b), *quantizedAbsmax(vIn, b), count,
                     outP + begin, m, v, mCodes, *quantizedAbsmax(mOut, b),
                     vCodes, *quantizedAbsmax(vOut, b));
      std::fill(mCodes + count, mCodes + kQuantBlock, zeroM);
      std::fill(vCodes + count, vCodes + kQuantBlock, zeroV);
    }
  });
}

} // namespace cpu
} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_HOSTUPDATE_H
