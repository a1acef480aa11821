//===- Nf4Test.cpp - NF4 frozen weights against references ---------------===//
//
// Nf4Math.h, the host's memopt_nf4_matmul and its NF4 fused loss, each
// against a reference written here: the levels against QLoRA's published
// decimals, the layout against its arithmetic, quantization against a
// float64 re-derivation (the offset, the scales and every code redone in
// double, the nearest level and code found by exhaustive search), the
// product against memopt_matmul of the dequantized weight, bit for bit, and
// a float64 product within the bound of f32 accumulation, and the fused
// loss and its gradient against memopt_linear_cross_entropy of the
// dequantized weight, bit for bit. A nearest-level choice may differ from
// the exhaustive search only at a tie to within 1e-6 relative, where f32
// and double arithmetic may disagree.
//
//===----------------------------------------------------------------------===//

#include "Nf4TestUtil.h"
#include "RuntimeTestUtil.h"
#include "memopt/runtime/DTypeRules.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>

using namespace memopt::test;
using memopt::runtime::kNf4Block;
using memopt::runtime::kNf4Levels;
using memopt::runtime::kNf4ScaleGroup;
using memopt::runtime::nf4Dequantize;
using memopt::runtime::nf4Levels;
using memopt::runtime::nf4PackedBytes;

namespace rt = memopt::runtime;

namespace {

/// QLoRA's Appendix E.
const char *const kPublishedLevels[kNf4Levels] = {"-1.0",
                                                  "-0.6961928009986877",
                                                  "-0.5250730514526367",
                                                  "-0.39491748809814453",
                                                  "-0.28444138169288635",
                                                  "-0.18477343022823334",
                                                  "-0.09105003625154495",
                                                  "0.0",
                                                  "0.07958029955625534",
                                                  "0.16093020141124725",
                                                  "0.24611230194568634",
                                                  "0.33791524171829224",
                                                  "0.44070982933044434",
                                                  "0.5626170039176941",
                                                  "0.7229568362236023",
                                                  "1.0"};

uint32_t bits(float x) { return rt::floatBits(x); }

TEST(Nf4Test, LevelsAreThePublishedDecimals) {
  const float macro[kNf4Levels] = MEMOPT_NF4_LEVELS;
  for (int i = 0; i < kNf4Levels; ++i) {
    float expected =
        static_cast<float>(std::strtod(kPublishedLevels[i], nullptr));
    EXPECT_EQ(bits(nf4Levels()[i]), bits(expected)) << kPublishedLevels[i];
    EXPECT_EQ(bits(macro[i]), bits(expected)) << kPublishedLevels[i];
    if (i > 0) {
      EXPECT_LT(nf4Levels()[i - 1], nf4Levels()[i]);
    }
  }
  EXPECT_EQ(bits(nf4Levels()[7]), 0u) << "an exact +0";
}

TEST(Nf4Test, LayoutSizes) {
  struct Layout {
    int64_t n, absmaxCodesAt, scalesAt, offsetAt, bytes;
  };
  // h = ceil(n/2), nb = ceil(n/64), s = align4(h + nb), ng = ceil(nb/256).
  const Layout layouts[] = {
      {1, 1, 4, 8, 12},
      {63, 32, 36, 40, 44},
      {64, 32, 36, 40, 44},
      {65, 33, 36, 40, 44},
      {64 * 256, 8192, 8448, 8452, 8456},
      {64 * 256 + 1, 8193, 8452, 8460, 8464},
      {1000000, 500000, 515628, 515876, 515880},
      {0, 0, 0, 0, 4},
  };
  for (const Layout &l : layouts) {
    EXPECT_EQ(rt::nf4AbsmaxCodesAt(l.n), l.absmaxCodesAt) << l.n;
    EXPECT_EQ(rt::nf4ScalesAt(l.n), l.scalesAt) << l.n;
    EXPECT_EQ(rt::nf4OffsetAt(l.n), l.offsetAt) << l.n;
    EXPECT_EQ(nf4PackedBytes(l.n), l.bytes) << l.n;
    EXPECT_EQ(memopt_nf4_packed_bytes(l.n), static_cast<uint64_t>(l.bytes))
        << l.n;
  }
  for (int64_t n = 0; n < 70000; n += 37)
    ASSERT_EQ(memopt_nf4_packed_bytes(n),
              static_cast<uint64_t>(nf4PackedBytes(n)))
        << n;
  EXPECT_EQ(memopt_nf4_packed_bytes(-1), 0u);
}

TEST(Nf4Test, ScratchRule) {
  // chunk = max(1, min(ceil(n / 8), floor(8 MiB / 4k))); 4 k chunk
  // rounded to 256.
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(70, 130), 4864u);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(1, 130), 768u);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(4096, 4096), 8u << 20);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(11008, 4096), 8u << 20);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(4096, 11008),
            (4u * 11008 * 190 + 255) / 256 * 256);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(10, 3000000), 12000000u);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(0, 5), 0u);
  EXPECT_EQ(memopt_nf4_matmul_scratch_bytes(5, 0), 0u);
  // The runtime's chunk of the planned scratch is the rule's.
  EXPECT_EQ(rt::nf4MatmulChunk(4096, 11008,
                               memopt_nf4_matmul_scratch_bytes(4096, 11008)),
            190);
  EXPECT_EQ(rt::nf4MatmulChunk(70, 130, 16 * 520 + 519), 16);
  EXPECT_EQ(rt::nf4MatmulChunk(70, 0, 0), 70);
}

