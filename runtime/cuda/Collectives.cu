//===- Collectives.cu - data parallelism's collectives on NCCL ------------===//
//
// The all-reduce of data parallelism runs on NCCL, in place on the arena, in
// the context's stream. The communicator is made at the first call: rank 0
// draws an id (ncclGetUniqueId) and hands it to the other ranks through the
// driver's collectives (MPI), then every rank joins with ncclCommInitRank.
// Each rank drives its own GPU; two ranks on one GPU need a distinct
// NCCL_HOSTID each (docs/DataParallel.md). ZeRO's reduce-scatter and
// all-gather are NCCL's own, on slices of equal size (the compiler pads);
// gathering and slicing move 16-bit parameters as bytes.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"

#include <chrono>
#include <cstdlib>
#include <thread>

using namespace memopt::cuda;

namespace {

bool checkNccl(memopt_context *ctx, const char *entry, const char *call,
               ncclResult_t result) {
  if (result == ncclSuccess)
    return true;
  setError(ctx, MEMOPT_ERROR_COLLECTIVE, entry, "%s failed: %s", call,
           ncclGetErrorString(result));
  return false;
}

/// Copies `bytes` bytes of device memory in the context's stream.
void copyDevice(memopt_context *ctx, const char *entry, void *out,
                const void *input, size_t bytes) {
  checkCuda(ctx, entry, "cudaMemcpyAsync",
            cudaMemcpyAsync(out, input, bytes, cudaMemcpyDeviceToDevice,
                            ctx->stream));
}

/// The NCCL communicator of the context's ranks, made on first use.
bool ensureCommunicator(memopt_context *ctx, const char *entry) {
  if (ctx->nccl)
    return true;
  const memopt_collectives &c = ctx->collectives;
  ncclUniqueId id;
  if (c.rank == 0 && !checkNccl(ctx, entry, "ncclGetUniqueId",
                                ncclGetUniqueId(&id)))
    return false;
  char error[256] = "";
  if (!c.broadcast ||
      c.broadcast(c.state, &id, sizeof(id), 0, error, sizeof(error)) != 0) {
    setError(ctx, MEMOPT_ERROR_COLLECTIVE, entry,
             "rank %lld of %lld: cannot share the NCCL id: %s",
             static_cast<long long>(c.rank), static_cast<long long>(c.size),
             *error ? error : "no broadcast installed");
    return false;
  }
  return checkNccl(ctx, entry, "ncclCommInitRank",
                   ncclCommInitRank(&ctx->nccl, static_cast<int>(c.size), id,
                                    static_cast<int>(c.rank)));
}

} // namespace

cudaError_t memopt::cuda::synchronize(memopt_context *ctx, const char *entry,
                                      cudaEvent_t event) {
  if (!ctx->nccl)
    return event ? cudaEventSynchronize(event)
                 : cudaStreamSynchronize(ctx->stream);
  const char *limitText = std::getenv("MEMOPT_COLLECTIVE_TIMEOUT");
  double limit = limitText && *limitText ? std::atof(limitText) : 1800.0;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t answer =
        event ? cudaEventQuery(event) : cudaStreamQuery(ctx->stream);
    if (answer != cudaErrorNotReady)
      return answer;
    ncclResult_t async = ncclSuccess;
    const char *why = nullptr;
    if (ncclCommGetAsyncError(ctx->nccl, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress)
      why = ncclGetErrorString(async);
    else if (std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           start)
                 .count() > limit)
      why = "no progress within MEMOPT_COLLECTIVE_TIMEOUT seconds";
    if (why) {
      ncclCommAbort(ctx->nccl);
      ctx->nccl = nullptr;
      setError(ctx, MEMOPT_ERROR_COLLECTIVE, entry,
               "rank %lld of %lld: a collective failed: %s",
               static_cast<long long>(ctx->collectives.rank),
               static_cast<long long>(ctx->collectives.size), why);
      return cudaErrorLaunchFailure;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

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
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) || isEmpty({n}))
    return;
  if (ctx->collectives.size <= 1) {
    if (input != out)
      copyDevice(ctx, entry, out, input, static_cast<size_t>(n) * 4);
    return;
  }
  if (!ensureCommunicator(ctx, entry))
    return;
  checkNccl(ctx, entry, "ncclAllReduce",
            ncclAllReduce(input, out, static_cast<size_t>(n), ncclFloat32,
                          ncclSum, ctx->nccl, ctx->stream));
}

void memopt_reduce_scatter_sum(memopt_context *ctx, memopt_dtype dtype,
                               const void *input, void *out, int64_t shard) {
  const char *entry = "memopt_reduce_scatter_sum";
  if (!checkShardEntry(ctx, entry, dtype, input, out, shard))
    return;
  if (ctx->collectives.size <= 1)
    return copyDevice(ctx, entry, out, input, static_cast<size_t>(shard) * 4);
  if (!ensureCommunicator(ctx, entry))
    return;
  checkNccl(ctx, entry, "ncclReduceScatter",
            ncclReduceScatter(input, out, static_cast<size_t>(shard),
                              ncclFloat32, ncclSum, ctx->nccl, ctx->stream));
}

void memopt_all_gather(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t shard) {
  const char *entry = "memopt_all_gather";
  if (!checkShardEntry(ctx, entry, dtype, input, out, shard))
    return;
  size_t bytes = static_cast<size_t>(shard) * dtypeSize(dtype);
  if (ctx->collectives.size <= 1)
    return copyDevice(ctx, entry, out, input, bytes);
  if (!ensureCommunicator(ctx, entry))
    return;
  checkNccl(ctx, entry, "ncclAllGather",
            ncclAllGather(input, out, bytes, ncclUint8, ctx->nccl,
                          ctx->stream));
}

void memopt_all_slice(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, void *out, int64_t shard) {
  const char *entry = "memopt_all_slice";
  if (!checkShardEntry(ctx, entry, dtype, input, out, shard))
    return;
  size_t bytes = static_cast<size_t>(shard) * dtypeSize(dtype);
  copyDevice(ctx, entry, out,
             static_cast<const unsigned char *>(input) +
                 static_cast<size_t>(getRank(ctx)) * bytes,
             bytes);
}
