//===- GemmFallback.cu - the product cuBLASLt has no algorithm for -------===//
//
// cuBLASLt's heuristic may return no algorithm for a product, typically for
// operands whose alignment its kernels cannot take (a view that starts an odd
// number of 16-bit elements into a buffer). Gemm.cpp then runs this kernel,
// correct for every alignment, transpose, batch stride (0 for a shared
// operand) and beta, but not tuned: a block of kTile x kTile threads computes
// a kTile x kTile tile of c, streaming kTile-wide slices of op(a) and op(b)
// through shared memory as f32. Each thread adds its products over k in
// ascending order in f32, so results are identical run to run. Loads are
// coalesced for either transpose: the threads of a warp read consecutive
// addresses of the stored matrix, whichever index of the op that is.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "GemmPlan.h"

using namespace memopt::cuda;

namespace {

constexpr int kTile = 16;
/// Blocks of the grid's y and z dimensions at most; the kernel strides over
/// row tiles and batch elements beyond them.
constexpr int64_t kMaxGridYZ = 65535;

/// The row-major problem the kernel runs; strides count elements.
struct FallbackProblem {
  int64_t batch, m, n, k;
  int64_t strideA, strideB, strideC;
  bool transA, transB;
  float beta;
  /// c's row stride.
  int64_t ldc;
};

/// op(x)[row, col] of a row-major matrix with `cols` columns after the op
/// (stored transposed when `trans`), 0 outside rows x cols.
template <typename T>
__device__ __forceinline__ float loadOp(const T *x, bool trans, int64_t row,
                                        int64_t col, int64_t rows,
                                        int64_t cols) {
  if (row >= rows || col >= cols)
    return 0.0f;
  return toF32(trans ? x[col * rows + row] : x[row * cols + col]);
}

template <typename T, typename U>
__global__ void __launch_bounds__(kTile *kTile)
    fallbackGemmKernel(const T *a, const T *b, U *c, FallbackProblem p) {
  __shared__ float tileA[kTile][kTile + 1];
  __shared__ float tileB[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j0 = blockIdx.x * int64_t(kTile), j = j0 + tx;
  for (int64_t batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
    const T *ab = a + batch * p.strideA;
    const T *bb = b + batch * p.strideB;
    U *cb = c + batch * p.strideC;
    for (int64_t i0 = blockIdx.y * int64_t(kTile); i0 < p.m;
         i0 += int64_t(gridDim.y) * kTile) {
      float acc = 0.0f;
      for (int64_t l0 = 0; l0 < p.k; l0 += kTile) {
        // Thread (ty, tx) loads the element whose stored address is
        // consecutive in tx; the tiles are indexed [row of op][col of op].
        if (p.transA)
          tileA[tx][ty] = loadOp(ab, true, i0 + tx, l0 + ty, p.m, p.k);
        else
          tileA[ty][tx] = loadOp(ab, false, i0 + ty, l0 + tx, p.m, p.k);
        if (p.transB)
          tileB[tx][ty] = loadOp(bb, true, l0 + tx, j0 + ty, p.k, p.n);
        else
          tileB[ty][tx] = loadOp(bb, false, l0 + ty, j0 + tx, p.k, p.n);
        __syncthreads();
        for (int q = 0; q < kTile; ++q)
          acc = fmaf(tileA[ty][q], tileB[q][tx], acc);
        __syncthreads();
      }
      int64_t i = i0 + ty;
      if (i < p.m && j < p.n) {
        U *out = cb + i * p.ldc + j;
        // beta = 0 never reads c, so that garbage (NaN) there is ignored.
        float value = p.beta != 0.0f ? acc + p.beta * toF32(*out) : acc;
        *out = fromF32<U>(value);
      }
    }
  }
}

template <typename T, typename U>
void launchFallback(memopt_context *ctx, const char *entry, const void *a,
                    const void *b, void *c, const FallbackProblem &p) {
  dim3 block(kTile, kTile);
  int64_t rowTiles = (p.m + kTile - 1) / kTile;
  dim3 grid(
      static_cast<unsigned>((p.n + kTile - 1) / kTile),
      static_cast<unsigned>(rowTiles < kMaxGridYZ ? rowTiles : kMaxGridYZ),
      static_cast<unsigned>(p.batch < kMaxGridYZ ? p.batch : kMaxGridYZ));
  ctx->currentEntry = entry;
  fallbackGemmKernel<T, U><<<grid, block, 0, ctx->stream>>>(
      static_cast<const T *>(a), static_cast<const T *>(b), static_cast<U *>(c),
      p);
  checkLaunch(ctx, entry, "fallbackGemmKernel");
}

} // namespace

void memopt::cuda::gemmFallback(memopt_context *ctx, const char *entry,
                                memopt_dtype dtype, memopt_dtype outDtype,
                                const void *a, const void *b, void *c,
                                int64_t batch, int64_t m, int64_t n, int64_t k,
                                int64_t strideA, int64_t strideB,
                                int64_t strideC, bool transA, bool transB,
                                float beta, int64_t ldc) {
  if (!isLive(ctx) || batch == 0 || m == 0 || n == 0)
    return;
  // The grid's x dimension holds n's tiles (up to 2^31 - 1 blocks).
  if ((n + kTile - 1) / kTile > INT32_MAX) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "extents beyond 2^31 are not supported");
    return;
  }
  int64_t rowStride = ldc > 0 ? ldc : n;
  FallbackProblem p{batch,   m,       n,      k,    strideA,  strideB,
                    strideC, transA, transB, beta, rowStride};
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    if (outDtype == MEMOPT_F32)
      launchFallback<T, float>(ctx, entry, a, b, c, p);
    else
      launchFallback<T, T>(ctx, entry, a, b, c, p);
  });
}