//===----------------------------------------------------------------------===//
// Quantization against a float64 reference
//===----------------------------------------------------------------------===//

/// The index of the value of `table` nearest `y`, by exhaustive search in
/// double (the lower on a tie).
int bruteNearest(const float *table, int size, double y) {
  int best = 0;
  for (int j = 1; j < size; ++j)
    if (std::fabs(y - table[j]) < std::fabs(y - table[best]))
      best = j;
  return best;
}

/// Whether `got` is as near `y` as `want` to within 1e-6 relative.
bool nearTie(const float *table, double y, int got, int want) {
  double dGot = std::fabs(y - table[got]), dWant = std::fabs(y - table[want]);
  return std::fabs(dGot - dWant) <= 1e-6 * std::max(std::fabs(y), 1e-30);
}

/// The largest distance from a value in [-1, 1] to its nearest entry of the
/// ascending `table`.
double halfLargestGap(const float *table, int size) {
  double gap = std::max(1.0 + table[0], 1.0 - table[size - 1]);
  for (int j = 1; j < size; ++j)
    gap = std::max(gap, (static_cast<double>(table[j]) - table[j - 1]) / 2.0);
  return gap;
}

float loadF32(const std::vector<uint8_t> &packed, int64_t at) {
  float x;
  std::memcpy(&x, packed.data() + at, 4);
  return x;
}

