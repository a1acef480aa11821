//===- TrainRun.h - one run of a compiled training step ---------*- C++ -*-===//
//
// The state of a run: the parameters file, the arena holding every argument
// of the training and evaluation steps, the runtime context, and where the
// run is (the steps done, the windows' seed). `train`'s command line drives it
// through run() (Driver.cpp); the C API of program.h drives it batch by batch
// from the caller's buffers (Program.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DRIVER_TRAINRUN_H
#define MEMOPT_DRIVER_TRAINRUN_H

#include "Data.h"
#include "Driver.h"

#include "memopt/runtime/Collectives.h"

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

namespace memopt::driver {

/// Frees a context when the run ends, whichever way.
struct ContextDeleter {
  void operator()(memopt_context *ctx) const { memopt_context_destroy(ctx); }
};
using ContextPtr = std::unique_ptr<memopt_context, ContextDeleter>;

/// What one training step did.
struct StepResult {
  /// The step's number (1 for a fresh run's first).
  uint64_t number = 0;
  float loss = 0;
  /// Loss scaling skipped the update (an overflow).
  bool skipped = false;
  /// The loss scale the step ran with (1 without scaling).
  float scale = 1;
  /// The learning rate the step ran with.
  double lr = 0;
  /// The global gradient norm (0 without clipping).
  float gradNorm = 0;
  double seconds = 0;
};

/// One run of a compiled training step for a parsed command line and model.
/// Every method that returns int returns a DriverExitCode, after printing
/// `train: <message>` to `err` (kept in getError()) on failure.
class TrainRun {
public:
  TrainRun(const DriverOptions &options, const ModelDescription &model,
           TrainStepFunction step, TrainStepFunction evalStep,
           std::ostream &out, std::ostream &err)
      : options(options), model(model), step(step), evalStep(evalStep),
        out(out), err(err) {}

  /// `train`'s run: open, the steps with their evaluations and saves, and
  /// the final save.
  int run();

