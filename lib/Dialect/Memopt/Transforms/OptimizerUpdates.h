//===- OptimizerUpdates.h - the operands of an optimizer update -*- C++ -*-===//
//
// What the passes that move the optimizer update (--memopt-shard-optimizer,
// --memopt-offload-optimizer) read of it: its parameter, gradient, state and
// skip flag, and how an error names its parameter. Private to
// lib/Dialect/Memopt/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_OPTIMIZERUPDATES_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_OPTIMIZERUPDATES_H

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace memopt {

/// The operands of an optimizer update: its parameter, gradient and state,
/// and the skip flag of loss scaling (null without).
struct UpdateOperands {
  mlir::OpOperand *param;
  mlir::OpOperand *grad;
  llvm::SmallVector<mlir::OpOperand *, 2> states;
  mlir::Value skip;
};

/// The operands of `op` when it is an optimizer update (AdamW, SGD).
inline std::optional<UpdateOperands> getUpdateOperands(mlir::Operation *op) {
  if (auto adamw = llvm::dyn_cast<AdamWUpdateOp>(op))
    return UpdateOperands{
        &adamw.getParamMutable(),
        &adamw.getGradMutable(),
        {&adamw.getExpAvgMutable(), &adamw.getExpAvgSqMutable()},
        adamw.getSkip()};
  if (auto sgd = llvm::dyn_cast<SgdUpdateOp>(op))
    return UpdateOperands{&sgd.getParamMutable(),
                          &sgd.getGradMutable(),
                          {&sgd.getMomentumBufferMutable()},
                          sgd.getSkip()};
  return std::nullopt;
}

/// `value` quoted by its `memopt.name` when it is a named argument of
/// `func`, else "a parameter".
inline std::string describeParam(mlir::func::FuncOp func, mlir::Value value) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(value);
  auto attr = arg ? func.getArgAttrOfType<mlir::StringAttr>(
                        arg.getArgNumber(), MemoptDialect::kNameAttrName)
                  : mlir::StringAttr();
  return attr ? ("'" + attr.getValue() + "'").str() : "a parameter";
}

} // namespace memopt

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_OPTIMIZERUPDATES_H
