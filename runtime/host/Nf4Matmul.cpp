//===- Nf4Matmul.cpp - host products with NF4 frozen weights -------------===//
//
// memopt_nf4_matmul: c = a op(w) with w NF4-packed (Nf4Math.h, QLoRA's
// frozen base weights), without a dequantized copy of w. `chunk` columns of
// op(w) at a time are dequantized into the caller's f32 scratch, each value
// rounded to the compute dtype (and widened back, exactly), and one sgemm
// writes c's columns of the chunk: directly into c (ldc = n) for f32, into
// an f32 [m, chunk] block rounded once into c's columns for f16/bf16, whose
// a is widened to f32 once per call as memopt_matmul widens it.
//
// A chunk of op(w) is `rows` ranges of w's flat elements: under trans_b
// (w [n, k]) the chunk's columns are w's rows, stored [chunk, k]; otherwise
// (w [k, n]) each of w's k rows contributes `chunk` consecutive elements,
// stored [k, chunk]. The scratch keeps w's own layout, so the GEMM reads it
// with memopt_matmul's transpose.
//
// Each chunk's columns are memopt_matmul's bits for a and that chunk of the
// dequantized weight, and with a single chunk (a scratch that holds every
// column) memopt_matmul's bits for the whole weight
// (unittests/Runtime/Nf4Test.cpp checks both). Several chunks may differ
// from one product in the last bits: OpenBLAS picks its kernels (small
// matrix, direct, blocked), its K blocking and its thread split from the
// whole call's extents, so a column's order of summation depends on the
// columns it is computed with (measured on OpenBLAS 0.3.21: most chunk
// widths change some bits); both are f32 sums of the same products.
// Dequantization is O(n k) against the GEMM's O(m n k); it runs on the
// worker threads.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostRuntime.h"
#include "Parallel.h"

#include "memopt/runtime/Float16.h"
#include "memopt/runtime/Nf4Math.h"

#include <climits>
#include <cstring>

using namespace memopt::host;

namespace {

/// `value` rounded to float `dtype` and widened back (exact).
float roundTo(memopt_dtype dtype, float value) {
  switch (dtype) {
  case MEMOPT_F16:
    return halfBitsToFloat(floatToHalfBits(value));
  case MEMOPT_BF16:
    return bfloat16BitsToFloat(floatToBFloat16Bits(value));
  default:
    return value;
  }
}

} // namespace

void memopt::host::nf4DequantizeColumns(memopt_dtype dtype, const uint8_t *w,
                                        int64_t n, int64_t k, bool transB,
                                        int64_t first, int64_t cols,
                                        float *out) {
  int64_t rows = transB ? cols : k, length = transB ? k : cols;
  parallelFor(rows, rowGrain(length), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t at = transB ? (first + r) * k : r * n + first;
      float *row = out + r * length;
      nf4DequantizeRange(w, n * k, at, length, row);
      if (dtype != MEMOPT_F32)
        for (int64_t j = 0; j < length; ++j)
          row[j] = roundTo(dtype, row[j]);
    }
  });
}

void memopt_nf4_matmul(memopt_context *ctx, memopt_dtype dtype, const void *a,
                       const void *packed, void *c, void *scratch,
                       uint64_t scratch_bytes, int64_t m, int64_t n, int64_t k,
                       int trans_b) {
  const char *entry = "memopt_nf4_matmul";
  const auto *w = static_cast<const uint8_t *>(packed);
  if (!checkNf4Matmul(ctx, entry, dtype, a, w, c, scratch, scratch_bytes, m, n,
                      k))
    return;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "extents exceed the BLAS int range");
    return;
  }
  if (m == 0 || n == 0)
    return;
  size_t size = dtypeSize(dtype);
  if (k == 0) {
    // Zero in every float dtype is all-zero bytes.
    std::memset(c, 0, static_cast<size_t>(m * n) * size);
    return;
  }
  bool transB = trans_b != 0;
  int64_t chunk = nf4MatmulChunk(n, k, scratch_bytes);
  F32Input fa(ctx, dtype, a, m * k);
  Workspace block(ctx, dtype == MEMOPT_F32 ? 0 : m * chunk, /*zeroed=*/false);
  float *wc = static_cast<float *>(scratch);
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t cols = n - first < chunk ? n - first : chunk;
    nf4DequantizeColumns(dtype, w, n, k, transB, first, cols, wc);
    if (dtype == MEMOPT_F32) {
      sgemm(false, transB, m, cols, k, 1.0f, fa.get(), k, wc, transB ? k : cols,
            0.0f, static_cast<float *>(c) + first, n);
      continue;
    }
    sgemm(false, transB, m, cols, k, 1.0f, fa.get(), k, wc, transB ? k : cols,
          0.0f, block.get(), cols);
    for (int64_t i = 0; i < m; ++i)
      storeF32(dtype, block.get() + i * cols,
               static_cast<char *>(c) + (i * n + first) * size, cols);
  }
}
