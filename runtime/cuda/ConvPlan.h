//===- ConvPlan.h - convolutions as cuDNN problems --------------*- C++ -*-===//
//
// memopt's conv2d and its two gradients run as cuDNN's legacy convolutions
// (Conv.cu): NCHW tensors, an [o, c / groups, kh, kw] filter, cross-correlation
// with the group count set on the convolution descriptor. This header is the
// part of that mapping that needs no device: the output extents, the 4-d dims
// and strides cuDNN's descriptors take (ints, so tensors of 2^31 elements or
// more are refused here rather than overflowing there), the key under which
// a context caches a plan, and the rule that picks the algorithm.
//
// The algorithm rule: cuDNN's heuristic ranks the algorithms for a problem
// (fastest expected first) without running any; a plan takes the first that
// succeeded, is deterministic (training must be bit-reproducible run to run,
// and the atomics of some backward algorithms are not) and needs no more
// workspace than the library slice. Nothing is timed, so the choice depends
// on the shape, the library and the device only, and is the same every run.
// An algorithm the heuristic ranked can still fail when it runs (cuDNN's
// NOT_SUPPORTED or EXECUTION_FAILED for that problem on that device): the
// plan then moves to the next algorithm that qualifies and runs again
// (runWithFallbacks), and only when none is left is the convolution an
// error, naming the shape and each algorithm's outcome.
//
// Plain C++ (no CUDA headers), so that the unit tests check it without a
// device.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_CONVPLAN_H
#define MEMOPT_RUNTIME_CUDA_CONVPLAN_H

#include "memopt/runtime.h"
#include "memopt/runtime/Validate.h"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <tuple>

namespace memopt {
namespace cuda {

using runtime::convOutputExtent;

/// The three convolution calls of cuDNN, one per entry.
enum class ConvDirection {
  /// memopt_conv2d: cudnnConvolutionForward.
  Forward,
  /// memopt_conv2d_grad_input: cudnnConvolutionBackwardData.
  BackwardData,
  /// memopt_conv2d_grad_filter: cudnnConvolutionBackwardFilter.
  BackwardFilter,
};

/// What identifies a convolution's plan: the entry, the dtype and every
/// argument of the geometry. The output extents follow from the others but
/// are kept, so that the key lists every extent of the descriptors.
struct ConvKey {
  ConvDirection direction = ConvDirection::Forward;
  memopt_dtype dtype = MEMOPT_F32;
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0;
  int64_t sh = 0, sw = 0, ph = 0, pw = 0, dh = 0, dw = 0, groups = 0;
  int64_t oh = 0, ow = 0;

