//===- MemoptInterfaces.td - memopt op interfaces ----------*- tablegen -*-===//
//
// Interfaces through which passes query and transform memopt ops without a
// switch over op names.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD

include "mlir/IR/OpBase.td"

def Memopt_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::memopt";
  let description = [{
    An op that knows its own vector-Jacobian product. Reverse-mode
    differentiation (`--memopt-autodiff`) walks the forward function backwards
    and asks each op, through this interface, to build the gradients of its
    operands from the gradients of its results. An op without this interface
    is not differentiable, and differentiating through it is an error.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradient of each operand
        given the gradient of each result. `resultGrads[i]` is null when no
        gradient flows into result `i`. On success, `operandGrads` holds one
        value per operand: null for operands that receive no gradient
        (indices, masks, constants). On failure the op has emitted a
        diagnostic that says why it cannot be differentiated.
      }],
      "::llvm::LogicalResult", "buildVectorJacobianProduct",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD
