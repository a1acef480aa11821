//===- Mpi.cpp - data parallelism's collectives on MPI --------------------===//
//
// The driver's collectives for a data-parallel program (memopt-compile
// --data-parallel=N links this archive whole): MPI_COMM_WORLD is the ranks.
// Sums are MPI_Allreduce in place on f32 (every rank gets the same bits:
// MPI's reduction is one order for all) in chunks below 2^31 elements;
// ZeRO's reduce-scatter is MPI_Reduce_scatter_block and its all-gather
// MPI_Allgather, one call each.
// MPI's default error handler ends the job on a communication failure, and a
// rank that fails calls MPI_Abort, so no rank waits for a dead one.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>

namespace {

void describe(int code, char *error, size_t size) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "MPI error %d", code);
  std::snprintf(error, size, "%s", text);
}

int allReduceSum(void *, float *data, int64_t n, char *error, size_t size) {
  for (int64_t done = 0; done < n;) {
    int count = static_cast<int>(std::min<int64_t>(n - done, INT_MAX));
    int code = MPI_Allreduce(MPI_IN_PLACE, data + done, count, MPI_FLOAT,
                             MPI_SUM, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) {
      describe(code, error, size);
      return code;
    }
    done += count;
  }
  return 0;
}

int broadcast(void *, void *data, int64_t bytes, int64_t root, char *error,
              size_t size) {
  auto *p = static_cast<char *>(data);
  for (int64_t done = 0; done < bytes;) {
    int count = static_cast<int>(std::min<int64_t>(bytes - done, INT_MAX));
    int code = MPI_Bcast(p + done, count, MPI_BYTE, static_cast<int>(root),
                         MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) {
      describe(code, error, size);
      return code;
    }
    done += count;
  }
  return 0;
}

int worldSize() {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  return ranks;
}

/// One MPI_Reduce_scatter_block; a slice of 2^31 elements or more is
/// reduced to each owner in chunks instead (MPI counts are ints).
int reduceScatterSum(void *, const float *input, float *out, int64_t n,
                     char *error, size_t size) {
  int code = MPI_SUCCESS;
  if (n <= INT_MAX) {
    code = MPI_Reduce_scatter_block(input, out, static_cast<int>(n), MPI_FLOAT,
                                    MPI_SUM, MPI_COMM_WORLD);
  } else {
    for (int root = 0; root < worldSize() && code == MPI_SUCCESS; ++root)
      for (int64_t done = 0; done < n && code == MPI_SUCCESS;) {
        int count = static_cast<int>(std::min<int64_t>(n - done, INT_MAX));
        code = MPI_Reduce(input + root * n + done, out + done, count, MPI_FLOAT,
                          MPI_SUM, root, MPI_COMM_WORLD);
        done += count;
      }
  }
  if (code != MPI_SUCCESS)
    describe(code, error, size);
  return code;
}

/// One MPI_Allgather in place; a slice of 2^31 bytes or more is broadcast
/// from each owner in chunks instead.
int allGather(void *state, void *data, int64_t bytes, char *error,
              size_t size) {
  if (bytes <= INT_MAX) {
    int code = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data,
                             static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS)
      describe(code, error, size);
    return code;
  }
  for (int root = 0; root < worldSize(); ++root)
    if (int code = broadcast(state, static_cast<char *>(data) + root * bytes,
                             bytes, root, error, size))
      return code;
  return 0;
}

} // namespace

extern "C" int memopt_driver_start_collectives(memopt_collectives *collectives,
                                               char *error, size_t size) {
  int code = MPI_Init(nullptr, nullptr);
  int rank = 0, ranks = 1;
  if (code == MPI_SUCCESS)
    code = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (code != MPI_SUCCESS) {
    describe(code, error, size);
    return code;
  }
  *collectives = {rank,         ranks,     nullptr,
                  allReduceSum, broadcast, reduceScatterSum,
                  allGather};
  return 0;
}

extern "C" void memopt_driver_abort_collectives(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

extern "C" void memopt_driver_stop_collectives(void) { MPI_Finalize(); }
