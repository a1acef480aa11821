//===- memopt-translate.cpp - the memopt translation driver ---------------===//
//
// mlir-translate for memopt: `--memopt-to-cpp` prints the output of
// --convert-memopt-to-emitc as train_step.cpp.
//
//===----------------------------------------------------------------------===//

#include "memopt/Target/Cpp/EmitCpp.h"

#include "mlir/Support/LogicalResult.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  memopt::registerTrainStepCppTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "memopt translation driver\n"));
}
