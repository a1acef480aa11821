//===- Conv.cpp - host convolution and pooling ----------------------------===//
//
// conv2d and its two gradients: through oneDNN where it has a JIT kernel
// for the shape (OneDnnConv.h), otherwise as im2col + GEMM, a batch of
// images and one group at a time. The im2col matrix of `imgs` images is
// [C/groups * KH * KW, imgs * OH * OW] (image i's columns at i * OH * OW), so
// that a small convolution is one GEMM wide enough for the BLAS's threads
// rather than one narrow GEMM per image:
//   forward      Y_g  = W_g * col(X_g)
//   grad_input   dX_g = col2im(W_g^T * dY_g)
//   grad_filter  dW_g = sum over batches of dY_g * col(X_g)^T
// where Y_g and dY_g are the images' [O/groups, imgs * OH * OW] output
// planes side by side, copied to and from the tensors' [N, O, OH, OW]
// layout. The batch holds as many images as fit kColumnFloats of workspace
// (at least one), so it depends on the shapes only and the filter gradient
// sums in one order whatever the threads. im2col, col2im, the copies and
// pooling run on the host threads (Parallel.h).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostRuntime.h"
#include "OneDnnConv.h"
#include "Parallel.h"
#include "memopt/runtime/PoolMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace memopt::host;

namespace {

/// The workspace, in floats, that a batch of images may take: its im2col
/// matrix and its output planes (8 MiB).
constexpr int64_t kColumnFloats = int64_t(1) << 21;

/// ceil(a / b) for b > 0.
int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

/// The images of one batch and the workspace their GEMMs use.
class ConvBatches {
public:
  ConvBatches(memopt_context *ctx, const ConvShape &g)
      : g(g), imgs(std::clamp<int64_t>(
                  kColumnFloats / std::max<int64_t>(1, (g.colRows() + g.og()) *
                                                           g.colCols()),
                  1, g.n)),
        col(ctx, g.colRows() * imgs * g.colCols(), /*zeroed=*/false),
        planes(ctx, g.og() * imgs * g.colCols(), /*zeroed=*/false) {}

  /// Images per batch.
  int64_t size() const { return imgs; }
  /// Columns of the batch starting at image `first`.
  int64_t cols(int64_t first) const {
    return std::min(imgs, g.n - first) * g.colCols();
  }
  float *colMatrix() { return col.get(); }
  float *outputPlanes() { return planes.get(); }

  /// col[(ci * kh + i) * kw + j][b * oh * ow + y * ow + x] = image b + first
  /// of `x` at channel gi * cg + ci, row y*sh - ph + i*dh, column x*sw - pw
  /// + j*dw; zero outside.
  void im2col(const float *x, int64_t first, int64_t gi) {
    int64_t count = std::min(imgs, g.n - first), rows = g.colRows();
    int64_t p = g.colCols(), ld = count * p;
    float *out = col.get();
    parallelFor(count * rows, rowGrain(p), [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        int64_t b = item / rows, r = item % rows;
        int64_t ci = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
        const float *image =
            x + ((first + b) * g.c + gi * g.cg() + ci) * g.h * g.w;
        float *row = out + r * ld + b * p;
        int64_t shift = j * g.dw - g.pw, x0 = insideBegin(shift),
                x1 = insideEnd(shift, x0);
        if (rowsAreContiguous() && x0 < x1) {
          copyShiftedPlane(image, row, i * g.dh - g.ph, shift, x0, x1);
          continue;
        }
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.sh - g.ph + i * g.dh;
          float *dst = row + y * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, 0.0f);
            continue;
          }
          const float *src = image + iy * g.w;
          std::fill(dst, dst + x0, 0.0f);
          if (g.sw == 1)
            std::copy(src + x0 + shift, src + x1 + shift, dst + x0);
          else
            for (int64_t xo = x0; xo < x1; ++xo)
              dst[xo] = src[xo * g.sw + shift];
          std::fill(dst + x1, dst + g.ow, 0.0f);
        }
      }
    });
  }

  /// The adjoint of im2col: adds the column matrix into images first.. of
  /// `dx` (channel by channel, each in one fixed order).
  void col2im(float *dx, int64_t first, int64_t gi) {
    int64_t count = std::min(imgs, g.n - first), cg = g.cg();
    int64_t p = g.colCols(), ld = count * p;
    const float *in = col.get();
    parallelFor(
        count * cg, rowGrain(g.kh * g.kw * p), [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            int64_t b = item / cg, ci = item % cg;
            float *image = dx + ((first + b) * g.c + gi * cg + ci) * g.h * g.w;
            addColumns(in + ci * g.kh * g.kw * ld + b * p, ld, image);
          }
        });
  }

  /// Copies the batch's output planes of group gi into images first.. of
  /// the [N, O, OH, OW] tensor `y`.
  void storePlanes(float *y, int64_t first, int64_t gi) {
    forEachPlane(first, gi, [&](int64_t offset, float *slot, size_t bytes) {
      std::memcpy(y + offset, slot, bytes);
    });
  }

  /// Copies group gi of images first.. of the [N, O, OH, OW] tensor `y`
  /// into the batch's output planes.
  void loadPlanes(const float *y, int64_t first, int64_t gi) {
    forEachPlane(first, gi, [&](int64_t offset, float *slot, size_t bytes) {
      std::memcpy(slot, y + offset, bytes);
    });
  }

