//===- QuantizedOptimizerTest.cpp - 8-bit AdamW against references --------===//
//
// The 8-bit blockwise AdamW of QuantizeMath.h and memopt_adamw8bit_update,
// each checked against a reference written here: the dynamic codes against
// their definition evaluated in double, nearestCode and quantizeBlock
// against a brute-force search over the 256 codes, and the update against
// an AdamW step that dequantizes, updates in f32 in the order runtime.h
// documents, and requantizes by brute force. Nearest-code choices may
// differ from the brute force only where two codes are equally near to
// within f32 rounding of the scaled value; the tests count those and allow
// a handful.
//
//===----------------------------------------------------------------------===//

#include "QuantizedStateTestUtil.h"
#include "RuntimeTestUtil.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

using namespace memopt::test;
using memopt::runtime::kQuantBlock;
using memopt::runtime::nearestCode;
using memopt::runtime::quantizeBlock;

namespace {

const float kSignedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
const float kUnsignedCode[256] = MEMOPT_DYNAMIC_UNSIGNED_CODE;

/// The dynamic code by its definition, in double and ascending: for each
/// decade d = 0..6, 10^(d-6) times the midpoints of `steps(d)` equal steps
/// of [0.1, 1] (2^d and both signs for the signed code, 2^(d+1) and
/// non-negative for the unsigned one), and 0 and 1.
std::vector<double> dynamicCodeByDefinition(bool isSigned) {
  std::vector<double> code = {0.0, 1.0};
  for (int d = 0; d <= 6; ++d) {
    int steps = isSigned ? 1 << d : 1 << (d + 1);
    double decade = std::pow(10.0, d - 6);
    for (int k = 0; k < steps; ++k) {
      double low = 0.1 + 0.9 * k / steps, high = 0.1 + 0.9 * (k + 1) / steps;
      double mid = decade * (low + high) / 2.0;
      code.push_back(mid);
      if (isSigned)
        code.push_back(-mid);
    }
  }
  std::sort(code.begin(), code.end());
  return code;
}

/// The definition rounded to f32: the table the references below use.
std::vector<float> codeTable(bool isSigned) {
  std::vector<double> exact = dynamicCodeByDefinition(isSigned);
  return std::vector<float>(exact.begin(), exact.end());
}

/// The index of the code nearest `y` by exhaustive search in double, the
/// lower on an exact tie.
int bruteNearest(const std::vector<float> &code, double y) {
  int best = 0;
  double bestDistance = std::numeric_limits<double>::infinity();
  for (int k = 0; k < static_cast<int>(code.size()); ++k) {
    double distance = std::fabs(y - static_cast<double>(code[k]));
    if (distance < bestDistance) {
      best = k;
      bestDistance = distance;
    }
  }
  return best;
}

/// Whether code `got` is as near `y` as code `want` to within the f32
/// rounding of a value of magnitude |y| (a near-tie, where an f32 search
/// may pick either).
bool nearTie(const std::vector<float> &code, double y, int got, int want) {
  double dGot = std::fabs(y - static_cast<double>(code[got]));
  double dWant = std::fabs(y - static_cast<double>(code[want]));
  return std::abs(got - want) == 1 &&
         std::fabs(dGot - dWant) <= std::ldexp(std::fabs(y) + 1e-30, -22);
}

double ulpOf(float x) {
  float a = std::fabs(x);
  return static_cast<double>(
      std::nextafter(a, std::numeric_limits<float>::infinity()) - a);
}

//===----------------------------------------------------------------------===//
// The dynamic codes, nearestCode and quantizeBlock
//===----------------------------------------------------------------------===//

TEST(DynamicCodeTest, CodesFollowTheirDefinition) {
  for (bool isSigned : {true, false}) {
    SCOPED_TRACE(isSigned ? "signed" : "unsigned");
    const float *code = isSigned ? kSignedCode : kUnsignedCode;
    std::vector<double> exact = dynamicCodeByDefinition(isSigned);
    ASSERT_EQ(exact.size(), 256u);
    for (int k = 1; k < 256; ++k)
      EXPECT_LT(code[k - 1], code[k]) << k;
    EXPECT_EQ(std::count(code, code + 256, 0.0f), 1);
    EXPECT_EQ(code[255], 1.0f);
    if (!isSigned) {
      EXPECT_EQ(code[0], 0.0f);
    }
    // Each code is its definition rounded to the nearest f32.
    for (int k = 0; k < 256; ++k) {
      EXPECT_EQ(bitsOf(code[k]), bitsOf(static_cast<float>(exact[k])))
          << "code " << k << " is " << code[k] << ", the definition gives "
          << exact[k];
    }
  }
  // Landmarks of the definition: the lowest signed code is minus the last
  // midpoint of the top decade, not -1; the smallest nonzero codes are the
  // first midpoints of the bottom decade.
  EXPECT_FLOAT_EQ(kSignedCode[0], -(1.0f - 0.45f / 64));
  EXPECT_FLOAT_EQ(kSignedCode[127], 0.0f);
  EXPECT_FLOAT_EQ(kSignedCode[128], 0.55e-6f);
  EXPECT_FLOAT_EQ(kUnsignedCode[1], 0.325e-6f);
}

/// nearestCode against the brute force: random values across and beyond
/// [-1, 1], every code value, every midpoint between neighbours (exact in
/// f32: the lower index) and the floats on either side of it.
TEST(DynamicCodeTest, NearestCodeIsTheBruteForceArgmin) {
  std::mt19937 rng(42);
  for (bool isSigned : {true, false}) {
    SCOPED_TRACE(isSigned ? "signed" : "unsigned");
    const float *code = isSigned ? kSignedCode : kUnsignedCode;
    std::vector<float> table = codeTable(isSigned);
    std::vector<float> probes;
    std::uniform_real_distribution<float> wide(-1.1f, 1.1f);
    std::uniform_real_distribution<double> exponent(-8.0, 0.0);
    for (int i = 0; i < 100000; ++i) {
      probes.push_back(wide(rng));
      // Log-uniform magnitudes reach the small decades, where the codes
      // are dense in absolute terms.
      float small = static_cast<float>(std::pow(10.0, exponent(rng)));
      probes.push_back(i % 2 ? small : -small);
    }
    int exactTies = 0;
    for (int k = 0; k < 256; ++k) {
      probes.push_back(code[k]);
      if (k == 255)
        continue;
      double mid = (static_cast<double>(code[k]) + code[k + 1]) / 2.0;
      float midF = static_cast<float>(mid);
      probes.push_back(midF);
      probes.push_back(std::nextafter(midF, -2.0f));
      probes.push_back(std::nextafter(midF, 2.0f));
      if (static_cast<double>(midF) == mid) {
        ++exactTies;
        EXPECT_EQ(nearestCode(code, midF), k)
            << "a tie between codes " << k << " and " << k + 1
            << " must go to the lower";
      }
    }
    EXPECT_GT(exactTies, 100);
    int nearTies = 0;
    for (float x : probes) {
      int got = nearestCode(code, x), want = bruteNearest(table, x);
      if (got == want)
        continue;
      ASSERT_TRUE(nearTie(table, x, got, want))
          << "nearestCode(" << x << ") = " << got << " (" << code[got]
          << "), the nearest is " << want << " (" << table[want] << ")";
      ++nearTies;
    }
    EXPECT_LE(nearTies, 8) << "of " << probes.size();
  }
}

/// A block of `count` values: signed normals whose magnitudes span five
/// decades, or their squares (non-negative, as the second moment).
std::vector<float> blockValues(std::mt19937 &rng, int64_t count,
                               bool isSigned) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> exponent(-5.0f, 0.0f);
  std::vector<float> values(count);
  for (float &x : values) {
    x = normal(rng) * std::pow(10.0f, exponent(rng));
    if (!isSigned)
      x *= x;
  }
  return values;
}

