//===- Conv.cpp - host convolution and pooling ----------------------------===//
//
// conv2d and its two gradients as im2col + GEMM, one image and one group at
// a time (the im2col workspace is [C/groups * KH * KW, OH * OW]):
//   forward      Y_g  = W_g * col(X_g)
//   grad_input   dX_g = col2im(W_g^T * dY_g)
//   grad_filter  dW_g = sum over images of dY_g * col(X_g)^T
// Images are visited in order, so the filter gradient sums deterministically.
// Max and average pooling are direct loops.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostRuntime.h"

#include <cmath>
#include <cstring>

using namespace memopt::host;

namespace {

/// The geometry of one convolution, validated.
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int64_t oh, ow;
  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
  int64_t colRows() const { return cg() * kh * kw; }
  int64_t colCols() const { return oh * ow; }
};

bool makeGeometry(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                  ConvGeometry &g) {
  if (!isLive(ctx) || !checkFloat(ctx, entry, dtype) ||
      !checkExtents(ctx, entry,
                    {g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.ph, g.pw}))
    return false;
  if (g.sh <= 0 || g.sw <= 0 || g.dh <= 0 || g.dw <= 0 || g.groups <= 0 ||
      g.c % g.groups != 0 || g.o % g.groups != 0) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "invalid strides (%lld, %lld), dilations (%lld, %lld) or groups "
             "%lld for %lld input and %lld output channels",
             static_cast<long long>(g.sh), static_cast<long long>(g.sw),
             static_cast<long long>(g.dh), static_cast<long long>(g.dw),
             static_cast<long long>(g.groups), static_cast<long long>(g.c),
             static_cast<long long>(g.o));
    return false;
  }
  int64_t spanH = g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1;
  int64_t spanW = g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1;
  if (spanH < 0 || spanW < 0) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "kernel %lldx%lld (dilated) exceeds the padded %lldx%lld input",
             static_cast<long long>(g.kh), static_cast<long long>(g.kw),
             static_cast<long long>(g.h), static_cast<long long>(g.w));
    return false;
  }
  g.oh = spanH / g.sh + 1;
  g.ow = spanW / g.sw + 1;
  return true;
}

/// col[(ci * kh + i) * kw + j][y * ow + x] = image[ci][y*sh - ph + i*dh]
/// [x*sw - pw + j*dw], zero outside; `image` is [cg, h, w].
void im2col(const ConvGeometry &g, const float *image, float *col) {
  int64_t cols = g.colCols();
  for (int64_t ci = 0; ci < g.cg(); ++ci) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        float *row = col + ((ci * g.kh + i) * g.kw + j) * cols;
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.sh - g.ph + i * g.dh;
          for (int64_t x = 0; x < g.ow; ++x) {
            int64_t ix = x * g.sw - g.pw + j * g.dw;
            bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
            row[y * g.ow + x] =
                inside ? image[(ci * g.h + iy) * g.w + ix] : 0.0f;
          }
        }
      }
    }
  }
}

/// The adjoint of im2col: image[...] += col[...] for every in-range entry.
void col2im(const ConvGeometry &g, const float *col, float *image) {
  int64_t cols = g.colCols();
  for (int64_t ci = 0; ci < g.cg(); ++ci) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const float *row = col + ((ci * g.kh + i) * g.kw + j) * cols;
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.sh - g.ph + i * g.dh;
          if (iy < 0 || iy >= g.h)
            continue;
          for (int64_t x = 0; x < g.ow; ++x) {
            int64_t ix = x * g.sw - g.pw + j * g.dw;
            if (ix >= 0 && ix < g.w)
              image[(ci * g.h + iy) * g.w + ix] += row[y * g.ow + x];
          }
        }
      }
    }
  }
}

} // namespace

void memopt_conv2d(memopt_context *ctx, memopt_dtype dtype, const void *input,
                   const void *filter, void *out, int64_t n, int64_t c,
                   int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
                   int64_t stride_h, int64_t stride_w, int64_t pad_h,
                   int64_t pad_w, int64_t dil_h, int64_t dil_w,
                   int64_t groups) {
  const char *entry = "memopt_conv2d";
  ConvGeometry g{n,        c,     h,     w,     o,     kh,     kw, stride_h,
                 stride_w, pad_h, pad_w, dil_h, dil_w, groups, 0,  0};
  if (!makeGeometry(ctx, entry, dtype, g))
    return;
  int64_t inSize = n * c * h * w, filterSize = o * g.colRows(),
          outSize = n * o * g.oh * g.ow;
  if (!checkPointers(ctx, entry, outSize, {input, filter, out}))
    return;
  F32Input x(ctx, dtype, input, inSize);
  F32Input wt(ctx, dtype, filter, filterSize);
  F32Output y(ctx, dtype, out, outSize);
  Workspace col(ctx, g.colRows() * g.colCols());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      im2col(g, x.get() + (b * c + gi * g.cg()) * h * w, col.get());
      sgemm(false, false, g.og(), g.colCols(), g.colRows(), 1.0f,
            wt.get() + gi * g.og() * g.colRows(), g.colRows(), col.get(),
            g.colCols(), 0.0f, y.get() + (b * o + gi * g.og()) * g.colCols(),
            g.colCols());
    }
  }
  y.commit();
}

