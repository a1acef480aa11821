//===- ConvTest.cpp - convolution and pooling tests -----------------------===//
//
// conv2d with stride, padding, dilation and groups against a direct loop in
// double; its two gradients against central differences and against the
// adjoint identities <conv(x, w), dy> = <x, dx> = <w, dw>; both through
// oneDNN and through memopt's im2col + GEMM. Pooling against
// PyTorch's definitions (floor mode, -inf / counted padding), gradients by
// finite differences and the first-maximum rule on ties.
//
//===----------------------------------------------------------------------===//

#include "OneDnnConv.h"
#include "RuntimeTestUtil.h"
#include "memopt/runtime/PoolMath.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

using namespace memopt::test;

namespace {

struct Conv {
  int64_t n = 2, c = 4, h = 5, w = 6, o = 6, kh = 3, kw = 2;
  int64_t sh = 2, sw = 1, ph = 1, pw = 1, dh = 1, dw = 2, groups = 2;
  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  int64_t inSize() const { return n * c * h * w; }
  int64_t filterSize() const { return o * (c / groups) * kh * kw; }
  int64_t outSize() const { return n * o * oh() * ow(); }

  void forward(memopt_context *ctx, const std::vector<float> &x,
               const std::vector<float> &f, std::vector<float> &y) const {
    y.assign(outSize(), 0.0f);
    memopt_conv2d(ctx, MEMOPT_F32, x.data(), f.data(), y.data(), n, c, h, w, o,
                  kh, kw, sh, sw, ph, pw, dh, dw, groups);
  }

  /// Calls tap(input index, filter index, output index) for every product
  /// of the convolution.
  template <typename Tap> void forEachTap(Tap &&tap) const {
    int64_t cg = c / groups, og = o / groups;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t y0 = 0; y0 < oh(); ++y0)
          for (int64_t x0 = 0; x0 < ow(); ++x0)
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  int64_t iy = y0 * sh - ph + i * dh,
                          ix = x0 * sw - pw + j * dw;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                    continue;
                  tap(((b * c + oc / og * cg + ci) * h + iy) * w + ix,
                      ((oc * cg + ci) * kh + i) * kw + j,
                      ((b * o + oc) * oh() + y0) * ow() + x0);
                }
  }

  std::vector<double> reference(const std::vector<float> &x,
                                const std::vector<float> &f) const {
    std::vector<double> y(outSize(), 0.0);
    forEachTap([&](int64_t xi, int64_t fi, int64_t yi) {
      y[yi] += static_cast<double>(x[xi]) * f[fi];
    });
    return y;
  }

  /// The input and filter gradients of the reference for output gradient
  /// `dy`, in double.
  void referenceGradients(const std::vector<float> &x,
                          const std::vector<float> &f,
                          const std::vector<float> &dy, std::vector<double> &dx,
                          std::vector<double> &df) const {
    dx.assign(inSize(), 0.0);
    df.assign(filterSize(), 0.0);
    forEachTap([&](int64_t xi, int64_t fi, int64_t yi) {
      dx[xi] += static_cast<double>(dy[yi]) * f[fi];
      df[fi] += static_cast<double>(dy[yi]) * x[xi];
    });
  }
};

/// Unit-stride convolutions whose output is as wide as the input (im2col
/// moves a whole shifted plane at once for them: rowsAreContiguous), and two
/// with a CNN's channel counts.
std::vector<Conv> sameWidthConvs() {
  std::vector<Conv> configs(5);
  for (Conv &cv : configs) {
    cv.sh = cv.sw = 1;
    cv.kh = cv.kw = 3;
    cv.ph = cv.pw = 1;
    cv.dh = cv.dw = 1;
  }
  configs[1].dh = configs[1].dw = 2; // dilated, padding 2
  configs[1].ph = configs[1].pw = 2;
  configs[2].ph = 0;                 // fewer output rows than input rows
  configs[3].kh = configs[3].kw = 1; // 1x1
  configs[3].ph = configs[3].pw = 0;
  configs[4].w = 2; // shifts as wide as a row: no column inside
  configs[4].kw = 5;
  configs[4].pw = 2;
  // CNN-like channel counts, for which oneDNN has JIT kernels in every
  // direction (it leaves the tiny grouped shapes above to im2col).
  Conv wide;
  wide.c = wide.o = 16;
  wide.groups = 1;
  wide.sh = wide.sw = 1;
  wide.kh = wide.kw = 3;
  wide.dh = wide.dw = 1;
  configs.push_back(wide);
  wide.o = 32;
  wide.sh = wide.sw = 2;
  configs.push_back(wide);
  return configs;
}

