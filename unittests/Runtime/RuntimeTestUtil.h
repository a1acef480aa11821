//===- RuntimeTestUtil.h - helpers for the host runtime tests ---*- C++ -*-===//
//
// A fixture owning a context, seeded random data, and a central-difference
// gradient checker: every backward kernel is compared with the numerical
// derivative of L(x) = sum(forward(x) .* r) for a random upstream gradient
// r, evaluated in double from the f32 forward kernel.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
#define MEMOPT_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H

#include "memopt/runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace memopt {
namespace test {

/// A test owning one host-runtime context; fails if an unexpected error was
/// recorded.
class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx = memopt_context_create();
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override {
    if (!expectError) {
      EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
          << memopt_get_error_message(ctx);
    }
    memopt_context_destroy(ctx);
  }
  /// Asserts that no error was recorded so far.
  void expectOk() {
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
  }

  memopt_context *ctx = nullptr;
  bool expectError = false;
  std::mt19937 rng{1234};
};

/// `n` uniform values in [lo, hi).
inline std::vector<float> randomVector(std::mt19937 &rng, size_t n,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// sum(a .* b) in double.
inline double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// Compares `analytic` with central differences (L(x + h e_i) -
/// L(x - h e_i)) / 2h of the scalar `loss`. The tolerance covers the f32
/// forward's rounding amplified by 1/h and the O(h^2) truncation error on
/// these small, O(1) shapes; a wrong formula is off by O(1).
inline void
expectGradient(const std::function<double(std::vector<float> &)> &loss,
               std::vector<float> x, const std::vector<float> &analytic,
               const char *what, float h = 1e-2f, double tolerance = 1e-2) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    float saved = x[i];
    x[i] = saved + h;
    double plus = loss(x);
    x[i] = saved - h;
    double minus = loss(x);
    x[i] = saved;
    double numeric = (plus - minus) / (2.0 * static_cast<double>(h));
    EXPECT_NEAR(analytic[i], numeric, tolerance * (1.0 + std::fabs(numeric)))
        << what << " element " << i;
  }
}

/// Rounds `x` to values representable in `dtype`.
inline std::vector<float> representable(memopt_context *ctx, memopt_dtype dtype,
                                 std::vector<float> x) {
  if (dtype == MEMOPT_F32 || x.empty())
    return x;
  std::vector<uint16_t> bits(x.size());
  memopt_cast(ctx, MEMOPT_F32, x.data(), dtype, bits.data(), x.size());
  memopt_cast(ctx, dtype, bits.data(), MEMOPT_F32, x.data(), x.size());
  return x;
}

/// A tensor of `dtype` holding `x` (representable), as raw bytes.
inline std::vector<uint8_t> toStorage(memopt_context *ctx, memopt_dtype dtype,
                               const std::vector<float> &x) {
  std::vector<uint8_t> bytes(x.size() * memopt_dtype_size(dtype));
  if (!x.empty())
    memopt_cast(ctx, MEMOPT_F32, x.data(), dtype, bytes.data(), x.size());
  return bytes;
}

/// The floats a `dtype` tensor of raw bytes holds.
inline std::vector<float> fromStorage(memopt_context *ctx, memopt_dtype dtype,
                               const std::vector<uint8_t> &bytes) {
  std::vector<float> x(bytes.size() / memopt_dtype_size(dtype));
  if (!x.empty())
    memopt_cast(ctx, dtype, bytes.data(), MEMOPT_F32, x.data(), x.size());
  return x;
}

} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
