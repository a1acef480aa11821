//===- ShapeTest.cpp - broadcast, transpose, slice and slice_grad ---------===//
//
// The strided copies against direct index loops, at sizes the host threads
// split (Parallel.h): runs along a contiguous last dimension that cross the
// threads' ranges, a transpose whose last dimension is strided, a strided
// slice and its gradient's scatter, and a rank-0 copy.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

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

} // namespace
