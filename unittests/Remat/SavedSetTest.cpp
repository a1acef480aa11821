//===- SavedSetTest.cpp - the least bytes the backward must keep ---------===//

#include "memopt/Remat/SavedSet.h"

#include <gtest/gtest.h>

#include <random>

using namespace memopt;

namespace {

SavedSetValue value(int64_t bytes, bool recomputable,
                    std::vector<int64_t> operands, bool read) {
  SavedSetValue v;
  v.bytes = bytes;
  v.recomputable = recomputable;
  v.operands = std::move(operands);
  v.readByBackward = read;
  return v;
}

// matmul -> relu -> matmul: relu's gradient reads its input, the second
// matmul's weight gradient reads relu's output. Keeping the matmul output
// and recomputing relu keeps one tensor, not two.
TEST(SavedSet, ReluIsRecomputedFromItsInput) {
  std::vector<SavedSetValue> values = {
      value(1024, false, {}, true), // h = matmul(x, w)
      value(1024, true, {0}, true), // r = relu(h)
      value(64, false, {1}, true),  // logits = matmul(r, w2)
  };
  EXPECT_EQ(chooseSavedSet(values), (std::vector<bool>{true, false, true}));
}

// x -> cast (half the bytes) -> matmul: only the cast is read; keep it.
TEST(SavedSet, TheSmallerOfAValueAndItsCast) {
  std::vector<SavedSetValue> values = {
      value(4096, false, {}, false), // x (a norm's output)
      value(2048, true, {0}, true),  // cast(x) to bf16
      value(512, false, {1}, false), // matmul
  };
  EXPECT_EQ(chooseSavedSet(values), (std::vector<bool>{false, true, false}));
  // When x is read too, keep x and recompute the cast: never both.
  values[0].readByBackward = true;
  EXPECT_EQ(chooseSavedSet(values), (std::vector<bool>{true, false, false}));
}

// A read value that only the forward can compute is always kept.
TEST(SavedSet, UnrecomputableReadValuesAreKept) {
  std::vector<SavedSetValue> values = {
      value(100, false, {}, true),
      value(1, true, {0}, false),
      value(100, false, {1}, true),
  };
  EXPECT_EQ(chooseSavedSet(values), (std::vector<bool>{true, false, true}));
}

// A recomputable value of arguments only (a cast of the input) is never
// kept: the backward recomputes it from the arguments.
TEST(SavedSet, ValuesOfArgumentsAreRecomputed) {
  std::vector<SavedSetValue> values = {value(4096, true, {}, true)};
  EXPECT_EQ(chooseSavedSet(values), (std::vector<bool>{false}));
}

// Equal bytes: keep the value the backward reads itself.
TEST(SavedSet, TiesKeepWhatTheBackwardReads) {
  std::vector<SavedSetValue> values = {
      value(1024, false, {}, false), // scores
      value(1024, true, {0}, true),  // softmax output, read
  };
  EXPECT_EQ(chooseSavedSet(values), (std::vector<bool>{false, true}));
}

// A cheap chain read at several points is kept once, at its cheapest cut.
TEST(SavedSet, OneCutForAChainOfCheapOps) {
  std::vector<SavedSetValue> values = {
      value(4096, false, {}, false), // conv output
      value(4096, true, {0}, true),  // batch norm output (read by relu grad)
      value(4096, true, {1}, true),  // relu (read by the next conv)
      value(2048, true, {2}, true),  // cast
  };
  std::vector<bool> keep = chooseSavedSet(values);
  int64_t kept = 0;
  for (size_t i = 0; i < keep.size(); ++i)
    kept += keep[i] ? values[i].bytes : 0;
  EXPECT_EQ(kept, 4096);
}

// Random graphs: the kept set is feasible (every read value is kept or
// recomputable from kept values) and no single value can be dropped.
TEST(SavedSet, RandomGraphsAreFeasibleAndMinimal) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int64_t n = 2 + rng() % 12;
    std::vector<SavedSetValue> values(n);
    for (int64_t i = 0; i < n; ++i) {
      values[i].bytes = 1 + rng() % 100;
      values[i].recomputable = rng() % 3 != 0;
      values[i].readByBackward = rng() % 2;
      for (int64_t j = 0; j < i; ++j)
        if (rng() % 4 == 0)
          values[i].operands.push_back(j);
    }
    std::vector<bool> keep = chooseSavedSet(values);
    auto feasible = [&](const std::vector<bool> &kept) {
      std::vector<bool> have(n);
      for (int64_t i = 0; i < n; ++i) {
        have[i] = kept[i];
        if (!have[i] && values[i].recomputable) {
          have[i] = true;
          for (int64_t operand : values[i].operands)
            have[i] = have[i] && have[operand];
        }
      }
      for (int64_t i = 0; i < n; ++i)
        if (values[i].readByBackward && !have[i])
          return false;
      return true;
    };
    ASSERT_TRUE(feasible(keep)) << "trial " << trial;
    // Exhaustive minimum for small graphs.
    if (n <= 10) {
      int64_t best = INT64_MAX;
      for (int64_t mask = 0; mask < (int64_t{1} << n); ++mask) {
        std::vector<bool> kept(n);
        int64_t bytes = 0;
        for (int64_t i = 0; i < n; ++i)
          if ((kept[i] = (mask >> i) & 1))
            bytes += values[i].bytes;
        if (bytes < best && feasible(kept))
          best = bytes;
      }
      int64_t got = 0;
      for (int64_t i = 0; i < n; ++i)
        got += keep[i] ? values[i].bytes : 0;
      EXPECT_EQ(got, best) << "trial " << trial;
    }
  }
}

} // namespace
