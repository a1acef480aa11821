//===- Reduce.cu - reductions ---------------------------------------------===//
//
// memopt_reduce over the [outer, reduced, inner] view of a tensor: a block
// per row when the reduced elements are contiguous (inner = 1), 32 x 8
// threads per 32 columns when they are strided. Both accumulate in f32 in an
// order fixed by the launch shape, so results are identical run to run.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace memopt::cuda;

namespace {

/// Sums (op 0/1), maxes (op 2) or sums the squares (op 3) of column `i` of the [reduced, inner] slab of
/// each outer index: 32 columns per block, 8 row-threads, fixed order.
template <typename In, typename Out>
__global__ void reduceColumnsKernel(int op, const In *x, Out *y, int64_t outer,
                                    int64_t reduced, int64_t inner) {
  __shared__ float partial[kColRows][kColTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t col = blockIdx.x * int64_t(kColTile) + tx;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = op == MEMOPT_REDUCE_MAX ? -INFINITY : 0.0f;
    if (col < inner) {
      const In *base = x + o * reduced * inner + col;
      for (int64_t r = ty; r < reduced; r += kColRows) {
        float v = toF32(base[r * inner]);
        if (op == MEMOPT_REDUCE_SUM_SQUARES)
          v *= v;
        if (op == MEMOPT_REDUCE_MAX)
          acc = (isnan(acc) || isnan(v)) ? NAN : fmaxf(acc, v);
        else
          acc += v;
      }
    }
    partial[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && col < inner) {
      float total = partial[0][tx];
      for (int r = 1; r < kColRows; ++r) {
        float v = partial[r][tx];
        if (op == MEMOPT_REDUCE_MAX)
          total = (isnan(total) || isnan(v)) ? NAN : fmaxf(total, v);
        else
          total += v;
      }
      if (op == MEMOPT_REDUCE_MEAN)
        total = reduced ? total / static_cast<float>(reduced) : NAN;
      y[o * inner + col] = fromF32<Out>(total);
    }
    __syncthreads();
  }
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kRowBlock)
    reduceRowsKernel(int op, const In *x, Out *y, int64_t outer,
                     int64_t reduced) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const In *row = x + o * reduced;
    float acc = op == MEMOPT_REDUCE_MAX ? -INFINITY : 0.0f;
    for (int64_t r = threadIdx.x; r < reduced; r += blockDim.x) {
      float v = toF32(row[r]);
      if (op == MEMOPT_REDUCE_SUM_SQUARES)
        v *= v;
      if (op == MEMOPT_REDUCE_MAX)
        acc = (isnan(acc) || isnan(v)) ? NAN : fmaxf(acc, v);
      else
        acc += v;
    }
    float total = op == MEMOPT_REDUCE_MAX ? blockMax<kRowBlock>(acc, shared)
                                          : blockSum<kRowBlock>(acc, shared);
    if (op == MEMOPT_REDUCE_MEAN)
      total = reduced ? total / static_cast<float>(reduced) : NAN;
    if (threadIdx.x == 0)
      y[o] = fromF32<Out>(total);
  }
}

} // namespace

void memopt_reduce(memopt_context *ctx, memopt_reduce_op op,
                   memopt_dtype in_dtype, const void *input,
                   memopt_dtype out_dtype, void *out, int64_t outer,
                   int64_t reduced, int64_t inner) {
  const char *entry = "memopt_reduce";
  if (!checkReduce(ctx, entry, op, in_dtype, input, out_dtype, out, outer,
                   reduced, inner) ||
      outer * inner == 0)
    return;
  dispatchFloat(in_dtype, [&](auto inTag) {
    using In = MEMOPT_STORAGE(inTag);
    dispatchFloat(out_dtype, [&](auto outTag) {
      using Out = MEMOPT_STORAGE(outTag);
      if (inner == 1) {
        reduceRowsKernel<In, Out>
            <<<rowGrid(outer), kRowBlock, 0, ctx->stream>>>(
                op, static_cast<const In *>(input), static_cast<Out *>(out),
                outer, reduced);
      } else {
        dim3 grid(static_cast<unsigned>((inner + kColTile - 1) / kColTile),
                  static_cast<unsigned>(outer < 65535 ? outer : 65535));
        reduceColumnsKernel<In, Out>
            <<<grid, dim3(kColTile, kColRows), 0, ctx->stream>>>(
                op, static_cast<const In *>(input), static_cast<Out *>(out),
                outer, reduced, inner);
      }
    });
  });
  checkLaunch(ctx, entry,
              inner == 1 ? "reduceRowsKernel" : "reduceColumnsKernel");
}