/// Quantizes `w` and checks every stored byte and every dequantized value
/// against the reference, allowing `allowedTies` near-ties.
void expectQuantizesAsReference(const std::vector<float> &w,
                                int allowedTies = 4) {
  const int64_t n = static_cast<int64_t>(w.size());
  const int64_t blocks = rt::nf4Blocks(n);
  const float signedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
  const float *levels = nf4Levels();
  std::vector<uint8_t> packed = nf4Pack(w);
  ASSERT_EQ(static_cast<int64_t>(packed.size()), nf4PackedBytes(n));

  // The absmaxes and their mean in double.
  std::vector<double> absmax(blocks, 0.0);
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = b * kNf4Block; i < std::min(n, (b + 1) * kNf4Block); ++i)
      absmax[b] = std::max(absmax[b], std::fabs(static_cast<double>(w[i])));
    sum += absmax[b];
  }
  const float offset = static_cast<float>(sum / blocks);
  EXPECT_EQ(bits(loadF32(packed, rt::nf4OffsetAt(n))), bits(offset));

  // Each group's scale, each block's absmax code and its dequantized A_b.
  const double dynamicHalfGap = halfLargestGap(signedCode, 256);
  std::vector<float> dequantizedAbsmax(blocks);
  int absmaxTies = 0;
  for (int64_t g = 0; g < rt::nf4ScaleGroups(n); ++g) {
    int64_t first = g * kNf4ScaleGroup;
    int64_t last = std::min(blocks, first + kNf4ScaleGroup);
    float scale = 0.0f;
    for (int64_t b = first; b < last; ++b)
      scale =
          std::max(scale, std::fabs(static_cast<float>(absmax[b]) - offset));
    ASSERT_EQ(bits(loadF32(packed, rt::nf4ScalesAt(n) + 4 * g)), bits(scale))
        << "group " << g;
    for (int64_t b = first; b < last; ++b) {
      float centered = static_cast<float>(absmax[b]) - offset;
      double y = scale > 0.0f ? static_cast<double>(centered) / scale : 0.0;
      int got = packed[rt::nf4AbsmaxCodesAt(n) + b];
      int want = bruteNearest(signedCode, 256, y);
      if (got != want) {
        EXPECT_TRUE(nearTie(signedCode, y, got, want))
            << "block " << b << ": absmax code " << got << ", nearest " << want;
        ++absmaxTies;
      }
      float scaled = signedCode[got] * scale;
      dequantizedAbsmax[b] = scaled + offset;
      EXPECT_EQ(bits(rt::nf4BlockAbsmax(packed.data(), n, b)),
                bits(dequantizedAbsmax[b]))
          << "block " << b;
      // The absmax's own error: half a step of the dynamic code, scaled,
      // and the roundings of c_b, the scaled code and the sum.
      double error = std::fabs(dequantizedAbsmax[b] - absmax[b]);
      EXPECT_LE(error, dynamicHalfGap * scale * (1.0 + 1e-6) +
                           std::ldexp(1.0, -22) *
                               (scale + absmax[b] + std::fabs(offset)))
          << "block " << b;
    }
  }

  // Every element: the nearest level to w / a_b, and level * A_b.
  const double halfGap = halfLargestGap(levels, kNf4Levels);
  int levelTies = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t b = i / kNf4Block;
    int got = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 0xf;
    double y = absmax[b] > 0.0 ? w[i] / absmax[b] : 0.0;
    int want = bruteNearest(levels, kNf4Levels, y);
    if (got != want) {
      ASSERT_TRUE(nearTie(levels, y, got, want))
          << "element " << i << ": level " << got << ", nearest " << want;
      ++levelTies;
    }
    float value = nf4Dequantize(packed.data(), n, i);
    ASSERT_EQ(bits(value), bits(levels[got] * dequantizedAbsmax[b]))
        << "element " << i;
    double error = std::fabs(static_cast<double>(value) - w[i]);
    double bound = halfGap * absmax[b] * (1.0 + 1e-6) +
                   std::fabs(dequantizedAbsmax[b] - absmax[b]) +
                   std::ldexp(1.0, -23) * std::fabs(dequantizedAbsmax[b]);
    ASSERT_LE(error, bound) << "element " << i << " of block " << b;
    if (absmax[b] == 0.0) {
      ASSERT_EQ(value, 0.0f) << "element " << i << " of a zero block";
    }
  }
  EXPECT_LE(absmaxTies + levelTies, allowedTies);

  // The bytes no code owns are zero.
  if (n % 2) {
    EXPECT_EQ(packed[n / 2] & 0xf, 0) << "the missing odd element's nibble";
  }
  for (int64_t at = rt::nf4AbsmaxCodesAt(n) + blocks; at < rt::nf4ScalesAt(n);
       ++at)
    EXPECT_EQ(packed[at], 0) << "padding byte " << at;
}

