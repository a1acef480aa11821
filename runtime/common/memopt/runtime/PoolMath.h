//===- PoolMath.h - pooling windows, shared by both runtimes ----*- C++ -*-===//
//
// The index arithmetic of max and average pooling as `__host__ __device__`
// functions: the host runtime (runtime/host/Conv.cpp) and the CUDA kernels
// (runtime/cuda/Pool.cu) walk windows and pick maxima through these, so the
// host unit tests check what the GPU runs.
//
// A window is clipped to the plane once, so its loops test nothing per
// element, and the maximum is chosen with selects rather than branches
// (comparisons of random data mispredict half the time on a CPU).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_POOLMATH_H
#define MEMOPT_RUNTIME_POOLMATH_H

#include "memopt/runtime/HostDevice.h"
#include "memopt/runtime/Validate.h"

#include <cmath>
#include <cstdint>

namespace memopt {
namespace runtime {

/// Calls fn(offset) for the offset, within one [h, w] plane, of each element
/// of window (y, x), in row-major order; padding is skipped.
template <typename Fn>
MEMOPT_HOST_DEVICE inline void forEachInWindow(const PoolShape &g, int64_t y,
                                               int64_t x, Fn &&fn) {
  int64_t top = y * g.sh - g.ph, left = x * g.sw - g.pw;
  int64_t i0 = top < 0 ? -top : 0, j0 = left < 0 ? -left : 0;
  int64_t i1 = g.h - top < g.kh ? g.h - top : g.kh;
  int64_t j1 = g.w - left < g.kw ? g.w - left : g.kw;
  for (int64_t i = i0; i < i1; ++i) {
    int64_t row = (top + i) * g.w + left;
    for (int64_t j = j0; j < j1; ++j)
      fn(row + j);
  }
}

/// The offset (within one plane) of the maximum of window (y, x), reading
/// elements as `load(offset)` (a float): the first in row-major order on
/// ties; in a window with NaNs, its last NaN (PyTorch's rule: its kernels
/// take every NaN they meet). checkPool keeps padding at most half the
/// kernel, so every window holds an element.
template <typename Load>
MEMOPT_HOST_DEVICE inline int64_t windowArgMax(const PoolShape &g, int64_t y,
                                               int64_t x, Load &&load) {
  int64_t best = -1;
  float bestValue = -INFINITY;
  bool sawNaN = false;
  forEachInWindow(g, y, x, [&](int64_t offset) {
    float v = load(offset);
    bool isNaN = v != v;
    // The first element, then anything larger until a NaN, and every NaN;
    // a mask rather than a ternary, which compilers turn back into a branch.
    bool take = (best < 0) | ((v > bestValue) & !sawNaN) | isNaN;
    int64_t mask = -static_cast<int64_t>(take);
    best = (offset & mask) | (best & ~mask);
    bestValue = v > bestValue ? v : bestValue;
    sawNaN |= isNaN;
  });
  return best;
}

/// The output positions [first, last) along one axis whose windows (extent
/// k, stride, padding pad) cover input position i, for an axis of
/// `outExtent` outputs.
MEMOPT_HOST_DEVICE inline void windowsCovering(int64_t i, int64_t k,
                                               int64_t stride, int64_t pad,
                                               int64_t outExtent,
                                               int64_t &first, int64_t &last) {
  // Window o covers [o * stride - pad, o * stride - pad + k).
  int64_t lowest = i + pad - k + 1;
  first = lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
  last = (i + pad) / stride + 1;
  if (last > outExtent)
    last = outExtent;
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_POOLMATH_H
