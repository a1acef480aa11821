//===- memopt-opt.cpp - the memopt optimizer driver -----------------------===//
//
// mlir-opt for memopt: the memopt dialect, the upstream dialects the pipeline
// lowers through, every memopt pass and the generic upstream transforms
// (canonicalize, cse, ...).
//
//===----------------------------------------------------------------------===//

#include "memopt/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

int main(int argc, char **argv) {
  // One message per problem, as memopt-compile: no dump of the operation
  // after a pass's error unless --mlir-print-op-on-diagnostic asks for it.
  llvm::StringRef printOp = "mlir-print-op-on-diagnostic";
  bool explicitPrintOp = false;
  for (int i = 1; i < argc; ++i)
    explicitPrintOp |=
        llvm::StringRef(argv[i]).ltrim('-').starts_with(printOp);
  std::vector<char *> args(argv, argv + argc);
  std::string disable = "--" + printOp.str() + "=false";
  if (!explicitPrintOp)
    args.insert(args.begin() + 1, disable.data());
  argc = static_cast<int>(args.size());
  argv = args.data();

  mlir::registerTransformsPasses();
  memopt::registerAllPasses();

  mlir::DialectRegistry registry;
  memopt::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "memopt optimizer driver\n", registry));
}