TEST(Nf4Test, QuantizesAsTheReference) {
  std::mt19937 rng(7);
  // Two scale groups, a partial last block, an odd count.
  std::vector<float> w = nf4Weights(rng, 64 * 300 + 37);
  // A zero block, a block with one outlier, a block of equal magnitudes,
  // and the exact midpoints between levels relative to the absmax.
  std::fill(w.begin() + 5 * 64, w.begin() + 6 * 64, 0.0f);
  w[9 * 64 + 3] = 40.0f;
  for (int64_t i = 11 * 64; i < 12 * 64; ++i)
    w[i] = i % 2 ? 0.5f : -0.5f;
  std::fill(w.begin() + 13 * 64, w.begin() + 14 * 64, 0.0f);
  w[13 * 64] = 1.0f;
  for (int j = 1; j < kNf4Levels; ++j)
    w[13 * 64 + j] = (nf4Levels()[j - 1] + nf4Levels()[j]) / 2.0f;
  // The 15 midpoints are ties by construction.
  expectQuantizesAsReference(w, /*allowedTies=*/4 + 15);
}

TEST(Nf4Test, QuantizesSmallAndUniformTensors) {
  std::mt19937 rng(8);
  for (int64_t n : {1, 2, 63, 64, 65, 64 * 256 + 1}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    expectQuantizesAsReference(nf4Weights(rng, n));
  }
  // Every block the same absmax: the centered absmaxes are all 0.
  std::vector<float> uniform(64 * 5, 0.25f);
  expectQuantizesAsReference(uniform);
  // All zeros.
  std::vector<uint8_t> zeros = nf4Pack(std::vector<float>(130, 0.0f));
  for (int64_t i = 0; i < 130; ++i)
    ASSERT_EQ(nf4Dequantize(zeros.data(), 130, i), 0.0f) << i;
}

TEST(Nf4Test, RangeDequantizesAsElements) {
  std::mt19937 rng(9);
  const int64_t n = 64 * 10 + 5;
  std::vector<uint8_t> packed = nf4Pack(nf4Weights(rng, n));
  for (auto [begin, count] : {std::pair<int64_t, int64_t>{0, n},
                              {1, 63},
                              {63, 2},
                              {100, 300},
                              {n - 7, 7}}) {
    std::vector<float> out(count);
    rt::nf4DequantizeRange(packed.data(), n, begin, count, out.data());
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(bits(out[i]), bits(nf4Dequantize(packed.data(), n, begin + i)))
          << begin + i;
  }
}

TEST(Nf4Test, NearestCodeOfAShortTable) {
  const float *levels = nf4Levels();
  EXPECT_EQ(rt::nearestCode(levels, -2.0f, kNf4Levels), 0);
  EXPECT_EQ(rt::nearestCode(levels, 2.0f, kNf4Levels), 15);
  EXPECT_EQ(rt::nearestCode(levels, 0.0f, kNf4Levels), 7);
  for (int j = 0; j < kNf4Levels; ++j)
    EXPECT_EQ(rt::nearestCode(levels, levels[j], kNf4Levels), j);
  // A tie goes to the lower level: 0.5 lies halfway between 0 and 1 of
  // this table.
  const float table[3] = {0.0f, 1.0f, 2.0f};
  EXPECT_EQ(rt::nearestCode(table, 0.5f, 3), 0);
  EXPECT_EQ(rt::nearestCode(table, 1.5f, 3), 1);
}

//===----------------------------------------------------------------------===//
// memopt_nf4_matmul
//===----------------------------------------------------------------------===//

struct ProductShape {
  int64_t m, n, k;
  /// Columns per chunk the scratch holds; 0: the planned scratch.
  int64_t chunk;
};

