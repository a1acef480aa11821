//===- EmitCpp.h - print the lowered train step as C++ ------------*- C++
//-*-===//
//
// The last step of code generation: the EmitC module that
// --convert-memopt-to-emitc produced, printed as OUT/train_step.cpp
// (docs/Pipeline.md, section 4).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_TARGET_CPP_EMITCPP_H
#define MEMOPT_TARGET_CPP_EMITCPP_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace memopt {

/// Prints `module`, the output of --convert-memopt-to-emitc, as the C++ that
/// defines `memopt_train_step`. Fails, with a diagnostic, on IR that
/// `mlir::emitc::translateToCpp` cannot print.
llvm::LogicalResult emitTrainStepCpp(mlir::ModuleOp module,
                                     llvm::raw_ostream &os);

/// Registers the `--memopt-to-cpp` translation (a thin wrapper over
/// emitTrainStepCpp) for translation drivers.
void registerTrainStepCppTranslation();

} // namespace memopt

#endif // MEMOPT_TARGET_CPP_EMITCPP_H
