//===- Nf4.cuh - NF4 dequantization on the device -------------------------===//
//
// The kernel that dequantizes part of an NF4-packed weight
// (memopt/runtime/Nf4Math.h, the host's formulas and roundings) for the
// entries that read one: memopt_nf4_matmul and the NF4 fused loss.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_NF4_CUH
#define MEMOPT_RUNTIME_CUDA_NF4_CUH

#include "Device.cuh"

#include "memopt/runtime/Nf4Math.h"

namespace memopt {
namespace cuda {

/// Element (r, j) of a [rows, length] chunk is w's flat element first +
/// r * rowStride + j (w holds `numel` elements), dequantized and rounded to
/// T.
template <typename T>
__global__ void nf4DequantizeKernel(const uint8_t *w, int64_t numel,
                                    int64_t rows, int64_t length,
                                    int64_t rowStride, int64_t first, T *out) {
  GRID_STRIDE(e, rows * length) {
    int64_t r = e / length, j = e - r * length;
    out[e] = fromF32<T>(nf4Dequantize(w, numel, first + r * rowStride + j));
  }
}

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_NF4_CUH
