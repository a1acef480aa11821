//===- Driver.cpp - the `train` command line -----------------------------===//
//
// The driver's flags, their usage text and the entry point: parse the
// command line and the embedded model description, then hand both to a
// TrainRun (TrainRun.h).
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "TrainRun.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>

using namespace memopt::driver;

namespace {

bool parseStepCount(const std::string &text, int64_t &steps) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return false;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < 1)
    return false;
  steps = value;
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

const char *memopt::driver::getDriverUsage() {
  return "usage: train --params P.safetensors --steps N\n"
         "             (--batch B.safetensors | --data FILE|DIR |\n"
         "              --tokens T.bin [--token-dtype uint16|uint32] "
         "[--seed S])\n"
         "             [--save F.safetensors [--save-every K]] [--log L.jsonl]\n"
         "             [--eval | --eval-every K] [--eval-batches M]\n"
         "             [--eval-data FILE|DIR | --eval-tokens T.bin] [--stats]\n"
         "\n"
         "Trains the compiled model for N steps and prints `step <i> loss "
         "<value>`\n"
         "per step (docs/Training.md, \"Training on data\").\n"
         "\n"
         "  --params FILE    parameters and state by name; optimizer state\n"
         "                   (optimizer.*) and the position (driver.*) too "
         "when\n"
         "                   resuming: the run continues at the next step and "
         "batch\n"
         "  --batch FILE     one batch of inputs and labels, every step\n"
         "  --data FILE|DIR  a batch file, or a directory of them used in "
         "name\n"
         "                   order and cycled\n"
         "  --tokens FILE    a flat token file (uint16 by default), read "
         "memory-\n"
         "                   mapped: each row of a batch is a window at an "
         "offset\n"
         "                   drawn from --seed, the label one token later\n"
         "  --steps N        the number of steps to run (N >= 1)\n"
         "  --save FILE      write parameters, state, optimizer state and the\n"
         "                   position to FILE (atomically); --save-every K "
         "also\n"
         "                   after every K-th step\n"
         "  --log FILE       append one JSON record per step and evaluation\n"
         "  --eval           after the last step, run the evaluation step "
         "(dropout\n"
         "                   off, batch norm on its running statistics)\n"
         "  --eval-every K   evaluate before the first step and after every "
         "K-th\n"
         "  --eval-batches M the mean loss over M batches (default 1) of\n"
         "  --eval-data / --eval-tokens, else of the training data\n"
         "  --stats          print one `stats ...` line: the runtime, the "
         "mean\n"
         "                   and minimum step time (first step excluded), and\n"
         "                   the memory high-water mark (arena + workspace)\n"
         "  --help           print this message\n"
         "\n"
         "SIGINT and SIGTERM finish the step in flight, save (with --save) "
         "and\n"
         "exit with 130 and 143. On the host runtime, MEMOPT_NUM_THREADS (else\n"
         "OMP_NUM_THREADS, else the CPUs) threads run the kernels; the results\n"
         "do not depend on it.\n"
         "\n"
         "Exit codes: 0 success, 1 bad command line or input files, 2 a\n"
         "runtime error, 128 + the signal after a stop.\n";
}

