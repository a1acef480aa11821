//===- ModelStateAnalysis.cpp - model state of a loss function ------------===//
//
// Reads the argument roles of a `memopt.loss` function: "param" arguments are
// trained, "frozen" ones only stored, "state" arguments are carried; a parameter that a memopt.cast
// reads has a low-precision copy (mixed precision). One pass over the
// arguments and their uses.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/ModelStateAnalysis.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace memopt;

static StateTensor describe(StringRef name, RankedTensorType type) {
  StateTensor tensor;
  tensor.name = name.str();
  tensor.numElements = type.getNumElements();
  llvm::raw_string_ostream(tensor.dtype) << type.getElementType();
  tensor.elementBytes =
      llvm::divideCeil(type.getElementType().getIntOrFloatBitWidth(), 8);
  return tensor;
}

ModelStateAnalysis::ModelStateAnalysis(Operation *op) {
  auto func = cast<FunctionOpInterface>(op);
  for (auto [index, argType] : llvm::enumerate(func.getArgumentTypes())) {
    auto role =
        func.getArgAttrOfType<StringAttr>(index, MemoptDialect::kRoleAttrName);
    auto name =
        func.getArgAttrOfType<StringAttr>(index, MemoptDialect::kNameAttrName);
    auto type = dyn_cast<RankedTensorType>(argType);
    if (!role || !name || !type)
      continue;
    std::optional<ArgumentRole> kind = symbolizeArgumentRole(role.getValue());
    if (kind == ArgumentRole::Frozen) {
      params.push_back(describe(name.getValue(), type));
      params.back().frozen = true;
    } else if (kind == ArgumentRole::Param) {
      params.push_back(describe(name.getValue(), type));
      // Mixed precision: the step computes with a cast of the parameter.
      if (func.isExternal())
        continue;
      for (Operation *user : func.getArgument(index).getUsers()) {
        auto cast = dyn_cast<CastOp>(user);
        if (!cast || cast.getType().getElementType() == type.getElementType())
          continue;
        StateTensor copy = describe(name.getValue(), cast.getType());
        params.back().copyDtype = copy.dtype;
        params.back().copyElementBytes = copy.elementBytes;
        break;
      }
    }
    else if (kind == ArgumentRole::State)
      buffers.push_back(describe(name.getValue(), type));
  }
}
