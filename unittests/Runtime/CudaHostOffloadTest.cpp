//===- CudaHostOffloadTest.cpp - optimizer offload on the CUDA runtime ----===//
//
// Without a GPU: the CUDA runtime's memopt_host_* entries (CPU loops,
// runtime/cuda/HostOptimizer.cpp) on a context built without a device,
// byte for byte against the host runtime's loops (HostOffloadCases.h, which
// the host runtime's entries pass too), at a few hundred elements and at
// enough for the loops to split across threads. With one: the page-locked
// host arena, memopt_transfer both ways, and an offloaded update (transfer
// to the host, update there, transfer back) against the device entry's.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "CudaTestFixture.h"
#include "HostOffloadCases.h"

#include "gtest/gtest.h"

#include <cstring>
#include <string>
#include <vector>

using namespace memopt::test;
using namespace memopt::test::offload;

namespace {

//===----------------------------------------------------------------------===//
// The CPU loops, without a device
//===----------------------------------------------------------------------===//

/// Elements enough for several threads' ranges (kElementGrain of
/// HostOptimizer.cpp is 2^16), the last 8-bit block partial.
constexpr int64_t kManyElements = 5 * 65536 + 77;

/// A context built without a device: the CPU loops need none.
class CudaHostLoopTest : public ::testing::Test {
protected:
  void SetUp() override { ctx = new memopt_context(); }
  void TearDown() override {
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    memopt_context_destroy(ctx);
  }

  memopt_context *ctx = nullptr;
  std::mt19937 rng{4321};
};

TEST_F(CudaHostLoopTest, SgdMatchesTheHostRuntime) {
  expectHostSgdMatchesTheLoop(ctx, rng);
  expectHostSgdMatchesTheLoop(ctx, rng, kManyElements);
}

TEST_F(CudaHostLoopTest, AdamWMatchesTheHostRuntime) {
  expectHostAdamWMatchesTheLoop(ctx, rng);
  expectHostAdamWMatchesTheLoop(ctx, rng, kManyElements);
}

TEST_F(CudaHostLoopTest, AdamW8bitMatchesTheHostRuntime) {
  expectHostAdamW8bitMatchesTheLoop(ctx, rng);
  expectHostAdamW8bitMatchesTheLoop(ctx, rng, kManyElements);
}

TEST_F(CudaHostLoopTest, CastMatchesTheHostRuntime) {
  expectHostCastMatchesTheLoop(ctx, rng);
  expectHostCastMatchesTheLoop(ctx, rng, kManyElements);
}

TEST_F(CudaHostLoopTest, SumsMatchTheHostRuntime) {
  expectHostSumsMatchTheLoop(ctx, rng);
  expectHostSumsMatchTheLoop(ctx, rng, kManyElements);
}

TEST_F(CudaHostLoopTest, AdamWRejectsStepZero) {
  expectHostAdamWRejectsStepZero(ctx);
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

TEST_F(CudaTest, HostArenaIsPinnedAlignedZeroedAndNotCounted) {
  uint64_t highWater = memopt_memory_high_water(ctx);
  uint64_t measured = memopt_device_memory_measured(ctx);
  void *host = memopt_host_arena_allocate(ctx, 1000);
  ASSERT_NE(host, nullptr) << memopt_get_error_message(ctx);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 256, 0u);
  EXPECT_EQ(memopt_host_arena_size(ctx), 1000u);
  EXPECT_EQ(memopt_memory_high_water(ctx), highWater);
  EXPECT_EQ(memopt_device_memory_measured(ctx), measured);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, host), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  std::vector<uint8_t> zeros(1024, 0);
  EXPECT_EQ(std::memcmp(host, zeros.data(), zeros.size()), 0);
  std::memset(host, 0xAB, 1000);
  // Replaced by a zeroed block.
  void *second = memopt_host_arena_allocate(ctx, 1);
  ASSERT_NE(second, nullptr) << memopt_get_error_message(ctx);
  EXPECT_EQ(memopt_host_arena_size(ctx), 1u);
  EXPECT_EQ(std::memcmp(second, zeros.data(), 256), 0);
}

