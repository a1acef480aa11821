//===- AttentionTest.cpp - fused attention tests --------------------------===//
//
// memopt_attention and memopt_attention_grad against a naive reference in
// double (whole score matrix, softmax, dropout through memopt_dropout's own
// mask) over query and key extents that span several blocks and end in
// partial ones: causal with sq != sk, finite and -inf mask values, masks
// broadcast through zero strides, d != dv, dropout, f16/bf16 storage; the
// exact dropout mask, fully masked rows, empty key sets, determinism, and
// the gradient against central differences of the forward.
//
// Tolerances follow from f32 rounding (unit u = 2^-24) with random-walk
// (square-root) growth over reductions: a score of q.k over d terms is off
// by about sqrt(d) u sum|q k|, which shifts each probability relatively by
// that much (twice: the score and the row maximum), exp(s - m) adds u|s - m|
// and the sums over keys sqrt(sk) u. An output is then off by that relative
// error times the sum of the magnitudes of its terms; a factor of 4 leaves
// room for the constants the estimate drops. A 16-bit result adds its own
// rounding, one half-unit relative (2^-8 for bf16, 2^-11 for f16). A wrong
// mask, scale or dropout draw moves outputs by whole probabilities, orders
// of magnitude more.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <algorithm>
#include <array>
#include <string>

using namespace memopt::test;

namespace {

constexpr double kF32Unit = 1.0 / (1 << 24);

/// The tolerance of a result `value` computed to within `f32Tolerance` and
/// stored in `dtype`: its rounding adds half a unit in the last place,
/// relative 2^-8 (bf16) or 2^-11 (f16), or 2^-25 absolute among f16's
/// subnormals.
double storedTolerance(memopt_dtype dtype, double value, double f32Tolerance) {
  if (dtype == MEMOPT_F32)
    return f32Tolerance;
  double unit = dtype == MEMOPT_BF16 ? 1.0 / (1 << 8) : 1.0 / (1 << 11);
  double floor = dtype == MEMOPT_F16 ? std::ldexp(1.0, -25) : 0.0;
  return f32Tolerance * (1 + unit) + unit * std::fabs(value) + floor;
}

/// The shape and attributes of one attention call.
struct AttentionCase {
  std::string name;
  int64_t batch, heads, sq, sk, d, dv;
  bool causal = false;
  double maskValue = -INFINITY;
  /// The I1 mask and its strides (empty: none).
  std::vector<uint8_t> mask;
  std::array<int64_t, 4> strides{0, 0, 0, 0};
  double dropoutP = 0.0;
  uint64_t seed = 0, stream = 0, offset = 0, step = 0;
  memopt_dtype dtype = MEMOPT_F32;

  int64_t problems() const { return batch * heads; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(d)); }
  const uint8_t *maskData() const {
    return mask.empty() ? nullptr : mask.data();
  }
  const int64_t *strideData() const {
    return mask.empty() ? nullptr : strides.data();
  }
  bool masked(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (causal && j > i)
      return true;
    return !mask.empty() && mask[b * strides[0] + h * strides[1] +
                                 i * strides[2] + j * strides[3]] != 0;
  }
};

/// Values of a case's tensors, representable in its dtype.
struct AttentionInputs {
  std::vector<float> q, k, v, gradOut;
};

/// The kernels' results (widened to f32).
struct AttentionResults {
  std::vector<float> out, lse, gradQ, gradK, gradV;
};

/// Reference values and their tolerances.
struct Expected {
  std::vector<double> value, tolerance;
};

struct AttentionReference {
  Expected out, lse, gradQ, gradK, gradV;
};

AttentionInputs makeInputs(memopt_context *ctx, std::mt19937 &rng,
                           const AttentionCase &c) {
  int64_t p = c.problems();
  // Scores of O(1..3) make the softmax neither uniform nor one-hot.
  AttentionInputs in{randomVector(rng, p * c.sq * c.d, -1.5f, 1.5f),
                     randomVector(rng, p * c.sk * c.d, -1.5f, 1.5f),
                     randomVector(rng, p * c.sk * c.dv),
                     randomVector(rng, p * c.sq * c.dv)};
  in.q = representable(ctx, c.dtype, in.q);
  in.k = representable(ctx, c.dtype, in.k);
  in.v = representable(ctx, c.dtype, in.v);
  in.gradOut = representable(ctx, c.dtype, in.gradOut);
  return in;
}

