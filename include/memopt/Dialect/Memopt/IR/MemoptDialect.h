//===- MemoptDialect.h - memopt dialect ---------------------------*- C++ -*-===//
//
// Declares the memopt dialect and its attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h.inc"
#include "memopt/Dialect/Memopt/IR/MemoptEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "memopt/Dialect/Memopt/IR/MemoptAttrs.h.inc"

namespace memopt {

/// The roles a function argument can play in training (`memopt.role`).
enum class ArgumentRole { Param, Input, Label, State, Optim, Loss };

/// Returns the role named by `memopt.role = "<name>"`, or std::nullopt.
std::optional<ArgumentRole> symbolizeArgumentRole(llvm::StringRef name);

/// Returns the spelling of `role` in `memopt.role`.
llvm::StringRef stringifyArgumentRole(ArgumentRole role);

/// Returns the one function of `module` marked `memopt.train_step` that has a
/// body. Otherwise reports "no function marked 'memopt.train_step' to
/// <purpose>" (or that there are two) on the module and fails.
llvm::FailureOr<mlir::FunctionOpInterface>
findTrainStep(mlir::ModuleOp module, llvm::StringRef purpose);

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H