class Nf4MatmulTest : public RuntimeTest {
protected:
  /// Runs one product and checks each chunk's columns against memopt_matmul
  /// of a and that chunk of the dequantized weight, bit for bit (with one
  /// chunk: memopt_matmul of the whole dequantized weight), and the whole
  /// against the float64 product.
  void expectProduct(memopt_dtype dtype, bool transB, ProductShape s) {
    std::string what =
        std::string(rt::dtypeName(dtype)) + (transB ? " trans_b" : "") +
        " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
        " k=" + std::to_string(s.k) + " chunk=" + std::to_string(s.chunk);
    SCOPED_TRACE(what);
    int64_t numel = s.n * s.k;
    std::vector<uint8_t> packed = nf4Pack(nf4Weights(rng, numel));
    std::vector<float> w = nf4Dequantized(dtype, packed, numel);
    std::vector<float> a =
        representable(ctx, dtype, randomVector(rng, s.m * s.k));
    std::vector<uint8_t> aBytes = storageOf(dtype, a);

    uint64_t scratchBytes =
        s.chunk ? 4 * s.k * s.chunk : memopt_nf4_matmul_scratch_bytes(s.n, s.k);
    // Guard floats after the scratch, which the product must not write.
    const size_t guard = 16;
    std::vector<float> scratch(scratchBytes / 4 + guard, -7.0f);
    size_t size = memopt_dtype_size(dtype);
    std::vector<uint8_t> c(s.m * s.n * size, 0xcd);
    memopt_nf4_matmul(ctx, dtype, aBytes.data(), packed.data(), c.data(),
                      scratch.data(), scratchBytes, s.m, s.n, s.k, transB);
    expectOk();
    for (size_t g = scratch.size() - guard; g < scratch.size(); ++g)
      ASSERT_EQ(scratch[g], -7.0f) << "the scratch overflowed";

    int64_t chunk = rt::nf4MatmulChunk(s.n, s.k, scratchBytes);
    // The planned scratch holds at least the rule's chunk (its rounding
    // to 256 bytes may add a column).
    int64_t planned = std::max<int64_t>(
        1, std::min<int64_t>((s.n + 7) / 8, (8 << 20) / (4 * s.k)));
    if (s.chunk)
      EXPECT_EQ(chunk, s.chunk);
    else
      EXPECT_GE(chunk, std::min(s.n, planned));
    EXPECT_LE(static_cast<uint64_t>(4 * s.k * chunk), scratchBytes);
    for (int64_t first = 0; first < s.n; first += chunk) {
      int64_t cols = std::min(chunk, s.n - first);
      // The chunk of op(w)'s columns in w's layout, and its product.
      std::vector<float> part;
      for (int64_t r = 0; r < (transB ? cols : s.k); ++r)
        for (int64_t j = 0; j < (transB ? s.k : cols); ++j)
          part.push_back(
              w[transB ? (first + r) * s.k + j : r * s.n + first + j]);
      std::vector<uint8_t> partBytes = storageOf(dtype, part);
      std::vector<uint8_t> ref(s.m * cols * size);
      memopt_matmul(ctx, dtype, aBytes.data(), partBytes.data(), ref.data(), 1,
                    1, s.m, cols, s.k, 0, transB, dtype);
      expectOk();
      for (int64_t i = 0; i < s.m; ++i)
        ASSERT_TRUE(std::equal(ref.begin() + i * cols * size,
                               ref.begin() + (i + 1) * cols * size,
                               c.begin() + (i * s.n + first) * size))
            << "row " << i << " of the columns [" << first << ", "
            << first + cols << ") differs from memopt_matmul of the "
            << (cols == s.n ? "whole " : "chunk of the ")
            << "dequantized weight";
    }
    expectNearProduct(dtype, a, w, floatsOf(dtype, c), s.m, s.n, s.k, transB,
                      what);
  }
};

TEST_F(Nf4MatmulTest, EqualsMatmulOfTheDequantizedWeight) {
  const ProductShape shapes[] = {
      {3, 70, 130, 16}, // chunks of 16 columns, the last of 6
      {3, 70, 130, 0},  // one chunk
      {5, 1, 64, 0},    // one column
      {4, 33, 7, 5},    // k below a block, an odd chunk
      {17, 129, 200, 50}, {33, 257, 1000, 0}, // one chunk of a larger weight
  };
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_F16, MEMOPT_BF16})
    for (bool transB : {true, false})
      for (const ProductShape &s : shapes)
        expectProduct(dtype, transB, s);
}

