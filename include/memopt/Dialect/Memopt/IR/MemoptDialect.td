//===- MemoptDialect.td - memopt dialect definition --------*- tablegen -*-===//
//
// The memopt dialect: training steps on value-semantic tensors, with the
// annotations (roles, names, scopes) that memory planning speaks in.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_TD

include "mlir/IR/OpBase.td"

def Memopt_Dialect : Dialect {
  let name = "memopt";
  let cppNamespace = "::memopt";
  let summary = "Neural-network training steps for memory-aware compilation";
  let description = [{
    The memopt dialect describes a model's forward pass and loss, and the
    training step derived from it, on ranked, statically shaped tensors with
    value semantics. Data is f32, f16 or bf16; indices are i32 or i64; masks
    are i1.

    Function arguments carry their role in training:

    * `memopt.role` — `"param"` (a trainable weight), `"frozen"` (a weight
      the step reads and never trains: no gradient, no optimizer state, as
      PyTorch's `requires_grad=False`), `"input"`, `"label"`, or `"state"`
      (non-trained state a step updates, such as batch-norm running
      statistics); in a training step also `"optim"` (optimizer
      state) and `"loss"` (the buffer that receives the loss);
    * `memopt.name` — the name the user knows it by (the PyTorch
      `named_parameters()` name or the `forward()` argument name);
    * `memopt.batch_dim` — for inputs and labels, the dimension that indexes
      examples (what gradient accumulation splits);
    * `memopt.nf4_of` — for a frozen weight stored in NF4
      (`--memopt-quantize-frozen`), the shape of the weight whose packed
      bytes the `i8` argument holds;
    * `memopt.hparams` — for a parameter, its own optimizer hyper-parameters
      (its parameter group's), a dictionary of f64 values named `lr`,
      `weight_decay`, and `beta1`, `beta2`, `eps` (AdamW) or `momentum`
      (SGD); the others keep `--memopt-autodiff`'s options.

    A loss function may carry `memopt.optimizer` (`"adamw"` or `"sgd"`), the
    optimizer it was exported for: the step must be built for that one.

    The function that computes the loss carries the unit attribute
    `memopt.loss`. It returns the scalar f32 loss, followed by the new value
    of each `"state"` argument in argument order. Ops may carry
    `memopt.scope`, the module path they come from (`transformer.h.3.attn`),
    so that passes and reports speak in the user's terms.

    The training step derived from it (`--memopt-autodiff`) is marked
    `memopt.train_step`; after buffer planning its scratch buffers carry
    `memopt.offset` and the function `memopt.arena_bytes`
    (docs/Pipeline.md).

    Broadcasting is explicit (`memopt.broadcast`): elementwise ops take
    operands of one type. Randomness is counter-based (see
    `memopt.dropout`), so a recomputed op reproduces its result bit for bit.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Names of the discardable attributes this dialect gives meaning to.
    static constexpr ::llvm::StringLiteral kRoleAttrName = "memopt.role";
    static constexpr ::llvm::StringLiteral kNameAttrName = "memopt.name";
    static constexpr ::llvm::StringLiteral kBatchDimAttrName =
        "memopt.batch_dim";
    /// ZeRO (docs/DataParallel.md): the full shape of the tensor that an
    /// argument holds one rank's shard of (flattened, zero-padded to a
    /// multiple of the ranks, rank r's slice r).
    static constexpr ::llvm::StringLiteral kShardOfAttrName =
        "memopt.shard_of";
    /// NF4 frozen weights (docs/Quantization.md): the shape of the tensor
    /// whose NF4-packed bytes a frozen argument holds.
    static constexpr ::llvm::StringLiteral kNf4OfAttrName = "memopt.nf4_of";
    static constexpr ::llvm::StringLiteral kLossAttrName = "memopt.loss";
    /// Parameter groups (docs/Exporter.md): the optimizer a `memopt.loss`
    /// function was exported for, and a parameter's own hyper-parameters.
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "memopt.optimizer";
    static constexpr ::llvm::StringLiteral kHparamsAttrName =
        "memopt.hparams";
    static constexpr ::llvm::StringLiteral kScopeAttrName = "memopt.scope";
    static constexpr ::llvm::StringLiteral kTrainStepAttrName =
        "memopt.train_step";
    /// The evaluation step (--memopt-eval-step): forward and loss only,
    /// compiled in a module of its own as a step that updates nothing.
    static constexpr ::llvm::StringLiteral kEvalStepAttrName =
        "memopt.eval_step";
    static constexpr ::llvm::StringLiteral kOffsetAttrName = "memopt.offset";
    static constexpr ::llvm::StringLiteral kArenaBytesAttrName =
        "memopt.arena_bytes";
    /// Mixed precision (docs/MixedPrecision.md): the per-op dtype override
    /// and the loss scaling a `memopt.loss` function asks autodiff for.
    static constexpr ::llvm::StringLiteral kPrecisionAttrName =
        "memopt.precision";
    static constexpr ::llvm::StringLiteral kLossScaleAttrName =
        "memopt.loss_scale";
    /// Marks an op that --memopt-remat cloned to recompute a forward value.
    static constexpr ::llvm::StringLiteral kRecomputeAttrName =
        "memopt.recompute";
    /// The micro-batch loop of --memopt-accumulate (docs/Accumulation.md):
    /// its micro-batch count and, with data parallelism, its ranks.
    static constexpr ::llvm::StringLiteral kMicroBatchesAttrName =
        "memopt.micro_batches";
    static constexpr ::llvm::StringLiteral kDataParallelAttrName =
        "memopt.data_parallel";
    /// Optimizer offload (docs/Offload.md): `memopt.memory = "host"` on an
    /// argument or a planned buffer that lives in host memory (without it,
    /// device memory), `memopt.on_host` on an op that runs on the host, and
    /// `memopt.host_arena_bytes` the host arena of a planned step.
    static constexpr ::llvm::StringLiteral kMemoryAttrName = "memopt.memory";
    static constexpr ::llvm::StringLiteral kOnHostAttrName = "memopt.on_host";
    static constexpr ::llvm::StringLiteral kHostArenaBytesAttrName =
        "memopt.host_arena_bytes";

  private:
    void registerAttributes();
  public:
  }];
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_TD
