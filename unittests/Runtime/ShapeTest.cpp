//===- ShapeTest.cpp - broadcast, transpose, slice and slice_grad ---------===//
//
// The strided copies against direct index loops, at sizes the host threads
// split (Parallel.h): runs along a contiguous last dimension that cross the
// threads' ranges, a transpose whose last dimension is strided, a strided
// slice and its gradient's scatter, and a rank-0 copy. Then the embedding
// arithmetic both runtimes share (EmbeddingMath.h) against closed forms, and
// the CUDA gradient's algorithm (sort keys, segments, in-order sums) run on
// the CPU against the host runtime's gradient, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"
#include "memopt/runtime/EmbeddingMath.h"

#include <algorithm>
#include <cstring>
#include <limits>

using namespace memopt::runtime;
using namespace memopt::test;

namespace {

TEST_F(RuntimeTest, BroadcastRepeatsRowsAcrossThreadRanges) {
  // [7] -> [3001, 7] along dims [1]: 21007 elements in runs of 7.
  const int64_t rows = 3001, cols = 7;
  std::vector<float> x = randomVector(rng, cols), y(rows * cols, -1.0f);
  int64_t inShape[] = {cols}, dims[] = {1}, outShape[] = {rows, cols};
  memopt_broadcast(ctx, MEMOPT_F32, x.data(), 1, inShape, dims, y.data(), 2,
                   outShape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(y[r * cols + c], x[c]) << "row " << r << " column " << c;
}

TEST_F(RuntimeTest, BroadcastAlongTheLastDimension) {
  // [5000, 1] -> [5000, 4]: the last dimension repeats (step 0).
  const int64_t rows = 5000, cols = 4;
  std::vector<float> x = randomVector(rng, rows), y(rows * cols, -1.0f);
  int64_t inShape[] = {rows, 1}, dims[] = {0, 1}, outShape[] = {rows, cols};
  memopt_broadcast(ctx, MEMOPT_F32, x.data(), 2, inShape, dims, y.data(), 2,
                   outShape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(y[r * cols + c], x[r]) << "row " << r << " column " << c;
}

TEST_F(RuntimeTest, TransposeOfALargeMatrix) {
  const int64_t rows = 211, cols = 157;
  std::vector<float> x = randomVector(rng, rows * cols), y(rows * cols);
  int64_t shape[] = {rows, cols}, perm[] = {1, 0};
  memopt_transpose(ctx, MEMOPT_F32, x.data(), 2, shape, perm, y.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(y[c * rows + r], x[r * cols + c]) << r << ", " << c;
}

TEST_F(RuntimeTest, StridedSliceAndItsGradient) {
  // Rows 3, 5, ... of [400, 90], columns 10..89: 198 x 80 elements.
  const int64_t rows = 400, cols = 90;
  int64_t shape[] = {rows, cols}, starts[] = {3, 10}, limits[] = {399, 90},
          strides[] = {2, 1};
  const int64_t outRows = 198, outCols = 80;
  std::vector<float> x = randomVector(rng, rows * cols),
                     y(outRows * outCols, -1.0f);
  memopt_slice(ctx, MEMOPT_F32, x.data(), 2, shape, starts, limits, strides,
               y.data());
  for (int64_t r = 0; r < outRows; ++r)
    for (int64_t c = 0; c < outCols; ++c)
      ASSERT_EQ(y[r * outCols + c], x[(3 + 2 * r) * cols + 10 + c])
          << r << ", " << c;
  // The gradient scatters y back: zero elsewhere.
  std::vector<float> dx(rows * cols, -1.0f);
  memopt_slice_grad(ctx, MEMOPT_F32, y.data(), 2, shape, starts, limits,
                    strides, dx.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      bool inside = r >= 3 && r < 399 && (r - 3) % 2 == 0 && c >= 10;
      ASSERT_EQ(dx[r * cols + c], inside ? x[r * cols + c] : 0.0f)
          << r << ", " << c;
    }
}

TEST_F(RuntimeTest, RankZeroTranspose) {
  float x = 2.5f, y = 0.0f;
  memopt_transpose(ctx, MEMOPT_F32, &x, 0, nullptr, nullptr, &y);
  EXPECT_EQ(y, 2.5f);
}

TEST(EmbeddingMathTest, IndexRangeAndPadding) {
  const int64_t rows = 10;
  for (int64_t index = -3; index <= rows + 2; ++index)
    EXPECT_EQ(embeddingIndexInRange(index, rows), index >= 0 && index < rows)
        << index;
  EXPECT_FALSE(
      embeddingIndexInRange(std::numeric_limits<int64_t>::min(), rows));
  EXPECT_FALSE(
      embeddingIndexInRange(std::numeric_limits<int64_t>::max(), rows));
  EXPECT_FALSE(embeddingIndexInRange(0, 0)) << "an empty table";
  // A negative padding_idx means none, even for a negative index.
  for (int64_t index = -2; index < rows; ++index) {
    EXPECT_FALSE(isPaddingRow(index, -1)) << index;
    EXPECT_EQ(isPaddingRow(index, 4), index == 4) << index;
    EXPECT_EQ(isPaddingRow(index, 0), index == 0) << index;
  }
}

TEST(EmbeddingMathTest, OffsetsAndKeyBits) {
  for (int64_t row : {0, 1, 7, 50256})
    for (int64_t col : {0, 5, 767})
      EXPECT_EQ(embeddingOffset(row, col, 768), row * 768 + col);
  // Past 2^31 elements the offset stays 64-bit.
  EXPECT_EQ(embeddingOffset(3000000, 767, 768), int64_t(2304000767));

  const std::pair<uint64_t, int> widths[] = {
      {0, 0},
      {1, 1},
      {2, 2},
      {3, 2},
      {4, 3},
      {8191, 13},
      {8192, 14},
      {50257, 16},
      {65535, 16},
      {65536, 17},
      {uint64_t(1) << 63, 64},
      {std::numeric_limits<uint64_t>::max(), 64}};
  for (auto [v, bits] : widths)
    EXPECT_EQ(bitWidth(v), bits) << v;

  // GPT-2 small: 8 x 1024 positions (0..8191), 50257 rows plus the
  // sentinel 50257.
  EmbeddingKeyLayout gpt2 = embeddingKeyLayout(8192, 50257);
  EXPECT_EQ(gpt2.positionBits, 13);
  EXPECT_EQ(gpt2.rowBits, 16);
  EXPECT_EQ(gpt2.endBit(), 29);
  EXPECT_TRUE(gpt2.fits());
  EmbeddingKeyLayout one = embeddingKeyLayout(1, 1);
  EXPECT_EQ(one.positionBits, 0);
  EXPECT_EQ(one.rowBits, 1);
  EXPECT_FALSE(embeddingKeyLayout(int64_t(1) << 40, int64_t(1) << 30).fits());
  EXPECT_TRUE(embeddingKeyLayout(int64_t(1) << 32, (int64_t(1) << 32) - 1)
                  .fits()); // 32 + 32 bits
}

TEST(EmbeddingMathTest, KeysOrderByRowThenPosition) {
  const int64_t rows = 6, padding = 2;
  const int bits = embeddingKeyLayout(100, rows).positionBits;
  for (int64_t position : {0, 1, 57, 99}) {
    for (int64_t index = -2; index <= rows + 1; ++index) {
      uint64_t key = embeddingGradKey(index, position, rows, padding, bits);
      bool adds = index >= 0 && index < rows && index != padding;
      EXPECT_EQ(sortKeyRow(key, bits), adds ? index : rows)
          << index << " at " << position;
      EXPECT_EQ(sortKeyPosition(key, bits), position);
    }
  }
  // Row first, then position; every skipped position after every row.
  auto key = [&](int64_t index, int64_t position) {
    return embeddingGradKey(index, position, rows, padding, bits);
  };
  EXPECT_LT(key(1, 99), key(3, 0));
  EXPECT_LT(key(3, 4), key(3, 5));
  EXPECT_LT(key(rows - 1, 99), key(-1, 0));
  EXPECT_LT(key(rows - 1, 99), key(padding, 0));
}

TEST(EmbeddingMathTest, SegmentsOfSortedKeys) {
  // Rows 3 1 pad 3 0 1 3 out: sorted, 0 | 1 1 | 3 3 3 | skipped skipped.
  const int64_t rows = 5, padding = 4;
  const std::vector<int64_t> indices = {3, 1, 4, 3, 0, 1, 3, 9};
  const int64_t n = static_cast<int64_t>(indices.size());
  const int bits = embeddingKeyLayout(n, rows).positionBits;
  std::vector<uint64_t> keys;
  for (int64_t p = 0; p < n; ++p)
    keys.push_back(embeddingGradKey(indices[p], p, rows, padding, bits));
  std::sort(keys.begin(), keys.end());
  std::vector<int64_t> sortedRows, sortedPositions;
  std::vector<bool> starts;
  for (int64_t i = 0; i < n; ++i) {
    sortedRows.push_back(sortKeyRow(keys[i], bits));
    sortedPositions.push_back(sortKeyPosition(keys[i], bits));
    starts.push_back(startsSegment(keys.data(), i, bits));
  }
  EXPECT_EQ(sortedRows, (std::vector<int64_t>{0, 1, 1, 3, 3, 3, 5, 5}));
  EXPECT_EQ(sortedPositions, (std::vector<int64_t>{4, 1, 5, 0, 3, 6, 2, 7}));
  EXPECT_EQ(starts, (std::vector<bool>{true, true, false, true, false, false,
                                       true, false}));
  EXPECT_EQ(segmentEnd(keys.data(), 0, n, bits), 1);
  EXPECT_EQ(segmentEnd(keys.data(), 1, n, bits), 3);
  EXPECT_EQ(segmentEnd(keys.data(), 3, n, bits), 6);
  EXPECT_EQ(segmentEnd(keys.data(), 6, n, bits), n);
}

/// The CUDA gradient's algorithm on the CPU: sort the keys, then for each
/// segment sum its positions' gradient rows in sorted order, from 0, in
/// f32. `grad` holds the gradient's values as f32 (already rounded to the
/// tensor's dtype).
std::vector<float> segmentedGradient(const std::vector<int64_t> &indices,
                                     const std::vector<float> &grad,
                                     int64_t rows, int64_t dim,
                                     int64_t padding) {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int bits = embeddingKeyLayout(n, rows).positionBits;
  std::vector<uint64_t> keys;
  for (int64_t p = 0; p < n; ++p)
    keys.push_back(embeddingGradKey(indices[p], p, rows, padding, bits));
  std::sort(keys.begin(), keys.end());
  std::vector<float> out(rows * dim, 0.0f);
  for (int64_t s = 0; s < n; ++s) {
    int64_t row = sortKeyRow(keys[s], bits);
    if (!startsSegment(keys.data(), s, bits) || row == rows)
      continue;
    int64_t end = segmentEnd(keys.data(), s, n, bits);
    for (int64_t col = 0; col < dim; ++col) {
      float acc = 0.0f;
      for (int64_t k = s; k < end; ++k)
        acc += grad[embeddingOffset(sortKeyPosition(keys[k], bits), col, dim)];
      out[embeddingOffset(row, col, dim)] = acc;
    }
  }
  return out;
}

TEST_F(RuntimeTest, SegmentedEmbeddingGradientMatchesTheHostBitForBit) {
  // 3000 unsorted positions into 40 rows (about 75 per row, so that any
  // other order of the f32 adds would change some bits), padding row 7,
  // rows 39 and 38 never used.
  const int64_t rows = 40, dim = 37, padding = 7, n = 3000;
  std::uniform_int_distribution<int64_t> pick(0, rows - 3);
  std::vector<int64_t> indices(n);
  for (int64_t &index : indices)
    index = pick(rng);
  std::vector<int32_t> indices32(indices.begin(), indices.end());
  std::vector<float> grad = randomVector(rng, n * dim, -4.0f, 4.0f);
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_BF16, MEMOPT_F16}) {
    std::vector<float> exact = representable(ctx, dtype, grad);
    std::vector<uint8_t> want = toStorage(
        ctx, dtype, segmentedGradient(indices, exact, rows, dim, padding));
    size_t bytes = rows * dim * memopt_dtype_size(dtype);
    std::vector<uint8_t> got64(bytes, 0xff), got32(bytes, 0xff);
    std::vector<uint8_t> g = toStorage(ctx, dtype, exact);
    memopt_embedding_grad(ctx, dtype, g.data(), MEMOPT_I64, indices.data(),
                          got64.data(), n, rows, dim, padding);
    memopt_embedding_grad(ctx, dtype, g.data(), MEMOPT_I32, indices32.data(),
                          got32.data(), n, rows, dim, padding);
    EXPECT_TRUE(got64 == want) << "i64 indices, dtype " << dtype;
    EXPECT_TRUE(got32 == want) << "i32 indices, dtype " << dtype;
  }
  // The order matters: summing each row's positions backwards differs.
  std::vector<int64_t> reversed(indices.rbegin(), indices.rend());
  std::vector<float> reversedGrad(n * dim);
  for (int64_t p = 0; p < n; ++p)
    std::copy_n(grad.begin() + (n - 1 - p) * dim, dim,
                reversedGrad.begin() + p * dim);
  EXPECT_NE(segmentedGradient(reversed, reversedGrad, rows, dim, padding),
            segmentedGradient(indices, grad, rows, dim, padding));
}

} // namespace
