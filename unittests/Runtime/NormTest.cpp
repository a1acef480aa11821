//===- NormTest.cpp - softmax and normalisation tests ---------------------===//
//
// Softmax / log-softmax against double references (including inputs whose
// exponentials overflow f32 without the max subtraction), layer / RMS /
// batch normalisation against double references, batch-norm running
// statistics with the unbiased variance, and every gradient against central
// differences of its forward kernel.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

using namespace memopt::test;

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

} // namespace
