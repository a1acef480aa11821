//===- CollectivesTest.cpp - ZeRO's collectives on the host runtime -------===//
//
// One rank of a simulated world: the installed collectives know every
// rank's data, so a reduction or a broadcast completes without the other
// processes. Each entry must address the right slice of its buffers (rank
// r's slice of a reduce-scatter is the sum of slice r of every rank; an
// all-gather puts rank r's input at slice r), and a world of one copies.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <cstring>
#include <string>
#include <vector>

using namespace memopt::test;

namespace {

/// Every rank's buffer of one collective call, as this rank's callbacks see
/// the world: `data[r]` is rank r's.
struct FakeWorld {
  std::vector<std::vector<float>> data;
  /// This rank.
  int64_t rank = 0;

  /// As MPI_Reduce_scatter_block: this rank's slice of every rank's input.
  static int reduceScatterSum(void *state, const float *, float *out, int64_t n,
                              char *, size_t) {
    auto *world = static_cast<FakeWorld *>(state);
    ++world->calls;
    size_t offset = static_cast<size_t>(world->rank * n);
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (const std::vector<float> &rank : world->data)
        sum += rank[offset + i];
      out[i] = sum;
    }
    return 0;
  }

  /// As MPI_Allgather in place: slice r of `data` gets rank r's input,
  /// except this rank's own, which must be there already.
  static int allGather(void *state, void *data, int64_t bytes, char *, size_t) {
    auto *world = static_cast<FakeWorld *>(state);
    ++world->calls;
    for (size_t r = 0; r < world->data.size(); ++r)
      if (static_cast<int64_t>(r) != world->rank)
        std::memcpy(static_cast<char *>(data) + r * bytes,
                    world->data[r].data(), static_cast<size_t>(bytes));
    return 0;
  }

  /// The callback calls made.
  int calls = 0;
};

memopt_collectives makeCollectives(FakeWorld &world, int64_t rank) {
  world.rank = rank;
  memopt_collectives c = {};
  c.rank = rank;
  c.size = static_cast<int64_t>(world.data.size());
  c.state = &world;
  c.reduce_scatter_sum_f32 = FakeWorld::reduceScatterSum;
  c.all_gather = FakeWorld::allGather;
  return c;
}

TEST_F(RuntimeTest, ReduceScatterSumsTheRanksSlice) {
  // Three ranks, slices of 2: rank r holds 10 r + i.
  FakeWorld world;
  for (int r = 0; r < 3; ++r) {
    world.data.emplace_back();
    for (int i = 0; i < 6; ++i)
      world.data.back().push_back(10.0f * r + i);
  }
  memopt_collectives c = makeCollectives(world, 1);
  memopt_set_collectives(ctx, &c);
  EXPECT_EQ(memopt_rank(ctx), 1);
  EXPECT_EQ(memopt_world_size(ctx), 3);
  std::vector<float> out(2, -1.0f);
  memopt_reduce_scatter_sum(ctx, MEMOPT_F32, world.data[1].data(), out.data(),
                            2);
  expectOk();
  // Slice 1 is elements 2 and 3: (2 + 12 + 22), (3 + 13 + 23), in one
  // call.
  EXPECT_EQ(out, (std::vector<float>{36.0f, 39.0f}));
  EXPECT_EQ(world.calls, 1);
}

TEST_F(RuntimeTest, AllGatherPlacesEachRanksSlice) {
  FakeWorld world;
  world.data = {{1, 2}, {3, 4}, {5, 6}};
  memopt_collectives c = makeCollectives(world, 2);
  memopt_set_collectives(ctx, &c);
  std::vector<float> out(6, 0.0f);
  memopt_all_gather(ctx, MEMOPT_F32, world.data[2].data(), out.data(), 2);
  expectOk();
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(world.calls, 1);
}

TEST_F(RuntimeTest, AllSliceTakesTheRanksSliceOfAnyDtype) {
  FakeWorld world;
  world.data.resize(4);
  memopt_collectives c = makeCollectives(world, 3);
  memopt_set_collectives(ctx, &c);
  std::vector<uint16_t> whole = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint16_t> out(2, 0);
  memopt_all_slice(ctx, MEMOPT_BF16, whole.data(), out.data(), 2);
  expectOk();
  EXPECT_EQ(out, (std::vector<uint16_t>{7, 8}));
}

TEST_F(RuntimeTest, CollectivesOfOneRankCopy) {
  std::vector<float> in = {1, 2, 3}, out(3, 0.0f);
  memopt_reduce_scatter_sum(ctx, MEMOPT_F32, in.data(), out.data(), 3);
  EXPECT_EQ(out, in);
  out.assign(3, 0.0f);
  memopt_all_gather(ctx, MEMOPT_F32, in.data(), out.data(), 3);
  EXPECT_EQ(out, in);
  out.assign(3, 0.0f);
  memopt_all_slice(ctx, MEMOPT_F32, in.data(), out.data(), 3);
  EXPECT_EQ(out, in);
  expectOk();
}

TEST_F(RuntimeTest, ReduceScatterWithoutAReductionNamesTheRank) {
  expectError = true;
  memopt_collectives c = {};
  c.rank = 1;
  c.size = 2;
  memopt_set_collectives(ctx, &c);
  std::vector<float> in(4, 1.0f), out(2, 0.0f);
  memopt_reduce_scatter_sum(ctx, MEMOPT_F32, in.data(), out.data(), 2);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_COLLECTIVE);
  EXPECT_EQ(
      std::string(memopt_get_error_message(ctx)),
      "memopt_reduce_scatter_sum: rank 1 of 2: no reduce-scatter installed");
}

} // namespace
