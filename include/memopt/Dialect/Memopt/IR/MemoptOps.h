//===- MemoptOps.h - memopt operations ----------------------------*- C++ -*-===//
//
// Declares the ops of the memopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptInterfaces.h"
#include "memopt/Dialect/Memopt/IR/RuntimeDTypes.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "memopt/Dialect/Memopt/IR/MemoptOps.h.inc"

namespace memopt {

/// Whether `name` is the name of one of the ops `OpTys`: how a pass that
/// reads a memopt.kernel (whose op is a name after bufferization) recognizes
/// that op by its class.
template <typename... OpTys> bool isOpNamed(llvm::StringRef name) {
  return ((name == OpTys::getOperationName()) || ...);
}

/// Whether `op` (a memopt op or its kernel) runs on the host
/// (`memopt.on_host`, optimizer offload).
bool runsOnHost(mlir::Operation *op);

/// Whether the op named `name` has a host entry (`memopt_host_*` in
/// runtime.h) that computes what its device entry does, so that optimizer
/// offload may mark it `memopt.on_host`: the optimizer updates, casts,
/// splat constants, adds, `memopt.scale_by` and `memopt.reduce_sum_squares`
/// (the gradient accumulation and clipping around an offloaded update).
bool hasHostEntry(llvm::StringRef name);

/// The memory that `value`, a tensor or a buffer of a step, lives in:
/// host for an argument or an allocation marked `memopt.memory = "host"`,
/// a view of one, the result of `memopt.transfer ... to host` or of an op
/// that runs on the host, and a loop's iteration argument or result whose
/// initial value lives there; device otherwise.
MemoryKind getMemoryKind(mlir::Value value);

/// The allocation or block argument that the buffer `value` is a view of
/// (itself when it is none's view).
mlir::Value getBufferRoot(mlir::Value value);

/// The slot of `op` when it starts an asynchronous copy: a `memopt.transfer`
/// kernel with an integer `slot`, which a `memopt.transfer_wait` on that slot
/// ends (--memopt-overlap-transfers); nullopt for any other op.
std::optional<int64_t> getTransferSlot(mlir::Operation *op);

/// Whether `op` (or an op inside it) would race with a copy in flight from
/// `source` to `target`: it reads or writes the target, or writes (or
/// frees) the source, or a view of either's allocation.
bool racesWithCopy(mlir::Operation *op, mlir::Value source, mlir::Value target);

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
