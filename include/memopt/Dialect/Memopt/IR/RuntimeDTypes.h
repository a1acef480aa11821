//===- RuntimeDTypes.h - element types vs runtime dtype rules ---*- C++ -*-===//
//
// The compiler's side of the runtime's dtype table
// (runtime/common/memopt/runtime/DTypeRules.h): the mapping of element
// types to `memopt_dtype`, and for each memopt op whose runtime entry takes
// dtype arguments, the entry it lowers to, its op code in a family entry
// (memopt_unary's MEMOPT_UNARY_RELU), and which operand or result supplies
// each dtype argument. Every
// memopt op verifies its element types against its entry's row through
// RuntimeDTypesTrait, memopt.kernel does the same for the kernel it names
// (on buffers, after bufferization has split or rewritten ops), and the
// EmitC lowering takes the dtype arguments of each call from the same
// binding. So a program that verifies makes no runtime call whose dtypes the
// runtime rejects.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_RUNTIMEDTYPES_H
#define MEMOPT_DIALECT_MEMOPT_IR_RUNTIMEDTYPES_H

#include "memopt/runtime/DTypeRules.h"

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace memopt {

/// The memopt_dtype of `type` (an element type, or a shaped type's element
/// type), or std::nullopt if the runtime has none for it.
std::optional<memopt_dtype> getRuntimeDType(mlir::Type type);

/// Where the value of one dtype argument of a runtime entry comes from, in
/// an op's operands and results (for a memopt.kernel: its ins and outs,
/// which are that op's operands and results in order).
struct DTypeSource {
  enum class Kind {
    /// Operand `index`.
    Operand,
    /// Result `index`.
    Result,
    /// Each operand from `index` on (a variadic operand; the rule holds for
    /// each, as for memopt_unscale's `dtypes` array).
    OperandsFrom,
  };
  Kind kind;
  unsigned index;
};

/// An op whose runtime entry takes dtype arguments: the entry's row and the
/// source of each of its dtype arguments. Other operands and results that
/// share an argument's dtype (the `rhs` of a binary op) are held equal to
/// the source by the op's own verifier.
struct RuntimeDTypeBinding {
  llvm::StringRef opName;
  /// The runtime entry ("memopt_reduce").
  llvm::StringRef entry;
  /// The op's code among the entry's ("MEMOPT_REDUCE_SUM", the name of a
  /// runtime.h enumerator), or empty when the entry serves one op. gelu's
  /// is the exact form; its tanh approximation appends "_TANH".
  llvm::StringRef opCode;
  /// The entry's row; nullptr when the table has none with as many dtype
  /// arguments as `sources` (a bug that verification of the op reports).
  const runtime::DTypeRule *rule;
  llvm::SmallVector<DTypeSource, runtime::kMaxDTypeSlots> sources;

  /// The values that supply dtype argument `slot`, given the op's
  /// `operands` and `results`; empty when the op has too few of them.
  llvm::SmallVector<mlir::Value> getValues(unsigned slot,
                                           mlir::ValueRange operands,
                                           mlir::ValueRange results) const;
};

/// Every binding: one per op whose runtime entry takes dtype arguments.
llvm::ArrayRef<RuntimeDTypeBinding> getRuntimeDTypeBindings();

/// The binding of the op named `opName` ("memopt.reduce_sum"), or nullptr.
const RuntimeDTypeBinding *lookupRuntimeDTypeBinding(llvm::StringRef opName);

/// Checks the element types that `op`, an instance of `opName` with
/// `operands` and `results` (or a memopt.kernel of it with its ins and
/// outs), passes as dtype arguments against the row of its runtime entry,
/// and reports a rejected combination with the entry's message and rule.
mlir::LogicalResult verifyRuntimeDTypes(mlir::Operation *op,
                                        llvm::StringRef opName,
                                        mlir::ValueRange operands,
                                        mlir::ValueRange results);

/// The trait every memopt op carries: its element types pass the dtype rule
/// of its runtime entry. A no-op for ops without dtype arguments.
template <typename ConcreteType>
class RuntimeDTypesTrait
    : public mlir::OpTrait::TraitBase<ConcreteType, RuntimeDTypesTrait> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyRuntimeDTypes(op, op->getName().getStringRef(),
                               op->getOperands(), op->getResults());
  }
};

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_RUNTIMEDTYPES_H
