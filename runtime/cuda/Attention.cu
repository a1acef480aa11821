//===- Attention.cu - fused attention, FlashAttention-2 style -------------===//
//
// memopt_attention and memopt_attention_grad without the [sq, sk] scores
// (FlashAttention, Dao et al. 2022; FlashAttention-2, Dao 2023). Plain f32
// FMA math (tensor cores are a later optimisation); O(sq * sk * (d + dv))
// work per problem and O(kTile * (d + dv)) shared memory per block.
//
// Every kernel runs 256 threads on one tile of 32 rows that it owns (query
// rows in the forward and in grad_q, key rows in grad_k/grad_v): 8 threads
// per owned row, each computing the scores of 4 consecutive columns of the
// 32-row tile it streams through shared memory, and holding every 8th of the
// row's output columns in registers. A row's reductions (max, sum, delta)
// are shuffles among its 8 lanes; the streamed tiles are read in order, so
// every sum has a fixed order and results are identical run to run, without
// atomics.
//
//  - forward, a block per (problem, query tile): K/V tiles stream through;
//    a running max m and sum l per row (f32), the accumulator rescaled by
//    exp(m_old - m_new) (online softmax); out = acc / l, lse = m + log(l).
//  - grad_q, a block per (problem, query tile): p = exp(s - lse) is
//    recomputed, dp = grad_out . v_j, ds = p * (dp' - delta) with delta =
//    grad_out . out (computed in the kernel), grad_q = scale * ds k.
//  - grad_k/grad_v, a block per (problem, key tile): the query tiles stream
//    through; grad_v = p'^T grad_out and grad_k = scale * ds^T q.
//
// Masked scores are mask_value, a constant: they take part in the softmax
// (and in grad_v) but pass no gradient to q or k, as masked_fill's gradient
// in the unfused op. Causal tiles wholly past the diagonal are skipped where
// they provably add nothing: always for grad_q, and for the forward and
// grad_v once exp(mask_value - m) (or - lse) is 0 in f32 for every row of
// the tile, which mask_value = -inf or a huge negative one gives (skipping
// then changes no bit). Dropout draws keep(e) of memopt_dropout (the Philox
// block of Device.cuh), so the fused op drops what softmax -> dropout would.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include <cmath>

using namespace memopt::cuda;

