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

namespace memopt {

/// Marks the ops whose result element i depends on element i of each
/// operand alone, all of one shape (the unary, binary, scalar and
/// activation-gradient families): what the passes that split or reason per
/// element (the batch rules of --memopt-accumulate) read instead of a list
/// of ops. The family's verifier checks the types, with its own messages.
template <typename ConcreteType>
class ElementwiseTrait
    : public mlir::OpTrait::TraitBase<ConcreteType, ElementwiseTrait> {};

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
