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
           "SGD: momentum factor">,
    Option<"stateBits", "state-bits", "unsigned", /*default=*/"32",
           "AdamW: bits per moment element, 32 or 8 (blockwise-quantized, "
           "for parameters of at least 4096 elements)">
  ];
  let statistics = [
    Statistic<"numGradientOps", "gradient-ops",
              "Number of ops the backward pass adds">
  ];
}

def FuseKernelsPass : Pass<"memopt-fuse-kernels", "mlir::ModuleOp"> {
  let summary = "Form fused attention and linear cross-entropy from the ops they replace";
  let description = [{
    Rewrites the module's `memopt.loss` function before mixed precision and
    autodiff, so that the two largest tensors of transformer training never
    exist (docs/Fusion.md):

    - `attention`: `matmul(q, k^T)` -> `mul_scalar` (any number, or none) ->
      `masked_fill` (none, one, or two of one value when one of them is
      causal) -> `softmax` over the last dimension ->
      `dropout` (optional) -> `matmul(., v)`, each intermediate used once,
      becomes one `memopt.attention`. A mask that is a broadcast of a
      constant lower-triangular pattern becomes `causal`; any other mask is
      kept as the op's operand, before its broadcast (the op broadcasts).
    - `lm-loss`: `matmul(x, w^T)` (`w` a `[classes, width]` matrix) plus an
      optional broadcast bias, through reshapes, into `cross_entropy` becomes
      one `memopt.linear_cross_entropy`. Its `chunk` (classes per step of
      the kernel) is `lm-loss-chunk`, or by default the most classes whose
      f32 logits for every row take no more than one f32 copy of `x` (at
      least 1 MiB): the kernel's scratch is never larger than an activation.
      When that chunk covers every class the logits are small: nothing is
      fused unless `lm-loss-chunk` is given.

    The rewritten ops compute the same function (the attention's dropout
    draws the same mask); results differ from the unfused ops only by
    rounding (sums in another order, f32 scores and logits).

    ```
    memopt-opt --memopt-fuse-kernels="lm-loss=false" model.mlir
    ```
  }];
  let options = [
    Option<"attention", "attention", "bool", /*default=*/"true",
           "Form memopt.attention">,
    Option<"lmLoss", "lm-loss", "bool", /*default=*/"true",
           "Form memopt.linear_cross_entropy">,
    Option<"lmLossChunk", "lm-loss-chunk", "int64_t", /*default=*/"0",
           "Classes per chunk of the linear cross-entropy (0: from the "
           "memory account)">
  ];
  let statistics = [
    Statistic<"numAttention", "attention", "Number of fused attentions">,
    Statistic<"numLinearLoss", "linear-cross-entropy",
              "Number of fused linear cross-entropy losses">
  ];
}

