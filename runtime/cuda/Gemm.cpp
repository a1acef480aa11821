//===- Gemm.cpp - matrix products through cuBLASLt -----------------------===//
//
// memopt_matmul and the fused ops' products (memopt::cuda::gemm, used by
// LinearLoss.cu). GemmPlan.h maps a row-major product onto the column-major
// problem cuBLASLt runs: a shared right operand folds the batch into rows,
// any other batch is one strided-batched call with batch stride 0 for a
// shared operand. Inputs f32, f16 or bf16; the compute type is f32
// (CUBLAS_COMPUTE_32F: no TF32 for f32 inputs unless
// MEMOPT_CUDA_ALLOW_TF32=1); the result is `out_dtype`.
//
// Each product's plan is made once per context and key (GemmKey: shapes,
// dtypes, transposes, the operands' alignments, the workspace) and cached
// (memopt/runtime/PlanCache.h): it owns the matmul descriptor, the three
// layouts and the algorithm of cuBLASLt's heuristic, asked once, limited to the
// library slice of the workspace and the alignment every matrix of the batch
// has. A step that repeats its shapes creates no descriptor and asks no
// heuristic. When the heuristic has no algorithm for a batch, the plan runs
// one product per batch element with the same descriptors at batch count 1;
// when it has none for that either, the plan runs GemmFallback.cu's tiled
// kernel. Either choice is recorded in the plan, so the heuristic is asked
// once per key whatever it answers. A cached algorithm makes cuBLASLt
// deterministic, and the fallback kernel is too.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "GemmPlan.h"
#include "memopt/runtime/PlanCache.h"

#include <cstdlib>
#include <cstring>

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

/// How a plan runs its product.
enum class GemmPath {
  /// One cuBLASLt call for the whole batch.
  Library,
  /// One cuBLASLt call per batch element (the layouts at batch count 1).
  PerElement,
  /// GemmFallback.cu's kernel.
  Fallback,
};

/// A product's descriptors and algorithm, released with the plan.
struct GemmPlan {
  GemmPlan() = default;
  GemmPlan(const GemmPlan &) = delete;
  GemmPlan &operator=(const GemmPlan &) = delete;
  ~GemmPlan() {
    if (out)
      cublasLtMatrixLayoutDestroy(out);
    if (second)
      cublasLtMatrixLayoutDestroy(second);
    if (first)
      cublasLtMatrixLayoutDestroy(first);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }

  ColumnMajorGemm problem;
  GemmPath path = GemmPath::Fallback;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// The heuristic's preference, destroyed on every path.
struct Preference {
  ~Preference() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
  }
  cublasLtMatmulPreference_t pref = nullptr;
};

bool setBatch(memopt_context *ctx, const char *entry,
              cublasLtMatrixLayout_t layout, int32_t count, int64_t stride) {
  return MEMOPT_CUBLAS_CHECK(ctx, entry,
                             cublasLtMatrixLayoutSetAttribute(
                                 layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                 &count, sizeof(count))) &&
         MEMOPT_CUBLAS_CHECK(ctx, entry,
                             cublasLtMatrixLayoutSetAttribute(
                                 layout,
                                 CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                 &stride, sizeof(stride)));
}

bool createLayout(memopt_context *ctx, const char *entry,
                  cublasLtMatrixLayout_t &layout, memopt_dtype dtype,
                  const GemmLayout &shape, int64_t batch) {
  return MEMOPT_CUBLAS_CHECK(
             ctx, entry,
             cublasLtMatrixLayoutCreate(&layout, toCudaType(dtype), shape.rows,
                                        shape.cols, shape.ld)) &&
         (batch == 1 ||
          setBatch(ctx, entry, layout, static_cast<int32_t>(batch),
                   shape.batchStride));
}

/// The plan's matmul descriptor and layouts for `plan.problem`.
bool createDescriptors(memopt_context *ctx, const char *entry,
                       const GemmKey &key, GemmPlan &plan) {
  const ColumnMajorGemm &g = plan.problem;
  cublasComputeType_t compute = key.dtype == MEMOPT_F32 && allowTf32()
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cublasOperation_t opFirst = g.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = g.transSecond ? CUBLAS_OP_T : CUBLAS_OP_N;
  return MEMOPT_CUBLAS_CHECK(
             ctx, entry,
             cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F)) &&
         MEMOPT_CUBLAS_CHECK(ctx, entry,
                             cublasLtMatmulDescSetAttribute(
                                 plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
                                 sizeof(opFirst))) &&
         MEMOPT_CUBLAS_CHECK(ctx, entry,
                             cublasLtMatmulDescSetAttribute(
                                 plan.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                 &opSecond, sizeof(opSecond))) &&
         createLayout(ctx, entry, plan.first, key.dtype, g.first, g.batch) &&
         createLayout(ctx, entry, plan.second, key.dtype, g.second, g.batch) &&
         createLayout(ctx, entry, plan.out, key.outDtype, g.out, g.batch);
}

