//===- ElementwiseTest.cpp - elementwise, reduction and shape kernels -----===//
//
// Forward kernels against double-precision formulas, activation gradients
// against central differences of the forward kernels, the hard activations,
// mish and clamp against closed forms at their kinks, bounds and NaN (as
// PyTorch 1.13 computes them), f16/bf16 storage,
// reductions, data movement (broadcast, transpose, slice, concat) against
// naive index loops, and embedding with repeated indices.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"
#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/Float16.h"

#include <cstring>
#include <limits>

using namespace memopt::runtime;
using namespace memopt::test;

namespace {

double unaryReference(memopt_unary_op op, double x) {
  switch (op) {
  case MEMOPT_UNARY_NEG:
    return -x;
  case MEMOPT_UNARY_EXP:
    return std::exp(x);
  case MEMOPT_UNARY_LOG:
    return std::log(x);
  case MEMOPT_UNARY_SQRT:
    return std::sqrt(x);
  case MEMOPT_UNARY_RSQRT:
    return 1.0 / std::sqrt(x);
  case MEMOPT_UNARY_TANH:
    return std::tanh(x);
  case MEMOPT_UNARY_SIGMOID:
    return 1.0 / (1.0 + std::exp(-x));
  case MEMOPT_UNARY_RELU:
    return x > 0 ? x : 0;
  case MEMOPT_UNARY_SILU:
    return x / (1.0 + std::exp(-x));
  case MEMOPT_UNARY_GELU:
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case MEMOPT_UNARY_GELU_TANH:
    return 0.5 * x *
           (1.0 +
            std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case MEMOPT_UNARY_HARDSWISH:
    return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
  case MEMOPT_UNARY_HARDSIGMOID:
    return std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
  case MEMOPT_UNARY_MISH:
    return x * std::tanh(std::log1p(std::exp(x)));
  case MEMOPT_UNARY_ABS:
    return std::fabs(x);
  case MEMOPT_UNARY_SIGN:
    return (x > 0) - (x < 0);
  case MEMOPT_UNARY_SIN:
    return std::sin(x);
  case MEMOPT_UNARY_COS:
    return std::cos(x);
  case MEMOPT_UNARY_ERF:
    return std::erf(x);
  case MEMOPT_UNARY_EXPM1:
    return std::expm1(x);
  case MEMOPT_UNARY_LOG1P:
    return std::log1p(x);
  case MEMOPT_UNARY_SOFTPLUS:
    return x > 20.0 ? x : std::log1p(std::exp(x));
  case MEMOPT_UNARY_TAN:
    return std::tan(x);
  case MEMOPT_UNARY_ASIN:
    return std::asin(x);
  case MEMOPT_UNARY_ACOS:
    return std::acos(x);
  case MEMOPT_UNARY_ATAN:
    return std::atan(x);
  case MEMOPT_UNARY_FLOOR:
    return std::floor(x);
  case MEMOPT_UNARY_CEIL:
    return std::ceil(x);
  case MEMOPT_UNARY_ROUND:
    return std::nearbyint(x);
  case MEMOPT_UNARY_TRUNC:
    return std::trunc(x);
  case MEMOPT_UNARY_SINC:
    return x == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x);
  }
  return 0;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Expects `actual[i]` to be `expected[i]` (NaN where that is NaN): the
/// nearest float, or within `tolerance` relative to |expected|.
void expectValues(const std::vector<float> &actual,
                  const std::vector<double> &expected, const char *what,
                  double tolerance = 0.0) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << what << " [" << i << "]";
    } else if (tolerance == 0.0) {
      EXPECT_FLOAT_EQ(actual[i], static_cast<float>(expected[i]))
          << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(actual[i], expected[i], tolerance * std::fabs(expected[i]))
          << what << " [" << i << "]";
    }
  }
}

TEST_F(RuntimeTest, UnaryMatchesReference) {
  std::vector<float> x = randomVector(rng, 64, 0.05f, 3.0f);
  for (size_t i = 0; i < x.size(); i += 2)
    if (i % 4 == 0)
      x[i] = -x[i];
  for (int op = MEMOPT_UNARY_NEG; op <= kLastUnaryOp; ++op) {
    auto kind = static_cast<memopt_unary_op>(op);
    bool positiveOnly = kind == MEMOPT_UNARY_LOG || kind == MEMOPT_UNARY_SQRT ||
                        kind == MEMOPT_UNARY_RSQRT || kind == MEMOPT_UNARY_LOG1P;
    bool unitOnly = kind == MEMOPT_UNARY_ASIN || kind == MEMOPT_UNARY_ACOS;
    std::vector<float> in = x;
    for (float &v : in) {
      if (positiveOnly)
        v = std::fabs(v);
      if (unitOnly)
        v /= 3.0f;
    }
    std::vector<float> out(in.size());
    memopt_unary(ctx, kind, MEMOPT_F32, in.data(), out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      double expected = unaryReference(kind, in[i]);
      EXPECT_NEAR(out[i], expected, 2e-6 * (1.0 + std::fabs(expected)))
          << "op " << op << " x " << in[i];
    }
  }
}

