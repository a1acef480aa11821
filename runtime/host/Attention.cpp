//===- Attention.cpp - host fused attention -------------------------------===//
//
// memopt_attention and memopt_attention_grad after FlashAttention (Dao et
// al., NeurIPS 2022) and FlashAttention-2 (Dao, 2023): the [sq, sk] scores of
// a problem never exist whole, only [kBlockRows, kBlockCols] tiles of them.
//
// Forward, per problem and block of kBlockRows query rows: visit the key
// rows in blocks of kBlockCols; one f32 GEMM gives the tile's scores, the
// causal and I1 masks replace masked scores by mask_value, and an online
// softmax keeps each row's running maximum m and sum l, rescaling the f32
// output accumulator when m grows. Dropout multiplies the tile's
// probabilities by memopt_dropout's mask (Random.h) before the second GEMM
// adds them times V. At the end out = acc / l, lse = m + log(l).
//
// Backward, per problem: key blocks outer, query blocks inner. Each tile
// recomputes P = exp(S - lse) and dP = dO V^T, and with delta = rowsum(dO *
// O) gives dS = P * (dP' - delta) (dP' the dropout-scaled dP; dS is 0 at a
// masked score, a constant, and in a row whose every score is -inf); dV and dK of
// the key block accumulate in f32 tiles and dQ in an f32 [sq, d]
// accumulator. Every sum runs in one fixed order, so the gradients are
// deterministic without atomics, and each is rounded once.
//
// Both are O(sq sk (d + dv)) flops per problem with O((kBlockRows +
// kBlockCols) (d + dv)) workspace, plus the f32 staging of one problem's
// 16-bit operands (and dQ's accumulator in the backward). Key blocks that
// causality masks whole are skipped when they provably add nothing: when
// exp(mask_value - m) is 0 in f32 for every row of the query block (always
// for mask_value -inf), processing them would leave m, l and the
// accumulator bit for bit unchanged; a finite mask_value close to the scores
// makes them count, as in the unfused softmax.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostRuntime.h"
#include "Random.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

using namespace memopt::host;

namespace {

/// Query rows and key rows of one tile.
constexpr int64_t kBlockRows = 64;
constexpr int64_t kBlockCols = 64;

/// The attributes of one memopt_attention(_grad) call.
struct AttentionParams {
  AttentionParams(memopt_context *ctx, int64_t heads, int64_t sq, int64_t sk,
                  int64_t d, int64_t dv, double scale, int causal,
                  double maskValue, const uint8_t *mask,
                  const int64_t *maskStrides, double dropoutP, uint64_t seed,
                  uint64_t stream, uint64_t offset)
      : heads(heads), sq(sq), sk(sk), d(d), dv(dv),
        scale(static_cast<float>(scale)), causal(causal != 0),
        maskValue(static_cast<float>(maskValue)), mask(mask),
        maskStrides(maskStrides), dropout(dropoutP > 0.0),
        dropoutMask(dropoutP, seed, stream, ctx->step), offset(offset) {}