ParseResult memopt::driver::parseDriverArguments(int argc,
                                                 const char *const *argv,
                                                 DriverOptions &options,
                                                 std::string &error) {
  options = DriverOptions();
  if (argc > 0 && argv[0])
    options.program = argv[0];
  std::string stepsText, evalEveryText, evalBatchesText, saveEveryText,
      seedText, tokenDtype, batchPath;
  struct Flag {
    const char *name;
    std::string *value;
    bool seen = false;
  } flags[] = {{"--params", &options.paramsPath},
               {"--batch", &batchPath},
               {"--data", &options.dataPath},
               {"--tokens", &options.tokensPath},
               {"--token-dtype", &tokenDtype},
               {"--seed", &seedText},
               {"--steps", &stepsText},
               {"--save", &options.savePath},
               {"--save-every", &saveEveryText},
               {"--log", &options.logPath},
               {"--eval-every", &evalEveryText},
               {"--eval-batches", &evalBatchesText},
               {"--eval-data", &options.evalDataPath},
               {"--eval-tokens", &options.evalTokensPath}};
  auto seen = [&](const char *name) {
    for (const Flag &flag : flags)
      if (std::string(flag.name) == name)
        return flag.seen;
    return false;
  };

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--help" || arg == "-h")
      return ParseResult::Help;
    if (arg == "--stats" || arg == "--eval") {
      (arg == "--stats" ? options.stats : options.eval) = true;
      continue;
    }
    Flag *flag = nullptr;
    std::string value;
    bool hasValue = false;
    for (Flag &candidate : flags) {
      std::string name = candidate.name;
      if (arg == name) {
        flag = &candidate;
        // `--params --batch B` lacks a value rather than naming a file.
        if (i + 1 < argc && argv[i + 1] &&
            std::string(argv[i + 1]).compare(0, 2, "--") != 0) {
          value = argv[++i];
          hasValue = true;
        }
      } else if (arg.compare(0, name.size() + 1, name + "=") == 0) {
        flag = &candidate;
        value = arg.substr(name.size() + 1);
        hasValue = true;
      }
      if (flag)
        break;
    }
    if (!flag) {
      error = arg.size() > 1 && arg[0] == '-'
                  ? "unknown option '" + arg + "'"
                  : "unexpected argument '" + arg + "'";
      return ParseResult::Error;
    }
    if (!hasValue || value.empty()) {
      error = std::string(flag->name) + " needs a value";
      return ParseResult::Error;
    }
    if (flag->seen) {
      error = std::string(flag->name) + " is given twice";
      return ParseResult::Error;
    }
    flag->seen = true;
    *flag->value = value;
  }
  for (const char *required : {"--params", "--steps"})
    if (!seen(required)) {
      error = std::string("missing ") + required;
      return ParseResult::Error;
    }
  int sources = seen("--batch") + seen("--data") + seen("--tokens");
  if (sources != 1) {
    error = sources ? "--batch, --data and --tokens exclude each other"
                    : "missing --batch, --data or --tokens";
    return ParseResult::Error;
  }
  if (seen("--batch"))
    options.dataPath = batchPath;
  if (!parseStepCount(stepsText, options.steps)) {
    error = "--steps must be an integer >= 1, got '" + stepsText + "'";
    return ParseResult::Error;
  }
  struct Count {
    const char *flag;
    std::string &text;
    int64_t &value;
  } counts[] = {{"--eval-every", evalEveryText, options.evalEvery},
                {"--eval-batches", evalBatchesText, options.evalBatches},
                {"--save-every", saveEveryText, options.saveEvery}};
  for (const Count &count : counts)
    if (seen(count.flag) && !parseStepCount(count.text, count.value)) {
      error = std::string(count.flag) + " must be an integer >= 1, got '" +
              count.text + "'";
      return ParseResult::Error;
    }
  if (seen("--token-dtype")) {
    if (!seen("--tokens") && !seen("--eval-tokens")) {
      error = "--token-dtype applies to --tokens and --eval-tokens";
      return ParseResult::Error;
    }
    if (tokenDtype != "uint16" && tokenDtype != "uint32") {
      error = "--token-dtype must be uint16 or uint32, got '" + tokenDtype +
              "'";
      return ParseResult::Error;
    }
    options.tokenBytes = tokenDtype == "uint16" ? 2 : 4;
  }
  if (seen("--seed")) {
    int64_t value = 0;
    if (!parseStepCount(seedText, value) && seedText != "0") {
      error = "--seed must be a non-negative integer, got '" + seedText + "'";
      return ParseResult::Error;
    }
    options.seed = static_cast<uint64_t>(value);
    options.seedGiven = true;
  }
  bool evaluates = options.eval || options.evalEvery > 0;
  for (const char *flag : {"--eval-data", "--eval-tokens", "--eval-batches"})
    if (seen(flag) && !evaluates) {
      error = std::string(flag) + " applies to --eval or --eval-every";
      return ParseResult::Error;
    }
  if (seen("--eval-data") && seen("--eval-tokens")) {
    error = "--eval-data and --eval-tokens exclude each other";
    return ParseResult::Error;
  }
  if (seen("--save-every") && !seen("--save")) {
    error = "--save-every needs --save FILE";
    return ParseResult::Error;
  }
  return ParseResult::Run;
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

int memopt::driver::runDriver(int argc, const char *const *argv,
                              const char *modelJson, TrainStepFunction step,
                              TrainStepFunction evalStep, std::ostream &out,
                              std::ostream &err, bool terminal) {
  try {
    DriverOptions options;
    std::string error;
    switch (parseDriverArguments(argc, argv, options, error)) {
    case ParseResult::Help:
      out << getDriverUsage();
      out.flush();
      return DriverSuccess;
    case ParseResult::Error:
      err << "train: " << error << " (see --help)\n";
      err.flush();
      return DriverInputError;
    case ParseResult::Run:
      break;
    }
    options.terminal = terminal;
    ModelDescription model;
    if (!modelJson || !parseModelDescription(modelJson, model, error)) {
      err << "train: invalid embedded model description: "
          << (modelJson ? error : "none") << "\n";
      err.flush();
      return DriverInputError;
    }
    return TrainRun(options, model, step, evalStep, out, err).run();
  } catch (const std::bad_alloc &) {
    err << "train: out of host memory\n";
  } catch (const std::exception &e) {
    err << "train: internal error: " << e.what() << "\n";
  }
  err.flush();
  return DriverRuntimeError;
}