// Rounding: halves go to the even neighbour (torch.round), toward zero
// (trunc), down and up (floor, ceil), signed zeros kept; arcsin and
// arccos are NaN outside [-1, 1].
TEST_F(RuntimeTest, UnaryRoundingAndDomains) {
  std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -1.7f, 1e8f};
  auto apply = [&](memopt_unary_op op, const std::vector<float> &in) {
    std::vector<float> out(in.size());
    memopt_unary(ctx, op, MEMOPT_F32, in.data(), out.data(), in.size());
    return out;
  };
  expectValues(apply(MEMOPT_UNARY_ROUND, x), {0, 2, 2, -0.0, -2, -2, 1e8},
               "round");
  expectValues(apply(MEMOPT_UNARY_TRUNC, x), {0, 1, 2, -0.0, -2, -1, 1e8},
               "trunc");
  expectValues(apply(MEMOPT_UNARY_FLOOR, x), {0, 1, 2, -1, -3, -2, 1e8},
               "floor");
  expectValues(apply(MEMOPT_UNARY_CEIL, x), {1, 2, 3, -0.0, -2, -1, 1e8},
               "ceil");
  EXPECT_TRUE(std::signbit(apply(MEMOPT_UNARY_ROUND, {-0.5f})[0]));
  std::vector<float> outside = {1.5f, -1.0001f, kNaN};
  for (memopt_unary_op op : {MEMOPT_UNARY_ASIN, MEMOPT_UNARY_ACOS})
    expectValues(apply(op, outside), {kNaN, kNaN, kNaN}, "arc outside");
  expectValues(apply(MEMOPT_UNARY_ACOS, {-1.0f, 1.0f}), {M_PI, 0}, "acos");
}

// sinc is 1 at 0 (not 0 / 0), even, 2 / pi at 1/2, and at the integers
// only the rounding of pi x to f32 away from 0 (torch.sinc's float result);
// NaN and infinities give NaN.
TEST_F(RuntimeTest, SincAtItsSpecialPoints) {
  std::vector<float> x = {0.0f, -0.0f, 0.5f, -0.5f, 1e-30f};
  std::vector<float> out(x.size());
  memopt_unary(ctx, MEMOPT_UNARY_SINC, MEMOPT_F32, x.data(), out.data(),
               x.size());
  expectValues(out, {1, 1, 2 / M_PI, 2 / M_PI, 1}, "sinc", 1e-7);
  for (float n : {1.0f, -2.0f, 3.0f}) {
    float v;
    memopt_unary(ctx, MEMOPT_UNARY_SINC, MEMOPT_F32, &n, &v, 1);
    EXPECT_LT(std::fabs(v), 1e-7f) << "sinc(" << n << ")";
  }
  std::vector<float> bad = {kNaN, kInf, -kInf};
  std::vector<float> badOut(bad.size());
  memopt_unary(ctx, MEMOPT_UNARY_SINC, MEMOPT_F32, bad.data(), badOut.data(),
               bad.size());
  expectValues(badOut, {kNaN, kNaN, kNaN}, "sinc outside");
}

/// The largest error of memopt_unary's `op` in ulps of the exact value
/// `reference`, over 2^14 values in every binade of [-limit, limit]
/// (subnormals included).
double worstUlps(memopt_context *ctx, memopt_unary_op op,
                 double (*reference)(double), float limit) {
  std::vector<float> x;
  for (uint32_t bits = 1;; bits += 1u << 9) {
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    if (v > limit)
      break;
    x.push_back(v);
    x.push_back(-v);
  }
  std::vector<float> y(x.size());
  memopt_unary(ctx, op, MEMOPT_F32, x.data(), y.data(), x.size());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    double exact = reference(x[i]);
    float rounded = static_cast<float>(exact);
    if (std::isinf(rounded))
      continue;
    double up = std::nextafter(std::fabs(rounded), INFINITY);
    double ulp = up - std::fabs(rounded);
    worst = std::max(worst, std::fabs(y[i] - exact) / ulp);
  }
  return worst;
}

// exp and tanh are computed in double and rounded once (expf32, tanhf32):
// within half an ulp plus the double computation's error (under 1e-10 of
// the value), with their special values.
TEST_F(RuntimeTest, ExpAndTanhAreWithinHalfAnUlpPlusATinyMargin) {
  EXPECT_LE(worstUlps(ctx, MEMOPT_UNARY_TANH,
                      [](double x) { return std::tanh(x); }, 16.0f),
            0.501);
  EXPECT_LE(worstUlps(ctx, MEMOPT_UNARY_EXP,
                      [](double x) { return std::exp(x); }, 100.0f),
            0.501);
  float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f, -20.0f};
  float th[7], ex[7];
  memopt_unary(ctx, MEMOPT_UNARY_TANH, MEMOPT_F32, special, th, 7);
  memopt_unary(ctx, MEMOPT_UNARY_EXP, MEMOPT_F32, special, ex, 7);
  EXPECT_TRUE(th[0] == 0.0f && !std::signbit(th[0]));
  EXPECT_TRUE(th[1] == 0.0f && std::signbit(th[1]));
  EXPECT_EQ(th[2], 1.0f);
  EXPECT_EQ(th[3], -1.0f);
  EXPECT_TRUE(std::isnan(th[4]));
  EXPECT_EQ(th[5], 1.0f);
  EXPECT_EQ(th[6], -1.0f);
  EXPECT_EQ(ex[0], 1.0f);
  EXPECT_EQ(ex[1], 1.0f);
  EXPECT_EQ(ex[2], INFINITY);
  EXPECT_EQ(ex[3], 0.0f);
  EXPECT_TRUE(std::isnan(ex[4]));
  EXPECT_EQ(ex[5], INFINITY);
  EXPECT_EQ(ex[6], static_cast<float>(std::exp(-20.0)));
}

TEST_F(RuntimeTest, BinaryAndScalar) {
  std::vector<float> a = randomVector(rng, 32),
                     b = randomVector(rng, 32, 0.5f, 2.0f);
  b[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out(a.size());
  memopt_binary(ctx, MEMOPT_BINARY_ADD, MEMOPT_F32, a.data(), b.data(),
                out.data(), a.size());
  EXPECT_EQ(out[0], a[0] + b[0]);
  memopt_binary(ctx, MEMOPT_BINARY_SUB, MEMOPT_F32, a.data(), b.data(),
                out.data(), a.size());
  EXPECT_EQ(out[1], a[1] - b[1]);
  memopt_binary(ctx, MEMOPT_BINARY_MUL, MEMOPT_F32, a.data(), b.data(),
                out.data(), a.size());
  EXPECT_EQ(out[2], a[2] * b[2]);
  memopt_binary(ctx, MEMOPT_BINARY_DIV, MEMOPT_F32, a.data(), b.data(),
                out.data(), a.size());
  EXPECT_EQ(out[4], a[4] / b[4]);
  memopt_binary(ctx, MEMOPT_BINARY_MAXIMUM, MEMOPT_F32, a.data(), b.data(),
                out.data(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 3) {
      EXPECT_TRUE(std::isnan(out[i])); // NaN propagates, as torch.maximum
    } else {
      EXPECT_EQ(out[i], std::max(a[i], b[i]));
    }
  }
  // In place: out aliases lhs.
  std::vector<float> c = a;
  memopt_binary(ctx, MEMOPT_BINARY_ADD, MEMOPT_F32, c.data(), c.data(),
                c.data(), c.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(c[i], 2 * a[i]);
  memopt_scalar(ctx, MEMOPT_SCALAR_ADD, MEMOPT_F32, a.data(), 0.25, out.data(),
                a.size());
  EXPECT_EQ(out[5], a[5] + 0.25f);
  memopt_scalar(ctx, MEMOPT_SCALAR_MUL, MEMOPT_F32, a.data(), -3.0, out.data(),
                a.size());
  EXPECT_EQ(out[6], a[6] * -3.0f);
  memopt_scalar(ctx, MEMOPT_SCALAR_POW, MEMOPT_F32, b.data(), 2.0, out.data(),
                b.size());
  EXPECT_NEAR(out[7], b[7] * b[7], 1e-6);
}

TEST_F(RuntimeTest, HalfStorageComputesInF32AndRoundsOnce) {
  std::vector<float> x = randomVector(rng, 100, -4.0f, 4.0f);
  for (memopt_dtype dtype : {MEMOPT_F16, MEMOPT_BF16}) {
    std::vector<uint16_t> in(x.size()), out(x.size());
    memopt_cast(ctx, MEMOPT_F32, x.data(), dtype, in.data(), x.size());
    memopt_unary(ctx, MEMOPT_UNARY_TANH, dtype, in.data(), out.data(),
                 x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      float widened = dtype == MEMOPT_F16 ? halfBitsToFloat(in[i])
                                          : bfloat16BitsToFloat(in[i]);
      float y = std::tanh(widened);
      uint16_t expected =
          dtype == MEMOPT_F16 ? floatToHalfBits(y) : floatToBFloat16Bits(y);
      EXPECT_EQ(out[i], expected) << i;
    }
  }
}

TEST_F(RuntimeTest, ActivationGradientsMatchFiniteDifferences) {
  struct Case {
    memopt_unary_op forward;
    memopt_activation_grad_op backward;
    bool fromOutput;
  } cases[] = {{MEMOPT_UNARY_RELU, MEMOPT_GRAD_RELU, false},
               {MEMOPT_UNARY_SILU, MEMOPT_GRAD_SILU, false},
               {MEMOPT_UNARY_TANH, MEMOPT_GRAD_TANH, true},
               {MEMOPT_UNARY_SIGMOID, MEMOPT_GRAD_SIGMOID, true},
               {MEMOPT_UNARY_GELU, MEMOPT_GRAD_GELU, false},
               {MEMOPT_UNARY_GELU_TANH, MEMOPT_GRAD_GELU_TANH, false},
               {MEMOPT_UNARY_HARDSWISH, MEMOPT_GRAD_HARDSWISH, false},
               {MEMOPT_UNARY_HARDSIGMOID, MEMOPT_GRAD_HARDSIGMOID, false},
               {MEMOPT_UNARY_MISH, MEMOPT_GRAD_MISH, false}};
  std::vector<float> x = randomVector(rng, 24, 0.1f, 2.5f);
  for (size_t i = 0; i < x.size(); i += 2)
    x[i] = -x[i]; // keep away from relu's kink at 0
  std::vector<float> r = randomVector(rng, x.size());
  for (const Case &c : cases) {
    std::vector<float> y(x.size()), dx(x.size());
    memopt_unary(ctx, c.forward, MEMOPT_F32, x.data(), y.data(), x.size());
    memopt_activation_grad(ctx, c.backward, MEMOPT_F32,
                           c.fromOutput ? y.data() : x.data(), r.data(),
                           dx.data(), x.size());
    auto loss = [&](std::vector<float> &in) {
      std::vector<float> out(in.size());
      memopt_unary(ctx, c.forward, MEMOPT_F32, in.data(), out.data(),
                   in.size());
      return dot(out, r);
    };
    expectGradient(loss, x, dx, "activation", 1e-2f, 5e-3);
  }
}

TEST_F(RuntimeTest, HardActivationsAtTheirKinksAndNaN) {
  // The kinks -3 and 3 belong to the middle piece of hardswish's gradient
  // and to neither side of hardsigmoid's (hardswish_backward,
  // hardsigmoid_backward); a NaN input gets the gradient in the first and 0
  // in the second.
  std::vector<float> x = {-4, -3, -1.5f, 0, 1.5f, 3, 4, 6, kNaN};
  std::vector<float> g(x.size(), 2.0f), y(x.size()), dx(x.size());
  memopt_unary(ctx, MEMOPT_UNARY_HARDSWISH, MEMOPT_F32, x.data(), y.data(),
               x.size());
  expectValues(y, {0, 0, -0.375, 0, 1.125, 3, 4, 6, NAN}, "hardswish");
  memopt_activation_grad(ctx, MEMOPT_GRAD_HARDSWISH, MEMOPT_F32, x.data(),
                         g.data(), dx.data(), x.size());
  expectValues(dx, {0, -1, 0, 1, 2, 3, 2, 2, 2}, "hardswish_grad");
  memopt_unary(ctx, MEMOPT_UNARY_HARDSIGMOID, MEMOPT_F32, x.data(), y.data(),
               x.size());
  expectValues(y, {0, 0, 0.25, 0.5, 0.75, 1, 1, 1, NAN}, "hardsigmoid");
  memopt_activation_grad(ctx, MEMOPT_GRAD_HARDSIGMOID, MEMOPT_F32, x.data(),
                         g.data(), dx.data(), x.size());
  double third = 2.0 / 6.0;
  expectValues(dx, {0, 0, third, third, third, 0, 0, 0, 0}, "hardsigmoid_grad");
}

TEST_F(RuntimeTest, MishMatchesItsClosedFormAndStaysFinite) {
  // mish(0) = 0 with slope tanh(ln 2) = 3/5; far out mish is x (slope 1)
  // or tiny (x e^x, which log1p keeps and log(1 + e^x) would round to 0),
  // and e^x must not overflow into NaN.
  std::vector<float> x = {-30, -3, -1, 0, 1, 3, 6, 30, 100, kNaN};
  std::vector<float> g(x.size(), 1.0f), y(x.size()), dx(x.size());
  std::vector<double> mish, slope;
  for (float v : x) {
    double t = std::tanh(std::log1p(std::exp(static_cast<double>(v))));
    double s = 1.0 / (1.0 + std::exp(-static_cast<double>(v)));
    mish.push_back(v * t);
    slope.push_back(t + v * s * (1.0 - t * t));
  }
  EXPECT_EQ(slope[3], 0.6);
  EXPECT_EQ(mish[8], 100.0);
  memopt_unary(ctx, MEMOPT_UNARY_MISH, MEMOPT_F32, x.data(), y.data(),
               x.size());
  expectValues(y, mish, "mish", 1e-5);
  memopt_activation_grad(ctx, MEMOPT_GRAD_MISH, MEMOPT_F32, x.data(), g.data(),
                         dx.data(), x.size());
  expectValues(dx, slope, "mish_grad", 1e-5);
}

TEST_F(RuntimeTest, ScaleByMultipliesInF32AndMayWriteOverItsInput) {
  std::vector<float> x = randomVector(rng, 37), out(37);
  float factor = 0.3f;
  memopt_scale_by(ctx, MEMOPT_F32, x.data(), &factor, out.data(), 37);
  ASSERT_STREQ(memopt_get_error_message(ctx), "");
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(out[i], x[i] * factor) << i; // one f32 product, as g.mul_(c)
  memopt_scale_by(ctx, MEMOPT_F32, x.data(), &factor, x.data(), 37);
  EXPECT_EQ(x, out);
  // bf16: widened, multiplied in f32, rounded once.
  std::vector<uint16_t> bf(4), scaled(4);
  std::vector<float> wide = {1.5f, -2.25f, 3.0f, 0.0f};
  memopt_cast(ctx, MEMOPT_F32, wide.data(), MEMOPT_BF16, bf.data(), 4);
  float half = 0.5f;
  memopt_scale_by(ctx, MEMOPT_BF16, bf.data(), &half, scaled.data(), 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(bfloat16BitsToFloat(scaled[i]), wide[i] * 0.5f) << i;
}

TEST_F(RuntimeTest, ClampAndItsGradientAtTheBounds) {
  std::vector<float> x = {-2, -1, -0.5f, 0, 0.5f, 1, 2, kInf, kNaN};
  std::vector<float> g = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> y(x.size()), dx(x.size());
  struct Case {
    double lo, hi;
    std::vector<double> forward, inclusive, exclusive;
  } cases[] = {
      // Both bounds: a bound itself passes the gradient only when
      // inclusive; NaN stays NaN and gets 0 (clamp) or the gradient
      // (hardtanh).
      {-1,
       1,
       {-1, -1, -0.5, 0, 0.5, 1, 1, 1, NAN},
       {0, 2, 3, 4, 5, 6, 0, 0, 0},
       {0, 0, 3, 4, 5, 0, 0, 0, 9}},
      // A missing max (INFINITY) excludes nothing, not even +inf.
      {-1,
       INFINITY,
       {-1, -1, -0.5, 0, 0.5, 1, 2, INFINITY, NAN},
       {0, 2, 3, 4, 5, 6, 7, 8, 0},
       {0, 0, 3, 4, 5, 6, 7, 8, 9}},
      // A missing min.
      {-INFINITY,
       0,
       {-2, -1, -0.5, 0, 0, 0, 0, 0, NAN},
       {1, 2, 3, 4, 0, 0, 0, 0, 0},
       {1, 2, 3, 0, 0, 0, 0, 0, 9}},
      // relu6 (F.relu6, exclusive): 0 and 6 pass nothing.
      {0,
       6,
       {0, 0, 0, 0, 0.5, 1, 2, 6, NAN},
       {0, 0, 0, 4, 5, 6, 7, 0, 0},
       {0, 0, 0, 0, 5, 6, 7, 0, 9}},
      // A point range.
      {0.5,
       0.5,
       {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, NAN},
       {0, 0, 0, 0, 5, 0, 0, 0, 0},
       {0, 0, 0, 0, 0, 0, 0, 0, 9}},
  };
  for (const Case &c : cases) {
    std::string what =
        "clamp [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + "]";
    memopt_clamp(ctx, MEMOPT_F32, x.data(), c.lo, c.hi, y.data(), x.size());
    expectValues(y, c.forward, what.c_str());
    memopt_clamp_grad(ctx, MEMOPT_F32, x.data(), g.data(), c.lo, c.hi, 1,
                      dx.data(), x.size());
    expectValues(dx, c.inclusive, (what + " inclusive").c_str());
    memopt_clamp_grad(ctx, MEMOPT_F32, x.data(), g.data(), c.lo, c.hi, 0,
                      dx.data(), x.size());
    expectValues(dx, c.exclusive, (what + " exclusive").c_str());
  }
  // The bounds are rounded to f32, as PyTorch rounds a Python number for an
  // f32 tensor: 0.1f lies above the double 0.1 but is its f32 rounding.
  std::vector<float> tenth = {0.1f, 0.2f}, one = {1, 1}, out(2);
  memopt_clamp(ctx, MEMOPT_F32, tenth.data(), -1.0, 0.1, out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{0.1f, 0.1f}));
  memopt_clamp_grad(ctx, MEMOPT_F32, tenth.data(), one.data(), -1.0, 0.1, 1,
                    out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{1, 0}));
  // In place, on bf16 storage.
  std::vector<uint16_t> h(x.size());
  memopt_cast(ctx, MEMOPT_F32, x.data(), MEMOPT_BF16, h.data(), x.size());
  memopt_clamp(ctx, MEMOPT_BF16, h.data(), -1.0, 1.0, h.data(), h.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = bfloat16BitsToFloat(h[i]);
  expectValues(y, cases[0].forward, "bf16 clamp in place");
}

TEST_F(RuntimeTest, ReduceOverMiddleExtent) {
  const int64_t outer = 3, reduced = 5, inner = 4;
  std::vector<float> x = randomVector(rng, outer * reduced * inner);
  for (memopt_reduce_op op : {MEMOPT_REDUCE_SUM, MEMOPT_REDUCE_MEAN,
                             MEMOPT_REDUCE_MAX, MEMOPT_REDUCE_SUM_SQUARES}) {
    std::vector<float> out(outer * inner);
    memopt_reduce(ctx, op, MEMOPT_F32, x.data(), MEMOPT_F32, out.data(), outer,
                  reduced, inner);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        double sum = 0, squares = 0, best = -INFINITY;
        for (int64_t r = 0; r < reduced; ++r) {
          double v = x[(o * reduced + r) * inner + i];
          sum += v;
          squares += v * v;
          best = std::max(best, v);
        }
        double expected = op == MEMOPT_REDUCE_SUM    ? sum
                          : op == MEMOPT_REDUCE_MEAN ? sum / reduced
                          : op == MEMOPT_REDUCE_MAX  ? best
                                                     : squares;
        EXPECT_NEAR(out[o * inner + i], expected, 1e-6);
      }
    }
  }
  // bf16 input, f32 result: the sum of the widened values.
  std::vector<uint16_t> bf(x.size());
  memopt_cast(ctx, MEMOPT_F32, x.data(), MEMOPT_BF16, bf.data(), x.size());
  std::vector<float> out(outer * inner);
  memopt_reduce(ctx, MEMOPT_REDUCE_SUM, MEMOPT_BF16, bf.data(), MEMOPT_F32,
                out.data(), outer, reduced, inner);
  double sum = 0;
  for (int64_t r = 0; r < reduced; ++r)
    sum += bfloat16BitsToFloat(bf[r * inner]);
  EXPECT_NEAR(out[0], sum, 1e-6);
  // f32 input, bf16 result (the last pass of a split reduction): summed in
  // f32 or wider, rounded once to bf16.
  std::vector<uint16_t> narrow(outer * inner);
  memopt_reduce(ctx, MEMOPT_REDUCE_SUM, MEMOPT_F32, x.data(), MEMOPT_BF16,
                narrow.data(), outer, reduced, inner);
  ASSERT_STREQ(memopt_get_error_message(ctx), "");
  std::vector<uint16_t> rounded(outer * inner);
  memopt_reduce(ctx, MEMOPT_REDUCE_SUM, MEMOPT_F32, x.data(), MEMOPT_F32,
                out.data(), outer, reduced, inner);
  memopt_cast(ctx, MEMOPT_F32, out.data(), MEMOPT_BF16, rounded.data(),
              out.size());
  EXPECT_EQ(narrow, rounded);
}

