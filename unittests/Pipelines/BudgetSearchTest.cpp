//===- BudgetSearchTest.cpp - the budget search's chooser -----------------===//
//
// chooseCombination on synthetic rows: which row is chosen, what the
// explanation says and which remedies an infeasible budget gets, against
// figures worked out by hand.
//
//===----------------------------------------------------------------------===//

#include "memopt/Pipelines/BudgetSearch.h"

#include "gtest/gtest.h"

using namespace memopt;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

/// A compiled row: planned peak `peak` GiB, of which `optimizer` GiB are
/// optimizer state, `params` GiB parameters and `activations` GiB
/// activations at the peak; an estimated step of `seconds`.
CombinationResult row(Combination combination, double peak, double seconds,
                      double optimizer = 0, double params = 0,
                      double activations = 0) {
  CombinationResult r;
  r.combination = std::move(combination);
  r.plannedPeakBytes = static_cast<int64_t>(peak * kGiB);
  r.pools[static_cast<unsigned>(MemoryPoolKind::Optimizer)] =
      static_cast<int64_t>(optimizer * kGiB);
  r.pools[static_cast<unsigned>(MemoryPoolKind::Params)] =
      static_cast<int64_t>(params * kGiB);
  // FP32: every parameter is an argument, live throughout.
  r.modelState.weights = static_cast<int64_t>(params * kGiB);
  r.modelState.grads = static_cast<int64_t>(params * kGiB);
  r.pools[static_cast<unsigned>(MemoryPoolKind::Activations)] =
      static_cast<int64_t>(activations * kGiB);
  r.cost.seconds = seconds;
  r.flops = 1000;
  return r;
}

class BudgetSearchTest : public ::testing::Test {
protected:
  BudgetSearchTest() {
    options.device = lookupDeviceProfile("h100-80gb");
    options.budgetBytes = 10 * kGiB;
    options.explicitBudget = true;
  }

  /// Marks the rows that fit and runs the chooser against the first row.
  void choose() {
    for (CombinationResult &r : result.rows)
      r.fits = r.plannedPeakBytes <= options.budgetBytes;
    chooseCombination(result, options, &result.rows.front());
  }

  bool explains(llvm::StringRef text) const {
    for (const std::string &line : result.explanation)
      if (llvm::StringRef(line).contains(text))
        return true;
    return false;
  }

  ExploreOptions options;
  ExploreResult result;
};

// The fastest row that fits wins, though a smaller one exists.
TEST_F(BudgetSearchTest, ChoosesTheFastestThatFits) {
  result.rows = {row({Precision::F32, "none", 1}, 12, 1.0, 4, 4, 3),
                 row({Precision::F32, "blocks", 1}, 7, 1.3),
                 row({Precision::BF16, "none", 1}, 9, 0.6),
                 row({Precision::BF16, "blocks", 1}, 5, 0.8)};
  choose();
  ASSERT_TRUE(result.chosen);
  EXPECT_EQ(*result.chosen, 2u);
  ASSERT_TRUE(result.smallest);
  EXPECT_EQ(*result.smallest, 3u);
  EXPECT_TRUE(result.remedies.empty());
  EXPECT_TRUE(explains("mixed precision (bf16) applied"));
  EXPECT_TRUE(explains("remat not needed"));
  EXPECT_TRUE(explains("chosen: bf16 / none / K=1"));
}

// On a tie in step time the earlier, preferred row stays chosen.
TEST_F(BudgetSearchTest, TiesKeepThePreferredRow) {
  result.rows = {row({Precision::F32, "none", 1}, 12, 1.0),
                 row({Precision::F32, "blocks", 1}, 8, 1.2),
                 row({Precision::F32, "sqrt", 1}, 6, 1.2)};
  choose();
  ASSERT_TRUE(result.chosen);
  EXPECT_EQ(*result.chosen, 1u);
}

// Rows that did not compile are neither chosen nor the smallest.
TEST_F(BudgetSearchTest, SkipsRowsThatFailed) {
  result.rows = {row({Precision::F32, "none", 1}, 12, 1.0),
                 row({Precision::BF16, "none", 1}, 1, 0.1),
                 row({Precision::F32, "blocks", 1}, 9, 1.5)};
  result.rows[1].error = "the pipeline failed";
  choose();
  ASSERT_TRUE(result.chosen);
  EXPECT_EQ(*result.chosen, 2u);
  EXPECT_EQ(*result.smallest, 2u);
}

