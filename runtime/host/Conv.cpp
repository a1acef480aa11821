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

/// col[(ci * kh + i) * kw + j][y * ow + x] = image[ci][y*sh - ph + i*dh]
/// [x*sw - pw + j*dw], zero outside; `image` is [cg, h, w].
void im2col(const ConvShape &g, const float *image, float *col) {
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
void col2im(const ConvShape &g, const float *col, float *image) {
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
  ConvShape g{n,        c,     h,     w,     o,     kh,     kw, stride_h,
              stride_w, pad_h, pad_w, dil_h, dil_w, groups, 0,  0};
  if (!checkConv(ctx, entry, dtype, g))
    return;
  int64_t inSize = g.inputSize(), filterSize = g.filterSize(),
          outSize = g.outputSize();
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
  ConvShape g{n,        c,     h,     w,     o,     kh,     kw, stride_h,
              stride_w, pad_h, pad_w, dil_h, dil_w, groups, 0,  0};
  if (!checkConv(ctx, entry, dtype, g))
    return;
  int64_t inSize = g.inputSize(), filterSize = g.filterSize(),
          outSize = g.outputSize();
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
  ConvShape g{n,        c,     h,     w,     o,     kh,     kw, stride_h,
              stride_w, pad_h, pad_w, dil_h, dil_w, groups, 0,  0};
  if (!checkConv(ctx, entry, dtype, g))
    return;
  int64_t inSize = g.inputSize(), filterSize = g.filterSize(),
          outSize = g.outputSize();
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

/// The input offset (within one [h, w] plane) of the maximum of window
/// (y, x): the first in row-major order on ties, the first NaN if any. Every
/// window holds at least one input element since padding <= kernel / 2.
int64_t argmaxOfWindow(const PoolShape &g, const float *plane, int64_t y,
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
  PoolShape g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!checkPool(ctx, entry, dtype, g))
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
  PoolShape g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!checkPool(ctx, entry, dtype, g))
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
  PoolShape g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!checkPool(ctx, entry, dtype, g))
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
  PoolShape g{n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, 0, 0};
  if (!checkPool(ctx, entry, dtype, g))
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
