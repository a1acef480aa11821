//===- HostOffloadTest.cpp - optimizer offload's entries on the host ------===//
//
// The host runtime's entries of optimizer offload: the host arena (aligned,
// zero-filled, rounded, replaced, outside the high-water mark of device
// memory), memopt_transfer in both directions and its argument errors, and
// the memopt_host_* updates and cast, which must give the bits of their
// device counterparts on the same inputs and of the host runtime's loops
// (HostOffloadCases.h, which the CUDA runtime's CPU loops pass too).
//
//===----------------------------------------------------------------------===//

#include "HostOffloadCases.h"
#include "RuntimeTestUtil.h"

#include <cstring>
#include <string>
#include <vector>

using namespace memopt::test;
using namespace memopt::test::offload;

namespace {

/// Whether `bytes` bytes at `p` are all zero.
bool allZero(const void *p, size_t bytes) {
  const auto *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < bytes; ++i)
    if (b[i])
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Host arena and transfers
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, HostArenaIsAlignedZeroedAndNotCounted) {
  EXPECT_EQ(memopt_host_arena_size(ctx), 0u);
  ASSERT_NE(memopt_arena_allocate(ctx, 512), nullptr);
  void *host = memopt_host_arena_allocate(ctx, 1000);
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 256, 0u);
  EXPECT_EQ(memopt_host_arena_size(ctx), 1000u);
  // The whole rounded block (1024 bytes) is zero.
  EXPECT_TRUE(allZero(host, 1024));
  // Host memory is not device memory: the device arena's 512 bytes only.
  EXPECT_EQ(memopt_memory_high_water(ctx), 512u);
  EXPECT_EQ(memopt_device_memory_measured(ctx), 512u);
  EXPECT_EQ(memopt_arena_size(ctx), 512u);
  std::memset(host, 0xAB, 1000);

  // A second call replaces the block with a zeroed one.
  void *second = memopt_host_arena_allocate(ctx, 300);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second) % 256, 0u);
  EXPECT_EQ(memopt_host_arena_size(ctx), 300u);
  EXPECT_TRUE(allZero(second, 512));
  EXPECT_EQ(memopt_memory_high_water(ctx), 512u);

  // 0 and 1 byte: a block of 256 zero bytes, the size as asked.
  for (uint64_t bytes : {uint64_t(0), uint64_t(1)}) {
    void *small = memopt_host_arena_allocate(ctx, bytes);
    ASSERT_NE(small, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 256, 0u);
    EXPECT_EQ(memopt_host_arena_size(ctx), bytes);
    EXPECT_TRUE(allZero(small, 256));
  }
  // The device arena is untouched.
  EXPECT_EQ(memopt_arena_size(ctx), 512u);
}

TEST_F(RuntimeTest, HostArenaAllocateDoesNothingAfterAnError) {
  expectError = true;
  ASSERT_NE(memopt_host_arena_allocate(ctx, 64), nullptr);
  memopt_unary(ctx, MEMOPT_UNARY_NEG, MEMOPT_I1, nullptr, nullptr, 0);
  ASSERT_NE(memopt_get_status(ctx), MEMOPT_OK);
  EXPECT_EQ(memopt_host_arena_allocate(ctx, 128), nullptr);
  EXPECT_EQ(memopt_host_arena_size(ctx), 64u);
}

TEST_F(RuntimeTest, TransferCopiesBothWays) {
  const size_t bytes = 777;
  auto *device = static_cast<uint8_t *>(memopt_arena_allocate(ctx, 1024));
  auto *host = static_cast<uint8_t *>(memopt_host_arena_allocate(ctx, 1024));
  ASSERT_NE(device, nullptr);
  ASSERT_NE(host, nullptr);
  std::vector<uint8_t> data(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t &b : data)
    b = static_cast<uint8_t>(byte(rng));
  std::memcpy(device + 3, data.data(), bytes);

  memopt_transfer(ctx, MEMOPT_TO_HOST, device + 3, host + 100, bytes);
  expectOk();
  EXPECT_EQ(std::memcmp(host + 100, data.data(), bytes), 0);
  EXPECT_TRUE(allZero(host, 100));
  EXPECT_TRUE(allZero(host + 100 + bytes, 1024 - 100 - bytes));

  for (uint8_t &b : data)
    b = static_cast<uint8_t>(~b);
  std::memcpy(host, data.data(), bytes);
  memopt_transfer(ctx, MEMOPT_TO_DEVICE, host, device + 200, bytes);
  expectOk();
  EXPECT_EQ(std::memcmp(device + 200, data.data(), bytes), 0);

  // Nothing to copy: null buffers are fine.
  memopt_transfer(ctx, MEMOPT_TO_HOST, nullptr, nullptr, 0);
  expectOk();
}