TEST(DynamicCodeTest, QuantizeBlockKeepsEachValueWithinHalfItsCodeGap) {
  std::mt19937 rng(7);
  int nearTies = 0, checked = 0;
  for (bool isSigned : {true, false}) {
    const float *code = isSigned ? kSignedCode : kUnsignedCode;
    std::vector<float> table = codeTable(isSigned);
    for (int64_t count : {int64_t(256), int64_t(44), int64_t(1)}) {
      for (int trial = 0; trial < 40; ++trial) {
        SCOPED_TRACE(std::string(isSigned ? "signed" : "unsigned") + " count " +
                     std::to_string(count) + " trial " + std::to_string(trial));
        std::vector<float> values = blockValues(rng, count, isSigned);
        // Half the signed blocks have their largest magnitude negative:
        // -absmax maps below the lowest signed code (-0.993).
        if (isSigned) {
          float &top = *std::max_element(
              values.begin(), values.end(),
              [](float a, float b) { return std::fabs(a) < std::fabs(b); });
          top = trial % 2 ? -std::fabs(top) : std::fabs(top);
        }
        std::vector<uint8_t> codes(count, 0xEE);
        float absmax = quantizeBlock(code, values.data(), count, codes.data());
        float want = 0.0f;
        for (float x : values)
          want = std::max(want, std::fabs(x));
        ASSERT_EQ(bitsOf(absmax), bitsOf(want));
        ASSERT_GT(absmax, 0.0f);
        for (int64_t i = 0; i < count; ++i) {
          double y = static_cast<double>(values[i]) / absmax;
          int c = codes[i];
          double error =
              std::fabs(static_cast<double>(table[c]) * absmax - values[i]);
          // Half the gap of the two codes around y (below the lowest
          // code: the distance to it).
          auto above = std::upper_bound(table.begin(), table.end(), y);
          double halfGap;
          if (above == table.begin())
            halfGap = table.front() - y;
          else if (above == table.end())
            halfGap = 0.0;
          else
            halfGap = (*above - static_cast<double>(*(above - 1))) / 2.0;
          EXPECT_LE(error,
                    (halfGap * 1.000001 + 0x1p-22 * std::fabs(y)) * absmax)
              << "element " << i << " = " << values[i] << " -> code " << c;
          int nearest = bruteNearest(table, y);
          if (c != nearest) {
            EXPECT_TRUE(nearTie(table, y, c, nearest)) << "element " << i;
            ++nearTies;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_LE(nearTies, 4) << "of " << checked;
}

TEST(DynamicCodeTest, ZeroBlockGivesTheCodeOfZero) {
  for (bool isSigned : {true, false}) {
    const float *code = isSigned ? kSignedCode : kUnsignedCode;
    int zero = static_cast<int>(std::find(code, code + 256, 0.0f) - code);
    std::vector<float> values(kQuantBlock, 0.0f);
    values[3] = -0.0f;
    std::vector<uint8_t> codes(kQuantBlock, 0xEE);
    float absmax =
        quantizeBlock(code, values.data(), kQuantBlock, codes.data());
    EXPECT_EQ(bitsOf(absmax), 0u);
    for (uint8_t c : codes)
      ASSERT_EQ(c, zero);
  }
}

//===----------------------------------------------------------------------===//
// memopt_adamw8bit_update
//===----------------------------------------------------------------------===//

struct Hyper {
  double lr, beta1, beta2, eps, weightDecay;
};

/// The expected outputs of one update, with the scaled value (moment /
/// absmax, in double) each code was chosen for.
struct Expected {
  std::vector<float> param;
  Packed m, v;
  std::vector<double> scaledM, scaledV;
  explicit Expected(int64_t n) : param(n), m(n), v(n), scaledM(n), scaledV(n) {}
};

/// AdamW on dequantized moments, as runtime.h documents memopt_adamw_update
/// (torch.optim.AdamW): scalars combined in double and rounded to f32 once;
/// per element, in f32, p *= 1 - lr wd, m = lerp(m, g, 1 - beta1) as
/// Tensor.lerp_ computes it, v = beta2 v + (1 - beta2) g^2, p -= lr /
/// (1 - beta1^t) * (m / (sqrt(v) / sqrt(1 - beta2^t) + eps)). Each block's
/// new moments are requantized with their max magnitude as the absmax and
/// the brute-force nearest code of moment / absmax.
Expected referenceUpdate(const Hyper &h, int64_t step,
                         const std::vector<float> &param,
                         const std::vector<float> &grad, const Packed &m,
                         const Packed &v) {
  static const std::vector<float> signedCode = codeTable(true);
  static const std::vector<float> unsignedCode = codeTable(false);
  int64_t n = static_cast<int64_t>(param.size());
  double t = static_cast<double>(step);
  const float decay = static_cast<float>(1.0 - h.lr * h.weightDecay);
  const float weight = static_cast<float>(1.0 - h.beta1);
  const float beta2 = static_cast<float>(h.beta2);
  const float oneMinusBeta2 = static_cast<float>(1.0 - h.beta2);
  const float stepSize =
      static_cast<float>(h.lr / (1.0 - std::pow(h.beta1, t)));
  const float correction2 =
      static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t)));
  const float eps = static_cast<float>(h.eps);

  Expected out(n);
  std::vector<float> newM(n), newV(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t b = i / kQuantBlock;
    float mi = signedCode[m.code(i)] * m.absmax(b);
    float vi = unsignedCode[v.code(i)] * v.absmax(b);
    float g = grad[i];
    float p = param[i] * decay;
    mi =
        weight < 0.5f ? mi + weight * (g - mi) : g - (g - mi) * (1.0f - weight);
    vi = vi * beta2 + oneMinusBeta2 * (g * g);
    float denom = std::sqrt(vi) / correction2 + eps;
    out.param[i] = p - stepSize * (mi / denom);
    newM[i] = mi;
    newV[i] = vi;
  }
  auto requantize = [&](const std::vector<float> &values,
                        const std::vector<float> &code, Packed &packed,
                        std::vector<double> &scaled) {
    for (int64_t b = 0; b < packed.blocks(); ++b) {
      int64_t begin = b * kQuantBlock, end = std::min(n, begin + kQuantBlock);
      float absmax = 0.0f;
      for (int64_t i = begin; i < end; ++i)
        absmax = std::max(absmax, std::fabs(values[i]));
      packed.setAbsmax(b, absmax);
      for (int64_t i = begin; i < end; ++i) {
        scaled[i] = absmax > 0.0f ? values[i] / double(absmax) : 0.0;
        packed.code(i) = static_cast<uint8_t>(bruteNearest(code, scaled[i]));
      }
    }
  };
  requantize(newM, signedCode, out.m, out.scaledM);
  requantize(newV, unsignedCode, out.v, out.scaledV);
  return out;
}

/// The same step in double from the same codes and absmaxes. The f32
/// parameter is within one and a half ulps of p (the roundings of
/// p (1 - lr wd) and of the final subtraction) plus the f32 error of the
/// update term lr_t m / d: the new m, an interpolation that may cancel, is
/// off by a few roundings of its inputs' magnitude (2^-22 (|m| + |g|));
/// d, a chain of roundings of non-negative values, by under 2^-20 of
/// itself.
void expectNearDoubleUpdate(const Hyper &h, int64_t step,
                            const std::vector<float> &param,
                            const std::vector<float> &grad, const Packed &m,
                            const Packed &v, const std::vector<float> &got) {
  static const std::vector<double> signedCode = dynamicCodeByDefinition(true);
  static const std::vector<double> unsignedCode =
      dynamicCodeByDefinition(false);
  double t = static_cast<double>(step);
  double stepSize = h.lr / (1 - std::pow(h.beta1, t));
  for (size_t i = 0; i < param.size(); ++i) {
    int64_t b = static_cast<int64_t>(i) / kQuantBlock;
    double mOld = signedCode[m.code(i)] * m.absmax(b);
    double vOld = unsignedCode[v.code(i)] * v.absmax(b);
    double g = grad[i];
    double mi = h.beta1 * mOld + (1 - h.beta1) * g;
    double vi = h.beta2 * vOld + (1 - h.beta2) * g * g;
    double denom = std::sqrt(vi) / std::sqrt(1 - std::pow(h.beta2, t)) + h.eps;
    double p = param[i] * (1 - h.lr * h.weightDecay) - stepSize * mi / denom;
    double termError =
        stepSize / denom *
        (0x1p-22 * (std::fabs(mOld) + std::fabs(g)) + 0x1p-20 * std::fabs(mi));
    double ulps = std::max(ulpOf(param[i]), ulpOf(got[i]));
    ASSERT_LE(std::fabs(got[i] - p), 1.5 * ulps + termError)
        << "element " << i << ": " << got[i] << " vs " << p;
  }
}

/// An update's outputs against the reference's: the parameters bit for bit
/// (the runtime's f32 operations are the reference's, in the same order),
/// the absmaxes exactly (the max of bit-identical moments), the codes
/// exactly but for near-ties, which `nearTies` counts.
void expectMatches(const Expected &want, const std::vector<float> &param,
                   const Packed &m, const Packed &v, int &nearTies) {
  static const std::vector<float> signedCode = codeTable(true);
  static const std::vector<float> unsignedCode = codeTable(false);
  int64_t n = static_cast<int64_t>(param.size());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(bitsOf(param[i]), bitsOf(want.param[i]))
        << "parameter " << i << ": " << param[i] << " vs " << want.param[i];
  for (int64_t b = 0; b < m.blocks(); ++b) {
    ASSERT_EQ(bitsOf(m.absmax(b)), bitsOf(want.m.absmax(b))) << "block " << b;
    ASSERT_EQ(bitsOf(v.absmax(b)), bitsOf(want.v.absmax(b))) << "block " << b;
  }
  auto compareCodes = [&](const Packed &got, const Packed &expected,
                          const std::vector<double> &scaled,
                          const std::vector<float> &code, const char *what) {
    for (int64_t i = 0; i < n; ++i) {
      if (got.code(i) == expected.code(i))
        continue;
      ASSERT_TRUE(nearTie(code, scaled[i], got.code(i), expected.code(i)))
          << what << " element " << i << ": code " << int(got.code(i))
          << ", the nearest to " << scaled[i] << " is "
          << int(expected.code(i));
      ++nearTies;
    }
  };
  compareCodes(m, want.m, want.scaledM, signedCode, "exp_avg");
  compareCodes(v, want.v, want.scaledV, unsignedCode, "exp_avg_sq");
}

class QuantizedAdamWTest : public RuntimeTest {
protected:
  struct Outputs {
    std::vector<float> param;
    Packed m, v;
  };

  /// memopt_adamw8bit_update out of place, into outputs filled with a
  /// marker (0x5A bytes).
  Outputs update(const Hyper &h, int64_t step, const std::vector<float> &param,
                 const std::vector<float> &grad, const Packed &m,
                 const Packed &v, const uint8_t *skip = nullptr) {
    int64_t n = static_cast<int64_t>(param.size());
    Outputs out{std::vector<float>(n), Packed(n, 0x5A), Packed(n, 0x5A)};
    std::memset(out.param.data(), 0x5A, 4 * n);
    memopt_adamw8bit_update(ctx, MEMOPT_F32, param.data(), grad.data(),
                            m.bytes.data(), v.bytes.data(), &step, skip,
                            out.param.data(), out.m.data(), out.v.data(), n,
                            h.lr, h.beta1, h.beta2, h.eps, h.weightDecay);
    return out;
  }
};

/// One full block and a partial one (n = 300), 16 blocks and 17 elements
/// (a last record of 17 codes and 239 of padding), and enough blocks for
/// parallelFor to split them among threads (n = 70000); for each, steps 1,
/// 2 and 9 of three settings: torch's defaults with decay, a beta1 below
/// 0.5 (lerp's second form) and a larger decay.
TEST_F(QuantizedAdamWTest, MatchesTheReferenceFromFreshAndUpdatedState) {
  const Hyper settings[] = {{1e-2, 0.9, 0.999, 1e-8, 0.01},
                            {3e-3, 0.3, 0.99, 1e-6, 0.0},
                            {1e-3, 0.95, 0.9999, 1e-8, 0.1}};
  int nearTies = 0;
  int64_t elements = 0;
  for (int64_t n : {int64_t(300), int64_t(4096 + 17), int64_t(70000)}) {
    for (const Hyper &h : settings) {
      SCOPED_TRACE("n " + std::to_string(n) + " beta1 " +
                   std::to_string(h.beta1));
      std::vector<float> param = randomVector(rng, n);
      Packed m(n), v(n);
      for (int64_t step : {1, 2, 9}) {
        SCOPED_TRACE("step " + std::to_string(step));
        std::vector<float> grad = spreadGradient(rng, n);
        Outputs got = update(h, step, param, grad, m, v);
        expectOk();
        Expected want = referenceUpdate(h, step, param, grad, m, v);
        expectMatches(want, got.param, got.m, got.v, nearTies);
        expectNearDoubleUpdate(h, step, param, grad, m, v, got.param);
        if (HasFatalFailure())
          return;
        // The next step starts from the runtime's state.
        param = got.param;
        m = got.m;
        v = got.v;
        elements += 2 * n;
      }
    }
  }
  EXPECT_LE(nearTies, 8) << "codes chosen differently at near-ties, of "
                         << elements;
}

/// A block whose moments are all zero (a zero gradient on fresh state)
/// stores absmax 0 and the code of zero, and leaves the parameter to the
/// decay alone; so do the elements past n of the last block.
TEST_F(QuantizedAdamWTest, ZeroGradientBlockStoresTheCodeOfZero) {
  const int64_t n = 300;
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.1};
  std::vector<float> param = randomVector(rng, n), grad(n, 0.0f);
  // Only the second block sees gradients.
  for (int64_t i = kQuantBlock; i < n; ++i)
    grad[i] = 0.5f - static_cast<float>(i % 7) / 7.0f;
  Packed m(n), v(n);
  Outputs got = update(h, 1, param, grad, m, v);
  EXPECT_EQ(got.m.absmax(0), 0.0f);
  EXPECT_EQ(got.v.absmax(0), 0.0f);
  EXPECT_GT(got.m.absmax(1), 0.0f);
  int zeroM = static_cast<int>(std::find(kSignedCode, kSignedCode + 256, 0.0f) -
                               kSignedCode);
  for (int64_t i = 0; i < kQuantBlock; ++i) {
    ASSERT_EQ(got.m.code(i), zeroM) << i;
    ASSERT_EQ(got.v.code(i), 0) << i;
    ASSERT_EQ(got.param[i], param[i] * static_cast<float>(1.0 - 1e-3)) << i;
  }
  // The last block's codes past n are the code of 0 too, whatever the
  // buffer held: the record a ZeRO shard padded with zeros computes.
  for (int64_t i = n; i < 2 * kQuantBlock; ++i) {
    ASSERT_EQ(got.m.code(i), zeroM) << i;
    ASSERT_EQ(got.v.code(i), 0) << i;
  }
}

/// The update in place (every output its input) writes the bytes the
/// update out of place writes.
TEST_F(QuantizedAdamWTest, InPlaceEqualsOutOfPlace) {
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.01};
  for (int64_t n : {int64_t(300), int64_t(4096 + 17), int64_t(70000)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> param = randomVector(rng, n);
    Outputs first =
        update(h, 1, param, spreadGradient(rng, n), Packed(n), Packed(n));
    std::vector<float> grad = spreadGradient(rng, n);
    Outputs apart = update(h, 2, first.param, grad, first.m, first.v);
    Outputs inPlace = first;
    int64_t step = 2;
    memopt_adamw8bit_update(ctx, MEMOPT_F32, inPlace.param.data(), grad.data(),
                            inPlace.m.data(), inPlace.v.data(), &step, nullptr,
                            inPlace.param.data(), inPlace.m.data(),
                            inPlace.v.data(), n, h.lr, h.beta1, h.beta2, h.eps,
                            h.weightDecay);
    expectOk();
    ASSERT_EQ(std::memcmp(inPlace.param.data(), apart.param.data(), 4 * n), 0);
    EXPECT_EQ(inPlace.m.bytes, apart.m.bytes);
    EXPECT_EQ(inPlace.v.bytes, apart.v.bytes);
    // The update in place changed them.
    EXPECT_NE(inPlace.m.bytes, first.m.bytes);
  }
}

/// A skipped step copies every input to its output, the packed states
/// whole (padding too), before it reads the step: a step of 0 is then no
/// error.
TEST_F(QuantizedAdamWTest, SkippedStepLeavesEverythingUnchanged) {
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.01};
  const int64_t n = 4096 + 17;
  std::vector<float> param = randomVector(rng, n);
  Outputs state =
      update(h, 1, param, spreadGradient(rng, n), Packed(n), Packed(n));
  std::vector<float> grad = spreadGradient(rng, n);
  const uint8_t skip = 1;
  for (int64_t step : {int64_t(2), int64_t(0)}) {
    Outputs apart = update(h, step, state.param, grad, state.m, state.v, &skip);
    expectOk();
    EXPECT_EQ(std::memcmp(apart.param.data(), state.param.data(), 4 * n), 0);
    EXPECT_EQ(apart.m.bytes, state.m.bytes);
    EXPECT_EQ(apart.v.bytes, state.v.bytes);
    Outputs inPlace = state;
    memopt_adamw8bit_update(
        ctx, MEMOPT_F32, inPlace.param.data(), grad.data(), inPlace.m.data(),
        inPlace.v.data(), &step, &skip, inPlace.param.data(), inPlace.m.data(),
        inPlace.v.data(), n, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay);
    expectOk();
    EXPECT_EQ(std::memcmp(inPlace.param.data(), state.param.data(), 4 * n), 0);
    EXPECT_EQ(inPlace.m.bytes, state.m.bytes);
    EXPECT_EQ(inPlace.v.bytes, state.v.bytes);
  }
  // skip = 0 is a step.
  const uint8_t noSkip = 0;
  Outputs stepped = update(h, 2, state.param, grad, state.m, state.v, &noSkip);
  EXPECT_NE(stepped.m.bytes, state.m.bytes);
}