bool setPreference(memopt_context *ctx, const char *entry,
                   cublasLtMatmulPreference_t pref,
                   cublasLtMatmulPreferenceAttributes_t attribute,
                   const void *value, size_t size) {
  return MEMOPT_CUBLAS_CHECK(
      ctx, entry,
      cublasLtMatmulPreferenceSetAttribute(pref, attribute, value, size));
}

/// Asks cuBLASLt's heuristic for the plan's algorithm as its layouts stand;
/// `found` says whether it had one. False after recording an error.
bool queryHeuristic(memopt_context *ctx, const char *entry, const GemmKey &key,
                    GemmPlan &plan, bool &found) {
  const GemmSource firstSource = plan.problem.firstSource;
  uint32_t alignFirst =
      firstSource == GemmSource::Right ? key.alignB : key.alignA;
  uint32_t alignSecond =
      firstSource == GemmSource::Right ? key.alignA : key.alignB;
  uint64_t workspace = key.workspaceBytes;
  Preference p;
  if (!MEMOPT_CUBLAS_CHECK(ctx, entry,
                           cublasLtMatmulPreferenceCreate(&p.pref)) ||
      !setPreference(ctx, entry, p.pref,
                     CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                     sizeof(workspace)) ||
      !setPreference(ctx, entry, p.pref,
                     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignFirst,
                     sizeof(alignFirst)) ||
      !setPreference(ctx, entry, p.pref,
                     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignSecond,
                     sizeof(alignSecond)) ||
      !setPreference(ctx, entry, p.pref,
                     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.alignC,
                     sizeof(key.alignC)) ||
      !setPreference(ctx, entry, p.pref,
                     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.alignC,
                     sizeof(key.alignC)))
    return false;
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      ctx->lt, plan.op, plan.first, plan.second, plan.out, plan.out, p.pref, 1,
      &result, &returned);
  // NOT_SUPPORTED is the heuristic's "nothing for this configuration".
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    found = false;
    return true;
  }
  if (!checkCublas(ctx, entry, "cublasLtMatmulAlgoGetHeuristic", status))
    return false;
  found = returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (found)
    plan.algo = result.algo;
  return true;
}

/// Fills `plan` for `key`: the batched algorithm, else one for a single
/// batch element, else the fallback kernel.
bool makePlan(memopt_context *ctx, const char *entry, const GemmKey &key,
              GemmPlan &plan) {
  plan.problem = mapRowMajorGemm(key.m, key.n, key.k, key.batchA, key.batchB,
                                 key.transA, key.transB, key.ldc);
  bool found = false;
  if (!createDescriptors(ctx, entry, key, plan) ||
      !queryHeuristic(ctx, entry, key, plan, found))
    return false;
  if (found) {
    plan.path = GemmPath::Library;
    return true;
  }
  if (plan.problem.batch > 1) {
    const ColumnMajorGemm &g = plan.problem;
    if (!setBatch(ctx, entry, plan.first, 1, g.first.batchStride) ||
        !setBatch(ctx, entry, plan.second, 1, g.second.batchStride) ||
        !setBatch(ctx, entry, plan.out, 1, g.out.batchStride) ||
        !queryHeuristic(ctx, entry, key, plan, found))
      return false;
    if (found) {
      plan.path = GemmPath::PerElement;
      return true;
    }
  }
  plan.path = GemmPath::Fallback;
  return true;
}

} // namespace

struct memopt::cuda::GemmPlans {
  memopt::runtime::PlanCache<GemmKey, GemmPlan> cache;
};

void memopt::cuda::destroyPlans(GemmPlans *plans) { delete plans; }

size_t memopt::cuda::gemmPlanCount(const memopt_context *ctx) {
  return ctx && ctx->gemmPlans ? ctx->gemmPlans->cache.size() : 0;
}

memopt::cuda::GemmPathCounts
memopt::cuda::gemmPathCounts(const memopt_context *ctx) {
  GemmPathCounts counts;
  if (!ctx || !ctx->gemmPlans)
    return counts;
  ctx->gemmPlans->cache.forEach([&](const GemmKey &, const GemmPlan &plan) {
    size_t &slot = plan.path == GemmPath::Library      ? counts.library
                   : plan.path == GemmPath::PerElement ? counts.perElement
                                                       : counts.fallback;
    ++slot;
  });
  return counts;
}

