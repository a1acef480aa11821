//===- CudaWorkspaceTest.cpp - the CUDA workspace's slices ----------------===//
//
// Without a device: WorkspaceLayout.h's library, scratch and error-record
// slices of the context's workspace are aligned, disjoint and cover it;
// PlanCache.h makes each plan once per key and releases it with the cache.
//
//===----------------------------------------------------------------------===//

#include "DeviceSelection.h"
#include "WorkspaceLayout.h"
#include "memopt/runtime.h"
#include "memopt/runtime/PlanCache.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

using namespace memopt::cuda;
using memopt::runtime::PlanCache;

namespace {

void expectValidLayout(uint64_t total) {
  SCOPED_TRACE(total);
  WorkspaceLayout layout = layoutWorkspace(total);
  EXPECT_EQ(layout.libraryOffset, 0u);
  EXPECT_EQ(layout.scratchOffset % kWorkspaceAlignment, 0u);
  EXPECT_EQ(layout.errorOffset % kWorkspaceAlignment, 0u);
  EXPECT_EQ(layout.libraryOffset + layout.libraryBytes, layout.scratchOffset);
  EXPECT_EQ(layout.scratchOffset + layout.scratchBytes, layout.errorOffset);
  EXPECT_LE(layout.errorOffset + kDeviceErrorBytes, total);
  // Nothing but the alignment is left over at the end.
  EXPECT_LT(total - layout.errorOffset - kDeviceErrorBytes,
            kWorkspaceAlignment);
  // The two halves differ by at most one alignment unit.
  uint64_t larger = std::max(layout.libraryBytes, layout.scratchBytes);
  uint64_t smaller = std::min(layout.libraryBytes, layout.scratchBytes);
  EXPECT_LE(larger - smaller, kWorkspaceAlignment);
}

TEST(CudaWorkspaceLayoutTest, TheRuntimesWorkspace) {
  constexpr WorkspaceLayout layout =
      layoutWorkspace(MEMOPT_CUDA_WORKSPACE_BYTES);
  expectValidLayout(MEMOPT_CUDA_WORKSPACE_BYTES);
  EXPECT_EQ(layout.libraryBytes, 16u << 20) << "16 MiB for cuBLASLt/cuDNN";
  EXPECT_EQ(layout.scratchBytes, (16u << 20) - kWorkspaceAlignment);
  EXPECT_EQ(layout.errorOffset,
            MEMOPT_CUDA_WORKSPACE_BYTES - kDeviceErrorBytes);
}

TEST(CudaWorkspaceLayoutTest, UnalignedAndSmallSizes) {
  for (uint64_t total :
       {uint64_t{256}, uint64_t{511}, uint64_t{512}, uint64_t{1000},
        uint64_t{4096}, uint64_t{1} << 20, (uint64_t{1} << 20) + 77})
    expectValidLayout(total);
  WorkspaceLayout smallest = layoutWorkspace(kDeviceErrorBytes);
  EXPECT_EQ(smallest.libraryBytes + smallest.scratchBytes, 0u);
}

/// A plan that counts how many of its kind are alive.
struct CountedPlan {
  static inline int alive = 0;
  int made = 0;
  CountedPlan() { ++alive; }
  ~CountedPlan() { --alive; }
};

TEST(CudaPlanCacheTest, MakesEachPlanOncePerKey) {
  using Key = std::tuple<int, int>;
  int makes = 0;
  auto make = [&](CountedPlan &plan) {
    plan.made = ++makes;
    return true;
  };
  {
    PlanCache<Key, CountedPlan> cache;
    CountedPlan *first = cache.get({1, 2}, make);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(cache.get({1, 2}, make), first) << "the same plan again";
    CountedPlan *second = cache.get({2, 1}, make);
    ASSERT_NE(second, nullptr);
    EXPECT_NE(second, first);
    EXPECT_EQ(makes, 2);
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(CountedPlan::alive, 2);
    cache.clear();
    EXPECT_EQ(CountedPlan::alive, 0);
    EXPECT_EQ(cache.get({1, 2}, make)->made, 3) << "made again after clear";
  }
  EXPECT_EQ(CountedPlan::alive, 0) << "the cache releases its plans";
}

TEST(CudaPlanCacheTest, AFailedMakeCachesNothing) {
  PlanCache<int, CountedPlan> cache;
  int attempts = 0;
  EXPECT_EQ(cache.get(7, [&](CountedPlan &) { return ++attempts > 1; }),
            nullptr);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(CountedPlan::alive, 0);
  EXPECT_NE(cache.get(7, [&](CountedPlan &) { return ++attempts > 1; }),
            nullptr)
      << "the next call tries again";
  EXPECT_EQ(attempts, 2);
}

/// Each rank takes its local rank's device, modulo the devices; the
/// launchers' variables are read in order; without one, or with a value
/// that is not a non-negative integer, the current device stays.
TEST(DeviceSelectionTest, LocalRankPicksTheDevice) {
  std::map<std::string, std::string> env;
  auto lookup = [&](const char *name) -> const char * {
    auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  };
  EXPECT_EQ(findLocalRank(lookup), std::nullopt);
  EXPECT_EQ(chooseDevice(findLocalRank(lookup), 8), std::nullopt);
  env["LOCAL_RANK"] = "3";
  EXPECT_EQ(chooseDevice(findLocalRank(lookup), 8), 3);
  env["SLURM_LOCALID"] = "5";
  EXPECT_EQ(chooseDevice(findLocalRank(lookup), 8), 5);
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "9";
  EXPECT_EQ(chooseDevice(findLocalRank(lookup), 8), 1);
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "x";
  env["MPI_LOCALRANKID"] = "-1";
  EXPECT_EQ(chooseDevice(findLocalRank(lookup), 8), 5);
  EXPECT_EQ(chooseDevice(findLocalRank(lookup), 0), std::nullopt);
}

} // namespace