def MixedPrecisionPass : Pass<"memopt-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Assign dtypes to the forward pass: low-precision GEMMs, FP32 master weights";
  let description = [{
    Rewrites the module's `memopt.loss` function before `--memopt-autodiff`,
    as autocast does: each op runs in the dtype its policy gives it
    (docs/MixedPrecision.md) — the compute type for matmul and conv2d
    (accumulating in f32), f32 for numerically sensitive ops (exp, log, pow,
    rsqrt, softmax, norms, every loss; sums and means produce f32), the
    widest of its float inputs for everything else. `memopt.precision =
    "f32"`, `"bf16"` or `"f16"` on an op overrides its policy. A cast is
    inserted where a value's dtype differs from what its user runs in, once
    per value and dtype, before the first such user; casts that round-trip
    through a wider type are folded. Parameter arguments stay f32: they are
    the master weights the optimizer updates, and each low-precision copy is
    one cast per step.

    The loss scaling the backward needs is recorded on the function as
    `memopt.loss_scale` (docs/MixedPrecision.md), which `--memopt-autodiff`
    implements with GradScaler's semantics.

    ```
    memopt-opt --memopt-mixed-precision="compute-type=fp16 loss-scale=dynamic" model.mlir
    ```
  }];
  let options = [
    Option<"computeType", "compute-type", "::memopt::Precision",
           /*default=*/"::memopt::Precision::BF16",
           "The compute precision: bf16, fp16, or none (the pass changes "
           "nothing)">,
    Option<"lossScale", "loss-scale", "std::string", /*default=*/"\"\"",
           "dynamic, none or a static scale (a positive number); the "
           "default is none for bf16 and dynamic for fp16">,
    Option<"lossScaleInit", "loss-scale-init", "double",
           /*default=*/"::memopt::LossScaleConfig().scale",
           "Dynamic loss scaling: the initial scale">,
    Option<"growthFactor", "growth-factor", "double",
           /*default=*/"::memopt::LossScaleConfig().growthFactor",
           "Dynamic loss scaling: the factor the scale grows by">,
    Option<"backoffFactor", "backoff-factor", "double",
           /*default=*/"::memopt::LossScaleConfig().backoffFactor",
           "Dynamic loss scaling: the factor the scale shrinks by on overflow">,
    Option<"growthInterval", "growth-interval", "int64_t",
           /*default=*/"::memopt::LossScaleConfig().growthInterval",
           "Dynamic loss scaling: successive good steps before the scale grows">,
    Option<"frozenInComputeType", "frozen-in-compute-type", "bool",
           /*default=*/"true",
           "Store a frozen weight read only through its 16-bit copy in the "
           "compute type (false: it stays f32)">
  ];
  let statistics = [
    Statistic<"numCasts", "casts", "Number of casts the pass leaves">,
    Statistic<"numLowPrecisionOps", "low-precision-ops",
              "Number of ops that run in the compute type">
  ];
}

