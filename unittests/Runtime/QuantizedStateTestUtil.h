//===- QuantizedStateTestUtil.h - packed 8-bit moments in tests -*- C++ -*-===//
//
// The packed layout of an 8-bit moment (QuantizeMath.h) as the tests of the
// host and the CUDA runtime read it, and the gradients they feed the 8-bit
// AdamW update.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_QUANTIZEDSTATETESTUTIL_H
#define MEMOPT_UNITTESTS_RUNTIME_QUANTIZEDSTATETESTUTIL_H

#include "memopt/runtime/QuantizeMath.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace memopt {
namespace test {

/// One packed moment of `n` elements: per block of runtime::kQuantBlock
/// elements, its f32 absmax and then its codes.
struct Packed {
  int64_t n;
  std::vector<uint8_t> bytes;

  explicit Packed(int64_t n, uint8_t fill = 0)
      : n(n), bytes(runtime::quantizedStateBytes(n), fill) {}
  int64_t blocks() const {
    return (n + runtime::kQuantBlock - 1) / runtime::kQuantBlock;
  }
  float absmax(int64_t block) const {
    float x;
    std::memcpy(&x, bytes.data() + block * runtime::kQuantRecordBytes, 4);
    return x;
  }
  void setAbsmax(int64_t block, float x) {
    std::memcpy(bytes.data() + block * runtime::kQuantRecordBytes, &x, 4);
  }
  /// The code of element i (i < blocks() * kQuantBlock).
  uint8_t &code(int64_t i) {
    return bytes[(i / runtime::kQuantBlock) * runtime::kQuantRecordBytes + 4 +
                 i % runtime::kQuantBlock];
  }
  uint8_t code(int64_t i) const { return const_cast<Packed *>(this)->code(i); }
  /// The codes of block b.
  uint8_t *codes(int64_t b) {
    return bytes.data() + b * runtime::kQuantRecordBytes + 4;
  }
  uint8_t *data() { return bytes.data(); }
  const uint8_t *data() const { return bytes.data(); }
};

/// Gradients whose magnitudes span four decades, so that the moments use
/// the small codes too.
inline std::vector<float> spreadGradient(std::mt19937 &rng, int64_t n) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> exponent(-4.0f, 0.0f);
  std::vector<float> g(n);
  for (float &x : g)
    x = normal(rng) * std::pow(10.0f, exponent(rng));
  return g;
}

/// The bits of `x`.
inline uint32_t bitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_QUANTIZEDSTATETESTUTIL_H
