//===- Random.cu - dropout ------------------------------------------------===//
//
// Dropout draws the exact Philox stream of runtime/host/Random.cpp, so that
// a mask is the same on both runtimes.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace memopt::cuda;

void memopt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                          uint32_t result[4]) {
  philox4x32_10(counter[0], counter[1], counter[2], counter[3], key[0], key[1],
                result);
}

namespace {

/// One thread per Philox block of four elements (j = offset + i, block j /
/// 4), as the host draws them.
template <typename T>
__global__ void dropoutKernel(const T *x, T *y, int64_t n, uint32_t threshold,
                              float scale, uint32_t k0, uint32_t k1,
                              uint64_t step, uint64_t offset) {
  uint64_t firstBlock = offset / 4;
  uint64_t lastBlock = (offset + static_cast<uint64_t>(n) - 1) / 4;
  uint64_t numBlocks = lastBlock - firstBlock + 1;
  for (uint64_t b = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
       b < numBlocks; b += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t block = firstBlock + b;
    uint32_t bits[4];
    philox4x32_10(static_cast<uint32_t>(block),
                  static_cast<uint32_t>(block >> 32),
                  static_cast<uint32_t>(step),
                  static_cast<uint32_t>(step >> 32), k0, k1, bits);
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t j = block * 4 + lane;
      if (j < offset || j >= offset + static_cast<uint64_t>(n))
        continue;
      int64_t i = static_cast<int64_t>(j - offset);
      bool keep = (bits[lane] >> 8) >= threshold;
      y[i] = fromF32<T>(keep ? toF32(x[i]) * scale : 0.0f);
    }
  }
}

/// Elements sharing a mask bit (stochastic depth, dropout2d): one thread
/// per element draws its group's Philox block.
template <typename T>
__global__ void groupDropoutKernel(const T *x, T *y, int64_t n, int64_t group,
                                   uint32_t threshold, float scale, uint32_t k0,
                                   uint32_t k1, uint64_t step,
                                   uint64_t offset) {
  GRID_STRIDE(i, n) {
    uint64_t j = offset + static_cast<uint64_t>(i / group);
    uint64_t block = j / 4;
    uint32_t bits[4];
    philox4x32_10(static_cast<uint32_t>(block),
                  static_cast<uint32_t>(block >> 32),
                  static_cast<uint32_t>(step),
                  static_cast<uint32_t>(step >> 32), k0, k1, bits);
    bool keep = (bits[j % 4] >> 8) >= threshold;
    y[i] = fromF32<T>(keep ? toF32(x[i]) * scale : 0.0f);
  }
}

} // namespace

void memopt_dropout(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t n, int64_t group, double p,
                    uint64_t seed, uint64_t stream, uint64_t offset) {
  const char *entry = "memopt_dropout";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkProbability(ctx, entry, p) || !checkGroup(ctx, entry, n, group) ||
      isEmpty({n}))
    return;
  uint64_t mixed = seed ^ (stream * 0x9E3779B97F4A7C15ull);
  uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));
  float scale = static_cast<float>(1.0 / (1.0 - p));
  uint32_t k0 = static_cast<uint32_t>(mixed),
           k1 = static_cast<uint32_t>(mixed >> 32);
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    if (group == 1) {
      uint64_t numBlocks = (offset + n - 1) / 4 - offset / 4 + 1;
      dropoutKernel<T><<<gridFor(static_cast<int64_t>(numBlocks)), kBlock, 0,
                         ctx->stream>>>(static_cast<const T *>(input),
                                        static_cast<T *>(out), n, threshold,
                                        scale, k0, k1, ctx->step, offset);
    } else {
      groupDropoutKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          static_cast<const T *>(input), static_cast<T *>(out), n, group,
          threshold, scale, k0, k1, ctx->step, offset);
    }
  });
  checkLaunch(ctx, entry, "dropoutKernel");
}
