//===- Conv.cu - direct convolution and pooling ----------------------------===//
//
// Direct kernels, one thread per result element, each a gather in a fixed
// order (no atomics, no workspace): conv2d and its input gradient loop over
// the window, the filter gradient over the batch and output positions.
// Correct for every stride, padding, dilation and group count; not tuned
// (docs/CUDA.md: cuDNN or implicit GEMM is the follow-up for CNN speed).
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace memopt::cuda;

namespace {

template <typename T>
__global__ void convKernel(const T *x, const T *f, T *y, ConvShape s) {
  int64_t cg = s.c / s.groups, og = s.o / s.groups;
  GRID_STRIDE(i, s.n * s.o * s.oh * s.ow) {
    int64_t ox = i % s.ow, oy = (i / s.ow) % s.oh;
    int64_t oc = (i / (s.ow * s.oh)) % s.o, b = i / (s.ow * s.oh * s.o);
    int64_t g = oc / og;
    float acc = 0.0f;
    for (int64_t ci = 0; ci < cg; ++ci) {
      const T *xc = x + (b * s.c + g * cg + ci) * s.h * s.w;
      const T *fc = f + (oc * cg + ci) * s.kh * s.kw;
      for (int64_t ky = 0; ky < s.kh; ++ky) {
        int64_t iy = oy * s.sh - s.ph + ky * s.dh;
        if (iy < 0 || iy >= s.h)
          continue;
        for (int64_t kx = 0; kx < s.kw; ++kx) {
          int64_t ix = ox * s.sw - s.pw + kx * s.dw;
          if (ix < 0 || ix >= s.w)
            continue;
          acc += toF32(xc[iy * s.w + ix]) * toF32(fc[ky * s.kw + kx]);
        }
      }
    }
    y[i] = fromF32<T>(acc);
  }
}

template <typename T>
__global__ void convGradInputKernel(const T *dy, const T *f, T *dx,
                                    ConvShape s) {
  int64_t cg = s.c / s.groups, og = s.o / s.groups;
  GRID_STRIDE(i, s.n * s.c * s.h * s.w) {
    int64_t ix = i % s.w, iy = (i / s.w) % s.h;
    int64_t ch = (i / (s.w * s.h)) % s.c, b = i / (s.w * s.h * s.c);
    int64_t g = ch / cg, ci = ch % cg;
    float acc = 0.0f;
    for (int64_t oc = g * og; oc < (g + 1) * og; ++oc) {
      const T *dyc = dy + (b * s.o + oc) * s.oh * s.ow;
      const T *fc = f + (oc * cg + ci) * s.kh * s.kw;
      for (int64_t ky = 0; ky < s.kh; ++ky) {
        int64_t ty = iy + s.ph - ky * s.dh;
        if (ty < 0 || ty % s.sh)
          continue;
        int64_t oy = ty / s.sh;
        if (oy >= s.oh)
          continue;
        for (int64_t kx = 0; kx < s.kw; ++kx) {
          int64_t tx = ix + s.pw - kx * s.dw;
          if (tx < 0 || tx % s.sw)
            continue;
          int64_t ox = tx / s.sw;
          if (ox >= s.ow)
            continue;
          acc += toF32(dyc[oy * s.ow + ox]) * toF32(fc[ky * s.kw + kx]);
        }
      }
    }
    dx[i] = fromF32<T>(acc);
  }
}

template <typename T>
__global__ void convGradFilterKernel(const T *dy, const T *x, T *df,
                                     ConvShape s) {
  int64_t cg = s.c / s.groups, og = s.o / s.groups;
  GRID_STRIDE(i, s.o * cg * s.kh * s.kw) {
    int64_t kx = i % s.kw, ky = (i / s.kw) % s.kh;
    int64_t ci = (i / (s.kw * s.kh)) % cg, oc = i / (s.kw * s.kh * cg);
    int64_t g = oc / og;
    float acc = 0.0f;
    for (int64_t b = 0; b < s.n; ++b) {
      const T *dyc = dy + (b * s.o + oc) * s.oh * s.ow;
      const T *xc = x + (b * s.c + g * cg + ci) * s.h * s.w;
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        int64_t iy = oy * s.sh - s.ph + ky * s.dh;
        if (iy < 0 || iy >= s.h)
          continue;
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          int64_t ix = ox * s.sw - s.pw + kx * s.dw;
          if (ix < 0 || ix >= s.w)
            continue;
          acc += toF32(dyc[oy * s.ow + ox]) * toF32(xc[iy * s.w + ix]);
        }
      }
    }
    df[i] = fromF32<T>(acc);
  }
}

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

} // namespace

void memopt_conv2d(memopt_context *ctx, memopt_dtype dtype, const void *input,
                   const void *filter, void *out, int64_t n, int64_t c,
                   int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
                   int64_t stride_h, int64_t stride_w, int64_t pad_h,
                   int64_t pad_w, int64_t dil_h, int64_t dil_w,
                   int64_t groups) {
  const char *entry = "memopt_conv2d";
  ConvShape s{n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w,
              dil_h, dil_w, groups, 0, 0};
  if (checkConv(ctx, entry, dtype, s))
    launch(ctx, entry, "convKernel", dtype, s, s.outputSize(), {input, filter},
           out, [](auto tag) { return convKernel<MEMOPT_STORAGE(tag)>; });
}

