//===- OneDnnConv.h - host convolutions through oneDNN ----------*- C++ -*-===//
//
// The host runtime's convolutions run on oneDNN's JIT kernels (the library
// PyTorch's CPU convolutions use) where oneDNN has one for the shape, and on
// memopt's own im2col + GEMM (Conv.cpp) otherwise. Each entry asks for its
// direction; a false return means "not through oneDNN" (nothing written, no
// error), and the caller computes it itself.
//
// oneDNN runs on the calling thread (OneDnnConv.cpp says why), so results
// are the same bits on any number of host threads
// (test/Integration/host-threads.py compares whole training runs on 1, 2
// and 3 threads byte for byte).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOST_ONEDNNCONV_H
#define MEMOPT_RUNTIME_HOST_ONEDNNCONV_H

#include "HostRuntime.h"

namespace memopt {
namespace host {

/// y = conv(x, w), all f32 in memopt's layouts (NCHW, OIHW).
bool oneDnnConvForward(memopt_context *ctx, const ConvShape &g, const float *x,
                       const float *w, float *y);

/// dx = the input gradient of conv from dy and w.
bool oneDnnConvGradInput(memopt_context *ctx, const ConvShape &g,
                         const float *dy, const float *w, float *dx);

/// dw = the filter gradient of conv from dy and x.
bool oneDnnConvGradFilter(memopt_context *ctx, const ConvShape &g,
                          const float *dy, const float *x, float *dw);

/// How many convolution shapes and directions of `ctx` run through oneDNN
/// (for the tests).
int64_t oneDnnConvPlanCount(const memopt_context *ctx);

/// How many convolution shapes and directions of `ctx` ran through im2col +
/// GEMM: those oneDNN has no JIT kernel for, or all with oneDNN off.
int64_t im2colConvShapeCount(const memopt_context *ctx);

} // namespace host
} // namespace memopt

#endif // MEMOPT_RUNTIME_HOST_ONEDNNCONV_H