  int64_t heads, sq, sk, d, dv;
  float scale;
  bool causal;
  float maskValue;
  const uint8_t *mask;
  const int64_t *maskStrides;
  bool dropout;
  DropoutMask dropoutMask;
  uint64_t offset;
};

/// The rows [first, first + count) of one tile side.
struct Block {
  int64_t first, count;
  int64_t last() const { return first + count - 1; }
};

/// The f32 view of rows [0, n) of problem `problem` of a [.., n] float tensor
/// of `dtype`: the tensor itself when it is f32, else a copy in `buffer`.
const float *problemF32(memopt_dtype dtype, const void *tensor, int64_t problem,
                        int64_t n, float *buffer) {
  if (dtype == MEMOPT_F32)
    return static_cast<const float *>(tensor) + problem * n;
  loadF32(dtype,
          static_cast<const char *>(tensor) + problem * n * dtypeSize(dtype),
          buffer, n);
  return buffer;
}

/// Rounds `n` f32 values into elements [first, first + n) of a `dtype`
/// tensor.
void storeAt(memopt_dtype dtype, const float *src, void *tensor, int64_t first,
             int64_t n) {
  storeF32(dtype, src, static_cast<char *>(tensor) + first * dtypeSize(dtype),
           n);
}

/// Fills elements [first, first + n) of a `dtype` tensor with `value`; a null
/// tensor (which the checks allow for an empty problem) is left alone.
void fillAt(memopt_dtype dtype, void *tensor, int64_t first, int64_t n,
            float value) {
  if (!tensor || n <= 0)
    return;
  std::vector<float> values(static_cast<size_t>(n), value);
  storeAt(dtype, values.data(), tensor, first, n);
}

/// True when the key block `keys` is masked for every row of `queries` by
/// causality alone and adds exactly nothing to a row whose running maximum
/// (or lse) is `rowMax`: exp(mask_value - rowMax) is 0 in f32.
bool skipsCausalBlock(const AttentionParams &a, Block queries, Block keys,
                      const float *rowMax) {
  if (!a.causal || keys.first <= queries.last())
    return false;
  for (int64_t r = 0; r < queries.count; ++r)
    if (!(std::exp(a.maskValue - rowMax[r]) == 0.0f))
      return false;
  return true;
}

/// s [queries.count, keys.count] = the masked scores of problem `problem`;
/// `q` and `k` are the problem's f32 rows.
void scoreTile(const AttentionParams &a, int64_t problem, const float *q,
               const float *k, Block queries, Block keys, float *s,
               uint8_t *masked = nullptr) {
  sgemm(false, true, queries.count, keys.count, a.d, a.scale,
        q + queries.first * a.d, a.d, k + keys.first * a.d, a.d, 0.0f, s,
        keys.count);
  int64_t b = problem / a.heads, h = problem % a.heads;
  if (masked)
    std::fill(masked, masked + queries.count * keys.count, 0);
  for (int64_t r = 0; r < queries.count; ++r) {
    int64_t i = queries.first + r;
    float *row = s + r * keys.count;
    uint8_t *flags = masked ? masked + r * keys.count : nullptr;
    if (a.mask) {
      const uint8_t *maskRow = a.mask + b * a.maskStrides[0] +
                               h * a.maskStrides[1] + i * a.maskStrides[2];
      for (int64_t c = 0; c < keys.count; ++c)
        if (maskRow[(keys.first + c) * a.maskStrides[3]]) {
          row[c] = a.maskValue;
          if (flags)
            flags[c] = 1;
        }
    }
    if (a.causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - keys.first); c < keys.count;
           ++c) {
        row[c] = a.maskValue;
        if (flags)
          flags[c] = 1;
      }
  }
}

/// keep [queries.count, keys.count]: the dropout mask of the tile, element
/// e = offset + (problem * sq + i) * sk + j as memopt_dropout numbers it.
void keepTile(const AttentionParams &a, int64_t problem, Block queries,
              Block keys, uint8_t *keep) {
  for (int64_t r = 0; r < queries.count; ++r) {
    int64_t i = queries.first + r;
    uint64_t first = a.offset + static_cast<uint64_t>(
                                    (problem * a.sq + i) * a.sk + keys.first);
    a.dropoutMask.draw(first, keys.count, keep + r * keys.count);
  }
}

/// The f32 tiles of the forward.
struct ForwardTiles {
  float *scores; // [kBlockRows, kBlockCols], then the probabilities
  float *rowMax, *rowSum;
  uint8_t *keep;
};

