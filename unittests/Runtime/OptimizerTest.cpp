//===- OptimizerTest.cpp - SGD, AdamW and loss-scaling tests --------------===//
//
// SGD and AdamW against values computed by hand from torch.optim's formulas
// (a closed form for AdamW under a constant gradient), skipped steps, the
// step counter, and GradScaler's unscale / non-finite check and scale
// update rules.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"
#include "memopt/runtime/Float16.h"

#include <limits>

using namespace memopt::test;

namespace {

TEST_F(RuntimeTest, SgdMomentumWeightDecayTwoSteps) {
  // lr 0.1, momentum 0.9, weight decay 0.01, p0 = 1, g = 0.5 both steps:
  //   step 1: g' = 0.5 + 0.01 = 0.51, buf = 0.51, p = 1 - 0.051 = 0.949
  //   step 2: g' = 0.5 + 0.00949 = 0.50949, buf = 0.459 + 0.50949 = 0.96849,
  //           p = 0.949 - 0.096849 = 0.852151
  std::vector<float> p = {1.0f}, g = {0.5f}, buf = {0.0f};
  memopt_sgd_update(ctx, MEMOPT_F32, p.data(), g.data(), buf.data(), nullptr,
                    p.data(), buf.data(), 1, 0.1, 0.9, 0.01);
  EXPECT_NEAR(buf[0], 0.51, 1e-7);
  EXPECT_NEAR(p[0], 0.949, 1e-7);
  memopt_sgd_update(ctx, MEMOPT_F32, p.data(), g.data(), buf.data(), nullptr,
                    p.data(), buf.data(), 1, 0.1, 0.9, 0.01);
  EXPECT_NEAR(buf[0], 0.96849, 1e-6);
  EXPECT_NEAR(p[0], 0.852151, 1e-6);
}

TEST_F(RuntimeTest, AdamWConstantGradientClosedForm) {
  // With a constant gradient g, m_t = (1 - beta1^t) g and v_t = (1 -
  // beta2^t) g^2, so the bias-corrected ratio is g / (|g| + eps) at every
  // step: p_t = p_{t-1} (1 - lr wd) - lr g / (|g| + eps).
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  std::vector<float> p = {1.0f, -0.5f, 2.0f}, g = {0.3f, -2.0f, 1e-3f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  std::vector<double> expected(p.begin(), p.end());
  for (int64_t step = 1; step <= 3; ++step) {
    memopt_adamw_update(ctx, MEMOPT_F32, p.data(), g.data(), m.data(), v.data(),
                        &step, nullptr, p.data(), m.data(), v.data(), 3, lr, b1,
                        b2, eps, wd);
    for (int i = 0; i < 3; ++i) {
      expected[i] =
          expected[i] * (1 - lr * wd) - lr * g[i] / (std::fabs(g[i]) + eps);
      EXPECT_NEAR(p[i], expected[i], 2e-6) << "step " << step << " " << i;
      EXPECT_NEAR(m[i], (1 - std::pow(b1, step)) * g[i],
                  1e-6 * std::fabs(g[i]));
      EXPECT_NEAR(v[i], (1 - std::pow(b2, step)) * g[i] * g[i],
                  1e-5 * g[i] * g[i]);
    }
  }
}

/// memopt_set_lr_scale multiplies every update's lr: AdamW and SGD at lr
/// 0.02 with scale 0.25 are bit for bit the updates at lr 0.005.
TEST_F(RuntimeTest, LrScaleMultipliesEveryUpdatesLr) {
  std::vector<float> g = {0.3f, -2.0f, 1e-3f};
  auto adamw = [&](double lr) {
    std::vector<float> p = {1.0f, -0.5f, 2.0f}, m(3, 0.1f), v(3, 0.2f);
    int64_t step = 2;
    memopt_adamw_update(ctx, MEMOPT_F32, p.data(), g.data(), m.data(),
                        v.data(), &step, nullptr, p.data(), m.data(), v.data(),
                        3, lr, 0.9, 0.999, 1e-8, 0.1);
    return p;
  };
  auto sgd = [&](double lr) {
    std::vector<float> p = {1.0f, -0.5f, 2.0f}, buf(3, 0.1f);
    memopt_sgd_update(ctx, MEMOPT_F32, p.data(), g.data(), buf.data(), nullptr,
                      p.data(), buf.data(), 3, lr, 0.9, 0.1);
    return p;
  };
  EXPECT_EQ(memopt_get_lr_scale(ctx), 1.0);
  std::vector<float> adamwWant = adamw(0.005), sgdWant = sgd(0.005);
  memopt_set_lr_scale(ctx, 0.25);
  EXPECT_EQ(adamw(0.02), adamwWant);
  EXPECT_EQ(sgd(0.02), sgdWant);
  EXPECT_NE(adamw(0.005), adamwWant);
  expectOk();
  memopt_set_lr_scale(ctx, -1.0);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(memopt_get_lr_scale(ctx), 0.25);
  memopt_clear_error(ctx);
}

TEST_F(RuntimeTest, AdamWTwoStepsByHand) {
  // p0 = 1, g1 = 0.1, g2 = -0.2, lr 0.01, betas (0.9, 0.99), eps 1e-8,
  // wd 0.1:
  //   step 1: p = 0.999; m = 0.01; v = 1e-4; m^ = 0.1; v^ = 0.01;
  //           p = 0.999 - 0.01 * 0.1 / (0.1 + 1e-8) = 0.989000001
  //   step 2: p = 0.989000001 * 0.999; m = 0.009 - 0.02 = -0.011;
  //           v = 9.9e-5 + 4e-4 = 4.99e-4; m^ = -0.011 / 0.19;
  //           v^ = 4.99e-4 / 0.0199;
  //           p += 0.01 * (0.011 / 0.19) / (sqrt(4.99e-4 / 0.0199) + 1e-8)
  std::vector<float> p = {1.0f}, m = {0.0f}, v = {0.0f};
  std::vector<float> g1 = {0.1f}, g2 = {-0.2f};
  int64_t step = 1;
  memopt_adamw_update(ctx, MEMOPT_F32, p.data(), g1.data(), m.data(), v.data(),
                      &step, nullptr, p.data(), m.data(), v.data(), 1, 0.01,
                      0.9, 0.99, 1e-8, 0.1);
  EXPECT_NEAR(p[0], 0.989000001, 2e-7);
  step = 2;
  memopt_adamw_update(ctx, MEMOPT_F32, p.data(), g2.data(), m.data(), v.data(),
                      &step, nullptr, p.data(), m.data(), v.data(), 1, 0.01,
                      0.9, 0.99, 1e-8, 0.1);
  double p2 = 0.989000001 * 0.999 +
              0.01 * (0.011 / 0.19) / (std::sqrt(4.99e-4 / 0.0199) + 1e-8);
  EXPECT_NEAR(m[0], -0.011, 1e-7);
  EXPECT_NEAR(v[0], 4.99e-4, 1e-9);
  EXPECT_NEAR(p[0], p2, 1e-6);
}

TEST_F(RuntimeTest, EmptyUpdatesDoNothing) {
  // An empty tensor is a no-op before the step count is read, as on CUDA
  // (Validate.h, isEmpty): a step of 0 is then no error.
  int64_t step = 0;
  float unused = 7.0f;
  memopt_adamw_update(ctx, MEMOPT_F32, &unused, &unused, &unused, &unused,
                      &step, nullptr, &unused, &unused, &unused, 0, 1e-3, 0.9,
                      0.999, 1e-8, 0.01);
  memopt_sgd_update(ctx, MEMOPT_F32, &unused, &unused, &unused, nullptr,
                    &unused, &unused, 0, 0.1, 0.9, 0.01);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  EXPECT_EQ(unused, 7.0f);
  // With one element the same step is the error it always was.
  expectError = true;
  memopt_adamw_update(ctx, MEMOPT_F32, &unused, &unused, &unused, &unused,
                      &step, nullptr, &unused, &unused, &unused, 1, 1e-3, 0.9,
                      0.999, 1e-8, 0.01);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
}

TEST_F(RuntimeTest, SkippedUpdatesLeaveEverythingUnchanged) {
  uint8_t skip = 1;
  std::vector<float> p = {1.0f, 2.0f}, g = {0.5f, 0.5f}, m = {0.1f, 0.2f},
                     v = {0.3f, 0.4f};
  std::vector<float> p0 = p, m0 = m, v0 = v;
  int64_t step = 5, nextStep = -1;
  memopt_adamw_update(ctx, MEMOPT_F32, p.data(), g.data(), m.data(), v.data(),
                      &step, &skip, p.data(), m.data(), v.data(), 2, 0.1, 0.9,
                      0.999, 1e-8, 0.1);
  EXPECT_EQ(p, p0);
  EXPECT_EQ(m, m0);
  EXPECT_EQ(v, v0);
  // Out of place: outputs receive copies.
  std::vector<float> outP(2), outB(2);
  memopt_sgd_update(ctx, MEMOPT_F32, p.data(), g.data(), m.data(), &skip,
                    outP.data(), outB.data(), 2, 0.1, 0.9, 0.0);
  EXPECT_EQ(outP, p0);
  EXPECT_EQ(outB, m0);
  memopt_increment(ctx, &step, &skip, &nextStep);
  EXPECT_EQ(nextStep, 5);
  skip = 0;
  memopt_increment(ctx, &step, &skip, &nextStep);
  EXPECT_EQ(nextStep, 6);
  memopt_increment(ctx, &step, nullptr, &nextStep);
  EXPECT_EQ(nextStep, 6);
}

TEST_F(RuntimeTest, UnscaleFindsNonFiniteValuesAcrossTensors) {
  float scale = 1024.0f, loss = 0.5f, scaled = 0;
  memopt_scale_loss(ctx, &loss, &scale, &scaled);
  EXPECT_EQ(scaled, 512.0f);

  std::vector<float> a = {2048.0f, -512.0f};
  std::vector<uint16_t> b = {memopt::runtime::floatToHalfBits(256.0f),
                             memopt::runtime::floatToHalfBits(1.0f)};
  memopt_dtype dtypes[] = {MEMOPT_F32, MEMOPT_F16};
  const void *grads[] = {a.data(), b.data()};
  void *results[] = {a.data(), b.data()};
  int64_t sizes[] = {2, 2};
  uint8_t foundInf = 7;
  memopt_unscale(ctx, &scale, 2, dtypes, grads, results, sizes, &foundInf);
  EXPECT_EQ(foundInf, 0);
  EXPECT_EQ(a, (std::vector<float>{2.0f, -0.5f}));
  EXPECT_EQ(memopt::runtime::halfBitsToFloat(b[0]), 0.25f);
  EXPECT_EQ(memopt::runtime::halfBitsToFloat(b[1]), 1.0f / 1024);

  for (float bad :
       {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> c = {1.0f, bad};
    std::vector<float> d = {3.0f};
    const void *g2[] = {d.data(), c.data()};
    void *r2[] = {d.data(), c.data()};
    memopt_dtype t2[] = {MEMOPT_F32, MEMOPT_F32};
    int64_t s2[] = {1, 2};
    memopt_unscale(ctx, &scale, 2, t2, g2, r2, s2, &foundInf);
    EXPECT_EQ(foundInf, 1);
  }
}

TEST_F(RuntimeTest, UpdateScaleFollowsGradScaler) {
  float scale = 65536.0f, newScale = 0;
  int64_t tracker = 0, newTracker = -1;
  uint8_t inf = 0;
  // Growth interval 3: two good steps count, the third grows the scale.
  for (int i = 1; i <= 2; ++i) {
    memopt_update_scale(ctx, &scale, &tracker, &inf, &newScale, &newTracker,
                        2.0, 0.5, 3);
    EXPECT_EQ(newScale, 65536.0f);
    EXPECT_EQ(newTracker, i);
    tracker = newTracker;
  }
  memopt_update_scale(ctx, &scale, &tracker, &inf, &newScale, &newTracker, 2.0,
                      0.5, 3);
  EXPECT_EQ(newScale, 131072.0f);
  EXPECT_EQ(newTracker, 0);
  // An overflow backs off and resets the tracker.
  scale = newScale;
  tracker = 2;
  inf = 1;
  memopt_update_scale(ctx, &scale, &tracker, &inf, &newScale, &newTracker, 2.0,
                      0.5, 3);
  EXPECT_EQ(newScale, 65536.0f);
  EXPECT_EQ(newTracker, 0);
  // Growth that would overflow f32 keeps the scale (and resets the tracker).
  scale = 3.0e38f;
  tracker = 0;
  inf = 0;
  memopt_update_scale(ctx, &scale, &tracker, &inf, &newScale, &newTracker, 2.0,
                      0.5, 1);
  EXPECT_EQ(newScale, 3.0e38f);
  EXPECT_EQ(newTracker, 0);
}

} // namespace