TEST_F(RuntimeTest, WhereMaskedFillAndFill) {
  std::vector<float> a = {1, 2, 3, 4}, b = {-1, -2, -3, -4}, out(4);
  std::vector<uint8_t> cond = {1, 0, 0, 1};
  memopt_where(ctx, MEMOPT_F32, cond.data(), a.data(), b.data(), out.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{1, -2, -3, 4}));
  memopt_masked_fill(ctx, MEMOPT_F32, a.data(), cond.data(), -1e9, out.data(),
                     4);
  EXPECT_EQ(out, (std::vector<float>{-1e9f, 2, 3, -1e9f}));
  std::vector<uint16_t> half(4);
  memopt_fill(ctx, MEMOPT_F16, half.data(), 4, 1.0);
  EXPECT_EQ(half[3], 0x3c00);
  std::vector<int64_t> ints(3);
  memopt_fill(ctx, MEMOPT_I64, ints.data(), 3, 7.0);
  EXPECT_EQ(ints[2], 7);
}

TEST_F(RuntimeTest, CompareFollowsCOperators) {
  // Every ordered comparison with a NaN is false, ne is true; -0 == +0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {1, 2, 3, nan, nan, -0.0f, inf, -inf};
  std::vector<float> b = {2, 2, 1, 1, nan, 0.0f, inf, 5};
  const std::vector<std::pair<memopt_compare_op, std::vector<uint8_t>>>
      expected = {
          {MEMOPT_COMPARE_EQ, {0, 1, 0, 0, 0, 1, 1, 0}},
          {MEMOPT_COMPARE_NE, {1, 0, 1, 1, 1, 0, 0, 1}},
          {MEMOPT_COMPARE_LT, {1, 0, 0, 0, 0, 0, 0, 1}},
          {MEMOPT_COMPARE_LE, {1, 1, 0, 0, 0, 1, 1, 1}},
          {MEMOPT_COMPARE_GT, {0, 0, 1, 0, 0, 0, 0, 0}},
          {MEMOPT_COMPARE_GE, {0, 1, 1, 0, 0, 1, 1, 0}}};
  std::vector<uint16_t> ha(a.size()), hb(b.size());
  memopt_cast(ctx, MEMOPT_F32, a.data(), MEMOPT_BF16, ha.data(), a.size());
  memopt_cast(ctx, MEMOPT_F32, b.data(), MEMOPT_BF16, hb.data(), b.size());
  std::vector<uint8_t> out(a.size());
  for (const auto &[op, want] : expected) {
    memopt_compare(ctx, op, MEMOPT_F32, a.data(), b.data(), out.data(),
                   a.size());
    EXPECT_EQ(out, want) << op;
    memopt_compare(ctx, op, MEMOPT_BF16, ha.data(), hb.data(), out.data(),
                   a.size());
    EXPECT_EQ(out, want) << "bf16 " << op;
  }
  // f16 compares the stored values: 1 + 2^-10 and 1 differ.
  std::vector<uint16_t> h = {0x3c01, 0x3c00};
  memopt_compare(ctx, MEMOPT_COMPARE_GT, MEMOPT_F16, h.data(), h.data() + 1,
                 out.data(), 1);
  EXPECT_EQ(out[0], 1);
  // Indices compare exactly, beyond f32's 24 bits.
  std::vector<int64_t> i = {-100, 1, (int64_t(1) << 40) + 1};
  std::vector<int64_t> j = {-100, 2, int64_t(1) << 40};
  memopt_compare(ctx, MEMOPT_COMPARE_GT, MEMOPT_I64, i.data(), j.data(),
                 out.data(), 3);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 3),
            (std::vector<uint8_t>{0, 0, 1}));
  std::vector<int32_t> k = {-100, 3}, l = {-100, -100};
  memopt_compare(ctx, MEMOPT_COMPARE_NE, MEMOPT_I32, k.data(), l.data(),
                 out.data(), 2);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 2),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_STREQ(memopt_get_error_message(ctx), "");
}

