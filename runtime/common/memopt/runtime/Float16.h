//===- Float16.h - f16 and bf16 conversions ---------------------*- C++ -*-===//
//
// Bit-exact conversions between f32 and the two 16-bit float formats, with
// round-to-nearest-even, the rounding of `memopt.cast`, of CUDA's
// __float2half_rn / __float2bfloat16_rn and of the F16C instructions. The
// host runtime stores f16/bf16 tensors as uint16_t bit patterns and computes
// in f32 through these functions, so mixed precision is testable on a CPU;
// the driver casts a checkpoint's f32 master weights to a parameter's
// low-precision copy with them (ZeRO, docs/DataParallel.md).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_FLOAT16_H
#define MEMOPT_RUNTIME_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace memopt {
namespace runtime {

/// The bit pattern of `f`.
inline uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

/// The float whose bit pattern is `bits`.
inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// Rounds `f` to the nearest IEEE binary16 value, ties to even. Values at or
/// above 65520 in magnitude become inf, values at or below 2^-25 become a
/// signed zero; NaN becomes a quiet NaN keeping the top payload bits.
inline uint16_t floatToHalfBits(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absX = x & 0x7fffffffu;
  if (absX >= 0x7f800000u) {
    if (absX == 0x7f800000u)
      return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((absX >> 13) & 0x3ffu));
  }
  int32_t exponent = static_cast<int32_t>(absX >> 23) - 127;
  if (exponent > 15)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (exponent >= -14) {
    // Normal range: drop 13 mantissa bits. A carry out of the mantissa
    // increments the exponent, which also turns 65520.. into inf (0x7c00).
    uint32_t mantissa = absX & 0x7fffffu;
    uint32_t half =
        (static_cast<uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Subnormal result: value = m * 2^(exponent - 23) with the implicit bit,
  // in units of 2^-24 that is m >> (-exponent - 1).
  uint32_t shift = static_cast<uint32_t>(-exponent - 1);
  if (shift > 24)
    return static_cast<uint16_t>(sign);
  uint32_t m = (absX & 0x7fffffu) | 0x800000u;
  uint32_t q = m >> shift;
  uint32_t rest = m & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u)))
    ++q;
  return static_cast<uint16_t>(sign | q);
}

/// The f32 value of a binary16 bit pattern (exact; NaN stays NaN, quieted).
inline float halfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13) |
                       (mantissa ? 0x400000u : 0u));
  if (exponent != 0)
    return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0)
    return bitsToFloat(sign);
  // Subnormal: normalise the mantissa.
  int32_t e = -14;
  while (!(mantissa & 0x400u)) {
    mantissa <<= 1;
    --e;
  }
  mantissa &= 0x3ffu;
  return bitsToFloat(sign | (static_cast<uint32_t>(e + 127) << 23) |
                     (mantissa << 13));
}

/// Rounds `f` to the nearest bfloat16 value, ties to even (the top 16 bits
/// of an f32, so every f32 exponent is kept and only large finite values
/// round up to inf). NaN becomes a quiet NaN.
inline uint16_t floatToBFloat16Bits(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t roundingBias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + roundingBias) >> 16);
}

/// The f32 value of a bfloat16 bit pattern (exact).
inline float bfloat16BitsToFloat(uint16_t b) {
  return bitsToFloat(static_cast<uint32_t>(b) << 16);
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_FLOAT16_H