TEST_F(Nf4MatmulTest, EmptyProducts) {
  // No rows or columns: nothing is read or written, no scratch needed.
  memopt_nf4_matmul(ctx, MEMOPT_F32, nullptr, nullptr, nullptr, nullptr, 0, 0,
                    4, 8, 1);
  memopt_nf4_matmul(ctx, MEMOPT_BF16, nullptr, nullptr, nullptr, nullptr, 0, 3,
                    0, 8, 0);
  expectOk();
  // k = 0: the product is zero, and there is no column to dequantize.
  std::vector<float> c(6, 1.0f);
  std::vector<uint8_t> packed(nf4PackedBytes(0), 0);
  memopt_nf4_matmul(ctx, MEMOPT_F32, nullptr, packed.data(), c.data(), nullptr,
                    0, 2, 3, 0, 1);
  expectOk();
  for (float x : c)
    EXPECT_EQ(x, 0.0f);
}

TEST_F(Nf4MatmulTest, ArgumentErrors) {
  expectError = true;
  std::vector<float> buffer(64);
  uint8_t *bytes = reinterpret_cast<uint8_t *>(buffer.data());
  struct Case {
    const char *message;
    std::function<void()> call;
  } cases[] = {
      {"memopt_nf4_matmul: expected a float dtype (f32, f16, bf16), got i1 "
       "(5)",
       [&] {
         memopt_nf4_matmul(ctx, MEMOPT_I1, buffer.data(), bytes, buffer.data(),
                           buffer.data(), 256, 2, 2, 2, 1);
       }},
      {"memopt_nf4_matmul: negative extent -1",
       [&] {
         memopt_nf4_matmul(ctx, MEMOPT_F32, buffer.data(), bytes, buffer.data(),
                           buffer.data(), 256, 2, 2, -1, 1);
       }},
      {"memopt_nf4_matmul: null buffer",
       [&] {
         memopt_nf4_matmul(ctx, MEMOPT_F32, nullptr, bytes, buffer.data(),
                           buffer.data(), 256, 2, 2, 2, 0);
       }},
      {"memopt_nf4_matmul: scratch of 519 bytes is smaller than one column "
       "of op(w) (520 bytes)",
       [&] {
         memopt_nf4_matmul(ctx, MEMOPT_F32, buffer.data(), bytes, buffer.data(),
                           buffer.data(), 519, 1, 1, 130, 1);
       }},
      {"memopt_nf4_matmul: scratch of 0 bytes is smaller than one column of "
       "op(w) (8 bytes)",
       [&] {
         memopt_nf4_matmul(ctx, MEMOPT_BF16, buffer.data(), bytes,
                           buffer.data(), nullptr, 256, 2, 2, 2, 0);
       }},
  };
  for (const Case &c : cases) {
    std::vector<float> before = buffer;
    c.call();
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT)
        << c.message;
    EXPECT_STREQ(memopt_get_error_message(ctx), c.message);
    EXPECT_EQ(buffer, before) << c.message << ": wrote a buffer";
    memopt_clear_error(ctx);
  }
}

/// A fused loss's problem: x [rows, dim], w [classes, dim].
struct LossShape {
  int64_t rows, dim, classes, chunk;
  bool bias;
};