/// The convolution tests run twice: through oneDNN where it has a kernel
/// for the shape, and with MEMOPT_HOST_ONEDNN=0, through memopt's im2col +
/// GEMM alone.
class ConvTest : public RuntimeTest, public testing::WithParamInterface<bool> {
protected:
  void SetUp() override {
    if (!GetParam())
      setenv("MEMOPT_HOST_ONEDNN", "0", 1);
    RuntimeTest::SetUp();
  }
  void TearDown() override {
    // Each path must have been taken: oneDNN has JIT kernels for most of
    // the shapes here, and none may run with it off.
    if (GetParam())
      EXPECT_GT(memopt::host::oneDnnConvPlanCount(ctx), 0);
    else
      EXPECT_EQ(memopt::host::oneDnnConvPlanCount(ctx), 0);
    RuntimeTest::TearDown();
    unsetenv("MEMOPT_HOST_ONEDNN");
  }
};

INSTANTIATE_TEST_SUITE_P(Paths, ConvTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &info) {
                           return info.param ? "OneDnn" : "Im2col";
                         });

TEST_P(ConvTest, Conv2dMatchesDirectLoop) {
  std::vector<Conv> configs(3);
  configs[1].groups = 1;
  configs[1].sh = configs[1].sw = 1;
  configs[1].dh = 2;
  configs[1].dw = 1;
  configs[2].groups = 4; // depthwise-like: one input channel per group
  configs[2].o = 8;
  configs[2].ph = 0;
  configs[2].pw = 0;
  for (const Conv &cv : sameWidthConvs())
    configs.push_back(cv);
  for (const Conv &cv : configs) {
    SCOPED_TRACE(testing::Message()
                 << "kernel " << cv.kh << "x" << cv.kw << " stride " << cv.sh
                 << "," << cv.sw << " padding " << cv.ph << "," << cv.pw
                 << " dilation " << cv.dh << "," << cv.dw << " width " << cv.w);
    std::vector<float> x = randomVector(rng, cv.inSize());
    std::vector<float> f = randomVector(rng, cv.filterSize());
    std::vector<float> y;
    cv.forward(ctx, x, f, y);
    std::vector<double> ref = cv.reference(x, f);
    ASSERT_EQ(y.size(), ref.size());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], ref[i], 1e-5) << i;
  }
}

TEST_P(ConvTest, Conv2dGradientsMatchFiniteDifferences) {
  std::vector<Conv> configs = {Conv()};
  for (const Conv &cv : sameWidthConvs())
    configs.push_back(cv);
  for (const Conv &cv : configs) {
    SCOPED_TRACE(testing::Message()
                 << "kernel " << cv.kh << "x" << cv.kw << " padding " << cv.ph
                 << "," << cv.pw << " width " << cv.w);
    std::vector<float> x = randomVector(rng, cv.inSize());
    std::vector<float> f = randomVector(rng, cv.filterSize());
    std::vector<float> r = randomVector(rng, cv.outSize());
    std::vector<float> dx(cv.inSize()), df(cv.filterSize());
    memopt_conv2d_grad_input(ctx, MEMOPT_F32, r.data(), f.data(), dx.data(),
                             cv.n, cv.c, cv.h, cv.w, cv.o, cv.kh, cv.kw, cv.sh,
                             cv.sw, cv.ph, cv.pw, cv.dh, cv.dw, cv.groups);
    memopt_conv2d_grad_filter(ctx, MEMOPT_F32, r.data(), x.data(), df.data(),
                              cv.n, cv.c, cv.h, cv.w, cv.o, cv.kh, cv.kw, cv.sh,
                              cv.sw, cv.ph, cv.pw, cv.dh, cv.dw, cv.groups);
    expectOk();
    // Adjoint identities (exact up to f32 rounding).
    std::vector<float> y;
    cv.forward(ctx, x, f, y);
    double yr = dot(y, r);
    EXPECT_NEAR(dot(x, dx), yr, 1e-4 * (1 + std::fabs(yr)));
    EXPECT_NEAR(dot(f, df), yr, 1e-4 * (1 + std::fabs(yr)));
    // Central differences; conv is linear in each argument, so only rounding
    // limits the agreement.
    auto lossX = [&](std::vector<float> &xv) {
      std::vector<float> out;
      cv.forward(ctx, xv, f, out);
      return dot(out, r);
    };
    auto lossF = [&](std::vector<float> &fv) {
      std::vector<float> out;
      cv.forward(ctx, x, fv, out);
      return dot(out, r);
    };
    expectGradient(lossX, x, dx, "conv2d grad_input");
    expectGradient(lossF, f, df, "conv2d grad_filter");
  }
}

