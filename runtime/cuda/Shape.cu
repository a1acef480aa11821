//===- Shape.cu - broadcast, transpose, slice, concat, embeddings ---------===//
//
// Shape entries move elements of 1, 2, 4 or 8 bytes through one strided-copy
// kernel: each output element's coordinates map to an input offset (0 stride
// for broadcast dimensions).
//
// The embedding gradient is deterministic without atomics, and for f32
// tables bit-identical to the host runtime: one 64-bit key per position,
// (row << positionBits) | position (EmbeddingMath.h), is radix-sorted by
// CUB in the scratch slice, which groups the positions of each row in
// increasing order; then a block per segment (the positions of one row)
// adds their gradient rows in that order, threads over columns, in f32,
// and writes the row once (rounded once for f16/bf16). The table is zeroed
// first, so the rows no position adds to come out zero. The work is a
// radix sort of n keys (ceil(bits / 8) digit passes) and n * dim adds spread
// over one block per distinct row, where a thread per column visiting all n
// positions left most of the device idle (768 threads x 8192 serial adds at
// GPT-2 small's shape).
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "memopt/runtime/EmbeddingMath.h"

#include <cub/device/device_radix_sort.cuh>

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
    if (!embeddingIndexInRange(row, numRows)) {
      raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, SiteEmbedding,
                       row, position, numRows);
      out[i] = fromF32<T>(0.0f);
      continue;
    }
    out[i] = weight[embeddingOffset(row, i % dim, dim)];
  }
}

/// keys[p] = the sort key of position p (EmbeddingMath.h); indices out of
/// range are reported. Without `keys`, only the check.
__global__ void embeddingGradKeysKernel(bool is64, const void *indices,
                                        uint64_t *keys, int64_t numIndices,
                                        int64_t numRows, int64_t paddingIdx,
                                        int positionBits,
                                        memopt_device_error *error) {
  GRID_STRIDE(p, numIndices) {
    int64_t index = loadIndex(is64, indices, p);
    if (!embeddingIndexInRange(index, numRows))
      raiseDeviceError(error, MEMOPT_ERROR_INDEX_OUT_OF_RANGE,
                       SiteEmbeddingGrad, index, p, numRows);
    if (keys)
      keys[p] = embeddingGradKey(index, p, numRows, paddingIdx, positionBits);
  }
}

/// The segment kernel's launch shape: a block of kGradThreads per sorted
/// position (only those that start a segment work), each thread summing
/// kGradColumns columns at once (independent loads in flight while each
/// column's chain of adds stays in position order), over column tiles of
/// kGradTile along the grid's y.
constexpr int kGradThreads = 128;
constexpr int kGradColumns = 2;
constexpr int64_t kGradTile = kGradThreads * kGradColumns;

/// For each segment of the sorted keys (the positions of one row, ascending):
/// out[row, :] = 0 + grad[p0, :] + grad[p1, :] + ..., in f32, rounded once.
template <typename T>
__global__ void __launch_bounds__(kGradThreads)
    embeddingGradSegmentsKernel(const T *grad, const uint64_t *keys, T *out,
                                int64_t numIndices, int64_t numRows,
                                int64_t dim, int positionBits) {
  int64_t tiles = (dim + kGradTile - 1) / kGradTile;
  for (int64_t s = blockIdx.x; s < numIndices; s += gridDim.x) {
    if (!startsSegment(keys, s, positionBits))
      continue;
    int64_t row = sortKeyRow(keys[s], positionBits);
    // Skipped positions (the sentinel row) sort after every real row.
    if (row >= numRows)
      return;
    int64_t end = segmentEnd(keys, s, numIndices, positionBits);
    for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
      int64_t col0 = tile * kGradTile + threadIdx.x;
      // acc[c] is column col0 + c * kGradThreads. The position loop is
      // unrolled so that several positions' loads are in flight; the adds
      // into each accumulator stay in position order.
      float acc[kGradColumns];
#pragma unroll
      for (int c = 0; c < kGradColumns; ++c)
        acc[c] = 0.0f;
#pragma unroll 4
      for (int64_t k = s; k < end; ++k) {
        int64_t position = sortKeyPosition(keys[k], positionBits);
        const T *src = grad + embeddingOffset(position, 0, dim);
#pragma unroll
        for (int c = 0; c < kGradColumns; ++c) {
          int64_t col = col0 + c * kGradThreads;
          if (col < dim)
            acc[c] += toF32(src[col]);
        }
      }
#pragma unroll
      for (int c = 0; c < kGradColumns; ++c) {
        int64_t col = col0 + c * kGradThreads;
        if (col < dim)
          out[embeddingOffset(row, col, dim)] = fromF32<T>(acc[c]);
      }
    }
  }
}