/// The factor memopt_dropout applies to each score element: 0 or
/// (float)(1 / (1 - p)), drawn by memopt_dropout itself on ones.
std::vector<float> dropoutFactors(memopt_context *ctx, const AttentionCase &c) {
  size_t n = static_cast<size_t>(c.problems() * c.sq * c.sk);
  std::vector<float> ones(n, 1.0f), factors(n, 1.0f);
  if (c.dropoutP > 0.0) {
    memopt_set_step(ctx, c.step);
    memopt_dropout(ctx, MEMOPT_F32, ones.data(), factors.data(), n, 1,
                   c.dropoutP,
                   c.seed, c.stream, c.offset);
  }
  return factors;
}

/// Runs the forward and, if `grad`, the backward on `in`.
AttentionResults runAttention(memopt_context *ctx, const AttentionCase &c,
                              const AttentionInputs &in, bool grad) {
  memopt_dtype t = c.dtype;
  int64_t p = c.problems();
  std::vector<uint8_t> q = toStorage(ctx, t, in.q), k = toStorage(ctx, t, in.k),
                       v = toStorage(ctx, t, in.v),
                       gradOut = toStorage(ctx, t, in.gradOut);
  std::vector<uint8_t> out(p * c.sq * c.dv * memopt_dtype_size(t));
  AttentionResults r;
  r.lse.assign(p * c.sq, 0.0f);
  memopt_set_step(ctx, c.step);
  memopt_attention(ctx, t, q.data(), k.data(), v.data(), c.maskData(),
                   c.strideData(), out.data(), r.lse.data(), c.batch, c.heads,
                   c.sq, c.sk, c.d, c.dv, c.scale(), c.causal, c.maskValue,
                   c.dropoutP, c.seed, c.stream, c.offset);
  r.out = fromStorage(ctx, t, out);
  if (!grad)
    return r;
  std::vector<uint8_t> gq(q.size()), gk(k.size()), gv(v.size());
  memopt_attention_grad(
      ctx, t, q.data(), k.data(), v.data(), c.maskData(), c.strideData(),
      out.data(), r.lse.data(), gradOut.data(), gq.data(), gk.data(), gv.data(),
      c.batch, c.heads, c.sq, c.sk, c.d, c.dv, c.scale(), c.causal, c.maskValue,
      c.dropoutP, c.seed, c.stream, c.offset);
  r.gradQ = fromStorage(ctx, t, gq);
  r.gradK = fromStorage(ctx, t, gk);
  r.gradV = fromStorage(ctx, t, gv);
  return r;
}