/// One problem's query block: acc [queries.count, dv] receives its output,
/// lse its log-sum-exps.
void forwardBlock(const AttentionParams &a, int64_t problem, const float *q,
                  const float *k, const float *v, Block queries,
                  ForwardTiles &t, float *acc, float *lse) {
  std::fill(t.rowMax, t.rowMax + queries.count, -INFINITY);
  std::fill(t.rowSum, t.rowSum + queries.count, 0.0f);
  std::fill(acc, acc + queries.count * a.dv, 0.0f);
  for (int64_t j0 = 0; j0 < a.sk; j0 += kBlockCols) {
    Block keys{j0, std::min(kBlockCols, a.sk - j0)};
    // Later key blocks are masked by causality too.
    if (skipsCausalBlock(a, queries, keys, t.rowMax))
      break;
    scoreTile(a, problem, q, k, queries, keys, t.scores);
    if (a.dropout)
      keepTile(a, problem, queries, keys, t.keep);
    for (int64_t r = 0; r < queries.count; ++r) {
      float *row = t.scores + r * keys.count;
      float tileMax = -INFINITY;
      for (int64_t c = 0; c < keys.count; ++c)
        tileMax = std::fmax(tileMax, row[c]);
      float newMax = std::fmax(t.rowMax[r], tileMax);
      if (newMax == -INFINITY) {
        // Every score so far is -inf: nothing to add yet.
        std::fill(row, row + keys.count, 0.0f);
        continue;
      }
      float sum = 0.0f;
      for (int64_t c = 0; c < keys.count; ++c) {
        float p = std::exp(row[c] - newMax);
        sum += p;
        row[c] = p;
      }
      if (a.dropout) {
        const uint8_t *keep = t.keep + r * keys.count;
        for (int64_t c = 0; c < keys.count; ++c)
          row[c] = keep[c] ? row[c] * a.dropoutMask.scale() : 0.0f;
      }
      float alpha = std::exp(t.rowMax[r] - newMax);
      t.rowSum[r] = t.rowSum[r] * alpha + sum;
      t.rowMax[r] = newMax;
      if (alpha != 1.0f)
        for (int64_t c = 0; c < a.dv; ++c)
          acc[r * a.dv + c] *= alpha;
    }
    sgemm(false, false, queries.count, a.dv, keys.count, 1.0f, t.scores,
          keys.count, v + keys.first * a.dv, a.dv, 1.0f, acc, a.dv);
  }
  for (int64_t r = 0; r < queries.count; ++r) {
    float *row = acc + r * a.dv;
    if (t.rowMax[r] == -INFINITY) {
      // Every score is -inf: softmax is 0 / 0.
      lse[r] = -INFINITY;
      std::fill(row, row + a.dv, std::numeric_limits<float>::quiet_NaN());
    } else {
      float inv = 1.0f / t.rowSum[r];
      for (int64_t c = 0; c < a.dv; ++c)
        row[c] *= inv;
      lse[r] = t.rowMax[r] + std::log(t.rowSum[r]);
    }
  }
}

/// The f32 tiles and accumulators of the backward.
struct BackwardTiles {
  float *probs; // [kBlockRows, kBlockCols]: P, then P'
  float *grads; // [kBlockRows, kBlockCols]: dP, then dS
  float *gradK; // [kBlockCols, d]
  float *gradV; // [kBlockCols, dv]
  float *gradQ; // [sq, d]
  float *delta; // [sq]
  uint8_t *keep;
  uint8_t *masked; // [kBlockRows, kBlockCols]: the masked scores
};

/// The f32 rows of one problem's operands.
struct ProblemRows {
  const float *q, *k, *v, *out, *gradOut;
  const float *lse;
};

