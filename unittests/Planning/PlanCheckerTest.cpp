//===- PlanCheckerTest.cpp - Tests of the independent placement checker ---===//

#include "memopt/Planning/PlanChecker.h"

#include "gtest/gtest.h"

using namespace memopt;

namespace {

// Two buffers live together over [2, 5).
const std::vector<Buffer> kPair = {{10, 0, 5, 100}, {20, 2, 8, 50}};

TEST(PlanCheckerTest, AcceptsDisjointPlacement) {
  EXPECT_FALSE(checkPlacement(kPair, {0, 100}, 150));
  EXPECT_FALSE(checkPlacement(kPair, {50, 0}, 150));
}

TEST(PlanCheckerTest, DetectsOverlapAndNamesBothBuffers) {
  auto error = checkPlacement(kPair, {0, 99}, 200);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("buffers 10 and 20"), std::string::npos) << *error;
  // Same offset.
  EXPECT_TRUE(checkPlacement(kPair, {0, 0}, 200));
  // The later buffer below the earlier one.
  EXPECT_TRUE(checkPlacement(kPair, {40, 0}, 200));
}

TEST(PlanCheckerTest, HalfOpenLifetimesMayShareMemory) {
  std::vector<Buffer> chain = {{1, 0, 3, 64}, {2, 3, 6, 64}, {3, 6, 9, 64}};
  EXPECT_FALSE(checkPlacement(chain, {0, 0, 0}, 64));
  chain[1].lower = 2;
  auto error = checkPlacement(chain, {0, 0, 0}, 64);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("buffers 1 and 2"), std::string::npos) << *error;
}

TEST(PlanCheckerTest, DetectsOverlapHiddenBehindANeighbour) {
  // Buffer 3 starts last and reaches into buffer 1 from above while touching
  // buffer 2 exactly at its end.
  std::vector<Buffer> buffers = {
      {1, 0, 10, 100}, {2, 0, 10, 10}, {3, 5, 6, 20}};
  EXPECT_FALSE(checkPlacement(buffers, {0, 100, 110}, 130));
  auto error = checkPlacement(buffers, {0, 110, 90}, 130);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("buffers 1 and 3"), std::string::npos) << *error;
}

TEST(PlanCheckerTest, DetectsBufferOutsideArena) {
  auto error = checkPlacement(kPair, {0, 100}, 149);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("buffer 20"), std::string::npos) << *error;
  EXPECT_NE(error->find("outside the arena"), std::string::npos) << *error;
  EXPECT_TRUE(checkPlacement(kPair, {-100, 100}, 150));
}

TEST(PlanCheckerTest, DetectsMisalignment) {
  std::vector<Buffer> buffers = {{7, 0, 1, 10}};
  EXPECT_FALSE(checkPlacement(buffers, {256}, 512, 256));
  auto error = checkPlacement(buffers, {128}, 512, 256);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("buffer 7"), std::string::npos) << *error;
  EXPECT_NE(error->find("alignment 256"), std::string::npos) << *error;
}

TEST(PlanCheckerTest, DetectsWrongOffsetCount) {
  EXPECT_TRUE(checkPlacement(kPair, {0}, 150));
}

TEST(PlanCheckerTest, ZeroSizeAndDeadBuffersNeverConflict) {
  std::vector<Buffer> buffers = {{1, 0, 10, 64}, {2, 0, 10, 0}, {3, 4, 4, 64}};
  EXPECT_FALSE(checkPlacement(buffers, {0, 0, 0}, 64));
  EXPECT_FALSE(checkPlacement(buffers, {0, 64, 0}, 64));
}

} // namespace