/// The reference of `c` on `in`: the whole score matrix in double. The
/// backward takes delta = grad_out . out from the kernel's `out`, as the
/// contract defines it.
AttentionReference referenceAttention(const AttentionCase &c,
                                      const AttentionInputs &in,
                                      const std::vector<float> &factors,
                                      const std::vector<float> &kernelOut) {
  const double u = kF32Unit, scale = c.scale();
  int64_t sq = c.sq, sk = c.sk, d = c.d, dv = c.dv;
  AttentionReference ref;
  for (Expected *e : {&ref.out, &ref.gradQ}) {
    size_t n = c.problems() * sq * (e == &ref.out ? dv : d);
    e->value.assign(n, 0.0);
    e->tolerance.assign(n, 0.0);
  }
  ref.lse.value.assign(c.problems() * sq, 0.0);
  ref.lse.tolerance.assign(c.problems() * sq, 0.0);
  for (Expected *e : {&ref.gradK, &ref.gradV}) {
    size_t n = c.problems() * sk * (e == &ref.gradK ? d : dv);
    e->value.assign(n, 0.0);
    e->tolerance.assign(n, 0.0);
  }
  std::vector<double> s(sq * sk), prob(sq * sk), ds(sq * sk), dsMag(sq * sk);
  std::vector<double> rowError(sq), scoreMag(sk);
  for (int64_t pi = 0; pi < c.problems(); ++pi) {
    int64_t b = pi / c.heads, h = pi % c.heads;
    const float *q = in.q.data() + pi * sq * d, *k = in.k.data() + pi * sk * d;
    const float *v = in.v.data() + pi * sk * dv;
    const float *gradOut = in.gradOut.data() + pi * sq * dv;
    const float *out = kernelOut.data() + pi * sq * dv;
    const float *factor = factors.data() + pi * sq * sk;
    // Forward.
    double maxError = 0.0;
    for (int64_t i = 0; i < sq; ++i) {
      double rowMax = -INFINITY;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0.0, mag = 0.0;
        for (int64_t x = 0; x < d; ++x) {
          dot += static_cast<double>(q[i * d + x]) * k[j * d + x];
          mag += std::fabs(static_cast<double>(q[i * d + x]) * k[j * d + x]);
        }
        bool isMasked = c.masked(b, h, i, j);
        s[i * sk + j] = isMasked ? c.maskValue : scale * dot;
        scoreMag[j] = isMasked ? std::fabs(c.maskValue) : scale * mag;
        rowMax = std::max(rowMax, s[i * sk + j]);
      }
      // The magnitude of the scores that carry weight.
      double rowMag = 0.0, sum = 0.0;
      for (int64_t j = 0; j < sk; ++j) {
        double weight = std::exp(s[i * sk + j] - rowMax);
        sum += weight;
        if (weight > 0.0)
          rowMag = std::max(rowMag, scoreMag[j]);
      }
      for (int64_t j = 0; j < sk; ++j)
        prob[i * sk + j] = std::exp(s[i * sk + j] - rowMax) / sum;
      double lse = rowMax + std::log(sum);
      rowError[i] = u * (2 * std::sqrt(double(d)) * rowMag + 2 * rowMag +
                         std::sqrt(double(sk)) + 2);
      maxError = std::max(maxError, rowError[i]);
      ref.lse.value[pi * sq + i] = lse;
      ref.lse.tolerance[pi * sq + i] = 4 * (rowError[i] + u * std::fabs(lse));
      for (int64_t x = 0; x < dv; ++x) {
        double value = 0.0, mag = 0.0;
        for (int64_t j = 0; j < sk; ++j) {
          double term = prob[i * sk + j] * factor[i * sk + j] * v[j * dv + x];
          value += term;
          mag += std::fabs(term);
        }
        size_t at = (pi * sq + i) * dv + x;
        ref.out.value[at] = value;
        ref.out.tolerance[at] =
            storedTolerance(c.dtype, value, 4 * rowError[i] * mag);
      }
    }
    // Backward: dS = P (dP' - delta), dP' = factor * (dO . v), 0 at masked
    // scores.
    for (int64_t i = 0; i < sq; ++i) {
      double delta = 0.0, deltaMag = 0.0;
      for (int64_t x = 0; x < dv; ++x) {
        delta += static_cast<double>(gradOut[i * dv + x]) * out[i * dv + x];
        deltaMag += std::fabs(static_cast<double>(gradOut[i * dv + x]) *
                              out[i * dv + x]);
      }
      for (int64_t j = 0; j < sk; ++j) {
        double dp = 0.0, dpMag = 0.0;
        for (int64_t x = 0; x < dv; ++x) {
          dp += static_cast<double>(gradOut[i * dv + x]) * v[j * dv + x];
          dpMag += std::fabs(static_cast<double>(gradOut[i * dv + x]) *
                             v[j * dv + x]);
        }
        // A masked score is the constant mask_value: no gradient.
        double f = factor[i * sk + j],
               pij = c.masked(b, h, i, j) ? 0.0 : prob[i * sk + j];
        ds[i * sk + j] = pij * (f * dp - delta);
        dsMag[i * sk + j] = pij * (f * dpMag + deltaMag);
      }
    }
    double gradError = maxError + u * std::sqrt(double(dv));
    auto accumulate = [&](Expected &e, size_t at, double value, double mag,
                          double terms) {
      e.value[at] = value;
      e.tolerance[at] = storedTolerance(
          c.dtype, value, 4 * (gradError + u * std::sqrt(terms)) * mag);
    };
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t x = 0; x < d; ++x) {
        double value = 0.0, mag = 0.0;
        for (int64_t j = 0; j < sk; ++j) {
          value += scale * ds[i * sk + j] * k[j * d + x];
          mag += scale * dsMag[i * sk + j] * std::fabs(k[j * d + x]);
        }
        accumulate(ref.gradQ, (pi * sq + i) * d + x, value, mag, sk);
      }
    for (int64_t j = 0; j < sk; ++j) {
      for (int64_t x = 0; x < d; ++x) {
        double value = 0.0, mag = 0.0;
        for (int64_t i = 0; i < sq; ++i) {
          value += scale * ds[i * sk + j] * q[i * d + x];
          mag += scale * dsMag[i * sk + j] * std::fabs(q[i * d + x]);
        }
        accumulate(ref.gradK, (pi * sk + j) * d + x, value, mag, sq);
      }
      for (int64_t x = 0; x < dv; ++x) {
        double value = 0.0, mag = 0.0;
        for (int64_t i = 0; i < sq; ++i) {
          double term = prob[i * sk + j] * factor[i * sk + j] *
                        static_cast<double>(gradOut[i * dv + x]);
          value += term;
          mag += std::fabs(term);
        }
        accumulate(ref.gradV, (pi * sk + j) * dv + x, value, mag, sq);
      }
    }
  }
  return ref;
}

