//===- Passes.h - memopt passes -----------------------------------*- C++ -*-===//
//
// Declares the memopt passes and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace memopt {

/// The strategies of --memopt-remat (memopt-compile --remat).
inline constexpr llvm::StringLiteral kRematStrategies[] = {
    "none", "blocks", "sqrt", "revolve", "budget", "selective", "auto"};

/// Whether `strategy` is one of kRematStrategies.
bool isRematStrategy(llvm::StringRef strategy);

/// "none, blocks, ... or auto", for messages.
std::string listRematStrategies();

#define GEN_PASS_DECL
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
