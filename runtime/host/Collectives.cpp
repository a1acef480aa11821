//===- Collectives.cpp - data parallelism's collectives on the host -------===//
//
// The host runtime reduces through the collectives the driver installs (MPI,
// runtime/driver/Mpi.cpp): in place on the arena's f32 buffers, so a rank
// holds no second copy of its gradients. Without collectives the world is
// one rank and the all-reduce is a copy. ZeRO's reduce-scatter reduces
// each rank's slice to that rank (reduce_sum_f32: MPI_Reduce), its
// all-gather broadcasts each rank's slice from that rank (broadcast:
// MPI_Bcast), so no callback needs strided buffers.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"

#include <algorithm>
#include <cstring>

using namespace memopt::host;

namespace {

/// Reports a failed collective callback of `entry`.
void collectiveFailed(memopt_context *ctx, const char *entry,
                      const char *error, const char *missing) {
  const memopt_collectives &c = ctx->collectives;
  setError(ctx, MEMOPT_ERROR_COLLECTIVE, entry, "rank %lld of %lld: %s",
           static_cast<long long>(c.rank), static_cast<long long>(c.size),
           *error ? error : missing);
}

} // namespace

void memopt_set_collectives(memopt_context *ctx,
                            const memopt_collectives *collectives) {
  setCollectives(ctx, collectives);
}

int64_t memopt_rank(const memopt_context *ctx) { return getRank(ctx); }

int64_t memopt_world_size(const memopt_context *ctx) {
  return getWorldSize(ctx);
}

void memopt_all_reduce_sum(memopt_context *ctx, memopt_dtype dtype,
                           const void *input, void *out, int64_t n) {
  const char *entry = "memopt_all_reduce_sum";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) || n == 0)
    return;
  if (input != out)
    std::memmove(out, input, static_cast<size_t>(n) * sizeof(float));
  const memopt_collectives &c = ctx->collectives;
  if (c.size <= 1)
    return;
  char error[256] = "";
  if (!c.all_reduce_sum_f32 ||
      c.all_reduce_sum_f32(c.state, static_cast<float *>(out), n, error,
                           sizeof(error)) != 0)
    collectiveFailed(ctx, entry, error, "no all-reduce installed");
}

void memopt_all_reduce_sum_many(memopt_context *ctx, int64_t num_tensors,
                                void *const *data, const int64_t *sizes) {
  const char *entry = "memopt_all_reduce_sum_many";
  if (!checkAllReduceMany(ctx, entry, num_tensors, data, sizes))
    return;
  const memopt_collectives &c = ctx->collectives;
  if (c.size <= 1)
    return;
  constexpr int64_t kBucket = MEMOPT_ALL_REDUCE_BUCKET_BYTES / sizeof(float);
  char error[256] = "";
  auto reduce = [&](float *values, int64_t n) {
    if (n == 0)
      return true;
    if (c.all_reduce_sum_f32 &&
        c.all_reduce_sum_f32(c.state, values, n, error, sizeof(error)) == 0)
      return true;
    collectiveFailed(ctx, entry, error, "no all-reduce installed");
    return false;
  };
  // Consecutive tensors [first, last) that fit one bucket are packed,
  // reduced with one call and unpacked; a larger one is reduced alone. The
  // bucket is no larger than the small tensors need.
  int64_t small = 0;
  for (int64_t j = 0; j < num_tensors; ++j)
    if (sizes[j] <= kBucket)
      small = std::min(kBucket, small + sizes[j]);
  Workspace bucket(ctx, small);
  for (int64_t first = 0; first < num_tensors;) {
    if (sizes[first] > kBucket) {
      if (!reduce(static_cast<float *>(data[first]), sizes[first]))
        return;
      ++first;
      continue;
    }
    int64_t last = first, packed = 0;
    // (An empty tensor may have no pointer: nothing is copied for it.)
    for (; last < num_tensors && packed + sizes[last] <= kBucket; ++last) {
      if (sizes[last] > 0)
        std::memcpy(bucket.get() + packed, data[last],
                    static_cast<size_t>(sizes[last]) * sizeof(float));
      packed += sizes[last];
    }
    if (!reduce(bucket.get(), packed))
      return;
    for (int64_t offset = 0; first < last; offset += sizes[first++])
      if (sizes[first] > 0)
        std::memcpy(data[first], bucket.get() + offset,
                    static_cast<size_t>(sizes[first]) * sizeof(float));
  }
}

void memopt_reduce_scatter_sum(memopt_context *ctx, memopt_dtype dtype,
                               const void *input, void *out, int64_t shard) {
  const char *entry = "memopt_reduce_scatter_sum";
  if (!checkShardEntry(ctx, entry, dtype, input, out, shard))
    return;
  const memopt_collectives &c = ctx->collectives;
  const auto *in = static_cast<const float *>(input);
  if (c.size <= 1) {
    std::memcpy(out, in, static_cast<size_t>(shard) * sizeof(float));
    return;
  }
  char error[256] = "";
  for (int64_t root = 0; root < c.size; ++root)
    if (!c.reduce_sum_f32 ||
        c.reduce_sum_f32(c.state, in + root * shard, static_cast<float *>(out),
                         shard, root, error, sizeof(error)) != 0)
      return collectiveFailed(ctx, entry, error, "no reduction installed");
}

void memopt_all_gather(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t shard) {
  const char *entry = "memopt_all_gather";
  if (!checkShardEntry(ctx, entry, dtype, input, out, shard))
    return;
  const memopt_collectives &c = ctx->collectives;
  int64_t bytes = shard * static_cast<int64_t>(dtypeSize(dtype));
  auto *gathered = static_cast<unsigned char *>(out);
  std::memcpy(gathered + c.rank * bytes, input, static_cast<size_t>(bytes));
  if (c.size <= 1)
    return;
  char error[256] = "";
  for (int64_t root = 0; root < c.size; ++root)
    if (!c.broadcast || c.broadcast(c.state, gathered + root * bytes, bytes,
                                    root, error, sizeof(error)) != 0)
      return collectiveFailed(ctx, entry, error, "no broadcast installed");
}

void memopt_all_slice(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, void *out, int64_t shard) {
  const char *entry = "memopt_all_slice";
  if (!checkShardEntry(ctx, entry, dtype, input, out, shard))
    return;
  size_t bytes = static_cast<size_t>(shard) * dtypeSize(dtype);
  std::memcpy(out,
              static_cast<const unsigned char *>(input) +
                  static_cast<size_t>(getRank(ctx)) * bytes,
              bytes);
}