// Nothing fits: the remedies close the gap of the smallest peak, 14 GiB of
// which 8 are optimizer state, against a 10 GiB budget. Sharding the
// optimizer state over n devices leaves 6 + 8/n: n = 2 gives 10 GiB.
// Offloading it leaves 6 GiB, and each step moves the 2 GiB of gradients
// and the 2 GiB of weights over the H100's PCIe 5.0 (64 GB/s each way).
// Sharding all model state (8 + 2 GiB of
// parameters, 10 GiB) leaves 4 + 10/n: n = 2 gives 9 GiB.
TEST_F(BudgetSearchTest, InfeasibleBudgetGetsRemedies) {
  result.rows = {row({Precision::F32, "none", 1}, 16, 1.0, 8, 2, 5),
                 row({Precision::F32, "blocks", 1}, 14, 1.3, 8, 2, 3)};
  choose();
  EXPECT_FALSE(result.chosen);
  ASSERT_TRUE(result.smallest);
  EXPECT_EQ(*result.smallest, 1u);
  EXPECT_TRUE(explains("no combination fits the budget"));
  ASSERT_EQ(result.remedies.size(), 3u);
  EXPECT_EQ(result.remedies[0].kind, "shard-optimizer");
  EXPECT_EQ(result.remedies[0].devices, 2);
  EXPECT_EQ(result.remedies[0].bytesPerDevice, 10 * kGiB);
  EXPECT_EQ(result.remedies[1].kind, "offload-optimizer");
  EXPECT_EQ(result.remedies[1].bytesPerDevice, 6 * kGiB);
  EXPECT_EQ(result.remedies[1].bytes, 8 * kGiB);
  EXPECT_EQ(result.remedies[1].transferBytes, 4 * kGiB);
  EXPECT_DOUBLE_EQ(result.remedies[1].transferSeconds, 4.0 * kGiB / 64e9);
  EXPECT_EQ(result.remedies[2].kind, "shard-model-state");
  EXPECT_EQ(result.remedies[2].devices, 2);
  EXPECT_EQ(result.remedies[2].bytesPerDevice, 9 * kGiB);
}

// The fewest devices, not only a power of two: 6 GiB stay and 28 GiB are
// split, and 6 + 28/n <= 10 needs n >= 7 (a power of two would say 8).
TEST_F(BudgetSearchTest, ShardsOverTheFewestDevices) {
  result.rows = {row({Precision::F32, "none", 1}, 34, 1.0, 28, 0, 6)};
  choose();
  ASSERT_FALSE(result.remedies.empty());
  EXPECT_EQ(result.remedies[0].kind, "shard-optimizer");
  EXPECT_EQ(result.remedies[0].devices, 7);
  EXPECT_EQ(result.remedies[0].bytesPerDevice, 10 * kGiB);
}

// A second run of the chooser starts afresh.
TEST_F(BudgetSearchTest, ChoosingAgainReplacesTheChoice) {
  result.rows = {row({Precision::F32, "none", 1}, 12, 1.0),
                 row({Precision::F32, "blocks", 1}, 8, 1.2)};
  choose();
  ASSERT_TRUE(result.chosen);
  size_t lines = result.explanation.size();
  options.budgetBytes = 4 * kGiB;
  choose();
  EXPECT_FALSE(result.chosen);
  EXPECT_LE(result.explanation.size(), lines);
}

// Copying the saved activations wins when it is faster than recomputing
// them, and the explanation names the row that recomputes; where it is
// slower, the remat row wins and the explanation names the copy.
TEST_F(BudgetSearchTest, WeighsActivationOffloadAgainstRecompute) {
  Combination copying{Precision::F32, "none", 1};
  copying.offload = "activations";
  result.rows = {row({Precision::F32, "none", 1}, 12, 1.0),
                 row({Precision::F32, "sqrt", 1}, 8, 1.4),
                 row(copying, 7, 1.2)};
  result.rows[1].extraFlops = 500;
  result.rows[2].savedOnHostBytes = 3 * kGiB;
  choose();
  ASSERT_TRUE(result.chosen);
  EXPECT_EQ(*result.chosen, 2u);
  EXPECT_TRUE(explains("remat not applied: the saved activations wait for "
                       "the backward in host memory (--offload=activations, "
                       "docs/Offload.md: 3.00 GiB)"));
  EXPECT_TRUE(explains("the fastest that recomputes instead, none / sqrt / "
                       "K=1, is estimated at 1.400 s"));
  EXPECT_FALSE(explains("optimizer offload applied"));

  result.rows[2].cost.seconds = 1.5;
  choose();
  ASSERT_TRUE(result.chosen);
  EXPECT_EQ(*result.chosen, 1u);
  EXPECT_TRUE(explains("remat applied (sqrt strategy)"));
  EXPECT_TRUE(explains("offloading the saved activations instead (none / "
                       "none / K=1 / offload activations) is estimated at "
                       "1.500 s"));
}

// --offload's spellings: a list, params including the optimizer.
TEST(ParseOffloadTest, ReadsTheList) {
  auto parsed = [](llvm::StringRef text) {
    std::optional<OffloadChoice> choice = parseOffload(text);
    if (!choice)
      return std::string("invalid");
    return std::string(choice->optimizer ? "o" : "") +
           (choice->params ? "p" : "") + (choice->activations ? "a" : "");
  };
  EXPECT_EQ(parsed("none"), "");
  EXPECT_EQ(parsed("optimizer"), "o");
  EXPECT_EQ(parsed("params"), "op");
  EXPECT_EQ(parsed("activations"), "a");
  EXPECT_EQ(parsed("optimizer,activations"), "oa");
  EXPECT_EQ(parsed("activations,params"), "opa");
  EXPECT_EQ(parsed(""), "invalid");
  EXPECT_EQ(parsed("optimizer,"), "invalid");
  EXPECT_EQ(parsed("none,activations"), "invalid");
  EXPECT_EQ(parsed("disk"), "invalid");
}

} // namespace
