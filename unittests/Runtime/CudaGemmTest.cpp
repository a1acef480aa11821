//===- CudaGemmTest.cpp - the CUDA runtime's products and their plans -----===//
//
// Without a device: the row-major -> column-major mapping of GemmPlan.h is
// run by a host column-major executor that follows the returned layouts,
// strides and batch strides literally, and compared with a row-major f64
// product for every transpose, shared operand and a range of shapes; a wrong
// leading dimension, operand order, fold or batch stride fails it. The plan
// key's ordering and the batch alignment are checked as well.
//
// With a device: batched products with a shared left or right operand in
// every transpose and dtype against f64 references, that a repeated product
// makes no plan, the fallback kernel (every transpose, shared operands,
// beta, a misaligned operand, determinism) and a misaligned matmul.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "CudaTestFixture.h"
#include "GemmPlan.h"
#include "memopt/runtime/Float16.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace memopt::cuda;
using memopt::runtime::bfloat16BitsToFloat;
using memopt::runtime::floatToBFloat16Bits;
using memopt::runtime::floatToHalfBits;
using memopt::runtime::halfBitsToFloat;
using memopt::test::CudaTest;

namespace {

/// A row-major product's extents and batch.
struct Shape {
  int64_t m, n, k, batchA, batchB;
  bool transA, transB;
  int64_t batch() const { return batchA > batchB ? batchA : batchB; }
};

/// Row-major c[p] = op(a[p]) op(b[p]) in f64 (a shared operand: batch 1).
std::vector<double> referenceProduct(const Shape &s,
                                     const std::vector<double> &a,
                                     const std::vector<double> &b) {
  std::vector<double> c(s.batch() * s.m * s.n);
  for (int64_t p = 0; p < s.batch(); ++p) {
    const double *ap = a.data() + (s.batchA == 1 ? 0 : p * s.m * s.k);
    const double *bp = b.data() + (s.batchB == 1 ? 0 : p * s.k * s.n);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0.0;
        for (int64_t l = 0; l < s.k; ++l)
          sum += (s.transA ? ap[l * s.m + i] : ap[i * s.k + l]) *
                 (s.transB ? bp[j * s.k + l] : bp[l * s.n + j]);
        c[(p * s.m + i) * s.n + j] = sum;
      }
  }
  return c;
}

/// Runs a column-major problem as cuBLASLt reads it: element (i, j) of a
/// layout at i + j * ld, batch element p batchStride elements further, every
/// access checked against its buffer.
class ColumnMajorExecutor {
public:
  ColumnMajorExecutor(const ColumnMajorGemm &g, const std::vector<double> &a,
                      const std::vector<double> &b, std::vector<double> &c)
      : g(g), a(a), b(b), c(c) {}

  void run() {
    const std::vector<double> &x = operand(g.firstSource);
    const std::vector<double> &y = operand(g.secondSource);
    int64_t rows = g.out.rows, cols = g.out.cols;
    for (int64_t p = 0; p < g.batch; ++p)
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < rows; ++i) {
          double sum = 0.0;
          for (int64_t l = 0; l < g.inner; ++l)
            sum += opAt(x, g.first, g.transFirst, p, i, l) *
                   opAt(y, g.second, g.transSecond, p, l, j);
          int64_t at = p * g.out.batchStride + i + j * g.out.ld;
          if (at < 0 || at >= static_cast<int64_t>(c.size())) {
            ADD_FAILURE() << "write outside c at " << at;
            return;
          }
          c[at] = sum;
        }
  }

private:
  const std::vector<double> &operand(GemmSource source) const {
    return source == GemmSource::Right ? b : a;
  }

  /// op(x)[i, j] of batch element p; a transposed operand's op reads
  /// stored element (j, i).
  double opAt(const std::vector<double> &x, const GemmLayout &layout,
              bool trans, int64_t p, int64_t i, int64_t j) const {
    int64_t row = trans ? j : i, col = trans ? i : j;
    int64_t at = p * layout.batchStride + row + col * layout.ld;
    bool inside = row < layout.rows && col < layout.cols && at >= 0 &&
                  at < static_cast<int64_t>(x.size());
    EXPECT_TRUE(inside) << "read of (" << row << ", " << col << ") in a "
                        << layout.rows << " x " << layout.cols
                        << " layout, element " << at << " of " << x.size();
    return inside ? x[at] : NAN;
  }

  const ColumnMajorGemm &g;
  const std::vector<double> &a;
  const std::vector<double> &b;
  std::vector<double> &c;
};

