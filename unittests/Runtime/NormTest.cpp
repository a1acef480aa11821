//===- NormTest.cpp - softmax and normalisation tests ---------------------===//
//
// Softmax / log-softmax against double references (including inputs whose
// exponentials overflow f32 without the max subtraction), layer / RMS /
// batch normalisation against double references, batch-norm running
// statistics with the unbiased variance, and every gradient against central
// differences of its forward kernel. The formulas of NormMath.h, which the
// CUDA kernels run in f32, also against closed forms directly, in both of
// their instantiations.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"
#include "memopt/runtime/NormMath.h"

using namespace memopt::test;
using namespace memopt::runtime;

namespace {

TEST_F(RuntimeTest, SoftmaxIsStableAndMatchesReference) {
  const int64_t outer = 2, dim = 5, inner = 3;
  std::vector<float> x = randomVector(rng, outer * dim * inner, -3.0f, 3.0f);
  // Large logits: exp(1000) overflows f32 without the max subtraction.
  for (int64_t r = 0; r < dim; ++r)
    x[r * inner] = 1000.0f + r;
  std::vector<float> y(x.size()), ly(x.size());
  memopt_softmax(ctx, MEMOPT_F32, x.data(), y.data(), outer, dim, inner);
  memopt_log_softmax(ctx, MEMOPT_F32, x.data(), ly.data(), outer, dim, inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double maxValue = -INFINITY, sum = 0;
      for (int64_t r = 0; r < dim; ++r)
        maxValue = std::max<double>(maxValue, x[(o * dim + r) * inner + i]);
      for (int64_t r = 0; r < dim; ++r)
        sum += std::exp(x[(o * dim + r) * inner + i] - maxValue);
      for (int64_t r = 0; r < dim; ++r) {
        int64_t k = (o * dim + r) * inner + i;
        double logP = x[k] - maxValue - std::log(sum);
        ASSERT_TRUE(std::isfinite(y[k]) && std::isfinite(ly[k]));
        EXPECT_NEAR(y[k], std::exp(logP), 1e-6);
        EXPECT_NEAR(ly[k], logP, 2e-5 * (1 + std::fabs(logP)));
      }
    }
  // In place.
  std::vector<float> z = x;
  memopt_softmax(ctx, MEMOPT_F32, z.data(), z.data(), outer, dim, inner);
  EXPECT_EQ(z, y);
}

TEST_F(RuntimeTest, SoftmaxGradientsMatchFiniteDifferences) {
  const int64_t outer = 2, dim = 4, inner = 3;
  std::vector<float> x = randomVector(rng, outer * dim * inner, -2.0f, 2.0f);
  std::vector<float> r = randomVector(rng, x.size());
  for (bool isLog : {false, true}) {
    auto forward = [&](const std::vector<float> &in, std::vector<float> &out) {
      out.resize(in.size());
      if (isLog)
        memopt_log_softmax(ctx, MEMOPT_F32, in.data(), out.data(), outer, dim,
                           inner);
      else
        memopt_softmax(ctx, MEMOPT_F32, in.data(), out.data(), outer, dim,
                       inner);
    };
    std::vector<float> y, dx(x.size());
    forward(x, y);
    if (isLog)
      memopt_log_softmax_grad(ctx, MEMOPT_F32, y.data(), r.data(), dx.data(),
                              outer, dim, inner);
    else
      memopt_softmax_grad(ctx, MEMOPT_F32, y.data(), r.data(), dx.data(), outer,
                          dim, inner);
    auto loss = [&](std::vector<float> &in) {
      std::vector<float> out;
      forward(in, out);
      return dot(out, r);
    };
    expectGradient(loss, x, dx, isLog ? "log_softmax_grad" : "softmax_grad");
  }
}

TEST_F(RuntimeTest, LayerNormForwardAndGradients) {
  const int64_t rows = 3, cols = 6;
  const double eps = 1e-5;
  std::vector<float> x = randomVector(rng, rows * cols, -2.0f, 2.0f);
  std::vector<float> w = randomVector(rng, cols, 0.5f, 1.5f);
  std::vector<float> b = randomVector(rng, cols);
  std::vector<float> y(x.size()), mean(rows), rstd(rows);
  memopt_layer_norm(ctx, MEMOPT_F32, x.data(), MEMOPT_F32, w.data(), b.data(),
                    y.data(), mean.data(), rstd.data(), rows, cols, eps);
  for (int64_t i = 0; i < rows; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mu += x[i * cols + j];
    mu /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (x[i * cols + j] - mu) * (x[i * cols + j] - mu);
    var /= cols; // biased, as nn.LayerNorm
    double s = 1 / std::sqrt(var + eps);
    EXPECT_NEAR(mean[i], mu, 1e-6);
    EXPECT_NEAR(rstd[i], s, 1e-5 * s);
    for (int64_t j = 0; j < cols; ++j)
      EXPECT_NEAR(y[i * cols + j], (x[i * cols + j] - mu) * s * w[j] + b[j],
                  1e-5);
  }

  std::vector<float> r = randomVector(rng, x.size());
  std::vector<float> dx(x.size()), dw(cols), db(cols);
  memopt_layer_norm_grad(ctx, MEMOPT_F32, r.data(), x.data(), MEMOPT_F32,
                         w.data(), mean.data(), rstd.data(), dx.data(),
                         dw.data(), db.data(), rows, cols);
  auto loss = [&](const std::vector<float> &xv, const std::vector<float> &wv,
                  const std::vector<float> &bv) {
    std::vector<float> out(xv.size()), m(rows), s(rows);
    memopt_layer_norm(ctx, MEMOPT_F32, xv.data(), MEMOPT_F32, wv.data(),
                      bv.data(), out.data(), m.data(), s.data(), rows, cols,
                      eps);
    return dot(out, r);
  };
  expectGradient([&](std::vector<float> &v) { return loss(v, w, b); }, x, dx,
                 "layer_norm grad_input");
  expectGradient([&](std::vector<float> &v) { return loss(x, v, b); }, w, dw,
                 "layer_norm grad_weight");
  expectGradient([&](std::vector<float> &v) { return loss(x, w, v); }, b, db,
                 "layer_norm grad_bias");
}

TEST_F(RuntimeTest, RmsNormForwardAndGradients) {
  const int64_t rows = 3, cols = 5;
  const double eps = 1e-6;
  std::vector<float> x = randomVector(rng, rows * cols, -2.0f, 2.0f);
  std::vector<float> w = randomVector(rng, cols, 0.5f, 1.5f);
  std::vector<float> y(x.size()), rstd(rows);
  memopt_rms_norm(ctx, MEMOPT_F32, x.data(), MEMOPT_F32, w.data(), y.data(),
                  rstd.data(), rows, cols, eps);
  for (int64_t i = 0; i < rows; ++i) {
    double ms = 0;
    for (int64_t j = 0; j < cols; ++j)
      ms += static_cast<double>(x[i * cols + j]) * x[i * cols + j];
    double s = 1 / std::sqrt(ms / cols + eps);
    EXPECT_NEAR(rstd[i], s, 1e-5 * s);
    for (int64_t j = 0; j < cols; ++j)
      EXPECT_NEAR(y[i * cols + j], x[i * cols + j] * s * w[j], 1e-5);
  }
  std::vector<float> r = randomVector(rng, x.size());
  std::vector<float> dx(x.size()), dw(cols);
  memopt_rms_norm_grad(ctx, MEMOPT_F32, r.data(), x.data(), MEMOPT_F32,
                       w.data(), rstd.data(), dx.data(), dw.data(), rows, cols);
  auto loss = [&](const std::vector<float> &xv, const std::vector<float> &wv) {
    std::vector<float> out(xv.size()), s(rows);
    memopt_rms_norm(ctx, MEMOPT_F32, xv.data(), MEMOPT_F32, wv.data(),
                    out.data(), s.data(), rows, cols, eps);
    return dot(out, r);
  };
  expectGradient([&](std::vector<float> &v) { return loss(v, w); }, x, dx,
                 "rms_norm grad_input");
  expectGradient([&](std::vector<float> &v) { return loss(x, v); }, w, dw,
                 "rms_norm grad_weight");
}

TEST_F(RuntimeTest, BatchNormTrainingStatisticsAndGradients) {
  const int64_t batch = 3, channels = 2, spatial = 4, count = batch * spatial;
  const double eps = 1e-5, momentum = 0.1;
  std::vector<float> x = randomVector(rng, batch * channels * spatial, -2, 2);
  std::vector<float> w = {1.5f, 0.7f}, b = {0.1f, -0.3f};
  std::vector<float> runMean = {0.5f, -1.0f}, runVar = {2.0f, 0.5f};
  std::vector<float> y(x.size()), mean(channels), rstd(channels);
  std::vector<float> newMean = runMean, newVar = runVar;
  // new running stats written in place over the old ones.
  memopt_batch_norm(ctx, MEMOPT_F32, x.data(), w.data(), b.data(),
                    newMean.data(), newVar.data(), y.data(), mean.data(),
                    rstd.data(), newMean.data(), newVar.data(), batch, channels,
                    spatial, eps, momentum);
  for (int64_t c = 0; c < channels; ++c) {
    double mu = 0, sq = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t s = 0; s < spatial; ++s)
        mu += x[(n * channels + c) * spatial + s];
    mu /= count;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t s = 0; s < spatial; ++s) {
        double d = x[(n * channels + c) * spatial + s] - mu;
        sq += d * d;
      }
    double biased = sq / count, unbiased = sq / (count - 1);
    double r = 1 / std::sqrt(biased + eps);
    EXPECT_NEAR(mean[c], mu, 1e-6);
    EXPECT_NEAR(rstd[c], r, 1e-5 * r);
    EXPECT_NEAR(newMean[c], 0.9 * runMean[c] + 0.1 * mu, 1e-6);
    EXPECT_NEAR(newVar[c], 0.9 * runVar[c] + 0.1 * unbiased, 1e-6);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t s = 0; s < spatial; ++s) {
        int64_t k = (n * channels + c) * spatial + s;
        EXPECT_NEAR(y[k], (x[k] - mu) * r * w[c] + b[c], 1e-5);
      }
  }

  std::vector<float> rg = randomVector(rng, x.size());
  std::vector<float> dx(x.size()), dw(channels), db(channels);
  memopt_batch_norm_grad(ctx, MEMOPT_F32, rg.data(), x.data(), w.data(),
                         mean.data(), rstd.data(), dx.data(), dw.data(),
                         db.data(), batch, channels, spatial);
  auto loss = [&](const std::vector<float> &xv, const std::vector<float> &wv,
                  const std::vector<float> &bv) {
    std::vector<float> out(xv.size()), m(channels), s(channels), rm = runMean,
                                                                 rv = runVar;
    memopt_batch_norm(ctx, MEMOPT_F32, xv.data(), wv.data(), bv.data(),
                      rm.data(), rv.data(), out.data(), m.data(), s.data(),
                      rm.data(), rv.data(), batch, channels, spatial, eps,
                      momentum);
    return dot(out, rg);
  };
  expectGradient([&](std::vector<float> &v) { return loss(v, w, b); }, x, dx,
                 "batch_norm grad_input");
  expectGradient([&](std::vector<float> &v) { return loss(x, v, b); }, w, dw,
                 "batch_norm grad_weight");
  expectGradient([&](std::vector<float> &v) { return loss(x, w, v); }, b, db,
                 "batch_norm grad_bias");
}

