/*===- runtime_collectives.h - memopt runtime C ABI: ranks --------*- C -*-===*\
|*                                                                            *|
|* The collective entries of runtime.h (data parallelism and ZeRO,            *|
|* docs/DataParallel.md): the ranks the driver found and the sums, scatters   *|
|* and gathers over them. runtime.h includes this header; its conventions     *|
|* hold here.                                                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MEMOPT_RUNTIME_COLLECTIVES_ABI_H
#define MEMOPT_RUNTIME_COLLECTIVES_ABI_H

#include "memopt/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The ranks of a data-parallel run, as the driver found them (MPI). A
/// context without one is a world of one rank. The functions return 0 on
/// success; otherwise they write a message of at most `error_size` bytes
/// (NUL included) to `error`.
typedef struct memopt_collectives {
  int64_t rank;
  int64_t size;
  void *state;
  /// In place on host memory: data[i] = the sum over the ranks of data[i],
  /// `n` f32 values. Every rank gets the same bits.
  int (*all_reduce_sum_f32)(void *state, float *data, int64_t n, char *error,
                            size_t error_size);
  /// Rank `root`'s `bytes` bytes at `data` (host memory) to every rank.
  int (*broadcast)(void *state, void *data, int64_t bytes, int64_t root,
                   char *error, size_t error_size);
  /// out[i] = the sum over the ranks of their input[rank * n + i]: `input`
  /// holds size x `n` f32 values in host memory and each rank receives the
  /// sum of its own slice, `n` values, at `out`, which does not overlap
  /// `input`.
  int (*reduce_scatter_sum_f32)(void *state, const float *input, float *out,
                                int64_t n, char *error, size_t error_size);
  /// In place on host memory: `data` holds size x `bytes` bytes, rank r's
  /// own at r x `bytes`; afterwards every slice holds its rank's bytes.
  int (*all_gather)(void *state, void *data, int64_t bytes, char *error,
                    size_t error_size);
} memopt_collectives;

/// Installs `collectives` (copied; NULL: one rank) for the context's
/// collective entries.
void memopt_set_collectives(memopt_context *ctx,
                            const memopt_collectives *collectives);

/// This process's rank, 0 without collectives.
int64_t memopt_rank(const memopt_context *ctx);

/// The number of ranks, 1 without collectives.
int64_t memopt_world_size(const memopt_context *ctx);

/// `shard.all_reduce` (sum) of data parallelism on `n` f32 elements: out[i]
/// = the sum over the ranks of input[i]; `out` may be `input`. With one
/// rank, a copy. The host runtime reduces through the collectives' f32 sum
/// (MPI); the CUDA runtime through NCCL, on a communicator it creates at
/// the first call from an id that rank 0 broadcasts with the collectives.
void memopt_all_reduce_sum(memopt_context *ctx, memopt_dtype dtype,
                           const void *input, void *out, int64_t n);

/// `shard.reduce_scatter` (sum) of ZeRO (docs/DataParallel.md): `input`
/// holds world_size x `shard` f32 elements and out[i] = the sum over the
/// ranks of their input[rank * shard + i]: each rank gets the sum of its own
/// slice. `out` must not overlap `input`. With one rank, a copy. One call of
/// the collectives' reduce_scatter_sum_f32 on the host runtime
/// (MPI_Reduce_scatter_block), ncclReduceScatter on the CUDA runtime.
void memopt_reduce_scatter_sum(memopt_context *ctx, memopt_dtype dtype,
                               const void *input, void *out, int64_t shard);

/// `shard.all_gather` of ZeRO: out[r * shard + i] = rank r's input[i], for
/// world_size x `shard` elements of any floating dtype. `out` must not
/// overlap `input`. With one rank, a copy. One call of the collectives'
/// all_gather on the host runtime (MPI_Allgather), ncclAllGather on the CUDA
/// runtime.
void memopt_all_gather(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t shard);

/// `shard.all_slice` of ZeRO: out[i] = input[rank * shard + i] for `shard`
/// elements of any floating dtype: the rank's own slice of a tensor every
/// rank holds whole, with no communication.
void memopt_all_slice(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, void *out, int64_t shard);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MEMOPT_RUNTIME_COLLECTIVES_ABI_H */
