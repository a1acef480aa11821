//===- BufferLiveness.h - live intervals of scratch buffers -----*- C++ -*-===//
//
// Numbers the operations of a function in program order (the schedule) and
// gives every `memref.alloc` the interval of op indices over which its buffer
// must keep its contents, and its size in bytes. The input of buffer planning
// (PlanBuffers) and of its independent check (VerifyPlan).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_BUFFERLIVENESS_H
#define MEMOPT_ANALYSIS_BUFFERLIVENESS_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace memopt {

/// The live interval of one buffer allocated by a `memref.alloc`.
struct BufferInterval {
  /// The allocation.
  mlir::memref::AllocOp alloc;
  /// Position of the alloc among the allocs of the analysed op, in program
  /// order; used as the buffer's id in diagnostics and in the printed form.
  int64_t id = 0;
  /// First op index at which the buffer is live: the alloc itself, or the op
  /// that encloses it when one of its uses lies outside that op's regions.
  int64_t start = 0;
  /// Last op index (inclusive) at which the buffer is live: the last op that
  /// reads or writes it, or an alias of it, extended to the end of every
  /// enclosing loop (or other region op) it is used in but not allocated in.
  /// The dealloc does not count as a use; a buffer with no use lives from its
  /// alloc to its dealloc (or only at its alloc when it has none).
  int64_t end = 0;
  /// Bytes the buffer occupies: number of elements (the span of its strided
  /// layout) times the element size. std::nullopt when the shape or the layout
  /// is dynamic or the element type has no known size.
  std::optional<int64_t> sizeBytes;
  /// `memopt.scope` of the alloc, or else of the first op that uses the
  /// buffer (its producer); null when neither has one.
  mlir::StringAttr scope;
};

/// Live intervals of the buffers allocated in an operation (normally the
/// bufferized `@train_step`). Program order is the schedule: every op nested
/// in the analysed op (the op itself excluded) gets an index from a pre-order
/// walk, so an op with regions comes just before the ops it contains. Pure:
/// reads the IR, never changes it. O(n + u * d^2) for n ops, u uses of buffers
/// and their aliases, and region nesting depth d.
class BufferLiveness {
public:
  /// Analyses every op nested in `op` (e.g. a function).
  explicit BufferLiveness(mlir::Operation *op);

  /// The buffers, one per `memref.alloc`, in program order.
  llvm::ArrayRef<BufferInterval> getBuffers() const { return buffers; }

  /// Number of ops nested in the analysed op (indices are 0 .. size-1).
  int64_t getNumOps() const { return numOps; }

  /// Index of `op` in program order, or -1 when it is not nested in the
  /// analysed op.
  int64_t getIndex(mlir::Operation *op) const {
    return index.lookup(op).first - 1;
  }

  /// Index of the last op nested in `op` (`op`'s own index when it has no
  /// regions), or -1 when it is not nested in the analysed op.
  int64_t getSubtreeEnd(mlir::Operation *op) const {
    return index.lookup(op).second - 1;
  }

  /// Prints one line per buffer:
  /// `buffer <id> <type> size=<bytes|?> live=[<start>, <end>]` followed by
  /// ` scope="<scope>"` when the buffer has one.
  void print(llvm::raw_ostream &os) const;

private:
  /// Computes the interval of the buffer allocated by `alloc`, nested in
  /// `root`, the analysed op.
  void analyseAlloc(mlir::memref::AllocOp alloc, int64_t id,
                    mlir::Operation *root);

  /// For every nested op, (index + 1, subtree end + 1); 0 means absent.
  llvm::DenseMap<mlir::Operation *, std::pair<int64_t, int64_t>> index;
  llvm::SmallVector<BufferInterval> buffers;
  int64_t numOps = 0;
};

/// The byte size of a statically shaped memref of a builtin element type
/// (integer, float, index, complex, vector), as laid out by its layout (the
/// span of a strided layout); std::nullopt otherwise or on overflow.
std::optional<int64_t> getMemRefSizeInBytes(mlir::MemRefType type,
                                            mlir::Operation *scope);

} // namespace memopt

#endif // MEMOPT_ANALYSIS_BUFFERLIVENESS_H
