//===- Shape.cpp - host data-movement kernels -----------------------------===//
//
// Broadcast, transpose, slice (+grad), concat and embedding (+grad). The
// first four are one strided gather: the output is walked in row-major
// order and each element is read at base + sum(index[d] * stride[d]) of the
// input, with strides derived from the op's attributes. They move raw
// elements of any dtype, so they are exact.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"

#include <cstring>
#include <vector>

using namespace memopt::host;

namespace {

/// Row-major element strides of `shape`.
std::vector<int64_t> rowMajorStrides(int64_t rank, const int64_t *shape) {
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

int64_t product(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/// out[row-major index over outShape] = in[base + sum(idx[d] * strides[d])].
/// With `scatter`, the roles swap: out[...] = in[row-major index], i.e. the
/// strided positions of `out` receive the contiguous elements of `in`.
void stridedCopy(size_t elementSize, const char *in, char *out, int64_t rank,
                 const int64_t *shape, const int64_t *strides, int64_t base,
                 bool scatter) {
  int64_t n = product(rank, shape);
  if (n == 0)
    return;
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  int64_t offset = base;
  for (int64_t i = 0; i < n; ++i) {
    if (scatter)
      std::memcpy(out + offset * elementSize, in + i * elementSize,
                  elementSize);
    else
      std::memcpy(out + i * elementSize, in + offset * elementSize,
                  elementSize);
    // Advance the multi-index (last dimension fastest).
    for (int64_t d = rank - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape[d])
        break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

bool checkShape(memopt_context *ctx, const char *entry, int64_t rank,
                const int64_t *shape) {
  if (rank < 0 || (rank > 0 && !shape)) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, "invalid rank %lld",
             static_cast<long long>(rank));
    return false;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] < 0) {
      setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
               "negative size %lld in dimension %lld",
               static_cast<long long>(shape[d]), static_cast<long long>(d));
      return false;
    }
  }
  return true;
}

size_t elementSize(memopt_context *ctx, const char *entry, memopt_dtype dtype) {
  size_t size = memopt_dtype_size(dtype);
  if (!size)
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry, "unknown dtype %d",
             static_cast<int>(dtype));
  return size;
}

/// Validates slice attributes and returns the result shape in `outShape`.
bool sliceShape(memopt_context *ctx, const char *entry, int64_t rank,
                const int64_t *inShape, const int64_t *starts,
                const int64_t *limits, const int64_t *strides,
                std::vector<int64_t> &outShape) {
  if (!checkShape(ctx, entry, rank, inShape))
    return false;
  outShape.resize(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    if (strides[d] <= 0 || starts[d] < 0 || limits[d] > inShape[d] ||
        starts[d] > limits[d]) {
      setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
               "invalid slice [%lld:%lld:%lld] of dimension %lld (size %lld)",
               static_cast<long long>(starts[d]),
               static_cast<long long>(limits[d]),
               static_cast<long long>(strides[d]), static_cast<long long>(d),
               static_cast<long long>(inShape[d]));
      return false;
    }
    outShape[d] = (limits[d] - starts[d] + strides[d] - 1) / strides[d];
  }
  return true;
}

} // namespace

void memopt_broadcast(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t in_rank,
                      const int64_t *in_shape, const int64_t *dims, void *out,
                      int64_t out_rank, const int64_t *out_shape) {
  const char *entry = "memopt_broadcast";
  if (!isLive(ctx))
    return;
  size_t size = elementSize(ctx, entry, dtype);
  if (!size || !checkShape(ctx, entry, in_rank, in_shape) ||
      !checkShape(ctx, entry, out_rank, out_shape))
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(in_rank, in_shape);
  std::vector<int64_t> strides(static_cast<size_t>(out_rank), 0);
  for (int64_t i = 0; i < in_rank; ++i) {
    int64_t d = dims[i];
    if (d < 0 || d >= out_rank || (i > 0 && d <= dims[i - 1]) ||
        (in_shape[i] != out_shape[d] && in_shape[i] != 1)) {
      setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
               "input dimension %lld (size %lld) cannot map to result "
               "dimension %lld",
               static_cast<long long>(i), static_cast<long long>(in_shape[i]),
               static_cast<long long>(d));
      return;
    }
    strides[d] = in_shape[i] == 1 ? 0 : inStrides[i];
  }
  if (!checkPointers(ctx, entry, product(out_rank, out_shape), {input, out}))
    return;
  stridedCopy(size, static_cast<const char *>(input), static_cast<char *>(out),
              out_rank, out_shape, strides.data(), 0, /*scatter=*/false);
}

void memopt_transpose(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t rank, const int64_t *in_shape,
                      const int64_t *perm, void *out) {
  const char *entry = "memopt_transpose";
  if (!isLive(ctx))
    return;
  size_t size = elementSize(ctx, entry, dtype);
  if (!size || !checkShape(ctx, entry, rank, in_shape))
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(rank, in_shape);
  std::vector<int64_t> outShape(static_cast<size_t>(rank));
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]) {
      setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
               "invalid permutation entry %lld at %lld",
               static_cast<long long>(perm[i]), static_cast<long long>(i));
      return;
    }
    seen[perm[i]] = true;
    outShape[i] = in_shape[perm[i]];
    strides[i] = inStrides[perm[i]];
  }
  if (!checkPointers(ctx, entry, product(rank, in_shape), {input, out}))
    return;
  stridedCopy(size, static_cast<const char *>(input), static_cast<char *>(out),
              rank, outShape.data(), strides.data(), 0, /*scatter=*/false);
}

