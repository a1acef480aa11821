//===- ParallelTest.cpp - the host kernels' worker threads ----------------===//
//
// parallelFor covers [0, n) with disjoint ranges in order, runs small loops
// on the calling thread, never splits more ways than there are threads, and
// runs a loop started inside another loop on the calling thread.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

using namespace memopt::host;

namespace {

/// The ranges one parallelFor called its body with, sorted.
std::vector<std::pair<int64_t, int64_t>> rangesOf(int64_t n, int64_t grain) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  parallelFor(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    ranges.emplace_back(begin, end);
  });
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ParallelTest, RangesCoverTheLoopOnce) {
  for (int64_t n : {1, 2, 3, 7, 100, 4097, 100003}) {
    for (int64_t grain : {1, 2, 1000}) {
      auto ranges = rangesOf(n, grain);
      ASSERT_FALSE(ranges.empty());
      EXPECT_EQ(ranges.front().first, 0);
      EXPECT_EQ(ranges.back().second, n);
      for (size_t i = 0; i < ranges.size(); ++i) {
        EXPECT_LT(ranges[i].first, ranges[i].second) << "empty range";
        if (i > 0) {
          EXPECT_EQ(ranges[i - 1].second, ranges[i].first)
              << "gap or overlap at " << i << " (n " << n << ")";
        }
      }
      EXPECT_LE(
          static_cast<int64_t>(ranges.size()),
          std::max<int64_t>(1, std::min<int64_t>(threadCount(), n / grain)));
    }
  }
}

TEST(ParallelTest, EveryIterationRunsOnce) {
  constexpr int64_t n = 1 << 18;
  std::vector<std::atomic<int>> visits(n);
  parallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      visits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(visits[i].load(), 1) << "iteration " << i;
}

TEST(ParallelTest, SmallLoopsStayOnTheCallingThread) {
  std::thread::id caller = std::this_thread::get_id(), seen;
  int calls = 0;
  parallelFor(10, 8, [&](int64_t begin, int64_t end) {
    ++calls;
    seen = std::this_thread::get_id();
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, caller);
  parallelFor(0, 1, [&](int64_t, int64_t) { ADD_FAILURE() << "empty loop"; });
}

TEST(ParallelTest, NestedLoopsRunInline) {
  std::atomic<int64_t> total{0};
  parallelFor(64, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::thread::id outer = std::this_thread::get_id();
      parallelFor(1000, 1, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        total.fetch_add(e - b);
      });
    }
  });
  EXPECT_EQ(total.load(), 64 * 1000);
}

TEST(ParallelTest, ManyLoopsInARow) {
  // The workers acknowledge every loop before the next one is published.
  std::vector<int64_t> sums(4096, 0);
  for (int64_t round = 0; round < 2000; ++round)
    parallelFor(4096, 256, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        sums[i] += i;
    });
  for (int64_t i = 0; i < 4096; ++i)
    ASSERT_EQ(sums[i], 2000 * i);
}

} // namespace
