//===- HostOffloadCases.h - offload's host entries against loops -*- C++
//-*-===//
//
// The memopt_host_* entries of optimizer offload (runtime.h, "Host memory
// (offload)") on host vectors, byte for byte against the host runtime's
// loops written out here: each element loaded into f32 (Float16.h), updated
// by the shared formulas (OptimizerMath.h, QuantizeMath.h) and rounded once
// on the store. Random inputs of a few hundred elements (a partial 8-bit
// block) unless a caller asks for more (enough for the CUDA runtime's loops
// to split across threads), every float dtype, skip NULL, 0 and 1, out of
// place and in place, step 3 at an lr scale of 0.5. HostOffloadTest.cpp runs
// the cases on the host runtime, CudaHostOffloadTest.cpp on the CUDA runtime's
// CPU loops (which need no device), so the two runtimes' host entries give the
// same bits; the host runtime's optimizer tests check those loops against
// torch.optim's values.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_HOSTOFFLOADCASES_H
#define MEMOPT_UNITTESTS_RUNTIME_HOSTOFFLOADCASES_H

#include "memopt/runtime.h"
#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/DTypeRules.h"
#include "memopt/runtime/Float16.h"
#include "memopt/runtime/OptimizerMath.h"
#include "memopt/runtime/QuantizeMath.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace memopt {
namespace test {
namespace offload {

using Bytes = std::vector<uint8_t>;

/// Elements of each case: one full 8-bit block and a partial one.
constexpr int64_t kElements = 300;
/// The step count of the AdamW cases, and their lr scale.
constexpr int64_t kStep = 3;
constexpr double kLrScale = 0.5;

/// AdamW's and SGD's hyper-parameters.
struct Hyper {
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01,
         momentum = 0.9;
};

constexpr memopt_dtype kFloatDTypes[] = {MEMOPT_F32, MEMOPT_F16, MEMOPT_BF16};

/// Element i of a float tensor of `dtype`, in f32.
inline float loadFloat(memopt_dtype dtype, const Bytes &t, int64_t i) {
  if (dtype == MEMOPT_F32) {
    float x;
    std::memcpy(&x, t.data() + 4 * i, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, t.data() + 2 * i, 2);
  return dtype == MEMOPT_F16 ? runtime::halfBitsToFloat(bits)
                             : runtime::bfloat16BitsToFloat(bits);
}

/// Rounds `x` into element i of a float tensor of `dtype`.
inline void storeFloat(memopt_dtype dtype, Bytes &t, int64_t i, float x) {
  if (dtype == MEMOPT_F32) {
    std::memcpy(t.data() + 4 * i, &x, 4);
    return;
  }
  uint16_t bits = dtype == MEMOPT_F16 ? runtime::floatToHalfBits(x)
                                      : runtime::floatToBFloat16Bits(x);
  std::memcpy(t.data() + 2 * i, &bits, 2);
}

/// `n` uniform values in [lo, hi) stored as `dtype`.
inline Bytes randomFloats(std::mt19937 &rng, memopt_dtype dtype, int64_t n,
                          float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Bytes t(n * memopt_dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i)
    storeFloat(dtype, t, i, dist(rng));
  return t;
}

/// A packed 8-bit moment of `n` elements with random codes and absmaxes.
inline Bytes randomPacked(std::mt19937 &rng, int64_t n) {
  Bytes t(runtime::quantizedStateBytes(n));
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> absmax(1e-3f, 1.0f);
  for (int64_t b = 0; b < runtime::quantizedBlocks(n); ++b) {
    float x = absmax(rng);
    std::memcpy(t.data() + b * runtime::kQuantRecordBytes, &x, 4);
    for (int64_t j = 0; j < runtime::kQuantBlock; ++j)
      t[b * runtime::kQuantRecordBytes + 4 + j] =
          static_cast<uint8_t>(code(rng));
  }
  return t;
}

/// Names the first element of `elementBytes` bytes at which `got` and
/// `want` differ, and how many do.
inline void expectSameBytes(const Bytes &got, const Bytes &want,
                            size_t elementBytes, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t differing = 0, first = -1;
  for (size_t i = 0; i < got.size(); i += elementBytes) {
    if (std::memcmp(got.data() + i, want.data() + i, elementBytes) != 0) {
      ++differing;
      if (first < 0)
        first = static_cast<int64_t>(i / elementBytes);
    }
  }
  EXPECT_EQ(differing, 0) << what << ": " << differing
                          << " elements differ, the first at " << first;
}

/// The skip flags of the cases: NULL, 0 and 1.
struct SkipCase {
  const char *name;
  const uint8_t *skip;
  bool skipped;
};
inline std::vector<SkipCase> skipCases() {
  static const uint8_t zero = 0, one = 1;
  return {{"skip NULL", nullptr, false},
          {"skip 0", &zero, false},
          {"skip 1", &one, true}};
}

//===----------------------------------------------------------------------===//
// The host runtime's loops
//===----------------------------------------------------------------------===//

/// memopt_sgd_update's outputs as the host runtime computes them.
inline void referenceSgd(memopt_dtype dtype, int64_t n, const Hyper &h,
                         double lrScale, bool skipped, const Bytes &p,
                         const Bytes &g, const Bytes &buf, Bytes &newP,
                         Bytes &newBuf) {
  newP = p;
  newBuf = buf;
  if (skipped)
    return;
  runtime::SgdCoefficients c =
      runtime::sgdCoefficients(h.lr * lrScale, h.momentum, h.weightDecay);
  for (int64_t i = 0; i < n; ++i) {
    float b = loadFloat(dtype, buf, i);
    float pNew = runtime::sgdElement(c, loadFloat(dtype, p, i),
                                     loadFloat(dtype, g, i), b);
    storeFloat(dtype, newP, i, pNew);
    storeFloat(dtype, newBuf, i, b);
  }
}

/// memopt_adamw_update's outputs as the host runtime computes them.
inline void referenceAdamW(memopt_dtype dtype, int64_t n, const Hyper &h,
                           double lrScale, int64_t step, bool skipped,
                           const Bytes &p, const Bytes &g, const Bytes &m,
                           const Bytes &v, Bytes &newP, Bytes &newM,
                           Bytes &newV) {
  newP = p;
  newM = m;
  newV = v;
  if (skipped)
    return;
  runtime::AdamWCoefficients c = runtime::adamwCoefficients(
      h.lr * lrScale, h.beta1, h.beta2, h.eps, h.weightDecay, step);
  for (int64_t i = 0; i < n; ++i) {
    float mi = loadFloat(dtype, m, i), vi = loadFloat(dtype, v, i);
    float pNew = runtime::adamwElement(c, loadFloat(dtype, p, i),
                                       loadFloat(dtype, g, i), mi, vi);
    storeFloat(dtype, newP, i, pNew);
    storeFloat(dtype, newM, i, mi);
    storeFloat(dtype, newV, i, vi);
  }
}

/// memopt_adamw8bit_update's outputs (f32 parameters) as the host runtime
/// computes them: each block dequantized, updated and requantized, the
/// codes past n the code of 0.
inline void referenceAdamW8bit(int64_t n, const Hyper &h, double lrScale,
                               int64_t step, bool skipped, const Bytes &p,
                               const Bytes &g, const Bytes &m, const Bytes &v,
                               Bytes &newP, Bytes &newM, Bytes &newV) {
  newP = p;
  newM = m;
  newV = v;
  if (skipped)
    return;
  static const float signedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
  static const float unsignedCode[256] = MEMOPT_DYNAMIC_UNSIGNED_CODE;
  runtime::AdamWCoefficients c = runtime::adamwCoefficients(
      h.lr * lrScale, h.beta1, h.beta2, h.eps, h.weightDecay, step);
  const float *param = reinterpret_cast<const float *>(p.data());
  const float *grad = reinterpret_cast<const float *>(g.data());
  float *outP = reinterpret_cast<float *>(newP.data());
  float mScratch[runtime::kQuantBlock], vScratch[runtime::kQuantBlock];
  for (int64_t b = 0; b < runtime::quantizedBlocks(n); ++b) {
    int64_t begin = b * runtime::kQuantBlock;
    int64_t count = std::min(runtime::kQuantBlock, n - begin);
    uint8_t *mCodes = runtime::quantizedCodes(newM.data(), b);
    uint8_t *vCodes = runtime::quantizedCodes(newV.data(), b);
    runtime::adamw8bitBlock(c, signedCode, unsignedCode, param + begin,
                            grad + begin, runtime::quantizedCodes(m.data(), b),
                            *runtime::quantizedAbsmax(m.data(), b),
                            runtime::quantizedCodes(v.data(), b),
                            *runtime::quantizedAbsmax(v.data(), b), count,
                            outP + begin, mScratch, vScratch, mCodes,
                            *runtime::quantizedAbsmax(newM.data(), b), vCodes,
                            *runtime::quantizedAbsmax(newV.data(), b));
    std::fill(mCodes + count, mCodes + runtime::kQuantBlock,
              runtime::nearestCode(signedCode, 0.0f));
    std::fill(vCodes + count, vCodes + runtime::kQuantBlock,
              runtime::nearestCode(unsignedCode, 0.0f));
  }
}

//===----------------------------------------------------------------------===//
// Casts
//===----------------------------------------------------------------------===//

constexpr memopt_dtype kNumberDTypes[] = {MEMOPT_F32, MEMOPT_F16, MEMOPT_BF16,
                                          MEMOPT_I32, MEMOPT_I64};

inline bool isFloat(memopt_dtype dtype) {
  return dtype == MEMOPT_F32 || dtype == MEMOPT_F16 || dtype == MEMOPT_BF16;
}

/// Index i of an I32 or I64 tensor.
inline int64_t loadIndex(memopt_dtype dtype, const Bytes &t, int64_t i) {
  if (dtype == MEMOPT_I32) {
    int32_t x;
    std::memcpy(&x, t.data() + 4 * i, 4);
    return x;
  }
  int64_t x;
  std::memcpy(&x, t.data() + 8 * i, 8);
  return x;
}

inline void storeIndex(memopt_dtype dtype, Bytes &t, int64_t i, int64_t x) {
  if (dtype == MEMOPT_I32) {
    int32_t narrow = static_cast<int32_t>(x);
    std::memcpy(t.data() + 4 * i, &narrow, 4);
    return;
  }
  std::memcpy(t.data() + 8 * i, &x, 8);
}

/// `n` values of `dtype` for a cast: floats over a wide range with the
/// special values (NaN, the infinities, -0, f16's overflow threshold, a
/// subnormal, beyond i32's range) first; indices over their whole width.
inline Bytes castInput(std::mt19937 &rng, memopt_dtype dtype, int64_t n) {
  Bytes t(n * memopt_dtype_size(dtype));
  if (isFloat(dtype)) {
    const float inf = std::numeric_limits<float>::infinity();
    const float special[] = {std::nanf(""), inf,  -inf,   -0.0f, 65520.0f,
                             1e-7f,         3e9f, -3e19f, 0.5f,  -2.5f};
    std::uniform_real_distribution<float> dist(-7e4f, 7e4f);
    for (int64_t i = 0; i < n; ++i)
      storeFloat(dtype, t, i, i < 10 ? special[i] : dist(rng));
    return t;
  }
  std::uniform_int_distribution<int64_t> dist(
      dtype == MEMOPT_I32 ? std::numeric_limits<int32_t>::min()
                          : std::numeric_limits<int64_t>::min(),
      dtype == MEMOPT_I32 ? std::numeric_limits<int32_t>::max()
                          : std::numeric_limits<int64_t>::max());
  for (int64_t i = 0; i < n; ++i)
    storeIndex(dtype, t, i, dist(rng));
  return t;
}

/// memopt_cast's result as the host runtime computes it.
inline Bytes referenceCast(memopt_dtype in, const Bytes &x, memopt_dtype out,
                           int64_t n) {
  if (in == out)
    return x;
  Bytes y(n * memopt_dtype_size(out));
  for (int64_t i = 0; i < n; ++i) {
    if (!isFloat(in)) {
      int64_t index = loadIndex(in, x, i);
      if (isFloat(out))
        storeFloat(out, y, i, static_cast<float>(index));
      else
        storeIndex(out, y, i, index);
      continue;
    }
    float value = loadFloat(in, x, i);
    if (isFloat(out))
      storeFloat(out, y, i, value);
    else if (out == MEMOPT_I32)
      storeIndex(out, y, i, runtime::indexFromFloat<int32_t>(value));
    else
      storeIndex(out, y, i, runtime::indexFromFloat<int64_t>(value));
  }
  return y;
}

//===----------------------------------------------------------------------===//
// The cases
//===----------------------------------------------------------------------===//

/// Runs `update(in, out)` out of place (outputs that start as 0x5A bytes)
/// and in place (output k is input aliases[k]) and expects `want` in the
/// outputs, with no error recorded.
template <typename Update>
void expectUpdate(memopt_context *ctx, const std::vector<Bytes> &inputs,
                  const std::vector<size_t> &aliases,
                  const std::vector<Bytes> &want,
                  const std::vector<size_t> &elementBytes,
                  const std::vector<const char *> &names, Update update) {
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "in place" : "out of place");
    std::vector<Bytes> in = inputs, fresh;
    std::vector<Bytes *> out;
    for (size_t k = 0; k < want.size(); ++k)
      fresh.push_back(Bytes(want[k].size(), 0x5A));
    for (size_t k = 0; k < want.size(); ++k)
      out.push_back(inPlace ? &in[aliases[k]] : &fresh[k]);
    update(in, out);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    for (size_t k = 0; k < want.size(); ++k)
      expectSameBytes(*out[k], want[k], elementBytes[k], names[k]);
  }
}

/// memopt_host_sgd_update against referenceSgd.
inline void expectHostSgdMatchesTheLoop(memopt_context *ctx, std::mt19937 &rng,
                                        int64_t n = kElements) {
  const Hyper h;
  for (memopt_dtype dtype : kFloatDTypes) {
    for (const SkipCase &skip : skipCases()) {
      SCOPED_TRACE(std::string(runtime::dtypeName(dtype)) + ", " + skip.name);
      Bytes p = randomFloats(rng, dtype, n), g = randomFloats(rng, dtype, n),
            buf = randomFloats(rng, dtype, n);
      Bytes wantP, wantBuf;
      referenceSgd(dtype, n, h, kLrScale, skip.skipped, p, g, buf, wantP,
                   wantBuf);
      if (!skip.skipped) {
        EXPECT_NE(wantP, p);
      }
      size_t size = memopt_dtype_size(dtype);
      memopt_set_lr_scale(ctx, kLrScale);
      expectUpdate(ctx, {p, g, buf}, {0, 2}, {wantP, wantBuf}, {size, size},
                   {"param", "momentum_buffer"},
                   [&](std::vector<Bytes> &in, std::vector<Bytes *> &out) {
                     memopt_host_sgd_update(
                         ctx, dtype, in[0].data(), in[1].data(), in[2].data(),
                         skip.skip, out[0]->data(), out[1]->data(), n, h.lr,
                         h.momentum, h.weightDecay);
                   });
      memopt_set_lr_scale(ctx, 1.0);
    }
  }
}

/// memopt_host_adamw_update against referenceAdamW.
inline void expectHostAdamWMatchesTheLoop(memopt_context *ctx,
                                          std::mt19937 &rng,
                                          int64_t n = kElements) {
  const Hyper h;
  const int64_t step = kStep;
  for (memopt_dtype dtype : kFloatDTypes) {
    for (const SkipCase &skip : skipCases()) {
      SCOPED_TRACE(std::string(runtime::dtypeName(dtype)) + ", " + skip.name);
      Bytes p = randomFloats(rng, dtype, n), g = randomFloats(rng, dtype, n),
            m = randomFloats(rng, dtype, n, -0.1f, 0.1f),
            v = randomFloats(rng, dtype, n, 0.0f, 0.01f);
      Bytes wantP, wantM, wantV;
      referenceAdamW(dtype, n, h, kLrScale, step, skip.skipped, p, g, m, v,
                     wantP, wantM, wantV);
      if (!skip.skipped) {
        EXPECT_NE(wantP, p);
      }
      size_t size = memopt_dtype_size(dtype);
      memopt_set_lr_scale(ctx, kLrScale);
      expectUpdate(ctx, {p, g, m, v}, {0, 2, 3}, {wantP, wantM, wantV},
                   {size, size, size}, {"param", "exp_avg", "exp_avg_sq"},
                   [&](std::vector<Bytes> &in, std::vector<Bytes *> &out) {
                     memopt_host_adamw_update(
                         ctx, dtype, in[0].data(), in[1].data(), in[2].data(),
                         in[3].data(), &step, skip.skip, out[0]->data(),
                         out[1]->data(), out[2]->data(), n, h.lr, h.beta1,
                         h.beta2, h.eps, h.weightDecay);
                   });
      memopt_set_lr_scale(ctx, 1.0);
    }
  }
}

/// memopt_host_adamw8bit_update against referenceAdamW8bit.
inline void expectHostAdamW8bitMatchesTheLoop(memopt_context *ctx,
                                              std::mt19937 &rng,
                                              int64_t n = kElements) {
  const Hyper h;
  const int64_t step = kStep;
  for (const SkipCase &skip : skipCases()) {
    SCOPED_TRACE(skip.name);
    Bytes p = randomFloats(rng, MEMOPT_F32, n),
          g = randomFloats(rng, MEMOPT_F32, n), m = randomPacked(rng, n),
          v = randomPacked(rng, n);
    Bytes wantP, wantM, wantV;
    referenceAdamW8bit(n, h, kLrScale, step, skip.skipped, p, g, m, v, wantP,
                       wantM, wantV);
    if (!skip.skipped) {
      EXPECT_NE(wantP, p);
    }
    memopt_set_lr_scale(ctx, kLrScale);
    expectUpdate(ctx, {p, g, m, v}, {0, 2, 3}, {wantP, wantM, wantV}, {4, 1, 1},
                 {"param", "exp_avg", "exp_avg_sq"},
                 [&](std::vector<Bytes> &in, std::vector<Bytes *> &out) {
                   memopt_host_adamw8bit_update(
                       ctx, MEMOPT_F32, in[0].data(), in[1].data(),
                       in[2].data(), in[3].data(), &step, skip.skip,
                       out[0]->data(), out[1]->data(), out[2]->data(), n, h.lr,
                       h.beta1, h.beta2, h.eps, h.weightDecay);
                 });
    memopt_set_lr_scale(ctx, 1.0);
  }
}

/// memopt_host_cast against referenceCast, for every pair of float and
/// index dtypes; in place where the two have one size.
inline void expectHostCastMatchesTheLoop(memopt_context *ctx, std::mt19937 &rng,
                                         int64_t n = kElements) {
  for (memopt_dtype in : kNumberDTypes) {
    for (memopt_dtype out : kNumberDTypes) {
      SCOPED_TRACE(std::string(runtime::dtypeName(in)) + " to " +
                   runtime::dtypeName(out));
      Bytes x = castInput(rng, in, n);
      Bytes want = referenceCast(in, x, out, n);
      Bytes y(want.size(), 0x5A);
      memopt_host_cast(ctx, in, x.data(), out, y.data(), n);
      ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
          << memopt_get_error_message(ctx);
      expectSameBytes(y, want, memopt_dtype_size(out), "output");
      if (memopt_dtype_size(in) == memopt_dtype_size(out)) {
        memopt_host_cast(ctx, in, x.data(), out, x.data(), n);
        expectSameBytes(x, want, memopt_dtype_size(out), "in place");
      }
    }
  }
}

/// The accumulation entries (memopt_host_fill, _binary, _scale_by, _reduce)
/// for every float dtype: the elementwise ones byte for byte against the
/// loop (each element computed in f32 and rounded once on the store, as
/// both runtimes' device entries do), the reductions against a sum in long
/// double over [outer, reduced, inner] = [3, n, 1] and [2, n / 4, 4],
/// within one f32 ulp (a sum in double rounded once into f32).
inline void expectHostSumsMatchTheLoop(memopt_context *ctx, std::mt19937 &rng,
                                       int64_t n = kElements) {
  for (memopt_dtype dtype : kFloatDTypes) {
    SCOPED_TRACE(runtime::dtypeName(dtype));
    size_t size = memopt_dtype_size(dtype);
    Bytes a = randomFloats(rng, dtype, n), b = randomFloats(rng, dtype, n);
    Bytes want(a.size()), got(a.size(), 0x5A);

    memopt_host_fill(ctx, dtype, got.data(), n, 0.75);
    for (int64_t i = 0; i < n; ++i)
      storeFloat(dtype, want, i, 0.75f);
    expectSameBytes(got, want, size, "fill");

    for (memopt_binary_op op :
         {MEMOPT_BINARY_ADD, MEMOPT_BINARY_MUL, MEMOPT_BINARY_MAXIMUM}) {
      for (int64_t i = 0; i < n; ++i)
        storeFloat(dtype, want, i,
                   runtime::binaryValue(op, loadFloat(dtype, a, i),
                                        loadFloat(dtype, b, i)));
      memopt_host_binary(ctx, op, dtype, a.data(), b.data(), got.data(), n);
      expectSameBytes(got, want, size, "binary");
    }
    // In place, as a sum onto its accumulator.
    Bytes sum = a;
    for (int64_t i = 0; i < n; ++i)
      storeFloat(dtype, want, i,
                 loadFloat(dtype, a, i) + loadFloat(dtype, b, i));
    memopt_host_binary(ctx, MEMOPT_BINARY_ADD, dtype, sum.data(), b.data(),
                       sum.data(), n);
    expectSameBytes(sum, want, size, "add in place");

    const float factor = 0.3f;
    for (int64_t i = 0; i < n; ++i)
      storeFloat(dtype, want, i, loadFloat(dtype, a, i) * factor);
    memopt_host_scale_by(ctx, dtype, a.data(), &factor, got.data(), n);
    expectSameBytes(got, want, size, "scale_by");

    for (auto [outer, inner] : {std::pair<int64_t, int64_t>{3, 1}, {2, 4}}) {
      int64_t reduced = n / (outer * inner);
      for (memopt_reduce_op op :
           {MEMOPT_REDUCE_SUM, MEMOPT_REDUCE_SUM_SQUARES, MEMOPT_REDUCE_MAX}) {
        std::vector<float> out(outer * inner, -1.0f);
        memopt_host_reduce(ctx, op, dtype, a.data(), MEMOPT_F32, out.data(),
                           outer, reduced, inner);
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            long double exact = op == MEMOPT_REDUCE_MAX
                                    ? -std::numeric_limits<float>::infinity()
                                    : 0.0L;
            for (int64_t r = 0; r < reduced; ++r) {
              long double v =
                  loadFloat(dtype, a, (o * reduced + r) * inner + i);
              if (op == MEMOPT_REDUCE_MAX)
                exact = std::max(exact, v);
              else
                exact += op == MEMOPT_REDUCE_SUM_SQUARES ? v * v : v;
            }
            float e = static_cast<float>(exact);
            float ulp = std::nextafter(std::fabs(e), INFINITY) - std::fabs(e);
            EXPECT_NEAR(out[o * inner + i], e, ulp)
                << "reduce op " << op << " at [" << o << ", " << i << "]";
          }
        }
      }
    }
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
  }
}

/// A step of 0 is an error naming the host entry (read on the CPU, so
/// recorded at the call on either runtime).
inline void expectHostAdamWRejectsStepZero(memopt_context *ctx) {
  const int64_t step = 0;
  std::vector<float> t(4, 0.5f);
  memopt_host_adamw_update(ctx, MEMOPT_F32, t.data(), t.data(), t.data(),
                           t.data(), &step, nullptr, t.data(), t.data(),
                           t.data(), 4, 1e-3, 0.9, 0.999, 1e-8, 0.0);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_host_adamw_update: step 0 is not a 1-based update "
               "count");
  EXPECT_EQ(t, std::vector<float>(4, 0.5f));
  memopt_clear_error(ctx);
  std::vector<uint8_t> m(runtime::quantizedStateBytes(4), 0);
  memopt_host_adamw8bit_update(ctx, MEMOPT_F32, t.data(), t.data(), m.data(),
                               m.data(), &step, nullptr, t.data(), m.data(),
                               m.data(), 4, 1e-3, 0.9, 0.999, 1e-8, 0.0);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_host_adamw8bit_update: step 0 is not a 1-based update "
               "count");
  memopt_clear_error(ctx);
}

} // namespace offload
} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_HOSTOFFLOADCASES_H