TEST_F(RuntimeTest, BatchNormNeedsMoreThanOneValuePerChannel) {
  expectError = true;
  std::vector<float> x(2), one(2, 1.0f), y(2), stats(2);
  memopt_batch_norm(ctx, MEMOPT_F32, x.data(), one.data(), one.data(),
                    one.data(), one.data(), y.data(), stats.data(),
                    stats.data(), stats.data(), stats.data(), 1, 2, 1, 1e-5,
                    0.1);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
}

//===----------------------------------------------------------------------===//
// NormMath.h's formulas
//===----------------------------------------------------------------------===//

TEST(NormMathTest, ReciprocalStdAddsEpsInsideTheRoot) {
  EXPECT_EQ(reciprocalStd(0.25, 0.0), 2.0);
  EXPECT_EQ(reciprocalStd(0.25, 0.75), 1.0);
  EXPECT_EQ(reciprocalStd(3.0f, 1.0f), 0.5f);
  // A constant row: var 0, the result is eps's alone and finite.
  EXPECT_DOUBLE_EQ(reciprocalStd(0.0, 1e-4), 100.0);
  EXPECT_FLOAT_EQ(reciprocalStd(0.0f, 1e-4f), 100.0f);
}

// Rows z = {0, ln 2, ln 5}: exp sums to 8, so softmax is {1, 2, 5} / 8.
TEST(NormMathTest, SoftmaxFormulasMatchClosedForms) {
  const float z[3] = {0.0f, std::log(2.0f), std::log(5.0f)};
  const double p[3] = {1.0 / 8, 2.0 / 8, 5.0 / 8};
  float shift = z[2];
  double sum = 0.0;
  float sumF = 0.0f;
  for (float v : z) {
    sum += softmaxExpTerm<double>(v, shift);
    sumF += softmaxExpTerm<float>(v, shift);
  }
  EXPECT_NEAR(sum, 8.0 / 5.0, 1e-7);
  EXPECT_NEAR(sumF, 8.0 / 5.0, 1e-6);
  float logSum = std::log(sumF), inv = 1.0f / sumF;
  const double g[3] = {0.5, -1.0, 2.0};
  double sumG = g[0] + g[1] + g[2];
  double sumGY = 0.0;
  for (int j = 0; j < 3; ++j)
    sumGY += g[j] * p[j];
  for (int j = 0; j < 3; ++j) {
    float y = softmaxValue(z[j], shift, inv);
    float ly = logSoftmaxValue(z[j], shift, logSum);
    EXPECT_NEAR(y, p[j], 1e-7) << j;
    EXPECT_NEAR(ly, std::log(p[j]), 1e-6) << j;
    // The Jacobian products: p (g - g.p) and g - p sum(g).
    EXPECT_NEAR(softmaxGradValue(y, float(g[j]), float(sumGY), false),
                p[j] * (g[j] - sumGY), 1e-6)
        << j;
    EXPECT_NEAR(softmaxGradValue(ly, float(g[j]), float(sumG), true),
                g[j] - p[j] * sumG, 1e-6)
        << j;
    EXPECT_EQ(softmaxGradTerm<double>(y, float(g[j]), true), g[j]);
    EXPECT_EQ(softmaxGradTerm<double>(y, float(g[j]), false),
              double(float(g[j])) * y);
  }
}

