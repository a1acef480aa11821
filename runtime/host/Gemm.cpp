//===- Gemm.cpp - host matrix products ------------------------------------===//
//
// memopt_matmul on OpenBLAS's cblas_sgemm. f16/bf16 operands are widened to
// f32 (exactly) and the f32 product is rounded once into the result dtype,
// which models the CUDA runtime's f32 accumulation. A batch of products
// against one shared right-hand matrix becomes a single GEMM with the batch
// folded into M. OpenBLAS partitions M and N across threads but never K, so
// every output element is summed in one fixed order: results are the same
// run to run for a given OpenBLAS build and thread count.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostRuntime.h"

#include <cblas.h>
#include <climits>

using namespace memopt::host;

void memopt::host::sgemm(bool transA, bool transB, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float beta, float *c,
                         int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void memopt_matmul(memopt_context *ctx, memopt_dtype dtype, const void *a,
                   const void *b, void *c, int64_t batch_a, int64_t batch_b,
                   int64_t m, int64_t n, int64_t k, int trans_a, int trans_b,
                   memopt_dtype out_dtype) {
  const char *entry = "memopt_matmul";
  int64_t batch = 0;
  if (!checkMatmul(ctx, entry, dtype, out_dtype, batch_a, batch_b, m, n, k,
                   batch))
    return;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch * m > INT_MAX) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "extents exceed the BLAS int range");
    return;
  }
  if (!checkPointers(ctx, entry, batch * m * n, {c}) ||
      !checkPointers(ctx, entry, batch * m * n * k, {a, b}))
    return;
  F32Input fa(ctx, dtype, a, batch_a * m * k);
  F32Input fb(ctx, dtype, b, batch_b * k * n);
  F32Output fc(ctx, out_dtype, c, batch * m * n);
  int64_t lda = trans_a ? m : k;
  int64_t ldb = trans_b ? k : n;
  if (batch_b == 1 && !trans_a) {
    // [batch * m, k] x [k, n]: one GEMM over the folded batch.
    sgemm(false, trans_b, batch * m, n, k, 1.0f, fa.get(), lda, fb.get(), ldb,
          0.0f, fc.get(), n);
  } else {
    for (int64_t i = 0; i < batch; ++i) {
      const float *pa = fa.get() + (batch_a == 1 ? 0 : i * m * k);
      const float *pb = fb.get() + (batch_b == 1 ? 0 : i * k * n);
      sgemm(trans_a, trans_b, m, n, k, 1.0f, pa, lda, pb, ldb, 0.0f,
            fc.get() + i * m * n, n);
    }
  }
  fc.commit();
}