private:
  /// Output column x reads input column x * sw + shift (shift = j * dw -
  /// pw for kernel column j); those inside [0, w) are [insideBegin,
  /// insideEnd).
  int64_t insideBegin(int64_t shift) const {
    return std::min(g.ow, ceilDiv(std::max<int64_t>(0, -shift), g.sw));
  }
  int64_t insideEnd(int64_t shift, int64_t begin) const {
    return std::max(begin, std::min(g.ow, ceilDiv(g.w - shift, g.sw)));
  }

  /// Unit strides and an output as wide as the input (a "same" convolution):
  /// one kernel position's im2col row is then the input plane shifted as a
  /// whole, so consecutive output rows read consecutive input rows.
  bool rowsAreContiguous() const {
    return g.sh == 1 && g.sw == 1 && g.ow == g.w;
  }

  /// im2col's row for one kernel position when rowsAreContiguous(): output
  /// row y reads input row y + rowShift, column x reads x + shift, which is
  /// inside for x in [x0, x1). One copy moves every inside row (a column
  /// outside lands on a neighbouring row's element, which the edges then
  /// zero), instead of one short copy per row.
  void copyShiftedPlane(const float *image, float *dst, int64_t rowShift,
                        int64_t shift, int64_t x0, int64_t x1) const {
    int64_t y0 = std::clamp<int64_t>(-rowShift, 0, g.oh);
    int64_t y1 = std::clamp<int64_t>(g.h - rowShift, y0, g.oh);
    std::fill(dst, dst + y0 * g.ow, 0.0f);
    std::fill(dst + y1 * g.ow, dst + g.oh * g.ow, 0.0f);
    // dst[L] = image[L + offset] for L in [y0 * ow, y1 * ow), clipped to the
    // image; what the clipping leaves out are edge columns.
    int64_t offset = rowShift * g.w + shift;
    int64_t begin = std::max(y0 * g.ow, -offset);
    int64_t end = std::min(y1 * g.ow, g.h * g.w - offset);
    if (begin < end)
      std::memcpy(dst + begin, image + begin + offset,
                  static_cast<size_t>(end - begin) * sizeof(float));
    for (int64_t y = y0; y < y1; ++y) {
      float *line = dst + y * g.ow;
      std::fill(line, line + x0, 0.0f);
      std::fill(line + x1, line + g.ow, 0.0f);
    }
  }

  /// Calls fn(offset in the tensor, slot in the planes, bytes) for every
  /// plane of group gi of images first.. of the batch.
  template <typename Fn> void forEachPlane(int64_t first, int64_t gi, Fn &&fn) {
    int64_t count = std::min(imgs, g.n - first), og = g.og();
    int64_t p = g.colCols(), ld = count * p;
    float *m = planes.get();
    size_t bytes = static_cast<size_t>(p) * sizeof(float);
    parallelFor(count * og, rowGrain(p), [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        int64_t b = item / og, oc = item % og;
        fn(((first + b) * g.o + gi * og + oc) * p, m + oc * ld + b * p, bytes);
      }
    });
  }

  /// image[...] += rows (ci fixed) of the column matrix, row stride `ld`.
  void addColumns(const float *rows, int64_t ld, float *image) const {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const float *row = rows + (i * g.kw + j) * ld;
        int64_t shift = j * g.dw - g.pw, x0 = insideBegin(shift),
                x1 = insideEnd(shift, x0);
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.sh - g.ph + i * g.dh;
          if (iy < 0 || iy >= g.h)
            continue;
          float *dst = image + iy * g.w;
          const float *src = row + y * g.ow;
          for (int64_t x = x0; x < x1; ++x)
            dst[x * g.sw + shift] += src[x];
        }
      }
    }
  }

  const ConvShape &g;
  int64_t imgs;
  Workspace col, planes;
};

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
  if (oneDnnConvForward(ctx, g, x.get(), wt.get(), y.get())) {
    y.commit();
    return;
  }
  ConvBatches batches(ctx, g);
  for (int64_t b = 0; b < n; b += batches.size()) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      int64_t cols = batches.cols(b);
      batches.im2col(x.get(), b, gi);
      sgemm(false, false, g.og(), cols, g.colRows(), 1.0f,
            wt.get() + gi * g.og() * g.colRows(), g.colRows(),
            batches.colMatrix(), cols, 0.0f, batches.outputPlanes(), cols);
      batches.storePlanes(y.get(), b, gi);
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
  if (oneDnnConvGradInput(ctx, g, dy.get(), wt.get(), dx.get())) {
    dx.commit();
    return;
  }
  std::memset(dx.get(), 0, static_cast<size_t>(inSize) * sizeof(float));
  ConvBatches batches(ctx, g);
  for (int64_t b = 0; b < n; b += batches.size()) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      int64_t cols = batches.cols(b);
      batches.loadPlanes(dy.get(), b, gi);
      sgemm(true, false, g.colRows(), cols, g.og(), 1.0f,
            wt.get() + gi * g.og() * g.colRows(), g.colRows(),
            batches.outputPlanes(), cols, 0.0f, batches.colMatrix(), cols);
      batches.col2im(dx.get(), b, gi);
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
  if (oneDnnConvGradFilter(ctx, g, dy.get(), x.get(), dw.get())) {
    dw.commit();
    return;
  }
  std::memset(dw.get(), 0, static_cast<size_t>(filterSize) * sizeof(float));
  ConvBatches batches(ctx, g);
  for (int64_t b = 0; b < n; b += batches.size()) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      int64_t cols = batches.cols(b);
      batches.im2col(x.get(), b, gi);
      batches.loadPlanes(dy.get(), b, gi);
      sgemm(false, true, g.og(), g.colRows(), cols, 1.0f,
            batches.outputPlanes(), cols, batches.colMatrix(), cols, 1.0f,
            dw.get() + gi * g.og() * g.colRows(), g.colRows());
    }
  }
  dw.commit();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {

/// Calls fn(p, oy, ox) for every output position of each of `planes`
/// planes, the planes split over the host threads.
template <typename Fn>
void forEachPoolOutput(const PoolShape &g, int64_t planes, Fn &&fn) {
  parallelFor(planes, rowGrain(g.oh * g.ow * g.kh * g.kw),
              [&](int64_t begin, int64_t end) {
                for (int64_t p = begin; p < end; ++p)
                  for (int64_t oy = 0; oy < g.oh; ++oy)
                    for (int64_t ox = 0; ox < g.ow; ++ox)
                      fn(p, oy, ox);
              });
}

/// The offset of window (y, x)'s maximum within `plane` (PoolMath.h).
int64_t argmaxOfWindow(const PoolShape &g, const float *plane, int64_t y,
                       int64_t x) {
  return windowArgMax(g, y, x,
                      [plane](int64_t offset) { return plane[offset]; });
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
  forEachPoolOutput(g, planes, [&](int64_t p, int64_t oy, int64_t ox) {
    const float *plane = x.get() + p * h * w;
    y[(p * g.oh + oy) * g.ow + ox] = plane[argmaxOfWindow(g, plane, oy, ox)];
  });
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
  forEachPoolOutput(g, planes, [&](int64_t p, int64_t oy, int64_t ox) {
    const float *plane = x.get() + p * h * w;
    dx[p * h * w + argmaxOfWindow(g, plane, oy, ox)] +=
        dy[(p * g.oh + oy) * g.ow + ox];
  });
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
  forEachPoolOutput(g, planes, [&](int64_t p, int64_t oy, int64_t ox) {
    const float *plane = x.get() + p * h * w;
    float sum = 0.0f;
    forEachInWindow(g, oy, ox, [&](int64_t offset) { sum += plane[offset]; });
    y[(p * g.oh + oy) * g.ow + ox] = sum * inv;
  });
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
  forEachPoolOutput(g, planes, [&](int64_t p, int64_t oy, int64_t ox) {
    float *plane = dx.get() + p * h * w;
    float share = dy[(p * g.oh + oy) * g.ow + ox] * inv;
    forEachInWindow(g, oy, ox, [&](int64_t offset) { plane[offset] += share; });
  });
  dx.commit();
}
