//===- Pool.cu - max and average pooling ----------------------------------===//
//
// memopt_max_pool2d, memopt_avg_pool2d and their gradients as direct kernels,
// one thread per result element, each a gather in a fixed order (no atomics,
// no workspace), so results are identical run to run. The windows, their
// maxima and which windows cover an input element come from PoolMath.h, the
// functions the host runtime runs; a gradient thread visits only the
// windows that cover its element.
//
// They stay hand-written rather than going through cuDNN's pooling. Pooling
// is a memory-bound gather with nothing for a library to tile or reuse, and
// memopt's contract (runtime.h) is exact and simple: floor mode, -inf padding
// for max with NaN propagating, padding counted in the average's divisor
// kh * kw, and the max gradient routed to the window's first maximum in
// row-major order on ties (its last NaN when it holds any, as PyTorch).
// cuDNN documents no rule for which of tied maxima receives the
// gradient (and offers a separate deterministic max mode, so its plain one
// promises none), and its backward calls take the forward output y, which
// memopt_max_pool2d_grad and memopt_avg_pool2d_grad do not receive: the max
// gradient recomputes each window's argmax from the input instead.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "memopt/runtime/PoolMath.h"

using namespace memopt::cuda;

namespace {

/// Every entry of this file: one thread per element of the result (`total`
/// of them), running `kernel(tag)`, the kernel's instantiation for the
/// storage type of `tag`, on up to two operands. The entries differ only in
/// kernel, operands and which extent they cover.
template <typename Shape, typename Kernel>
void launch(memopt_context *ctx, const char *entry, const char *name,
            memopt_dtype dtype, const Shape &s, int64_t total,
            std::initializer_list<const void *> operands, void *result,
            Kernel kernel) {
  if (!checkPointers(ctx, entry, total, operands) ||
      !checkPointers(ctx, entry, total, {result}) || isEmpty({total}))
    return;
  const void *a = operands.begin()[0];
  const void *b = operands.size() > 1 ? operands.begin()[1] : nullptr;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    kernel(tag)<<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(a), static_cast<const T *>(b),
        static_cast<T *>(result), s);
  });
  checkLaunch(ctx, entry, name);
}

template <typename T>
__global__ void maxPoolKernel(const T *x, const T *, T *y, PoolShape s) {
  GRID_STRIDE(i, s.n * s.c * s.oh * s.ow) {
    int64_t ox = i % s.ow, oy = (i / s.ow) % s.oh, nc = i / (s.ow * s.oh);
    const T *xc = x + nc * s.h * s.w;
    y[i] =
        xc[windowArgMax(s, oy, ox, [xc](int64_t at) { return toF32(xc[at]); })];
  }
}

/// A thread per input element gathers, in window order, the gradients of
/// the windows that cover it and whose maximum it is (the host scatters the
/// same sums in the same order).
template <typename T>
__global__ void maxPoolGradKernel(const T *dy, const T *x, T *dx, PoolShape s) {
  GRID_STRIDE(i, s.n * s.c * s.h * s.w) {
    int64_t pos = i % (s.h * s.w), nc = i / (s.h * s.w);
    const T *xc = x + nc * s.h * s.w;
    int64_t oy0, oy1, ox0, ox1;
    windowsCovering(pos / s.w, s.kh, s.sh, s.ph, s.oh, oy0, oy1);
    windowsCovering(pos % s.w, s.kw, s.sw, s.pw, s.ow, ox0, ox1);
    float acc = 0.0f;
    for (int64_t oy = oy0; oy < oy1; ++oy)
      for (int64_t ox = ox0; ox < ox1; ++ox)
        if (windowArgMax(s, oy, ox,
                         [xc](int64_t at) { return toF32(xc[at]); }) == pos)
          acc += toF32(dy[(nc * s.oh + oy) * s.ow + ox]);
    dx[i] = fromF32<T>(acc);
  }
}

template <typename T>
__global__ void avgPoolKernel(const T *x, const T *, T *y, PoolShape s) {
  float inv = 1.0f / static_cast<float>(s.kh * s.kw);
  GRID_STRIDE(i, s.n * s.c * s.oh * s.ow) {
    int64_t ox = i % s.ow, oy = (i / s.ow) % s.oh, nc = i / (s.ow * s.oh);
    const T *xc = x + nc * s.h * s.w;
    float acc = 0.0f;
    forEachInWindow(s, oy, ox, [&](int64_t at) { acc += toF32(xc[at]); });
    y[i] = fromF32<T>(acc * inv);
  }
}

template <typename T>
__global__ void avgPoolGradKernel(const T *dy, const T *, T *dx, PoolShape s) {
  float inv = 1.0f / static_cast<float>(s.kh * s.kw);
  GRID_STRIDE(i, s.n * s.c * s.h * s.w) {
    int64_t pos = i % (s.h * s.w), nc = i / (s.h * s.w);
    int64_t oy0, oy1, ox0, ox1;
    windowsCovering(pos / s.w, s.kh, s.sh, s.ph, s.oh, oy0, oy1);
    windowsCovering(pos % s.w, s.kw, s.sw, s.pw, s.ow, ox0, ox1);
    float acc = 0.0f;
    for (int64_t oy = oy0; oy < oy1; ++oy)
      for (int64_t ox = ox0; ox < ox1; ++ox)
        acc += toF32(dy[(nc * s.oh + oy) * s.ow + ox]);
    dx[i] = fromF32<T>(acc * inv);
  }
}

} // namespace

void memopt_max_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w) {
  const char *entry = "memopt_max_pool2d";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (checkPool(ctx, entry, dtype, s))
    launch(ctx, entry, "maxPoolKernel", dtype, s, s.outputSize(), {input}, out,
           [](auto tag) { return maxPoolKernel<MEMOPT_STORAGE(tag)>; });
}

void memopt_max_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            void *grad_input, int64_t n, int64_t c, int64_t h,
                            int64_t w, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  const char *entry = "memopt_max_pool2d_grad";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (checkPool(ctx, entry, dtype, s))
    launch(ctx, entry, "maxPoolGradKernel", dtype, s, s.inputSize(),
           {grad, input}, grad_input,
           [](auto tag) { return maxPoolGradKernel<MEMOPT_STORAGE(tag)>; });
}

void memopt_avg_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w) {
  const char *entry = "memopt_avg_pool2d";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (checkPool(ctx, entry, dtype, s))
    launch(ctx, entry, "avgPoolKernel", dtype, s, s.outputSize(), {input}, out,
           [](auto tag) { return avgPoolKernel<MEMOPT_STORAGE(tag)>; });
}

void memopt_avg_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, void *grad_input, int64_t n,
                            int64_t c, int64_t h, int64_t w, int64_t kh,
                            int64_t kw, int64_t stride_h, int64_t stride_w,
                            int64_t pad_h, int64_t pad_w) {
  const char *entry = "memopt_avg_pool2d_grad";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (checkPool(ctx, entry, dtype, s))
    launch(ctx, entry, "avgPoolGradKernel", dtype, s, s.inputSize(), {grad},
           grad_input,
           [](auto tag) { return avgPoolGradKernel<MEMOPT_STORAGE(tag)>; });
}
