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

namespace {

/// A random DAG of `size` values, `candidates` of them Candidate, a few
/// Kept, the rest Recomputed; backward reads at random positions.
std::vector<GraphValue> makeRandomGraph(std::mt19937 &random, int size,
                                        int candidates) {
  std::uniform_int_distribution<int64_t> bytes(1, 8), flops(0, 20),
      position(0, 2 * size);
  std::vector<GraphValue> graph(size);
  std::vector<int> order(size);
  for (int v = 0; v < size; ++v)
    order[v] = v;
  std::shuffle(order.begin(), order.end(), random);
  for (int v = 0; v < size; ++v) {
    GraphValue &value = graph[v];
    value.bytes = bytes(random) * 256;
    value.flops = flops(random);
    for (int u = 0; u < v; ++u)
      if (random() % 3 == 0)
        value.operands.push_back(u);
    if (random() % 4 != 0) {
      int64_t a = position(random), b = position(random);
      value.firstUse = std::min(a, b);
      value.lastUse = std::max(a, b);
    }
  }
  for (int i = 0; i < size; ++i) {
    GraphValue &value = graph[order[i]];
    if (i < candidates)
      value.kind = GraphValue::Kind::Candidate;
    else if (i == candidates)
      value.kind = GraphValue::Kind::Kept;
  }
  return graph;
}

} // namespace

TEST(GraphBudget, MatchesExhaustiveSearchOnRandomGraphs) {
  std::mt19937 random(7);
  int solved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int size = 3 + trial % 10;
    int candidates = std::min(size - 1, 1 + trial % 9);
    std::vector<GraphValue> graph = makeRandomGraph(random, size, candidates);
    std::vector<bool> all(candidates, true), none(candidates, false);
    int64_t low = evaluateGraphPlan(graph, none)->peakBytes;
    int64_t high = evaluateGraphPlan(graph, all)->peakBytes;
    for (int64_t budget : {low - 256, low, (low + high) / 2, high - 256, high}) {
      // Exhaustive: least recompute, then least peak, over all 2^c choices.
      std::optional<GraphCost> expected;
      for (uint32_t mask = 0; mask < (1u << candidates); ++mask) {
        std::vector<bool> keep(candidates);
        for (int i = 0; i < candidates; ++i)
          keep[i] = (mask >> i) & 1;
        GraphCost cost = *evaluateGraphPlan(graph, keep);
        if (cost.peakBytes > budget)
          continue;
        if (!expected || cost.recomputeFlops < expected->recomputeFlops ||
            (cost.recomputeFlops == expected->recomputeFlops &&
             cost.peakBytes < expected->peakBytes))
          expected = cost;
      }
      std::optional<std::vector<bool>> plan = solveGraphBudget(graph, budget);
      ASSERT_EQ(plan.has_value(), expected.has_value())
          << "trial " << trial << " budget " << budget;
      if (!plan)
        continue;
      ++solved;
      GraphCost cost = *evaluateGraphPlan(graph, *plan);
      EXPECT_LE(cost.peakBytes, budget) << "trial " << trial;
      EXPECT_EQ(cost.recomputeFlops, expected->recomputeFlops)
          << "trial " << trial << " budget " << budget;
      EXPECT_EQ(cost.peakBytes, expected->peakBytes)
          << "trial " << trial << " budget " << budget;
    }
  }
  EXPECT_GT(solved, 600);
}

TEST(GraphBudget, TwoBranchesRecomputeTheCheaperOne) {
  // Two parallel branches of 1 KiB each: a (cheap, read at 5) and b (costly,
  // read at 3 and 4). Keeping both takes 2 KiB; with 1 KiB, only recomputing
  // a after b's last read fits.
  std::vector<GraphValue> graph(2);
  graph[0] = {GraphValue::Kind::Candidate, 1024, 10, {}, 5, 5};
  graph[1] = {GraphValue::Kind::Candidate, 1024, 1000, {}, 3, 4};
  EXPECT_EQ(evaluateGraphPlan(graph, {true, true})->peakBytes, 2048);
  EXPECT_EQ(evaluateGraphPlan(graph, {true, false})->peakBytes, 2048);
  EXPECT_EQ(*solveGraphBudget(graph, 2048), (std::vector<bool>{true, true}));
  std::optional<std::vector<bool>> plan = solveGraphBudget(graph, 1024);
  ASSERT_TRUE(plan);
  EXPECT_EQ(*plan, (std::vector<bool>{false, true}));
  EXPECT_EQ(evaluateGraphPlan(graph, *plan)->recomputeFlops, 10);
  EXPECT_FALSE(solveGraphBudget(graph, 512));
  // Clones are shared: recomputing both values runs their common producer
  // once.
  std::vector<GraphValue> shared(3);
  shared[0] = {GraphValue::Kind::Recomputed, 256, 7, {}, -1, -1};
  shared[1] = {GraphValue::Kind::Candidate, 256, 1, {0}, 1, 1};
  shared[2] = {GraphValue::Kind::Candidate, 256, 2, {0}, 2, 2};
  EXPECT_EQ(evaluateGraphPlan(shared, {false, false})->recomputeFlops, 10);
  EXPECT_EQ(evaluateGraphPlan(shared, {true, false})->recomputeFlops, 9);
}

TEST(GraphBudget, RefusesMoreCandidatesThanTheCutoff) {
  std::vector<GraphValue> graph(kMaxGraphSearchCandidates + 1);
  for (GraphValue &value : graph)
    value = {GraphValue::Kind::Candidate, 256, 1, {}, 0, 0};
  EXPECT_FALSE(solveGraphBudget(graph, 1 << 30));
  graph.pop_back();
  EXPECT_TRUE(solveGraphBudget(graph, 1 << 30));
}

TEST(GraphBudget, TwentyCandidatesStaySmall) {
  // The cutoff's worst case stays well under the pass's time: random graphs
  // of 40 values with 20 candidates, at budgets across the range.
  std::mt19937 random(11);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<GraphValue> graph =
        makeRandomGraph(random, 40, kMaxGraphSearchCandidates);
    std::vector<bool> all(kMaxGraphSearchCandidates, true),
        none(kMaxGraphSearchCandidates, false);
    int64_t low = evaluateGraphPlan(graph, none)->peakBytes;
    int64_t high = evaluateGraphPlan(graph, all)->peakBytes;
    for (int step = 0; step <= 4; ++step) {
      int64_t budget = low + (high - low) * step / 4;
      std::optional<std::vector<bool>> plan = solveGraphBudget(graph, budget);
      ASSERT_TRUE(plan);
      EXPECT_LE(evaluateGraphPlan(graph, *plan)->peakBytes, budget);
    }
  }
}
