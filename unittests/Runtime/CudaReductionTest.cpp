//===- CudaReductionTest.cpp - the CUDA runtime's multi-block sums --------===//
//
// The sums that the CUDA kernels split over many blocks in two passes (the
// norms' parameter gradients over chunks of rows, batch norm over chunks of
// a channel, loss totals and label counts over blocks of rows), at sizes
// that use several chunks and columns that are not a multiple of 32,
// against f64 references computed here, and bit for bit equal on a second
// run. They need a device and skip without one.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "CudaTestFixture.h"
#include "memopt/runtime/Float16.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using memopt::runtime::bfloat16BitsToFloat;
using memopt::runtime::floatToBFloat16Bits;
using memopt::test::CudaTest;

namespace {

/// Whether two float vectors are equal bit for bit.
bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The f64 column sums of a norm's parameter gradients: dw[j] = sum_r dy
/// xhat and db[j] = sum_r dy, with xhat from the kernel's own mean and rstd
/// (so that only the sums are under test), and sum_r |dy xhat| and sum_r
/// |dy| for the tolerance.
struct ColumnSums {
  std::vector<double> dw, db, absW, absB;
};

ColumnSums referenceParamGrad(const std::vector<float> &dy,
                              const std::vector<float> &x,
                              const std::vector<float> &mean,
                              const std::vector<float> &rstd, int64_t rows,
                              int64_t cols, bool rms) {
  ColumnSums s;
  s.dw.assign(cols, 0.0);
  s.db.assign(cols, 0.0);
  s.absW.assign(cols, 0.0);
  s.absB.assign(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      double g = dy[r * cols + j];
      double xhat = (x[r * cols + j] - (rms ? 0.0 : double(mean[r]))) * rstd[r];
      s.dw[j] += g * xhat;
      s.db[j] += g;
      s.absW[j] += std::fabs(g * xhat);
      s.absB[j] += std::fabs(g);
    }
  return s;
}

class CudaReductionTest : public CudaTest {
protected:
  float *output(size_t n) { return static_cast<float *>(alloc(n * 4)); }

  /// Layer norm (or RMS norm) forward and backward on rows x cols; checks
  /// the parameter gradients against f64 column sums, the input gradient
  /// against the f64 formula, and a second backward bit for bit.
  void checkNormGrad(int64_t rows, int64_t cols, bool rms) {
    SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols
                                    << (rms ? " rms" : " layer"));
    std::vector<float> x = random(rows * cols, -2.0f, 2.0f);
    std::vector<float> w = random(cols, 0.5f, 1.5f), b = random(cols);
    std::vector<float> g = random(rows * cols);
    float *dX = upload(x), *dW = upload(w), *dB = upload(b), *dG = upload(g);
    float *y = output(x.size()), *mean = output(rows), *rstd = output(rows);
    float *gx = output(x.size()), *gw = output(cols), *gb = output(cols);
    if (rms)
      memopt_rms_norm(ctx, MEMOPT_F32, dX, MEMOPT_F32, dW, y, rstd, rows, cols,
                      1e-6);
    else
      memopt_layer_norm(ctx, MEMOPT_F32, dX, MEMOPT_F32, dW, dB, y, mean, rstd,
                        rows, cols, 1e-5);
    auto backward = [&]() {
      if (rms)
        memopt_rms_norm_grad(ctx, MEMOPT_F32, dG, dX, MEMOPT_F32, dW, rstd, gx,
                             gw, rows, cols);
      else
        memopt_layer_norm_grad(ctx, MEMOPT_F32, dG, dX, MEMOPT_F32, dW, mean,
                               rstd, gx, gw, gb, rows, cols);
    };
    backward();
    std::vector<float> m =
        rms ? std::vector<float>(rows, 0.0f) : download<float>(mean, rows);
    std::vector<float> s = download<float>(rstd, rows);
    std::vector<float> gotW = download<float>(gw, cols);
    std::vector<float> gotB =
        rms ? std::vector<float>() : download<float>(gb, cols);
    std::vector<float> gotX = download<float>(gx, x.size());
    ColumnSums ref = referenceParamGrad(g, x, m, s, rows, cols, rms);
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_NEAR(gotW[j], ref.dw[j], 1e-5 * ref.absW[j] + 1e-6) << j;
      if (!rms) {
        ASSERT_NEAR(gotB[j], ref.db[j], 1e-5 * ref.absB[j] + 1e-6) << j;
      }
    }
    // The input gradient, row by row in f64.
    for (int64_t r = 0; r < rows; r += rows / 7 + 1) {
      double sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < cols; ++j) {
        double gw1 = double(g[r * cols + j]) * w[j];
        double xhat = (x[r * cols + j] - double(m[r])) * s[r];
        sumG += gw1;
        sumGX += gw1 * xhat;
      }
      for (int64_t j = 0; j < cols; ++j) {
        double gw1 = double(g[r * cols + j]) * w[j];
        double xhat = (x[r * cols + j] - double(m[r])) * s[r];
        double want = rms ? s[r] * (gw1 - xhat * sumGX / cols)
                          : s[r] * (gw1 - sumG / cols - xhat * sumGX / cols);
        ASSERT_NEAR(gotX[r * cols + j], want, 1e-4) << r << " " << j;
      }
    }
    backward();
    EXPECT_TRUE(sameBits(download<float>(gw, cols), gotW));
    EXPECT_TRUE(sameBits(download<float>(gx, x.size()), gotX));
    if (!rms) {
      EXPECT_TRUE(sameBits(download<float>(gb, cols), gotB));
    }
  }
};