class Nf4LinearLossTest : public RuntimeTest {
protected:
  /// The NF4 fused loss and its gradient against memopt_linear_cross_entropy
  /// of the dequantized weight stored in dtype, bit for bit: the loss, the
  /// log-sum-exps, grad_x and grad_bias (LinearLossTest.cpp checks that one
  /// against float64).
  void expectLoss(memopt_dtype dtype, LossShape s) {
    SCOPED_TRACE(std::string(rt::dtypeName(dtype)) +
                 " rows=" + std::to_string(s.rows) +
                 " dim=" + std::to_string(s.dim) +
                 " classes=" + std::to_string(s.classes) +
                 " chunk=" + std::to_string(s.chunk) +
                 (s.bias ? " bias" : ""));
    int64_t numel = s.classes * s.dim;
    std::vector<uint8_t> packed = nf4Pack(nf4Weights(rng, numel));
    std::vector<uint8_t> w =
        storageOf(dtype, nf4Dequantized(dtype, packed, numel));
    std::vector<uint8_t> x = storageOf(
        dtype, representable(ctx, dtype, randomVector(rng, s.rows * s.dim)));
    std::vector<uint8_t> bias = storageOf(
        dtype, representable(ctx, dtype, randomVector(rng, s.classes)));
    const void *b = s.bias ? bias.data() : nullptr;
    std::vector<int64_t> labels(s.rows);
    std::uniform_int_distribution<int64_t> label(0, s.classes - 1);
    for (int64_t &l : labels)
      l = label(rng);
    if (s.rows > 1)
      labels[1] = -100;

    size_t size = memopt_dtype_size(dtype);
    float loss[2], gradLoss = 1.5f;
    std::vector<float> lse[2];
    std::vector<uint8_t> gradX[2], gradBias[2];
    for (int nf4 = 0; nf4 < 2; ++nf4) {
      lse[nf4].assign(s.rows, 0.0f);
      gradX[nf4].assign(s.rows * s.dim * size, 0xcd);
      gradBias[nf4].assign(s.classes * size, 0xcd);
      void *gb = s.bias ? gradBias[nf4].data() : nullptr;
      for (int grad = 0; grad < 2; ++grad) {
        uint64_t bytes =
            nf4 ? memopt_nf4_linear_cross_entropy_scratch_bytes(
                      dtype, s.rows, s.dim, s.chunk, grad)
                : memopt_linear_cross_entropy_scratch_bytes(
                      dtype, dtype, s.rows, s.dim, s.chunk, grad);
        // Guard floats after the scratch, which the entries must not write.
        const size_t guard = 16;
        std::vector<float> scratch(bytes / 4 + guard, -7.0f);
        if (nf4 && !grad)
          memopt_nf4_linear_cross_entropy(
              ctx, dtype, x.data(), packed.data(), b, MEMOPT_I64,
              labels.data(), &loss[nf4], lse[nf4].data(), scratch.data(),
              bytes, s.rows, s.dim, s.classes, s.chunk, -100,
              MEMOPT_REDUCTION_MEAN);
        else if (nf4)
          memopt_nf4_linear_cross_entropy_grad(
              ctx, dtype, x.data(), packed.data(), b, MEMOPT_I64,
              labels.data(), lse[nf4].data(), &gradLoss, gradX[nf4].data(),
              gb, scratch.data(), bytes, s.rows, s.dim, s.classes, s.chunk,
              -100, MEMOPT_REDUCTION_MEAN);
        else if (!grad)
          memopt_linear_cross_entropy(
              ctx, dtype, x.data(), w.data(), dtype, b, MEMOPT_I64,
              labels.data(), &loss[nf4], lse[nf4].data(), scratch.data(),
              bytes, s.rows, s.dim, s.classes, s.chunk, -100,
              MEMOPT_REDUCTION_MEAN);
        else {
          std::vector<uint8_t> gradW(numel * size);
          memopt_linear_cross_entropy_grad(
              ctx, dtype, x.data(), w.data(), dtype, b, MEMOPT_I64,
              labels.data(), lse[nf4].data(), &gradLoss, gradX[nf4].data(),
              gradW.data(), gb, scratch.data(), bytes, s.rows, s.dim,
              s.classes, s.chunk, -100, MEMOPT_REDUCTION_MEAN);
        }
        expectOk();
        for (size_t g = scratch.size() - guard; g < scratch.size(); ++g)
          ASSERT_EQ(scratch[g], -7.0f) << "the scratch overflowed";
      }
    }
    EXPECT_EQ(bits(loss[1]), bits(loss[0])) << loss[1] << " vs " << loss[0];
    EXPECT_TRUE(std::isfinite(loss[0]));
    for (int64_t r = 0; r < s.rows; ++r)
      EXPECT_EQ(bits(lse[1][r]), bits(lse[0][r])) << "lse of row " << r;
    EXPECT_EQ(gradX[1], gradX[0]) << "grad_x";
    EXPECT_EQ(gradBias[1], gradBias[0]) << "grad_bias";
  }
};

