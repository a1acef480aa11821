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

def TestPrintBufferLivenessPass
    : Pass<"memopt-test-print-liveness", "mlir::ModuleOp"> {
  let summary = "Print the live interval of every buffer (BufferLiveness)";
  let description = [{
    For every function with a body, prints to standard output the live
    interval that buffer planning uses for each `memref.alloc`: ops are
    numbered by a pre-order walk (program order is the schedule), a buffer is
    live from its alloc to its last use (the dealloc does not count), and a
    buffer used inside a loop it was not allocated in is live over the whole
    loop. The IR is left unchanged.

    ```
    liveness of @train_step (9 ops):
    buffer 0 memref<4x3xf32> size=48 live=[0, 2] scope="fc1"
    ```
  }];
}

def PlanBuffersPass : Pass<"memopt-plan-buffers", "mlir::ModuleOp"> {
  let summary = "Give every scratch buffer of @train_step an arena offset";
  let description = [{
    Places the buffers of every function marked `memopt.train_step` in one
    arena: each buffer's lifetime comes from the BufferLiveness analysis, the
    offsets from the placement library (a portfolio of first-fit heuristics,
    then an exact branch and bound within `time-limit`; docs/Planning.md).
    Every `memref.alloc` gets `memopt.offset = <bytes> : i64` and the function
    `memopt.arena_bytes = <bytes> : i64` (docs/Pipeline.md, section 3). The
    independent checker verifies the plan before it is written; a rejected
    plan, a module without a train_step function or a buffer of dynamic shape
    is an error.

    ```
    memopt-opt --memopt-plan-buffers="alignment=256 time-limit=2" step.mlir
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Every offset is a multiple of this many bytes (1 to 2^30)">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"1.0",
           "Seconds the placement may take; 0 runs only the heuristics">
  ];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Number of buffers placed">,
    Statistic<"lowerBoundBytes", "lower-bound-bytes",
              "Largest total size of the buffers live at one point">,
    Statistic<"arenaBytes", "arena-bytes", "Size of the planned arena">
  ];
}

def VerifyPlanPass : Pass<"memopt-verify-plan", "mlir::ModuleOp"> {
  let summary = "Check the arena offsets of @train_step independently";
  let description = [{
    Re-derives the live intervals of the buffers of every function marked
    `memopt.train_step` from the IR and checks, with the placement checker
    (not the placer), that every `memref.alloc` has a `memopt.offset` that is
    a multiple of `alignment`, that every buffer lies inside
    `[0, memopt.arena_bytes)`, and that no two buffers live at the same time
    share a byte. A violation is an error at the offending alloc, with a note
    at the other buffer of a conflicting pair. The IR is left unchanged.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Every offset must be a multiple of this many bytes">
  ];
}

def AccumulatePass : Pass<"memopt-accumulate", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: run the step over K micro-batches";
  let description = [{
    Splits every "input" and "label" argument of `@train_step` (on tensors,
    after autodiff and remat) along its `memopt.batch_dim` into
    `micro-batches` parts and runs the forward and backward ops inside one
    `scf.for` over them: the gradients and the loss are summed in f32
    accumulators carried by the loop, and the optimizer update runs once
    after it (docs/Accumulation.md). Ops that do not depend on the batch
    stay before the loop. A `reduction<mean>` loss is normalised by the full
    batch's count (cross-entropy: the labels that are not ignored), so the
    step equals the full-batch step. A batch that `micro-batches` does not
    divide, an op whose batch dimension cannot be split and, unless
    `allow-batch-norm`, batch norm (whose statistics would be the
    micro-batch's) are errors. `micro-batches=1` leaves the IR unchanged.

    ```
    memopt-opt --memopt-autodiff --memopt-accumulate=micro-batches=4 model.mlir
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::tensor::TensorDialect"];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Number of micro-batches the batch is split into">,
    Option<"allowBatchNorm", "allow-batch-norm", "bool", /*default=*/"false",
           "Accept batch norm with statistics of each micro-batch">
  ];
}

def BufferizePass : Pass<"memopt-bufferize", "mlir::ModuleOp"> {
  let summary = "Rewrite @train_step from tensors to buffers, one kernel per op";
  let description = [{
    Rewrites the function marked `memopt.train_step` into destination-passing
    style (docs/Pipeline.md, section 2): arguments become memrefs with the
    same attributes, a last `%loss: memref<f32>` argument (role "loss")
    receives the loss, and the function returns nothing. Each memopt op
    becomes one `memopt.kernel` with the op's attributes. The new value of a
    "param", "state" or "optim" argument is written into that argument's
    memref by its producer when no later op reads the old value (and the
    runtime allows the aliasing), otherwise copied there at the end of the
    step by a `memopt.kernel "memopt.reshape"` of equal types. Every other
    value gets a `memref.alloc` before its producer and a `memref.dealloc`
    after its last use. A reduction over dimensions that are not adjacent
    becomes one kernel per run of adjacent dimensions (the runtime reduces
    one run per call), through f32 buffers. Anything else (non-memopt ops,
    control flow, dynamic shapes) is an error.

    With `reuse` (the default) the pass also lowers the memory bound: an
    elementwise kernel (or softmax) writes its result into the scratch buffer
    of an operand of the same type that dies at that kernel, and a reshape
    becomes a `memref.reinterpret_cast` view of its operand's buffer instead
    of a copy. `reuse=false` gives one fresh buffer per value and one copy
    per reshape, to measure the difference; `in-place` and `alias-reshapes`
    turn the two rules off one at a time.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
  let options = [
    Option<"reuse", "reuse", "bool", /*default=*/"true",
           "Share buffers: in-place elementwise results and reshape views">,
    Option<"inPlace", "in-place", "bool", /*default=*/"true",
           "With reuse: write an elementwise result into a dying operand's "
           "buffer">,
    Option<"aliasReshapes", "alias-reshapes", "bool", /*default=*/"true",
           "With reuse: make a reshape a view of its operand's buffer">,
  ];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of kernels created">,
    Statistic<"numAllocs", "allocs", "Number of scratch buffers allocated">,
    Statistic<"numInPlace", "in-place",
              "Number of results written straight into an argument">,
    Statistic<"numCopies", "copies",
              "Number of copies into arguments at the end of the step">,
    Statistic<"numReused", "reused",
              "Number of results written into a dying operand's buffer">,
    Statistic<"numViews", "views",
              "Number of reshapes lowered to views of their operand">
  ];
}

def TestPrintMemoryAccountPass
    : Pass<"memopt-test-print-memory-account", "mlir::ModuleOp"> {
  let summary = "Print the memory account of each function (MemoryAccount)";
  let description = [{
    For every function with a body, normally the planned `@train_step`,
    prints to standard output the MemoryAccount analysis that the memory
    report of memopt-compile shows (docs/MemoryReport.md): the arena and its
    lower bound, the bytes of each pool at the peak program point, the peak,
    the activations saved for the backward pass by scope, the FLOPs, then one
    line per buffer and one per program point. The IR is left unchanged.

    ```
    memory account of @train_step (9 ops):
      arena_bytes=512 lower_bound_bytes=512
      pools: params=48 master_params=0 grads=48 optimizer=104 ...
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "The plan's alignment, for the lower bound (1 to 2^30)">
  ];
}

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
