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

#include "ModelDescription.h"
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
/// evaluation step, which has the same signature: the context, the
/// arguments, the scratch arena and the host arena's scratch (optimizer
/// offload; null without).
using TrainStepFunction = void (*)(memopt_context *, void *const *, uint8_t *,
                                   uint8_t *);

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