/// Expects |actual - value| <= tolerance elementwise; reports the first few
/// failures and the largest error-to-tolerance ratio.
void expectWithin(const std::vector<float> &actual, const Expected &e,
                  const char *what) {
  ASSERT_EQ(actual.size(), e.value.size()) << what;
  int failures = 0;
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::fabs(actual[i] - e.value[i]);
    bool ok = error <= e.tolerance[i];
    worst = std::max(worst, error / std::max(e.tolerance[i], 1e-300));
    if (!ok && failures++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", expected "
                    << e.value[i] << " +- " << e.tolerance[i];
  }
  EXPECT_EQ(failures, 0) << what << ": worst error / tolerance " << worst;
}

/// Runs `c` forward and backward and compares with the reference.
void checkCase(memopt_context *ctx, std::mt19937 &rng, const AttentionCase &c) {
  SCOPED_TRACE(c.name);
  AttentionInputs in = makeInputs(ctx, rng, c);
  AttentionResults r = runAttention(ctx, c, in, /*grad=*/true);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  AttentionReference ref =
      referenceAttention(c, in, dropoutFactors(ctx, c), r.out);
  expectWithin(r.out, ref.out, "out");
  expectWithin(r.lse, ref.lse, "lse");
  expectWithin(r.gradQ, ref.gradQ, "grad_q");
  expectWithin(r.gradK, ref.gradK, "grad_k");
  expectWithin(r.gradV, ref.gradV, "grad_v");
}

/// A [batch, 1, 1, sk] key-padding mask broadcast over heads and queries:
/// problem b masks its last b + 1 keys.
void setKeyPadding(AttentionCase &c) {
  c.mask.assign(c.batch * c.sk, 0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = c.sk - 1 - b; j < c.sk; ++j)
      c.mask[b * c.sk + j] = 1;
  c.strides = {c.sk, 0, 0, 1};
}

TEST_F(RuntimeTest, AttentionMatchesReference) {
  AttentionCase plain{"plain", 2, 3, 70, 130, 24, 40};
  checkCase(ctx, rng, plain);

  AttentionCase causal{"causal", 1, 2, 150, 150, 32, 32};
  causal.causal = true;
  checkCase(ctx, rng, causal);

  // Top-left aligned: query i sees keys 0..i, so keys past sq never count.
  AttentionCase causalWide{"causal sq < sk", 2, 1, 100, 150, 16, 8};
  causalWide.causal = true;
  checkCase(ctx, rng, causalWide);

  AttentionCase causalTall{"causal sq > sk", 1, 2, 150, 70, 16, 24};
  causalTall.causal = true;
  checkCase(ctx, rng, causalTall);

  // A finite mask value close to the scores: masked keys keep weight, so no
  // causal block may be skipped.
  AttentionCase finite{"causal, mask value -2", 1, 2, 140, 140, 16, 16};
  finite.causal = true;
  finite.maskValue = -2.0;
  checkCase(ctx, rng, finite);

  // HF's finfo.min: masked keys weigh exactly 0 in f32.
  AttentionCase hugeNegative{
      "causal, mask value -3.4e38", 1, 1, 130, 130, 8, 8};
  hugeNegative.causal = true;
  hugeNegative.maskValue = -3.4e38;
  checkCase(ctx, rng, hugeNegative);
}

