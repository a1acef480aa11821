//===- PlacementTest.cpp - Tests of the buffer placer and its CSV reader --===//

#include "memopt/Planning/Placement.h"
#include "memopt/Planning/PlanChecker.h"
#include "memopt/Planning/ProblemCSV.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <random>
#include <sstream>

using namespace memopt;

namespace {

std::vector<Buffer> randomProblem(std::mt19937 &rng, int n, int horizon,
                                  int maxSize) {
  std::uniform_int_distribution<int> time(0, horizon - 1);
  std::uniform_int_distribution<int> size(1, maxSize);
  std::vector<Buffer> buffers;
  for (int i = 0; i < n; ++i) {
    int a = time(rng), b = time(rng);
    if (a > b)
      std::swap(a, b);
    buffers.push_back({i, a, b + 1, size(rng)});
  }
  return buffers;
}

/// Smallest arena by exhaustive search over every integer offset; written
/// without any of the placer's ideas so that it can judge the exact search.
int64_t bruteForceArena(const std::vector<Buffer> &buffers) {
  int64_t total = 0;
  for (const Buffer &b : buffers)
    total += b.size;
  int64_t best = total;
  std::vector<int64_t> offsets(buffers.size());
  std::function<void(size_t, int64_t)> place = [&](size_t i, int64_t arena) {
    if (arena >= best)
      return;
    if (i == buffers.size()) {
      best = arena;
      return;
    }
    const Buffer &b = buffers[i];
    for (int64_t off = 0; off + b.size < best; ++off) {
      bool ok = true;
      for (size_t j = 0; j < i && ok; ++j) {
        const Buffer &c = buffers[j];
        bool liveTogether = b.lower < c.upper && c.lower < b.upper;
        bool shareMemory =
            off < offsets[j] + c.size && offsets[j] < off + b.size;
        ok = !(liveTogether && shareMemory);
      }
      if (!ok)
        continue;
      offsets[i] = off;
      place(i + 1, std::max(arena, off + b.size));
    }
  };
  place(0, 0);
  return best;
}

void expectValid(const std::vector<Buffer> &buffers, const Placement &p,
                 int64_t alignment = 1) {
  auto error = checkPlacement(buffers, p.offsets, p.arenaSize, alignment);
  EXPECT_FALSE(error) << *error;
  EXPECT_GE(p.arenaSize, p.lowerBound);
  EXPECT_EQ(p.lowerBound, computeLowerBound(buffers, alignment));
}

TEST(PlacementTest, LowerBoundCountsOnlySimultaneousBuffers) {
  // Half-open: the first two never coexist.
  std::vector<Buffer> buffers = {{0, 0, 2, 10}, {1, 2, 4, 20}, {2, 1, 3, 5}};
  EXPECT_EQ(computeLowerBound(buffers), 25);
  EXPECT_EQ(computeLowerBound(buffers, 16), 48);
  EXPECT_EQ(computeLowerBound({}), 0);
}

TEST(PlacementTest, EmptyAndTrivialProblems) {
  Placement p = placeBuffers({});
  EXPECT_EQ(p.arenaSize, 0);
  EXPECT_TRUE(p.offsets.empty());
  std::vector<Buffer> zero = {{0, 0, 5, 0}, {1, 0, 5, 0}};
  p = placeBuffers(zero);
  EXPECT_EQ(p.arenaSize, 0);
  expectValid(zero, p);
}

TEST(PlacementTest, ReachesLowerBoundWhenAchievable) {
  // A staircase and a chain that reuses memory: LB is achievable.
  std::vector<Buffer> buffers = {{0, 0, 4, 30}, {1, 1, 3, 20}, {2, 3, 6, 20},
                                 {3, 4, 8, 30}, {4, 6, 9, 10}, {5, 8, 10, 40}};
  Placement p = placeBuffers(buffers);
  expectValid(buffers, p);
  EXPECT_EQ(p.arenaSize, p.lowerBound);
  EXPECT_TRUE(p.provenOptimal);
}

TEST(PlacementTest, AlignsOffsetsAndSizes) {
  std::vector<Buffer> buffers = {{0, 0, 3, 100}, {1, 1, 4, 300}, {2, 2, 5, 1}};
  Placement p = placeBuffers(buffers, {/*alignment=*/256});
  expectValid(buffers, p, 256);
  EXPECT_EQ(p.lowerBound, 256 + 512 + 256);
  EXPECT_EQ(p.arenaSize, p.lowerBound);
  for (int64_t offset : p.offsets)
    EXPECT_EQ(offset % 256, 0);
}

TEST(PlacementTest, StackBuffersGivesEveryBufferItsOwnBytes) {
  // Buffers 0 and 2 never live together; the no-reuse plan still keeps them
  // apart, in the order given, each rounded up to the alignment.
  std::vector<Buffer> buffers = {{0, 0, 2, 100}, {1, 1, 4, 300}, {2, 2, 5, 256},
                                 {3, 7, 7, 10},  {4, 5, 6, 0},   {5, 5, 6, 1}};
  Placement p = stackBuffers(buffers, 256);
  expectValid(buffers, p, 256);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 256, 768, 1024, 1280, 1280}));
  EXPECT_EQ(p.arenaSize, 1536);
  EXPECT_EQ(p.lowerBound, 512 + 256);
  EXPECT_EQ(p.method, "no-reuse");
  EXPECT_FALSE(p.provenOptimal);
  // Pairwise disjoint byte ranges, not merely disjoint while live.
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j)
      EXPECT_TRUE(p.offsets[i] + alignUp(buffers[i].size, 256) <=
                      p.offsets[j] ||
                  p.offsets[j] + alignUp(buffers[j].size, 256) <= p.offsets[i])
          << i << " and " << j;
  Placement empty = stackBuffers({}, 256);
  EXPECT_EQ(empty.arenaSize, 0);
  EXPECT_TRUE(empty.provenOptimal);
  // Without alignment the arena is the plain sum, here also the bound.
  std::vector<Buffer> chain = {{0, 0, 3, 7}, {1, 1, 3, 5}};
  Placement q = stackBuffers(chain);
  EXPECT_EQ(q.offsets, (std::vector<int64_t>{0, 7}));
  EXPECT_EQ(q.arenaSize, 12);
  EXPECT_TRUE(q.provenOptimal);
}

