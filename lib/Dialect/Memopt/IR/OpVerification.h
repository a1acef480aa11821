//===- OpVerification.h - checks the memopt verifiers share -----*- C++ -*-===//
//
// The checks of MemoptOps.cpp and MemoptLayerOps.cpp: each reports a
// mismatch as "<what> has type 'A', expected 'B'" (or names the bound a
// value breaks), so that a user sees both the fault and the fix. Private to
// lib/Dialect/Memopt/IR.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_IR_OPVERIFICATION_H
#define MEMOPT_LIB_DIALECT_MEMOPT_IR_OPVERIFICATION_H

#include "memopt/Support/ByteSize.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"

#include <initializer_list>
#include <string>

namespace memopt::verification {

/// A value with the name the op's syntax gives it ("lhs", "result", ...).
struct Named {
  mlir::StringRef name;
  mlir::Value value;
};

inline mlir::RankedTensorType tensorType(mlir::Value value) {
  return mlir::cast<mlir::RankedTensorType>(value.getType());
}

/// Reports that `what` has type `actual` where `expected` is required.
inline mlir::LogicalResult typeMismatch(mlir::Operation *op,
                                        mlir::StringRef what, mlir::Type actual,
                                        mlir::Type expected,
                                        mlir::StringRef why = {}) {
  mlir::InFlightDiagnostic diag = op->emitOpError()
                                  << what << " has type " << actual
                                  << ", expected " << expected;
  if (!why.empty())
    diag << " (" << why << ")";
  return diag;
}

inline mlir::LogicalResult expectType(mlir::Operation *op, Named named,
                                      mlir::Type expected,
                                      mlir::StringRef why = {}) {
  if (named.value.getType() == expected)
    return mlir::success();
  return typeMismatch(op, named.name, named.value.getType(), expected, why);
}

/// Checks that every value has the type of the first one.
inline mlir::LogicalResult
expectSameTypes(mlir::Operation *op, std::initializer_list<Named> values) {
  const Named &reference = *values.begin();
  std::string why = ("the type of " + reference.name).str();
  for (const Named &named : llvm::drop_begin(values))
    if (mlir::failed(expectType(op, named, reference.value.getType(), why)))
      return mlir::failure();
  return mlir::success();
}

/// Checks that `dim` indexes a dimension of a tensor of rank `rank`.
inline mlir::LogicalResult expectDim(mlir::Operation *op, mlir::StringRef what,
                                     int64_t dim, int64_t rank) {
  if (dim >= 0 && dim < rank)
    return mlir::success();
  return op->emitOpError() << what << " " << dim << " is outside [0, " << rank
                           << ")";
}

inline mlir::LogicalResult expectCount(mlir::Operation *op,
                                       mlir::StringRef what,
                                       mlir::ArrayRef<int64_t> values,
                                       int64_t count) {
  if (static_cast<int64_t>(values.size()) == count)
    return mlir::success();
  return op->emitOpError() << "expected " << count << " " << what
                           << " (one per dimension), got " << values.size();
}

inline mlir::LogicalResult expectRank(mlir::Operation *op, Named named,
                                      int64_t rank) {
  int64_t actual = tensorType(named.value).getRank();
  if (actual == rank)
    return mlir::success();
  return op->emitOpError() << named.name << " must have rank " << rank
                           << ", got " << named.value.getType();
}

inline mlir::LogicalResult expectMinRank(mlir::Operation *op, Named named,
                                         int64_t minRank) {
  int64_t actual = tensorType(named.value).getRank();
  if (actual >= minRank)
    return mlir::success();
  return op->emitOpError() << named.name << " must have rank " << minRank
                           << " or more, got " << named.value.getType();
}

inline mlir::LogicalResult expectPositive(mlir::Operation *op,
                                          mlir::StringRef what,
                                          mlir::ArrayRef<int64_t> values,
                                          int64_t minimum = 1) {
  for (int64_t value : values)
    if (value < minimum)
      return op->emitOpError()
             << what << " must be >= " << minimum << ", got " << value;
  return mlir::success();
}

/// Checks `low <= value < high` (or `<= high` when `closed`).
inline mlir::LogicalResult expectInRange(mlir::Operation *op,
                                         mlir::StringRef what,
                                         llvm::APFloat attrValue, double low,
                                         double high, bool closedHigh,
                                         bool closedLow = true) {
  double value = attrValue.convertToDouble();
  bool ok = (closedLow ? value >= low : value > low) &&
            (closedHigh ? value <= high : value < high);
  if (ok)
    return mlir::success();
  return op->emitOpError() << what << " must be in " << (closedLow ? "[" : "(")
                           << formatNumber(low) << ", " << formatNumber(high)
                           << (closedHigh ? "]" : ")") << ", got "
                           << formatNumber(value);
}

inline mlir::LogicalResult expectNonNegative(mlir::Operation *op,
                                             mlir::StringRef what,
                                             llvm::APFloat value) {
  if (value.convertToDouble() >= 0.0)
    return mlir::success();
  return op->emitOpError() << what << " must be >= 0, got "
                           << formatNumber(value.convertToDouble());
}

/// The f32 tensor type of per-row statistics over the leading `rank`
/// dimensions of `input`.
inline mlir::RankedTensorType statisticsType(mlir::RankedTensorType input,
                                             int64_t rank) {
  return mlir::RankedTensorType::get(
      input.getShape().take_front(rank),
      mlir::Float32Type::get(input.getContext()));
}

} // namespace memopt::verification

#endif // MEMOPT_LIB_DIALECT_MEMOPT_IR_OPVERIFICATION_H