TEST_F(RuntimeTest, TransferOfANullBufferIsAnError) {
  expectError = true;
  std::vector<uint8_t> host(16, 7), device(16, 9);
  memopt_transfer(ctx, MEMOPT_TO_DEVICE, host.data(), nullptr, 16);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(memopt_get_error_message(ctx), "memopt_transfer: null buffer");
  // Sticky: a valid transfer is now a no-op.
  memopt_transfer(ctx, MEMOPT_TO_DEVICE, host.data(), device.data(), 16);
  EXPECT_EQ(device, std::vector<uint8_t>(16, 9));
  memopt_clear_error(ctx);
  memopt_transfer(ctx, MEMOPT_TO_HOST, nullptr, host.data(), 1);
  EXPECT_STREQ(memopt_get_error_message(ctx), "memopt_transfer: null buffer");
}

TEST_F(RuntimeTest, AsynchronousTransfersCopyAndTrackTheirSlots) {
  auto *device = static_cast<uint8_t *>(memopt_arena_allocate(ctx, 1024));
  auto *host = static_cast<uint8_t *>(memopt_host_arena_allocate(ctx, 1024));
  ASSERT_NE(device, nullptr);
  ASSERT_NE(host, nullptr);
  std::vector<uint8_t> data(300);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t &b : data)
    b = static_cast<uint8_t>(byte(rng));
  std::memcpy(device, data.data(), data.size());

  // Two copies in flight on two slots, each slot reused once waited for.
  memopt_transfer_start(ctx, MEMOPT_TO_HOST, device, host, data.size(), 0);
  memopt_transfer_start(ctx, MEMOPT_TO_DEVICE, host + 512, device + 512, 64,
                        MEMOPT_MAX_TRANSFER_SLOTS - 1);
  memopt_transfer_wait(ctx, 0, 1);
  expectOk();
  EXPECT_EQ(std::memcmp(host, data.data(), data.size()), 0);
  memopt_transfer_start(ctx, MEMOPT_TO_DEVICE, host, device + 400, data.size(),
                        0);
  memopt_transfer_wait(ctx, 0, 0);
  memopt_transfer_wait(ctx, MEMOPT_MAX_TRANSFER_SLOTS - 1, 0);
  expectOk();
  EXPECT_EQ(std::memcmp(device + 400, data.data(), data.size()), 0);
}

TEST_F(RuntimeTest, AsynchronousTransferSlotsAreChecked) {
  expectError = true;
  std::vector<uint8_t> a(16, 1), b(16, 2);
  memopt_transfer_start(ctx, MEMOPT_TO_HOST, a.data(), b.data(), 16, 4);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK);
  // A second copy on a slot in flight, and a wait on a slot with none.
  memopt_transfer_start(ctx, MEMOPT_TO_HOST, a.data(), b.data(), 16, 4);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_transfer_start: slot 4 still holds a copy not waited "
               "for");
  memopt_clear_error(ctx);
  memopt_transfer_wait(ctx, 4, 0);
  memopt_transfer_wait(ctx, 4, 0);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_transfer_wait: slot 4 holds no copy "
               "(memopt_transfer_start)");
}

//===----------------------------------------------------------------------===//
// The host entries against the device entries
//===----------------------------------------------------------------------===//

/// memopt_host_adamw_update and memopt_adamw_update on copies of the same
/// random inputs (step 3, skip NULL and 1, every float dtype) write the same
/// bytes.
TEST_F(RuntimeTest, HostAdamWEqualsTheDeviceEntry) {
  const Hyper h;
  const int64_t step = kStep;
  for (memopt_dtype dtype : kFloatDTypes) {
    for (const SkipCase &skip : skipCases()) {
      SCOPED_TRACE(std::string(memopt::runtime::dtypeName(dtype)) + ", " +
                   skip.name);
      Bytes p = randomFloats(rng, dtype, kElements),
            g = randomFloats(rng, dtype, kElements),
            m = randomFloats(rng, dtype, kElements, -0.1f, 0.1f),
            v = randomFloats(rng, dtype, kElements, 0.0f, 0.01f);
      Bytes dp(p.size()), dm(m.size()), dv(v.size());
      Bytes hp(p.size()), hm(m.size()), hv(v.size());
      memopt_adamw_update(ctx, dtype, p.data(), g.data(), m.data(), v.data(),
                          &step, skip.skip, dp.data(), dm.data(), dv.data(),
                          kElements, h.lr, h.beta1, h.beta2, h.eps,
                          h.weightDecay);
      memopt_host_adamw_update(ctx, dtype, p.data(), g.data(), m.data(),
                               v.data(), &step, skip.skip, hp.data(), hm.data(),
                               hv.data(), kElements, h.lr, h.beta1, h.beta2,
                               h.eps, h.weightDecay);
      expectOk();
      size_t size = memopt_dtype_size(dtype);
      expectSameBytes(hp, dp, size, "param");
      expectSameBytes(hm, dm, size, "exp_avg");
      expectSameBytes(hv, dv, size, "exp_avg_sq");
      if (skip.skipped) {
        expectSameBytes(hp, p, size, "skipped param");
      } else {
        EXPECT_NE(hp, p);
      }
    }
  }
}