/// Adds the tile (queries, keys) to dK and dV of the key block and to dQ.
void backwardTile(const AttentionParams &a, int64_t problem,
                  const ProblemRows &x, Block queries, Block keys,
                  BackwardTiles &t) {
  int64_t br = queries.count, bc = keys.count;
  const float *gradOut = x.gradOut + queries.first * a.dv;
  scoreTile(a, problem, x.q, x.k, queries, keys, t.probs, t.masked);
  sgemm(false, true, br, bc, a.dv, 1.0f, gradOut, a.dv, x.v + keys.first * a.dv,
        a.dv, 0.0f, t.grads, bc);
  if (a.dropout)
    keepTile(a, problem, queries, keys, t.keep);
  float keepScale = a.dropoutMask.scale();
  for (int64_t r = 0; r < br; ++r) {
    int64_t i = queries.first + r;
    float lse = x.lse[i], delta = t.delta[i];
    float *p = t.probs + r * bc, *g = t.grads + r * bc;
    const uint8_t *keep = a.dropout ? t.keep + r * bc : nullptr;
    const uint8_t *masked = t.masked + r * bc;
    for (int64_t c = 0; c < bc; ++c) {
      // A row whose every score is -inf (NaN output) contributes nothing.
      float prob = lse == -INFINITY ? 0.0f : std::exp(p[c] - lse);
      float gradProb = g[c];
      if (keep) {
        p[c] = keep[c] ? prob * keepScale : 0.0f;
        gradProb = keep[c] ? gradProb * keepScale : 0.0f;
      } else {
        p[c] = prob;
      }
      // A masked score is a constant: it passes no gradient to q and k.
      g[c] = masked[c] ? 0.0f : prob * (gradProb - delta);
    }
  }
  // dV += P'^T dO, dK += scale dS^T Q, dQ += scale dS K.
  sgemm(true, false, bc, a.dv, br, 1.0f, t.probs, bc, gradOut, a.dv, 1.0f,
        t.gradV, a.dv);
  sgemm(true, false, bc, a.d, br, a.scale, t.grads, bc,
        x.q + queries.first * a.d, a.d, 1.0f, t.gradK, a.d);
  sgemm(false, false, br, a.d, bc, a.scale, t.grads, bc, x.k + keys.first * a.d,
        a.d, 1.0f, t.gradQ + queries.first * a.d, a.d);
}

