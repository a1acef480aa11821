//===- CudaUnscaleTest.cpp - memopt_unscale in place on the GPU ------------===//
//
// --memopt-bufferize writes each unscaled gradient over its scaled one
// (results[j] == grads[j], which runtime.h allows), so the CUDA entry must
// give the same values in place as into separate buffers: each thread reads
// element i of gradient j and writes element i of result j. Checked against
// a host reference, bit for bit, for f32 and bf16 tensors larger than one
// grid, together with the non-finite check. Needs a GPU (scripts/gpu-check.sh
// runs it there); skips without one. The host entry's in-place behaviour is
// checked in OptimizerTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "memopt/runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

/// bf16 bits of `v`, rounded to nearest even (finite values only).
uint16_t toBF16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float fromBF16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

class CudaUnscaleTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx = memopt_context_create();
    if (!ctx)
      GTEST_SKIP() << "no CUDA device: " << memopt_context_create_error();
    base = static_cast<char *>(memopt_arena_allocate(ctx, 32 << 20));
    ASSERT_NE(base, nullptr) << memopt_get_error_message(ctx);
  }
  void TearDown() override {
    if (!ctx)
      return;
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    memopt_context_destroy(ctx);
  }

  void *alloc(size_t bytes) {
    void *p = base + used;
    used += (bytes + 255) / 256 * 256;
    return p;
  }
  template <typename T> T *upload(const std::vector<T> &host) {
    void *p = alloc(host.size() * sizeof(T));
    memopt_copy_from_host(ctx, p, host.data(), host.size() * sizeof(T));
    return static_cast<T *>(p);
  }
  template <typename T> std::vector<T> download(const void *p, size_t n) {
    std::vector<T> host(n);
    memopt_copy_to_host(ctx, host.data(), p, n * sizeof(T));
    return host;
  }

  memopt_context *ctx = nullptr;
  char *base = nullptr;
  size_t used = 0;
};

TEST_F(CudaUnscaleTest, InPlaceMatchesSeparateBuffersAndHostReference) {
  // More elements than one grid covers, so the grid-stride loop runs too.
  const int64_t n32 = (1 << 20) + 7, n16 = 100003;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3e4f, 3e4f);
  std::vector<float> g32(n32);
  for (float &v : g32)
    v = dist(rng);
  std::vector<uint16_t> g16(n16);
  for (uint16_t &v : g16)
    v = toBF16(dist(rng));
  const float scale = 65536.0f;
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale));

  float *dscale = upload(std::vector<float>{scale});
  memopt_dtype dtypes[] = {MEMOPT_F32, MEMOPT_BF16};
  int64_t sizes[] = {n32, n16};

  // Separate result buffers.
  float *a32 = upload(g32);
  uint16_t *a16 = upload(g16);
  float *r32 = static_cast<float *>(alloc(n32 * 4));
  uint16_t *r16 = static_cast<uint16_t *>(alloc(n16 * 2));
  uint8_t *inf1 = upload(std::vector<uint8_t>{7});
  const void *grads1[] = {a32, a16};
  void *results1[] = {r32, r16};
  memopt_unscale(ctx, dscale, 2, dtypes, grads1, results1, sizes, inf1);

  // In place: every result is its gradient.
  float *b32 = upload(g32);
  uint16_t *b16 = upload(g16);
  uint8_t *inf2 = upload(std::vector<uint8_t>{7});
  const void *grads2[] = {b32, b16};
  void *results2[] = {b32, b16};
  memopt_unscale(ctx, dscale, 2, dtypes, grads2, results2, sizes, inf2);

  std::vector<float> sep32 = download<float>(r32, n32);
  std::vector<float> in32 = download<float>(b32, n32);
  std::vector<uint16_t> sep16 = download<uint16_t>(r16, n16);
  std::vector<uint16_t> in16 = download<uint16_t>(b16, n16);
  EXPECT_EQ(download<uint8_t>(inf1, 1)[0], 0);
  EXPECT_EQ(download<uint8_t>(inf2, 1)[0], 0);
  // The separate call must not have touched its gradients.
  EXPECT_EQ(download<float>(a32, n32), g32);
  for (int64_t i = 0; i < n32; ++i) {
    float want = g32[i] * inv;
    ASSERT_EQ(std::memcmp(&in32[i], &want, 4), 0) << i;
    ASSERT_EQ(std::memcmp(&sep32[i], &want, 4), 0) << i;
  }
  for (int64_t i = 0; i < n16; ++i) {
    uint16_t want = toBF16(fromBF16(g16[i]) * inv);
    ASSERT_EQ(in16[i], want) << i;
    ASSERT_EQ(sep16[i], want) << i;
  }
}

TEST_F(CudaUnscaleTest, InPlaceFindsNonFiniteValues) {
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    std::vector<float> first(5000, 2.0f), second(3000, 4.0f);
    second[2999] = bad;
    float *dscale = upload(std::vector<float>{2.0f});
    float *d1 = upload(first), *d2 = upload(second);
    uint8_t *inf = upload(std::vector<uint8_t>{0});
    memopt_dtype dtypes[] = {MEMOPT_F32, MEMOPT_F32};
    int64_t sizes[] = {5000, 3000};
    const void *grads[] = {d1, d2};
    void *results[] = {d1, d2};
    memopt_unscale(ctx, dscale, 2, dtypes, grads, results, sizes, inf);
    EXPECT_EQ(download<uint8_t>(inf, 1)[0], 1) << bad;
    std::vector<float> got = download<float>(d1, 5000);
    EXPECT_EQ(got, std::vector<float>(5000, 1.0f));
    EXPECT_EQ(download<float>(d2, 1)[0], 2.0f);
    used = 0;
  }
}

} // namespace
