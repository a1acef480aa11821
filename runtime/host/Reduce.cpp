//===- Reduce.cpp - host reductions ---------------------------------------===//
//
// memopt_reduce over the [outer, reduced, inner] view of a tensor: sums and
// means accumulate in double in a fixed order per output (laneSum), so
// results do not depend on threading; max propagates NaN as torch.amax
// does. Operands are staged in f32 and the result rounded once into the
// output dtype.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include <cmath>
#include <limits>

using namespace memopt::host;

void memopt_reduce(memopt_context *ctx, memopt_reduce_op op,
                   memopt_dtype in_dtype, const void *input,
                   memopt_dtype out_dtype, void *out, int64_t outer,
                   int64_t reduced, int64_t inner) {
  const char *entry = "memopt_reduce";
  if (!checkReduce(ctx, entry, op, in_dtype, input, out_dtype, out, outer,
                   reduced, inner))
    return;
  int64_t total = outer * reduced * inner;
  F32Input x(ctx, in_dtype, input, total);
  F32Output y(ctx, out_dtype, out, outer * inner);
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
                  double sum = laneSum(reduced, [&](int64_t r) {
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
