//===- Float16Test.cpp - f16/bf16 conversion tests ------------------------===//
//
// Round-to-nearest-even on known bit patterns, an independent oracle (exact
// rounding in double with std::nearbyint, and GCC's _Float16 where the
// compiler has it) on many random floats, and the exhaustive round trip of
// all 65536 patterns of each format. Also memopt_cast between the dtypes.
//
//===----------------------------------------------------------------------===//

#include "memopt/runtime/Float16.h"
#include "RuntimeTestUtil.h"

#include <cfenv>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

using namespace memopt::runtime;
using memopt::test::RuntimeTest;

namespace {

float pow2(int e) { return std::ldexp(1.0f, e); }

/// The value of `f` rounded to a binary format with `mantissaBits` explicit
/// bits, minimum normal exponent `minExp` and overflow threshold
/// `overflow` (the midpoint between the largest finite value and the next
/// power of two), computed exactly in double. Returns +-inf on overflow.
double roundOracle(float f, int mantissaBits, int minExp, double overflow) {
  double d = f;
  if (d == 0.0)
    return d;
  int e = std::ilogb(d);
  if (e < minExp)
    e = minExp;
  double quantum = std::ldexp(1.0, e - mantissaBits);
  // The default rounding mode is to nearest, ties to even.
  double r = std::nearbyint(d / quantum) * quantum;
  if (std::fabs(d) >= overflow)
    return std::copysign(INFINITY, d);
  return r == 0.0 ? std::copysign(0.0, d) : r;
}

double halfOracle(float f) { return roundOracle(f, 10, -14, 65520.0); }

double bfloat16Oracle(float f) {
  return roundOracle(f, 7, -126, std::ldexp(2.0 - std::ldexp(1.0, -8), 127));
}

TEST(Float16Test, HalfKnownPatterns) {
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (down).
  EXPECT_EQ(floatToHalfBits(1.0f + pow2(-11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 0x3c01 and 0x3c02: ties to even (up).
  EXPECT_EQ(floatToHalfBits(1.0f + 3 * pow2(-11)), 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(floatToHalfBits(1.0f + pow2(-11) + pow2(-20)), 0x3c01);
  // Largest finite, overflow threshold and beyond.
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65519.996f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalfBits(1.0e6f), 0x7c00);
  EXPECT_EQ(floatToHalfBits(-1.0e6f), 0xfc00);
  EXPECT_EQ(floatToHalfBits(FLT_MAX), 0x7c00);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie with zero (even).
  EXPECT_EQ(floatToHalfBits(pow2(-24)), 0x0001);
  EXPECT_EQ(floatToHalfBits(pow2(-25)), 0x0000);
  EXPECT_EQ(floatToHalfBits(-pow2(-25)), 0x8000);
  EXPECT_EQ(floatToHalfBits(1.5f * pow2(-25)), 0x0001);
  EXPECT_EQ(floatToHalfBits(3 * pow2(-25)), 0x0002);
  EXPECT_EQ(floatToHalfBits(1023 * pow2(-24)), 0x03ff);
  EXPECT_EQ(floatToHalfBits(pow2(-14)), 0x0400);
  // Halfway between the largest subnormal and the smallest normal: even.
  EXPECT_EQ(floatToHalfBits(pow2(-14) - pow2(-25)), 0x0400);
  EXPECT_EQ(floatToHalfBits(pow2(-30)), 0x0000);
  EXPECT_EQ(floatToHalfBits(FLT_MIN), 0x0000);
  // Specials.
  EXPECT_EQ(floatToHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalfBits(-INFINITY), 0xfc00);
  uint16_t nan = floatToHalfBits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A NaN whose payload lies only in the dropped bits stays a NaN.
  uint16_t lowNan = floatToHalfBits(bitsToFloat(0x7f800001u));
  EXPECT_EQ(lowNan & 0x7c00, 0x7c00);
  EXPECT_NE(lowNan & 0x03ff, 0);

  EXPECT_EQ(halfBitsToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfBitsToFloat(0x0001), pow2(-24));
  EXPECT_EQ(halfBitsToFloat(0x03ff), 1023 * pow2(-24));
  EXPECT_EQ(halfBitsToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfBitsToFloat(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(halfBitsToFloat(0x7e00)));
  EXPECT_TRUE(std::signbit(halfBitsToFloat(0x8000)));
}

TEST(Float16Test, BFloat16KnownPatterns) {
  EXPECT_EQ(floatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBFloat16Bits(-0.0f), 0x8000);
  // 1 + 2^-8 is halfway between 0x3f80 and 0x3f81: ties to even (down).
  EXPECT_EQ(floatToBFloat16Bits(1.0f + pow2(-8)), 0x3f80);
  EXPECT_EQ(floatToBFloat16Bits(1.0f + 3 * pow2(-8)), 0x3f82);
  EXPECT_EQ(floatToBFloat16Bits(1.0f + pow2(-8) + pow2(-20)), 0x3f81);
  // Overflow: FLT_MAX rounds up to inf; just below the tie stays finite.
  EXPECT_EQ(floatToBFloat16Bits(FLT_MAX), 0x7f80);
  EXPECT_EQ(floatToBFloat16Bits(bitsToFloat(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(floatToBFloat16Bits(bitsToFloat(0x7f7f8000u)), 0x7f80);
  // Subnormals keep their exponent: ties to even in the low bits.
  EXPECT_EQ(floatToBFloat16Bits(bitsToFloat(0x00008000u)), 0x0000);
  EXPECT_EQ(floatToBFloat16Bits(bitsToFloat(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBFloat16Bits(bitsToFloat(0x00010001u)), 0x0001);
  EXPECT_EQ(floatToBFloat16Bits(INFINITY), 0x7f80);
  EXPECT_EQ(floatToBFloat16Bits(-INFINITY), 0xff80);
  // NaN stays NaN even when its payload is only in the dropped bits.
  uint16_t nan = floatToBFloat16Bits(bitsToFloat(0x7f800001u));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(bfloat16BitsToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16BitsToFloat(0xc040), -3.0f);
}

TEST(Float16Test, MatchesOracleOnRandomFloats) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bitsDist;
  for (int i = 0; i < 400000; ++i) {
    uint32_t bits = bitsDist(rng);
    // Bias half of the samples towards the f16 range.
    if (i % 2)
      bits = (bits & 0x807fffffu) | ((100u + bits % 45u) << 23);
    float f = bitsToFloat(bits);
    if (std::isnan(f))
      continue;
    double h = halfBitsToFloat(floatToHalfBits(f));
    double expectedH = halfOracle(f);
    ASSERT_TRUE(h == expectedH && std::signbit(h) == std::signbit(expectedH))
        << std::hex << "f16 of 0x" << bits << ": " << h << " vs " << expectedH;
    double b = bfloat16BitsToFloat(floatToBFloat16Bits(f));
    double expectedB = bfloat16Oracle(f);
    ASSERT_TRUE(b == expectedB && std::signbit(b) == std::signbit(expectedB))
        << std::hex << "bf16 of 0x" << bits << ": " << b << " vs " << expectedB;
#ifdef __FLT16_MANT_DIG__
    _Float16 native = static_cast<_Float16>(f);
    uint16_t nativeBits;
    std::memcpy(&nativeBits, &native, sizeof(nativeBits));
    ASSERT_EQ(floatToHalfBits(f), nativeBits) << std::hex << bits;
#endif
  }
}

TEST(Float16Test, ExhaustiveHalfRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = halfBitsToFloat(static_cast<uint16_t>(h));
    uint16_t back = floatToHalfBits(f);
    bool isNan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff);
    if (isNan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(back | 0x0200, h | 0x0200) << std::hex << h; // quieted
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
#ifdef __FLT16_MANT_DIG__
    uint16_t bits = static_cast<uint16_t>(h);
    _Float16 native;
    std::memcpy(&native, &bits, sizeof(bits));
    if (!isNan) {
      ASSERT_EQ(f, static_cast<float>(native)) << std::hex << h;
    }
#endif
  }
}

TEST(Float16Test, ExhaustiveBFloat16RoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bfloat16BitsToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(floatBits(f), b << 16);
    uint16_t back = floatToBFloat16Bits(f);
    bool isNan = (b & 0x7f80) == 0x7f80 && (b & 0x007f);
    if (isNan) {
      ASSERT_EQ(back | 0x0040, b | 0x0040) << std::hex << b; // quieted
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST_F(RuntimeTest, CastBetweenDtypes) {
  std::vector<float> x = {1.0f, 1.0f + pow2(-11), -65520.0f, pow2(-25) * 3,
                          0.1f};
  std::vector<uint16_t> half(x.size()), bf(x.size());
  std::vector<float> back(x.size());
  memopt_cast(ctx, MEMOPT_F32, x.data(), MEMOPT_F16, half.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(half[i], floatToHalfBits(x[i]));
  memopt_cast(ctx, MEMOPT_F16, half.data(), MEMOPT_BF16, bf.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(bf[i], floatToBFloat16Bits(halfBitsToFloat(half[i])));
  memopt_cast(ctx, MEMOPT_BF16, bf.data(), MEMOPT_F32, back.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(back[i], bfloat16BitsToFloat(bf[i]));
  // In place, f16 -> bf16 (same element size).
  std::vector<uint16_t> inPlace = half;
  memopt_cast(ctx, MEMOPT_F16, inPlace.data(), MEMOPT_BF16, inPlace.data(),
              x.size());
  EXPECT_EQ(inPlace, bf);
}

TEST_F(RuntimeTest, CastBetweenFloatsAndIndices) {
  // Float to index: truncation toward zero; NaN, the infinities and values
  // out of range give the lowest index, as PyTorch's .long() on x86.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {2.75f, -2.75f, -0.5f, 0.0f, 16777216.0f,
                          std::nanf(""), inf, -inf, 0x1p63f, -0x1p63f,
                          0x1p31f, -0x1p31f};
  std::vector<int64_t> wide(x.size());
  memopt_cast(ctx, MEMOPT_F32, x.data(), MEMOPT_I64, wide.data(), x.size());
  const int64_t lowest64 = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> wantWide = {2, -2, 0, 0, 16777216, lowest64,
                                   lowest64, lowest64, lowest64, lowest64,
                                   int64_t(1) << 31, -(int64_t(1) << 31)};
  EXPECT_EQ(wide, wantWide);
  std::vector<int32_t> narrow(x.size());
  memopt_cast(ctx, MEMOPT_F32, x.data(), MEMOPT_I32, narrow.data(), x.size());
  const int32_t lowest32 = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> wantNarrow = {2, -2, 0, 0, 16777216, lowest32,
                                     lowest32, lowest32, lowest32, lowest32,
                                     lowest32, lowest32};
  EXPECT_EQ(narrow, wantNarrow);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK);

  // Index to float: rounded to nearest even (2^24 + 1 is a tie).
  std::vector<int64_t> i = {3, -7, (1 << 24) + 1, (1 << 24) + 3, 257};
  std::vector<float> f(i.size());
  memopt_cast(ctx, MEMOPT_I64, i.data(), MEMOPT_F32, f.data(), i.size());
  EXPECT_EQ(f, (std::vector<float>{3.0f, -7.0f, 16777216.0f, 16777220.0f,
                                   257.0f}));
  std::vector<uint16_t> bf(i.size());
  memopt_cast(ctx, MEMOPT_I64, i.data(), MEMOPT_BF16, bf.data(), i.size());
  EXPECT_EQ(bfloat16BitsToFloat(bf[4]), 256.0f); // 257 ties down to even

  // i64 to i32 keeps the low 32 bits; i32 to f32 in place.
  std::vector<int64_t> big = {(int64_t(1) << 32) + 5, -1};
  std::vector<int32_t> low(2);
  memopt_cast(ctx, MEMOPT_I64, big.data(), MEMOPT_I32, low.data(), 2);
  EXPECT_EQ(low, (std::vector<int32_t>{5, -1}));
  std::vector<int32_t> inPlace = {-4, 9};
  memopt_cast(ctx, MEMOPT_I32, inPlace.data(), MEMOPT_F32, inPlace.data(), 2);
  float converted[2];
  std::memcpy(converted, inPlace.data(), sizeof converted);
  EXPECT_EQ(converted[0], -4.0f);
  EXPECT_EQ(converted[1], 9.0f);
}

} // namespace
