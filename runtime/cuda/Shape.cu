//===- Shape.cu - broadcast, transpose, slice, concat, embeddings ----------===//
//
// Shape entries move elements of 1, 2, 4 or 8 bytes through one strided-copy
// kernel: each output element's coordinates map to an input offset (0 stride
// for broadcast dimensions). Embedding gradients are deterministic: each
// thread owns a column and adds the rows in index order, as the host does.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include <vector>

using namespace memopt::cuda;

namespace {

constexpr int kMaxRank = 8;

/// Output element i -> input offset base + sum(coord_d * stride_d).
struct StridedMap {
  int rank;
  int64_t shape[kMaxRank];
  int64_t stride[kMaxRank];
  int64_t base;
};

__device__ __forceinline__ int64_t mapOffset(const StridedMap &map, int64_t i) {
  int64_t offset = map.base;
  for (int d = map.rank - 1; d >= 0; --d) {
    int64_t extent = map.shape[d];
    offset += (i % extent) * map.stride[d];
    i /= extent;
  }
  return offset;
}

/// out[i] = in[map(i)] (gather), or out[map(i)] = in[i] (scatter).
template <typename T>
__global__ void stridedCopyKernel(const T *in, T *out, int64_t n,
                                  StridedMap map, bool scatter) {
  GRID_STRIDE(i, n) {
    if (scatter)
      out[mapOffset(map, i)] = in[i];
    else
      out[i] = in[mapOffset(map, i)];
  }
}

/// Records an error and returns false if StridedMap cannot hold `rank`.
bool checkRank(memopt_context *ctx, const char *entry, int64_t rank) {
  return rank <= kMaxRank ||
         invalid(ctx, entry,
                 "invalid rank %lld (the CUDA runtime supports up to %d)",
                 static_cast<long long>(rank), kMaxRank);
}

/// Copies through `view` (a checked one, of rank at most kMaxRank): out[i] =
/// in[view(i)], or out[view(i)] = in[i] with `scatter`.
void launchStridedCopy(memopt_context *ctx, const char *entry, size_t size,
                       const void *in, void *out, const StridedView &view,
                       bool scatter) {
  int64_t n = view.size();
  if (n == 0)
    return;
  StridedMap map{};
  map.rank = static_cast<int>(view.shape.size());
  map.base = view.base;
  for (int d = 0; d < map.rank; ++d) {
    map.shape[d] = view.shape[d];
    map.stride[d] = view.step[d];
  }
  dispatchSize(size, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    stridedCopyKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(in), static_cast<T *>(out), n, map, scatter);
  });
  checkLaunch(ctx, entry, "stridedCopyKernel");
}

} // namespace

void memopt_broadcast(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t in_rank,
                      const int64_t *in_shape, const int64_t *dims, void *out,
                      int64_t out_rank, const int64_t *out_shape) {
  const char *entry = "memopt_broadcast";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkRank(ctx, entry, in_rank) ||
      !checkRank(ctx, entry, out_rank) ||
      !checkBroadcast(ctx, entry, in_rank, in_shape, dims, out_rank, out_shape))
    return;
  StridedView view =
      broadcastView(in_rank, in_shape, dims, out_rank, out_shape);
  if (checkPointers(ctx, entry, view.size(), {input, out}))
    launchStridedCopy(ctx, entry, size, input, out, view, false);
}

void memopt_transpose(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t rank, const int64_t *in_shape,
                      const int64_t *perm, void *out) {
  const char *entry = "memopt_transpose";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkRank(ctx, entry, rank) ||
      !checkTranspose(ctx, entry, rank, in_shape, perm))
    return;
  StridedView view = transposeView(rank, in_shape, perm);
  if (checkPointers(ctx, entry, view.size(), {input, out}))
    launchStridedCopy(ctx, entry, size, input, out, view, false);
}

void memopt_slice(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  int64_t rank, const int64_t *in_shape, const int64_t *starts,
                  const int64_t *limits, const int64_t *strides, void *out) {
  const char *entry = "memopt_slice";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkRank(ctx, entry, rank) ||
      !checkSlice(ctx, entry, rank, in_shape, starts, limits, strides))
    return;
  StridedView view = sliceView(rank, in_shape, starts, limits, strides);
  if (checkPointers(ctx, entry, view.size(), {input, out}))
    launchStridedCopy(ctx, entry, size, input, out, view, false);
}