std::vector<double> randomValues(std::mt19937 &rng, int64_t n) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(rng);
  return v;
}

/// Every transpose and sharing of a few shapes, including 1-extents.
std::vector<Shape> allShapes() {
  const int64_t extents[][3] = {{1, 1, 1}, {3, 5, 2}, {5, 3, 7},
                                {2, 1, 4}, {1, 6, 3}, {4, 4, 1}};
  const int64_t batches[][2] = {{1, 1}, {4, 4}, {4, 1}, {1, 4}};
  std::vector<Shape> shapes;
  for (const auto &e : extents)
    for (const auto &bt : batches)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          shapes.push_back({e[0], e[1], e[2], bt[0], bt[1], ta != 0, tb != 0});
  return shapes;
}

std::string describe(const Shape &s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
         " k=" + std::to_string(s.k) + " batch " + std::to_string(s.batchA) +
         "/" + std::to_string(s.batchB) + " trans " + std::to_string(s.transA) +
         std::to_string(s.transB);
}

TEST(GemmMappingTest, ColumnMajorProblemComputesRowMajorProduct) {
  std::mt19937 rng(7);
  for (const Shape &s : allShapes()) {
    SCOPED_TRACE(describe(s));
    std::vector<double> a = randomValues(rng, s.batchA * s.m * s.k);
    std::vector<double> b = randomValues(rng, s.batchB * s.k * s.n);
    ColumnMajorGemm g =
        mapRowMajorGemm(s.m, s.n, s.k, s.batchA, s.batchB, s.transA, s.transB);
    // cuBLASLt requires ld >= rows of every layout.
    EXPECT_GE(g.first.ld, g.first.rows);
    EXPECT_GE(g.second.ld, g.second.rows);
    EXPECT_GE(g.out.ld, g.out.rows);
    // NaN marks elements no product wrote.
    std::vector<double> c(s.batch() * s.m * s.n, NAN);
    ColumnMajorExecutor(g, a, b, c).run();
    std::vector<double> want = referenceProduct(s, a, b);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(c[i], want[i], 1e-12) << "element " << i;
  }
}

TEST(GemmMappingTest, FoldsOnlyASharedRightOperandUnderAPlainLeft) {
  for (const Shape &s : allShapes()) {
    SCOPED_TRACE(describe(s));
    ColumnMajorGemm g =
        mapRowMajorGemm(s.m, s.n, s.k, s.batchA, s.batchB, s.transA, s.transB);
    bool fold = s.batch() > 1 && s.batchB == 1 && !s.transA;
    EXPECT_EQ(g.foldedRows, fold);
    EXPECT_EQ(g.batch, fold ? 1 : s.batch());
    EXPECT_EQ(g.out.cols, fold ? s.batch() * s.m : s.m);
    EXPECT_EQ(g.firstSource, GemmSource::Right);
    EXPECT_EQ(g.secondSource, GemmSource::Left);
    if (g.batch > 1) {
      // One strided-batched call: a shared operand stays where it is.
      EXPECT_EQ(g.first.batchStride, s.batchB == 1 ? 0 : s.k * s.n);
      EXPECT_EQ(g.second.batchStride, s.batchA == 1 ? 0 : s.m * s.k);
      EXPECT_EQ(g.out.batchStride, s.m * s.n);
    }
  }
}

TEST(GemmPlanTest, BatchAlignmentIsThatOfEveryMatrix) {
  EXPECT_EQ(alignmentOf(0x10000), 256u);
  EXPECT_EQ(alignmentOf(0x10040), 64u);
  EXPECT_EQ(alignmentOf(0x10002), 2u);
  EXPECT_EQ(alignmentOf(0x10001), 1u);
  const void *base = reinterpret_cast<const void *>(uintptr_t(0x10000));
  // 3 f16 elements: the second matrix starts 6 bytes in.
  EXPECT_EQ(batchAlignment(base, 3, 2), 2u);
  EXPECT_EQ(batchAlignment(base, 12, 4), 16u);
  EXPECT_EQ(batchAlignment(base, 64, 4), 256u);
  // Shared: every matrix is the first.
  EXPECT_EQ(batchAlignment(base, 0, 2), 256u);
  const void *odd = reinterpret_cast<const void *>(uintptr_t(0x10004));
  EXPECT_EQ(batchAlignment(odd, 64, 4), 4u);
}