TEST_F(RuntimeTest, AttentionBroadcastMasks) {
  AttentionCase padding{"key padding, causal", 3, 2, 90, 90, 16, 12};
  padding.causal = true;
  setKeyPadding(padding);
  checkCase(ctx, rng, padding);

  // [1, heads, sq, sk] shared by the batch, with random holes.
  AttentionCase perHead{"per-head mask", 2, 2, 65, 80, 8, 16};
  perHead.mask.assign(perHead.heads * perHead.sq * perHead.sk, 0);
  std::bernoulli_distribution hole(0.3);
  for (size_t i = 0; i < perHead.mask.size(); ++i)
    perHead.mask[i] = hole(rng) && i % perHead.sk != 0;
  perHead.strides = {0, perHead.sq * perHead.sk, perHead.sk, 1};
  checkCase(ctx, rng, perHead);
}

TEST_F(RuntimeTest, AttentionDropout) {
  AttentionCase c{"dropout", 2, 2, 80, 100, 16, 20};
  c.causal = true;
  setKeyPadding(c);
  c.dropoutP = 0.25;
  c.seed = 0x5eed;
  c.stream = 7;
  c.offset = 1000;
  c.step = 3;
  checkCase(ctx, rng, c);
}

TEST_F(RuntimeTest, AttentionLowPrecisionStorage) {
  for (memopt_dtype dtype : {MEMOPT_BF16, MEMOPT_F16}) {
    AttentionCase c{
        dtype == MEMOPT_BF16 ? "bf16" : "f16", 2, 2, 70, 90, 16, 24};
    c.causal = true;
    c.dropoutP = 0.1;
    c.seed = 11;
    c.dtype = dtype;
    checkCase(ctx, rng, c);
  }
}

TEST_F(RuntimeTest, AttentionDropoutMaskIsMemoptDropouts) {
  // With v = identity, out[i, j] is the dropped probability p'[i, j]
  // itself: it is zero exactly where memopt_dropout drops element e.
  AttentionCase c{"identity values", 2, 3, 67, 70, 8, 70};
  c.dropoutP = 0.5;
  c.seed = 99;
  c.stream = 4;
  c.offset = 12345;
  c.step = 0x100000001ull;
  AttentionInputs in = makeInputs(ctx, rng, c);
  for (int64_t pi = 0; pi < c.problems(); ++pi)
    for (int64_t j = 0; j < c.sk; ++j)
      for (int64_t x = 0; x < c.dv; ++x)
        in.v[(pi * c.sk + j) * c.dv + x] = j == x ? 1.0f : 0.0f;
  AttentionResults r = runAttention(ctx, c, in, /*grad=*/false);
  std::vector<float> factors = dropoutFactors(ctx, c);
  ASSERT_EQ(r.out.size(), factors.size());
  int64_t dropped = 0;
  for (size_t e = 0; e < factors.size(); ++e) {
    ASSERT_EQ(r.out[e] == 0.0f, factors[e] == 0.0f) << "element " << e;
    dropped += factors[e] == 0.0f;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, static_cast<int64_t>(factors.size()));
}

