//===- EmbeddingMath.h - embedding indices and gradient keys ----*- C++ -*-===//
//
// The index arithmetic of memopt_embedding and memopt_embedding_grad,
// written once for the host runtime (runtime/host/Shape.cpp) and the CUDA
// kernels (runtime/cuda/Shape.cu): which indices are in range, which is the
// padding row, where element (row, col) of a [rows, dim] tensor lives.
//
// It also holds the pure part of the CUDA gradient, so that the unit tests
// check it on a CPU. The gradient adds, for every row, the gradient rows of
// the positions holding it in increasing position order (the host's order,
// hence f32 results equal to the host's bit for bit). The device gets that
// order by sorting one 64-bit key per position, (row << positionBits) |
// position: keys are distinct, so any correct sort gives the same sequence,
// the rows come out grouped and each row's positions ascending. Positions
// whose index is out of range or the padding row get the row `numRows`,
// which sorts after every real row and is skipped. A segment (the positions
// of one row) starts where the row part of the key changes.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_EMBEDDINGMATH_H
#define MEMOPT_RUNTIME_EMBEDDINGMATH_H

#include "memopt/runtime/HostDevice.h"

#include <cstdint>

namespace memopt {
namespace runtime {

/// Whether `index` names a row of a table of `numRows` rows.
MEMOPT_HOST_DEVICE inline bool embeddingIndexInRange(int64_t index,
                                                     int64_t numRows) {
  return index >= 0 && index < numRows;
}

/// Whether the in-range `index` is the padding row; a negative `paddingIdx`
/// means there is none.
MEMOPT_HOST_DEVICE inline bool isPaddingRow(int64_t index, int64_t paddingIdx) {
  return paddingIdx >= 0 && index == paddingIdx;
}

/// The element offset of (row, col) in a row-major [*, dim] tensor: a table
/// row, or the gradient row of a position.
MEMOPT_HOST_DEVICE inline int64_t embeddingOffset(int64_t row, int64_t col,
                                                  int64_t dim) {
  return row * dim + col;
}

/// The number of bits that hold every value in [0, v].
MEMOPT_HOST_DEVICE inline int bitWidth(uint64_t v) {
  int bits = 0;
  for (; v != 0; v >>= 1)
    ++bits;
  return bits;
}

/// How the gradient's sort keys split their bits: the position in the low
/// `positionBits`, the row (up to the sentinel `numRows`) above it.
struct EmbeddingKeyLayout {
  int positionBits = 0;
  int rowBits = 0;

  /// One past the highest bit a sort must compare.
  int endBit() const { return positionBits + rowBits; }
  /// Whether the keys fit in 64 bits.
  bool fits() const { return endBit() <= 64; }
};

/// The key layout of `numIndices` positions into a table of `numRows` rows.
inline EmbeddingKeyLayout embeddingKeyLayout(int64_t numIndices,
                                             int64_t numRows) {
  EmbeddingKeyLayout layout;
  layout.positionBits =
      bitWidth(numIndices > 0 ? static_cast<uint64_t>(numIndices - 1) : 0);
  layout.rowBits = bitWidth(numRows > 0 ? static_cast<uint64_t>(numRows) : 0);
  return layout;
}

/// The sort key of `position`, whose index is `index`: its row, or the
/// sentinel `numRows` when the position adds nothing (index out of range or
/// the padding row). Needs a layout that fits.
MEMOPT_HOST_DEVICE inline uint64_t
embeddingGradKey(int64_t index, int64_t position, int64_t numRows,
                 int64_t paddingIdx, int positionBits) {
  bool adds =
      embeddingIndexInRange(index, numRows) && !isPaddingRow(index, paddingIdx);
  uint64_t row = static_cast<uint64_t>(adds ? index : numRows);
  return (row << positionBits) | static_cast<uint64_t>(position);
}

/// The row part of a key (`numRows` for a skipped position).
MEMOPT_HOST_DEVICE inline int64_t sortKeyRow(uint64_t key, int positionBits) {
  return static_cast<int64_t>(key >> positionBits);
}

/// The position part of a key.
MEMOPT_HOST_DEVICE inline int64_t sortKeyPosition(uint64_t key,
                                                  int positionBits) {
  uint64_t mask = (uint64_t(1) << positionBits) - 1;
  return static_cast<int64_t>(key & mask);
}

/// Whether sorted key `i` starts a segment: the first key, or one whose row
/// differs from its predecessor's.
MEMOPT_HOST_DEVICE inline bool startsSegment(const uint64_t *sortedKeys,
                                             int64_t i, int positionBits) {
  return i == 0 || sortKeyRow(sortedKeys[i], positionBits) !=
                       sortKeyRow(sortedKeys[i - 1], positionBits);
}

/// One past the last of the `n` sorted keys that share the row of key
/// `begin`.
MEMOPT_HOST_DEVICE inline int64_t segmentEnd(const uint64_t *sortedKeys,
                                             int64_t begin, int64_t n,
                                             int positionBits) {
  int64_t row = sortKeyRow(sortedKeys[begin], positionBits);
  int64_t end = begin + 1;
  while (end < n && sortKeyRow(sortedKeys[end], positionBits) == row)
    ++end;
  return end;
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_EMBEDDINGMATH_H