namespace {

/// Rows of every tile: the block's own and the streamed one.
constexpr int kTile = 32;
/// Threads per owned row.
constexpr int kGroup = 8;
constexpr int kThreads = kTile * kGroup;
/// Consecutive streamed columns per thread.
constexpr int kCols = kTile / kGroup;
/// Stride of the [kTile, kTile] score tiles in shared memory.
constexpr int kScoreLd = kTile + 1;
/// The largest d and dv: a thread keeps 1/kGroup of a row of each output in
/// registers.
constexpr int64_t kMaxHeadDim = 256;

/// The problem's geometry and masking, by value into every kernel.
struct AttentionShape {
  int64_t heads, sq, sk;
  int d, dv;
  /// The shared-memory stride of every [kTile, width] tile: the kernel's
  /// register width (64, 128 or 256, at least d and dv; columns beyond d or
  /// dv are zero) plus one, odd so that rows fall in distinct banks.
  int ld;
  float scale, maskValue;
  bool causal;
  const uint8_t *mask;
  int64_t maskStrides[4];
};

/// keep(e) of memopt_dropout for one call (runtime.h has the derivation).
struct DropoutDraw {
  /// ceil(p * 2^24); 0 keeps every element.
  uint32_t threshold;
  /// 1 / (1 - p) rounded to f32.
  float scale;
  uint32_t key0, key1;
  uint64_t step, offset;
};

enum ScoreKind { Live, Masked, Absent };

/// How score (i, j) of problem (b, h) enters the softmax: Absent past the
/// ends of the sequences, Masked when the causal or the I1 mask hides it.
__device__ __forceinline__ ScoreKind classify(const AttentionShape &s,
                                              int64_t b, int64_t h, int64_t i,
                                              int64_t j) {
  if (i >= s.sq || j >= s.sk)
    return Absent;
  if (s.causal && j > i)
    return Masked;
  if (s.mask && s.mask[b * s.maskStrides[0] + h * s.maskStrides[1] +
                       i * s.maskStrides[2] + j * s.maskStrides[3]])
    return Masked;
  return Live;
}

/// True when a masked score adds exactly nothing to a row whose maximum (or
/// lse) is `rowMax`: exp(mask_value - rowMax) is 0 in f32.
__device__ __forceinline__ bool maskAddsNothing(const AttentionShape &s,
                                                float rowMax) {
  return s.maskValue == -INFINITY || expf(s.maskValue - rowMax) == 0.0f;
}

__device__ __forceinline__ float scoreOf(const AttentionShape &s,
                                         ScoreKind kind, float dot) {
  return kind == Live     ? s.scale * dot
         : kind == Masked ? s.maskValue
                          : -INFINITY;
}

__device__ __forceinline__ void philoxBlock(const DropoutDraw &dr,
                                            uint64_t block, uint32_t bits[4]) {
  philox4x32_10(static_cast<uint32_t>(block),
                static_cast<uint32_t>(block >> 32),
                static_cast<uint32_t>(dr.step),
                static_cast<uint32_t>(dr.step >> 32), dr.key0, dr.key1, bits);
}

__device__ __forceinline__ uint32_t lane(const uint32_t bits[4], uint64_t e) {
  uint32_t k = static_cast<uint32_t>(e & 3);
  return k == 0 ? bits[0] : k == 1 ? bits[1] : k == 2 ? bits[2] : bits[3];
}

/// keep(first + u) for u < kCols: consecutive elements, at most two Philox
/// blocks.
__device__ __forceinline__ void keepRun(const DropoutDraw &dr, uint64_t first,
                                        bool keep[kCols]) {
  uint64_t block = first >> 2;
  uint32_t bits[4];
  philoxBlock(dr, block, bits);
#pragma unroll
  for (int u = 0; u < kCols; ++u) {
    uint64_t e = first + u;
    if ((e >> 2) != block) {
      block = e >> 2;
      philoxBlock(dr, block, bits);
    }
    keep[u] = (lane(bits, e) >> 8) >= dr.threshold;
  }
}

/// keep(e) of one element.
__device__ __forceinline__ bool keepOne(const DropoutDraw &dr, uint64_t e) {
  uint32_t bits[4];
  philoxBlock(dr, e >> 2, bits);
  return (lane(bits, e) >> 8) >= dr.threshold;
}

/// Max and sum over the kGroup lanes of a row (the same value, bit for bit,
/// in each: every step adds the same two values).
__device__ __forceinline__ float groupMax(float v) {
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float groupSum(float v) {
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Rows [first, first + kTile) of a [rows, cols] matrix into a [kTile, ld]
/// f32 tile; rows past the end and columns past `cols` are zero.
template <typename T>
__device__ __forceinline__ void loadTile(float *dst, int ld, const T *src,
                                         int64_t first, int64_t rows,
                                         int cols) {
  for (int e = threadIdx.x; e < kTile * ld; e += kThreads) {
    int r = e / ld, c = e - r * ld;
    int64_t row = first + r;
    dst[e] = row < rows && c < cols ? toF32(src[row * cols + c]) : 0.0f;
  }
}

/// dot[u] = a . b[u * ld] over n columns, u < kCols.
__device__ __forceinline__ void dots(const float *a, const float *b, int ld,
                                     int n, float dot[kCols]) {
#pragma unroll
  for (int u = 0; u < kCols; ++u)
    dot[u] = 0.0f;
  for (int c = 0; c < n; ++c) {
    float x = a[c];
#pragma unroll
    for (int u = 0; u < kCols; ++u)
      dot[u] = fmaf(x, b[u * ld + c], dot[u]);
  }
}

/// grad_out[i] . out[i] for the row of this thread's group (the 8 lanes'
/// partial sums in a fixed order): `gradOutRow` is the row in shared memory.
template <typename T>
__device__ __forceinline__ float rowDelta(const float *gradOutRow,
                                          const T *outRow, bool valid, int dv) {
  float delta = 0.0f;
  if (valid)
    for (int c = threadIdx.x % kGroup; c < dv; c += kGroup)
      delta = fmaf(gradOutRow[c], toF32(outRow[c]), delta);
  return groupSum(delta);
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Shared memory: Q, K, V tiles [kTile, ld] and the probabilities
/// [kTile, kScoreLd].
template <typename T, int kAcc>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(const T *q, const T *k, const T *v, T *out,
                           float *lse, AttentionShape s, DropoutDraw dr,
                           int64_t queryTiles) {
  extern __shared__ float smem[];
  float *qs = smem;
  float *ks = qs + kTile * s.ld;
  float *vs = ks + kTile * s.ld;
  float *ps = vs + kTile * s.ld;

  int64_t problem = blockIdx.x / queryTiles;
  // The last query tiles of a causal problem see the most keys: they start
  // first.
  int64_t i0 = (queryTiles - 1 - blockIdx.x % queryTiles) * kTile;
  int64_t b = problem / s.heads, h = problem % s.heads;
  int r = threadIdx.x / kGroup, t = threadIdx.x % kGroup;
  int64_t i = i0 + r;
  bool rowValid = i < s.sq;
  const T *qp = q + problem * s.sq * s.d;
  const T *kp = k + problem * s.sk * s.d;
  const T *vp = v + problem * s.sk * s.dv;

  int64_t iLast = (i0 + kTile < s.sq ? i0 + kTile : s.sq) - 1;
  if (s.sk > 0)
    loadTile(qs, s.ld, qp, i0, s.sq, s.d);

  float m = -INFINITY, l = 0.0f;
  float acc[kAcc];
#pragma unroll
  for (int kk = 0; kk < kAcc; ++kk)
    acc[kk] = 0.0f;
  uint64_t rowElement = dr.offset + (problem * s.sq + i) * s.sk;
  float *prow = ps + r * kScoreLd;

  for (int64_t j0 = 0; j0 < s.sk; j0 += kTile) {
    // Past the diagonal every score is mask_value: once it adds nothing to
    // any row, neither does any later tile.
    if (s.causal && j0 > iLast &&
        __syncthreads_and(!rowValid || maskAddsNothing(s, m)))
      break;
    __syncthreads();
    loadTile(ks, s.ld, kp, j0, s.sk, s.d);
    loadTile(vs, s.ld, vp, j0, s.sk, s.dv);
    __syncthreads();

    int64_t jFirst = j0 + t * kCols;
    float dot[kCols], score[kCols];
    dots(qs + r * s.ld, ks + t * kCols * s.ld, s.ld, s.d, dot);
    bool keep[kCols] = {true, true, true, true};
    if (dr.threshold && rowValid)
      keepRun(dr, rowElement + jFirst, keep);
    float tileMax = -INFINITY;
#pragma unroll
    for (int u = 0; u < kCols; ++u) {
      score[u] = scoreOf(s, classify(s, b, h, i, jFirst + u), dot[u]);
      tileMax = fmaxf(tileMax, score[u]);
    }
    float mNew = fmaxf(m, groupMax(tileMax));
    // Until a finite score appears, every p is 0 and nothing is rescaled.
    float alpha = mNew == -INFINITY ? 1.0f : expf(m - mNew);
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kCols; ++u) {
      float p = score[u] == -INFINITY ? 0.0f : expf(score[u] - mNew);
      sum += p;
      prow[t * kCols + u] = keep[u] ? p * dr.scale : 0.0f;
    }
    l = l * alpha + groupSum(sum);
    m = mNew;
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < kAcc; ++kk)
      acc[kk] *= alpha;
    for (int jj = 0; jj < kTile; ++jj) {
      float p = prow[jj];
      const float *vrow = vs + jj * s.ld + t;
#pragma unroll
      for (int kk = 0; kk < kAcc; ++kk)
        acc[kk] = fmaf(p, vrow[kk * kGroup], acc[kk]);
    }
  }

  if (!rowValid)
    return;
  // A row without a finite score has l = 0: a NaN output and lse -inf, as
  // softmax gives. Without keys the output is an empty sum.
  float inv = s.sk == 0 ? 0.0f : 1.0f / l;
  if (out) {
    T *orow = out + (problem * s.sq + i) * s.dv;
#pragma unroll
    for (int kk = 0; kk < kAcc; ++kk) {
      int c = t + kk * kGroup;
      if (c < s.dv)
        orow[c] = fromF32<T>(acc[kk] * inv);
    }
  }
  if (t == 0)
    lse[problem * s.sq + i] = m + logf(l);
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// The probability and the score gradient of one score, from its
/// recomputed value: p = exp(s - lse), p' = p dropped and scaled,
/// ds = p * (dp' - delta), 0 where the score is a constant (masked) or p
/// is 0 (nothing flows through a probability of 0, not even a NaN delta of
/// a row without any finite score).
struct ScoreGrad {
  float dropped, ds;
};

__device__ __forceinline__ ScoreGrad scoreGrad(const AttentionShape &s,
                                               const DropoutDraw &dr,
                                               ScoreKind kind, float dot,
                                               float dpDot, bool keep,
                                               float rowLse, float delta) {
  float score = scoreOf(s, kind, dot);
  float p = score == -INFINITY ? 0.0f : expf(score - rowLse);
  float dp = keep ? dpDot * dr.scale : 0.0f;
  ScoreGrad g;
  g.dropped = keep ? p * dr.scale : 0.0f;
  g.ds = kind == Live && p != 0.0f ? p * (dp - delta) : 0.0f;
  return g;
}

/// grad_q of one query tile. Shared memory: Q, grad_out, K, V tiles
/// [kTile, ld] and ds [kTile, kScoreLd].
template <typename T, int kAcc>
__global__ void __launch_bounds__(kThreads)
    attentionGradQueryKernel(const T *q, const T *k, const T *v, const T *out,
                             const float *lse, const T *gradOut, T *gradQ,
                             AttentionShape s, DropoutDraw dr,
                             int64_t queryTiles) {
  extern __shared__ float smem[];
  float *qs = smem;
  float *gos = qs + kTile * s.ld;
  float *ks = gos + kTile * s.ld;
  float *vs = ks + kTile * s.ld;
  float *dss = vs + kTile * s.ld;

  int64_t problem = blockIdx.x / queryTiles;
  int64_t i0 = (queryTiles - 1 - blockIdx.x % queryTiles) * kTile;
  int64_t b = problem / s.heads, h = problem % s.heads;
  int r = threadIdx.x / kGroup, t = threadIdx.x % kGroup;
  int64_t i = i0 + r;
  bool rowValid = i < s.sq;
  int64_t rowIndex = problem * s.sq + i;
  const T *kp = k + problem * s.sk * s.d;
  const T *vp = v + problem * s.sk * s.dv;

  loadTile(qs, s.ld, q + problem * s.sq * s.d, i0, s.sq, s.d);
  loadTile(gos, s.ld, gradOut + problem * s.sq * s.dv, i0, s.sq, s.dv);
  __syncthreads();
  float delta = rowDelta(gos + r * s.ld, out + rowIndex * s.dv, rowValid, s.dv);
  float rowLse = rowValid ? lse[rowIndex] : 0.0f;

  float acc[kAcc];
#pragma unroll
  for (int kk = 0; kk < kAcc; ++kk)
    acc[kk] = 0.0f;
  // Masked scores pass no gradient to q: keys past the diagonal add nothing.
  int64_t iLast = (i0 + kTile < s.sq ? i0 + kTile : s.sq) - 1;
  int64_t keyEnd = s.causal && iLast + 1 < s.sk ? iLast + 1 : s.sk;
  uint64_t rowElement = dr.offset + rowIndex * s.sk;
  float *dsrow = dss + r * kScoreLd;

  for (int64_t j0 = 0; j0 < keyEnd; j0 += kTile) {
    __syncthreads();
    loadTile(ks, s.ld, kp, j0, s.sk, s.d);
    loadTile(vs, s.ld, vp, j0, s.sk, s.dv);
    __syncthreads();

    int64_t jFirst = j0 + t * kCols;
    float dot[kCols], dpDot[kCols];
    dots(qs + r * s.ld, ks + t * kCols * s.ld, s.ld, s.d, dot);
    dots(gos + r * s.ld, vs + t * kCols * s.ld, s.ld, s.dv, dpDot);
    bool keep[kCols] = {true, true, true, true};
    if (dr.threshold && rowValid)
      keepRun(dr, rowElement + jFirst, keep);
#pragma unroll
    for (int u = 0; u < kCols; ++u)
      dsrow[t * kCols + u] = scoreGrad(s, dr, classify(s, b, h, i, jFirst + u),
                                       dot[u], dpDot[u], keep[u], rowLse, delta)
                                 .ds;
    __syncwarp();
    for (int jj = 0; jj < kTile; ++jj) {
      float ds = dsrow[jj];
      const float *krow = ks + jj * s.ld + t;
#pragma unroll
      for (int kk = 0; kk < kAcc; ++kk)
        acc[kk] = fmaf(ds, krow[kk * kGroup], acc[kk]);
    }
  }

  if (!rowValid)
    return;
  T *grow = gradQ + rowIndex * s.d;
#pragma unroll
  for (int kk = 0; kk < kAcc; ++kk) {
    int c = t + kk * kGroup;
    if (c < s.d)
      grow[c] = fromF32<T>(s.scale * acc[kk]);
  }
}

/// grad_k and grad_v of one key tile. Shared memory: K, V, Q, grad_out
/// tiles [kTile, ld], p' and ds transposed [kTile, kScoreLd] each, and the
/// lse and delta of the streamed query rows.
template <typename T, int kAcc>
__global__ void __launch_bounds__(kThreads)
    attentionGradKeyKernel(const T *q, const T *k, const T *v, const T *out,
                           const float *lse, const T *gradOut, T *gradK,
                           T *gradV, AttentionShape s, DropoutDraw dr,
                           int64_t keyTiles) {
  extern __shared__ float smem[];
  float *ks = smem;
  float *vs = ks + kTile * s.ld;
  float *qs = vs + kTile * s.ld;
  float *gos = qs + kTile * s.ld;
  float *pts = gos + kTile * s.ld;
  float *dsts = pts + kTile * kScoreLd;
  float *lses = dsts + kTile * kScoreLd;
  float *deltas = lses + kTile;

  int64_t problem = blockIdx.x / keyTiles;
  int64_t j0 = (blockIdx.x % keyTiles) * kTile;
  int64_t b = problem / s.heads, h = problem % s.heads;
  int r = threadIdx.x / kGroup, t = threadIdx.x % kGroup;
  int64_t j = j0 + r;
  const T *qp = q + problem * s.sq * s.d;
  const T *gop = gradOut + problem * s.sq * s.dv;
  const T *op = out + problem * s.sq * s.dv;
  const float *lp = lse + problem * s.sq;

  loadTile(ks, s.ld, k + problem * s.sk * s.d, j0, s.sk, s.d);
  loadTile(vs, s.ld, v + problem * s.sk * s.dv, j0, s.sk, s.dv);

  float accK[kAcc], accV[kAcc];
#pragma unroll
  for (int kk = 0; kk < kAcc; ++kk)
    accK[kk] = accV[kk] = 0.0f;
  float *ptrow = pts + r * kScoreLd;
  float *dstrow = dsts + r * kScoreLd;

  for (int64_t i0 = 0; i0 < s.sq; i0 += kTile) {
    // Query tiles wholly before the diagonal see these keys only as
    // mask_value, which passes nothing to grad_k; skip them when it adds
    // nothing to grad_v either.
    int64_t iLast = (i0 + kTile < s.sq ? i0 + kTile : s.sq) - 1;
    if (s.causal && iLast < j0) {
      int64_t ir = i0 + r;
      if (__syncthreads_and(ir >= s.sq || maskAddsNothing(s, lp[ir])))
        continue;
    }
    __syncthreads();
    loadTile(qs, s.ld, qp, i0, s.sq, s.d);
    loadTile(gos, s.ld, gop, i0, s.sq, s.dv);
    __syncthreads();
    // The lse and delta of query row i0 + r, as the grad_q kernel computes
    // them.
    int64_t ir = i0 + r;
    float delta = rowDelta(gos + r * s.ld, op + ir * s.dv, ir < s.sq, s.dv);
    if (t == 0) {
      deltas[r] = delta;
      lses[r] = ir < s.sq ? lp[ir] : 0.0f;
    }
    __syncthreads();

    int iFirst = t * kCols;
    float dot[kCols], dpDot[kCols];
    dots(ks + r * s.ld, qs + iFirst * s.ld, s.ld, s.d, dot);
    dots(vs + r * s.ld, gos + iFirst * s.ld, s.ld, s.dv, dpDot);
#pragma unroll
    for (int u = 0; u < kCols; ++u) {
      int64_t iu = i0 + iFirst + u;
      ScoreKind kind = classify(s, b, h, iu, j);
      bool keep = true;
      if (dr.threshold && kind != Absent)
        keep = keepOne(dr, dr.offset + (problem * s.sq + iu) * s.sk + j);
      ScoreGrad g = scoreGrad(s, dr, kind, dot[u], dpDot[u], keep,
                              lses[iFirst + u], deltas[iFirst + u]);
      ptrow[iFirst + u] = kind == Absent ? 0.0f : g.dropped;
      dstrow[iFirst + u] = g.ds;
    }
    __syncwarp();
    for (int ii = 0; ii < kTile; ++ii) {
      float p = ptrow[ii], ds = dstrow[ii];
      const float *gorow = gos + ii * s.ld + t;
      const float *qrow = qs + ii * s.ld + t;
#pragma unroll
      for (int kk = 0; kk < kAcc; ++kk) {
        accV[kk] = fmaf(p, gorow[kk * kGroup], accV[kk]);
        accK[kk] = fmaf(ds, qrow[kk * kGroup], accK[kk]);
      }
    }
  }

  if (j >= s.sk)
    return;
  T *gkrow = gradK + (problem * s.sk + j) * s.d;
  T *gvrow = gradV + (problem * s.sk + j) * s.dv;
#pragma unroll
  for (int kk = 0; kk < kAcc; ++kk) {
    int c = t + kk * kGroup;
    if (c < s.d)
      gkrow[c] = fromF32<T>(s.scale * accK[kk]);
    if (c < s.dv)
      gvrow[c] = fromF32<T>(accV[kk]);
  }
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

/// The register width of a kernel: 64, 128 or 256 columns.
int widthFor(int64_t d, int64_t dv) {
  int64_t widest = d > dv ? d : dv;
  return widest <= 64 ? 64 : widest <= 128 ? 128 : 256;
}

/// Shape, limits and dropout of a call; false after recording an error.
bool prepare(memopt_context *ctx, const char *entry, const uint8_t *mask,
             const int64_t *maskStrides, int64_t batch, int64_t heads,
             int64_t sq, int64_t sk, int64_t d, int64_t dv, double scale,
             int causal, double maskValue, double dropoutP, uint64_t seed,
             uint64_t stream, uint64_t offset, AttentionShape &s,
             DropoutDraw &dr) {
  if (d > kMaxHeadDim || dv > kMaxHeadDim) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "head dimensions d = %lld and dv = %lld exceed the CUDA "
             "kernels' limit of %lld",
             static_cast<long long>(d), static_cast<long long>(dv),
             static_cast<long long>(kMaxHeadDim));
    return false;
  }
  int64_t tiles = ((sq > sk ? sq : sk) + kTile - 1) / kTile;
  if (batch * heads > INT32_MAX / (tiles > 0 ? tiles : 1)) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "%lld problems of %lld tiles exceed the CUDA grid",
             static_cast<long long>(batch * heads),
             static_cast<long long>(tiles));
    return false;
  }
  s.heads = heads;
  s.sq = sq;
  s.sk = sk;
  s.d = static_cast<int>(d);
  s.dv = static_cast<int>(dv);
  s.ld = widthFor(d, dv) + 1;
  s.scale = static_cast<float>(scale);
  s.maskValue = static_cast<float>(maskValue);
  s.causal = causal != 0;
  s.mask = mask;
  for (int a = 0; a < 4; ++a)
    s.maskStrides[a] = mask ? maskStrides[a] : 0;
  uint64_t mixed = seed ^ (stream * 0x9E3779B97F4A7C15ull);
  dr.threshold = static_cast<uint32_t>(std::ceil(dropoutP * 16777216.0));
  dr.scale = static_cast<float>(1.0 / (1.0 - dropoutP));
  dr.key0 = static_cast<uint32_t>(mixed);
  dr.key1 = static_cast<uint32_t>(mixed >> 32);
  dr.step = ctx->step;
  dr.offset = offset;
  return true;
}

