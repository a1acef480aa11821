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

struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow;
};

#define GRID_STRIDE(i, n)                                                      \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);   \
       i += int64_t(gridDim.x) * blockDim.x)

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

bool makeShape(memopt_context *ctx, const char *entry, memopt_dtype dtype,
               ConvShape &s) {
  if (!isLive(ctx) || !checkFloat(ctx, entry, dtype) ||
      !checkExtents(ctx, entry, {s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.ph,
                                 s.pw}))
    return false;
  if (s.sh <= 0 || s.sw <= 0 || s.dh <= 0 || s.dw <= 0 || s.groups <= 0 ||
      s.c % s.groups != 0 || s.o % s.groups != 0) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "invalid strides (%lld, %lld), dilations (%lld, %lld) or groups "
             "%lld for %lld input and %lld output channels",
             static_cast<long long>(s.sh), static_cast<long long>(s.sw),
             static_cast<long long>(s.dh), static_cast<long long>(s.dw),
             static_cast<long long>(s.groups), static_cast<long long>(s.c),
             static_cast<long long>(s.o));
    return false;
  }
  int64_t spanH = s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1;
  int64_t spanW = s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1;
  if (spanH < 0 || spanW < 0) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "kernel %lldx%lld (dilated) exceeds the padded %lldx%lld input",
             static_cast<long long>(s.kh), static_cast<long long>(s.kw),
             static_cast<long long>(s.h), static_cast<long long>(s.w));
    return false;
  }
  s.oh = spanH / s.sh + 1;
  s.ow = spanW / s.sw + 1;
  return true;
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
  if (!makeShape(ctx, entry, dtype, s))
    return;
  int64_t total = n * o * s.oh * s.ow;
  if (!checkPointers(ctx, entry, total, {input, filter, out}) || total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    convKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<const T *>(filter),
        static_cast<T *>(out), s);
  });
  checkLaunch(ctx, entry, "convKernel");
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
  if (!makeShape(ctx, entry, dtype, s))
    return;
  int64_t total = n * c * h * w;
  if (!checkPointers(ctx, entry, total, {grad, filter, grad_input}) ||
      total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    convGradInputKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(grad), static_cast<const T *>(filter),
        static_cast<T *>(grad_input), s);
  });
  checkLaunch(ctx, entry, "convGradInputKernel");
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
  if (!makeShape(ctx, entry, dtype, s))
    return;
  int64_t total = o * (c / groups) * kh * kw;
  if (!checkPointers(ctx, entry, total, {grad, input, grad_filter}) ||
      total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    convGradFilterKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(grad), static_cast<const T *>(input),
        static_cast<T *>(grad_filter), s);
  });
  checkLaunch(ctx, entry, "convGradFilterKernel");
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {

struct PoolShape {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

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
__global__ void maxPoolKernel(const T *x, T *y, PoolShape s) {
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
__global__ void avgPoolKernel(const T *x, T *y, PoolShape s) {
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
__global__ void avgPoolGradKernel(const T *dy, T *dx, PoolShape s) {
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

bool makePoolShape(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                   PoolShape &s) {
  if (!isLive(ctx) || !checkFloat(ctx, entry, dtype) ||
      !checkExtents(ctx, entry, {s.n, s.c, s.h, s.w, s.ph, s.pw}))
    return false;
  if (s.kh <= 0 || s.kw <= 0 || s.sh <= 0 || s.sw <= 0 || 2 * s.ph > s.kh ||
      2 * s.pw > s.kw || s.h + 2 * s.ph < s.kh || s.w + 2 * s.pw < s.kw) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "invalid window %lldx%lld, strides (%lld, %lld) or padding "
             "(%lld, %lld) for a %lldx%lld input",
             static_cast<long long>(s.kh), static_cast<long long>(s.kw),
             static_cast<long long>(s.sh), static_cast<long long>(s.sw),
             static_cast<long long>(s.ph), static_cast<long long>(s.pw),
             static_cast<long long>(s.h), static_cast<long long>(s.w));
    return false;
  }
  s.oh = (s.h + 2 * s.ph - s.kh) / s.sh + 1;
  s.ow = (s.w + 2 * s.pw - s.kw) / s.sw + 1;
  return true;
}

} // namespace

void memopt_max_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w) {
  const char *entry = "memopt_max_pool2d";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolShape(ctx, entry, dtype, s))
    return;
  int64_t total = n * c * s.oh * s.ow;
  if (!checkPointers(ctx, entry, total, {input, out}) || total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    maxPoolKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<T *>(out), s);
  });
  checkLaunch(ctx, entry, "maxPoolKernel");
}

void memopt_max_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            void *grad_input, int64_t n, int64_t c, int64_t h,
                            int64_t w, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  const char *entry = "memopt_max_pool2d_grad";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolShape(ctx, entry, dtype, s))
    return;
  int64_t total = n * c * h * w;
  if (!checkPointers(ctx, entry, total, {grad, input, grad_input}) ||
      total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    maxPoolGradKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(grad), static_cast<const T *>(input),
        static_cast<T *>(grad_input), s);
  });
  checkLaunch(ctx, entry, "maxPoolGradKernel");
}

void memopt_avg_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w) {
  const char *entry = "memopt_avg_pool2d";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolShape(ctx, entry, dtype, s))
    return;
  int64_t total = n * c * s.oh * s.ow;
  if (!checkPointers(ctx, entry, total, {input, out}) || total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    avgPoolKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(input), static_cast<T *>(out), s);
  });
  checkLaunch(ctx, entry, "avgPoolKernel");
}

void memopt_avg_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, void *grad_input, int64_t n,
                            int64_t c, int64_t h, int64_t w, int64_t kh,
                            int64_t kw, int64_t stride_h, int64_t stride_w,
                            int64_t pad_h, int64_t pad_w) {
  const char *entry = "memopt_avg_pool2d_grad";
  PoolShape s{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolShape(ctx, entry, dtype, s))
    return;
  int64_t total = n * c * h * w;
  if (!checkPointers(ctx, entry, total, {grad, grad_input}) || total == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    avgPoolGradKernel<T><<<gridFor(total), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(grad), static_cast<T *>(grad_input), s);
  });
  checkLaunch(ctx, entry, "avgPoolGradKernel");
}
