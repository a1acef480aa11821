//===- LossTest.cpp - cross-entropy and MSE tests -------------------------===//
//
// Losses against double references (ignore_index, both reductions, i32 and
// i64 labels, label smoothing as torch computes it), the all-ignored mean
// (NaN loss, zero gradient, as PyTorch), and gradients against central
// differences of the loss kernels. The formulas of LossMath.h, which the
// CUDA kernels run in f32, also against closed forms directly, in both of
// their instantiations.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"
#include "memopt/runtime/LossMath.h"

using namespace memopt::test;
using namespace memopt::runtime;

namespace {

double referenceCrossEntropy(const std::vector<float> &logits,
                             const std::vector<int64_t> &labels,
                             int64_t classes, int64_t ignoreIndex, bool mean) {
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    double maxValue = -INFINITY, sum = 0;
    for (int64_t j = 0; j < classes; ++j)
      maxValue = std::max<double>(maxValue, logits[r * classes + j]);
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(logits[r * classes + j] - maxValue);
    total += maxValue + std::log(sum) - logits[r * classes + labels[r]];
    ++count;
  }
  return mean ? total / count : total;
}

TEST_F(RuntimeTest, CrossEntropyWithIgnoreIndex) {
  const int64_t rows = 6, classes = 5;
  std::vector<float> logits = randomVector(rng, rows * classes, -3, 3);
  logits[0] = 500.0f; // large logits stay finite
  std::vector<int64_t> labels = {0, 3, -100, 4, -100, 1};
  for (memopt_loss_reduction red :
       {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
    float loss = 0;
    memopt_cross_entropy(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                         labels.data(), &loss, rows, classes, -100, red, 0.0);
    double expected = referenceCrossEntropy(logits, labels, classes, -100,
                                            red == MEMOPT_REDUCTION_MEAN);
    EXPECT_NEAR(loss, expected, 1e-5 * (1 + std::fabs(expected)));

    float upstream = 0.7f;
    std::vector<float> dx(logits.size());
    memopt_cross_entropy_grad(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                              labels.data(), &upstream, dx.data(), rows,
                              classes, -100, red, 0.0);
    for (int64_t j = 0; j < classes; ++j) {
      EXPECT_EQ(dx[2 * classes + j], 0.0f); // ignored rows
      EXPECT_EQ(dx[4 * classes + j], 0.0f);
    }
    auto lossFn = [&](std::vector<float> &z) {
      float l = 0;
      memopt_cross_entropy(ctx, MEMOPT_F32, z.data(), MEMOPT_I64, labels.data(),
                           &l, rows, classes, -100, red, 0.0);
      return upstream * static_cast<double>(l);
    };
    // Only perturb moderate logits (the 500 one saturates the softmax).
    std::vector<float> small = logits;
    small[0] = 2.0f;
    std::vector<float> dSmall(logits.size());
    memopt_cross_entropy_grad(ctx, MEMOPT_F32, small.data(), MEMOPT_I64,
                              labels.data(), &upstream, dSmall.data(), rows,
                              classes, -100, red, 0.0);
    expectGradient(lossFn, small, dSmall, "cross_entropy_grad", 1e-2f, 1e-2);
  }
}

TEST_F(RuntimeTest, CrossEntropyInt32LabelsAndCustomIgnoreIndex) {
  std::vector<float> logits = {1, 2, 3, 0, 0, 0};
  std::vector<int32_t> labels = {2, 7};
  float loss = 0;
  memopt_cross_entropy(ctx, MEMOPT_F32, logits.data(), MEMOPT_I32,
                       labels.data(), &loss, 2, 3, 7, MEMOPT_REDUCTION_MEAN,
                       0.0);
  double expected = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  EXPECT_NEAR(loss, expected, 1e-6);
}

// With or without label smoothing.
TEST_F(RuntimeTest, CrossEntropyAllIgnoredMeanIsNaNWithZeroGradient) {
  for (double eps : {0.0, 0.1}) {
    SCOPED_TRACE(eps);
    std::vector<float> logits = randomVector(rng, 6);
    std::vector<int64_t> labels = {-100, -100};
    float loss = 0, upstream = 1.0f;
    memopt_cross_entropy(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                         labels.data(), &loss, 2, 3, -100,
                         MEMOPT_REDUCTION_MEAN, eps);
    EXPECT_TRUE(std::isnan(loss));
    memopt_cross_entropy(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                         labels.data(), &loss, 2, 3, -100, MEMOPT_REDUCTION_SUM,
                         eps);
    EXPECT_EQ(loss, 0.0f);
    std::vector<float> dx(6, 5.0f);
    memopt_cross_entropy_grad(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                              labels.data(), &upstream, dx.data(), 2, 3, -100,
                              MEMOPT_REDUCTION_MEAN, eps);
    EXPECT_EQ(dx, std::vector<float>(6, 0.0f));
  }
}

/// F.cross_entropy(label_smoothing=eps) as torch computes it, in double:
/// (1 - eps) nll + eps / C * sum_c(-log p_c), ignored rows left out of both
/// terms and of the mean's count; and its gradient with respect to the
/// logits for an incoming gradient `upstream`: upstream * (p - (1 - eps)
/// onehot - eps / C) / count.
struct SmoothedReference {
  double loss = 0.0;
  std::vector<double> grad;
};

SmoothedReference referenceSmoothed(const std::vector<float> &logits,
                                    const std::vector<int64_t> &labels,
                                    int64_t classes, double eps, bool mean,
                                    double upstream) {
  SmoothedReference ref;
  ref.grad.assign(logits.size(), 0.0);
  double nll = 0.0, smooth = 0.0;
  int64_t count = 0;
  for (size_t r = 0; r < labels.size(); ++r)
    count += labels[r] != -100;
  double scale = mean ? upstream / count : upstream;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == -100)
      continue;
    const float *z = logits.data() + r * classes;
    double lse = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      lse += std::exp(double(z[j]));
    lse = std::log(lse);
    nll += lse - z[labels[r]];
    for (int64_t j = 0; j < classes; ++j) {
      smooth += lse - z[j];
      double target = (j == labels[r] ? 1.0 - eps : 0.0) + eps / classes;
      ref.grad[r * classes + j] = scale * (std::exp(z[j] - lse) - target);
    }
  }
  if (mean) {
    nll /= count;
    smooth /= count;
  }
  ref.loss = (1.0 - eps) * nll + eps / classes * smooth;
  return ref;
}

TEST_F(RuntimeTest, CrossEntropyLabelSmoothingMatchesTorch) {
  const int64_t rows = 7, classes = 6;
  std::vector<float> logits = randomVector(rng, rows * classes, -4, 4);
  std::vector<int64_t> labels = {5, -100, 0, 3, -100, 3, 1};
  for (double eps : {0.1, 0.75}) {
    for (memopt_loss_reduction red :
         {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
      bool mean = red == MEMOPT_REDUCTION_MEAN;
      float loss = 0.0f, upstream = 0.7f;
      std::vector<float> dx(logits.size(), 9.0f);
      memopt_cross_entropy(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                           labels.data(), &loss, rows, classes, -100, red, eps);
      memopt_cross_entropy_grad(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                                labels.data(), &upstream, dx.data(), rows,
                                classes, -100, red, eps);
      SmoothedReference ref =
          referenceSmoothed(logits, labels, classes, eps, mean, upstream);
      EXPECT_NEAR(loss, ref.loss, 2e-7 * (1 + std::fabs(ref.loss)))
          << "eps " << eps << " mean " << mean;
      for (size_t i = 0; i < dx.size(); ++i)
        EXPECT_NEAR(dx[i], ref.grad[i], 2e-7)
            << "eps " << eps << " mean " << mean << " element " << i;
      // Ignored rows: exactly zero.
      for (int64_t j = 0; j < classes; ++j)
        EXPECT_EQ(dx[1 * classes + j], 0.0f);
    }
  }
}

TEST_F(RuntimeTest, CrossEntropyLabelOutOfRangeIsAnError) {
  expectError = true;
  std::vector<float> logits(6);
  std::vector<int64_t> labels = {1, 3};
  float loss;
  memopt_cross_entropy(ctx, MEMOPT_F32, logits.data(), MEMOPT_I64,
                       labels.data(), &loss, 2, 3, -100, MEMOPT_REDUCTION_MEAN,
                       0.0);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INDEX_OUT_OF_RANGE);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_cross_entropy: label 3 of row 1 out of range [0, 3)");
}

