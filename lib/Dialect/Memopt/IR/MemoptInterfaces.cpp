//===- MemoptInterfaces.cpp - memopt op interfaces ------------------------===//
//
// Instantiates the op interfaces declared in MemoptInterfaces.td.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptInterfaces.h"

#include "memopt/Dialect/Memopt/IR/MemoptInterfaces.cpp.inc"
