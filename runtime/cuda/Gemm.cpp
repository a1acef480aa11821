//===- Gemm.cpp - matrix products through cuBLASLt
//-------------------------===//
//
// Row-major C[m, n] = op(A) op(B) is the column-major product C^T = op(B)^T
// op(A)^T, so B is cuBLASLt's first operand. Inputs f32, f16 or bf16; the
// compute type is f32 (CUBLAS_COMPUTE_32F: no TF32 for f32 inputs unless
// MEMOPT_CUDA_ALLOW_TF32=1); the result is `out_dtype`. A right operand
// shared by a batch folds the batch into the rows of one GEMM; another shared
// operand takes one GEMM per batch element. The algorithm comes from
// cuBLASLt's heuristic, limited to the context's workspace and the operands'
// alignment, and is cached per shape so that a step makes no heuristic query
// after the first. The products use the workspace's library slice.
// memopt::cuda::gemm exposes one product, with beta, to the fused ops
// (LinearLoss.cu).
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

using namespace memopt::cuda;

namespace {

cudaDataType_t toCudaType(memopt_dtype dtype) {
  switch (dtype) {
  case MEMOPT_F16:
    return CUDA_R_16F;
  case MEMOPT_BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

bool allowTf32() {
  static const bool allow = [] {
    const char *value = std::getenv("MEMOPT_CUDA_ALLOW_TF32");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return allow;
}

using GemmKey =
    std::tuple<cublasLtHandle_t, int, int, int64_t, int64_t, int64_t, int64_t,
               int, int, uint32_t, uint32_t, uint32_t, uint64_t>;

/// The largest power of two (at most 256) that divides `pointer`: cuBLASLt's
/// heuristic assumes 256-byte aligned operands unless told otherwise, and a
/// view into a buffer may be less aligned.
uint32_t alignmentOf(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}

struct CachedAlgo {
  bool found = false;
  cublasLtMatmulAlgo_t algo;
};

std::mutex cacheMutex;
std::map<GemmKey, CachedAlgo> algoCache;

/// Destroys cuBLASLt descriptors on every path.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

bool setBatch(memopt_context *ctx, const char *entry,
              cublasLtMatrixLayout_t layout, int32_t count, int64_t stride) {
  return MEMOPT_CUBLAS_CHECK(
             ctx, entry,
             cublasLtMatrixLayoutSetAttribute(
                 layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                 sizeof(count))) &&
         MEMOPT_CUBLAS_CHECK(
             ctx, entry,
             cublasLtMatrixLayoutSetAttribute(
                 layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                 sizeof(stride)));
}

/// c[batch][m, n] = op(a[batch]) op(b[batch]) + beta c[batch] with every
/// operand batched (strides m * k, k * n, m * n), through one cuBLASLt call
/// that may use `workspaceBytes` at `workspace`.
void runGemm(memopt_context *ctx, const char *entry, memopt_dtype dtype,
             memopt_dtype out_dtype, const void *a, const void *b, void *c,
             int64_t batch, int64_t m, int64_t n, int64_t k, int trans_a,
             int trans_b, float beta, void *workspace,
             uint64_t workspaceBytes) {
  if (batch > INT32_MAX || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "extents beyond 2^31 are not supported");
    return;
  }
  // Column-major view: D[n, m] = opB'[n, k] * opA'[k, m].
  cublasOperation_t opFirst = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint64_t firstRows = trans_b ? k : n, firstCols = trans_b ? n : k;
  uint64_t secondRows = trans_a ? m : k, secondCols = trans_a ? k : m;
  cudaDataType_t inType = toCudaType(dtype), outType = toCudaType(out_dtype);
  cublasComputeType_t compute =
      dtype == MEMOPT_F32 && allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                         : CUBLAS_COMPUTE_32F;

  Descriptors d;
  if (!MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatmulDescCreate(&d.op, compute,
                                                    CUDA_R_32F)) ||
      !MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatmulDescSetAttribute(
                               d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
                               sizeof(opFirst))) ||
      !MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatmulDescSetAttribute(
                               d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
                               sizeof(opSecond))) ||
      !MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatrixLayoutCreate(&d.a, inType, firstRows,
                                                      firstCols, firstRows)) ||
      !MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatrixLayoutCreate(&d.b, inType, secondRows,
                                                      secondCols,
                                                      secondRows)) ||
      !MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatrixLayoutCreate(&d.c, outType, n, m, n)))
    return;
  if (batch > 1 &&
      (!setBatch(ctx, entry, d.a, static_cast<int32_t>(batch), n * k) ||
       !setBatch(ctx, entry, d.b, static_cast<int32_t>(batch), m * k) ||
       !setBatch(ctx, entry, d.c, static_cast<int32_t>(batch), m * n)))
    return;

  uint32_t alignFirst = alignmentOf(b), alignSecond = alignmentOf(a),
           alignC = alignmentOf(c);
  GemmKey key{ctx->lt,     dtype,  out_dtype,     batch,   m,
              n,           k,      trans_a,       trans_b, alignFirst,
              alignSecond, alignC, workspaceBytes};
  CachedAlgo cached;
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = algoCache.find(key);
    if (it != algoCache.end())
      cached = it->second;
  }
  if (!cached.found) {
    uint64_t workspaceLimit = workspaceBytes;
    cublasLtMatmulHeuristicResult_t result;
    int returned = 0;
    if (!MEMOPT_CUBLAS_CHECK(ctx, entry,
                             cublasLtMatmulPreferenceCreate(&d.pref)) ||
        !MEMOPT_CUBLAS_CHECK(
            ctx, entry,
            cublasLtMatmulPreferenceSetAttribute(
                d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspaceLimit, sizeof(workspaceLimit))) ||
        !MEMOPT_CUBLAS_CHECK(
            ctx, entry,
            cublasLtMatmulPreferenceSetAttribute(
                d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignFirst,
                sizeof(alignFirst))) ||
        !MEMOPT_CUBLAS_CHECK(
            ctx, entry,
            cublasLtMatmulPreferenceSetAttribute(
                d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                &alignSecond, sizeof(alignSecond))) ||
        !MEMOPT_CUBLAS_CHECK(
            ctx, entry,
            cublasLtMatmulPreferenceSetAttribute(
                d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
                sizeof(alignC))) ||
        !MEMOPT_CUBLAS_CHECK(
            ctx, entry,
            cublasLtMatmulPreferenceSetAttribute(
                d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
                sizeof(alignC))) ||
        !MEMOPT_CUBLAS_CHECK(ctx, entry,
                             cublasLtMatmulAlgoGetHeuristic(
                                 ctx->lt, d.op, d.a, d.b, d.c, d.c, d.pref, 1,
                                 &result, &returned)))
      return;
    if (returned == 0) {
      setError(ctx, MEMOPT_ERROR_DEVICE, entry,
               "cublasLtMatmulAlgoGetHeuristic found no algorithm for "
               "[%lld x %lld x %lld] x %lld (%s -> %s)",
               static_cast<long long>(m), static_cast<long long>(n),
               static_cast<long long>(k), static_cast<long long>(batch),
               dtypeName(dtype), dtypeName(out_dtype));
      return;
    }
    cached.found = true;
    cached.algo = result.algo;
    std::lock_guard<std::mutex> lock(cacheMutex);
    algoCache[key] = cached;
  }
  const float alpha = 1.0f;
  ctx->currentEntry = entry;
  MEMOPT_CUBLAS_CHECK(ctx, entry,
                      cublasLtMatmul(ctx->lt, d.op, &alpha, b, d.a, a, d.b,
                                     &beta, c, d.c, c, d.c, &cached.algo,
                                     workspace, workspaceBytes, ctx->stream));
  if (isLive(ctx))
    checkLaunch(ctx, entry, "cublasLtMatmul");
}

} // namespace