TEST_F(RuntimeTest, MseLossAndGradient) {
  const int64_t n = 12;
  std::vector<float> x = randomVector(rng, n), t = randomVector(rng, n);
  for (memopt_loss_reduction red :
       {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
    float loss = 0;
    memopt_mse_loss(ctx, MEMOPT_F32, x.data(), t.data(), &loss, n, red);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += (static_cast<double>(x[i]) - t[i]) * (x[i] - t[i]);
    double expected = red == MEMOPT_REDUCTION_MEAN ? sum / n : sum;
    EXPECT_NEAR(loss, expected, 1e-6 * (1 + expected));
    float upstream = 1.3f;
    std::vector<float> dx(n);
    memopt_mse_loss_grad(ctx, MEMOPT_F32, x.data(), t.data(), &upstream,
                         dx.data(), n, red);
    auto lossFn = [&](std::vector<float> &z) {
      float l = 0;
      memopt_mse_loss(ctx, MEMOPT_F32, z.data(), t.data(), &l, n, red);
      return upstream * static_cast<double>(l);
    };
    expectGradient(lossFn, x, dx, "mse_loss_grad");
  }
}

//===----------------------------------------------------------------------===//
// LossMath.h's formulas
//===----------------------------------------------------------------------===//

/// A row z = {0, ln 2, ln 5}: exp(z) sums to 8, softmax is {1, 2, 5} / 8.
const double kRowP[3] = {1.0 / 8, 2.0 / 8, 5.0 / 8};

/// LossMath.h's log-sum-exp of the row in `Acc`, as the kernels compose it.
template <typename Acc> Acc rowLse(const float *z) {
  float max = std::fmax(std::fmax(z[0], z[1]), z[2]);
  Acc sum = 0;
  for (int j = 0; j < 3; ++j)
    sum += logSumExpTerm<Acc>(z[j], max);
  return logSumExpValue(max, sum);
}

// -(1 - eps) log p[label] - eps / C sum_j log p_j, for both instantiations.
TEST(LossMathTest, CrossEntropyRowLossSmoothsTowardTheUniformTarget) {
  const float z[3] = {0.0f, std::log(2.0f), std::log(5.0f)};
  const int64_t label = 1;
  double sumLogits = double(z[0]) + z[1] + z[2];
  float sumLogitsF = z[0] + z[1] + z[2];
  // The logits are ln 2 and ln 5 rounded to f32: 8 up to 1e-7.
  double lse = std::log(std::exp(double(z[0])) + std::exp(double(z[1])) +
                        std::exp(double(z[2])));
  EXPECT_NEAR(lse, std::log(8.0), 1e-7);
  EXPECT_NEAR(rowLse<double>(z), lse, 1e-12);
  EXPECT_NEAR(rowLse<float>(z), lse, 1e-6);
  for (double eps : {0.0, 0.2, 1.0}) {
    SCOPED_TRACE(eps);
    double expected = -(1.0 - eps) * std::log(kRowP[label]);
    for (double p : kRowP)
      expected -= eps / 3 * std::log(p);
    EXPECT_NEAR(
        crossEntropyRowLoss(rowLse<double>(z), z[label], sumLogits, eps, 3),
        expected, 1e-7);
    EXPECT_NEAR(crossEntropyRowLoss(rowLse<float>(z), z[label], sumLogitsF,
                                    static_cast<float>(eps), 3),
                expected, 1e-6);
  }
  // Without smoothing the sum of logits is not read (the kernels skip it).
  EXPECT_NEAR(
      crossEntropyRowLoss(rowLse<double>(z), z[label], double(NAN), 0.0, 3),
      -std::log(kRowP[label]), 1e-7);
}

TEST(LossMathTest, SmoothedTargetIsAProbabilityVector) {
  SmoothedTarget none = smoothedTarget(0.0, 10);
  EXPECT_EQ(none.on, 1.0f);
  EXPECT_EQ(none.off, 0.0f);
  SmoothedTarget t = smoothedTarget(0.3, 4);
  EXPECT_FLOAT_EQ(t.off, 0.075f);
  EXPECT_FLOAT_EQ(t.on, 0.775f);
  EXPECT_NEAR(double(t.on) + 3 * double(t.off), 1.0, 1e-7);
  // No classes: nothing to spread the smoothing over.
  EXPECT_EQ(smoothedTarget(0.3, 0).off, 0.0f);
}

// scale * (softmax - target); the gradient of a row sums to 0.
TEST(LossMathTest, CrossEntropyGradientIsSoftmaxMinusTheTarget) {
  const float z[3] = {0.0f, std::log(2.0f), std::log(5.0f)};
  const int64_t label = 2;
  for (double eps : {0.0, 0.2}) {
    SCOPED_TRACE(eps);
    SmoothedTarget target = smoothedTarget(eps, 3);
    double sumD = 0.0, sumF = 0.0;
    for (int64_t j = 0; j < 3; ++j) {
      double expected =
          0.5 * (kRowP[j] - ((j == label ? 1.0 - eps : 0.0) + eps / 3));
      float d = crossEntropyGradValue(z[j], rowLse<double>(z), j == label, 0.5f,
                                      target);
      float f = crossEntropyGradValue(z[j], rowLse<float>(z), j == label, 0.5f,
                                      target);
      EXPECT_NEAR(d, expected, 1e-7) << j;
      EXPECT_NEAR(f, expected, 1e-6) << j;
      sumD += d;
      sumF += f;
    }
    EXPECT_NEAR(sumD, 0.0, 1e-7);
    EXPECT_NEAR(sumF, 0.0, 1e-6);
  }
}

// ignore_index: a MEAN over no kept label is NaN, its gradient's scale 0.
TEST(LossMathTest, ReductionsAndScalesWithIgnoredLabels) {
  EXPECT_EQ(reducedLoss(6.0, 4.0, true), 1.5);
  EXPECT_EQ(reducedLoss(6.0, 4.0, false), 6.0);
  EXPECT_EQ(reducedLoss(6.0f, 4.0f, true), 1.5f);
  EXPECT_TRUE(std::isnan(reducedLoss(0.0, 0.0, true)));
  EXPECT_TRUE(std::isnan(reducedLoss(0.0f, 0.0f, true)));
  EXPECT_EQ(reducedLoss(0.0f, 0.0f, false), 0.0f);
  EXPECT_EQ(crossEntropyGradScale(0.7, true, 4.0), static_cast<float>(0.7 / 4));
  EXPECT_EQ(crossEntropyGradScale(0.7, true, 0.0), 0.0f);
  EXPECT_EQ(crossEntropyGradScale(0.7, false, 0.0), 0.7f);
}

TEST(LossMathTest, SquaredErrorTermsAndScale) {
  EXPECT_EQ(squaredErrorTerm<double>(1.5f, -0.5f), 4.0);
  EXPECT_EQ(squaredErrorTerm<float>(0.25f, 1.25f), 1.0f);
  // 2 gradLoss, over n under MEAN; no division by an empty tensor's 0.
  EXPECT_EQ(mseGradScale(1.0, true, 4), 0.5f);
  EXPECT_EQ(mseGradScale(1.0, false, 4), 2.0f);
  EXPECT_EQ(mseGradScale(1.0, true, 0), 2.0f);
  EXPECT_EQ(mseGradValue(0.5f, 3.0f, 1.0f), 1.0f);
}

} // namespace
