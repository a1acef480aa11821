//===- GemmPlan.h - row-major products as cuBLASLt problems -----*- C++ -*-===//
//
// memopt_matmul's products are row-major; cuBLASLt's are column-major. A
// row-major [r, c] matrix with leading dimension c is, read column-major, its
// transpose [c, r] with the same leading dimension, so row-major
// C = op(A) op(B) is the column-major product C^T = op(B)^T op(A)^T: B is
// cuBLASLt's first operand, A its second, and every op keeps its flag.
//
// A batch whose right operand is shared and whose left operand is not
// transposed folds into the rows of one product (the left operands' rows are
// consecutive in memory); any other batch is one strided-batched product in
// which a shared operand has batch stride 0.
//
// The mapping, the plan key and the alignment arithmetic are plain C++ (no
// CUDA headers) so that the unit tests run the mapped problem through a host
// column-major executor without a device. Gemm.cpp turns a mapped problem
// into cuBLASLt descriptors; GemmFallback.cu runs products cuBLASLt has no
// algorithm for.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_GEMMPLAN_H
#define MEMOPT_RUNTIME_CUDA_GEMMPLAN_H

#include "memopt/runtime.h"

#include <cstddef>
#include <cstdint>
#include <tuple>

namespace memopt {
namespace cuda {

/// Which row-major operand a column-major operand reads.
enum class GemmSource { Left, Right };

/// One column-major matrix of a product, in elements: `rows` x `cols`,
/// element (i, j) at i + j * ld of batch element p's matrix, which starts
/// p * batchStride elements after the first (0: shared by the batch).
struct GemmLayout {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  int64_t batchStride = 0;
};

/// The column-major problem cuBLASLt runs: for each of `batch` elements,
/// out[m', n'] = op(first) op(second), op a transpose where `trans*` says,
/// with m' = out.rows, n' = out.cols and the inner extent `inner`.
struct ColumnMajorGemm {
  GemmSource firstSource = GemmSource::Right;
  GemmSource secondSource = GemmSource::Left;
  bool transFirst = false;
  bool transSecond = false;
  GemmLayout first;
  GemmLayout second;
  GemmLayout out;
  int64_t inner = 0;
  int64_t batch = 1;
  /// A shared right operand: the batch became rows of one product.
  bool foldedRows = false;
};

/// The column-major problem of row-major c[p] = op(a[p]) op(b[p]) for
/// p < max(batchA, batchB), op(a) [m, k], op(b) [k, n], c [m, n]; batchA and
/// batchB are equal or one of them is 1. Strides count elements. c's rows
/// are `ldc` elements apart (0: n), which lets a single product write a
/// block of columns of a wider matrix (memopt_nf4_matmul's chunks).
inline ColumnMajorGemm mapRowMajorGemm(int64_t m, int64_t n, int64_t k,
                                       int64_t batchA, int64_t batchB,
                                       bool transA, bool transB,
                                       int64_t ldc = 0) {
  ColumnMajorGemm g;
  int64_t batch = batchA > batchB ? batchA : batchB;
  g.foldedRows = batch > 1 && batchB == 1 && !transA;
  // Folding stacks the batch's left operands (and results) along m.
  int64_t rowsM = g.foldedRows ? batch * m : m;
  g.batch = g.foldedRows ? 1 : batch;
  bool batched = g.batch > 1;
  g.transFirst = transB;
  g.transSecond = transA;
  g.inner = k;
  // Row-major b is [k, n] (or [n, k] if transposed): column-major [n, k]
  // (or [k, n]) with the row-major row length as leading dimension.
  g.first.rows = transB ? k : n;
  g.first.cols = transB ? n : k;
  g.first.ld = g.first.rows;
  g.first.batchStride = batched && batchB > 1 ? k * n : 0;
  g.second.rows = transA ? rowsM : k;
  g.second.cols = transA ? k : rowsM;
  g.second.ld = g.second.rows;
  g.second.batchStride = batched && batchA > 1 ? m * k : 0;
  g.out.rows = n;
  g.out.cols = rowsM;
  g.out.ld = ldc > 0 ? ldc : n;
  g.out.batchStride = batched ? m * g.out.ld : 0;
  return g;
}

/// The largest power of two (at most 256) that divides `address`: cuBLASLt's
/// heuristic assumes 256-byte aligned operands unless told otherwise, and a
/// view into a buffer may be less aligned.
inline uint32_t alignmentOf(uintptr_t address) {
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}

/// The alignment every matrix of a batch has: the first's, lowered to that
/// of the batch stride in bytes when the matrices are not shared.
inline uint32_t batchAlignment(const void *pointer, int64_t batchStride,
                               size_t elementSize) {
  uint32_t alignment = alignmentOf(reinterpret_cast<uintptr_t>(pointer));
  if (batchStride == 0)
    return alignment;
  uint32_t strideAlignment =
      alignmentOf(static_cast<uintptr_t>(batchStride) * elementSize);
  return strideAlignment < alignment ? strideAlignment : alignment;
}

/// What identifies a product's plan: the mapping's inputs, the alignment
/// every matrix of each operand has (cuBLASLt's algorithm depends on it) and
/// the library workspace the algorithm may use. beta is not part of it: it is
/// an argument of each call, not of the descriptors.
struct GemmKey {
  memopt_dtype dtype = MEMOPT_F32;
  memopt_dtype outDtype = MEMOPT_F32;
  int64_t m = 0, n = 0, k = 0;
  int64_t batchA = 1, batchB = 1;
  bool transA = false, transB = false;
  /// c's row stride in elements (0: n).
  int64_t ldc = 0;
  uint32_t alignA = 0, alignB = 0, alignC = 0;
  uint64_t workspaceBytes = 0;

  auto tie() const {
    return std::tie(dtype, outDtype, m, n, k, batchA, batchB, transA, transB,
                    ldc, alignA, alignB, alignC, workspaceBytes);
  }
  bool operator<(const GemmKey &other) const { return tie() < other.tie(); }
};

/// How many GEMM plans `ctx` holds (0 before its first product), for the
/// tests: a product of a shape seen before makes none.
size_t gemmPlanCount(const memopt_context *ctx);

/// The GEMM shapes of `ctx` by the path their plan took: one cuBLASLt call,
/// one per batch element, the fallback kernel.
struct GemmPathCounts {
  size_t library = 0, perElement = 0, fallback = 0;
};
GemmPathCounts gemmPathCounts(const memopt_context *ctx);

/// Row-major c[p] = op(a[p]) op(b[p]) + beta c[p] for p < batch, with a[p]
/// at a + p * strideA elements (0: shared), likewise b and c, by a tiled
/// kernel (GemmFallback.cu) that takes any alignment: the path of products
/// cuBLASLt has no algorithm for. Operands `dtype` (F32, F16, BF16), result
/// `outDtype` (`dtype` or F32), f32 accumulation in a fixed order; beta = 0
/// does not read c. c's rows are `ldc` elements apart (0: n). Errors name
/// `entry`.
void gemmFallback(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                  memopt_dtype outDtype, const void *a, const void *b, void *c,
                  int64_t batch, int64_t m, int64_t n, int64_t k,
                  int64_t strideA, int64_t strideB, int64_t strideC,
                  bool transA, bool transB, float beta, int64_t ldc = 0);

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_GEMMPLAN_H