/// Lets `kernel` use `bytes` of dynamic shared memory (above the default
/// 48 KiB), or records why the device cannot.
template <typename Kernel>
bool allowSharedMemory(memopt_context *ctx, const char *entry, Kernel kernel,
                       size_t bytes, const AttentionShape &s) {
  if (bytes <= 48 * 1024)
    return true;
  int limit = 0;
  if (!MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaDeviceGetAttribute(
              &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device)))
    return false;
  if (bytes > static_cast<size_t>(limit)) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "head dimensions d = %d and dv = %d need %zu bytes of shared "
             "memory per block, the device allows %d",
             s.d, s.dv, bytes, limit);
    return false;
  }
  return MEMOPT_CUDA_CHECK(
      ctx, entry,
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)));
}

/// Calls body(T*, std::integral_constant<int, kAcc>) for the storage type
/// of `dtype` and the register width of `s`.
template <typename F>
void dispatchAttention(memopt_dtype dtype, const AttentionShape &s, F &&body) {
  dispatchFloat(dtype, [&](auto tag) {
    switch (s.ld - 1) {
    case 64:
      body(tag, std::integral_constant<int, 64 / kGroup>());
      break;
    case 128:
      body(tag, std::integral_constant<int, 128 / kGroup>());
      break;
    default:
      body(tag, std::integral_constant<int, 256 / kGroup>());
      break;
    }
  });
}

