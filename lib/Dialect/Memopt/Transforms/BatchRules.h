//===- BatchRules.h - where an op's batch dimension goes --------*- C++ -*-===//
//
// Step 2 of --memopt-accumulate (Accumulate.cpp): how each value of the
// training step relates to the batch, and the rule of each op, from its
// operands' kinds to its results'. Private to lib/Dialect/Memopt/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_BATCHRULES_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_BATCHRULES_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace memopt::accumulate {

/// How a value of the training step relates to the batch.
struct BatchKind {
  enum Kind { Uniform, Batched, Partial, Local };
  Kind kind = Uniform;
  /// The batch dimension of a batched value.
  int64_t dim = -1;

  static BatchKind uniform() { return {Uniform, -1}; }
  static BatchKind batched(int64_t dim) { return {Batched, dim}; }
  static BatchKind partial() { return {Partial, -1}; }
  static BatchKind local() { return {Local, -1}; }
  bool isUniform() const { return kind == Uniform; }
  bool isBatched() const { return kind == Batched; }
  bool isPartial() const { return kind == Partial; }
  bool isLocal() const { return kind == Local; }
};

/// The result of the propagation rule of one op.
struct OpRule {
  llvm::SmallVector<BatchKind> results;
  /// For each operand: the dimension at which a uniform operand must be
  /// rebuilt at the micro-batch shape, or -1.
  llvm::SmallVector<int64_t> sliceOperand;
};

/// The rule of `op` given its operands' kinds `in` (an error naming the op
/// when its batch dimension cannot be split): the IR's batch of `batchSize`
/// examples is cut into `split` parts, the rank's `microBatches` of them run
/// here; `allowBatchNorm` is the pass's allow-batch-norm.
mlir::FailureOr<OpRule> inferBatchRule(mlir::Operation *op,
                                       llvm::ArrayRef<BatchKind> in,
                                       int64_t microBatches, int64_t split,
                                       int64_t batchSize, bool allowBatchNorm);

} // namespace memopt::accumulate

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_BATCHRULES_H