TEST_F(QuantizedAdamWTest, StepBelowOneIsAnError) {
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.01};
  const int64_t n = 300;
  std::vector<float> param = randomVector(rng, n), grad = randomVector(rng, n);
  expectError = true;
  for (int64_t step : {int64_t(0), int64_t(-3)}) {
    Outputs out = update(h, step, param, grad, Packed(n), Packed(n));
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(memopt_get_error_message(ctx)),
              "memopt_adamw8bit_update: step " + std::to_string(step) +
                  " is not a 1-based update count");
    // Nothing was written.
    EXPECT_EQ(out.m.bytes, Packed(n, 0x5A).bytes);
    EXPECT_EQ(out.v.bytes, Packed(n, 0x5A).bytes);
    for (float p : out.param)
      ASSERT_EQ(bitsOf(p), 0x5A5A5A5Au);
    memopt_clear_error(ctx);
  }
}

/// memopt_set_lr_scale multiplies the lr: lr 0.02 at scale 0.25 is the
/// update at lr 0.005 byte for byte, and the reference's at lr 0.005.
TEST_F(QuantizedAdamWTest, LrScaleApplies) {
  const int64_t n = 4096 + 17;
  std::vector<float> param = randomVector(rng, n);
  const Hyper quarter{0.005, 0.9, 0.999, 1e-8, 0.1};
  const Hyper full{0.02, 0.9, 0.999, 1e-8, 0.1};
  Outputs state =
      update(quarter, 1, param, spreadGradient(rng, n), Packed(n), Packed(n));
  std::vector<float> grad = spreadGradient(rng, n);
  Outputs want = update(quarter, 2, state.param, grad, state.m, state.v);
  Outputs unscaled = update(full, 2, state.param, grad, state.m, state.v);
  memopt_set_lr_scale(ctx, 0.25);
  Outputs scaled = update(full, 2, state.param, grad, state.m, state.v);
  expectOk();
  EXPECT_EQ(std::memcmp(scaled.param.data(), want.param.data(), 4 * n), 0);
  EXPECT_EQ(scaled.m.bytes, want.m.bytes);
  EXPECT_EQ(scaled.v.bytes, want.v.bytes);
  EXPECT_NE(std::memcmp(unscaled.param.data(), want.param.data(), 4 * n), 0);
  int nearTies = 0;
  expectMatches(
      referenceUpdate(quarter, 2, state.param, grad, state.m, state.v),
      scaled.param, scaled.m, scaled.v, nearTies);
  EXPECT_LE(nearTies, 2);
}

/// The paper's parity claim on f(p) = |p - target|^2 / 2 (grad = p -
/// target): 200 steps of 8-bit AdamW and of memopt_adamw_update from the
/// same start. The coarsest code steps are 0.9/64 of the absmax for the
/// first moment and 0.9/128 for the second, so every 8-bit step reads
/// moments off by under 0.7% and 0.35% of their block's largest, and the
/// step lr m / sqrt(v) is off by about 1% where it matters (the elements
/// near their block's largest moments; the others move less). Summed over
/// the path, the two runs part by about 1% of the distance they travel
/// (1.6% seen at the worst step): bounded here by 5%. Both converge, the
/// 32-bit run to 2.4e-5 of its initial distance: the 8-bit one must come
/// within 1e-3, and the two within 1e-3 of each other.
TEST_F(QuantizedAdamWTest, TracksThirtyTwoBitAdamWOnAQuadratic) {
  const int64_t n = 5000, steps = 200;
  const Hyper h{0.05, 0.9, 0.999, 1e-8, 0.0};
  std::vector<float> target = randomVector(rng, n),
                     start = randomVector(rng, n);
  std::vector<float> p8 = start, p32 = start, m32(n, 0.0f), v32(n, 0.0f);
  Packed m8(n), v8(n);
  std::vector<float> grad(n);
  auto distance = [&](const std::vector<float> &a,
                      const std::vector<float> &b) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
      sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(sum);
  };
  const double initial = distance(start, target);
  double widest = 0.0;
  for (int64_t step = 1; step <= steps; ++step) {
    for (int64_t i = 0; i < n; ++i)
      grad[i] = p8[i] - target[i];
    memopt_adamw8bit_update(ctx, MEMOPT_F32, p8.data(), grad.data(), m8.data(),
                            v8.data(), &step, nullptr, p8.data(), m8.data(),
                            v8.data(), n, h.lr, h.beta1, h.beta2, h.eps,
                            h.weightDecay);
    for (int64_t i = 0; i < n; ++i)
      grad[i] = p32[i] - target[i];
    memopt_adamw_update(ctx, MEMOPT_F32, p32.data(), grad.data(), m32.data(),
                        v32.data(), &step, nullptr, p32.data(), m32.data(),
                        v32.data(), n, h.lr, h.beta1, h.beta2, h.eps,
                        h.weightDecay);
    widest = std::max(widest, distance(p8, p32) / initial);
  }
  expectOk();
  EXPECT_LT(distance(p32, target) / initial, 1e-3);
  EXPECT_LT(distance(p8, target) / initial, 1e-3);
  EXPECT_LT(distance(p8, p32) / initial, 1e-3);
  EXPECT_LT(widest, 5e-2);
  // The runs are not the same run: the 8-bit one did quantize.
  EXPECT_GT(widest, 1e-4);
}

} // namespace