TEST(PlacementTest, RandomInstancesAlwaysPassTheChecker) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    auto buffers = randomProblem(rng, 1 + round % 60, 40, 1000);
    PlacementOptions options;
    options.alignment = round % 3 == 0 ? 64 : 1;
    options.timeLimitSeconds = 0.01;
    Placement p = placeBuffers(buffers, options);
    expectValid(buffers, p, options.alignment);
  }
}

TEST(PlacementTest, LargeTraceLikeInstanceIsFast) {
  // Like the real traces: mostly short lifetimes, a few long-lived buffers.
  std::mt19937 rng(99);
  std::vector<Buffer> buffers;
  for (int i = 0; i < 30000; ++i) {
    int64_t lower = rng() % 20000;
    int64_t length = i % 50 == 0 ? 1 + rng() % 20000 : 1 + rng() % 8;
    buffers.push_back(
        {i, lower, lower + length, 1 + int64_t(rng() % (1 << 20))});
  }
  PlacementOptions options;
  options.timeLimitSeconds = 0;
  Placement p = placeBuffers(buffers, options);
  expectValid(buffers, p);
  EXPECT_LT(p.arenaSize, 2 * p.lowerBound);
}

TEST(PlacementTest, ExactSearchMatchesBruteForce) {
  std::mt19937 rng(7);
  int searched = 0;
  for (int round = 0; round < 300; ++round) {
    auto buffers = randomProblem(rng, 3 + round % 4, 6, 5);
    int64_t optimum = bruteForceArena(buffers);
    // With the heuristics, and with the exact search alone.
    for (bool heuristics : {true, false}) {
      PlacementOptions options;
      options.timeLimitSeconds = 10;
      options.runHeuristics = heuristics;
      Placement p = placeBuffers(buffers, options);
      expectValid(buffers, p);
      EXPECT_EQ(p.arenaSize, optimum)
          << "round " << round << (heuristics ? "" : " (search only)");
      EXPECT_TRUE(p.provenOptimal);
      searched += p.searchNodes > 0;
    }
  }
  // The instances must exercise the search, not just the heuristics.
  EXPECT_GT(searched, 100);
}

TEST(PlacementTest, ExactSearchMatchesBruteForceOnLargerInstances) {
  // More buffers, longer horizon: the search has to use its pruning,
  // dominance and decomposition rules, and must still be exact.
  std::mt19937 rng(11);
  for (int round = 0; round < 60; ++round) {
    auto buffers = randomProblem(rng, 7 + round % 2, 10, 4);
    int64_t optimum = bruteForceArena(buffers);
    PlacementOptions options;
    options.timeLimitSeconds = 10;
    options.runHeuristics = false;
    Placement p = placeBuffers(buffers, options);
    expectValid(buffers, p);
    EXPECT_EQ(p.arenaSize, optimum) << "round " << round;
    EXPECT_TRUE(p.provenOptimal);
  }
}