// Many rows: several chunks of rows per column, summed in a second pass.
TEST_F(CudaReductionTest, LayerNormParamGradManyRows) {
  checkNormGrad(3001, 100, false);
}

TEST_F(CudaReductionTest, RmsNormParamGradManyRows) {
  checkNormGrad(5000, 70, true);
}

// One chunk: the first pass writes the gradients itself.
TEST_F(CudaReductionTest, NormParamGradFewRows) {
  checkNormGrad(10, 45, false);
  checkNormGrad(1, 33, true);
}

// Wide rows: many column tiles, each over eleven chunks of rows.
TEST_F(CudaReductionTest, LayerNormParamGradWideRows) {
  checkNormGrad(700, 2049, false);
}

/// `v` rounded to bf16: the bits, and their values back in f32.
std::vector<uint16_t> toBf16(std::vector<float> &v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = floatToBFloat16Bits(v[i]);
    v[i] = bfloat16BitsToFloat(bits[i]);
  }
  return bits;
}

// bf16 activations and weights: the chunks' f32 partials are rounded to bf16
// once, by the second pass.
TEST_F(CudaReductionTest, Bf16LayerNormParamGradOverChunks) {
  const int64_t rows = 2000, cols = 50;
  std::vector<float> x = random(rows * cols, -2.0f, 2.0f), g = random(x.size());
  std::vector<float> w = random(cols, 0.5f, 1.5f), b = random(cols);
  uint16_t *dX = upload(toBf16(x)), *dG = upload(toBf16(g));
  uint16_t *dW = upload(toBf16(w)), *dB = upload(toBf16(b));
  uint16_t *y = static_cast<uint16_t *>(alloc(x.size() * 2));
  uint16_t *gx = static_cast<uint16_t *>(alloc(x.size() * 2));
  uint16_t *gw = static_cast<uint16_t *>(alloc(cols * 2));
  uint16_t *gb = static_cast<uint16_t *>(alloc(cols * 2));
  float *mean = output(rows), *rstd = output(rows);
  memopt_layer_norm(ctx, MEMOPT_BF16, dX, MEMOPT_BF16, dW, dB, y, mean, rstd,
                    rows, cols, 1e-5);
  memopt_layer_norm_grad(ctx, MEMOPT_BF16, dG, dX, MEMOPT_BF16, dW, mean, rstd,
                         gx, gw, gb, rows, cols);
  ColumnSums ref =
      referenceParamGrad(g, x, download<float>(mean, rows),
                         download<float>(rstd, rows), rows, cols, false);
  std::vector<uint16_t> gotW = download<uint16_t>(gw, cols);
  std::vector<uint16_t> gotB = download<uint16_t>(gb, cols);
  for (int64_t j = 0; j < cols; ++j) {
    // bf16 keeps 8 significant bits: within 2^-8 of the f32 sum.
    ASSERT_NEAR(bfloat16BitsToFloat(gotW[j]), ref.dw[j],
                std::fabs(ref.dw[j]) / 256 + 1e-5 * ref.absW[j])
        << j;
    ASSERT_NEAR(bfloat16BitsToFloat(gotB[j]), ref.db[j],
                std::fabs(ref.db[j]) / 256 + 1e-5 * ref.absB[j])
        << j;
  }
  memopt_layer_norm_grad(ctx, MEMOPT_BF16, dG, dX, MEMOPT_BF16, dW, mean, rstd,
                         gx, gw, gb, rows, cols);
  EXPECT_EQ(download<uint16_t>(gw, cols), gotW);
  EXPECT_EQ(download<uint16_t>(gb, cols), gotB);
}

