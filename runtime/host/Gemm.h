//===- Gemm.h - host f32 GEMM helper ----------------------------*- C++ -*-===//
//
// The one place that calls BLAS, shared by memopt_matmul and the
// convolutions.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOST_GEMM_H
#define MEMOPT_RUNTIME_HOST_GEMM_H

#include <cstdint>

namespace memopt {
namespace host {

/// Row-major c = alpha * op(a) * op(b) + beta * c with op(a) [m, k] and op(b)
/// [k, n]; extents must fit in int. k == 0 scales c by beta.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc);

} // namespace host
} // namespace memopt

#endif // MEMOPT_RUNTIME_HOST_GEMM_H
