//===- CudaNf4Test.cpp - NF4 products on the device -----------------------===//
//
// memopt_nf4_matmul on the device: the dequantized chunk the kernel leaves
// in the scratch equals the host's Nf4Math.h values rounded to the dtype,
// bit for bit, and the product is within the bound of f32 accumulation of
// the float64 product of the dequantized weight (cuBLASLt's order of
// summation is its own, so the host's bits are not expected). Also the
// GEMM helpers' row stride (ldc), which writes a chunk's columns into c,
// through cuBLASLt and through the fallback kernel, and (without a device)
// the column-major problem that ldc maps to, and the NF4 fused loss against
// the fused loss of the dequantized weight. The device tests skip without
// one; Nf4Test.cpp checks the format itself.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "CudaTestFixture.h"
#include "GemmPlan.h"
#include "Nf4TestUtil.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

using memopt::test::CudaTest;
using namespace memopt::test;

namespace {

struct ProductShape {
  int64_t m, n, k;
  /// Columns per chunk the scratch holds; 0: the planned scratch.
  int64_t chunk;
};

/// Element (row, col) of op(x) for a column-major layout.
double opAt(const std::vector<double> &x, const memopt::cuda::GemmLayout &l,
            bool trans, int64_t row, int64_t col) {
  int64_t r = trans ? col : row, c = trans ? row : col;
  EXPECT_TRUE(r < l.rows && c < l.cols) << r << ", " << c;
  return x[r + c * l.ld];
}

/// Without a device: the column-major problem of a product with row stride
/// ldc, run here, writes exactly c's columns [first, first + n) of a
/// row-major [m, ldc] matrix.
TEST(GemmMappingTest, RowStrideWritesAColumnBlock) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const int64_t m = 4, n = 3, k = 5, ldc = 11, first = 6;
  for (bool transB : {false, true}) {
    SCOPED_TRACE(transB ? "trans_b" : "");
    std::vector<double> a(m * k), b(k * n), c(m * ldc, NAN);
    for (double &x : a)
      x = dist(rng);
    for (double &x : b)
      x = dist(rng);
    memopt::cuda::ColumnMajorGemm g =
        memopt::cuda::mapRowMajorGemm(m, n, k, 1, 1, false, transB, ldc);
    EXPECT_EQ(g.out.ld, ldc);
    EXPECT_GE(g.out.ld, g.out.rows);
    // First operand: b (cuBLASLt's A), second: a; out[i', j'] at i' + j' ld.
    double *out = c.data() + first;
    for (int64_t i = 0; i < g.out.rows; ++i)
      for (int64_t j = 0; j < g.out.cols; ++j) {
        double sum = 0.0;
        for (int64_t l = 0; l < g.inner; ++l)
          sum += opAt(b, g.first, g.transFirst, i, l) *
                 opAt(a, g.second, g.transSecond, l, j);
        out[i + j * g.out.ld] = sum;
      }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        if (j < first || j >= first + n) {
          EXPECT_TRUE(std::isnan(c[i * ldc + j])) << i << ", " << j;
          continue;
        }
        double want = 0.0;
        for (int64_t l = 0; l < k; ++l)
          want += a[i * k + l] *
                  (transB ? b[(j - first) * k + l] : b[l * n + j - first]);
        EXPECT_NEAR(c[i * ldc + j], want, 1e-12) << i << ", " << j;
      }
  }
}

