//===- FuzzIR.cpp - shared setup of the IR fuzz targets -------------------===//

#include "FuzzIR.h"

#include "memopt/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <string>

using namespace mlir;

MLIRContext &memopt::fuzz::getContext() {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    memopt::registerAllDialects(registry);
    auto *ctx = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
    // Drop every diagnostic: rejecting an input is not a finding.
    ctx->getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
    return ctx;
  }();
  return *context;
}

OwningOpRef<ModuleOp> memopt::fuzz::parseModule(const uint8_t *data,
                                                size_t size) {
  // MLIR's lexer relies on a NUL after the last byte, as every buffer the
  // tools read has (llvm::MemoryBuffer adds one); libFuzzer's data has none,
  // so parse a NUL-terminated copy.
  std::string text(reinterpret_cast<const char *>(data), size);
  return parseSourceString<ModuleOp>(text, &getContext(), "fuzz-input");
}
