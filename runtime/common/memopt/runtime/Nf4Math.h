//===- Nf4Math.h - NF4 frozen weights (QLoRA) -------------------*- C++ -*-===//
//
// 4-bit NormalFloat weights with double quantization (Dettmers et al.,
// "QLoRA: Efficient Finetuning of Quantized LLMs", 2023), written once for
// the driver, which quantizes a checkpoint's frozen weights when it loads
// them, and for the host loops and the CUDA kernels of memopt_nf4_matmul,
// which dequantize them a chunk of columns at a time.
//
// A tensor of n elements (row-major flat index i) is one byte buffer,
// "packed":
//
//   [0, h)           h = ceil(n / 2): two 4-bit codes per byte, element i in
//                    byte i / 2, even i in the high nibble, odd i in the low
//                    one (a missing last odd element: nibble 0)
//   [h, h + nb)      nb = ceil(n / 64): one 8-bit code per block of 64
//                    elements, the block's absmax double-quantized
//   [s, s + 4 ng)    s = align4(h + nb) (the bytes between are zero),
//                    ng = ceil(nb / 256): one f32 scale per 256 blocks
//   [s + 4 ng, + 4)  one f32 offset
//
// Element i is level[code_i] * A_{i / 64}: level the 16 NF4 levels (the
// paper's Appendix E: quantiles of N(0, 1) scaled to [-1, 1], with an
// exact 0), and A_b = signedCode[acode_b] * scale_{b / 256} + offset the
// block's absmax as double quantization stores it, signedCode the 8-bit
// dynamic code of QuantizeMath.h. As bitsandbytes' compressed statistics
// do, the offset is the mean of the absmaxes (which are never negative:
// centered on their mean they use both signs of the code) and each group
// of 256 is quantized to that code with its own absmax as the scale. Each
// multiply and add rounds to f32 on its own (never a fused multiply-add:
// the runtimes are built with -ffp-contract=off and the device uses
// __fmul_rn / __fadd_rn), so the host and the device dequantize to the
// same bits. Storage: 4 + 8 / 64 + 32 / (64 * 256) = 4.127 bits per
// element, against 16 for bf16.
//
// Quantization (nf4Quantize, on the host) takes each block's absmax a_b,
// the offset as the mean of the a_b in double rounded to f32, quantizes
// the a_b - offset group by group (QuantizeMath.h's quantizeBlock), and
// gives element i the level nearest w_i / a_b (the lower on a tie; the
// level 0 in a block of zeros). Weights must be finite.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_NF4MATH_H
#define MEMOPT_RUNTIME_NF4MATH_H