void memopt_conv2d_grad_input(memopt_context *ctx, memopt_dtype dtype,
                              const void *grad, const void *filter,
                              void *grad_input, int64_t n, int64_t c, int64_t h,
                              int64_t w, int64_t o, int64_t kh, int64_t kw,
                              int64_t stride_h, int64_t stride_w, int64_t pad_h,
                              int64_t pad_w, int64_t dil_h, int64_t dil_w,
                              int64_t groups) {
  const char *entry = "memopt_conv2d_grad_input";
  ConvGeometry g{n,        c,     h,     w,     o,     kh,     kw, stride_h,
                 stride_w, pad_h, pad_w, dil_h, dil_w, groups, 0,  0};
  if (!makeGeometry(ctx, entry, dtype, g))
    return;
  int64_t inSize = n * c * h * w, filterSize = o * g.colRows(),
          outSize = n * o * g.oh * g.ow;
  if (!checkPointers(ctx, entry, inSize, {grad, filter, grad_input}))
    return;
  F32Input dy(ctx, dtype, grad, outSize);
  F32Input wt(ctx, dtype, filter, filterSize);
  F32Output dx(ctx, dtype, grad_input, inSize);
  std::memset(dx.get(), 0, static_cast<size_t>(inSize) * sizeof(float));
  Workspace col(ctx, g.colRows() * g.colCols());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      sgemm(true, false, g.colRows(), g.colCols(), g.og(), 1.0f,
            wt.get() + gi * g.og() * g.colRows(), g.colRows(),
            dy.get() + (b * o + gi * g.og()) * g.colCols(), g.colCols(), 0.0f,
            col.get(), g.colCols());
      col2im(g, col.get(), dx.get() + (b * c + gi * g.cg()) * h * w);
    }
  }
  dx.commit();
}

void memopt_conv2d_grad_filter(memopt_context *ctx, memopt_dtype dtype,
                               const void *grad, const void *input,
                               void *grad_filter, int64_t n, int64_t c,
                               int64_t h, int64_t w, int64_t o, int64_t kh,
                               int64_t kw, int64_t stride_h, int64_t stride_w,
                               int64_t pad_h, int64_t pad_w, int64_t dil_h,
                               int64_t dil_w, int64_t groups) {
  const char *entry = "memopt_conv2d_grad_filter";
  ConvGeometry g{n,        c,     h,     w,     o,     kh,     kw, stride_h,
                 stride_w, pad_h, pad_w, dil_h, dil_w, groups, 0,  0};
  if (!makeGeometry(ctx, entry, dtype, g))
    return;
  int64_t inSize = n * c * h * w, filterSize = o * g.colRows(),
          outSize = n * o * g.oh * g.ow;
  if (!checkPointers(ctx, entry, filterSize, {grad, input, grad_filter}))
    return;
  F32Input dy(ctx, dtype, grad, outSize);
  F32Input x(ctx, dtype, input, inSize);
  F32Output dw(ctx, dtype, grad_filter, filterSize);
  std::memset(dw.get(), 0, static_cast<size_t>(filterSize) * sizeof(float));
  Workspace col(ctx, g.colRows() * g.colCols());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      im2col(g, x.get() + (b * c + gi * g.cg()) * h * w, col.get());
      sgemm(false, true, g.og(), g.colRows(), g.colCols(), 1.0f,
            dy.get() + (b * o + gi * g.og()) * g.colCols(), g.colCols(),
            col.get(), g.colCols(), 1.0f, dw.get() + gi * g.og() * g.colRows(),
            g.colRows());
    }
  }
  dw.commit();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {

struct PoolGeometry {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
  int64_t oh, ow;
};

bool makePoolGeometry(memopt_context *ctx, const char *entry,
                      memopt_dtype dtype, PoolGeometry &g) {
  if (!isLive(ctx) || !checkFloat(ctx, entry, dtype) ||
      !checkExtents(ctx, entry, {g.n, g.c, g.h, g.w, g.ph, g.pw}))
    return false;
  if (g.kh <= 0 || g.kw <= 0 || g.sh <= 0 || g.sw <= 0 || 2 * g.ph > g.kh ||
      2 * g.pw > g.kw || g.h + 2 * g.ph < g.kh || g.w + 2 * g.pw < g.kw) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "invalid window %lldx%lld, strides (%lld, %lld) or padding "
             "(%lld, %lld) for a %lldx%lld input",
             static_cast<long long>(g.kh), static_cast<long long>(g.kw),
             static_cast<long long>(g.sh), static_cast<long long>(g.sw),
             static_cast<long long>(g.ph), static_cast<long long>(g.pw),
             static_cast<long long>(g.h), static_cast<long long>(g.w));
    return false;
  }
  g.oh = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
  return true;
}