TEST_F(RuntimeTest, BroadcastTransposeSliceConcat) {
  // broadcast [3, 1] -> [2, 3, 4] with dims [1, 2].
  std::vector<float> in = {1, 2, 3};
  int64_t inShape[] = {3, 1}, dims[] = {1, 2}, outShape[] = {2, 3, 4};
  std::vector<float> out(24);
  memopt_broadcast(ctx, MEMOPT_F32, in.data(), 2, inShape, dims, out.data(), 3,
                   outShape);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        EXPECT_EQ(out[(b * 3 + i) * 4 + j], in[i]);

  // transpose [2, 3, 4] with perm [2, 0, 1] -> [4, 2, 3].
  std::vector<int64_t> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = i;
  int64_t shape[] = {2, 3, 4}, perm[] = {2, 0, 1};
  std::vector<int64_t> t(24);
  memopt_transpose(ctx, MEMOPT_I64, x.data(), 3, shape, perm, t.data());
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(t[(a * 2 + b) * 3 + c], x[(b * 3 + c) * 4 + a]);

  // slice [2, 3, 4] starts [0, 1, 1] limits [2, 3, 4] strides [1, 1, 2]
  // -> [2, 2, 2] (ceil(3 / 2) = 2), then its gradient scatters back.
  int64_t starts[] = {0, 1, 1}, limits[] = {2, 3, 4}, strides[] = {1, 1, 2};
  std::vector<float> xf(24);
  for (int i = 0; i < 24; ++i)
    xf[i] = static_cast<float>(i);
  std::vector<float> s(8);
  memopt_slice(ctx, MEMOPT_F32, xf.data(), 3, shape, starts, limits, strides,
               s.data());
  std::vector<float> g(24, 99.0f);
  memopt_slice_grad(ctx, MEMOPT_F32, s.data(), 3, shape, starts, limits,
                    strides, g.data());
  int k = 0;
  std::vector<float> expectedGrad(24, 0.0f);
  for (int a = 0; a < 2; ++a)
    for (int b = 1; b < 3; ++b)
      for (int c = 1; c < 4; c += 2) {
        int flat = (a * 3 + b) * 4 + c;
        EXPECT_EQ(s[k++], xf[flat]);
        expectedGrad[flat] = xf[flat];
      }
  EXPECT_EQ(g, expectedGrad);

  // concat [2, 1, 3] and [2, 2, 3] along dim 1.
  std::vector<float> c0 = {1, 2, 3, 4, 5, 6};
  std::vector<float> c1 = {10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25};
  const void *inputs[] = {c0.data(), c1.data()};
  int64_t sizes[] = {1, 2};
  std::vector<float> cat(18);
  memopt_concat(ctx, MEMOPT_F32, 2, inputs, sizes, cat.data(), 2, 3);
  EXPECT_EQ(cat, (std::vector<float>{1, 2, 3, 10, 11, 12, 13, 14, 15, 4, 5, 6,
                                     20, 21, 22, 23, 24, 25}));
}