void memopt_slice(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  int64_t rank, const int64_t *in_shape, const int64_t *starts,
                  const int64_t *limits, const int64_t *strides, void *out) {
  const char *entry = "memopt_slice";
  if (!isLive(ctx))
    return;
  size_t size = elementSize(ctx, entry, dtype);
  std::vector<int64_t> outShape;
  if (!size || !sliceShape(ctx, entry, rank, in_shape, starts, limits, strides,
                           outShape))
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(rank, in_shape);
  std::vector<int64_t> steps(static_cast<size_t>(rank));
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    steps[d] = inStrides[d] * strides[d];
    base += starts[d] * inStrides[d];
  }
  if (!checkPointers(ctx, entry, product(rank, outShape.data()), {input, out}))
    return;
  stridedCopy(size, static_cast<const char *>(input), static_cast<char *>(out),
              rank, outShape.data(), steps.data(), base, /*scatter=*/false);
}

void memopt_slice_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *grad, int64_t rank, const int64_t *in_shape,
                       const int64_t *starts, const int64_t *limits,
                       const int64_t *strides, void *out) {
  const char *entry = "memopt_slice_grad";
  if (!isLive(ctx))
    return;
  size_t size = elementSize(ctx, entry, dtype);
  std::vector<int64_t> gradShape;
  if (!size || !sliceShape(ctx, entry, rank, in_shape, starts, limits, strides,
                           gradShape))
    return;
  int64_t total = product(rank, in_shape);
  if (!checkPointers(ctx, entry, total, {out}) ||
      !checkPointers(ctx, entry, product(rank, gradShape.data()), {grad}))
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(rank, in_shape);
  std::vector<int64_t> steps(static_cast<size_t>(rank));
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    steps[d] = inStrides[d] * strides[d];
    base += starts[d] * inStrides[d];
  }
  // All-zero bytes are +0 in every float dtype.
  std::memset(out, 0, static_cast<size_t>(total) * size);
  stridedCopy(size, static_cast<const char *>(grad), static_cast<char *>(out),
              rank, gradShape.data(), steps.data(), base, /*scatter=*/true);
}

void memopt_concat(memopt_context *ctx, memopt_dtype dtype, int64_t num_inputs,
                   const void *const *inputs, const int64_t *sizes, void *out,
                   int64_t outer, int64_t inner) {
  const char *entry = "memopt_concat";
  if (!isLive(ctx))
    return;
  size_t size = elementSize(ctx, entry, dtype);
  if (!size || !checkExtents(ctx, entry, {num_inputs, outer, inner}))
    return;
  int64_t total = 0;
  for (int64_t j = 0; j < num_inputs; ++j) {
    if (!checkExtents(ctx, entry, {sizes[j]}) ||
        !checkPointers(ctx, entry, outer * sizes[j] * inner, {inputs[j]}))
      return;
    total += sizes[j];
  }
  if (!checkPointers(ctx, entry, outer * total * inner, {out}))
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
  if (!isLive(ctx) || !checkFloat(ctx, entry, dtype) ||
      !checkIndexType(ctx, entry, index_dtype) ||
      !checkExtents(ctx, entry, {num_indices, num_rows, dim}) ||
      !checkPointers(ctx, entry, num_indices, {indices, out}))
    return;
  size_t rowBytes = static_cast<size_t>(dim) * memopt_dtype_size(dtype);
  for (int64_t i = 0; i < num_indices; ++i) {
    int64_t row = loadIndex(index_dtype, indices, i);
    if (row < 0 || row >= num_rows) {
      setError(ctx, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, entry,
               "index %lld at position %lld out of range [0, %lld)",
               static_cast<long long>(row), static_cast<long long>(i),
               static_cast<long long>(num_rows));
      return;
    }
    std::memcpy(static_cast<char *>(out) + i * rowBytes,
                static_cast<const char *>(weight) + row * rowBytes, rowBytes);
  }
}

void memopt_embedding_grad(memopt_context *ctx, memopt_dtype dtype,
                           const void *grad, memopt_dtype index_dtype,
                           const void *indices, void *out, int64_t num_indices,
                           int64_t num_rows, int64_t dim) {
  const char *entry = "memopt_embedding_grad";
  if (!isLive(ctx) || !checkFloat(ctx, entry, dtype) ||
      !checkIndexType(ctx, entry, index_dtype) ||
      !checkExtents(ctx, entry, {num_indices, num_rows, dim}) ||
      !checkPointers(ctx, entry, num_indices, {indices, grad}) ||
      !checkPointers(ctx, entry, num_rows * dim, {out}))
    return;
  for (int64_t i = 0; i < num_indices; ++i) {
    int64_t row = loadIndex(index_dtype, indices, i);
    if (row < 0 || row >= num_rows) {
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
  for (int64_t i = 0; i < num_rows * dim; ++i)
    acc[i] = 0.0f;
  // Index order is fixed, so repeated indices sum in a deterministic order.
  for (int64_t i = 0; i < num_indices; ++i) {
    float *row = acc + loadIndex(index_dtype, indices, i) * dim;
    const float *src = g.get() + i * dim;
    for (int64_t j = 0; j < dim; ++j)
      row[j] += src[j];
  }
  storeF32(dtype, acc, out, num_rows * dim);
}
