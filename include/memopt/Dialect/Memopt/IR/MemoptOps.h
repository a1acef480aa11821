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

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
