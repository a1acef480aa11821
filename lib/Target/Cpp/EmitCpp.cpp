//===- EmitCpp.cpp - print the lowered train step as C++ ------------------===//
//
// Prints the EmitC module of the train step with upstream's translateToCpp,
// and registers that as the `--memopt-to-cpp` translation.
//
//===----------------------------------------------------------------------===//

#include "memopt/Target/Cpp/EmitCpp.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

LogicalResult memopt::emitTrainStepCpp(ModuleOp module, raw_ostream &os) {
  return emitc::translateToCpp(module, os, /*declareVariablesAtTop=*/false);
}

void memopt::registerTrainStepCppTranslation() {
  TranslateFromMLIRRegistration registration(
      "memopt-to-cpp",
      "print the output of --convert-memopt-to-emitc as train_step.cpp",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError() << "expected a builtin.module";
        return emitTrainStepCpp(module, os);
      },
      [](DialectRegistry &registry) {
        registry.insert<emitc::EmitCDialect>();
      });
}