TEST_F(CudaTest, Nf4MatmulMatchesTheDequantizedProduct) {
  const ProductShape shapes[] = {
      {3, 70, 130, 16}, {3, 70, 130, 0},   {5, 1, 64, 0},
      {4, 33, 7, 5},    {37, 300, 200, 0}, {64, 1024, 512, 96},
  };
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_F16, MEMOPT_BF16})
    for (bool transB : {true, false})
      for (const ProductShape &s : shapes) {
        std::string what =
            std::string(memopt::runtime::dtypeName(dtype)) +
            (transB ? " trans_b" : "") + " m=" + std::to_string(s.m) +
            " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
            " chunk=" + std::to_string(s.chunk);
        SCOPED_TRACE(what);
        int64_t numel = s.n * s.k;
        std::vector<uint8_t> packed = nf4Pack(nf4Weights(rng, numel));
        std::vector<float> w = nf4Dequantized(dtype, packed, numel);
        std::vector<float> a = random(s.m * s.k);
        for (float &x : a)
          x = roundToDType(dtype, x);
        uint64_t scratchBytes = s.chunk
                                    ? 4 * s.k * s.chunk
                                    : memopt_nf4_matmul_scratch_bytes(s.n, s.k);
        size_t size = memopt_dtype_size(dtype);
        uint8_t *da = upload(storageOf(dtype, a));
        uint8_t *dw = upload(packed);
        void *dc = alloc(s.m * s.n * size);
        void *scratch = alloc(scratchBytes);
        memopt_nf4_matmul(ctx, dtype, da, dw, dc, scratch, scratchBytes, s.m,
                          s.n, s.k, transB);
        ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
            << memopt_get_error_message(ctx);
        std::vector<float> c =
            floatsOf(dtype, download<uint8_t>(dc, s.m * s.n * size));
        expectNearProduct(dtype, a, w, c, s.m, s.n, s.k, transB, what);

        // The scratch holds the last chunk's columns of op(w) in w's layout.
        int64_t chunk = memopt::runtime::nf4MatmulChunk(s.n, s.k, scratchBytes);
        int64_t first = (s.n - 1) / chunk * chunk, cols = s.n - first;
        std::vector<float> held =
            floatsOf(dtype, download<uint8_t>(scratch, cols * s.k * size));
        for (int64_t r = 0; r < (transB ? cols : s.k); ++r)
          for (int64_t j = 0; j < (transB ? s.k : cols); ++j) {
            int64_t at = transB ? (first + r) * s.k + j : r * s.n + first + j;
            float got = held[r * (transB ? s.k : cols) + j];
            ASSERT_EQ(memopt::runtime::floatBits(got),
                      memopt::runtime::floatBits(w[at]))
                << "dequantized element " << at << ": " << got << " vs "
                << w[at];
          }
      }
}

TEST_F(CudaTest, Nf4MatmulOfNoInnerExtentIsZero) {
  std::vector<float> ones(6, 1.0f);
  float *dc = upload(ones);
  std::vector<uint8_t> packed(memopt::runtime::nf4PackedBytes(0), 0);
  memopt_nf4_matmul(ctx, MEMOPT_F32, nullptr, upload(packed), dc, nullptr, 0, 2,
                    3, 0, 1);
  for (float x : download<float>(dc, 6))
    EXPECT_EQ(x, 0.0f);
}

/// c's columns [first, first + cols) of a [m, ldc] matrix, written by
/// memopt::cuda::gemm (cuBLASLt) or gemmFallback with row stride ldc; the
/// other columns keep their values.
TEST_F(CudaTest, GemmWritesAColumnBlockOfAWiderMatrix) {
  const int64_t m = 7, k = 9, cols = 5, ldc = 13, first = 4;
  for (bool fallback : {false, true})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(std::string(fallback ? "fallback" : "cuBLASLt") +
                   (transB ? " trans_b" : ""));
      std::vector<float> a = random(m * k), b = random(k * cols);
      std::vector<float> c(m * ldc, -3.0f);
      float *da = upload(a), *db = upload(b), *dc = upload(c);
      if (fallback)
        memopt::cuda::gemmFallback(ctx, "test", MEMOPT_F32, MEMOPT_F32, da, db,
                                   dc + first, 1, m, cols, k, 0, 0, 0, false,
                                   transB, 0.0f, ldc);
      else
        memopt::cuda::gemm(ctx, "test", MEMOPT_F32, MEMOPT_F32, da, db,
                           dc + first, m, cols, k, false, transB, 0.0f, ldc);
      std::vector<float> got = download<float>(dc, m * ldc);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          if (j < first || j >= first + cols) {
            EXPECT_EQ(got[i * ldc + j], -3.0f) << i << ", " << j;
            continue;
          }
          double sum = 0.0;
          for (int64_t l = 0; l < k; ++l)
            sum += static_cast<double>(a[i * k + l]) *
                   (transB ? b[(j - first) * k + l] : b[l * cols + j - first]);
          EXPECT_NEAR(got[i * ldc + j], sum, 1e-5) << i << ", " << j;
        }
    }
}

