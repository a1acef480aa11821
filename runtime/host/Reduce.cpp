//===- Reduce.cpp - host reductions ---------------------------------------===//
//
// memopt_reduce over the [outer, reduced, inner] view of a tensor: sums and
// means (and sums of squares) accumulate in double in a fixed order per
// output (laneSum), so results do not depend on threading; max propagates NaN as torch.amax
// does. Operands are staged in f32 and the result rounded once into the
// output dtype.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace memopt::host;

namespace {

/// Columns summed together by columnSums.
constexpr int64_t kColumnBlock = 16;

/// out[c] = sum over r of x[r * stride + c] for c in [0, cols) (cols <=
/// kColumnBlock), in double, each column in laneSum's order (row r into lane
/// r mod 8, lanes added pairwise): the same bits as laneSum down each
/// column, but reading the rows contiguously, so that a reduction over a
/// leading axis streams its input once instead of once per column.
template <bool Squares>
void columnSums(const float *x, int64_t rows, int64_t stride, int64_t cols,
                double *out) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes][kColumnBlock] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * stride;
    double *lane = lanes[r % kLanes];
    for (int64_t c = 0; c < cols; ++c)
      lane[c] += Squares ? double(row[c]) * double(row[c]) : double(row[c]);
  }
  for (int64_t c = 0; c < cols; ++c)
    out[c] = ((lanes[0][c] + lanes[1][c]) + (lanes[2][c] + lanes[3][c])) +
             ((lanes[4][c] + lanes[5][c]) + (lanes[6][c] + lanes[7][c]));
}

} // namespace

static void reduceEntry(memopt_context *ctx, const char *entry,
                        memopt_reduce_op op, memopt_dtype in_dtype,
                        const void *input, memopt_dtype out_dtype, void *out,
                        int64_t outer, int64_t reduced, int64_t inner) {
  if (!checkReduce(ctx, entry, op, in_dtype, input, out_dtype, out, outer,
                   reduced, inner))
    return;
  int64_t total = outer * reduced * inner;
  F32Input x(ctx, in_dtype, input, total);
  F32Output y(ctx, out_dtype, out, outer * inner);
  if (op != MEMOPT_REDUCE_MAX && inner > 1) {
    // Sums over a strided axis: blocks of adjacent columns at once, each
    // column in laneSum's order.
    int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
    parallelFor(outer * blocks, rowGrain(reduced * kColumnBlock),
                [&](int64_t begin, int64_t end) {
                  double sums[kColumnBlock];
                  for (int64_t k = begin; k < end; ++k) {
                    int64_t o = k / blocks, i0 = k % blocks * kColumnBlock;
                    int64_t cols = std::min(kColumnBlock, inner - i0);
                    const float *slab = x.get() + o * reduced * inner + i0;
                    if (op == MEMOPT_REDUCE_SUM_SQUARES)
                      columnSums<true>(slab, reduced, inner, cols, sums);
                    else
                      columnSums<false>(slab, reduced, inner, cols, sums);
                    for (int64_t c = 0; c < cols; ++c) {
                      double sum = sums[c];
                      if (op == MEMOPT_REDUCE_MEAN)
                        sum = reduced
                                  ? sum / static_cast<double>(reduced)
                                  : std::numeric_limits<double>::quiet_NaN();
                      y[o * inner + i0 + c] = static_cast<float>(sum);
                    }
                  }
                });
    y.commit();
    return;
  }
  // One output per (o, i), each summed in order by one thread.
  parallelFor(outer * inner, rowGrain(reduced),
              [&](int64_t begin, int64_t end) {
                for (int64_t k = begin; k < end; ++k) {
                  int64_t o = k / inner, i = k % inner;
                  const float *row = x.get() + o * reduced * inner + i;
                  if (op == MEMOPT_REDUCE_MAX) {
                    float best = row[0];
                    for (int64_t r = 1; r < reduced; ++r) {
                      float v = row[r * inner];
                      if (std::isnan(v) || v > best)
                        best = v;
                      if (std::isnan(best))
                        break;
                    }
                    y[o * inner + i] = best;
                    continue;
                  }
                  double sum =
                      op == MEMOPT_REDUCE_SUM_SQUARES
                          ? laneSum(reduced,
                                    [&](int64_t r) {
                                      double v = row[r * inner];
                                      return v * v;
                                    })
                          : laneSum(reduced, [&](int64_t r) {
                              return double(row[r * inner]);
                            });
                  if (op == MEMOPT_REDUCE_MEAN)
                    sum = reduced ? sum / static_cast<double>(reduced)
                                  : std::numeric_limits<double>::quiet_NaN();
                  y[o * inner + i] = static_cast<float>(sum);
                }
              });
  y.commit();
}

void memopt_reduce(memopt_context *ctx, memopt_reduce_op op,
                   memopt_dtype in_dtype, const void *input,
                   memopt_dtype out_dtype, void *out, int64_t outer,
                   int64_t reduced, int64_t inner) {
  reduceEntry(ctx, "memopt_reduce", op, in_dtype, input, out_dtype, out, outer,
              reduced, inner);
}

/// Host memory is the host runtime's own: offload's twin is the entry.
void memopt_host_reduce(memopt_context *ctx, memopt_reduce_op op,
                        memopt_dtype in_dtype, const void *input,
                        memopt_dtype out_dtype, void *out, int64_t outer,
                        int64_t reduced, int64_t inner) {
  reduceEntry(ctx, "memopt_host_reduce", op, in_dtype, input, out_dtype, out,
              outer, reduced, inner);
}
