//===- RematScheduleTest.cpp - revolve and the budget chain DP ------------===//

#include "memopt/Remat/RematSchedule.h"

#include <gtest/gtest.h>

#include <random>

using namespace memopt;

namespace {

TEST(Revolve, ClosedFormMatchesReferenceValues) {
  EXPECT_EQ(getRevolveForwardSteps(10, 1), 45);
  EXPECT_EQ(getRevolveForwardSteps(100, 10), 222);
  EXPECT_EQ(getRevolveForwardSteps(1000, 10), 3636);
  EXPECT_EQ(getRevolveForwardSteps(1000, 7), 4713);
  EXPECT_EQ(getRevolveForwardSteps(1, 3), 0);
  EXPECT_EQ(getRevolveForwardSteps(5, 5), 4);
}

TEST(Revolve, ScheduleRecomputesExactlyT) {
  for (auto [l, s] : {std::pair<int64_t, int64_t>{10, 1}, {100, 10},
                      {1000, 10}, {1000, 7}})
    EXPECT_EQ(buildRevolveSchedule(l, s).getRecomputedStages(),
              getRevolveForwardSteps(l, s))
        << "l=" << l << " s=" << s;
  for (int64_t l = 1; l <= 40; ++l)
    for (int64_t s = 1; s <= 6; ++s) {
      ChainSchedule schedule = buildRevolveSchedule(l, s);
      EXPECT_EQ(schedule.getRecomputedStages(), getRevolveForwardSteps(l, s))
          << "l=" << l << " s=" << s;
      // Boundary 0 is the arguments: s slots hold at most s - 1 others.
      EXPECT_LE(schedule.getMaxSnapshots(), s) << "l=" << l << " s=" << s;
    }
}

TEST(Revolve, EveryAdvanceStartsFromAHeldSnapshot) {
  ChainSchedule schedule = buildRevolveSchedule(50, 3);
  std::vector<bool> held = schedule.keptInForward;
  held[0] = true;
  for (int64_t turn = 49; turn >= 0; --turn)
    for (auto [from, to] : schedule.advancesBefore[turn]) {
      EXPECT_TRUE(held[from]) << "turn " << turn << " from " << from;
      EXPECT_LT(from, to);
      EXPECT_LE(to, turn);
      held[to] = true;
    }
}

TEST(Revolve, LogarithmicSnapshots) {
  EXPECT_EQ(getLogarithmicSnapshots(1), 1);
  EXPECT_EQ(getLogarithmicSnapshots(6), 2);
  EXPECT_EQ(getLogarithmicSnapshots(7), 3);
  EXPECT_EQ(getLogarithmicSnapshots(128), 5); // C(10, 5) = 252
}

TEST(Schedules, BlocksAndSqrt) {
  EXPECT_EQ(buildBlocksSchedule(8).getRecomputedStages(), 7);
  ChainSchedule sqrt = buildSqrtSchedule(16);
  EXPECT_TRUE(sqrt.keptInForward[4] && sqrt.keptInForward[8] &&
              sqrt.keptInForward[12]);
  EXPECT_FALSE(sqrt.keptInForward[5]);
  EXPECT_EQ(sqrt.firstKeptStage, 12);
}

/// The least-recompute plan by trying all 3^n plans.
std::optional<ChainCost> exhaustive(const std::vector<ChainStage> &chain,
                                    int64_t budget) {
  size_t n = chain.size();
  std::vector<StageChoice> plan(n);
  std::optional<ChainCost> best;
  int64_t total = 1;
  for (size_t i = 0; i < n; ++i)
    total *= 3;
  for (int64_t code = 0; code < total; ++code) {
    int64_t c = code;
    for (size_t i = 0; i < n; ++i, c /= 3)
      plan[i] = static_cast<StageChoice>(c % 3);
    std::optional<ChainCost> cost = evaluateChainPlan(chain, plan);
    if (!cost || cost->peakBytes > budget)
      continue;
    if (!best || cost->recomputeFlops < best->recomputeFlops ||
        (cost->recomputeFlops == best->recomputeFlops &&
         cost->peakBytes < best->peakBytes))
      best = cost;
  }
  return best;
}

TEST(ChainBudget, MatchesExhaustiveSearchOnRandomChains) {
  std::mt19937_64 rng(7);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    size_t n = 1 + rng() % 7;
    std::vector<ChainStage> chain(n);
    for (size_t i = 0; i < n; ++i) {
      chain[i].inputBytes = i ? 1 + rng() % 8 : 0;
      chain[i].savedBytes = rng() % 24;
      chain[i].flops = rng() % 50;
    }
    int64_t minPeak = getMinimumChainPeak(chain);
    std::optional<ChainCost> all = exhaustive(chain, INT64_MAX);
    ASSERT_TRUE(all);
    for (int64_t budget = minPeak - 1; budget <= minPeak + 60; budget += 3) {
      std::optional<ChainCost> expected = exhaustive(chain, budget);
      std::optional<std::vector<StageChoice>> plan =
          solveChainBudget(chain, budget);
      ASSERT_EQ(expected.has_value(), plan.has_value())
          << "trial " << trial << " budget " << budget;
      if (!plan)
        continue;
      std::optional<ChainCost> got = evaluateChainPlan(chain, *plan);
      ASSERT_TRUE(got);
      EXPECT_EQ(got->recomputeFlops, expected->recomputeFlops)
          << "trial " << trial << " budget " << budget;
      EXPECT_EQ(got->peakBytes, expected->peakBytes);
      EXPECT_LE(got->peakBytes, budget);
      ++checked;
    }
    EXPECT_FALSE(solveChainBudget(chain, minPeak - 1));
  }
  EXPECT_GT(checked, 1000);
}

TEST(ChainBudget, RecomputeIsMonotoneInTheBudget) {
  std::vector<ChainStage> chain(40, ChainStage{100, 900, 10});
  chain[0].inputBytes = 0;
  int64_t previous = INT64_MAX;
  for (int64_t budget = getMinimumChainPeak(chain); budget <= 40500;
       budget += 500) {
    auto plan = solveChainBudget(chain, budget);
    ASSERT_TRUE(plan);
    int64_t flops = evaluateChainPlan(chain, *plan)->recomputeFlops;
    EXPECT_LE(flops, previous);
    previous = flops;
  }
  EXPECT_EQ(previous, 0);
}

} // namespace