#include "memopt/runtime/HostDevice.h"
#include "memopt/runtime/QuantizeMath.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace memopt {
namespace runtime {

/// Elements per block: one double-quantized absmax each.
constexpr int64_t kNf4Block = 64;

/// Blocks per group of absmaxes that share one f32 scale.
constexpr int64_t kNf4ScaleGroup = 256;

/// The number of NF4 levels (4-bit codes).
constexpr int kNf4Levels = 16;

/// Blocks of a tensor of `n` elements.
MEMOPT_HOST_DEVICE constexpr int64_t nf4Blocks(int64_t n) {
  return (n + kNf4Block - 1) / kNf4Block;
}

/// Scale groups of a tensor of `n` elements.
MEMOPT_HOST_DEVICE constexpr int64_t nf4ScaleGroups(int64_t n) {
  return (nf4Blocks(n) + kNf4ScaleGroup - 1) / kNf4ScaleGroup;
}

/// Where the blocks' absmax codes start: after the n 4-bit codes.
MEMOPT_HOST_DEVICE constexpr int64_t nf4AbsmaxCodesAt(int64_t n) {
  return (n + 1) / 2;
}

/// Where the f32 scales start: after the absmax codes, 4-byte aligned.
MEMOPT_HOST_DEVICE constexpr int64_t nf4ScalesAt(int64_t n) {
  return (nf4AbsmaxCodesAt(n) + nf4Blocks(n) + 3) / 4 * 4;
}

/// Where the f32 offset is: after the scales.
MEMOPT_HOST_DEVICE constexpr int64_t nf4OffsetAt(int64_t n) {
  return nf4ScalesAt(n) + 4 * nf4ScaleGroups(n);
}

/// Bytes of a packed tensor of `n` elements (runtime.h's
/// memopt_nf4_packed_bytes).
MEMOPT_HOST_DEVICE constexpr int64_t nf4PackedBytes(int64_t n) {
  return nf4OffsetAt(n) + 4;
}

/// The 16 NF4 levels, ascending (QLoRA's Appendix E, as bitsandbytes
/// tabulates them).
#define MEMOPT_NF4_LEVELS                                                      \
  {                                                                            \
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,  \
        -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f,   \
        0.0f, 0.07958029955625534f, 0.16093020141124725f,                      \
        0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f,      \
        0.5626170039176941f, 0.7229568362236023f, 1.0f,                        \
  }

#ifdef __CUDACC__
/// The device's copies of the tables (one per translation unit).
static __constant__ float kNf4DeviceLevels[kNf4Levels] = MEMOPT_NF4_LEVELS;
static __constant__ float kNf4DeviceSignedCode[256] =
    MEMOPT_DYNAMIC_SIGNED_CODE;
#endif

/// The NF4 levels where the caller runs (host memory or device constants).
MEMOPT_HOST_DEVICE inline const float *nf4Levels() {
#ifdef __CUDA_ARCH__
  return kNf4DeviceLevels;
#else
  static const float levels[kNf4Levels] = MEMOPT_NF4_LEVELS;
  return levels;
#endif
}

/// The dynamic signed code of the absmaxes, likewise.
MEMOPT_HOST_DEVICE inline const float *nf4SignedCode() {
#ifdef __CUDA_ARCH__
  return kNf4DeviceSignedCode;
#else
  static const float code[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
  return code;
#endif
}

/// a * b and a + b, each rounded to f32 on its own.
MEMOPT_HOST_DEVICE inline float nf4Mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MEMOPT_HOST_DEVICE inline float nf4Add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// The f32 at `bytes` (any alignment).
MEMOPT_HOST_DEVICE inline float nf4LoadF32(const uint8_t *bytes) {
  float value;
  memcpy(&value, bytes, sizeof(value));
  return value;
}

/// The 4-bit code of element `i`.
MEMOPT_HOST_DEVICE inline int nf4Code(const uint8_t *packed, int64_t i) {
  uint8_t byte = packed[i / 2];
  return i % 2 == 0 ? byte >> 4 : byte & 0xf;
}

/// The absmax A_b of block `block` of a packed tensor of `n` elements:
/// signedCode[acode_b] * scale_g + offset, two f32 roundings.
MEMOPT_HOST_DEVICE inline float nf4BlockAbsmax(const uint8_t *packed, int64_t n,
                                               int64_t block) {
  float code = nf4SignedCode()[packed[nf4AbsmaxCodesAt(n) + block]];
  float scale =
      nf4LoadF32(packed + nf4ScalesAt(n) + 4 * (block / kNf4ScaleGroup));
  float offset = nf4LoadF32(packed + nf4OffsetAt(n));
  return nf4Add(nf4Mul(code, scale), offset);
}

/// Element `i` of a packed tensor of `n` elements in f32, before any
/// rounding to a 16-bit compute dtype: level[code_i] * A_{i / 64}.
MEMOPT_HOST_DEVICE inline float nf4Dequantize(const uint8_t *packed, int64_t n,
                                              int64_t i) {
  return nf4Mul(nf4Levels()[nf4Code(packed, i)],
                nf4BlockAbsmax(packed, n, i / kNf4Block));
}

/// nf4Dequantize of elements [begin, begin + count) into `out`, each
/// block's absmax computed once.
inline void nf4DequantizeRange(const uint8_t *packed, int64_t n, int64_t begin,
                               int64_t count, float *out) {
  const float *levels = nf4Levels();
  int64_t end = begin + count;
  for (int64_t i = begin; i < end;) {
    int64_t block = i / kNf4Block;
    int64_t blockEnd =
        (block + 1) * kNf4Block < end ? (block + 1) * kNf4Block : end;
    float absmax = nf4BlockAbsmax(packed, n, block);
    for (; i < blockEnd; ++i)
      out[i - begin] = nf4Mul(levels[nf4Code(packed, i)], absmax);
  }
}

/// Quantizes `n` finite values into `packed` (nf4PackedBytes(n) bytes, all
/// written).
inline void nf4Quantize(const float *values, int64_t n, uint8_t *packed) {
  std::memset(packed, 0, static_cast<size_t>(nf4PackedBytes(n)));
  int64_t blocks = nf4Blocks(n);
  std::vector<float> absmax(static_cast<size_t>(blocks));
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    float a = 0.0f;
    for (int64_t i = b * kNf4Block; i < n && i < (b + 1) * kNf4Block; ++i)
      a = std::fmax(a, std::fabs(values[i]));
    absmax[b] = a;
    sum += a;
  }
  // Double quantization: the absmaxes less their mean, in 8 bits.
  float offset = blocks > 0 ? static_cast<float>(sum / blocks) : 0.0f;
  std::memcpy(packed + nf4OffsetAt(n), &offset, sizeof(offset));
  std::vector<float> centered(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b)
    centered[b] = absmax[b] - offset;
  for (int64_t g = 0; g < nf4ScaleGroups(n); ++g) {
    int64_t first = g * kNf4ScaleGroup;
    int64_t count =
        blocks - first < kNf4ScaleGroup ? blocks - first : kNf4ScaleGroup;
    float scale = quantizeBlock(nf4SignedCode(), centered.data() + first, count,
                                packed + nf4AbsmaxCodesAt(n) + first);
    std::memcpy(packed + nf4ScalesAt(n) + 4 * g, &scale, sizeof(scale));
  }
  // Each element's level, relative to its block's exact absmax.
  for (int64_t i = 0; i < n; ++i) {
    float a = absmax[i / kNf4Block];
    float x = a > 0.0f ? values[i] / a : 0.0f;
    int code = nearestCode(nf4Levels(), x, kNf4Levels);
    packed[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? code << 4 : code);
  }
}

/// The columns of op(w) memopt_nf4_matmul dequantizes at a time: as many
/// f32 columns of k values as `scratchBytes` holds, at most n (n when k is
/// 0: there is nothing to dequantize). At least 1 for a scratch that
/// checkNf4Matmul (Validate.h) accepts.
inline int64_t nf4MatmulChunk(int64_t n, int64_t k, uint64_t scratchBytes) {
  if (k <= 0)
    return n;
  uint64_t columns = scratchBytes / (4 * static_cast<uint64_t>(k));
  return columns < static_cast<uint64_t>(n) ? static_cast<int64_t>(columns) : n;
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_NF4MATH_H
