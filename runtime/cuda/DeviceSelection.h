//===- DeviceSelection.h - which GPU a rank uses -----------------*- C++ -*-===//
//
// Data parallelism runs one rank per GPU. A rank learns its place on its node
// from the launcher's environment (OpenMPI's OMPI_COMM_WORLD_LOCAL_RANK,
// MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID, torchrun's LOCAL_RANK, in
// that order) and takes device `local rank mod device count` before it
// creates anything on a device, so that ranks on one node never share
// device 0 (NCCL refuses that: "Duplicate GPU detected"). Without a local
// rank (one process) it keeps the current device. CUDA_VISIBLE_DEVICES
// still narrows what it counts. Plain C++: the unit tests run it without a
// device.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_DEVICESELECTION_H
#define MEMOPT_RUNTIME_CUDA_DEVICESELECTION_H

#include <cstdlib>
#include <optional>
#include <string>

namespace memopt {
namespace cuda {

/// The launchers' local-rank variables, in the order they are read.
inline constexpr const char *kLocalRankVariables[] = {
    "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
    "LOCAL_RANK"};

/// This process's rank on its node, from `lookup(name)` (getenv by
/// default): the first variable set to a non-negative integer.
template <typename Lookup>
std::optional<long> findLocalRank(Lookup &&lookup) {
  for (const char *name : kLocalRankVariables) {
    const char *value = lookup(name);
    if (!value || !*value)
      continue;
    char *end = nullptr;
    long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0)
      return rank;
  }
  return std::nullopt;
}

inline std::optional<long> findLocalRank() {
  return findLocalRank([](const char *name) { return std::getenv(name); });
}

/// The device a process of local rank `localRank` uses among `count`
/// (count > 0); none to keep the current device.
inline std::optional<int> chooseDevice(std::optional<long> localRank,
                                       int count) {
  if (!localRank || count <= 0)
    return std::nullopt;
  return static_cast<int>(*localRank % count);
}

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_DEVICESELECTION_H