/// The row statistics of layer norm computed as the CUDA kernel does, in
/// f32 with NormMath.h's terms.
struct RowStats {
  float mean, rstd;
};

RowStats f32RowStats(const std::vector<float> &x, float eps) {
  float sum = 0.0f;
  for (float v : x)
    sum += v;
  float mean = sum / static_cast<float>(x.size());
  float sq = 0.0f;
  for (float v : x)
    sq += squaredDeviation<float>(v, mean);
  return {mean, reciprocalStd<float>(sq / static_cast<float>(x.size()), eps)};
}

// Layer norm is invariant to shifting and scaling its row, so an upstream
// gradient along either direction (dy = const, dy = xhat with w = 1) has a
// zero input gradient; with eps > 0 the scaling direction keeps a residue
// of eps / (var + eps).
TEST(NormMathTest, LayerNormGradientVanishesAlongTheInvariances) {
  std::mt19937 rng(3);
  std::vector<float> x = randomVector(rng, 37, -2.0f, 2.0f);
  for (float eps : {0.0f, 1e-2f}) {
    SCOPED_TRACE(eps);
    RowStats st = f32RowStats(x, eps);
    for (bool shift : {true, false}) {
      std::vector<float> dy(x.size());
      for (size_t j = 0; j < x.size(); ++j)
        dy[j] = shift ? 0.75f : normalized(x[j], st.mean, st.rstd);
      float sumG = 0.0f, sumGX = 0.0f;
      for (size_t j = 0; j < x.size(); ++j) {
        sumG += layerNormGradTermG<float>(dy[j], 1.0f);
        sumGX +=
            layerNormGradTermGX<float>(dy[j], 1.0f, x[j], st.mean, st.rstd);
      }
      float n = static_cast<float>(x.size());
      double var = 1.0 / (double(st.rstd) * st.rstd) - eps;
      double residue = shift ? 0.0 : eps / (var + eps);
      for (size_t j = 0; j < x.size(); ++j) {
        float dx = layerNormGradValue(dy[j], 1.0f, x[j], st.mean, st.rstd,
                                      sumG / n, sumGX / n);
        double xhat = (x[j] - double(st.mean)) * st.rstd;
        EXPECT_NEAR(dx, st.rstd * xhat * residue, 2e-5) << shift << " " << j;
      }
    }
  }
}