namespace {

GemmPlan *planFor(memopt_context *ctx, const char *entry, const GemmKey &key) {
  if (!ctx->gemmPlans)
    ctx->gemmPlans = new GemmPlans();
  return ctx->gemmPlans->cache.get(
      key, [&](GemmPlan &plan) { return makePlan(ctx, entry, key, plan); });
}

/// The row-major operands of a call.
struct GemmOperands {
  const void *a;
  const void *b;
  void *c;
  float beta;
};

const void *sourceOf(const GemmOperands &x, GemmSource source) {
  return source == GemmSource::Right ? x.b : x.a;
}

void runLibrary(memopt_context *ctx, const char *entry, const GemmKey &key,
                const GemmPlan &plan, const GemmOperands &x) {
  const ColumnMajorGemm &g = plan.problem;
  const char *first = static_cast<const char *>(sourceOf(x, g.firstSource));
  const char *second = static_cast<const char *>(sourceOf(x, g.secondSource));
  char *c = static_cast<char *>(x.c);
  // The per-element path steps every operand by its batch stride (0 for a
  // shared one); the library path is one call over the whole batch.
  int64_t inBytes = static_cast<int64_t>(memopt_dtype_size(key.dtype));
  int64_t outBytes = static_cast<int64_t>(memopt_dtype_size(key.outDtype));
  int64_t calls = plan.path == GemmPath::PerElement ? g.batch : 1;
  const float alpha = 1.0f;
  ctx->currentEntry = entry;
  for (int64_t p = 0; p < calls && isLive(ctx); ++p) {
    const void *fp = first + p * g.first.batchStride * inBytes;
    const void *sp = second + p * g.second.batchStride * inBytes;
    void *cp = c + p * g.out.batchStride * outBytes;
    if (MEMOPT_CUBLAS_CHECK(ctx, entry,
                            cublasLtMatmul(ctx->lt, plan.op, &alpha, fp,
                                           plan.first, sp, plan.second, &x.beta,
                                           cp, plan.out, cp, plan.out,
                                           &plan.algo, ctx->library,
                                           ctx->libraryBytes, ctx->stream)))
      checkLaunch(ctx, entry, "cublasLtMatmul");
  }
}

/// Row-major c = op(a) op(b) + beta c over max(batchA, batchB) elements by
/// the plan of its key.
void product(memopt_context *ctx, const char *entry, GemmKey key,
             const GemmOperands &x) {
  ColumnMajorGemm g =
      mapRowMajorGemm(key.m, key.n, key.k, key.batchA, key.batchB, key.transA,
                      key.transB, key.ldc);
  if (g.batch > INT32_MAX || g.out.rows > INT32_MAX || g.out.cols > INT32_MAX ||
      g.inner > INT32_MAX) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "extents beyond 2^31 are not supported");
    return;
  }
  size_t inSize = memopt_dtype_size(key.dtype);
  const GemmLayout &la = g.firstSource == GemmSource::Left ? g.first : g.second;
  const GemmLayout &lb =
      g.firstSource == GemmSource::Right ? g.first : g.second;
  key.alignA = batchAlignment(x.a, la.batchStride, inSize);
  key.alignB = batchAlignment(x.b, lb.batchStride, inSize);
  key.alignC =
      batchAlignment(x.c, g.out.batchStride, memopt_dtype_size(key.outDtype));
  key.workspaceBytes = ctx->libraryBytes;
  const GemmPlan *plan = planFor(ctx, entry, key);
  if (!plan)
    return;
  if (plan->path != GemmPath::Fallback)
    return runLibrary(ctx, entry, key, *plan, x);
  int64_t batch = key.batchA > key.batchB ? key.batchA : key.batchB;
  gemmFallback(ctx, entry, key.dtype, key.outDtype, x.a, x.b, x.c, batch, key.m,
               key.n, key.k, key.batchA > 1 ? key.m * key.k : 0,
               key.batchB > 1 ? key.k * key.n : 0, key.m * g.out.ld, key.transA,
               key.transB, x.beta, g.out.ld);
}

GemmKey keyOf(memopt_dtype dtype, memopt_dtype outDtype, int64_t m, int64_t n,
              int64_t k, int64_t batchA, int64_t batchB, bool transA,
              bool transB) {
  GemmKey key;
  key.dtype = dtype;
  key.outDtype = outDtype;
  key.m = m;
  key.n = n;
  key.k = k;
  key.batchA = batchA;
  key.batchB = batchB;
  key.transA = transA;
  key.transB = transB;
  return key;
}

} // namespace

void memopt::cuda::gemm(memopt_context *ctx, const char *entry,
                        memopt_dtype dtype, memopt_dtype outDtype,
                        const void *a, const void *b, void *c, int64_t m,
                        int64_t n, int64_t k, bool transA, bool transB,
                        float beta, int64_t ldc) {
  GemmKey key = keyOf(dtype, outDtype, m, n, k, 1, 1, transA, transB);
  key.ldc = ldc;
  product(ctx, entry, key, GemmOperands{a, b, c, beta});
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
  if (k == 0) {
    MEMOPT_CUDA_CHECK(
        ctx, entry,
        cudaMemsetAsync(c, 0, batch * m * n * memopt_dtype_size(out_dtype),
                        ctx->stream));
    return;
  }
  if (!checkPointers(ctx, entry, 1, {a, b}))
    return;
  product(ctx, entry,
          keyOf(dtype, out_dtype, m, n, k, batch_a, batch_b, trans_a != 0,
                trans_b != 0),
          GemmOperands{a, b, c, 0.0f});
}
