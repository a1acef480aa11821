//===- Passes.h - memopt passes -----------------------------------*- C++ -*-===//
//
// Declares the memopt passes and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace memopt {

#define GEN_PASS_DECL
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