// RMS norm is invariant to scaling its row (eps = 0), so with w = 1 the
// upstream gradient dy = x has a zero input gradient.
TEST(NormMathTest, RmsNormGradientVanishesAlongTheScaling) {
  std::mt19937 rng(4);
  std::vector<float> x = randomVector(rng, 29, -2.0f, 2.0f);
  float sq = 0.0f;
  for (float v : x)
    sq += squareTerm<float>(v);
  float rstd = reciprocalStd<float>(sq / static_cast<float>(x.size()), 0.0f);
  float sumGX = 0.0f;
  for (float v : x)
    sumGX += rmsNormGradTerm<float>(v, 1.0f, v);
  float c =
      rmsNormGradCoupling<float>(sumGX, static_cast<int64_t>(x.size()), rstd);
  for (float v : x)
    EXPECT_NEAR(rmsNormGradValue(v, 1.0f, v, rstd, c), 0.0, 1e-5) << v;
  // Along a single coordinate: rstd (1 - x_j^2 rstd^2 / n) at j.
  std::vector<float> dy(x.size(), 0.0f);
  dy[3] = 1.0f;
  double sumD = 0.0;
  for (size_t j = 0; j < x.size(); ++j)
    sumD += rmsNormGradTerm<double>(dy[j], 1.0f, x[j]);
  float cD = rmsNormGradCoupling(sumD, static_cast<int64_t>(x.size()), rstd);
  double n = static_cast<double>(x.size());
  EXPECT_NEAR(rmsNormGradValue(1.0f, 1.0f, x[3], rstd, cD),
              rstd * (1.0 - x[3] * double(x[3]) * rstd * rstd / n), 1e-6);
}

TEST(NormMathTest, ParameterGradientTermsAndRunningStatistics) {
  // dy * xhat for layer norm's weight, dy * x * rstd for RMS norm's.
  EXPECT_EQ(layerNormWeightGradTerm<double>(2.0f, 3.0f, 1.0f, 0.5f), 2.0);
  EXPECT_EQ(rmsNormWeightGradTerm<float>(2.0f, 3.0f, 0.5f), 3.0f);
  EXPECT_EQ(affineNormValue(3.0f, 1.0f, 0.5f, 4.0f, -1.0f), 3.0f);
  EXPECT_EQ(rmsNormValue(3.0f, 0.5f, 4.0f), 6.0f);
  // scale (dy - meanG - xhat meanGX), xhat = (x - mean) rstd = 1.
  EXPECT_EQ(batchNormGradValue(5.0f, 3.0f, 1.0f, 0.5f, 2.0f, 1.0f, 2.0f), 4.0f);
  EXPECT_EQ(runningStatistic(2.0, 4.0, 0.25), 2.5f);
  EXPECT_EQ(runningStatistic(2.0, 4.0, 0.0), 2.0f);
}

} // namespace