TEST_F(RuntimeTest, HostSgdEqualsTheDeviceEntry) {
  const Hyper h;
  for (memopt_dtype dtype : kFloatDTypes) {
    for (const SkipCase &skip : skipCases()) {
      SCOPED_TRACE(std::string(memopt::runtime::dtypeName(dtype)) + ", " +
                   skip.name);
      Bytes p = randomFloats(rng, dtype, kElements),
            g = randomFloats(rng, dtype, kElements),
            buf = randomFloats(rng, dtype, kElements);
      Bytes dp(p.size()), dbuf(p.size()), hp(p.size()), hbuf(p.size());
      memopt_sgd_update(ctx, dtype, p.data(), g.data(), buf.data(), skip.skip,
                        dp.data(), dbuf.data(), kElements, h.lr, h.momentum,
                        h.weightDecay);
      memopt_host_sgd_update(ctx, dtype, p.data(), g.data(), buf.data(),
                             skip.skip, hp.data(), hbuf.data(), kElements, h.lr,
                             h.momentum, h.weightDecay);
      expectOk();
      size_t size = memopt_dtype_size(dtype);
      expectSameBytes(hp, dp, size, "param");
      expectSameBytes(hbuf, dbuf, size, "momentum_buffer");
      if (skip.skipped) {
        expectSameBytes(hp, p, size, "skipped param");
      } else {
        EXPECT_NE(hp, p);
      }
    }
  }
}

TEST_F(RuntimeTest, HostAdamW8bitEqualsTheDeviceEntry) {
  const Hyper h;
  const int64_t step = kStep;
  for (const SkipCase &skip : skipCases()) {
    SCOPED_TRACE(skip.name);
    Bytes p = randomFloats(rng, MEMOPT_F32, kElements),
          g = randomFloats(rng, MEMOPT_F32, kElements),
          m = randomPacked(rng, kElements), v = randomPacked(rng, kElements);
    Bytes dp(p.size()), dm(m.size()), dv(v.size());
    Bytes hp(p.size()), hm(m.size()), hv(v.size());
    memopt_adamw8bit_update(ctx, MEMOPT_F32, p.data(), g.data(), m.data(),
                            v.data(), &step, skip.skip, dp.data(), dm.data(),
                            dv.data(), kElements, h.lr, h.beta1, h.beta2, h.eps,
                            h.weightDecay);
    memopt_host_adamw8bit_update(ctx, MEMOPT_F32, p.data(), g.data(), m.data(),
                                 v.data(), &step, skip.skip, hp.data(),
                                 hm.data(), hv.data(), kElements, h.lr, h.beta1,
                                 h.beta2, h.eps, h.weightDecay);
    expectOk();
    expectSameBytes(hp, dp, 4, "param");
    expectSameBytes(hm, dm, 1, "exp_avg");
    expectSameBytes(hv, dv, 1, "exp_avg_sq");
    if (skip.skipped) {
      expectSameBytes(hm, m, 1, "skipped exp_avg");
    } else {
      EXPECT_NE(hm, m);
    }
  }
}

TEST_F(RuntimeTest, HostCastEqualsTheDeviceEntry) {
  for (memopt_dtype in : kNumberDTypes) {
    for (memopt_dtype out : kNumberDTypes) {
      SCOPED_TRACE(std::string(memopt::runtime::dtypeName(in)) + " to " +
                   memopt::runtime::dtypeName(out));
      Bytes x = castInput(rng, in, kElements);
      Bytes device(kElements * memopt_dtype_size(out), 0x5A);
      Bytes host(device.size(), 0xA5);
      memopt_cast(ctx, in, x.data(), out, device.data(), kElements);
      memopt_host_cast(ctx, in, x.data(), out, host.data(), kElements);
      expectOk();
      expectSameBytes(host, device, memopt_dtype_size(out), "output");
    }
  }
}

//===----------------------------------------------------------------------===//
// The host entries against the host runtime's loops (HostOffloadCases.h)
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, HostSgdMatchesTheLoop) {
  expectHostSgdMatchesTheLoop(ctx, rng);
}

TEST_F(RuntimeTest, HostAdamWMatchesTheLoop) {
  expectHostAdamWMatchesTheLoop(ctx, rng);
}

TEST_F(RuntimeTest, HostAdamW8bitMatchesTheLoop) {
  expectHostAdamW8bitMatchesTheLoop(ctx, rng);
}

TEST_F(RuntimeTest, HostCastMatchesTheLoop) {
  expectHostCastMatchesTheLoop(ctx, rng);
}

TEST_F(RuntimeTest, HostSumsMatchTheLoop) {
  expectHostSumsMatchTheLoop(ctx, rng);
}

TEST_F(RuntimeTest, HostAdamWRejectsStepZero) {
  expectHostAdamWRejectsStepZero(ctx);
}

} // namespace
