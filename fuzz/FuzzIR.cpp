//===- FuzzIR.cpp - shared setup of the IR fuzz targets -------------------===//

#include "FuzzIR.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <string>

using namespace mlir;

MLIRContext &memopt::fuzz::getContext() {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    registry.insert<memopt::MemoptDialect, arith::ArithDialect,
                    bufferization::BufferizationDialect, emitc::EmitCDialect,
                    func::FuncDialect, memref::MemRefDialect, scf::SCFDialect,
                    tensor::TensorDialect>();
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