void memopt_slice_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *grad, int64_t rank, const int64_t *in_shape,
                       const int64_t *starts, const int64_t *limits,
                       const int64_t *strides, void *out) {
  const char *entry = "memopt_slice_grad";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkRank(ctx, entry, rank) ||
      !checkSlice(ctx, entry, rank, in_shape, starts, limits, strides))
    return;
  StridedView view = sliceView(rank, in_shape, starts, limits, strides);
  int64_t total = numElements(rank, in_shape);
  if (!checkPointers(ctx, entry, total, {out}) ||
      !checkPointers(ctx, entry, view.size(), {grad}) || isEmpty({total}))
    return;
  if (!MEMOPT_CUDA_CHECK(ctx, entry,
                         cudaMemsetAsync(out, 0, total * size, ctx->stream)))
    return;
  launchStridedCopy(ctx, entry, size, grad, out, view, true);
}

namespace {

/// Copies input [outer, size, inner] into columns [offset, offset + size)
/// of the [outer, total, inner] output.
template <typename T>
__global__ void concatKernel(const T *in, T *out, int64_t outer, int64_t size,
                             int64_t inner, int64_t total, int64_t offset) {
  int64_t n = outer * size * inner;
  GRID_STRIDE(i, n) {
    int64_t k = i % inner;
    int64_t r = (i / inner) % size;
    int64_t o = i / (inner * size);
    out[(o * total + offset + r) * inner + k] = in[i];
  }
}

} // namespace

void memopt_concat(memopt_context *ctx, memopt_dtype dtype, int64_t num_inputs,
                   const void *const *inputs, const int64_t *sizes, void *out,
                   int64_t outer, int64_t inner) {
  const char *entry = "memopt_concat";
  size_t size = checkElementSize(ctx, entry, dtype);
  int64_t total = 0;
  if (!size || !checkConcat(ctx, entry, num_inputs, inputs, sizes, out, outer,
                            inner, total))
    return;
  int64_t offset = 0;
  for (int64_t j = 0; j < num_inputs; ++j) {
    int64_t n = outer * sizes[j] * inner;
    if (n > 0) {
      dispatchSize(size, [&](auto tag) {
        using T = MEMOPT_STORAGE(tag);
        concatKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
            static_cast<const T *>(inputs[j]), static_cast<T *>(out), outer,
            sizes[j], inner, total, offset);
      });
      if (!checkLaunch(ctx, entry, "concatKernel"))
        return;
    }
    offset += sizes[j];
  }
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

namespace {

template <typename T>
__global__ void embeddingKernel(const T *weight, bool is64, const void *indices,
                                T *out, int64_t numIndices, int64_t numRows,
                                int64_t dim, memopt_device_error *error) {
  int64_t n = numIndices * dim;
  GRID_STRIDE(i, n) {
    int64_t position = i / dim;
    int64_t row = loadIndex(is64, indices, position);
    if (row < 0 || row >= numRows) {
      raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, SiteEmbedding,
                       row, position, numRows);
      out[i] = fromF32<T>(0.0f);
      continue;
    }
    out[i] = weight[row * dim + i % dim];
  }
}

/// acc ([numRows, width], f32, zeroed) += grad columns [col0, col0 + width)
/// in index order, skipping the positions of `paddingIdx`; one thread per
/// column.
template <typename T>
__global__ void embeddingGradKernel(const T *grad, bool is64,
                                    const void *indices, float *acc,
                                    int64_t numIndices, int64_t numRows,
                                    int64_t dim, int64_t col0, int64_t width,
                                    int64_t paddingIdx,
                                    memopt_device_error *error) {
  int64_t column = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (column >= width)
    return;
  for (int64_t i = 0; i < numIndices; ++i) {
    int64_t row = loadIndex(is64, indices, i);
    if (row < 0 || row >= numRows) {
      if (column == 0)
        raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE,
                         SiteEmbeddingGrad, row, i, numRows);
      continue;
    }
    if (row == paddingIdx)
      continue;
    acc[row * width + column] += toF32(grad[i * dim + col0 + column]);
  }
}