/// Two convolutions of one shape with different operands, called in turn
/// in one context as a step calls them (both forwards, both input
/// gradients, both filter gradients): each result is its own, whatever the
/// plans, reorders and workspace the first call left behind, and every
/// element of it is written (the outputs start as NaN). The shapes include
/// a stride-2 convolution whose last input row no window reads (oneDNN's
/// right padding is then negative) and a Fire module's 3x3 at 7x7.
TEST_P(ConvTest, IdenticalShapesKeepTheirOwnResults) {
  std::vector<Conv> configs(3);
  for (Conv &cv : configs) {
    cv.n = 4;
    cv.groups = 1;
    cv.sh = cv.sw = 1;
    cv.dh = cv.dw = 1;
    cv.kh = cv.kw = 3;
    cv.ph = cv.pw = 1;
  }
  configs[0].c = 32, configs[0].o = 128, configs[0].h = configs[0].w = 7;
  configs[1].c = 3, configs[1].o = 16, configs[1].h = configs[1].w = 16;
  configs[1].sh = configs[1].sw = 2, configs[1].ph = configs[1].pw = 0;
  configs[2].c = configs[2].o = 16, configs[2].h = configs[2].w = 8;
  configs[2].kh = configs[2].kw = 1, configs[2].ph = configs[2].pw = 0;
  configs[2].sh = configs[2].sw = 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Conv &cv : configs) {
    SCOPED_TRACE(testing::Message() << "channels " << cv.c << " -> " << cv.o
                                    << " kernel " << cv.kh << " stride "
                                    << cv.sh << " width " << cv.w);
    struct Operands {
      std::vector<float> x, f, dy, y, dx, df;
    } ops[2];
    for (Operands &op : ops) {
      op.x = randomVector(rng, cv.inSize());
      op.f = randomVector(rng, cv.filterSize());
      op.dy = randomVector(rng, cv.outSize());
      op.y.assign(cv.outSize(), nan);
      op.dx.assign(cv.inSize(), nan);
      op.df.assign(cv.filterSize(), nan);
    }
    auto args = [&](auto entry, const float *a, const float *b, float *out) {
      entry(ctx, MEMOPT_F32, a, b, out, cv.n, cv.c, cv.h, cv.w, cv.o, cv.kh,
            cv.kw, cv.sh, cv.sw, cv.ph, cv.pw, cv.dh, cv.dw, cv.groups);
    };
    for (Operands &op : ops)
      args(memopt_conv2d, op.x.data(), op.f.data(), op.y.data());
    for (Operands &op : ops)
      args(memopt_conv2d_grad_input, op.dy.data(), op.f.data(),
           op.dx.data());
    for (Operands &op : ops)
      args(memopt_conv2d_grad_filter, op.dy.data(), op.x.data(),
           op.df.data());
    expectOk();
    for (int k = 0; k < 2; ++k) {
      const Operands &op = ops[k];
      std::vector<double> y = cv.reference(op.x, op.f), dx, df;
      cv.referenceGradients(op.x, op.f, op.dy, dx, df);
      auto expectClose = [&](const std::vector<float> &got,
                             const std::vector<double> &want,
                             const char *what) {
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
              << "operands " << k << ", " << what << " element " << i;
      };
      expectClose(op.y, y, "forward");
      expectClose(op.dx, dx, "input gradient");
      expectClose(op.df, df, "filter gradient");
    }
  }
}

struct Pool {
  int64_t n = 2, c = 3, h = 7, w = 6, kh = 3, kw = 2, sh = 2, sw = 2, ph = 1,
          pw = 1;
  int64_t oh() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - kw) / sw + 1; }
  int64_t inSize() const { return n * c * h * w; }
  int64_t outSize() const { return n * c * oh() * ow(); }
};

TEST_F(RuntimeTest, PoolingMatchesDefinition) {
  Pool p;
  std::vector<float> x = randomVector(rng, p.inSize(), -3.0f, -1.0f);
  std::vector<float> maxOut(p.outSize()), avgOut(p.outSize());
  memopt_max_pool2d(ctx, MEMOPT_F32, x.data(), maxOut.data(), p.n, p.c, p.h,
                    p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);
  memopt_avg_pool2d(ctx, MEMOPT_F32, x.data(), avgOut.data(), p.n, p.c, p.h,
                    p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);
  for (int64_t pl = 0; pl < p.n * p.c; ++pl)
    for (int64_t y0 = 0; y0 < p.oh(); ++y0)
      for (int64_t x0 = 0; x0 < p.ow(); ++x0) {
        // All inputs are negative: a padded -inf never wins, and a padded 0
        // would (which catches zero padding in max pooling).
        double best = -INFINITY, sum = 0;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            int64_t iy = y0 * p.sh - p.ph + i, ix = x0 * p.sw - p.pw + j;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
              continue;
            double v = x[(pl * p.h + iy) * p.w + ix];
            best = std::max(best, v);
            sum += v;
          }
        int64_t k = (pl * p.oh() + y0) * p.ow() + x0;
        EXPECT_EQ(maxOut[k], static_cast<float>(best));
        // count_include_pad: the divisor is always kh * kw.
        EXPECT_NEAR(avgOut[k], sum / (p.kh * p.kw), 1e-6);
      }
}