TEST(GemmPlanTest, KeysDifferInEveryField) {
  GemmKey base;
  base.m = 4;
  base.n = 5;
  base.k = 6;
  base.alignA = base.alignB = base.alignC = 256;
  base.workspaceBytes = 1 << 20;
  std::vector<GemmKey> variants(13, base);
  variants[0].dtype = MEMOPT_F16;
  variants[1].outDtype = MEMOPT_BF16;
  variants[2].m = 7;
  variants[3].n = 7;
  variants[4].k = 7;
  variants[5].batchA = 2;
  variants[6].batchB = 2;
  variants[7].transA = true;
  variants[8].transB = true;
  variants[9].alignA = 2;
  variants[10].alignB = 2;
  variants[11].alignC = 2;
  variants[12].workspaceBytes = 0;
  EXPECT_FALSE(base < base);
  for (size_t i = 0; i < variants.size(); ++i)
    EXPECT_TRUE(base < variants[i] || variants[i] < base) << "field " << i;
}

//===----------------------------------------------------------------------===//
// Device tests
//===----------------------------------------------------------------------===//

/// `values` rounded to `dtype`, as stored bytes and as the f64 values the
/// device reads.
struct Stored {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};

Stored store(const std::vector<float> &values, memopt_dtype dtype) {
  Stored s;
  size_t size = memopt_dtype_size(dtype);
  s.bytes.resize(values.size() * size);
  s.values.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    float x = values[i];
    if (dtype == MEMOPT_F32) {
      std::memcpy(&s.bytes[i * 4], &x, 4);
      s.values[i] = x;
      continue;
    }
    uint16_t bits =
        dtype == MEMOPT_F16 ? floatToHalfBits(x) : floatToBFloat16Bits(x);
    std::memcpy(&s.bytes[i * 2], &bits, 2);
    s.values[i] =
        dtype == MEMOPT_F16 ? halfBitsToFloat(bits) : bfloat16BitsToFloat(bits);
  }
  return s;
}

std::vector<double> load(const std::vector<uint8_t> &bytes,
                         memopt_dtype dtype) {
  size_t size = memopt_dtype_size(dtype);
  std::vector<double> values(bytes.size() / size);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == MEMOPT_F32) {
      float x;
      std::memcpy(&x, &bytes[i * 4], 4);
      values[i] = x;
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, &bytes[i * 2], 2);
    values[i] =
        dtype == MEMOPT_F16 ? halfBitsToFloat(bits) : bfloat16BitsToFloat(bits);
  }
  return values;
}

/// The tolerance of a result of `dtype` near `want` (k <= 64 products of
/// values in [-1, 1], accumulated in f32 in any order, rounded once).
double tolerance(memopt_dtype dtype, double want) {
  double scale = std::fabs(want) > 1.0 ? std::fabs(want) : 1.0;
  switch (dtype) {
  case MEMOPT_F16:
    return 2e-3 * scale;
  case MEMOPT_BF16:
    return 1e-2 * scale;
  default:
    return 1e-4 * scale;
  }
}

/// The operand and result dtypes the products support.
const memopt_dtype kDtypePairs[][2] = {{MEMOPT_F32, MEMOPT_F32},
                                       {MEMOPT_F16, MEMOPT_F16},
                                       {MEMOPT_F16, MEMOPT_F32},
                                       {MEMOPT_BF16, MEMOPT_BF16},
                                       {MEMOPT_BF16, MEMOPT_F32}};

class CudaGemmTest : public CudaTest {
protected:
  /// Uploads `s` `offset` elements past a 256-byte boundary.
  void *place(const Stored &s, memopt_dtype dtype, int64_t offset = 0) {
    size_t size = memopt_dtype_size(dtype);
    char *p = static_cast<char *>(alloc(s.bytes.size() + 256)) + offset * size;
    memopt_copy_from_host(ctx, p, s.bytes.data(), s.bytes.size());
    return p;
  }

