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
  /// This rank: as MPI_Reduce, a reduction writes `out` on its root only.
  int64_t rank = 0;
  /// The start of this rank's own buffer: offsets into it address the same
  /// elements of every rank's.
  const void *base = nullptr;

  size_t offsetOf(const void *pointer) const {
    return static_cast<size_t>(static_cast<const char *>(pointer) -
                               static_cast<const char *>(base)) /
           sizeof(float);
  }

  static int reduceSum(void *state, const float *input, float *out, int64_t n,
                       int64_t root, char *, size_t) {
    auto *world = static_cast<FakeWorld *>(state);
    if (root != world->rank)
      return 0;
    size_t offset = world->offsetOf(input);
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (const std::vector<float> &rank : world->data)
        sum += rank[offset + i];
      out[i] = sum;
    }
    return 0;
  }

  static int broadcast(void *state, void *data, int64_t bytes, int64_t root,
                       char *, size_t) {
    auto *world = static_cast<FakeWorld *>(state);
    // The root's shard of an all-gather is its input, at the slice's place.
    size_t count = static_cast<size_t>(bytes) / sizeof(float);
    std::memcpy(data, world->data[root].data(), count * sizeof(float));
    return 0;
  }
};

memopt_collectives makeCollectives(FakeWorld &world, int64_t rank) {
  world.rank = rank;
  memopt_collectives c = {};
  c.rank = rank;
  c.size = static_cast<int64_t>(world.data.size());
  c.state = &world;
  c.broadcast = FakeWorld::broadcast;
  c.reduce_sum_f32 = FakeWorld::reduceSum;
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
  world.base = world.data[1].data();
  memopt_collectives c = makeCollectives(world, 1);
  memopt_set_collectives(ctx, &c);
  EXPECT_EQ(memopt_rank(ctx), 1);
  EXPECT_EQ(memopt_world_size(ctx), 3);
  std::vector<float> out(2, -1.0f);
  memopt_reduce_scatter_sum(ctx, MEMOPT_F32, world.data[1].data(), out.data(),
                            2);
  expectOk();
  // Slice 1 is elements 2 and 3: (2 + 12 + 22), (3 + 13 + 23).
  EXPECT_EQ(out, (std::vector<float>{36.0f, 39.0f}));
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

/// Three ranks that hold the same values: each sum is 3 x the value. Counts
/// the calls.
int tripleInPlace(void *state, float *data, int64_t n, char *, size_t) {
  ++*static_cast<int *>(state);
  for (int64_t i = 0; i < n; ++i)
    data[i] *= 3.0f;
  return 0;
}

TEST_F(RuntimeTest, AllReduceManyPacksSmallTensorsIntoBuckets) {
  const int64_t bucket = MEMOPT_ALL_REDUCE_BUCKET_BYTES / sizeof(float);
  // Packed together: {3, 0}; a bucket's worth alone; {5}; one larger than a
  // bucket, in place; {2}.
  std::vector<int64_t> sizes = {3, 0, bucket, 5, bucket + 1, 2};
  std::vector<std::vector<float>> tensors;
  std::vector<void *> data;
  for (int64_t n : sizes) {
    tensors.emplace_back(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      tensors.back()[i] = static_cast<float>(tensors.size() * 1000 + i % 7);
    data.push_back(tensors.back().data());
  }
  int calls = 0;
  memopt_collectives c = {0, 3, &calls, tripleInPlace, nullptr, nullptr};
  memopt_set_collectives(ctx, &c);
  memopt_all_reduce_sum_many(ctx, static_cast<int64_t>(sizes.size()),
                             data.data(), sizes.data());
  expectOk();
  EXPECT_EQ(calls, 5);
  for (size_t j = 0; j < sizes.size(); ++j)
    for (int64_t i = 0; i < sizes[j]; ++i)
      ASSERT_EQ(tensors[j][i], 3.0f * static_cast<float>((j + 1) * 1000 + i % 7))
          << "tensor " << j << " element " << i;
  // The bucket is workspace: held during the call, counted in the
  // high-water mark.
  EXPECT_EQ(memopt_memory_high_water(ctx),
            static_cast<uint64_t>(MEMOPT_ALL_REDUCE_BUCKET_BYTES));
}

TEST_F(RuntimeTest, ReduceScatterWithoutAReductionNamesTheRank) {
  expectError = true;
  memopt_collectives c = {1, 2, nullptr, nullptr, nullptr, nullptr};
  memopt_set_collectives(ctx, &c);
  std::vector<float> in(4, 1.0f), out(2, 0.0f);
  memopt_reduce_scatter_sum(ctx, MEMOPT_F32, in.data(), out.data(), 2);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_COLLECTIVE);
  EXPECT_EQ(std::string(memopt_get_error_message(ctx)),
            "memopt_reduce_scatter_sum: rank 1 of 2: no reduction installed");
}

} // namespace