TEST_F(RuntimeTest, AttentionFullyMaskedRows) {
  // Row 0 sees only key 0 under causality; the mask hides it too. Row 5 of
  // the second problem is masked entirely.
  AttentionCase c{"fully masked rows", 1, 2, 70, 70, 8, 8};
  c.causal = true;
  c.mask.assign(c.heads * c.sq * c.sk, 0);
  c.strides = {0, c.sq * c.sk, c.sk, 1};
  for (int64_t h = 0; h < c.heads; ++h)
    c.mask[(h * c.sq + 0) * c.sk + 0] = 1;
  for (int64_t j = 0; j < c.sk; ++j)
    c.mask[(1 * c.sq + 5) * c.sk + j] = 1;
  AttentionInputs in = makeInputs(ctx, rng, c);
  AttentionResults r = runAttention(ctx, c, in, /*grad=*/false);
  AttentionReference ref =
      referenceAttention(c, in, dropoutFactors(ctx, c), r.out);
  for (int64_t pi = 0; pi < c.problems(); ++pi) {
    for (int64_t i = 0; i < c.sq; ++i) {
      int64_t row = pi * c.sq + i;
      bool empty = i == 0 || (pi == 1 && i == 5);
      if (!empty) {
        EXPECT_NEAR(r.lse[row], ref.lse.value[row], ref.lse.tolerance[row]);
        for (int64_t x = 0; x < c.dv; ++x)
          EXPECT_NEAR(r.out[row * c.dv + x], ref.out.value[row * c.dv + x],
                      ref.out.tolerance[row * c.dv + x]);
        continue;
      }
      EXPECT_EQ(r.lse[row], -INFINITY) << "row " << row;
      for (int64_t x = 0; x < c.dv; ++x)
        EXPECT_TRUE(std::isnan(r.out[row * c.dv + x])) << "row " << row;
    }
  }
}

TEST_F(RuntimeTest, AttentionWithoutKeys) {
  // sk = 0: every output is an empty sum and lse is log(0).
  AttentionCase c{"no keys", 2, 1, 3, 0, 4, 5};
  AttentionInputs in = makeInputs(ctx, rng, c);
  AttentionResults r = runAttention(ctx, c, in, /*grad=*/true);
  expectOk();
  EXPECT_EQ(r.out, std::vector<float>(r.out.size(), 0.0f));
  EXPECT_EQ(r.lse, std::vector<float>(r.lse.size(), -INFINITY));
  EXPECT_EQ(r.gradQ, std::vector<float>(r.gradQ.size(), 0.0f));
}

TEST_F(RuntimeTest, AttentionGradIsDeterministic) {
  AttentionCase c{"determinism", 1, 2, 130, 140, 16, 16};
  c.causal = true;
  c.dropoutP = 0.2;
  AttentionInputs in = makeInputs(ctx, rng, c);
  AttentionResults first = runAttention(ctx, c, in, /*grad=*/true);
  AttentionResults second = runAttention(ctx, c, in, /*grad=*/true);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(first.gradQ, second.gradQ);
  EXPECT_EQ(first.gradK, second.gradK);
  EXPECT_EQ(first.gradV, second.gradV);
}

TEST_F(RuntimeTest, AttentionGradMatchesFiniteDifferences) {
  // L = sum(out .* r) of the f32 forward, with a mask, causality and
  // dropout (the mask is a fixed function of the element index).
  AttentionCase c{"finite differences", 1, 2, 5, 7, 3, 4};
  c.causal = true;
  c.mask.assign(c.sk, 0);
  c.mask[2] = 1;
  c.strides = {0, 0, 0, 1};
  c.dropoutP = 0.25;
  c.seed = 3;
  AttentionInputs in = makeInputs(ctx, rng, c);
  std::vector<float> weights = randomVector(rng, in.gradOut.size());
  in.gradOut = weights;
  AttentionResults r = runAttention(ctx, c, in, /*grad=*/true);
  auto lossOf = [&](auto field) {
    return [&, field](std::vector<float> &x) {
      AttentionInputs moved = in;
      moved.*field = x;
      return dot(runAttention(ctx, c, moved, /*grad=*/false).out, weights);
    };
  };
  expectGradient(lossOf(&AttentionInputs::q), in.q, r.gradQ, "grad_q");
  expectGradient(lossOf(&AttentionInputs::k), in.k, r.gradK, "grad_k");
  expectGradient(lossOf(&AttentionInputs::v), in.v, r.gradV, "grad_v");
}

} // namespace
