//===- Collectives.cpp - data parallelism's collectives on the host -------===//
//
// The host runtime reduces through the collectives the driver installs (MPI,
// runtime/driver/Mpi.cpp): in place on the arena's f32 buffers, so a rank
// holds no second copy of its gradients. Without collectives the world is
// one rank and the all-reduce is a copy.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"

#include <cstring>

using namespace memopt::host;

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
    setError(ctx, MEMOPT_ERROR_COLLECTIVE, entry, "rank %lld of %lld: %s",
             static_cast<long long>(c.rank), static_cast<long long>(c.size),
             *error ? error : "no all-reduce installed");
}