void memopt_conv2d_grad_input(memopt_context *ctx, memopt_dtype dtype,
                              const void *grad, const void *filter,
                              void *grad_input, int64_t n, int64_t c, int64_t h,
                              int64_t w, int64_t o, int64_t kh, int64_t kw,
                              int64_t stride_h, int64_t stride_w, int64_t pad_h,
                              int64_t pad_w, int64_t dil_h, int64_t dil_w,
                              int64_t groups) {
  const char *entry = "memopt_conv2d_grad_input";
  ConvShape s{n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w,
              dil_h, dil_w, groups, 0, 0};
  if (checkConv(ctx, entry, dtype, s))
    launch(ctx, entry, "convGradInputKernel", dtype, s, s.inputSize(),
           {grad, filter}, grad_input,
           [](auto tag) { return convGradInputKernel<MEMOPT_STORAGE(tag)>; });
}

void memopt_conv2d_grad_filter(memopt_context *ctx, memopt_dtype dtype,
                               const void *grad, const void *input,
                               void *grad_filter, int64_t n, int64_t c,
                               int64_t h, int64_t w, int64_t o, int64_t kh,
                               int64_t kw, int64_t stride_h, int64_t stride_w,
                               int64_t pad_h, int64_t pad_w, int64_t dil_h,
                               int64_t dil_w, int64_t groups) {
  const char *entry = "memopt_conv2d_grad_filter";
  ConvShape s{n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w,
              dil_h, dil_w, groups, 0, 0};
  if (checkConv(ctx, entry, dtype, s))
    launch(ctx, entry, "convGradFilterKernel", dtype, s, s.filterSize(),
           {grad, input}, grad_filter,
           [](auto tag) { return convGradFilterKernel<MEMOPT_STORAGE(tag)>; });
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {

/// The row-major index in the window of output (oy, ox) of its maximum
/// (first on ties, NaN wins), or -1 when the window is all padding.
template <typename T>
__device__ int64_t windowArgMax(const T *xc, const PoolShape &s, int64_t oy,
                                int64_t ox, float &best) {
  best = -INFINITY;
  int64_t at = -1;
  for (int64_t ky = 0; ky < s.kh; ++ky) {
    int64_t iy = oy * s.sh - s.ph + ky;
    if (iy < 0 || iy >= s.h)
      continue;
    for (int64_t kx = 0; kx < s.kw; ++kx) {
      int64_t ix = ox * s.sw - s.pw + kx;
      if (ix < 0 || ix >= s.w)
        continue;
      float v = toF32(xc[iy * s.w + ix]);
      if (isnan(v)) {
        best = v;
        return iy * s.w + ix;
      }
      if (at < 0 || v > best) {
        best = v;
        at = iy * s.w + ix;
      }
    }
  }
  return at;
}

template <typename T>
__global__ void maxPoolKernel(const T *x, const T *, T *y, PoolShape s) {
  GRID_STRIDE(i, s.n * s.c * s.oh * s.ow) {
    int64_t ox = i % s.ow, oy = (i / s.ow) % s.oh, nc = i / (s.ow * s.oh);
    float best;
    windowArgMax(x + nc * s.h * s.w, s, oy, ox, best);
    y[i] = fromF32<T>(best);
  }
}

/// A thread per input element gathers the gradients of the windows whose
/// maximum it is.
template <typename T>
__global__ void maxPoolGradKernel(const T *dy, const T *x, T *dx,
                                  PoolShape s) {
  GRID_STRIDE(i, s.n * s.c * s.h * s.w) {
    int64_t pos = i % (s.h * s.w), nc = i / (s.h * s.w);
    int64_t iy = pos / s.w, ix = pos % s.w;
    const T *xc = x + nc * s.h * s.w;
    float acc = 0.0f;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      int64_t y0 = oy * s.sh - s.ph;
      if (iy < y0 || iy >= y0 + s.kh)
        continue;
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        int64_t x0 = ox * s.sw - s.pw;
        if (ix < x0 || ix >= x0 + s.kw)
          continue;
        float best;
        if (windowArgMax(xc, s, oy, ox, best) == pos)
          acc += toF32(dy[(nc * s.oh + oy) * s.ow + ox]);
      }
    }
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
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      int64_t iy = oy * s.sh - s.ph + ky;
      if (iy < 0 || iy >= s.h)
        continue;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        int64_t ix = ox * s.sw - s.pw + kx;
        if (ix >= 0 && ix < s.w)
          acc += toF32(xc[iy * s.w + ix]);
      }
    }
    y[i] = fromF32<T>(acc * inv);
  }
}

template <typename T>
__global__ void avgPoolGradKernel(const T *dy, const T *, T *dx, PoolShape s) {
  float inv = 1.0f / static_cast<float>(s.kh * s.kw);
  GRID_STRIDE(i, s.n * s.c * s.h * s.w) {
    int64_t pos = i % (s.h * s.w), nc = i / (s.h * s.w);
    int64_t iy = pos / s.w, ix = pos % s.w;
    float acc = 0.0f;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      int64_t y0 = oy * s.sh - s.ph;
      if (iy < y0 || iy >= y0 + s.kh)
        continue;
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        int64_t x0 = ox * s.sw - s.pw;
        if (ix >= x0 && ix < x0 + s.kw)
          acc += toF32(dy[(nc * s.oh + oy) * s.ow + ox]);
      }
    }
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

// Placeholder until the plans land.
struct memopt::cuda::ConvPlans {};
void memopt::cuda::destroyPlans(ConvPlans *plans) { delete plans; }