size_t tileBytes(const AttentionShape &s, int tiles, int scoreTiles,
                 int vectors) {
  return sizeof(float) * (static_cast<size_t>(tiles) * kTile * s.ld +
                          static_cast<size_t>(scoreTiles) * kTile * kScoreLd +
                          static_cast<size_t>(vectors) * kTile);
}

} // namespace

void memopt_attention(memopt_context *ctx, memopt_dtype dtype, const void *q,
                      const void *k, const void *v, const uint8_t *mask,
                      const int64_t *mask_strides, void *out, float *lse,
                      int64_t batch, int64_t heads, int64_t sq, int64_t sk,
                      int64_t d, int64_t dv, double scale, int causal,
                      double mask_value, double dropout_p, uint64_t seed,
                      uint64_t stream, uint64_t offset) {
  const char *entry = "memopt_attention";
  AttentionShape s;
  DropoutDraw dr;
  if (!checkAttention(ctx, entry, dtype, mask, mask_strides, lse, batch, heads,
                      sq, sk, d, dv, scale, dropout_p, {q, k, v, out}) ||
      !prepare(ctx, entry, mask, mask_strides, batch, heads, sq, sk, d, dv,
               scale, causal, mask_value, dropout_p, seed, stream, offset, s,
               dr) ||
      batch * heads * sq == 0)
    return;
  int64_t queryTiles = (sq + kTile - 1) / kTile;
  unsigned blocks = static_cast<unsigned>(batch * heads * queryTiles);
  size_t bytes = tileBytes(s, 3, 1, 0);
  dispatchAttention(dtype, s, [&](auto tag, auto acc) {
    using T = MEMOPT_STORAGE(tag);
    auto kernel = attentionForwardKernel<T, decltype(acc)::value>;
    if (!allowSharedMemory(ctx, entry, kernel, bytes, s))
      return;
    kernel<<<blocks, kThreads, bytes, ctx->stream>>>(
        static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), static_cast<T *>(out), lse, s, dr,
        queryTiles);
    checkLaunch(ctx, entry, "attentionForwardKernel");
  });
}