  void expectNear(const std::vector<double> &got,
                  const std::vector<double> &want, memopt_dtype dtype,
                  const std::string &what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], tolerance(dtype, want[i]))
          << what << " element " << i;
  }

  std::vector<double> result(const void *c, const Shape &s,
                             memopt_dtype dtype) {
    size_t bytes = s.batch() * s.m * s.n * memopt_dtype_size(dtype);
    return load(download<uint8_t>(c, bytes), dtype);
  }

  /// memopt_matmul of `s` with random operands against the f64 product.
  void checkMatmul(const Shape &s, memopt_dtype dtype, memopt_dtype outDtype,
                   int64_t offsetA = 0) {
    Stored a = store(random(s.batchA * s.m * s.k), dtype);
    Stored b = store(random(s.batchB * s.k * s.n), dtype);
    void *da = place(a, dtype, offsetA), *db = place(b, dtype);
    void *dc = alloc(s.batch() * s.m * s.n * memopt_dtype_size(outDtype));
    memopt_matmul(ctx, dtype, da, db, dc, s.batchA, s.batchB, s.m, s.n, s.k,
                  s.transA, s.transB, outDtype);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    expectNear(result(dc, s, outDtype), referenceProduct(s, a.values, b.values),
               outDtype, describe(s) + " " + dtypeName(dtype));
  }
};

TEST_F(CudaGemmTest, SharedOperandsInEveryTransposeAndDtype) {
  const int64_t batches[][2] = {{3, 1}, {1, 3}, {3, 3}};
  for (const auto &pair : kDtypePairs)
    for (const auto &bt : batches)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          used = 0;
          checkMatmul({37, 29, 53, bt[0], bt[1], ta != 0, tb != 0}, pair[0],
                      pair[1]);
          if (HasFatalFailure())
            return;
        }
}

TEST_F(CudaGemmTest, RepeatedProductMakesNoPlan) {
  const Shape shapes[] = {{16, 24, 32, 4, 1, true, false},
                          {16, 24, 32, 1, 4, false, true},
                          {16, 24, 32, 4, 1, false, false}};
  size_t before = gemmPlanCount(ctx);
  for (const Shape &s : shapes)
    checkMatmul(s, MEMOPT_F32, MEMOPT_F32);
  size_t made = gemmPlanCount(ctx);
  EXPECT_EQ(made, before + 3);
  // The same shapes at the same (256-byte) alignments: the cached plans.
  for (const Shape &s : shapes) {
    used = 0;
    checkMatmul(s, MEMOPT_F32, MEMOPT_F32);
  }
  EXPECT_EQ(gemmPlanCount(ctx), made);
}

/// Two products of one shape with different operands, both run before
/// either result is read: the cached plan serves both, and each result is
/// its own.
TEST_F(CudaGemmTest, IdenticalShapesKeepTheirOwnResults) {
  const Shape s = {16, 24, 32, 3, 1, false, true};
  Stored a[2], b[2];
  void *c[2];
  for (int k = 0; k < 2; ++k) {
    a[k] = store(random(s.batchA * s.m * s.k), MEMOPT_F32);
    b[k] = store(random(s.batchB * s.k * s.n), MEMOPT_F32);
    c[k] = alloc(s.batch() * s.m * s.n * sizeof(float));
    memopt_matmul(ctx, MEMOPT_F32, place(a[k], MEMOPT_F32),
                  place(b[k], MEMOPT_F32), c[k], s.batchA, s.batchB, s.m, s.n,
                  s.k, s.transA, s.transB, MEMOPT_F32);
  }
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  for (int k = 0; k < 2; ++k)
    expectNear(result(c[k], s, MEMOPT_F32),
               referenceProduct(s, a[k].values, b[k].values), MEMOPT_F32,
               "operands " + std::to_string(k));
}

/// A plain product runs on one cuBLASLt call, not on a fallback
/// (memopt_kernel_paths and --stats report the paths).
TEST_F(CudaGemmTest, PlainProductRunsOnCublasLt) {
  checkMatmul({64, 48, 32, 2, 1, false, true}, MEMOPT_F32, MEMOPT_F32);
  GemmPathCounts counts = gemmPathCounts(ctx);
  EXPECT_EQ(counts.library, 1u);
  EXPECT_EQ(counts.perElement + counts.fallback, 0u);
  char paths[128];
  memopt_kernel_paths(ctx, paths, sizeof(paths));
  EXPECT_STREQ(paths, "gemm_cublaslt=1 gemm_per_element=0 gemm_fallback=0 "
                      "conv_cudnn=0");
}

