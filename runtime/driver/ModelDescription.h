//===- ModelDescription.h - the model description of a program -*- C++ -*-===//
//
// The model description (docs/Pipeline.md, section 5): what a compiled
// program's training step takes, argument by argument, and how it was
// compiled. One schema for its writer, memopt-compile (OUT/model.json, and
// the copy a program embeds), and its reader, the driver: both use these
// structs and Model.cpp's two functions. Plain C++17, no JSON
// library in the interface, so that the compiler (built without exceptions)
// includes it too.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DRIVER_MODELDESCRIPTION_H
#define MEMOPT_DRIVER_MODELDESCRIPTION_H

#include "Safetensors.h"

#include "memopt/runtime/LrSchedule.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memopt::driver {

/// The largest arena the driver lays out; far beyond any device, small enough
/// that offsets never overflow.
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 62;

/// The role of a training-step argument (`memopt.role`). A ParamCopy is the
/// copy the device computes with of the "param" of its name, whose f32
/// master weights ZeRO shards or optimizer offload keeps in host memory:
/// loaded as the cast of the master's checkpoint tensor, never saved. A Frozen
/// weight is loaded with the parameters, never written by the step, and saved
/// unchanged.
enum class Role { Param, Frozen, Input, Label, State, Optim, Loss, ParamCopy };

/// Whether the checkpoint holds arguments of `role`: the weights (trained
/// or frozen), the state and the optimizer state.
inline bool isCheckpointed(Role role) {
  return role == Role::Param || role == Role::Frozen || role == Role::State ||
         role == Role::Optim;
}

/// Parses "param", "frozen", "input", "label", "state", "optim", "loss" or
/// "param_copy".
bool parseRole(const std::string &name, Role &role);

/// The spelling parseRole reads.
const char *getRoleName(Role role);

/// Parses a model dtype ("f32", "f16", "bf16", "i64", "i32", "i1", "u8").
bool parseModelDtype(const std::string &name, TensorDtype &dtype);

/// The spelling parseModelDtype reads.
const char *getModelDtypeName(TensorDtype dtype);

/// One argument of the bufferized `@train_step`.
struct ModelArgument {
  std::string name;
  Role role = Role::Param;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  /// product(shape) * dtype size.
  uint64_t byteSize = 0;
  /// Data parallelism: the dimension along which the batch file's tensor
  /// holds every rank's share ("batch_dim" of an input or label).
  std::optional<int64_t> batchDim;
  /// An integer input or label that indexes a table or labels classes:
  /// the exclusive upper bound of its values, which start at 0 ("bound").
  std::optional<int64_t> bound;
  /// The value a cross-entropy skips, allowed besides ("ignore_index").
  std::optional<int64_t> ignoreIndex;
  /// ZeRO: the full shape of the tensor this rank holds a shard of
  /// ("shard_of"): flattened, zero-padded to world size x shape[0], rank r
  /// holding elements [r * shape[0], (r + 1) * shape[0]).
  std::optional<std::vector<int64_t>> shardOf;
  /// A frozen weight stored in NF4 (docs/Quantization.md): the shape of the
  /// checkpoint's tensor ("nf4_of"), which the driver quantizes into the
  /// argument's bytes at load and saves unchanged.
  std::optional<std::vector<int64_t>> nf4Of;
  /// Bytes of the whole tensor: byteSize, or the shardOf tensor's.
  uint64_t wholeByteSize = 0;
  /// An f32 master weight with a "param_copy" (ZeRO's sharded master, or
  /// the host's master under optimizer offload): the index of the copy,
  /// which is loaded from the same checkpoint tensor.
  std::optional<size_t> copyIndex;
  /// Optimizer offload (docs/Offload.md): the argument lives in host memory
  /// (`"memory": "host"`), the f32 master weights and the optimizer state.
  bool host = false;
};

/// The "optimizer" section: the optimizer the step was compiled with and
/// the hyper-parameters of its default group.
struct OptimizerDescription {
  /// "adamw" or "sgd".
  std::string kind = "adamw";
  double lr = 0.0;
  /// AdamW's betas and eps (written for adamw only).
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// SGD's momentum (written for sgd only).
  double momentum = 0.0;
  double weightDecay = 0.0;
};

/// The "loss_scale" section of the model description (mixed precision).
struct LossScaleDescription {
  /// Dynamic: the scale is the optimizer-state argument
  /// "optimizer.loss_scale"; static: `scale` throughout.
  bool dynamic = false;
  /// The initial (dynamic) or constant (static) scale.
  double scale = 1.0;
  /// Dynamic scaling's factors and interval (GradScaler's semantics); the
  /// step applies them, the description records them.
  double growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
};

/// The evaluation step of the model description ("eval_step").
struct EvalDescription {
  /// Bytes of its scratch arena (which shares the training step's).
  uint64_t arenaBytes = 0;
  /// Its arguments, in order: the weights, state and optimizer state it
  /// reads are the training step's of the same name; one has role Loss.
  std::vector<ModelArgument> arguments;
};

/// The model description of docs/Pipeline.md, section 5.
struct ModelDescription {
  /// Bytes of the scratch arena the training step addresses.
  uint64_t arenaBytes = 0;
  /// Bytes of its scratch arena in host memory (optimizer offload;
  /// "host_arena_bytes", 0 without).
  uint64_t hostArenaBytes = 0;
  /// The arguments of `@train_step`, in order; exactly one has role Loss.
  std::vector<ModelArgument> arguments;
  /// The index of the loss argument in `arguments`.
  size_t lossIndex = 0;
  /// Present when the step scales the loss.
  std::optional<LossScaleDescription> lossScale;
  /// Indices of "optimizer.step" (an i64 scalar) and, with a dynamic loss
  /// scale, "optimizer.loss_scale" (an f32 scalar), if present.
  std::optional<size_t> stepIndex;
  std::optional<size_t> lossScaleIndex;
  /// The global gradient norm that clipping computed ("optimizer.grad_norm").
  std::optional<size_t> gradNormIndex;
  /// Data parallelism: the ranks the step was compiled for (1: none).
  int64_t dataParallel = 1;
  /// The optimizer; its lr is what the schedule multiplies (the log line).
  OptimizerDescription optimizer;
  /// The learning-rate schedule (constant without `lr_schedule`).
  memopt::runtime::LrSchedule lrSchedule;
  /// "bf16" or "fp16" with mixed precision, "" without.
  std::string mixedPrecision;
  /// The evaluation step, when the program has one.
  std::optional<EvalDescription> eval;
};

/// Parses and checks a model description: valid JSON, known roles and
/// dtypes, non-negative shapes, unique names, one f32 scalar loss.
bool parseModelDescription(const std::string &json, ModelDescription &model,
                           std::string &error);

/// The model description as memopt-compile writes it (OUT/model.json): the
/// fields parseModelDescription reads (not those it derives: indices, byte
/// sizes), one line per argument so that the file reads like the table it
/// is. parseModelDescription reads it back to the same description.
std::string writeModelDescription(const ModelDescription &model);

} // namespace memopt::driver

#endif // MEMOPT_DRIVER_MODELDESCRIPTION_H
