//===- Shape.cpp - host data-movement kernels -----------------------------===//
//
// Broadcast, transpose, slice (+grad), concat and embedding (+grad). The
// first four are one strided gather: the output is walked in row-major
// order and each element is read at base + sum(index[d] * stride[d]) of the
// input, with strides derived from the op's attributes; where the last
// dimension is contiguous, a row at a time. They move raw
// elements of any dtype, so they are exact. The embeddings' index checks
// and offsets are EmbeddingMath.h's, shared with the CUDA kernels, whose
// gradient adds each row's positions in the order this file does.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"
#include "memopt/runtime/EmbeddingMath.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace memopt::host;

namespace {

/// out[i] = in[view(i)] over the row-major result of `view`; with
/// `scatter`, out[view(i)] = in[i]: the strided positions of `out` receive the
/// contiguous elements of `in`.
void stridedCopy(size_t elementSize, const void *input, void *output,
                 const StridedView &view, bool scatter) {
  const char *in = static_cast<const char *>(input);
  char *out = static_cast<char *>(output);
  int64_t n = view.size(), rank = static_cast<int64_t>(view.shape.size());
  // The view is one-to-one, so the output's ranges can be copied apart.
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    // The multi-index and offset of element `begin`.
    std::vector<int64_t> index(static_cast<size_t>(rank), 0);
    int64_t offset = view.base;
    for (int64_t d = rank - 1, rest = begin; d >= 0; --d) {
      index[d] = rest % view.shape[d];
      rest /= view.shape[d];
      offset += index[d] * view.step[d];
    }
    if (rank == 0) {
      // One element, at the base.
      std::memcpy(scatter ? out + offset * elementSize : out,
                  scatter ? in : in + offset * elementSize, elementSize);
      return;
    }
    // Along the last dimension the view is a run of `run` elements from
    // offset, contiguous when its step is 1: one memcpy per run.
    int64_t last = rank - 1;
    bool contiguous = view.step[last] == 1;
    for (int64_t i = begin; i < end;) {
      int64_t run =
          contiguous ? std::min(view.shape[last] - index[last], end - i) : 1;
      size_t bytes = static_cast<size_t>(run) * elementSize;
      if (scatter)
        std::memcpy(out + offset * elementSize, in + i * elementSize, bytes);
      else
        std::memcpy(out + i * elementSize, in + offset * elementSize, bytes);
      i += run;
      // Advance the multi-index by `run` (last dimension fastest; a run
      // never crosses the end of the last dimension).
      offset += view.step[last] * run;
      index[last] += run;
      for (int64_t d = last; d >= 0 && index[d] == view.shape[d]; --d) {
        offset -= view.step[d] * view.shape[d];
        index[d] = 0;
        if (d > 0) {
          offset += view.step[d - 1];
          ++index[d - 1];
        }
      }
    }
  });
}

} // namespace

void memopt_broadcast(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t in_rank,
                      const int64_t *in_shape, const int64_t *dims, void *out,
                      int64_t out_rank, const int64_t *out_shape) {
  const char *entry = "memopt_broadcast";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size ||
      !checkBroadcast(ctx, entry, in_rank, in_shape, dims, out_rank, out_shape))
    return;
  StridedView view =
      broadcastView(in_rank, in_shape, dims, out_rank, out_shape);
  if (checkPointers(ctx, entry, view.size(), {input, out}))
    stridedCopy(size, input, out, view, /*scatter=*/false);
}

void memopt_transpose(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t rank, const int64_t *in_shape,
                      const int64_t *perm, void *out) {
  const char *entry = "memopt_transpose";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkTranspose(ctx, entry, rank, in_shape, perm))
    return;
  StridedView view = transposeView(rank, in_shape, perm);
  if (checkPointers(ctx, entry, view.size(), {input, out}))
    stridedCopy(size, input, out, view, /*scatter=*/false);
}

void memopt_slice(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  int64_t rank, const int64_t *in_shape, const int64_t *starts,
                  const int64_t *limits, const int64_t *strides, void *out) {
  const char *entry = "memopt_slice";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkSlice(ctx, entry, rank, in_shape, starts, limits, strides))
    return;
  StridedView view = sliceView(rank, in_shape, starts, limits, strides);
  if (checkPointers(ctx, entry, view.size(), {input, out}))
    stridedCopy(size, input, out, view, /*scatter=*/false);
}

