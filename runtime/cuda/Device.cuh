//===- Device.cuh - device helpers of the CUDA runtime ---------*- CUDA -*-===//
//
// Storage types and their f32 conversions (round to nearest even on store),
// dtype dispatch, block reductions with a fixed order (so that results are
// deterministic run to run), the launch shapes of the reductions, and the
// Philox4x32-10 block shared with the host runtime's stream.
//
// The block reductions combine the lanes of each warp with shuffles over the
// full mask, so a block must be whole warps: the templated forms take the
// block size as a parameter and check that at compile time; every launch
// shape below is a checked constant.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_DEVICE_CUH
#define MEMOPT_RUNTIME_CUDA_DEVICE_CUH

#include "CudaRuntime.h"

#include "memopt/runtime/LossMath.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace memopt {
namespace cuda {

__device__ __forceinline__ float toF32(float v) { return v; }
__device__ __forceinline__ float toF32(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF32(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T fromF32(float v);
template <> __device__ __forceinline__ float fromF32<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half fromF32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromF32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// A grid-stride loop of `i` over [0, n).
#define GRID_STRIDE(i, n)                                                      \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// Calls `body` with a null pointer of the storage type of float `dtype`
/// (the caller has checked that it is one): `[&](auto tag) { using T =
/// std::remove_pointer_t<decltype(tag)>; ... }`.
template <typename F> inline void dispatchFloat(memopt_dtype dtype, F &&body) {
  switch (dtype) {
  case MEMOPT_F16:
    body(static_cast<__half *>(nullptr));
    return;
  case MEMOPT_BF16:
    body(static_cast<__nv_bfloat16 *>(nullptr));
    return;
  default:
    body(static_cast<float *>(nullptr));
    return;
  }
}

#define MEMOPT_STORAGE(tag) std::remove_pointer_t<decltype(tag)>

/// Calls `body` with a null pointer of an unsigned type of `size` bytes;
/// false for a size that is not 1, 2, 4 or 8.
template <typename F> inline bool dispatchSize(size_t size, F &&body) {
  switch (size) {
  case 1:
    body(static_cast<uint8_t *>(nullptr));
    return true;
  case 2:
    body(static_cast<uint16_t *>(nullptr));
    return true;
  case 4:
    body(static_cast<uint32_t *>(nullptr));
    return true;
  case 8:
    body(static_cast<uint64_t *>(nullptr));
    return true;
  }
  return false;
}

/// Reads index `i` of an I32 or I64 tensor.
__device__ __forceinline__ int64_t loadIndex(bool is64, const void *src,
                                             int64_t i) {
  return is64 ? static_cast<const int64_t *>(src)[i]
              : static_cast<const int32_t *>(src)[i];
}

/// Sum over a block of exactly `Block` threads along x; every thread gets
/// the result. `shared` holds 32 floats. Each warp adds its lanes by a
/// butterfly of shuffles, then every thread adds the warps' sums in warp
/// order, so the order is fixed by `Block`.
template <int Block>
__device__ __forceinline__ float blockSum(float v, float *shared) {
  static_assert(Block % 32 == 0 && Block >= 32 && Block <= 1024,
                "the full-mask shuffles need a block of whole warps");
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < Block / 32; ++w)
    total += shared[w];
  return total;
}

/// The maximum of two values; NaN if either is.
__device__ __forceinline__ float maxOrNan(float a, float b) {
  return (isnan(a) || isnan(b)) ? NAN : fmaxf(a, b);
}

/// Maximum over a block of exactly `Block` threads along x (NaN
/// propagates); every thread gets the result. `shared` holds 32 floats.
template <int Block>
__device__ __forceinline__ float blockMax(float v, float *shared) {
  static_assert(Block % 32 == 0 && Block >= 32 && Block <= 1024,
                "the full-mask shuffles need a block of whole warps");
  for (int o = 16; o > 0; o >>= 1)
    v = maxOrNan(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float best = -INFINITY;
#pragma unroll
  for (int w = 0; w < Block / 32; ++w)
    best = maxOrNan(best, shared[w]);
  return best;
}

/// The factor of a cross-entropy's gradient: the incoming gradient, divided
/// (in double) by the count of labels under MEAN, 0 when every label is
/// ignored.
__device__ __forceinline__ float lossGradScale(const float *gradLoss,
                                               const float *count, bool mean) {
  return runtime::crossEntropyGradScale(*gradLoss, mean, mean ? *count : 0.0);
}

/// The maximum of a row of `n` values and the sum of exp(value - maximum)
/// (LossMath.h's term, in f32 the same as NormMath.h's softmax term), over a
/// block of `Block` threads (every thread gets both): the two parts of a
/// stable log-sum-exp, shared by softmax and cross-entropy.
template <int Block, typename T>
__device__ __forceinline__ float2 rowMaxExpSum(const T *row, int64_t n,
                                               float *shared) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += Block)
    m = fmaxf(m, toF32(row[j]));
  m = blockMax<Block>(m, shared);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += Block)
    s += runtime::logSumExpTerm<float>(toF32(row[j]), m);
  return make_float2(m, blockSum<Block>(s, shared));
}

