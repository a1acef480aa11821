//===- Collectives.cpp - data parallelism's collectives on the host -------===//
//
// The host runtime reduces through the collectives the driver installs (MPI,
// runtime/driver/Mpi.cpp): in place on the arena's f32 buffers, so a rank
// holds no second copy of its gradients. Without collectives the world is
// one rank and the all-reduce is a copy. Each entry is one callback call:
// the all-reduce of data parallelism's flat gradient buffer
// (MPI_Allreduce), ZeRO's reduce-scatter (MPI_Reduce_scatter_block) and
// all-gather (MPI_Allgather, in place in the gathered buffer).
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"

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
  if (!c.reduce_scatter_sum_f32 ||
      c.reduce_scatter_sum_f32(c.state, in, static_cast<float *>(out), shard,
                               error, sizeof(error)) != 0)
    collectiveFailed(ctx, entry, error, "no reduce-scatter installed");
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
  if (!c.all_gather ||
      c.all_gather(c.state, gathered, bytes, error, sizeof(error)) != 0)
    collectiveFailed(ctx, entry, error, "no all-gather installed");
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