void memopt_slice_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *grad, int64_t rank, const int64_t *in_shape,
                       const int64_t *starts, const int64_t *limits,
                       const int64_t *strides, void *out) {
  const char *entry = "memopt_slice_grad";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkSlice(ctx, entry, rank, in_shape, starts, limits, strides))
    return;
  StridedView view = sliceView(rank, in_shape, starts, limits, strides);
  int64_t total = numElements(rank, in_shape);
  if (!checkPointers(ctx, entry, total, {out}) ||
      !checkPointers(ctx, entry, view.size(), {grad}))
    return;
  // All-zero bytes are +0 in every float dtype.
  std::memset(out, 0, static_cast<size_t>(total) * size);
  stridedCopy(size, grad, out, view, /*scatter=*/true);
}

void memopt_concat(memopt_context *ctx, memopt_dtype dtype, int64_t num_inputs,
                   const void *const *inputs, const int64_t *sizes, void *out,
                   int64_t outer, int64_t inner) {
  const char *entry = "memopt_concat";
  size_t size = checkElementSize(ctx, entry, dtype);
  int64_t total = 0;
  if (!size || !checkConcat(ctx, entry, num_inputs, inputs, sizes, out, outer,
                            inner, total))
    return;
  char *dst = static_cast<char *>(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < num_inputs; ++j) {
      size_t bytes = static_cast<size_t>(sizes[j] * inner) * size;
      const char *src = static_cast<const char *>(inputs[j]) + o * bytes;
      std::memcpy(dst, src, bytes);
      dst += bytes;
    }
  }
}

void memopt_embedding(memopt_context *ctx, memopt_dtype dtype,
                      const void *weight, memopt_dtype index_dtype,
                      const void *indices, void *out, int64_t num_indices,
                      int64_t num_rows, int64_t dim) {
  const char *entry = "memopt_embedding";
  if (!checkEmbedding(ctx, entry, dtype, index_dtype, num_indices, num_rows,
                      dim) ||
      !checkPointers(ctx, entry, num_indices, {indices, out}))
    return;
  size_t size = memopt_dtype_size(dtype);
  size_t rowBytes = static_cast<size_t>(dim) * size;
  for (int64_t i = 0; i < num_indices; ++i) {
    int64_t row = loadIndex(index_dtype, indices, i);
    if (!embeddingIndexInRange(row, num_rows)) {
      setError(ctx, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, entry,
               "index %lld at position %lld out of range [0, %lld)",
               static_cast<long long>(row), static_cast<long long>(i),
               static_cast<long long>(num_rows));
      return;
    }
    std::memcpy(static_cast<char *>(out) + embeddingOffset(i, 0, dim) * size,
                static_cast<const char *>(weight) +
                    embeddingOffset(row, 0, dim) * size,
                rowBytes);
  }
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
  for (int64_t i = 0; i < num_indices; ++i) {
    int64_t row = loadIndex(index_dtype, indices, i);
    if (!embeddingIndexInRange(row, num_rows)) {
      setError(ctx, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, entry,
               "index %lld at position %lld out of range [0, %lld)",
               static_cast<long long>(row), static_cast<long long>(i),
               static_cast<long long>(num_rows));
      return;
    }
  }
  F32Input g(ctx, dtype, grad, num_indices * dim);
  Workspace table(ctx, num_rows * dim);
  float *acc = table.get();
  // Each thread owns a range of the columns and visits the indices in
  // order, so repeated indices sum in one order whatever the threads.
  parallelFor(dim, rowGrain(num_indices), [&](int64_t first, int64_t last) {
    for (int64_t r = 0; r < num_rows; ++r)
      std::fill(acc + r * dim + first, acc + r * dim + last, 0.0f);
    for (int64_t i = 0; i < num_indices; ++i) {
      int64_t index = loadIndex(index_dtype, indices, i);
      if (isPaddingRow(index, padding_idx))
        continue;
      float *row = acc + embeddingOffset(index, 0, dim);
      const float *src = g.get() + embeddingOffset(i, 0, dim);
      for (int64_t j = first; j < last; ++j)
        row[j] += src[j];
    }
  });
  storeF32(dtype, acc, out, num_rows * dim);
}