/// The launch shapes of the row and column reductions (Reduce.cu, Norm.cu,
/// Loss.cu, LinearLoss.cu): a block of kRowBlock threads per row when the
/// reduced elements are contiguous, kColTile columns x kColRows row-threads
/// when they are strided. Fixed, so that every sum has one order run to run.
constexpr int kRowBlock = 256;
static_assert(kRowBlock % 32 == 0 && kRowBlock <= 1024,
              "block reductions over a row need whole warps");
constexpr int kColTile = 32;
constexpr int kColRows = 8;
constexpr int kColBlock = kColTile * kColRows;
static_assert(kColBlock % 32 == 0 && kColBlock <= 1024,
              "a column tile's block must be whole warps");

/// The fixed order of a sum that many blocks share: each block writes its
/// partial sum to the scratch slice, and one final pass adds the partials
/// in block order. The number of blocks comes from the shape of the
/// problem only, never from the device, so results are identical run to run
/// and from one GPU to another.
constexpr int kPartialBlocks = 256;
static_assert(kPartialBlocks % 32 == 0 && kPartialBlocks <= 1024,
              "the final pass sums the partials with one whole-warp block");

/// The blocks of a first pass over `n` items in whole blocks of `block`
/// threads: enough for every item to have a thread, at most kPartialBlocks.
inline int partialBlocks(int64_t n, int block) {
  int64_t blocks = (n + block - 1) / block;
  return static_cast<int>(blocks < 1                ? 1
                          : blocks > kPartialBlocks ? kPartialBlocks
                                                    : blocks);
}

/// The number of the `rows` labels that are not `ignore`, into `*count`, in
/// two passes (Loss.cu); `partial` holds partialBlocks(rows, kRowBlock)
/// floats of scratch.
bool launchLabelCount(memopt_context *ctx, const char *entry, bool is64,
                      const void *labels, int64_t rows, int64_t ignore,
                      float *partial, float *count);

/// The sum of `rowLoss` over the `rows` rows, divided for `mean` by the
/// number of labels that are not `ignore` (LossMath.h's reducedLoss), into
/// `*loss`, in two passes (Loss.cu); `partial` holds 2 * partialBlocks(rows,
/// kRowBlock) floats of scratch.
bool launchLossTotal(memopt_context *ctx, const char *entry,
                     const float *rowLoss, bool is64, const void *labels,
                     int64_t rows, int64_t ignore, bool mean, float *partial,
                     float *loss);

/// The grid of a block-per-row kernel over `rows` rows (at least one block;
/// the kernels stride over rows beyond the grid).
inline unsigned rowGrid(int64_t rows) {
  return static_cast<unsigned>(rows < 65535 * 16 ? (rows > 0 ? rows : 1)
                                                 : 65535 * 16);
}

/// Records a device-side error; the first one wins.
__device__ __forceinline__ void raiseDeviceError(memopt_device_error *error,
                                                 int code, int site,
                                                 long long value, long long row,
                                                 long long limit) {
  if (atomicCAS(&error->code, 0, -1) == 0) {
    error->site = site;
    error->value = value;
    error->row = row;
    error->limit = limit;
    __threadfence_system();
    atomicExch(&error->code, code);
  }
}

/// Philox4x32-10, as runtime/host/Random.cpp.
__host__ __device__ __forceinline__ void philox4x32_10(uint32_t c0, uint32_t c1,
                                                       uint32_t c2, uint32_t c3,
                                                       uint32_t k0, uint32_t k1,
                                                       uint32_t out[4]) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
             lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
             lo1 = static_cast<uint32_t>(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_DEVICE_CUH