TEST_F(CudaReductionTest, NormParamGradWithoutRowsIsZero) {
  const int64_t cols = 40;
  std::vector<float> w = random(cols), garbage(cols, 7.0f);
  float *dW = upload(w), *gw = upload(garbage), *gb = upload(garbage);
  float *none = output(1);
  memopt_layer_norm_grad(ctx, MEMOPT_F32, none, none, MEMOPT_F32, dW, none,
                         none, none, gw, gb, 0, cols);
  EXPECT_EQ(download<float>(gw, cols), std::vector<float>(cols, 0.0f));
  EXPECT_EQ(download<float>(gb, cols), std::vector<float>(cols, 0.0f));
}

// Channels of 20000 elements: five chunks per channel.
TEST_F(CudaReductionTest, BatchNormOverChunksOfAChannel) {
  const int64_t batch = 4, channels = 3, spatial = 5000;
  const int64_t count = batch * spatial, n = batch * channels * spatial;
  const double eps = 1e-5, momentum = 0.1;
  std::vector<float> x = random(n, -2.0f, 3.0f), g = random(n);
  std::vector<float> w = {1.5f, 0.7f, -0.4f}, b = {0.1f, -0.3f, 0.0f};
  std::vector<float> runMean = {0.5f, -1.0f, 0.0f}, runVar = {2.0f, 0.5f, 1.0f};
  float *dX = upload(x), *dG = upload(g), *dW = upload(w), *dB = upload(b);
  float *rm = upload(runMean), *rv = upload(runVar);
  float *y = output(n), *mean = output(channels), *rstd = output(channels);
  float *nm = output(channels), *nv = output(channels);
  float *gx = output(n), *gw = output(channels), *gb = output(channels);
  memopt_batch_norm(ctx, MEMOPT_F32, dX, dW, dB, rm, rv, y, mean, rstd, nm, nv,
                    batch, channels, spatial, eps, momentum);
  memopt_batch_norm_grad(ctx, MEMOPT_F32, dG, dX, dW, mean, rstd, gx, gw, gb,
                         batch, channels, spatial);
  std::vector<float> gotY = download<float>(y, n);
  std::vector<float> gotMean = download<float>(mean, channels);
  std::vector<float> gotRstd = download<float>(rstd, channels);
  std::vector<float> gotNm = download<float>(nm, channels);
  std::vector<float> gotNv = download<float>(nv, channels);
  std::vector<float> gotGx = download<float>(gx, n);
  std::vector<float> gotGw = download<float>(gw, channels);
  std::vector<float> gotGb = download<float>(gb, channels);
  auto at = [&](int64_t i, int64_t c) {
    return ((i / spatial) * channels + c) * spatial + i % spatial;
  };
  for (int64_t c = 0; c < channels; ++c) {
    SCOPED_TRACE(c);
    double mu = 0, sq = 0;
    for (int64_t i = 0; i < count; ++i)
      mu += x[at(i, c)];
    mu /= count;
    for (int64_t i = 0; i < count; ++i)
      sq += (x[at(i, c)] - mu) * (x[at(i, c)] - mu);
    double r = 1 / std::sqrt(sq / count + eps);
    EXPECT_NEAR(gotMean[c], mu, 1e-5);
    EXPECT_NEAR(gotRstd[c], r, 1e-5 * r);
    EXPECT_NEAR(gotNm[c], 0.9 * runMean[c] + 0.1 * mu, 1e-5);
    EXPECT_NEAR(gotNv[c], 0.9 * runVar[c] + 0.1 * sq / (count - 1), 1e-5);
    double sumG = 0, sumGX = 0, absGX = 0, absG = 0;
    for (int64_t i = 0; i < count; ++i) {
      double xhat = (x[at(i, c)] - mu) * r;
      ASSERT_NEAR(gotY[at(i, c)], xhat * w[c] + b[c], 1e-4) << i;
      sumG += g[at(i, c)];
      sumGX += g[at(i, c)] * xhat;
      absG += std::fabs(g[at(i, c)]);
      absGX += std::fabs(g[at(i, c)] * xhat);
    }
    EXPECT_NEAR(gotGw[c], sumGX, 1e-5 * absGX);
    EXPECT_NEAR(gotGb[c], sumG, 1e-5 * absG);
    for (int64_t i = 0; i < count; i += 97) {
      double xhat = (x[at(i, c)] - mu) * r;
      double want =
          w[c] * r * (g[at(i, c)] - sumG / count - xhat * sumGX / count);
      ASSERT_NEAR(gotGx[at(i, c)], want, 1e-4) << i;
    }
  }
  memopt_batch_norm(ctx, MEMOPT_F32, dX, dW, dB, rm, rv, y, mean, rstd, nm, nv,
                    batch, channels, spatial, eps, momentum);
  memopt_batch_norm_grad(ctx, MEMOPT_F32, dG, dX, dW, mean, rstd, gx, gw, gb,
                         batch, channels, spatial);
  EXPECT_TRUE(sameBits(download<float>(y, n), gotY));
  EXPECT_TRUE(sameBits(download<float>(rstd, channels), gotRstd));
  EXPECT_TRUE(sameBits(download<float>(gx, n), gotGx));
  EXPECT_TRUE(sameBits(download<float>(gw, channels), gotGw));
}