TEST_F(CudaGemmTest, MisalignedOperandMatchesReference) {
  // a starts one element past a boundary: 2-byte alignment for 16-bit
  // operands, which cuBLASLt may have no algorithm for.
  for (const auto &pair : kDtypePairs)
    for (int ta = 0; ta < 2; ++ta) {
      used = 0;
      checkMatmul({19, 21, 23, 3, 1, ta != 0, false}, pair[0], pair[1], 1);
      checkMatmul({19, 21, 23, 1, 3, ta != 0, true}, pair[0], pair[1], 1);
      checkMatmul({19, 21, 23, 1, 1, ta != 0, false}, pair[0], pair[1], 1);
    }
}

TEST_F(CudaGemmTest, GemmAccumulatesWithBeta) {
  const Shape s{33, 17, 40, 1, 1, false, true};
  Stored a = store(random(s.m * s.k), MEMOPT_F32);
  Stored b = store(random(s.k * s.n), MEMOPT_F32);
  Stored c0 = store(random(s.m * s.n), MEMOPT_F32);
  void *da = place(a, MEMOPT_F32), *db = place(b, MEMOPT_F32);
  void *dc = place(c0, MEMOPT_F32);
  gemm(ctx, "test", MEMOPT_F32, MEMOPT_F32, da, db, dc, s.m, s.n, s.k, s.transA,
       s.transB, 1.0f);
  std::vector<double> want = referenceProduct(s, a.values, b.values);
  for (size_t i = 0; i < want.size(); ++i)
    want[i] += c0.values[i];
  expectNear(result(dc, s, MEMOPT_F32), want, MEMOPT_F32, "beta = 1");
}

/// The fallback kernel directly: every transpose, shared operands, beta (c
/// is NaN where beta = 0: it must not be read), a left operand one element
/// past a boundary, and a second run that must give the same bits.
TEST_F(CudaGemmTest, FallbackKernelMatchesReference) {
  const int64_t batches[][2] = {{1, 1}, {3, 1}, {1, 3}, {3, 3}};
  const float betas[] = {0.0f, 0.5f};
  for (const auto &pair : kDtypePairs)
    for (const auto &bt : batches)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (float beta : betas) {
            used = 0;
            Shape s{37, 29, 53, bt[0], bt[1], ta != 0, tb != 0};
            memopt_dtype dtype = pair[0], outDtype = pair[1];
            Stored a = store(random(s.batchA * s.m * s.k), dtype);
            Stored b = store(random(s.batchB * s.k * s.n), dtype);
            std::vector<float> init(s.batch() * s.m * s.n, NAN);
            if (beta != 0.0f)
              init = random(init.size());
            Stored c0 = store(init, outDtype);
            void *da = place(a, dtype, 1), *db = place(b, dtype);
            void *dc = place(c0, outDtype);
            gemmFallback(ctx, "test", dtype, outDtype, da, db, dc, s.batch(),
                         s.m, s.n, s.k, s.batchA > 1 ? s.m * s.k : 0,
                         s.batchB > 1 ? s.k * s.n : 0, s.m * s.n, s.transA,
                         s.transB, beta);
            std::vector<uint8_t> first = download<uint8_t>(dc, c0.bytes.size());
            std::vector<double> want = referenceProduct(s, a.values, b.values);
            for (size_t i = 0; i < want.size() && beta != 0.0f; ++i)
              want[i] += beta * c0.values[i];
            std::string what = describe(s) + " " + dtypeName(dtype) + " beta " +
                               std::to_string(beta);
            expectNear(load(first, outDtype), want, outDtype, what);
            // Fixed summation order: a second run gives the same bits.
            memopt_copy_from_host(ctx, dc, c0.bytes.data(), c0.bytes.size());
            gemmFallback(ctx, "test", dtype, outDtype, da, db, dc, s.batch(),
                         s.m, s.n, s.k, s.batchA > 1 ? s.m * s.k : 0,
                         s.batchB > 1 ? s.k * s.n : 0, s.m * s.n, s.transA,
                         s.transB, beta);
            ASSERT_EQ(download<uint8_t>(dc, c0.bytes.size()), first) << what;
            if (HasFatalFailure())
              return;
          }
}

} // namespace
