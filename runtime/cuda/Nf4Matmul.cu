//===- Nf4Matmul.cu - products with NF4 frozen weights --------------------===//
//
// memopt_nf4_matmul on the device, as runtime/host/Nf4Matmul.cpp: `chunk`
// columns of op(w) at a time, a kernel dequantizes the chunk
// (memopt/runtime/Nf4Math.h, the host's formulas and roundings) into the
// caller's scratch in the compute dtype, in w's own layout ([chunk, k] under
// trans_b, [k, chunk] otherwise), and one cuBLASLt GEMM (Gemm.cpp) writes
// c's columns of the chunk in place: the output layout's leading dimension
// is n. The kernel and the GEMMs run in order on the context's stream, so
// each chunk's GEMM has read the scratch before the next chunk overwrites
// it. Only dtype * k * chunk bytes of the f32-sized scratch are used: the
// compiler plans one size for both runtimes.
//
//===----------------------------------------------------------------------===//

#include "Nf4.cuh"

using namespace memopt::cuda;

void memopt_nf4_matmul(memopt_context *ctx, memopt_dtype dtype, const void *a,
                       const void *packed, void *c, void *scratch,
                       uint64_t scratch_bytes, int64_t m, int64_t n, int64_t k,
                       int trans_b) {
  const char *entry = "memopt_nf4_matmul";
  const auto *w = static_cast<const uint8_t *>(packed);
  if (!checkNf4Matmul(ctx, entry, dtype, a, w, c, scratch, scratch_bytes, m, n,
                      k))
    return;
  if (m == 0 || n == 0)
    return;
  size_t size = memopt_dtype_size(dtype);
  if (k == 0) {
    MEMOPT_CUDA_CHECK(ctx, entry,
                      cudaMemsetAsync(c, 0, m * n * size, ctx->stream));
    return;
  }
  bool transB = trans_b != 0;
  int64_t chunk = nf4MatmulChunk(n, k, scratch_bytes);
  for (int64_t first = 0; first < n && isLive(ctx); first += chunk) {
    int64_t cols = n - first < chunk ? n - first : chunk;
    int64_t rows = transB ? cols : k, length = transB ? k : cols;
    int64_t rowStride = transB ? k : n, at = transB ? first * k : first;
    ctx->currentEntry = entry;
    dispatchFloat(dtype, [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      nf4DequantizeKernel<T>
          <<<gridFor(rows * length), kBlock, 0, ctx->stream>>>(
              w, n * k, rows, length, rowStride, at, static_cast<T *>(scratch));
    });
    if (!checkLaunch(ctx, entry, "nf4DequantizeKernel"))
      return;
    gemm(ctx, entry, dtype, dtype, a, scratch,
         static_cast<char *>(c) + first * size, m, cols, k, false, transB, 0.0f,
         n);
  }
}