TEST_F(RuntimeTest, EmbeddingAccumulatesRepeatedIndices) {
  const int64_t rows = 5, dim = 3;
  std::vector<float> table = randomVector(rng, rows * dim);
  std::vector<int32_t> ids = {4, 0, 4, 2, 4};
  std::vector<float> out(ids.size() * dim);
  memopt_embedding(ctx, MEMOPT_F32, table.data(), MEMOPT_I32, ids.data(),
                   out.data(), ids.size(), rows, dim);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int j = 0; j < dim; ++j)
      EXPECT_EQ(out[i * dim + j], table[ids[i] * dim + j]);
  std::vector<float> grad = randomVector(rng, ids.size() * dim);
  std::vector<float> dTable(rows * dim, 123.0f);
  memopt_embedding_grad(ctx, MEMOPT_F32, grad.data(), MEMOPT_I32, ids.data(),
                        dTable.data(), ids.size(), rows, dim, -1);
  for (int j = 0; j < dim; ++j) {
    EXPECT_FLOAT_EQ(dTable[4 * dim + j],
                    grad[0 * dim + j] + grad[2 * dim + j] + grad[4 * dim + j]);
    EXPECT_EQ(dTable[0 * dim + j], grad[1 * dim + j]);
    EXPECT_EQ(dTable[1 * dim + j], 0.0f);
    EXPECT_EQ(dTable[3 * dim + j], 0.0f);
  }
  // The gradient is the VJP of the lookup: check it by finite differences.
  auto loss = [&](std::vector<float> &w) {
    std::vector<float> y(ids.size() * dim);
    memopt_embedding(ctx, MEMOPT_F32, w.data(), MEMOPT_I32, ids.data(),
                     y.data(), ids.size(), rows, dim);
    return dot(y, grad);
  };
  expectGradient(loss, table, dTable, "embedding");
}

