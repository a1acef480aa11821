//===- Driver.h - the `train` driver ----------------------------*- C++ -*-===//
//
// The main of `OUT/train` as a library (docs/Pipeline.md, section 6): parses
// the command line and the model description that memopt-compile embeds,
// loads parameters, state, optimizer state and the batch from safetensors
// files into one arena, runs the generated training step N times and saves
// the result. main.cpp binds it to the generated `memopt_train_step` and
// `memopt_model_json`; tests bind it to hand-written ones.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DRIVER_DRIVER_H
#define MEMOPT_DRIVER_DRIVER_H

#include "Safetensors.h"

#include "memopt/runtime.h"
#include "memopt/runtime/LrSchedule.h"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

/// Data parallelism's collectives, which the MPI part of the driver
/// (Mpi.cpp, linked by memopt-compile --data-parallel=N) provides:
/// starts MPI and fills `collectives`; returns 0, or non-zero with a message
/// in `error`.
extern "C" int memopt_driver_start_collectives(memopt_collectives *collectives,
                                               char *error, size_t error_size);
/// Ends every rank's run at once with `code` (MPI_Abort): a rank that fails
/// must not leave the others waiting in a collective.
extern "C" void memopt_driver_abort_collectives(int code);
/// Finalizes MPI after a successful run.
extern "C" void memopt_driver_stop_collectives(void);

namespace memopt::driver {

/// The largest arena the driver lays out; far beyond any device, small enough
/// that offsets never overflow.
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 62;

/// The role of a training-step argument (`memopt.role`). A ParamCopy is the
/// low-precision copy of the "param" of its name, whose f32 master weights
/// ZeRO shards: loaded as the cast of the master's checkpoint tensor, never
/// saved. A Frozen weight is loaded with the parameters, never written by
/// the step, and saved unchanged.
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

/// Parses a model dtype ("f32", "f16", "bf16", "i64", "i32", "i1").
bool parseModelDtype(const std::string &name, TensorDtype &dtype);

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
  /// A sharded f32 master: the index of its "param_copy" argument, which
  /// is loaded from the same checkpoint tensor.
  std::optional<size_t> copyIndex;
};

/// The "loss_scale" section of the model description (mixed precision).
struct LossScaleDescription {
  /// Dynamic: the scale is the optimizer-state argument
  /// "optimizer.loss_scale"; static: `scale` throughout.
  bool dynamic = false;
  /// The initial (dynamic) or constant (static) scale.
  double scale = 1.0;
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
  /// The learning-rate schedule (constant without `lr_schedule`) and the
  /// optimizer's lr it multiplies (`optimizer.lr`, for the log line).
  memopt::runtime::LrSchedule lrSchedule;
  double lr = 0.0;
  /// The evaluation step, when the program has one.
  std::optional<EvalDescription> eval;
};

/// Parses and checks a model description: valid JSON, known roles and
/// dtypes, non-negative shapes, unique names, one f32 scalar loss.
bool parseModelDescription(const std::string &json, ModelDescription &model,
                           std::string &error);

/// The command line of `train`.
struct DriverOptions {
  std::string paramsPath;
  /// The training data: --batch or --data (a safetensors file or a
  /// directory of them), or --tokens (a token file) with --token-dtype's
  /// bytes per token and --seed (seedGiven: on the command line; else a
  /// resumed run takes its checkpoint's).
  std::string dataPath;
  std::string tokensPath;
  unsigned tokenBytes = 2;
  uint64_t seed = 0;
  bool seedGiven = false;
  /// Empty when --save is absent.
  std::string savePath;
  int64_t steps = 0;
  /// --stats: print the runtime's step times and memory high-water mark.
  bool stats = false;
  /// --eval: evaluate once after the last step; --eval-every N: before the
  /// first step of a fresh run and after every step numbered a multiple of
  /// N (0: never); on --eval-batches batches of --eval-data or
  /// --eval-tokens (else of the training data).
  bool eval = false;
  int64_t evalEvery = 0;
  int64_t evalBatches = 1;
  std::string evalDataPath;
  std::string evalTokensPath;
  /// --save-every N: also save after every step numbered a multiple of N.
  int64_t saveEvery = 0;
  /// --log FILE: one JSON record per step and per evaluation, appended.
  std::string logPath;
  /// argv[0], for messages.
  std::string program;
  /// Whether the output is a terminal: each step rewrites one progress
  /// line (with throughput and time left) instead of printing its own.
  bool terminal = false;
};

/// What parseDriverArguments found.
enum class ParseResult { Run, Help, Error };

/// Parses `--params P --batch B --steps N [--save F]` (also `--flag=value`)
/// and `--help`. On Error, `error` holds the message.
ParseResult parseDriverArguments(int argc, const char *const *argv,
                                 DriverOptions &options, std::string &error);

/// The `--help` text.
const char *getDriverUsage();

/// The generated training step (docs/Pipeline.md, section 4), and the
/// evaluation step, which has the same signature.
using TrainStepFunction = void (*)(memopt_context *, void *const *, uint8_t *);

/// Exit codes of runDriver.
enum DriverExitCode {
  DriverSuccess = 0,
  /// Bad command line, bad or missing file, a tensor missing or mismatched.
  DriverInputError = 1,
  /// The runtime reported an error (arena allocation, a kernel in a step).
  DriverRuntimeError = 2
};

/// Runs `train` with the command line `argv` for the model described by
/// `modelJson` whose step is `step` and evaluation step `evalStep` (null:
/// none). Prints `step <i> loss <value>` lines (with ` skipped` when the
/// step counter did not advance, and ` scale <s>`, the loss scale the step
/// ran with, when the loss is scaled), `eval step <i> loss <value>` lines
/// and the help to `out`, one `train: ...` line per error to `err`. With
/// `terminal` (`out` is one), one progress line rewritten in place replaces
/// the step lines. Never throws; returns a DriverExitCode.
int runDriver(int argc, const char *const *argv, const char *modelJson,
              TrainStepFunction step, TrainStepFunction evalStep,
              std::ostream &out, std::ostream &err, bool terminal = false);

} // namespace memopt::driver

#endif // MEMOPT_DRIVER_DRIVER_H