// 70000 rows: the totals and the label count take every partial block,
// each over a grid-stride share of rows.
TEST_F(CudaReductionTest, CrossEntropyTotalsOverManyRows) {
  const int64_t rows = 70000, classes = 7;
  std::vector<float> x = random(rows * classes, -4.0f, 4.0f);
  std::vector<int64_t> labels(rows);
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; ++r) {
    labels[r] = r % 7 == 3 ? -100 : (r * 5) % classes;
    kept += labels[r] != -100;
  }
  float *dX = upload(x);
  int64_t *dL = upload(labels);
  float *loss = output(1), *count = output(1);
  float *upstream = upload(std::vector<float>{0.5f});
  float *grad = output(x.size());
  memopt_label_count(ctx, MEMOPT_I64, dL, count, rows, -100);
  EXPECT_EQ(download<float>(count, 1)[0], static_cast<float>(kept));
  for (double eps : {0.0, 0.1}) {
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[r] == -100)
        continue;
      const float *z = x.data() + r * classes;
      double lse = 0, sum = 0;
      for (int64_t j = 0; j < classes; ++j) {
        lse += std::exp(double(z[j]));
        sum += z[j];
      }
      total += std::log(lse) - (1 - eps) * z[labels[r]] - eps * sum / classes;
    }
    for (memopt_loss_reduction red :
         {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
      SCOPED_TRACE(testing::Message() << "eps " << eps << " red " << red);
      bool isMean = red == MEMOPT_REDUCTION_MEAN;
      double want = isMean ? total / kept : total;
      memopt_cross_entropy(ctx, MEMOPT_F32, dX, MEMOPT_I64, dL, loss, rows,
                           classes, -100, red, eps);
      float got = download<float>(loss, 1)[0];
      EXPECT_NEAR(got, want, 1e-5 * std::fabs(want));
      memopt_cross_entropy(ctx, MEMOPT_F32, dX, MEMOPT_I64, dL, loss, rows,
                           classes, -100, red, eps);
      float again = download<float>(loss, 1)[0];
      EXPECT_EQ(std::memcmp(&got, &again, 4), 0);
      // The gradient's scale divides by the multi-block label count.
      memopt_cross_entropy_grad(ctx, MEMOPT_F32, dX, MEMOPT_I64, dL, upstream,
                                grad, rows, classes, -100, red, eps);
      std::vector<float> dx = download<float>(grad, x.size());
      double scale = isMean ? 0.5 / kept : 0.5;
      for (int64_t r = 0; r < rows; r += 997) {
        const float *z = x.data() + r * classes;
        double lse = 0;
        for (int64_t j = 0; j < classes; ++j)
          lse += std::exp(double(z[j]));
        lse = std::log(lse);
        for (int64_t j = 0; j < classes; ++j) {
          double target = (j == labels[r] ? 1 - eps : 0.0) + eps / classes;
          double want1 =
              labels[r] == -100 ? 0.0 : scale * (std::exp(z[j] - lse) - target);
          ASSERT_NEAR(dx[r * classes + j], want1, 1e-6 * scale / 0.5 + 1e-9)
              << r << " " << j;
        }
      }
    }
  }
}

TEST_F(CudaReductionTest, MseTotalsOverManyElements) {
  const int64_t n = 1000003;
  std::vector<float> x = random(n), t = random(n);
  float *dX = upload(x), *dT = upload(t), *loss = output(1);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(x[i]) - t[i];
    sum += d * d;
  }
  for (memopt_loss_reduction red :
       {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
    double want = red == MEMOPT_REDUCTION_MEAN ? sum / n : sum;
    memopt_mse_loss(ctx, MEMOPT_F32, dX, dT, loss, n, red);
    float got = download<float>(loss, 1)[0];
    EXPECT_NEAR(got, want, 1e-5 * want);
    memopt_mse_loss(ctx, MEMOPT_F32, dX, dT, loss, n, red);
    float again = download<float>(loss, 1)[0];
    EXPECT_EQ(std::memcmp(&got, &again, 4), 0);
  }
  // An empty mean is 0 / 0.
  memopt_mse_loss(ctx, MEMOPT_F32, dX, dT, loss, 0, MEMOPT_REDUCTION_MEAN);
  EXPECT_TRUE(std::isnan(download<float>(loss, 1)[0]));
}

} // namespace
