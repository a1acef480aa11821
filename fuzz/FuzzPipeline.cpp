//===- FuzzPipeline.cpp - fuzz target: the pipeline -----------------------===//
//
// Parses and verifies the input; if it has a `memopt.loss` function, runs
// what memopt-compile runs on it: the pipeline (buildMemoptPipeline, with
// the placer's search limited to 10 ms so that one input never takes a
// second), the EmitC lowering and the C++ emitter. A pass may reject the
// input with a diagnostic; it must not crash, hang or trip a sanitizer.
//
// The input's last byte chooses the pipeline's options, XOR '\n' so that
// an IR file ending in a newline (every seed) runs the default pipeline:
//
//   bits 0-1  offload: none, optimizer, activations, all three with params
//   bits 2-3  remat: none, blocks, sqrt, selective
//   bit 4     mixed precision bf16      bit 5  two micro-batches
//   bit 6     clip the gradient norm    bit 7  two ranks with ZeRO-3
//
//===----------------------------------------------------------------------===//

#include "FuzzIR.h"

#include "memopt/Conversion/Passes.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Pipelines/Pipelines.h"
#include "memopt/Target/Cpp/EmitCpp.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {

bool hasLossFunction(ModuleOp module) {
  bool found = false;
  module.walk([&](FunctionOpInterface func) {
    if (func->hasAttr(memopt::MemoptDialect::kLossAttrName))
      found = true;
  });
  return found;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Large inputs only slow the search down; the parser target covers them.
  if (size == 0 || size > 16384)
    return 0;
  OwningOpRef<ModuleOp> module = memopt::fuzz::parseModule(data, size - 1);
  if (!module || !hasLossFunction(*module))
    return 0;

  MLIRContext &context = memopt::fuzz::getContext();
  memopt::MemoptPipelineOptions options;
  options.planTimeLimit = 0.01;
  unsigned config = data[size - 1] ^ '\n';
  static const char *const offloads[] = {"", "optimizer", "activations",
                                         "optimizer,params,activations"};
  static const char *const remats[] = {"none", "blocks", "sqrt", "selective"};
  options.offload = offloads[config & 3];
  options.remat = remats[(config >> 2) & 3];
  if (config & 16)
    options.mixedPrecision = memopt::Precision::BF16;
  if (config & 32)
    options.microBatches = 2;
  if (config & 64)
    options.clipGradNorm = 1.0;
  if (config & 128) {
    options.dataParallel = 2;
    options.zeroStage = 3;
  }
  if (llvm::Error error = memopt::validateMemoptPipelineOptions(options)) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  PassManager pm(&context, ModuleOp::getOperationName());
  memopt::buildMemoptPipeline(pm, options);
  if (failed(pm.run(*module)))
    return 0;

  PassManager lowering(&context, ModuleOp::getOperationName());
  lowering.addPass(memopt::createConvertMemoptToEmitCPass());
  if (failed(lowering.run(*module)))
    return 0;
  std::string cpp;
  llvm::raw_string_ostream os(cpp);
  (void)memopt::emitTrainStepCpp(*module, os);
  return 0;
}
