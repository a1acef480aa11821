//===- FlattenAllReduces.h - one sum over the ranks per run -----*- C++ -*-===//
//
// A step of --memopt-bufferize (Bufferize.cpp), in a file of its own.
// Private to lib/Dialect/Memopt/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_FLATTENALLREDUCES_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_FLATTENALLREDUCES_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace memopt {

/// Data parallelism's sums over the ranks, one per f32 accumulator after
/// the micro-batch loop: each run of consecutive in-place sums whose buffers
/// are allocations of the body becomes one sum over one flat buffer. The
/// flat buffer (`memref<B x i8>`) holds the run's accumulators as
/// `memref.view` slots, in the run's order, each at a multiple of
/// kDefaultArenaAlignment bytes; one zero fill of all of it replaces their
/// zero fills (and clears the padding between slots), and the sum is one
/// in-place kernel on its f32 view: one collective call, nothing packed, as
/// DDP's and DeepSpeed's contiguous gradient buffers. The accumulators' own
/// allocations leave `allocs`, the flat buffer joins it.
void flattenAllReduces(mlir::Block &body, mlir::OpBuilder &builder,
                       llvm::SmallVectorImpl<mlir::Value> &allocs);

} // namespace memopt

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_FLATTENALLREDUCES_H
