//===- memopt-opt.cpp - the memopt optimizer driver -----------------------===//
//
// mlir-opt for memopt: the memopt dialect, the upstream dialects the pipeline
// lowers through, every memopt pass and the generic upstream transforms
// (canonicalize, cse, ...).
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/Passes.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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
  memopt::registerMemoptPasses();
  memopt::registerMemoptConversionPasses();
  memopt::registerMemoptPipelines();

  mlir::DialectRegistry registry;
  registry.insert<memopt::MemoptDialect, mlir::arith::ArithDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::emitc::EmitCDialect, mlir::func::FuncDialect,
                  mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                  mlir::shard::ShardDialect, mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "memopt optimizer driver\n", registry));
}
