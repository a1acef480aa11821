//===- CudaEmbeddingTest.cpp - the CUDA embedding gradient ----------------===//
//
// memopt_embedding_grad on the device (sort keys, segments, in-order sums;
// runtime/cuda/Shape.cu) against references computed here: the host
// runtime's order (each row's positions ascending, in f32 from 0, rounded
// once), which f32 and, after one rounding, f16/bf16 results must equal
// bit for bit, and an f64 sum with a bound on the rounding. The shapes have
// many repeated and unsorted indices, a row repeated at every position,
// padding rows, rows no index touches, i32 and i64 indices and widths that
// end in a partial column tile. Also: a second run gives the same bits,
// indices out of range are reported with the host's message, and a scratch
// slice too small for the sort is an error that names the entry.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "CudaTestFixture.h"
#include "memopt/runtime/Float16.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace memopt::runtime;
using namespace memopt::test;

namespace {

/// The value of element `i` of a `dtype` tensor's raw bytes.
float loadValue(memopt_dtype dtype, const std::vector<uint8_t> &bytes,
                size_t i) {
  if (dtype == MEMOPT_F32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + 2 * i, 2);
  return dtype == MEMOPT_F16 ? halfBitsToFloat(bits)
                             : bfloat16BitsToFloat(bits);
}

/// `values` rounded to `dtype` (to nearest even), as raw bytes.
std::vector<uint8_t> storeValues(memopt_dtype dtype,
                                 const std::vector<float> &values) {
  std::vector<uint8_t> bytes(values.size() * memopt_dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == MEMOPT_F32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
      continue;
    }
    uint16_t bits = dtype == MEMOPT_F16 ? floatToHalfBits(values[i])
                                        : floatToBFloat16Bits(values[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

/// The first element (of `size` bytes) where `a` and `b` differ, or -1.
int64_t firstDifference(const std::vector<uint8_t> &a,
                        const std::vector<uint8_t> &b, size_t size) {
  if (a.size() != b.size())
    return 0;
  for (size_t i = 0; i < a.size(); i += size)
    if (std::memcmp(a.data() + i, b.data() + i, size) != 0)
      return static_cast<int64_t>(i / size);
  return -1;
}

/// The host runtime's gradient: every row from 0, then the gradient rows of
/// the positions in increasing order added in f32, skipping indices out of
/// range and the padding row; `grad` holds the tensor's values.
std::vector<float> hostOrderGradient(const std::vector<int64_t> &indices,
                                     const std::vector<float> &grad,
                                     int64_t rows, int64_t dim,
                                     int64_t padding) {
  std::vector<float> acc(rows * dim, 0.0f);
  for (size_t p = 0; p < indices.size(); ++p) {
    int64_t row = indices[p];
    if (row < 0 || row >= rows || row == padding)
      continue;
    for (int64_t j = 0; j < dim; ++j)
      acc[row * dim + j] += grad[p * dim + j];
  }
  return acc;
}

/// The same sums in f64, with the sum of magnitudes of each element.
void f64Gradient(const std::vector<int64_t> &indices,
                 const std::vector<float> &grad, int64_t rows, int64_t dim,
                 int64_t padding, std::vector<double> &sum,
                 std::vector<double> &magnitude) {
  sum.assign(rows * dim, 0.0);
  magnitude.assign(rows * dim, 0.0);
  for (size_t p = 0; p < indices.size(); ++p) {
    int64_t row = indices[p];
    if (row < 0 || row >= rows || row == padding)
      continue;
    for (int64_t j = 0; j < dim; ++j) {
      sum[row * dim + j] += grad[p * dim + j];
      magnitude[row * dim + j] += std::fabs(grad[p * dim + j]);
    }
  }
}

class CudaEmbeddingTest : public CudaTest {
protected:
  /// `n` indices into [0, rows - 2) (the last two rows stay untouched):
  /// half from a hot set of four rows (long segments), half uniform,
  /// unsorted.
  std::vector<int64_t> skewedIndices(int64_t n, int64_t rows) {
    std::uniform_int_distribution<int64_t> any(0, rows - 3), hot(0, 3);
    std::bernoulli_distribution coin(0.5);
    std::vector<int64_t> indices(n);
    for (int64_t &index : indices)
      index = coin(rng) ? 3 * hot(rng) : any(rng);
    return indices;
  }

  /// Uploads `indices` as `indexDtype`.
  void *uploadIndices(memopt_dtype indexDtype,
                      const std::vector<int64_t> &indices) {
    if (indexDtype == MEMOPT_I64)
      return upload(indices);
    return upload(std::vector<int32_t>(indices.begin(), indices.end()));
  }

  /// memopt_embedding_grad of `grad` (raw bytes of `dtype`) into a table
  /// first filled with 0xff bytes (NaN), read back as raw bytes.
  std::vector<uint8_t> runGrad(memopt_dtype dtype,
                               const std::vector<uint8_t> &grad,
                               memopt_dtype indexDtype, const void *indices,
                               int64_t n, int64_t rows, int64_t dim,
                               int64_t padding) {
    size_t bytes = rows * dim * memopt_dtype_size(dtype);
    void *out = alloc(bytes);
    memopt_copy_from_host(ctx, out, std::vector<uint8_t>(bytes, 0xff).data(),
                          bytes);
    memopt_embedding_grad(ctx, dtype, upload(grad), indexDtype, indices, out, n,
                          rows, dim, padding);
    return download<uint8_t>(out, bytes);
  }
};

TEST_F(CudaEmbeddingTest, F32EqualsTheHostOrderBitForBit) {
  // 6000 positions into 500 rows, padding row 3 (one of the hot rows); 300
  // columns: a full and a partial column tile.
  const int64_t n = 6000, rows = 500, dim = 300, padding = 3;
  std::vector<int64_t> indices = skewedIndices(n, rows);
  std::vector<float> grad = random(n * dim, -4.0f, 4.0f);
  std::vector<uint8_t> want = storeValues(
      MEMOPT_F32, hostOrderGradient(indices, grad, rows, dim, padding));
  for (memopt_dtype indexDtype : {MEMOPT_I32, MEMOPT_I64}) {
    std::vector<uint8_t> got =
        runGrad(MEMOPT_F32, storeValues(MEMOPT_F32, grad), indexDtype,
                uploadIndices(indexDtype, indices), n, rows, dim, padding);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    EXPECT_EQ(firstDifference(got, want, 4), -1)
        << "index dtype " << indexDtype;
    for (int64_t j = 0; j < dim; ++j) {
      EXPECT_EQ(loadValue(MEMOPT_F32, got, padding * dim + j), 0.0f);
      EXPECT_EQ(loadValue(MEMOPT_F32, got, (rows - 1) * dim + j), 0.0f);
    }
  }
}

TEST_F(CudaEmbeddingTest, OneRowAtEveryPosition) {
  // GPT-2 small's shape with one token everywhere: one segment of 8192
  // positions, 768 columns (three tiles).
  const int64_t n = 8192, rows = 64, dim = 768, row = 17;
  std::vector<int64_t> indices(n, row);
  std::vector<float> grad = random(n * dim);
  std::vector<uint8_t> got =
      runGrad(MEMOPT_F32, storeValues(MEMOPT_F32, grad), MEMOPT_I64,
              upload(indices), n, rows, dim, -1);
  std::vector<float> want = hostOrderGradient(indices, grad, rows, dim, -1);
  EXPECT_EQ(firstDifference(got, storeValues(MEMOPT_F32, want), 4), -1);
}

TEST_F(CudaEmbeddingTest, SixteenBitTablesRoundTheF32SumOnce) {
  // f16/bf16 gradients: each element is the host-order f32 sum rounded
  // once (bit for bit), within half an ulp of the dtype plus the f32 sum's
  // own error of the f64 sum.
  const int64_t n = 3000, rows = 200, dim = 130, padding = 0;
  std::vector<int64_t> indices = skewedIndices(n, rows);
  for (memopt_dtype dtype : {MEMOPT_BF16, MEMOPT_F16}) {
    std::vector<uint8_t> grad = storeValues(dtype, random(n * dim));
    std::vector<float> values(n * dim);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = loadValue(dtype, grad, i);
    std::vector<uint8_t> got =
        runGrad(dtype, grad, MEMOPT_I32, uploadIndices(MEMOPT_I32, indices), n,
                rows, dim, padding);
    std::vector<float> want =
        hostOrderGradient(indices, values, rows, dim, padding);
    EXPECT_EQ(firstDifference(got, storeValues(dtype, want), 2), -1)
        << "dtype " << dtype;
    std::vector<double> sum, magnitude;
    f64Gradient(indices, values, rows, dim, padding, sum, magnitude);
    double halfUlp =
        dtype == MEMOPT_BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (int64_t i = 0; i < rows * dim; ++i) {
      double tolerance = halfUlp * std::fabs(sum[i]) +
                         n * std::ldexp(1.0, -24) * magnitude[i] +
                         std::ldexp(1.0, -25); // f16's subnormal spacing
      ASSERT_NEAR(loadValue(dtype, got, i), sum[i], tolerance)
          << "dtype " << dtype << " element " << i;
    }
  }
}

TEST_F(CudaEmbeddingTest, SecondRunGivesTheSameBits) {
  const int64_t n = 5000, rows = 1000, dim = 96;
  std::vector<int64_t> indices = skewedIndices(n, rows);
  void *di = uploadIndices(MEMOPT_I64, indices);
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_BF16}) {
    std::vector<uint8_t> grad = storeValues(dtype, random(n * dim));
    std::vector<uint8_t> first =
        runGrad(dtype, grad, MEMOPT_I64, di, n, rows, dim, 5);
    std::vector<uint8_t> second =
        runGrad(dtype, grad, MEMOPT_I64, di, n, rows, dim, 5);
    EXPECT_EQ(firstDifference(first, second, 1), -1) << "dtype " << dtype;
  }
}

TEST_F(CudaEmbeddingTest, NoIndicesGiveAZeroTable) {
  std::vector<uint8_t> got =
      runGrad(MEMOPT_BF16, {}, MEMOPT_I64, nullptr, 0, 7, 9, -1);
  ASSERT_EQ(got.size(), 7u * 9u * 2u);
  EXPECT_EQ(firstDifference(got, std::vector<uint8_t>(got.size(), 0), 2), -1);
}

TEST_F(CudaEmbeddingTest, IndexOutOfRangeIsReportedWithTheHostMessage) {
  expectError = true;
  const int64_t rows = 10, dim = 4;
  struct Case {
    std::vector<int64_t> indices;
    int64_t dim;
    const char *message;
  } cases[] = {
      {{1, 2, 12, 3},
       dim,
       "memopt_embedding_grad: index 12 at position 2 out of range [0, 10)"},
      {{-1, 2},
       dim,
       "memopt_embedding_grad: index -1 at position 0 out of range [0, 10)"},
      {{4, 10},
       dim,
       "memopt_embedding_grad: index 10 at position 1 out of range [0, 10)"},
      // Without columns nothing is written, but the indices are checked.
      {{0, 11},
       0,
       "memopt_embedding_grad: index 11 at position 1 out of range [0, 10)"},
  };
  for (memopt_dtype indexDtype : {MEMOPT_I32, MEMOPT_I64}) {
    for (const Case &c : cases) {
      int64_t n = static_cast<int64_t>(c.indices.size());
      runGrad(MEMOPT_F32, storeValues(MEMOPT_F32, random(n * c.dim)),
              indexDtype, uploadIndices(indexDtype, c.indices), n, rows, c.dim,
              -1);
      EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INDEX_OUT_OF_RANGE);
      EXPECT_STREQ(memopt_get_error_message(ctx), c.message)
          << "index dtype " << indexDtype;
      memopt_clear_error(ctx);
    }
  }
}

TEST_F(CudaEmbeddingTest, ScratchTooSmallForTheSortIsAnError) {
  // Two 8-byte keys per position: more positions than the scratch holds.
  expectError = true;
  const int64_t n = static_cast<int64_t>(ctx->scratchBytes / 16) + 1;
  std::vector<int32_t> indices(n, 0);
  memopt_embedding_grad(ctx, MEMOPT_F32, upload(random(n)), MEMOPT_I32,
                        upload(indices), alloc(4), n, 1, 1, -1);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  std::string message = memopt_get_error_message(ctx);
  EXPECT_EQ(message.rfind("memopt_embedding_grad: needs ", 0), 0u) << message;
  EXPECT_NE(message.find("bytes of scratch"), std::string::npos) << message;
}

} // namespace