/// The gradient's scratch: the keys, CUB's other key buffer and its
/// temporary storage, each on the workspace's alignment.
struct GradScratch {
  uint64_t *keys = nullptr;
  uint64_t *alternate = nullptr;
  void *sortStorage = nullptr;
  size_t sortBytes = 0;
};

uint64_t alignScratch(uint64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
         kWorkspaceAlignment;
}

/// Sizes and places the scratch of a sort of `numIndices` keys on `endBit`
/// bits; false after recording an error (a CUB failure, or a scratch slice
/// too small, named as scratchFloats names it).
bool placeGradScratch(memopt_context *ctx, const char *entry,
                      int64_t numIndices, int endBit, GradScratch &scratch) {
  cub::DoubleBuffer<uint64_t> query(nullptr, nullptr);
  if (!checkCuda(ctx, entry, "cub::DeviceRadixSort::SortKeys",
                 cub::DeviceRadixSort::SortKeys(nullptr, scratch.sortBytes,
                                                query, numIndices, 0, endBit,
                                                ctx->stream)))
    return false;
  uint64_t keyBytes =
      alignScratch(static_cast<uint64_t>(numIndices) * sizeof(uint64_t));
  uint64_t total = 2 * keyBytes + alignScratch(scratch.sortBytes);
  char *base = reinterpret_cast<char *>(scratchFloats(
      ctx, entry, static_cast<int64_t>((total + 3) / sizeof(float))));
  if (!base)
    return false;
  scratch.keys = reinterpret_cast<uint64_t *>(base);
  scratch.alternate = reinterpret_cast<uint64_t *>(base + keyBytes);
  scratch.sortStorage = base + 2 * keyBytes;
  return true;
}

/// Sorts the keys of `numIndices` positions (EmbeddingMath.h) into a
/// scratch buffer and returns it, or null after recording an error.
const uint64_t *sortGradKeys(memopt_context *ctx, const char *entry, bool is64,
                             const void *indices, int64_t numIndices,
                             int64_t numRows, int64_t paddingIdx,
                             const EmbeddingKeyLayout &layout) {
  GradScratch scratch;
  if (!placeGradScratch(ctx, entry, numIndices, layout.endBit(), scratch))
    return nullptr;
  embeddingGradKeysKernel<<<gridFor(numIndices), kBlock, 0, ctx->stream>>>(
      is64, indices, scratch.keys, numIndices, numRows, paddingIdx,
      layout.positionBits, ctx->deviceError);
  if (!checkLaunch(ctx, entry, "embeddingGradKeysKernel"))
    return nullptr;
  cub::DoubleBuffer<uint64_t> keys(scratch.keys, scratch.alternate);
  if (!checkCuda(ctx, entry, "cub::DeviceRadixSort::SortKeys",
                 cub::DeviceRadixSort::SortKeys(
                     scratch.sortStorage, scratch.sortBytes, keys, numIndices,
                     0, layout.endBit(), ctx->stream)) ||
      !checkLaunch(ctx, entry, "cub::DeviceRadixSort::SortKeys"))
    return nullptr;
  return keys.Current();
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
  bool is64 = index_dtype == MEMOPT_I64;
  if (num_rows * dim == 0) {
    // Nothing to write, but the indices are still checked, as on the host.
    if (num_indices > 0) {
      embeddingGradKeysKernel<<<gridFor(num_indices), kBlock, 0, ctx->stream>>>(
          is64, indices, nullptr, num_indices, num_rows, padding_idx, 0,
          ctx->deviceError);
      checkLaunch(ctx, entry, "embeddingGradKeysKernel");
    }
    return;
  }
  // All-zero bytes are +0 in every float dtype: the rows no position adds
  // to (and the padding row) stay zero.
  size_t size = memopt_dtype_size(dtype);
  if (!MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaMemsetAsync(out, 0, num_rows * dim * size, ctx->stream)) ||
      num_indices == 0)
    return;
  EmbeddingKeyLayout layout = embeddingKeyLayout(num_indices, num_rows);
  if (!layout.fits()) {
    invalid(ctx, entry,
            "%lld indices into %lld rows need %d-bit sort keys; the CUDA "
            "runtime's are 64-bit",
            static_cast<long long>(num_indices),
            static_cast<long long>(num_rows), layout.endBit());
    return;
  }
  const uint64_t *keys = sortGradKeys(ctx, entry, is64, indices, num_indices,
                                      num_rows, padding_idx, layout);
  if (!keys)
    return;
  int64_t tiles = (dim + kGradTile - 1) / kGradTile;
  dim3 grid(rowGrid(num_indices),
            static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  dispatchFloat(dtype, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    embeddingGradSegmentsKernel<T><<<grid, kGradThreads, 0, ctx->stream>>>(
        static_cast<const T *>(grad), keys, static_cast<T *>(out), num_indices,
        num_rows, dim, layout.positionBits);
  });
  checkLaunch(ctx, entry, "embeddingGradSegmentsKernel");
}