TEST_F(Nf4LinearLossTest, EqualsTheLossOfTheDequantizedWeight) {
  const LossShape shapes[] = {
      {6, 64, 40, 16, true},   // chunks of 16 classes, the last of 8
      {6, 64, 40, 40, false},  // one chunk
      {5, 7, 33, 5, true},     // rows of w shorter than a block
      {17, 130, 129, 50, false}, {1, 96, 300, 77, true},
  };
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_F16, MEMOPT_BF16})
    for (const LossShape &s : shapes)
      expectLoss(dtype, s);
}

TEST_F(Nf4LinearLossTest, ScratchIsTheDTypeWeightsPlusAnF32Chunk) {
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_BF16})
    for (int grad : {0, 1})
      EXPECT_EQ(memopt_nf4_linear_cross_entropy_scratch_bytes(dtype, 6, 64, 16,
                                                              grad),
                memopt_linear_cross_entropy_scratch_bytes(dtype, dtype, 6, 64,
                                                          16, grad) +
                    4096);
  // 3 x 5 f32 rounded up to 256 bytes.
  EXPECT_EQ(memopt_nf4_linear_cross_entropy_scratch_bytes(MEMOPT_F32, 1, 5, 3,
                                                          0),
            512u);
  EXPECT_EQ(memopt_nf4_linear_cross_entropy_scratch_bytes(MEMOPT_I32, 1, 5, 3,
                                                          0),
            0u);
  EXPECT_EQ(memopt_nf4_linear_cross_entropy_scratch_bytes(MEMOPT_F32, -1, 5,
                                                          3, 0),
            0u);
}

TEST_F(Nf4LinearLossTest, ArgumentErrors) {
  expectError = true;
  std::vector<float> buffer(256);
  uint8_t *bytes = reinterpret_cast<uint8_t *>(buffer.data());
  std::vector<int64_t> labels = {0, 1};
  float loss = 0.0f, grad = 1.0f;
  struct Case {
    const char *message;
    std::function<void()> call;
  } cases[] = {
      // 2 x 2 logits (256) + 2 x 4 f32 weights (256).
      {"memopt_nf4_linear_cross_entropy: scratch of 256 bytes, 512 needed",
       [&] {
         memopt_nf4_linear_cross_entropy(
             ctx, MEMOPT_F32, buffer.data(), bytes, nullptr, MEMOPT_I64,
             labels.data(), &loss, buffer.data(), buffer.data(), 256, 2, 4, 3,
             2, -100, MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_nf4_linear_cross_entropy_grad: chunk 4 outside [1, 3]",
       [&] {
         memopt_nf4_linear_cross_entropy_grad(
             ctx, MEMOPT_F32, buffer.data(), bytes, nullptr, MEMOPT_I64,
             labels.data(), buffer.data(), &grad, buffer.data(), nullptr,
             buffer.data(), 1024, 2, 4, 3, 4, -100, MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_nf4_linear_cross_entropy_grad: null buffer",
       [&] {
         memopt_nf4_linear_cross_entropy_grad(
             ctx, MEMOPT_BF16, buffer.data(), nullptr, nullptr, MEMOPT_I64,
             labels.data(), buffer.data(), &grad, buffer.data(), nullptr,
             buffer.data(), 1024, 2, 4, 3, 2, -100, MEMOPT_REDUCTION_MEAN);
       }},
  };
  for (const Case &c : cases) {
    std::vector<float> before = buffer;
    float lossBefore = loss;
    c.call();
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT)
        << c.message;
    EXPECT_STREQ(memopt_get_error_message(ctx), c.message);
    EXPECT_EQ(buffer, before) << c.message << ": wrote a buffer";
    EXPECT_EQ(loss, lossBefore) << c.message << ": wrote the loss";
    memopt_clear_error(ctx);
  }
}

} // namespace