void memopt::cuda::gemm(memopt_context *ctx, const char *entry,
                        memopt_dtype dtype, memopt_dtype outDtype,
                        const void *a, const void *b, void *c, int64_t m,
                        int64_t n, int64_t k, bool transA, bool transB,
                        float beta) {
  runGemm(ctx, entry, dtype, outDtype, a, b, c, 1, m, n, k, transA, transB,
          beta, ctx->library, ctx->libraryBytes);
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
  if (batch == 0 || m == 0 || n == 0)
    return;
  if (!checkPointers(ctx, entry, 1, {c}))
    return;
  size_t outSize = memopt_dtype_size(out_dtype);
  if (k == 0) {
    MEMOPT_CUDA_CHECK(ctx, entry,
                      cudaMemsetAsync(c, 0, batch * m * n * outSize,
                                      ctx->stream));
    return;
  }
  if (!checkPointers(ctx, entry, 1, {a, b}))
    return;

  int64_t inSize = static_cast<int64_t>(memopt_dtype_size(dtype));
  int64_t outBytes = static_cast<int64_t>(outSize);
  if (batch_a == batch_b) {
    runGemm(ctx, entry, dtype, out_dtype, a, b, c, batch, m, n, k, trans_a,
            trans_b, 0.0f, ctx->library, ctx->libraryBytes);
  } else if (batch_b == 1 && !trans_a) {
    // A shared right operand: the batch folds into the rows of one GEMM.
    runGemm(ctx, entry, dtype, out_dtype, a, b, c, 1, batch * m, n, k, trans_a,
            trans_b, 0.0f, ctx->library, ctx->libraryBytes);
  } else {
    // A shared operand that does not fold: one GEMM per batch element (no
    // zero batch stride, which not every cuBLASLt kernel accepts).
    for (int64_t p = 0; p < batch && isLive(ctx); ++p) {
      const char *ap = static_cast<const char *>(a) +
                       (batch_a == 1 ? 0 : p * m * k * inSize);
      const char *bp = static_cast<const char *>(b) +
                       (batch_b == 1 ? 0 : p * k * n * inSize);
      char *cp = static_cast<char *>(c) + p * m * n * outBytes;
      runGemm(ctx, entry, dtype, out_dtype, ap, bp, cp, 1, m, n, k, trans_a,
              trans_b, 0.0f, ctx->library, ctx->libraryBytes);
    }
  }
}

// Placeholder until the plans land.
struct memopt::cuda::GemmPlans {};
void memopt::cuda::destroyPlans(GemmPlans *plans) { delete plans; }
