//===- GemmTest.cpp - matmul against a naive reference --------------------===//
//
// Every combination of transposes and batch layouts (equal batches, a shared
// right-hand matrix, a shared left-hand matrix) against a triple loop in
// double, and f16/bf16 operands with f32 and low-precision results.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"
#include "memopt/runtime/Float16.h"

using namespace memopt::runtime;
using namespace memopt::test;

namespace {

/// c[batch][m][n] in double from row-major a and b with the given storage.
std::vector<double> referenceMatmul(const std::vector<float> &a,
                                    const std::vector<float> &b, int64_t batchA,
                                    int64_t batchB, int64_t m, int64_t n,
                                    int64_t k, bool transA, bool transB) {
  int64_t batch = std::max(batchA, batchB);
  std::vector<double> c(batch * m * n, 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const float *pa = a.data() + (batchA == 1 ? 0 : bi * m * k);
    const float *pb = b.data() + (batchB == 1 ? 0 : bi * k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) {
          double av = transA ? pa[l * m + i] : pa[i * k + l];
          double bv = transB ? pb[j * k + l] : pb[l * n + j];
          s += av * bv;
        }
        c[(bi * m + i) * n + j] = s;
      }
  }
  return c;
}

TEST_F(RuntimeTest, MatmulTransposesAndBatchBroadcast) {
  const int64_t m = 5, n = 7, k = 6;
  struct Batches {
    int64_t a, b;
  } layouts[] = {{1, 1}, {3, 3}, {3, 1}, {1, 3}};
  for (Batches bs : layouts) {
    for (int transA = 0; transA < 2; ++transA) {
      for (int transB = 0; transB < 2; ++transB) {
        std::vector<float> a = randomVector(rng, bs.a * m * k);
        std::vector<float> b = randomVector(rng, bs.b * k * n);
        int64_t batch = std::max(bs.a, bs.b);
        std::vector<float> c(batch * m * n, -1.0f);
        memopt_matmul(ctx, MEMOPT_F32, a.data(), b.data(), c.data(), bs.a, bs.b,
                      m, n, k, transA, transB, MEMOPT_F32);
        std::vector<double> ref =
            referenceMatmul(a, b, bs.a, bs.b, m, n, k, transA, transB);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], ref[i], 1e-5)
              << "batches " << bs.a << "," << bs.b << " trans " << transA
              << transB << " element " << i;
      }
    }
  }
}

TEST_F(RuntimeTest, MatmulLowPrecisionOperandsAccumulateInF32) {
  const int64_t batch = 2, m = 4, n = 3, k = 33;
  for (memopt_dtype dtype : {MEMOPT_F16, MEMOPT_BF16}) {
    std::vector<float> a = randomVector(rng, batch * m * k);
    std::vector<float> b = randomVector(rng, k * n);
    std::vector<uint16_t> la(a.size()), lb(b.size());
    memopt_cast(ctx, MEMOPT_F32, a.data(), dtype, la.data(), a.size());
    memopt_cast(ctx, MEMOPT_F32, b.data(), dtype, lb.data(), b.size());
    // The reference multiplies the rounded operands exactly.
    std::vector<float> ra(a.size()), rb(b.size());
    memopt_cast(ctx, dtype, la.data(), MEMOPT_F32, ra.data(), a.size());
    memopt_cast(ctx, dtype, lb.data(), MEMOPT_F32, rb.data(), b.size());
    std::vector<double> ref =
        referenceMatmul(ra, rb, batch, 1, m, n, k, false, false);

    std::vector<float> c32(batch * m * n);
    memopt_matmul(ctx, dtype, la.data(), lb.data(), c32.data(), batch, 1, m, n,
                  k, 0, 0, MEMOPT_F32);
    for (size_t i = 0; i < c32.size(); ++i)
      EXPECT_NEAR(c32[i], ref[i], 1e-5);

    std::vector<uint16_t> c16(batch * m * n);
    memopt_matmul(ctx, dtype, la.data(), lb.data(), c16.data(), batch, 1, m, n,
                  k, 0, 0, dtype);
    for (size_t i = 0; i < c16.size(); ++i) {
      // One rounding of the f32 result.
      uint16_t expected = dtype == MEMOPT_F16 ? floatToHalfBits(c32[i])
                                              : floatToBFloat16Bits(c32[i]);
      EXPECT_EQ(c16[i], expected) << i;
    }
  }
}

TEST_F(RuntimeTest, MatmulRejectsMismatchedBatches) {
  expectError = true;
  std::vector<float> a(2 * 4), b(3 * 4), c(3 * 4);
  memopt_matmul(ctx, MEMOPT_F32, a.data(), b.data(), c.data(), 2, 3, 2, 2, 2, 0,
                0, MEMOPT_F32);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(memopt_get_error_message(ctx)).find("memopt_matmul"),
            std::string::npos);
}

} // namespace
