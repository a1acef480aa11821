//===- MemoptInterfaces.h - memopt op interfaces ------------------*- C++ -*-===//
//
// Declares the op interfaces of the memopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "memopt/Dialect/Memopt/IR/MemoptInterfaces.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