def QuantizeFrozenPass : Pass<"memopt-quantize-frozen", "mlir::ModuleOp"> {
  let summary = "Store frozen matmul weights in NF4 (QLoRA)";
  let description = [{
    Rewrites the module's `memopt.loss` function, after
    `--memopt-mixed-precision` and before `--memopt-autodiff`: a `"frozen"`
    argument that is a matrix read only as the right-hand operand of
    `memopt.matmul` (a frozen `nn.Linear` weight: a LoRA fine-tune's base) or
    as the weight of the fused LM-head loss becomes the `i8` tensor of its
    NF4-packed bytes (docs/Quantization.md), marked `memopt.nf4_of` with its
    shape; each of those products becomes a `memopt.nf4_matmul` and each
    fused loss a `memopt.nf4_linear_cross_entropy`, which dequantize a chunk
    of the weight at a time in the products' element type. A weight also read
    by another op (an embedding table tied to the LM head, a norm's scale) or
    through a cast keeps its type. The driver quantizes the checkpoint's
    tensor at load and saves it unchanged.

    ```
    memopt-opt --memopt-mixed-precision --memopt-quantize-frozen model.mlir
    ```
  }];
  let statistics = [
    Statistic<"numQuantized", "quantized-weights",
              "Number of frozen weights stored in NF4">
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

def OverlapTransfersPass
    : Pass<"memopt-overlap-transfers", "mlir::ModuleOp"> {
  let summary = "Copies between the memories overlap the device's compute";
  let description = [{
    Runs on the bufferized `@train_step`, before `--memopt-plan-buffers`
    (docs/Offload.md). Each `memopt.transfer` kernel becomes the start of an
    asynchronous copy, `slot = N` in its attributes, and a
    `memopt.transfer_wait` on the same slot marks its end. The start moves
    up and the wait moves down past every op that touches neither buffer,
    as far as the neighbouring copy's start or wait: one copy is in flight
    at a time and it runs while the ops between its start and its wait
    compute. A copy back to the device so starts one stage before its
    reader (a prefetch), and a saved value's device buffer is released once
    its copy to the host is complete. The wait reads both buffers, so the
    plan keeps them for the copy's whole flight: the arena is exact under
    the overlap. A wait has `host` when the step runs kernels on the host,
    which may read what arrived or write over what left.

    ```
    memopt-opt --memopt-bufferize --memopt-overlap-transfers --memopt-plan-buffers step.mlir
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h100-80gb\"",
           "The device whose host link and roofline time the copies and "
           "the compute that hides them (memopt-compile --device)">
  ];
  let statistics = [
    Statistic<"numCopies", "copies", "Number of copies made asynchronous">,
    Statistic<"numMoved", "moved",
              "Number of starts and waits moved away from their copy">,
  ];
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

    With `reuse=false` no two buffers share a byte, whatever their
    lifetimes: the buffers are stacked back to back in program order, each
    offset aligned, and the arena is the sum of the aligned sizes (the
    unoptimised baseline; docs/BufferReuse.md). The lower-bound statistic is
    still the largest total live at one point.

    ```
    memopt-opt --memopt-plan-buffers="alignment=256 time-limit=2" step.mlir
    memopt-opt --memopt-plan-buffers="reuse=false" step.mlir
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t",
           /*default=*/"::memopt::kDefaultArenaAlignment",
           "Every offset is a multiple of this many bytes (1 to 2^30)">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"1.0",
           "Seconds the placement may take; 0 runs only the heuristics">,
    Option<"reuse", "reuse", "bool", /*default=*/"true",
           "Let buffers with disjoint lifetimes share bytes; false stacks "
           "every buffer in its own bytes">
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
    Option<"alignment", "alignment", "int64_t",
           /*default=*/"::memopt::kDefaultArenaAlignment",
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

    With `data-parallel=N` the step is one of N ranks' (docs/DataParallel.md):
    its batch arguments hold the rank's 1/N of the batch, the loop runs over
    `micro-batches` parts of that, each count of labels is summed over the
    ranks before the loop and each accumulated value (the gradients and the
    loss) after it, with upstream `shard.all_reduce` on the one-axis grid
    `@memopt_ranks`; the step then equals the full batch's step on every
    rank. With `rank-batch` the batch arguments are one rank's already: the
    global batch is N times the IR's, and its means are over all of it. The
    loop carries `memopt.data_parallel = N`, from which the
    lowering numbers the micro-batches of all ranks in one sequence (rank r's
    micro-batch i is micro-batch r * K + i of the full batch), so dropout
    draws the single-process masks.

    ```
    memopt-opt --memopt-autodiff --memopt-accumulate=micro-batches=4 model.mlir
    memopt-opt --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=4" model.mlir
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::shard::ShardDialect",
                           "mlir::tensor::TensorDialect"];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Number of micro-batches the batch is split into">,
    Option<"dataParallel", "data-parallel", "int64_t", /*default=*/"1",
           "Number of ranks the batch is split across (data parallelism)">,
    Option<"rankBatch", "rank-batch", "bool", /*default=*/"false",
           "With data-parallel=N: the batch arguments hold one rank's batch "
           "(the global batch is N times it) instead of the global batch">,
    Option<"allowBatchNorm", "allow-batch-norm", "bool", /*default=*/"false",
           "Accept batch norm with statistics of each micro-batch">
  ];
}

def OffloadOptimizerPass
    : Pass<"memopt-offload-optimizer", "mlir::ModuleOp"> {
  let summary = "ZeRO-Offload: the optimizer state and the f32 master "
                "weights live in host memory, and the update runs there";
  let description = [{
    Rewrites the tensor-level step (after `--memopt-accumulate`,
    `--memopt-shard-optimizer` and `--memopt-clip-gradients`, before
    `--memopt-bufferize`) so that every optimizer update runs on the host
    (docs/Offload.md):

    - the update's optimizer state arguments, and its parameter argument
      (the f32 master weights), are marked `memopt.memory = "host"`;
    - every other op that reads the parameter reads instead a device copy,
      a new argument of role `"param_copy"` with the parameter's name,
      appended after the others: in the one low-precision type the step
      casts the parameter to (bf16 or f16), else in f32;
    - the update and the low-precision cast of its new value carry
      `memopt.on_host`, and the cast's result (the new f32 value without a
      low-precision copy) is the copy's new value;
    - a gradient the micro-batch loop sums is summed on the host when the
      update and clipping's sum of squares and rescale are all that read
      the sum: its zero, the adds and those readers carry `memopt.on_host`,
      and the loop carries the sum in host memory (not under plain data
      parallelism or ZeRO-1, whose all-reduce reads the sum on the device,
      nor under FP16's unscale);
    - `memopt.transfer ... to host` brings each device value a host op reads
      (the gradient or a micro-batch's term of it, the step counter, the
      loss-scaling skip flag) to the host right before its first reader, and `memopt.transfer ... to
      device` takes each host value that a device op reads or a device
      argument returns back right after it is computed.

    With ZeRO each rank offloads its shard. The step computes what it
    computed before, bit for bit: the transfers copy bytes, and the host
    entries compute what the device entries do.

    With `params`, the weights the device computes with live on the host
    too (DeepSpeed's parameter offload, FSDP's CPU offload): the
    low-precision copy is a host argument (the f32 master itself without
    mixed precision), and each device op that reads it reads a
    `memopt.transfer ... to device` made right before it, so a weight
    crosses once per use (ZeRO-3: each gather of the rank's shard, in the
    forward and again in the backward) and lives on the device only while
    that op runs.

    ```
    memopt-opt --memopt-autodiff --memopt-offload-optimizer model.mlir
    memopt-opt --memopt-autodiff --memopt-offload-optimizer=params model.mlir
    ```
  }];
  let options = [
    Option<"params", "params", "bool", /*default=*/"false",
           "The weights the device computes with live on the host too, "
           "copied to the device before each op that reads them">
  ];
}

def OffloadActivationsPass
    : Pass<"memopt-offload-activations", "mlir::ModuleOp"> {
  let summary = "Saved activations wait for the backward in host memory";
  let description = [{
    Runs on the tensor-level `@train_step` (after `--memopt-remat`, before
    `--memopt-accumulate`; docs/Offload.md). Every forward value that
    depends on the step's data and that the backward reads as it is (what
    remat keeps) is copied to the host after its last forward reader,
    `memopt.transfer %v to host`, and back before its first backward
    reader, `memopt.transfer %h to device`, which every backward reader
    then reads. Between the two it takes no device memory: the device holds
    the forward's working set and the backward's, the host arena the saved
    values. Casts of the weights and other values that read no data stay on
    the device, as does a value whose first backward reader comes before
    its last forward one.

    The copies move bytes: the step computes what it computed before, bit
    for bit. `memopt-compile --offload=activations` runs it (with
    `optimizer` or `params`: `--offload=optimizer,activations`), and the
    budget search weighs it against recomputation by estimated step time.

    With `budget`, only the fewest saved values, largest first, whose move
    plans the device arena within `budget` bytes go to the host (all of
    them when even that does not fit): a binary search over how many, each
    count checked by planning a copy of the step with the passes after this
    one (bufferization and planning alone from memopt-opt).

    ```
    memopt-opt --memopt-autodiff --memopt-offload-activations model.mlir
    memopt-opt --memopt-autodiff --memopt-offload-activations=budget=1536 model.mlir
    ```
  }];
  let options = [
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Bytes the planned device arena may take: move the fewest saved "
           "bytes that fit it (0: every saved value)">
  ];
}

def ShardOptimizerPass : Pass<"memopt-shard-optimizer", "mlir::ModuleOp"> {
  let summary = "ZeRO: each rank updates and keeps 1/N of the optimizer state "
                "and master weights";
  let description = [{
    Rewrites the data-parallel step of `--memopt-accumulate` (option
    `data-parallel=N`, N >= 2) so that each rank updates its 1/N slice of
    every parameter (docs/DataParallel.md, "ZeRO"): the gradient
    accumulator, flattened and zero-padded to a multiple of N, is
    reduce-scattered (`shard.reduce_scatter`) instead of all-reduced; the
    optimizer state arguments become shards of `ceil(n / N)` elements marked
    `memopt.shard_of` with their full shape; the update reads the rank's
    slice of the parameter (`shard.all_slice`); and the updated slices are
    all-gathered (`shard.all_gather`) into the parameter, which every rank
    keeps whole. `stage=2` also shards the gradient accumulators: each
    micro-batch's gradient is reduce-scattered inside the loop and added to
    the rank's slice. `stage=3` also shards the parameters: the parameter
    argument becomes the rank's slice (marked `memopt.shard_of`), the
    update's new slice is returned as it is, and every other op that reads
    the parameter reads a copy all-gathered right before it (after the
    cast of the slice when the op reads a bf16 or f16 cast).

    In mixed precision, a parameter that the step reads only through one
    bf16 or f16 `memopt.cast` is held as that whole copy, a new argument of
    role `"param_copy"` and the parameter's name, appended after the others
    (its new value after the other results); the parameter argument becomes
    the shard of its f32 master weights, and the update's new slice is cast
    and all-gathered into the copy.

    The parameters equal the data-parallel step's: bit for bit with two
    ranks. Parameters other than f32 and FP16 dynamic loss scaling (whose
    skip decision would need every rank's overflow check) are errors.

    ```
    memopt-opt --memopt-autodiff --memopt-accumulate=data-parallel=2 --memopt-shard-optimizer=stage=1 model.mlir
    ```
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"1",
           "ZeRO stage: 1 shards the optimizer state, 2 also the gradients, "
           "3 also the parameters">
  ];
}

def ReleaseGradientsPass
    : Pass<"memopt-release-gradients", "mlir::ModuleOp"> {
  let summary = "Run each optimizer update as soon as its gradient is complete";
  let description = [{
    Moves every `memopt.adamw_update` and `memopt.sgd_update` of
    `@train_step` to right after the later of its gradient's last producer
    and the last other reader of its parameter (or of a reshape of it), and
    the step counter's increment right before the earliest. Each gradient
    then dies at its update instead of living until the optimizer step, so
    the gradient pool at the peak falls from every parameter's gradient to
    the few in flight; the parameters are bit-identical to the ordinary
    step's (docs/Remat.md, "Gradients released in the backward").

    The step is left as it is under loss scaling (`memopt.unscale` or
    `skip_if`): the skip decision needs every gradient first. Run it before
    `--memopt-accumulate`, only on a step without the micro-batch loop.

    ```
    memopt-opt --memopt-autodiff --memopt-release-gradients model.mlir
    ```
  }];
  let statistics = [
    Statistic<"numReleased", "released-updates",
              "Number of optimizer updates moved into the backward">
  ];
}

def EvalStepPass : Pass<"memopt-eval-step", "mlir::ModuleOp"> {
  let summary = "Build the evaluation step from the loss function";
  let description = [{
    Rewrites the `memopt.loss` function into `@eval_step`, marked
    `memopt.eval_step`: `model.eval(); with torch.no_grad(): model(x, y)`
    (docs/Training.md, "The evaluation step"). Dropout is the identity,
    batch norm normalises with its running statistics (PyTorch's inference
    formula, in f32) and updates nothing; the function returns the loss and
    then each param, state and optim argument unchanged, so that
    --memopt-bufferize and --memopt-plan-buffers compile it like a training
    step, into an arena of its own. Run it after --memopt-fuse-kernels and
    --memopt-mixed-precision, on a module of its own.

    ```
    memopt-opt --memopt-eval-step --memopt-bufferize --memopt-plan-buffers model.mlir
    ```
  }];
}

def ClipGradientsPass : Pass<"memopt-clip-gradients", "mlir::ModuleOp"> {
  let summary = "Clip the gradients to a global 2-norm, as clip_grad_norm_";
  let description = [{
    `torch.nn.utils.clip_grad_norm_(trained parameters, max-norm)` on
    `@train_step` (docs/Training.md, "Gradient clipping"): the 2-norm over
    the gradient of every optimizer update (the sum of each one's squares,
    `memopt.reduce_sum_squares`, added in f32), the coefficient
    `min(1, max-norm / (norm + 1e-6))`, and every gradient multiplied by it
    (`memopt.scale_by`) before its update. The gradients are the ones the
    updates read: unscaled under loss scaling, summed over the micro-batches
    and the ranks, and a rank's shards under ZeRO, whose partial sums are
    added over the ranks (`shard.all_reduce`). The norm becomes the new
    value of an optim argument, `optimizer.grad_norm`, which the driver
    prints.

    The norm needs every gradient, so no update can run before the last one
    exists. `strategy` says what the step pays for that:
    - `keep`: every gradient lives until the coefficient is known (what
      PyTorch does);
    - `recompute`: a first backward computes each gradient only for its
      squares and drops it, then the backward runs again and each update
      follows its gradient (--memopt-release-gradients, which runs after
      this pass, moves them): the release's memory at the cost of one more
      backward. Only on a step that release applies to (one micro-batch,
      no loss scaling).

    ```
    memopt-opt --memopt-autodiff --memopt-clip-gradients="max-norm=1.0" model.mlir
    ```
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
  let options = [
    Option<"maxNorm", "max-norm", "double", /*default=*/"1.0",
           "The largest global 2-norm of the gradients (> 0)">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"keep\"",
           "keep (the gradients live until the norm is known) or recompute "
           "(a norm pass, then the backward again with released updates)">
  ];
  let statistics = [
    Statistic<"numClipped", "clipped-gradients",
              "Number of gradients multiplied by the clipping coefficient">,
    Statistic<"numRecomputed", "recomputed-ops",
              "Number of backward ops run twice (strategy recompute)">
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
    of an operand of the same type that dies at that kernel (as does each
    result of `memopt.unscale`, into its own gradient's buffer), and a reshape
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
           "With reuse: write an elementwise (or unscale) result into a dying "
           "operand's buffer">,
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
    Option<"alignment", "alignment", "int64_t",
           /*default=*/"::memopt::kDefaultArenaAlignment",
           "The plan's alignment, for the lower bound (1 to 2^30)">
  ];
}

def RematerializePass : Pass<"memopt-remat", "mlir::ModuleOp"> {
  let summary = "Choose the forward values @train_step keeps or recomputes";
  let description = [{
    Runs on the tensor-level `@train_step` (after `--memopt-autodiff`,
    before `--memopt-bufferize`). The forward ops are the backward slice of
    the loss and of the returned "state" values; they are cut into a chain of
    stages at the values that alone carry the forward from one part of the
    graph to the next (articulation values), keeping only the cuts where the
    top-level `memopt.scope` prefix changes (e.g. `transformer.h.3`) when the
    ops have scopes. A strategy decides which forward values the backward
    reads as they are; every other forward value the backward reads is
    recomputed by clones of its producers, inserted just before the first
    backward op that needs it (nested, from snapshots, for `revolve`) and
    marked `memopt.recompute`. Ops with side effects are never cloned.
    Recomputation is bit-exact: every memopt op is a deterministic function
    of its operands and attributes (dropout of its seed, stream and the
    step). docs/Remat.md has the strategies and the dynamic program.

    - `none`: leave the step unchanged.
    - `blocks`: keep each stage's input.
    - `sqrt`: keep every ceil(sqrt(n))-th stage input (Chen et al.).
    - `revolve`: binomial checkpointing with `snapshots` slots (0: the
      logarithmic choice), t(l, s) stage recomputations.
    - `budget`: least recompute FLOPs such that the planned arena
      (`--memopt-bufferize` + `--memopt-plan-buffers` on a copy) fits
      `budget` bytes; a budget below the smallest reachable arena is an error
      that states it. `planning="buffer-reuse=false"` plans the copy
      without buffer reuse, as the pipeline does with it off.
    - `selective`: recompute attention scores, softmax, dropout and
      elementwise activations; keep GEMM and convolution outputs.
    - `auto`: `budget` when a budget is given, otherwise `none`.

    With `cheap-recompute` (on in `--memopt-pipeline` and `memopt-compile`
    unless `--no-cheap-recompute`), every strategy starts from the minimal
    saved set: of the forward values the backward reads, it
    keeps the least bytes from which the backward can recompute the rest by
    cheap ops (everything but matmuls and convolutions: casts, views,
    broadcasts, elementwise ops, norms), a minimum cut of the forward graph
    (memopt/Remat/SavedSet.h). So no value is kept together with a cast,
    view or elementwise function of it that the backward could recompute.
    Each backward read rebuilds its value from kept ones right before it;
    the chain's intermediates die there. With `none` and `budget`, the
    rewrite is kept only when the step's planned arena is not larger than
    without it. Without the option, every value the backward reads is kept.

    ```
    memopt-opt --memopt-autodiff --memopt-remat="strategy=budget budget=1048576" m.mlir
    ```
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"none\"",
           "none, blocks, sqrt, revolve, budget, selective or auto">,
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Bytes the planned arena may take (budget and auto)">,
    Option<"snapshots", "snapshots", "int64_t", /*default=*/"0",
           "revolve: stage inputs held at once (0: logarithmic)">,
    Option<"printSummary", "print-summary", "bool", /*default=*/"false",
           "Print one line to stderr: the stages, the schedule's stage "
           "recomputations and the recompute FLOPs">,
    Option<"planningText", "planning", "std::string", /*default=*/"\"\"",
           "The options the copies are planned with, as --memopt-pipeline "
           "spells them (micro-batches, data-parallel, zero-stage, "
           "clip-grad-norm, buffer-reuse ...; release-gradients is false "
           "unless given): budget and the arena comparisons plan the step "
           "as the passes after remat will. --memopt-pipeline hands remat "
           "its own">,
    Option<"cheapRecompute", "cheap-recompute", "bool", /*default=*/"false",
           "Keep the minimal saved set first: recompute cheap ops (not "
           "matmuls or convolutions) in the backward where that keeps fewer "
           "bytes">
  ];
  let statistics = [
    Statistic<"numStages", "stages", "Number of stages of the forward chain">,
    Statistic<"numCheapRecomputedOps", "cheap-recomputed-ops",
              "Number of ops cloned for the minimal saved set">,
    Statistic<"numRecomputedOps", "recomputed-ops",
              "Number of ops cloned to recompute forward values">,
    Statistic<"recomputeFlops", "recompute-flops",
              "FLOPs of the recompute clones">,
    Statistic<"forwardFlops", "forward-flops", "FLOPs of the forward ops">,
    Statistic<"recomputedStages", "recomputed-stages",
              "Stage evaluations the chain schedule repeats">,
    Statistic<"plannerChecks", "planner-checks",
              "budget: candidate plans checked with the real planner">
  ];
}

def TestPrintCostPass : Pass<"memopt-test-print-cost", "mlir::ModuleOp"> {
  let summary = "Print the cost model's figures for each function (CostModel)";
  let description = [{
    For every function with a body, prints to standard output the cost of
    each op that costs anything (FLOPs, bytes moved, whether it is a GEMM,
    its smallest GEMM dimension and its roofline time on `device`, once),
    then the step: executed FLOPs, bytes and kernels (loop trip counts
    applied) and the estimated seconds (docs/Budget.md), with, when the step
    copies between the memories, the bytes copied, their seconds on the
    host link and the part of them the step waits for. Works on tensors
    and on bufferized kernels. The IR is left unchanged.

    ```
    cost of @f on h100-80gb:
      op 0 memopt.matmul flops=1572864 bytes=114688 gemm min=64 seconds=...
      step: flops=... bytes=... kernels=... seconds=...
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h100-80gb\"",
           "The device profile the times are estimated on">
  ];
}

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