  auto tie() const {
    return std::tie(direction, dtype, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh,
                    dw, groups, oh, ow);
  }
  bool operator<(const ConvKey &other) const { return tie() < other.tie(); }
  bool operator==(const ConvKey &other) const { return tie() == other.tie(); }
};

/// The key of `direction`'s plan for `dtype` and geometry `s` (its oh, ow
/// are recomputed from the arguments, not read).
inline ConvKey makeConvKey(ConvDirection direction, memopt_dtype dtype,
                           const runtime::ConvShape &s) {
  ConvKey key;
  key.direction = direction;
  key.dtype = dtype;
  key.n = s.n;
  key.c = s.c;
  key.h = s.h;
  key.w = s.w;
  key.o = s.o;
  key.kh = s.kh;
  key.kw = s.kw;
  key.sh = s.sh;
  key.sw = s.sw;
  key.ph = s.ph;
  key.pw = s.pw;
  key.dh = s.dh;
  key.dw = s.dw;
  key.groups = s.groups;
  key.oh = convOutputExtent(s.h, s.kh, s.sh, s.ph, s.dh);
  key.ow = convOutputExtent(s.w, s.kw, s.sw, s.pw, s.dw);
  return key;
}

/// A 4-d tensor as cudnnSetTensor4dDescriptorEx takes it: dims [n, c, h, w]
/// and the stride of each, in elements.
struct ConvTensor4d {
  int dims[4] = {0, 0, 0, 0};
  int strides[4] = {0, 0, 0, 0};
};

/// The arguments of a convolution's cuDNN descriptors.
struct ConvDescriptors {
  /// The input [n, c, h, w] and the output [n, o, oh, ow], NCHW-contiguous.
  ConvTensor4d x, y;
  /// [o, c / groups, kh, kw] (cudnnSetFilter4dDescriptor, NCHW).
  int filter[4] = {0, 0, 0, 0};
  /// (h, w) pairs of cudnnSetConvolution2dDescriptor.
  int pad[2] = {0, 0};
  int stride[2] = {0, 0};
  int dilation[2] = {0, 0};
  int groups = 1;
};

namespace detail {
/// Whether every value and the product of all of them fit in an int.
inline bool fitsInt(std::initializer_list<int64_t> extents) {
  int64_t product = 1;
  for (int64_t extent : extents) {
    if (extent < 0 || extent > INT_MAX)
      return false;
    product *= extent;
    if (product > INT_MAX)
      return false;
  }
  return true;
}

/// An NCHW-contiguous tensor of extents that fit (fitsInt).
inline ConvTensor4d contiguous4d(int64_t n, int64_t c, int64_t h, int64_t w) {
  ConvTensor4d t;
  int64_t dims[4] = {n, c, h, w};
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    t.dims[i] = static_cast<int>(dims[i]);
    t.strides[i] = static_cast<int>(stride);
    stride *= dims[i];
  }
  return t;
}
} // namespace detail

/// The descriptor arguments of geometry `s` (a geometry checkConv accepted;
/// its oh, ow are recomputed from the arguments, not read). False when an
/// extent or a tensor's element count does not fit in the int that cuDNN's
/// legacy descriptors take.
inline bool describeConv(const runtime::ConvShape &s, ConvDescriptors &d) {
  int64_t oh = convOutputExtent(s.h, s.kh, s.sh, s.ph, s.dh);
  int64_t ow = convOutputExtent(s.w, s.kw, s.sw, s.pw, s.dw);
  if (oh < 0 || ow < 0 || s.groups <= 0 ||
      !detail::fitsInt({s.n, s.c, s.h, s.w}) ||
      !detail::fitsInt({s.n, s.o, oh, ow}) ||
      !detail::fitsInt({s.o, s.c / s.groups, s.kh, s.kw}) ||
      !detail::fitsInt({s.sh, s.sw, s.ph, s.pw, s.dh, s.dw}))
    return false;
  d.x = detail::contiguous4d(s.n, s.c, s.h, s.w);
  d.y = detail::contiguous4d(s.n, s.o, oh, ow);
  d.filter[0] = static_cast<int>(s.o);
  d.filter[1] = static_cast<int>(s.c / s.groups);
  d.filter[2] = static_cast<int>(s.kh);
  d.filter[3] = static_cast<int>(s.kw);
  d.pad[0] = static_cast<int>(s.ph);
  d.pad[1] = static_cast<int>(s.pw);
  d.stride[0] = static_cast<int>(s.sh);
  d.stride[1] = static_cast<int>(s.sw);
  d.dilation[0] = static_cast<int>(s.dh);
  d.dilation[1] = static_cast<int>(s.dw);
  d.groups = static_cast<int>(s.groups);
  return true;
}

/// One result of cuDNN's algorithm heuristic, as the choice sees it.
struct ConvAlgoCandidate {
  /// The result's status was CUDNN_STATUS_SUCCESS.
  bool succeeded = false;
  /// Its determinism was CUDNN_DETERMINISTIC.
  bool deterministic = false;
  /// Its math type is one the dtype allows (no TF32 for f32 unless
  /// MEMOPT_CUDA_ALLOW_TF32=1).
  bool mathAllowed = false;
  uint64_t workspaceBytes = 0;
};

/// The index of the first of `count` candidates from `from` on that
/// succeeded, is deterministic (unless `anyDeterminism`: the way out for a
/// shape with no deterministic algorithm, MEMOPT_CUDA_ALLOW_NONDETERMINISTIC=1),
/// has an allowed math type and needs at most `workspaceLimit` bytes; -1
/// when none does.
inline int pickConvAlgorithm(const ConvAlgoCandidate *candidates, int count,
                             uint64_t workspaceLimit, int from = 0,
                             bool anyDeterminism = false) {
  for (int i = from < 0 ? 0 : from; i < count; ++i) {
    const ConvAlgoCandidate &c = candidates[i];
    if (c.succeeded && (c.deterministic || anyDeterminism) && c.mathAllowed &&
        c.workspaceBytes <= workspaceLimit)
      return i;
  }
  return -1;
}

/// What running one algorithm came to.
enum class ConvRunOutcome {
  Done,
  /// The algorithm cannot run this problem here: try the next one.
  Unsupported,
  /// Any other failure, recorded by the runner: stop.
  Failed,
};

/// Runs the plan's algorithm `current` with `run(index)`; while it comes
/// back Unsupported, moves to the next qualifying algorithm (`next(index)`:
/// the next index that qualifies after it, -1 when none) and runs that.
/// Returns the index that ran (Done), or -1: `Failed`, or every qualifying
/// algorithm was unsupported (`current` is then the last one tried).
template <typename Next, typename Run>
int runWithFallbacks(int &current, Next &&next, Run &&run) {
  while (current >= 0) {
    ConvRunOutcome outcome = run(current);
    if (outcome == ConvRunOutcome::Done)
      return current;
    if (outcome == ConvRunOutcome::Failed)
      return -1;
    int following = next(current);
    if (following < 0)
      return -1;
    current = following;
  }
  return -1;
}

/// The output dims [n, o, oh, ow] that cuDNN computes from descriptors set
/// as a plan of `s` sets them (host calls: no device, no handle), for the
/// tests to hold against convOutputExtent; false when describeConv refuses
/// `s` or after recording a cuDNN error in `ctx`, naming `entry`.
bool cudnnConvOutputDims(memopt_context *ctx, const char *entry,
                         memopt_dtype dtype, const runtime::ConvShape &s,
                         int dims[4]);

/// How many convolution plans `ctx` holds (0 before its first convolution),
/// for the tests: a convolution of a shape seen before makes none.
size_t convPlanCount(const memopt_context *ctx);

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_CONVPLAN_H