/// The host-only limit of sgemm's int extents.
bool checkBlasRange(memopt_context *ctx, const char *entry, int64_t d,
                    int64_t dv) {
  if (d <= INT_MAX && dv <= INT_MAX)
    return true;
  setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
           "extents exceed the BLAS int range");
  return false;
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
  if (!checkAttention(ctx, entry, dtype, mask, mask_strides, lse, batch, heads,
                      sq, sk, d, dv, scale, dropout_p, {q, k, v, out}) ||
      !checkBlasRange(ctx, entry, d, dv))
    return;
  AttentionParams a(ctx, heads, sq, sk, d, dv, scale, causal, mask_value, mask,
                    mask_strides, dropout_p, seed, stream, offset);
  int64_t problems = batch * heads;
  if (problems == 0 || sq == 0)
    return;
  if (sk == 0) {
    fillAt(dtype, out, 0, problems * sq * dv, 0.0f);
    std::fill(lse, lse + problems * sq, -INFINITY);
    return;
  }
  bool staged = dtype != MEMOPT_F32;
  Workspace qs(ctx, staged ? sq * d : 0), ks(ctx, staged ? sk * d : 0),
      vs(ctx, staged ? sk * dv : 0);
  Workspace tiles(ctx, kBlockRows * (kBlockCols + dv + 2));
  std::vector<uint8_t> keep(
      static_cast<size_t>(a.dropout ? kBlockRows * kBlockCols : 0));
  std::vector<uint8_t> masked(static_cast<size_t>(kBlockRows * kBlockCols));
  ForwardTiles t{tiles.get(), tiles.get() + kBlockRows * kBlockCols,
                 tiles.get() + kBlockRows * (kBlockCols + 1), keep.data()};
  float *acc = tiles.get() + kBlockRows * (kBlockCols + 2);
  for (int64_t problem = 0; problem < problems; ++problem) {
    const float *qf = problemF32(dtype, q, problem, sq * d, qs.get());
    const float *kf = problemF32(dtype, k, problem, sk * d, ks.get());
    const float *vf = problemF32(dtype, v, problem, sk * dv, vs.get());
    for (int64_t i0 = 0; i0 < sq; i0 += kBlockRows) {
      Block queries{i0, std::min(kBlockRows, sq - i0)};
      int64_t row = problem * sq + i0;
      forwardBlock(a, problem, qf, kf, vf, queries, t, acc, lse + row);
      storeAt(dtype, acc, out, row * dv, queries.count * dv);
    }
  }
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
  if (!checkAttention(ctx, entry, dtype, mask, mask_strides, lse, batch, heads,
                      sq, sk, d, dv, scale, dropout_p,
                      {q, k, v, out, grad_out, grad_q, grad_k, grad_v}) ||
      !checkBlasRange(ctx, entry, d, dv))
    return;
  AttentionParams a(ctx, heads, sq, sk, d, dv, scale, causal, mask_value, mask,
                    mask_strides, dropout_p, seed, stream, offset);
  int64_t problems = batch * heads;
  if (sq == 0 || sk == 0) {
    // No scores: every gradient is an empty sum.
    fillAt(dtype, grad_q, 0, problems * sq * d, 0.0f);
    fillAt(dtype, grad_k, 0, problems * sk * d, 0.0f);
    fillAt(dtype, grad_v, 0, problems * sk * dv, 0.0f);
    return;
  }
  bool staged = dtype != MEMOPT_F32;
  Workspace qs(ctx, staged ? sq * d : 0), ks(ctx, staged ? sk * d : 0),
      vs(ctx, staged ? sk * dv : 0), outs(ctx, staged ? sq * dv : 0),
      gradOuts(ctx, staged ? sq * dv : 0);
  Workspace tiles(ctx, 2 * kBlockRows * kBlockCols + kBlockCols * (d + dv) +
                           sq * (d + 1));
  std::vector<uint8_t> keep(
      static_cast<size_t>(a.dropout ? kBlockRows * kBlockCols : 0));
  std::vector<uint8_t> masked(static_cast<size_t>(kBlockRows * kBlockCols));
  BackwardTiles t;
  t.probs = tiles.get();
  t.grads = t.probs + kBlockRows * kBlockCols;
  t.gradK = t.grads + kBlockRows * kBlockCols;
  t.gradV = t.gradK + kBlockCols * d;
  t.gradQ = t.gradV + kBlockCols * dv;
  t.delta = t.gradQ + sq * d;
  t.keep = keep.data();
  t.masked = masked.data();
  for (int64_t problem = 0; problem < problems; ++problem) {
    ProblemRows x{problemF32(dtype, q, problem, sq * d, qs.get()),
                  problemF32(dtype, k, problem, sk * d, ks.get()),
                  problemF32(dtype, v, problem, sk * dv, vs.get()),
                  problemF32(dtype, out, problem, sq * dv, outs.get()),
                  problemF32(dtype, grad_out, problem, sq * dv, gradOuts.get()),
                  lse + problem * sq};
    for (int64_t i = 0; i < sq; ++i) {
      float sum = 0.0f;
      for (int64_t c = 0; c < dv; ++c)
        sum += x.gradOut[i * dv + c] * x.out[i * dv + c];
      t.delta[i] = sum;
    }
    std::fill(t.gradQ, t.gradQ + sq * d, 0.0f);
    for (int64_t j0 = 0; j0 < sk; j0 += kBlockCols) {
      Block keys{j0, std::min(kBlockCols, sk - j0)};
      std::fill(t.gradK, t.gradK + keys.count * d, 0.0f);
      std::fill(t.gradV, t.gradV + keys.count * dv, 0.0f);
      for (int64_t i0 = 0; i0 < sq; i0 += kBlockRows) {
        Block queries{i0, std::min(kBlockRows, sq - i0)};
        // Every P = exp(mask_value - lse) of such a tile is 0 (lse >= the
        // forward's m, so this covers every tile the forward skipped).
        if (skipsCausalBlock(a, queries, keys, x.lse + i0))
          continue;
        backwardTile(a, problem, x, queries, keys, t);
      }
      storeAt(dtype, t.gradK, grad_k, (problem * sk + j0) * d, keys.count * d);
      storeAt(dtype, t.gradV, grad_v, (problem * sk + j0) * dv,
              keys.count * dv);
    }
    storeAt(dtype, t.gradQ, grad_q, problem * sq * d, sq * d);
  }
}