TEST_F(RuntimeTest, PoolingGradientsMatchFiniteDifferences) {
  Pool p;
  // Distinct values at least 0.05 apart, so that +-h never changes a
  // window's maximum.
  std::vector<float> x(p.inSize());
  std::iota(x.begin(), x.end(), 0.0f);
  std::shuffle(x.begin(), x.end(), rng);
  for (float &v : x)
    v = v * 0.05f - 5.0f;
  std::vector<float> r = randomVector(rng, p.outSize());
  std::vector<float> dMax(p.inSize()), dAvg(p.inSize());
  memopt_max_pool2d_grad(ctx, MEMOPT_F32, r.data(), x.data(), dMax.data(), p.n,
                         p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);
  memopt_avg_pool2d_grad(ctx, MEMOPT_F32, r.data(), dAvg.data(), p.n, p.c, p.h,
                         p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);
  auto lossMax = [&](std::vector<float> &xv) {
    std::vector<float> y(p.outSize());
    memopt_max_pool2d(ctx, MEMOPT_F32, xv.data(), y.data(), p.n, p.c, p.h, p.w,
                      p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);
    return dot(y, r);
  };
  auto lossAvg = [&](std::vector<float> &xv) {
    std::vector<float> y(p.outSize());
    memopt_avg_pool2d(ctx, MEMOPT_F32, xv.data(), y.data(), p.n, p.c, p.h, p.w,
                      p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);
    return dot(y, r);
  };
  expectGradient(lossMax, x, dMax, "max_pool2d grad", 1e-2f);
  expectGradient(lossAvg, x, dAvg, "avg_pool2d grad", 1e-2f);
}

TEST_F(RuntimeTest, MaxPoolGradientGoesToFirstMaximumOnTies) {
  // One 2x4 plane of equal values, 2x2 windows, stride 2: each window's
  // gradient goes to its top-left element.
  std::vector<float> x(8, 1.0f), g = {3.0f, 5.0f}, dx(8);
  memopt_max_pool2d_grad(ctx, MEMOPT_F32, g.data(), x.data(), dx.data(), 1, 1,
                         2, 4, 2, 2, 2, 2, 0, 0);
  EXPECT_EQ(dx, (std::vector<float>{3, 0, 5, 0, 0, 0, 0, 0}));
}

TEST_F(RuntimeTest, MaxPoolPropagatesNaN) {
  // PyTorch's rule (torch 1.13, checked): a window with a NaN outputs NaN
  // and routes its gradient to its last NaN in row-major order, whatever the
  // larger values. One 2x6 plane, three 2x2 windows: NaN between larger
  // values, two NaNs, none.
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {5.0f, nan,  -1.0f, 2.0f, 0.0f, 7.0f, //
                          9.0f, 1.0f, nan,   nan,  7.0f, 3.0f};
  std::vector<float> y(3), g = {2.0f, 3.0f, 4.0f}, dx(12);
  memopt_max_pool2d(ctx, MEMOPT_F32, x.data(), y.data(), 1, 1, 2, 6, 2, 2, 2, 2,
                    0, 0);
  memopt_max_pool2d_grad(ctx, MEMOPT_F32, g.data(), x.data(), dx.data(), 1, 1,
                         2, 6, 2, 2, 2, 2, 0, 0);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 7.0f) << "the first of two equal maxima";
  EXPECT_EQ(dx, (std::vector<float>{0, 2, 0, 0, 0, 4, //
                                    0, 0, 0, 3, 0, 0}));
}

/// PoolMath.h's windowsCovering, which the CUDA gradients gather through,
/// against every window tested one by one.
TEST(PoolMathTest, WindowsCoveringAnInputElement) {
  int checked = 0;
  for (int64_t in = 1; in <= 9; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t stride = 1; stride <= 3; ++stride)
        for (int64_t pad = 0; pad <= k / 2; ++pad) {
          int64_t out = (in + 2 * pad - k) / stride + 1;
          for (int64_t i = 0; i < in; ++i) {
            int64_t first, last;
            memopt::runtime::windowsCovering(i, k, stride, pad, out, first,
                                             last);
            std::vector<int64_t> expected, got;
            for (int64_t o = 0; o < out; ++o)
              if (o * stride - pad <= i && i < o * stride - pad + k)
                expected.push_back(o);
            for (int64_t o = first; o < last; ++o)
              got.push_back(o);
            ASSERT_EQ(got, expected) << "in " << in << " k " << k << " stride "
                                     << stride << " pad " << pad << " i " << i;
            ++checked;
          }
        }
  EXPECT_GT(checked, 500);
}

} // namespace
