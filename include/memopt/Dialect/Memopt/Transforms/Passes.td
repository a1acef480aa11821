//===- Passes.td - memopt passes ---------------------------*- tablegen -*-===//
//
// Every memopt pass is declared here, with its options and statistics.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PrintModelStatePass : Pass<"memopt-print-model-state", "mlir::ModuleOp"> {
  let summary = "Print the model-state memory account of each loss function";
  let description = [{
    For every function marked `memopt.loss`, prints to standard output the
    parameter count and the bytes of weights, gradients, optimizer state and
    non-trained buffers, by element type, that training it with the chosen
    optimizer keeps alive across steps. Activations are not part of this
    account. The IR is left unchanged.

    ```
    memopt-opt --memopt-print-model-state=optimizer=sgd model.mlir
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "The optimizer whose state is counted: adamw or sgd">
  ];
}

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