TEST_F(RuntimeTest, EmbeddingGradSkipsPaddingIdx) {
  // As torch's embedding_backward: the padding row's gradient is zero and
  // the other rows are unchanged, in f32 and in bf16 (small integers and
  // halves: every sum is exact).
  const int64_t rows = 5, dim = 3, paddingIdx = 4;
  std::vector<int64_t> ids = {4, 0, 4, 2, 0, 4};
  std::vector<float> grad(ids.size() * dim);
  for (size_t i = 0; i < grad.size(); ++i)
    grad[i] = 0.5f * static_cast<float>(i) - 3.0f;
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_BF16}) {
    std::vector<uint8_t> out(rows * dim * memopt_dtype_size(dtype), 0xff);
    memopt_embedding_grad(ctx, dtype, toStorage(ctx, dtype, grad).data(),
                          MEMOPT_I64, ids.data(), out.data(), ids.size(), rows,
                          dim, paddingIdx);
    std::vector<float> dTable = fromStorage(ctx, dtype, out);
    for (int64_t j = 0; j < dim; ++j) {
      EXPECT_EQ(dTable[0 * dim + j], grad[1 * dim + j] + grad[4 * dim + j]);
      EXPECT_EQ(dTable[2 * dim + j], grad[3 * dim + j]);
      EXPECT_EQ(dTable[1 * dim + j], 0.0f);
      EXPECT_EQ(dTable[3 * dim + j], 0.0f);
      EXPECT_EQ(dTable[paddingIdx * dim + j], 0.0f) << "dtype " << dtype;
    }
  }
}

TEST_F(RuntimeTest, EmbeddingIndexOutOfRangeIsAnError) {
  expectError = true;
  std::vector<float> table(6), out(6);
  std::vector<int64_t> ids = {0, 3};
  memopt_embedding(ctx, MEMOPT_F32, table.data(), MEMOPT_I64, ids.data(),
                   out.data(), 2, 2, 3);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INDEX_OUT_OF_RANGE);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_embedding: index 3 at position 1 out of range [0, 2)");
}

} // namespace
