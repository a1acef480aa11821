//===- Passes.td - memopt passes ---------------------------*- tablegen -*-===//
//
// Every memopt pass is declared here, with its options and statistics.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AutodiffPass : Pass<"memopt-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive the training step: forward, backward, optimizer update";
  let description = [{
    Replaces the module's `memopt.loss` function by `@train_step`
    (docs/Pipeline.md, section 1): the forward ops, then reverse-mode
    differentiation from the loss — each op builds its vector-Jacobian product
    through `DifferentiableOpInterface`, gradients of a value used several
    times are summed — then the step counter's increment and one optimizer
    update per parameter. Only values that depend on a parameter are
    differentiated; gradient ops that feed nothing are removed.

    ```
    memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1 momentum=0.9" model.mlir
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "The optimizer: adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW: decay of the first moment">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "AdamW: decay of the second moment">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "AdamW: term added to the denominator">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "Weight decay (decoupled for AdamW, L2 for SGD)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD: momentum factor">
  ];
  let statistics = [
    Statistic<"numGradientOps", "gradient-ops",
              "Number of ops the backward pass adds">
  ];
}

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
