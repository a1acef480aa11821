//===- Random.cpp - counter-based dropout ---------------------------------===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), the generator of cuRAND and PyTorch's CUDA dropout. A mask
// bit is a pure function of (seed, stream, step, element index), so the
// forward, a recomputed forward and the backward draw the same mask without
// storing it, on the host and on the GPU alike. runtime.h documents the exact
// derivation that every runtime must reproduce bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Random.h"
#include "HostRuntime.h"
#include "Parallel.h"

#include <cmath>

using namespace memopt::host;

namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
constexpr uint64_t kStreamMultiplier = 0x9E3779B97F4A7C15ull;

inline void philoxRound(uint32_t ctr[4], const uint32_t key[2]) {
  uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr[0];
  uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr[2];
  uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
           lo0 = static_cast<uint32_t>(p0);
  uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
           lo1 = static_cast<uint32_t>(p1);
  uint32_t next[4] = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  ctr[0] = next[0];
  ctr[1] = next[1];
  ctr[2] = next[2];
  ctr[3] = next[3];
}

} // namespace

void memopt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                          uint32_t result[4]) {
  uint32_t ctr[4] = {counter[0], counter[1], counter[2], counter[3]};
  uint32_t k[2] = {key[0], key[1]};
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kPhiloxW0;
      k[1] += kPhiloxW1;
    }
    philoxRound(ctr, k);
  }
  for (int i = 0; i < 4; ++i)
    result[i] = ctr[i];
}

DropoutMask::DropoutMask(double p, uint64_t seed, uint64_t stream,
                         uint64_t step)
    : step(step),
      // p * 2^24 is exact in double, so this integer test equals
      // (bits >> 8) * 2^-24 >= p.
      threshold(static_cast<uint32_t>(std::ceil(p * 16777216.0))),
      keepScale(static_cast<float>(1.0 / (1.0 - p))) {
  uint64_t mixed = seed ^ (stream * kStreamMultiplier);
  key[0] = static_cast<uint32_t>(mixed);
  key[1] = static_cast<uint32_t>(mixed >> 32);
}

void DropoutMask::draw(uint64_t first, int64_t n, uint8_t *keep) const {
  uint32_t bits[4] = {0, 0, 0, 0};
  uint64_t block = ~0ull;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t j = first + static_cast<uint64_t>(i);
    if (j / 4 != block || i == 0) {
      block = j / 4;
      const uint32_t ctr[4] = {
          static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
          static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)};
      memopt_philox4x32_10(ctr, key, bits);
    }
    keep[i] = (bits[j % 4] >> 8) >= threshold;
  }
}

void memopt_dropout(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t n, int64_t group, double p,
                    uint64_t seed, uint64_t stream, uint64_t offset) {
  const char *entry = "memopt_dropout";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkProbability(ctx, entry, p) ||
      !checkGroup(ctx, entry, n, group))
    return;
  DropoutMask mask(p, seed, stream, ctx->step);
  float scale = mask.scale();
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  // Each mask bit is a function of its position: ranges draw apart.
  int64_t bits = n / group;
  parallelFor(bits, rowGrain(group * 4), [&](int64_t first, int64_t last) {
    constexpr int64_t kRun = 256;
    uint8_t keep[kRun];
    for (int64_t start = first; start < last; start += kRun) {
      int64_t count = last - start < kRun ? last - start : kRun;
      mask.draw(offset + static_cast<uint64_t>(start), count, keep);
      for (int64_t b = 0; b < count; ++b)
        for (int64_t i = (start + b) * group, e = i + group; i < e; ++i)
          y[i] = keep[b] ? x[i] * scale : 0.0f;
    }
  });
  y.commit();
}