/// The input offset (within one [h, w] plane) of the maximum of window
/// (y, x): the first in row-major order on ties, the first NaN if any. Every
/// window holds at least one input element since padding <= kernel / 2.
int64_t argmaxOfWindow(const PoolGeometry &g, const float *plane, int64_t y,
                       int64_t x) {
  int64_t best = -1;
  float bestValue = -INFINITY;
  for (int64_t i = 0; i < g.kh; ++i) {
    int64_t iy = y * g.sh - g.ph + i;
    if (iy < 0 || iy >= g.h)
      continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      int64_t ix = x * g.sw - g.pw + j;
      if (ix < 0 || ix >= g.w)
        continue;
      float v = plane[iy * g.w + ix];
      if (best < 0 || v > bestValue ||
          (std::isnan(v) && !std::isnan(bestValue))) {
        best = iy * g.w + ix;
        bestValue = v;
      }
    }
  }
  return best;
}

} // namespace

void memopt_max_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w) {
  const char *entry = "memopt_max_pool2d";
  PoolGeometry g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolGeometry(ctx, entry, dtype, g))
    return;
  int64_t planes = n * c;
  if (!checkPointers(ctx, entry, planes * g.oh * g.ow, {input, out}))
    return;
  F32Input x(ctx, dtype, input, planes * h * w);
  F32Output y(ctx, dtype, out, planes * g.oh * g.ow);
  for (int64_t p = 0; p < planes; ++p) {
    const float *plane = x.get() + p * h * w;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        y[(p * g.oh + oy) * g.ow + ox] =
            plane[argmaxOfWindow(g, plane, oy, ox)];
  }
  y.commit();
}

void memopt_max_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            void *grad_input, int64_t n, int64_t c, int64_t h,
                            int64_t w, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  const char *entry = "memopt_max_pool2d_grad";
  PoolGeometry g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolGeometry(ctx, entry, dtype, g))
    return;
  int64_t planes = n * c;
  if (!checkPointers(ctx, entry, planes * h * w, {grad, input, grad_input}))
    return;
  F32Input dy(ctx, dtype, grad, planes * g.oh * g.ow);
  F32Input x(ctx, dtype, input, planes * h * w);
  F32Output dx(ctx, dtype, grad_input, planes * h * w);
  std::memset(dx.get(), 0, static_cast<size_t>(planes * h * w) * sizeof(float));
  for (int64_t p = 0; p < planes; ++p) {
    const float *plane = x.get() + p * h * w;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        dx[p * h * w + argmaxOfWindow(g, plane, oy, ox)] +=
            dy[(p * g.oh + oy) * g.ow + ox];
  }
  dx.commit();
}

void memopt_avg_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w) {
  const char *entry = "memopt_avg_pool2d";
  PoolGeometry g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolGeometry(ctx, entry, dtype, g))
    return;
  int64_t planes = n * c;
  if (!checkPointers(ctx, entry, planes * g.oh * g.ow, {input, out}))
    return;
  F32Input x(ctx, dtype, input, planes * h * w);
  F32Output y(ctx, dtype, out, planes * g.oh * g.ow);
  // Floor mode keeps every window inside the padded input, so the divisor
  // (padding counted) is always kh * kw.
  float inv = 1.0f / static_cast<float>(kh * kw);
  for (int64_t p = 0; p < planes; ++p) {
    const float *plane = x.get() + p * h * w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float sum = 0.0f;
        for (int64_t i = 0; i < kh; ++i) {
          int64_t iy = oy * stride_h - pad_h + i;
          if (iy < 0 || iy >= h)
            continue;
          for (int64_t j = 0; j < kw; ++j) {
            int64_t ix = ox * stride_w - pad_w + j;
            if (ix >= 0 && ix < w)
              sum += plane[iy * w + ix];
          }
        }
        y[(p * g.oh + oy) * g.ow + ox] = sum * inv;
      }
    }
  }
  y.commit();
}

void memopt_avg_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, void *grad_input, int64_t n,
                            int64_t c, int64_t h, int64_t w, int64_t kh,
                            int64_t kw, int64_t stride_h, int64_t stride_w,
                            int64_t pad_h, int64_t pad_w) {
  const char *entry = "memopt_avg_pool2d_grad";
  PoolGeometry g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!makePoolGeometry(ctx, entry, dtype, g))
    return;
  int64_t planes = n * c;
  if (!checkPointers(ctx, entry, planes * h * w, {grad, grad_input}))
    return;
  F32Input dy(ctx, dtype, grad, planes * g.oh * g.ow);
  F32Output dx(ctx, dtype, grad_input, planes * h * w);
  std::memset(dx.get(), 0, static_cast<size_t>(planes * h * w) * sizeof(float));
  float inv = 1.0f / static_cast<float>(kh * kw);
  for (int64_t p = 0; p < planes; ++p) {
    float *plane = dx.get() + p * h * w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float share = dy[(p * g.oh + oy) * g.ow + ox] * inv;
        for (int64_t i = 0; i < kh; ++i) {
          int64_t iy = oy * stride_h - pad_h + i;
          if (iy < 0 || iy >= h)
            continue;
          for (int64_t j = 0; j < kw; ++j) {
            int64_t ix = ox * stride_w - pad_w + j;
            if (ix >= 0 && ix < w)
              plane[iy * w + ix] += share;
          }
        }
      }
    }
  }
  dx.commit();
}