  /// Starts the collectives, checks and binds the parameters file and the
  /// data (none when the options name none: the caller then passes every
  /// batch), lays out and fills the arena.
  int open();
  /// The arguments of the training step that a batch fills, in the order
  /// the batch pointers of runStep and evaluateBatch follow.
  const std::vector<size_t> &getBatchArguments() const {
    return batchArguments;
  }
  /// Points the step's batch arguments at `batch` (host memory, one
  /// pointer per getBatchArguments() entry): read in place when the runtime
  /// addresses host memory, else copied in. Null: the arena's own buffers,
  /// which loadBatch fills.
  void bindBatch(void *const *batch);
  /// Runs the next step on the bound batch. `lr`: the learning rate to run
  /// with instead of the schedule's.
  int runStep(std::optional<double> lr, StepResult &result);
  /// Whether the program can evaluate (it has an evaluation step).
  bool canEvaluate() const { return model.eval && evalStep; }
  /// Runs the evaluation step on one batch, given as for bindBatch (in the
  /// training step's batch order), into `loss`.
  int evaluateBatch(void *const *batch, float &loss);
  /// Writes the weights, state and optimizer state, and the run's position,
  /// to `path` (rank 0; every rank gathers its shards), with `metadata`.
  int save(const std::string &path,
           const std::map<std::string, std::string> &metadata = {
               {"format", "pt"}});
  /// Copies training-step argument `i` out of, or into, the arena (whole:
  /// a ZeRO shard is gathered; writing one is not supported).
  int readWhole(size_t i, std::vector<unsigned char> &bytes);
  int write(size_t i, const void *bytes, uint64_t size);
  /// The last failure's message.
  const std::string &getError() const { return lastError; }

private:
  /// Prints `train: <message>` and returns `code`. In a data-parallel run
  /// the message names the rank, and every rank ends at once: the others
  /// would otherwise wait for this one in the next collective.
  int fail(int code, const std::string &message);
  /// Starts the collectives of a data-parallel model and checks the world.
  int startCollectives();
  /// Whether this process prints the losses and writes --save: the only
  /// rank, or rank 0 (every rank holds the same parameters).
  bool isFirstRank() const { return collectives.rank == 0; }
  /// The runtime's error message, or a generic one.
  std::string runtimeMessage() const;
  /// Finds and checks the file tensor of every argument read from a file.
  int bindTensors();
  /// Whether the run evaluates: the command line asks for evaluations, or
  /// the caller passes the batches and the program has an evaluation step.
  bool evaluates() const {
    return options.eval || options.evalEvery > 0 ||
           (callerBatches() && canEvaluate());
  }
  /// Whether the caller passes the batches (no data on the command line).
  bool callerBatches() const {
    return options.dataPath.empty() && options.tokensPath.empty();
  }
  /// Opens a batch source for the arguments `indices` of `arguments`:
  /// --tokens (or --eval-tokens) windows, else the files of `path`, and
  /// orders `indices` as the source's tensors. `whole` scales each batch
  /// dimension to every rank's share.
  int openData(const std::vector<ModelArgument> &arguments,
               std::vector<size_t> &indices, const std::string &path,
               const std::string &tokens, uint64_t tokenSeed, bool whole,
               std::unique_ptr<BatchSource> &source);
  /// Copies batch `k` of the training data into the step's inputs and
  /// labels (this rank's share).
  int loadBatch(uint64_t k);
  /// Binds the evaluation step's arguments: its batches from --eval-data or
  /// --eval-tokens (else the training data's), everything else to the
  /// training step's argument of the same name.
  int bindEval();
  /// Points the evaluation step's arguments at their buffers, gathering
  /// the ZeRO shards it reads whole.
  int prepareEval();
  /// Runs the evaluation step on --eval-batches batches after step `done`
  /// and prints their mean loss.
  int evaluate(uint64_t done);
  /// Runs the evaluation step on the batch its arguments hold, into `loss`;
  /// `when` completes the error message (" after step 3").
  int runEvalStep(float &loss, const std::string &when);
  /// Points `slot`, an argument in the arena, at the caller's `data` (host
  /// memory), or copies the `bytes` in (device memory).
  void bindCallerTensor(void *&slot, void *data, uint64_t bytes);
  /// Appends one record to --log.
  void logRecord(const std::string &json);
  /// Prints step `result`'s line, or the progress line on a terminal, and
  /// its --log record.
  void report(const StepResult &result, int64_t i);
  /// Seconds since the run started.
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         started)
        .count();
  }
  /// Lays out the arena, allocates it and copies the tensors in.
  int loadArena();
  /// Where training-step argument `i` lives: in the arena, or in the host
  /// arena.
  unsigned char *address(size_t i) const {
    return (model.arguments[i].host ? hostBase : base) + offsets[i];
  }
  /// Copies `bytes` bytes from host memory `src` to `at` bytes into
  /// argument `i`, or out of it to `dst`.
  void copyIn(size_t i, uint64_t at, const void *src, uint64_t bytes);
  void copyOut(size_t i, uint64_t at, void *dst, uint64_t bytes);
  /// Runs the steps, printing the losses.
  int runSteps();
  /// Prints the --stats line.
  int printStats(const std::vector<double> &seconds);

  const DriverOptions &options;
  const ModelDescription &model;
  TrainStepFunction step;
  TrainStepFunction evalStep;
  std::ostream &out;
  std::ostream &err;
  std::string lastError;

  SafetensorsReader params;
  /// The training batches, and the step arguments they fill, in the
  /// source's tensor order.
  std::unique_ptr<BatchSource> trainData;
  std::vector<size_t> batchArguments;
  /// Steps run before this run (the checkpoint's driver.steps): the next
  /// step is stepsDone + 1 and reads batch stepsDone.
  uint64_t stepsDone = 0;
  /// The token windows' seed (--seed, else the checkpoint's driver.seed).
  uint64_t seed = 0;
  /// --log's stream; the run's start, for the log's elapsed times.
  std::ofstream log;
  std::chrono::steady_clock::time_point started;
  /// elapsed() when the steps began, for the progress line's rates.
  double loopStarted = 0;
  /// Samples and tokens per step, for the throughput: the whole batch of
  /// the first input (every rank's), and B x T when it is an integer [B, T].
  uint64_t samplesPerStep = 0, tokensPerStep = 0;
  /// Per argument: the --params entry it is loaded from, or null (zeroed,
  /// or a batch argument, which loadBatch fills).
  std::vector<const SafetensorsEntry *> sourceEntries;
  std::vector<uint64_t> offsets;
  /// The training step's argument pointers.
  std::vector<void *> stepArgs;
  uint64_t scratchOffset = 0;
  /// The number of the last step run (stepsDone until one has).
  uint64_t stepsRun = 0;
  ContextPtr ctx;
  unsigned char *base = nullptr;
  /// The host arena (optimizer offload): the arguments in host memory,
  /// then the step's host scratch at hostScratchOffset. Null without.
  unsigned char *hostBase = nullptr;
  uint64_t hostScratchOffset = 0;
  /// Whether the runtime's memory is host memory (the batch is then read
  /// where the caller holds it).
  bool hostMemory = false;
  /// Data parallelism (model.dataParallel > 1): the ranks, from MPI.
  bool parallel = false;
  memopt_collectives collectives = memopt::runtime::kSingleRank;

  /// How the evaluation step reads each of its arguments.
  enum class EvalSource {
    /// Its own buffer, loaded from the evaluation batch (inputs, labels)
    /// or written by the step (the loss).
    Own,
    /// The training step's argument `evalTrainIndex`.
    Shared,
    /// Its own buffer, filled before each evaluation with the training
    /// step's argument `evalTrainIndex` gathered whole (a ZeRO shard) or
    /// copied from host memory (an offloaded master).
    Gathered
  };
  std::unique_ptr<BatchSource> evalData;
  /// The evaluation step's batch arguments in its source's order, and in
  /// the training step's batch order (for evaluateBatch).
  std::vector<size_t> evalBatchArguments, evalBatchByTrainOrder;
  std::vector<EvalSource> evalSources;
  std::vector<size_t> evalTrainIndex;
  std::vector<uint64_t> evalOffsets;
  std::vector<void *> evalArgs;
  size_t evalLossIndex = 0;
};

} // namespace memopt::driver

#endif // MEMOPT_DRIVER_TRAINRUN_H