void memopt_attention_grad(memopt_context *ctx, memopt_dtype dtype,
                           const void *q, const void *k, const void *v,
                           const uint8_t *mask, const int64_t *mask_strides,
                           const void *out, const float *lse,
                           const void *grad_out, void *grad_q, void *grad_k,
                           void *grad_v, int64_t batch, int64_t heads,
                           int64_t sq, int64_t sk, int64_t d, int64_t dv,
                           double scale, int causal, double mask_value,
                           double dropout_p, uint64_t seed, uint64_t stream,
                           uint64_t offset) {
  const char *entry = "memopt_attention_grad";
  AttentionShape s;
  DropoutDraw dr;
  if (!checkAttention(ctx, entry, dtype, mask, mask_strides, lse, batch, heads,
                      sq, sk, d, dv, scale, dropout_p,
                      {q, k, v, out, grad_out, grad_q, grad_k, grad_v}) ||
      !prepare(ctx, entry, mask, mask_strides, batch, heads, sq, sk, d, dv,
               scale, causal, mask_value, dropout_p, seed, stream, offset, s,
               dr))
    return;
  int64_t problems = batch * heads;
  size_t size = memopt_dtype_size(dtype);
  // Without keys grad_q is zero; without queries grad_k and grad_v are.
  if (problems * sq * sk == 0) {
    if (grad_q && problems * sq * d > 0)
      MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaMemsetAsync(grad_q, 0, problems * sq * d * size, ctx->stream));
    if (grad_k && problems * sk * d > 0)
      MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaMemsetAsync(grad_k, 0, problems * sk * d * size, ctx->stream));
    if (grad_v && problems * sk * dv > 0)
      MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaMemsetAsync(grad_v, 0, problems * sk * dv * size, ctx->stream));
    return;
  }
  int64_t queryTiles = (sq + kTile - 1) / kTile;
  int64_t keyTiles = (sk + kTile - 1) / kTile;
  size_t queryBytes = tileBytes(s, 4, 1, 0);
  size_t keyBytes = tileBytes(s, 4, 2, 2);
  dispatchAttention(dtype, s, [&](auto tag, auto acc) {
    using T = MEMOPT_STORAGE(tag);
    constexpr int kAcc = decltype(acc)::value;
    const T *qt = static_cast<const T *>(q), *kt = static_cast<const T *>(k),
            *vt = static_cast<const T *>(v), *ot = static_cast<const T *>(out),
            *got = static_cast<const T *>(grad_out);
    auto queryKernel = attentionGradQueryKernel<T, kAcc>;
    auto keyKernel = attentionGradKeyKernel<T, kAcc>;
    if (!allowSharedMemory(ctx, entry, queryKernel, queryBytes, s) ||
        !allowSharedMemory(ctx, entry, keyKernel, keyBytes, s))
      return;
    queryKernel<<<static_cast<unsigned>(problems * queryTiles), kThreads,
                  queryBytes, ctx->stream>>>(
        qt, kt, vt, ot, lse, got, static_cast<T *>(grad_q), s, dr, queryTiles);
    if (!checkLaunch(ctx, entry, "attentionGradQueryKernel"))
      return;
    keyKernel<<<static_cast<unsigned>(problems * keyTiles), kThreads, keyBytes,
                ctx->stream>>>(qt, kt, vt, ot, lse, got,
                               static_cast<T *>(grad_k),
                               static_cast<T *>(grad_v), s, dr, keyTiles);
    checkLaunch(ctx, entry, "attentionGradKeyKernel");
  });
}