/// The NF4 fused loss and its gradient on the device against the device's
/// memopt_linear_cross_entropy of the dequantized weight stored in dtype:
/// the same products of the same values, within f32 accumulation's bound
/// (cuBLASLt may pick another algorithm for the scratch's alignment than for
/// a view of w) and, for 16-bit gradients, a few roundings of dtype (a
/// dlogit that rounds the other way moves grad_x by one of its ulps).
TEST_F(CudaTest, Nf4LinearLossMatchesTheDequantizedWeight) {
  struct Shape {
    int64_t rows, dim, classes, chunk;
    bool bias;
  } shapes[] = {{6, 64, 40, 16, true}, {5, 7, 33, 5, false},
                {17, 130, 129, 50, true}};
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_BF16})
    for (const Shape &s : shapes) {
      SCOPED_TRACE(std::string(memopt::runtime::dtypeName(dtype)) +
                   " classes=" + std::to_string(s.classes) +
                   " chunk=" + std::to_string(s.chunk));
      int64_t numel = s.classes * s.dim;
      size_t size = memopt_dtype_size(dtype);
      std::vector<uint8_t> packed = nf4Pack(nf4Weights(rng, numel));
      std::vector<float> x = random(s.rows * s.dim), bias = random(s.classes);
      for (float &v : x)
        v = roundToDType(dtype, v);
      for (float &v : bias)
        v = roundToDType(dtype, v);
      std::vector<int64_t> labels(s.rows);
      for (int64_t r = 0; r < s.rows; ++r)
        labels[r] = r == 1 ? -100 : (r * 7) % s.classes;
      uint8_t *dx = upload(storageOf(dtype, x));
      uint8_t *dw =
          upload(storageOf(dtype, nf4Dequantized(dtype, packed, numel)));
      uint8_t *dPacked = upload(packed);
      uint8_t *dBias = s.bias ? upload(storageOf(dtype, bias)) : nullptr;
      int64_t *dLabels = upload(labels);
      float gradLoss = 1.5f;
      float *dGradLoss = upload(std::vector<float>{gradLoss});
      std::vector<float> loss(2), lse[2], gradX[2], gradB[2];
      for (int nf4 = 0; nf4 < 2; ++nf4) {
        auto *dLoss = static_cast<float *>(alloc(4));
        auto *dLse = static_cast<float *>(alloc(4 * s.rows));
        void *dGradX = alloc(s.rows * s.dim * size);
        void *dGradB = s.bias ? alloc(s.classes * size) : nullptr;
        uint64_t bytes =
            nf4 ? memopt_nf4_linear_cross_entropy_scratch_bytes(
                      dtype, s.rows, s.dim, s.chunk, 1)
                : memopt_linear_cross_entropy_scratch_bytes(
                      dtype, dtype, s.rows, s.dim, s.chunk, 1);
        void *scratch = alloc(bytes);
        if (nf4) {
          memopt_nf4_linear_cross_entropy(
              ctx, dtype, dx, dPacked, dBias, MEMOPT_I64, dLabels, dLoss, dLse,
              scratch, bytes, s.rows, s.dim, s.classes, s.chunk, -100,
              MEMOPT_REDUCTION_MEAN);
          memopt_nf4_linear_cross_entropy_grad(
              ctx, dtype, dx, dPacked, dBias, MEMOPT_I64, dLabels, dLse,
              dGradLoss, dGradX, dGradB, scratch, bytes, s.rows, s.dim,
              s.classes, s.chunk, -100, MEMOPT_REDUCTION_MEAN);
        } else {
          memopt_linear_cross_entropy(
              ctx, dtype, dx, dw, dtype, dBias, MEMOPT_I64, dLabels, dLoss,
              dLse, scratch, bytes, s.rows, s.dim, s.classes, s.chunk, -100,
              MEMOPT_REDUCTION_MEAN);
          memopt_linear_cross_entropy_grad(
              ctx, dtype, dx, dw, dtype, dBias, MEMOPT_I64, dLabels, dLse,
              dGradLoss, dGradX, alloc(numel * size), dGradB, scratch, bytes,
              s.rows, s.dim, s.classes, s.chunk, -100, MEMOPT_REDUCTION_MEAN);
        }
        ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
            << memopt_get_error_message(ctx);
        loss[nf4] = download<float>(dLoss, 1)[0];
        lse[nf4] = download<float>(dLse, s.rows);
        gradX[nf4] =
            floatsOf(dtype, download<uint8_t>(dGradX, s.rows * s.dim * size));
        if (s.bias)
          gradB[nf4] =
              floatsOf(dtype, download<uint8_t>(dGradB, s.classes * size));
      }
      // f32 sums of dim products, then one rounding to dtype.
      double f32Bound = s.dim * std::ldexp(1.0, -24);
      auto expectClose = [&](const std::vector<float> &got,
                             const std::vector<float> &want, double rounding,
                             const char *what) {
        double scale = 0.0;
        for (float v : want)
          scale = std::max(scale, std::fabs(static_cast<double>(v)));
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_NEAR(got[i], want[i], (f32Bound + 8 * rounding) * scale)
              << what << " " << i;
      };
      EXPECT_TRUE(std::isfinite(loss[0]));
      expectClose({loss[1]}, {loss[0]}, 0.0, "loss");
      expectClose(lse[1], lse[0], 0.0, "lse");
      expectClose(gradX[1], gradX[0], unitRoundoff(dtype), "grad_x");
      expectClose(gradB[1], gradB[0], unitRoundoff(dtype), "grad_bias");
    }
}

} // namespace
