//===- Passes.h - memopt conversion passes ------------------------*- C++
//-*-===//
//
// Declares the passes that lower memopt out of the dialect and their
// registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_PASSES_H
#define MEMOPT_CONVERSION_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace memopt {

#define GEN_PASS_DECL
#include "memopt/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "memopt/Conversion/Passes.h.inc"

} // namespace memopt

#endif // MEMOPT_CONVERSION_PASSES_H
