//===- FuzzIR.h - shared setup of the IR fuzz targets -----------*- C++ -*-===//
//
// One MLIRContext per process with the dialects memopt-compile loads, no
// threading (libFuzzer runs one input at a time) and every diagnostic
// dropped: a rejected input is the expected outcome, only a crash, a
// sanitizer report or a leak is a finding.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_FUZZ_FUZZIR_H
#define MEMOPT_FUZZ_FUZZIR_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstddef>
#include <cstdint>

namespace memopt::fuzz {

/// The process-wide context (created on first use).
mlir::MLIRContext &getContext();

/// Parses and verifies `size` bytes as a module; null if rejected.
mlir::OwningOpRef<mlir::ModuleOp> parseModule(const uint8_t *data,
                                              size_t size);

} // namespace memopt::fuzz

#endif // MEMOPT_FUZZ_FUZZIR_H