template <typename T>
__global__ void storeColumnsKernel(const float *acc, T *out, int64_t numRows,
                                   int64_t dim, int64_t col0, int64_t width) {
  int64_t n = numRows * width;
  GRID_STRIDE(i, n)
  out[(i / width) * dim + col0 + i % width] = fromF32<T>(acc[i]);
}

} // namespace

void memopt_embedding(memopt_context *ctx, memopt_dtype dtype,
                      const void *weight, memopt_dtype index_dtype,
                      const void *indices, void *out, int64_t num_indices,
                      int64_t num_rows, int64_t dim) {
  const char *entry = "memopt_embedding";
  if (!checkEmbedding(ctx, entry, dtype, index_dtype, num_indices, num_rows,
                      dim) ||
      !checkPointers(ctx, entry, num_indices, {indices, out}))
    return;
  int64_t n = num_indices * dim;
  if (n == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    embeddingKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const T *>(weight), index_dtype == MEMOPT_I64, indices,
        static_cast<T *>(out), num_indices, num_rows, dim, ctx->deviceError);
  });
  checkLaunch(ctx, entry, "embeddingKernel");
}

void memopt_embedding_grad(memopt_context *ctx, memopt_dtype dtype,
                           const void *grad, memopt_dtype index_dtype,
                           const void *indices, void *out, int64_t num_indices,
                           int64_t num_rows, int64_t dim, int64_t padding_idx) {
  const char *entry = "memopt_embedding_grad";
  if (!checkEmbedding(ctx, entry, dtype, index_dtype, num_indices, num_rows,
                      dim, padding_idx) ||
      !checkPointers(ctx, entry, num_indices, {indices, grad}) ||
      !checkPointers(ctx, entry, num_rows * dim, {out}))
    return;
  if (num_rows * dim == 0)
    return;
  bool is64 = index_dtype == MEMOPT_I64;
  if (dtype == MEMOPT_F32) {
    // Accumulate straight into the f32 result.
    if (!MEMOPT_CUDA_CHECK(ctx, entry,
                           cudaMemsetAsync(out, 0, num_rows * dim * 4,
                                           ctx->stream)))
      return;
    embeddingGradKernel<float><<<gridFor(dim, 128), 128, 0, ctx->stream>>>(
        static_cast<const float *>(grad), is64, indices,
        static_cast<float *>(out), num_indices, num_rows, dim, 0, dim,
        padding_idx, ctx->deviceError);
    checkLaunch(ctx, entry, "embeddingGradKernel");
    return;
  }
  // f16/bf16: accumulate column chunks in the f32 scratch, then round.
  int64_t capacity = static_cast<int64_t>(ctx->scratchBytes / 4);
  int64_t width = capacity / num_rows;
  if (width < 1) {
    scratchFloats(ctx, entry, num_rows);
    return;
  }
  if (width > dim)
    width = dim;
  float *acc = static_cast<float *>(ctx->scratch);
  for (int64_t col0 = 0; col0 < dim; col0 += width) {
    int64_t w = dim - col0 < width ? dim - col0 : width;
    if (!MEMOPT_CUDA_CHECK(ctx, entry,
                           cudaMemsetAsync(acc, 0, num_rows * w * 4,
                                           ctx->stream)))
      return;
    dispatchFloat(dtype, [&](auto tag) {
      using T = MEMOPT_STORAGE(tag);
      embeddingGradKernel<T><<<gridFor(w, 128), 128, 0, ctx->stream>>>(
          static_cast<const T *>(grad), is64, indices, acc, num_indices,
          num_rows, dim, col0, w, padding_idx, ctx->deviceError);
      storeColumnsKernel<T><<<gridFor(num_rows * w), kBlock, 0, ctx->stream>>>(
          acc, static_cast<T *>(out), num_rows, dim, col0, w);
    });
    if (!checkLaunch(ctx, entry, "embeddingGradKernel/storeColumnsKernel"))
      return;
  }
}