TEST_F(CudaTest, TransferCopiesBothWays) {
  auto *host = static_cast<uint8_t *>(memopt_host_arena_allocate(ctx, 4096));
  ASSERT_NE(host, nullptr) << memopt_get_error_message(ctx);
  std::vector<uint8_t> data(3001);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t &b : data)
    b = static_cast<uint8_t>(byte(rng));
  uint8_t *device = upload(data);
  memopt_transfer(ctx, MEMOPT_TO_HOST, device, host + 5, data.size());
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  EXPECT_EQ(std::memcmp(host + 5, data.data(), data.size()), 0);
  for (uint8_t &b : data)
    b = static_cast<uint8_t>(~b);
  std::memcpy(host, data.data(), data.size());
  auto *back = static_cast<uint8_t *>(alloc(data.size()));
  memopt_transfer(ctx, MEMOPT_TO_DEVICE, host, back, data.size());
  // The host buffer may be reused as soon as the transfer returns.
  std::memset(host, 0, data.size());
  EXPECT_EQ(download<uint8_t>(back, data.size()), data);
}

/// Copies on the copy stream, with kernels queued between each start and
/// its wait: the kernel after a wait reads what arrived, and a copy to the
/// host reads its source before the kernel queued after its start
/// overwrites it (the ordering of the generated step, whose plan keeps the
/// source for the copy's flight).
TEST_F(CudaTest, AsynchronousTransfersOrderAgainstTheStream) {
  const int64_t n = 1 << 20;
  auto *host = static_cast<float *>(memopt_host_arena_allocate(ctx, 2 * n * 4));
  ASSERT_NE(host, nullptr) << memopt_get_error_message(ctx);
  std::vector<float> data(n);
  std::uniform_real_distribution<float> value(-1, 1);
  for (float &v : data)
    v = value(rng);
  float *source = upload(data);
  auto *other = static_cast<float *>(alloc(n * 4));
  auto *back = static_cast<float *>(alloc(n * 4));

  memopt_transfer_start(ctx, MEMOPT_TO_HOST, source, host, n * 4, 0);
  memopt_fill(ctx, MEMOPT_F32, other, n, 3.0);
  memopt_transfer_wait(ctx, 0, 1);
  memopt_fill(ctx, MEMOPT_F32, source, n, 5.0);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  EXPECT_EQ(std::memcmp(host, data.data(), n * 4), 0);

  memopt_transfer_start(ctx, MEMOPT_TO_DEVICE, host, back, n * 4, 1);
  memopt_fill(ctx, MEMOPT_F32, other, n, 4.0);
  memopt_transfer_wait(ctx, 1, 0);
  memopt_copy(ctx, other, back, n * 4);
  EXPECT_EQ(download<float>(other, n), data);
  EXPECT_EQ(download<float>(source, n), std::vector<float>(n, 5.0f));
}

