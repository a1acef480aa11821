//===- Random.h - the dropout mask of the host runtime ----------*- C++ -*-===//
//
// The keep test of memopt_dropout (runtime.h documents the derivation), shared
// by memopt_dropout and the fused attention kernels so that a fused op draws
// exactly the mask of the unfused softmax -> dropout.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOST_RANDOM_H
#define MEMOPT_RUNTIME_HOST_RANDOM_H

#include <cstdint>

namespace memopt {
namespace host {

/// keep(e) of memopt_dropout for one (p, seed, stream, step): a pure
/// function of the element index e.
class DropoutMask {
public:
  DropoutMask(double p, uint64_t seed, uint64_t stream, uint64_t step);

  /// keep[i] = keep(first + i) (1 or 0) for 0 <= i < n.
  void draw(uint64_t first, int64_t n, uint8_t *keep) const;

  /// The scale of kept elements, 1 / (1 - p) rounded to f32.
  float scale() const { return keepScale; }

private:
  uint32_t key[2];
  uint64_t step;
  uint32_t threshold;
  float keepScale;
};

} // namespace host
} // namespace memopt

#endif // MEMOPT_RUNTIME_HOST_RANDOM_H