TEST(PlacementTest, SearchWorksInUnitsOfTheSizesGcd) {
  // Sizes sharing a factor (here 96, with alignment 32): the optimum scales
  // with the factor, offsets stay aligned.
  std::mt19937 rng(3);
  for (int round = 0; round < 40; ++round) {
    auto small = randomProblem(rng, 4 + round % 3, 6, 5);
    int64_t optimum = bruteForceArena(small);
    std::vector<Buffer> scaled = small;
    for (Buffer &b : scaled)
      b.size *= 96;
    for (bool heuristics : {true, false}) {
      PlacementOptions options;
      options.alignment = 32;
      options.timeLimitSeconds = 10;
      options.runHeuristics = heuristics;
      Placement p = placeBuffers(scaled, options);
      expectValid(scaled, p, 32);
      EXPECT_EQ(p.arenaSize, 96 * optimum) << "round " << round;
    }
  }
}

TEST(PlacementTest, ImprovementLoopIsDeterministicWithinItsRoundCap) {
  // Large enough that the greedy orders rarely hit LB; small enough that the
  // improvement rounds end by their cap, not by the time budget.
  std::mt19937 rng(21);
  auto buffers = randomProblem(rng, 400, 200, 1 << 12);
  PlacementOptions options;
  options.timeLimitSeconds = 30;
  options.exactSearchMaxBuffers = 0; // heuristics only
  options.improvementRounds = 8;
  Placement a = placeBuffers(buffers, options);
  Placement b = placeBuffers(buffers, options);
  expectValid(buffers, a);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.method, b.method);
}

TEST(PlacementTest, IsDeterministic) {
  std::mt19937 rng(5);
  auto buffers = randomProblem(rng, 300, 100, 4096);
  PlacementOptions options;
  options.timeLimitSeconds = 0;
  EXPECT_EQ(placeBuffers(buffers, options).offsets,
            placeBuffers(buffers, options).offsets);
}

//===----------------------------------------------------------------------===//
// CSV reader
//===----------------------------------------------------------------------===//

bool parse(const std::string &text, std::vector<Buffer> &buffers,
           std::string &error) {
  std::istringstream input(text);
  return parseProblemCSV(input, "p.csv", buffers, error);
}

TEST(ProblemCSVTest, ParsesBothHeaders) {
  std::vector<Buffer> buffers;
  std::string error;
  ASSERT_TRUE(
      parse("id,lower,upper,size\n3,0,2,10\r\n\n4,1,5,7\n", buffers, error))
      << error;
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[1].id, 4);
  EXPECT_EQ(buffers[1].upper, 5);
  ASSERT_TRUE(parse("id,lower,upper,size,offset\n0,0,1,5,99\n", buffers, error))
      << error;
  EXPECT_EQ(buffers[0].size, 5);
}

TEST(ProblemCSVTest, ReportsErrorsWithLineNumbers) {
  std::vector<Buffer> buffers;
  std::string error;
  struct Case {
    const char *text;
    const char *message;
  } cases[] = {
      {"", "p.csv:1: missing header"},
      {"id,size\n", "p.csv:1: expected the header"},
      {"id,lower,upper,size\n0,0,1\n", "p.csv:2: expected 4 fields, got 3"},
      {"id,lower,upper,size\n0,0,x,1\n",
       "p.csv:2: field 'upper' is not a 64-bit integer: 'x'"},
      {"id,lower,upper,size\n0,0,1,99999999999999999999\n",
       "p.csv:2: field 'size' is not a 64-bit integer"},
      {"id,lower,upper,size\n0,0,1,-4\n", "p.csv:2: negative size -4"},
      {"id,lower,upper,size\n0,3,3,4\n",
       "p.csv:2: empty lifetime for buffer 0"},
      {"id,lower,upper,size\n5,0,1,4\n6,0,1,4\n5,1,2,4\n",
       "p.csv:4: duplicate id 5 (first defined on line 2)"},
  };
  for (const Case &c : cases) {
    EXPECT_FALSE(parse(c.text, buffers, error)) << c.text;
    EXPECT_EQ(error.rfind(c.message, 0), 0u) << error;
  }
}

TEST(ProblemCSVTest, MissingFile) {
  std::vector<Buffer> buffers;
  std::string error;
  EXPECT_FALSE(readProblemCSV("/nonexistent/p.csv", buffers, error));
  EXPECT_NE(error.find("cannot open '/nonexistent/p.csv'"), std::string::npos);
}

} // namespace