/// One AdamW step of a bf16 model's f32 master weights offloaded: the
/// gradient to the host, the update there, the parameter and its bf16 copy
/// back; against the same step on the device.
TEST_F(CudaTest, OffloadedAdamWEqualsTheDeviceUpdate) {
  const Hyper h;
  const int64_t n = 1000, step = kStep;
  std::vector<float> p = random(n), g = random(n), m = random(n, -0.1f, 0.1f),
                     v = random(n, 0.0f, 0.01f);
  const size_t bytes = n * sizeof(float);

  // On the device.
  float *dp = upload(p), *dg = upload(g), *dm = upload(m), *dv = upload(v);
  int64_t *dstep = upload(std::vector<int64_t>{step});
  auto *dcopy = static_cast<uint16_t *>(alloc(n * 2));
  memopt_adamw_update(ctx, MEMOPT_F32, dp, dg, dm, dv, dstep, nullptr, dp, dm,
                      dv, n, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay);
  memopt_cast(ctx, MEMOPT_F32, dp, MEMOPT_BF16, dcopy, n);
  std::vector<float> wantP = download<float>(dp, n);
  std::vector<uint16_t> wantCopy = download<uint16_t>(dcopy, n);

  // Offloaded: master weights and moments in the host arena.
  auto *host = static_cast<char *>(memopt_host_arena_allocate(ctx, 5 * bytes));
  ASSERT_NE(host, nullptr) << memopt_get_error_message(ctx);
  float *hp = reinterpret_cast<float *>(host);
  float *hg = reinterpret_cast<float *>(host + bytes);
  float *hm = reinterpret_cast<float *>(host + 2 * bytes);
  float *hv = reinterpret_cast<float *>(host + 3 * bytes);
  auto *hcopy = reinterpret_cast<uint16_t *>(host + 4 * bytes);
  std::memcpy(hp, p.data(), bytes);
  std::memcpy(hm, m.data(), bytes);
  std::memcpy(hv, v.data(), bytes);
  float *deviceGrad = upload(g);
  auto *deviceCopy = static_cast<uint16_t *>(alloc(n * 2));
  memopt_transfer(ctx, MEMOPT_TO_HOST, deviceGrad, hg, bytes);
  memopt_host_adamw_update(ctx, MEMOPT_F32, hp, hg, hm, hv, &step, nullptr, hp,
                           hm, hv, n, h.lr, h.beta1, h.beta2, h.eps,
                           h.weightDecay);
  memopt_host_cast(ctx, MEMOPT_F32, hp, MEMOPT_BF16, hcopy, n);
  memopt_transfer(ctx, MEMOPT_TO_DEVICE, hcopy, deviceCopy, n * 2);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);

  std::vector<float> gotP(hp, hp + n);
  int64_t differing = 0;
  for (int64_t i = 0; i < n; ++i)
    differing += std::memcmp(&gotP[i], &wantP[i], 4) != 0;
  EXPECT_EQ(differing, 0) << "f32 master weights differ";
  EXPECT_EQ(download<uint16_t>(deviceCopy, n), wantCopy);
}

/// The same for 8-bit moments: parameter, codes and absmaxes byte for byte.
TEST_F(CudaTest, OffloadedAdamW8bitEqualsTheDeviceUpdate) {
  const Hyper h;
  const int64_t n = 1000, step = kStep;
  Bytes p = randomFloats(rng, MEMOPT_F32, n),
        g = randomFloats(rng, MEMOPT_F32, n), m = randomPacked(rng, n),
        v = randomPacked(rng, n);

  uint8_t *dp = upload(p), *dg = upload(g), *dm = upload(m), *dv = upload(v);
  int64_t *dstep = upload(std::vector<int64_t>{step});
  memopt_adamw8bit_update(ctx, MEMOPT_F32, dp, dg, dm, dv, dstep, nullptr, dp,
                          dm, dv, n, h.lr, h.beta1, h.beta2, h.eps,
                          h.weightDecay);
  Bytes wantP = download<uint8_t>(dp, p.size());
  Bytes wantM = download<uint8_t>(dm, m.size());
  Bytes wantV = download<uint8_t>(dv, v.size());

  Bytes hp = p, hg(g.size()), hm = m, hv = v;
  uint8_t *deviceGrad = upload(g);
  memopt_transfer(ctx, MEMOPT_TO_HOST, deviceGrad, hg.data(), hg.size());
  memopt_host_adamw8bit_update(ctx, MEMOPT_F32, hp.data(), hg.data(), hm.data(),
                               hv.data(), &step, nullptr, hp.data(), hm.data(),
                               hv.data(), n, h.lr, h.beta1, h.beta2, h.eps,
                               h.weightDecay);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  expectSameBytes(hp, wantP, 4, "param");
  expectSameBytes(hm, wantM, 1, "exp_avg");
  expectSameBytes(hv, wantV, 1, "exp_avg_sq");
}

} // namespace
