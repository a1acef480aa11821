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

def Memopt_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::memopt";
  let description = [{
    An op whose runtime entry may write results over operands: the aliasing
    that runtime.h allows, stated once on the op. An elementwise entry reads
    element i of each input before it writes element i of its output, so
    its result may go over any operand (the default); an update entry lets
    each new state alias the state it replaces. `--memopt-bufferize` reads
    this to write a result into an operand's buffer, either an argument's
    (state updated in place) or a scratch buffer whose value dies at the op.
    An op without this interface never writes over its operands.
  }];
  let methods = [
    InterfaceMethod<[{
        Whether the runtime entry may write result `resultIndex` into the
        buffer of operand `operandIndex`.
      }],
      "bool", "mayWriteResultOver",
      (ins "unsigned":$resultIndex, "unsigned":$operandIndex), [{}],
      [{ return true; }]>
  ];
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD
