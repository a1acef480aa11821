//===- TrainRun.cpp - a training run: arena, data, steps, checkpoints ----===//
//
// Everything is checked before the runtime is touched: the command line, the
// embedded model description, both safetensors headers, and every argument
// tensor's presence, dtype and shape. Only then one arena is allocated:
// every argument tensor at a 256-byte aligned offset, in argument order,
// followed by the scratch region the generated step addresses as
// `scratch + memopt.offset`. One allocation keeps the runtime's memory
// high-water mark equal to what the planner promised plus the model state.
//
// The runtime's step counter (which dropout reads) starts at the loaded
// `optimizer.step` when resuming, so that N steps followed by M resumed ones
// draw the same masks as N + M steps in one run.
//
// `train`'s command line (Driver.cpp) drives a run through run(), the C API
// (Program.cpp) step by step with the caller's batches.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "TrainRun.h"

#include "memopt/runtime/Float16.h"
#include "memopt/runtime/Nf4Math.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>

using namespace memopt::driver;

// Defined by the MPI part of the driver (Mpi.cpp), which only a
// data-parallel program links: without it these are null.
extern "C" __attribute__((weak)) int
memopt_driver_start_collectives(memopt_collectives *, char *, size_t);
extern "C" __attribute__((weak)) void memopt_driver_abort_collectives(int);
extern "C" __attribute__((weak)) void memopt_driver_stop_collectives(void);

namespace {

constexpr uint64_t kAlignment = 256;

/// XORed into the seed for the evaluation's token windows, a stream of
/// their own ("eval" in ASCII).
constexpr uint64_t kEvalStream = 0x6576616c;

/// The signal (SIGINT, SIGTERM) that asked the run to stop, or 0.
volatile std::sig_atomic_t stopSignal = 0;
extern "C" void requestStop(int signal) { stopSignal = signal; }

/// Rounds the f32 values in `bytes` to `dtype` (f16 or bf16) in place, as
/// `memopt.cast` does: the low-precision copy of a master. An f32 copy is
/// the master's bits.
void castToCopy(std::vector<unsigned char> &bytes, TensorDtype dtype) {
  if (dtype == TensorDtype::F32)
    return;
  size_t count = bytes.size() / sizeof(float);
  for (size_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, bytes.data() + i * sizeof(float), sizeof(float));
    uint16_t bits = dtype == TensorDtype::BF16
                        ? memopt::runtime::floatToBFloat16Bits(value)
                        : memopt::runtime::floatToHalfBits(value);
    std::memcpy(bytes.data() + i * sizeof(bits), &bits, sizeof(bits));
  }
  bytes.resize(count * sizeof(uint16_t));
}

/// Whether `argument` is a frozen weight stored in another form than its
/// checkpoint tensor `entry`: 16 bits from f32 (rounded once), or NF4 from
/// any float tensor (quantized); converted at load, saved as it was loaded.
bool isConvertedAtLoad(const ModelArgument &argument,
                       const SafetensorsEntry &entry) {
  if (argument.role != Role::Frozen)
    return false;
  if (argument.nf4Of)
    return entry.dtype == TensorDtype::F32 ||
           entry.dtype == TensorDtype::BF16 ||
           entry.dtype == TensorDtype::F16;
  return entry.dtype == TensorDtype::F32 &&
         (argument.dtype == TensorDtype::BF16 ||
          argument.dtype == TensorDtype::F16);
}

/// The NF4 bytes of the float tensor `bytes` of `dtype`, in place; false
/// (and `bytes` unchanged) when a value is not finite, which NF4 cannot
/// store.
bool quantizeToNf4(std::vector<unsigned char> &bytes, TensorDtype dtype,
                   uint64_t packedBytes) {
  size_t size = dtype == TensorDtype::F32 ? sizeof(float) : sizeof(uint16_t);
  size_t count = bytes.size() / size;
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) {
    if (dtype == TensorDtype::F32) {
      std::memcpy(&values[i], bytes.data() + i * size, size);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + i * size, size);
    values[i] = dtype == TensorDtype::BF16
                    ? memopt::runtime::bfloat16BitsToFloat(bits)
                    : memopt::runtime::halfBitsToFloat(bits);
  }
  for (float value : values)
    if (!std::isfinite(value))
      return false;
  bytes.assign(packedBytes, 0);
  memopt::runtime::nf4Quantize(values.data(), static_cast<int64_t>(count),
                               bytes.data());
  return true;
}

} // namespace


int TrainRun::fail(int code, const std::string &message) {
  lastError = message;
  err << "train: "
      << (parallel ? "rank " + std::to_string(collectives.rank) + ": "
                   : std::string())
      << message << "\n";
  err.flush();
  if (parallel)
    memopt_driver_abort_collectives(code);
  return code;
}

std::string TrainRun::runtimeMessage() const {
  const char *message = memopt_get_error_message(ctx.get());
  return message && *message ? message : "unknown runtime error";
}

int TrainRun::startCollectives() {
  if (model.dataParallel == 1)
    return DriverSuccess;
  if (!memopt_driver_start_collectives)
    return fail(DriverInputError,
                "the model was compiled for " +
                    std::to_string(model.dataParallel) +
                    " ranks but the program has no MPI part");
  char error[256] = "";
  if (memopt_driver_start_collectives(&collectives, error, sizeof(error)))
    return fail(DriverRuntimeError,
                std::string("cannot start MPI: ") + error);
  parallel = true;
  if (collectives.size != model.dataParallel)
    return fail(DriverInputError,
                "launched with " + std::to_string(collectives.size) +
                    " rank(s), but the model was compiled for " +
                    std::to_string(model.dataParallel) +
                    " (memopt-compile --data-parallel): run `mpirun -np " +
                    std::to_string(model.dataParallel) + " " +
                    (options.program.empty() ? "train" : options.program) +
                    " ...`");
  return DriverSuccess;
}

int TrainRun::bindTensors() {
  std::string error;
  if (!params.open(options.paramsPath, error))
    return fail(DriverInputError,
                "cannot read '" + options.paramsPath + "': " + error);

  // Optimizer state is all or nothing: a checkpoint that has some of it but
  // not all is not a checkpoint of this model.
  const ModelArgument *firstOptim = nullptr;
  for (const ModelArgument &argument : model.arguments) {
    if (argument.role == Role::Optim && params.lookup(argument.name)) {
      firstOptim = &argument;
      break;
    }
  }

  size_t numArguments = model.arguments.size();
  sourceEntries.assign(numArguments, nullptr);
  const std::string *path = &options.paramsPath;
  for (size_t i = 0; i < numArguments; ++i) {
    const ModelArgument &argument = model.arguments[i];
    if (argument.role == Role::Input || argument.role == Role::Label)
      batchArguments.push_back(i);
    // A copy is made from its master's tensor when the master is loaded.
    if (!isCheckpointed(argument.role) ||
        (argument.role == Role::Optim && !firstOptim))
      continue;
    const SafetensorsEntry *entry = params.lookup(argument.name);
    if (!entry) {
      if (argument.role == Role::Optim)
        return fail(DriverInputError, "tensor '" + argument.name +
                                          "' (optim) not found in '" + *path +
                                          "', which has optimizer state ('" +
                                          firstOptim->name + "')");
      return fail(DriverInputError, "tensor '" + argument.name + "' (" +
                                        getRoleName(argument.role) +
                                        ") not found in '" + *path + "'");
    }
    if (entry->dtype != argument.dtype && !isConvertedAtLoad(argument, *entry))
      return fail(DriverInputError,
                  "tensor '" + argument.name + "' in '" + *path +
                      "' has dtype " + getSafetensorsDtypeName(entry->dtype) +
                      ", expected " + getSafetensorsDtypeName(argument.dtype));
    // A ZeRO shard's tensor is whole.
    std::vector<int64_t> expected =
        argument.nf4Of.value_or(argument.shardOf.value_or(argument.shape));
    if (entry->shape != expected)
      return fail(DriverInputError,
                  "tensor '" + argument.name + "' in '" + *path +
                      "' has shape " + formatShape(entry->shape) +
                      ", expected " + formatShape(expected));
    sourceEntries[i] = entry;
  }

  // Where a resumed run is: the steps run, and the windows' seed.
  auto readScalar = [&](const char *name, uint64_t &value) -> bool {
    const SafetensorsEntry *entry = params.lookup(name);
    if (!entry)
      return true;
    int64_t v = -1;
    if (entry->dtype != TensorDtype::I64 || !entry->shape.empty() ||
        !params.readData(*entry, &v, error) || v < 0) {
      error = "'" + std::string(name) + "' is not a non-negative i64 scalar";
      return false;
    }
    value = static_cast<uint64_t>(v);
    return true;
  };
  seed = options.seed;
  uint64_t savedSeed = seed;
  if (!readScalar("driver.steps", stepsDone) ||
      !readScalar("driver.seed", savedSeed))
    return fail(DriverInputError,
                "cannot resume from '" + options.paramsPath + "': " + error);
  if (!options.seedGiven)
    seed = savedSeed;
  if (!callerBatches())
    if (int code = openData(model.arguments, batchArguments, options.dataPath,
                            options.tokensPath, seed, true, trainData))
      return code;
  return evaluates() ? bindEval() : DriverSuccess;
}

int TrainRun::openData(const std::vector<ModelArgument> &arguments,
                       std::vector<size_t> &indices,
                       const std::string &path, const std::string &tokens,
                       uint64_t tokenSeed, bool whole,
                       std::unique_ptr<BatchSource> &source) {
  std::vector<BatchTensor> tensors;
  for (size_t i : indices) {
    const ModelArgument &argument = arguments[i];
    BatchTensor tensor{argument.name, argument.dtype, argument.shape,
                       argument.bound, argument.ignoreIndex};
    if (whole && parallel && argument.batchDim)
      tensor.shape[*argument.batchDim] *= model.dataParallel;
    tensors.push_back(std::move(tensor));
  }
  std::string error;
  if (tokens.empty()) {
    source = openBatchFiles(path, tensors, error);
    if (!source)
      return fail(DriverInputError, error);
    return DriverSuccess;
  }
  // One integer input and one integer label of one shape [B, T]; the
  // source fills [input, label], and the arguments are ordered alike.
  size_t in = tensors.size() == 2 && arguments[indices[1]].role == Role::Input;
  const BatchTensor *input = tensors.size() == 2 ? &tensors[in] : nullptr;
  const BatchTensor *label = tensors.size() == 2 ? &tensors[1 - in] : nullptr;
  if (!input || arguments[indices[in]].role != Role::Input ||
      arguments[indices[1 - in]].role != Role::Label ||
      input->shape != label->shape || input->shape.size() != 2 ||
      input->dtype != label->dtype ||
      (input->dtype != TensorDtype::I64 && input->dtype != TensorDtype::I32))
    return fail(DriverInputError,
                "--tokens needs a model with one integer input and one "
                "integer label of one shape [B, T]");
  source = openTokenFile(tokens, options.tokenBytes, *input, *label,
                         tokenSeed, error);
  indices = {indices[in], indices[1 - in]};
  if (!source)
    return fail(DriverInputError, error);
  return DriverSuccess;
}

int TrainRun::loadBatch(uint64_t k) {
  // One batch file: loaded once.
  if (trainData->getNumBatches() == 1 && k != stepsDone)
    return DriverSuccess;
  std::vector<std::vector<unsigned char>> tensors;
  std::string error;
  if (!trainData->read(k, tensors, error))
    return fail(DriverInputError, error);
  for (size_t j = 0; j < batchArguments.size(); ++j) {
    const ModelArgument &argument = model.arguments[batchArguments[j]];
    // Data parallelism: the rank's share (contiguous: the dimensions
    // before the batch's have extent 1).
    uint64_t from = parallel && argument.batchDim
                        ? static_cast<uint64_t>(collectives.rank) *
                              argument.byteSize
                        : 0;
    if (argument.byteSize)
      memopt_copy_from_host(ctx.get(), base + offsets[batchArguments[j]],
                            tensors[j].data() + from, argument.byteSize);
  }
  return DriverSuccess;
}

void TrainRun::logRecord(const std::string &json) {
  if (!log.is_open() || !isFirstRank())
    return;
  log << json << "\n";
  log.flush();
}

int TrainRun::bindEval() {
  if (!model.eval || !evalStep)
    return fail(DriverInputError,
                "--eval and --eval-every need the evaluation step, which "
                "this program was built without");
  const std::vector<ModelArgument> &arguments = model.eval->arguments;
  evalSources.assign(arguments.size(), EvalSource::Own);
  evalTrainIndex.assign(arguments.size(), 0);
  evalBatchArguments.clear();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ModelArgument &argument = arguments[i];
    if (argument.role == Role::Loss)
      continue;
    if (argument.role == Role::Input || argument.role == Role::Label) {
      evalBatchArguments.push_back(i);
      continue;
    }
    auto same = std::find_if(
        model.arguments.begin(), model.arguments.end(),
        [&](const ModelArgument &train) {
          return train.name == argument.name && train.role != Role::ParamCopy &&
                 train.dtype == argument.dtype &&
                 train.shardOf.value_or(train.shape) == argument.shape;
        });
    if (same == model.arguments.end())
      return fail(DriverInputError,
                  "the evaluation step's argument '" + argument.name +
                      "' is no training-step argument of its dtype and "
                      "shape");
    evalTrainIndex[i] = static_cast<size_t>(same - model.arguments.begin());
    evalSources[i] =
        same->shardOf || same->host ? EvalSource::Gathered : EvalSource::Shared;
  }
  // The caller's batches come in the training step's order.
  evalBatchByTrainOrder.clear();
  for (size_t trainIndex : batchArguments) {
    const std::string &name = model.arguments[trainIndex].name;
    auto same = std::find_if(
        evalBatchArguments.begin(), evalBatchArguments.end(),
        [&](size_t i) { return arguments[i].name == name; });
    if (same == evalBatchArguments.end())
      return fail(DriverInputError, "the evaluation step reads no batch "
                                    "tensor '" +
                                        name + "'");
    evalBatchByTrainOrder.push_back(*same);
  }
  if (callerBatches())
    return DriverSuccess;
  // Without --eval-data or --eval-tokens the evaluation reads the training
  // data: its first batches, or token windows of a stream of their own.
  bool own = !options.evalDataPath.empty() || !options.evalTokensPath.empty();
  return openData(arguments, evalBatchArguments,
                  own ? options.evalDataPath : options.dataPath,
                  own ? options.evalTokensPath : options.tokensPath,
                  seed ^ kEvalStream, false, evalData);
}

int TrainRun::prepareEval() {
  const std::vector<ModelArgument> &arguments = model.eval->arguments;
  evalArgs.assign(arguments.size(), nullptr);
  std::vector<unsigned char> bytes;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (evalSources[i] == EvalSource::Shared) {
      evalArgs[i] = base + offsets[evalTrainIndex[i]];
      continue;
    }
    evalArgs[i] = base + evalOffsets[i];
    if (arguments[i].role == Role::Loss)
      evalLossIndex = i;
    if (evalSources[i] == EvalSource::Gathered) {
      if (int code = readWhole(evalTrainIndex[i], bytes))
        return code;
      memopt_copy_from_host(ctx.get(), evalArgs[i], bytes.data(),
                            bytes.size());
    }
  }
  return DriverSuccess;
}

int TrainRun::evaluateBatch(void *const *batch, float &loss) {
  if (!canEvaluate())
    return fail(DriverInputError,
                "this program was built without the evaluation step");
  if (int code = prepareEval())
    return code;
  for (size_t t = 0; t < evalBatchByTrainOrder.size(); ++t) {
    size_t i = evalBatchByTrainOrder[t];
    bindCallerTensor(evalArgs[i], batch[t], model.eval->arguments[i].byteSize);
  }
  return runEvalStep(loss, "");
}

void TrainRun::bindCallerTensor(void *&slot, void *data, uint64_t bytes) {
  if (hostMemory)
    slot = data;
  else
    memopt_copy_from_host(ctx.get(), slot, data, bytes);
}

int TrainRun::runEvalStep(float &loss, const std::string &when) {
  evalStep(ctx.get(), evalArgs.data(), base + scratchOffset, nullptr);
  memopt_copy_to_host(ctx.get(), &loss, evalArgs[evalLossIndex], sizeof(loss));
  if (memopt_get_status(ctx.get()) != MEMOPT_OK)
    return fail(DriverRuntimeError, "runtime error during the evaluation" +
                                        when + ": " + runtimeMessage());
  return DriverSuccess;
}

int TrainRun::evaluate(uint64_t done) {
  if (int code = prepareEval())
    return code;
  double sum = 0;
  std::vector<std::vector<unsigned char>> tensors;
  std::string error;
  for (int64_t j = 0; j < options.evalBatches; ++j) {
    if (!evalData->read(static_cast<uint64_t>(j), tensors, error))
      return fail(DriverInputError, error);
    for (size_t t = 0; t < evalBatchArguments.size(); ++t)
      memopt_copy_from_host(ctx.get(), evalArgs[evalBatchArguments[t]],
                            tensors[t].data(), tensors[t].size());
    float loss = 0;
    if (int code = runEvalStep(loss, " after step " + std::to_string(done)))
      return code;
    sum += loss;
  }
  double mean = sum / static_cast<double>(options.evalBatches);
  if (isFirstRank()) {
    char line[96];
    std::snprintf(line, sizeof(line), "eval step %llu loss %.9g\n",
                  static_cast<unsigned long long>(done), mean);
    // On a terminal, over the progress line.
    out << (options.terminal ? "\r\x1b[K" : "") << line;
    out.flush();
    char record[160];
    std::snprintf(record, sizeof(record),
                  "{\"step\": %llu, \"eval_loss\": %.9g, \"eval_batches\": "
                  "%lld, \"elapsed_s\": %.3f}",
                  static_cast<unsigned long long>(done), mean,
                  static_cast<long long>(options.evalBatches), elapsed());
    logRecord(record);
  }
  return DriverSuccess;
}

int TrainRun::loadArena() {
  // The arguments in host memory (optimizer offload) go to the host arena.
  uint64_t total = 0, hostTotal = 0;
  for (const ModelArgument &argument : model.arguments) {
    uint64_t &end = argument.host ? hostTotal : total;
    offsets.push_back(end);
    uint64_t padded =
        (argument.byteSize + kAlignment - 1) / kAlignment * kAlignment;
    if (padded > kMaxArenaBytes - end)
      return fail(DriverInputError, "the model's tensors exceed 2^62 bytes");
    end += padded;
  }
  hostScratchOffset = hostTotal;
  if (model.hostArenaBytes > kMaxArenaBytes - hostTotal)
    return fail(DriverInputError, "the model's host arena exceeds 2^62 bytes");
  hostTotal += model.hostArenaBytes;
  // The evaluation step's own buffers; its arena is the training step's.
  uint64_t arenaBytes = model.arenaBytes;
  if (evaluates()) {
    const std::vector<ModelArgument> &arguments = model.eval->arguments;
    evalOffsets.assign(arguments.size(), 0);
    for (size_t i = 0; i < arguments.size(); ++i) {
      if (evalSources[i] == EvalSource::Shared)
        continue;
      evalOffsets[i] = total;
      uint64_t padded =
          (arguments[i].byteSize + kAlignment - 1) / kAlignment * kAlignment;
      if (padded > kMaxArenaBytes - total)
        return fail(DriverInputError, "the model's tensors exceed 2^62 bytes");
      total += padded;
    }
    arenaBytes = std::max(arenaBytes, model.eval->arenaBytes);
  }
  scratchOffset = total;
  if (arenaBytes > kMaxArenaBytes - total)
    return fail(DriverInputError, "the model's arena exceeds 2^62 bytes");
  total += arenaBytes;

  ctx.reset(memopt_context_create());
  if (!ctx) {
    const char *reason = memopt_context_create_error();
    return fail(DriverRuntimeError,
                std::string("cannot create the runtime context: ") +
                    (reason && *reason ? reason : "unknown reason"));
  }
  memopt_set_collectives(ctx.get(), parallel ? &collectives : nullptr);
  // A zero-byte arena would have no base for the (empty) scratch pointer.
  base = static_cast<unsigned char *>(
      memopt_arena_allocate(ctx.get(), total ? total : kAlignment));
  if (!base)
    return fail(DriverRuntimeError, "cannot allocate the arena of " +
                                        std::to_string(total) +
                                        " bytes: " + runtimeMessage());
  if (hostTotal) {
    hostBase = static_cast<unsigned char *>(
        memopt_host_arena_allocate(ctx.get(), hostTotal));
    if (!hostBase)
      return fail(DriverRuntimeError, "cannot allocate the host arena of " +
                                          std::to_string(hostTotal) +
                                          " bytes: " + runtimeMessage());
  }

  // The arena is zero-filled: arguments without a source (fresh optimizer
  // state, the loss) need nothing more.
  std::vector<unsigned char> staging;
  std::string error;
  char errorText[256] = "";
  // The runtime step the first training step runs at.
  uint64_t firstStep = 0;
  for (size_t i = 0; i < model.arguments.size(); ++i) {
    const SafetensorsEntry *entry = sourceEntries[i];
    if (!entry || entry->byteSize() == 0)
      continue;
    staging.resize(entry->byteSize());
    if (!params.readData(*entry, staging.data(), error))
      return fail(DriverInputError,
                  "cannot read '" + options.paramsPath + "': " + error);
    const ModelArgument &argument = model.arguments[i];
    // Data parallelism: rank 0's tensors, and the rank's shard of them.
    uint64_t from = 0, bytes = argument.byteSize;
    if (parallel && argument.shardOf)
      from = static_cast<uint64_t>(collectives.rank) * argument.byteSize;
    // The last shards hold the padding past the tensor's end: zeros.
    if (argument.shardOf)
      bytes = std::min(bytes, staging.size() - std::min<uint64_t>(
                                                   from, staging.size()));
    if (parallel &&
        collectives.broadcast(collectives.state, staging.data(),
                              static_cast<int64_t>(staging.size()), 0,
                              errorText, sizeof(errorText)))
      return fail(DriverRuntimeError, "cannot broadcast '" + argument.name +
                                          "' from rank 0: " + errorText);
    if (argument.nf4Of) {
      if (!quantizeToNf4(staging, entry->dtype, argument.byteSize))
        return fail(DriverInputError,
                    "tensor '" + argument.name + "' in '" +
                        options.paramsPath +
                        "' has a value that is not finite: a frozen weight "
                        "stored in NF4 (--frozen-weights=nf4) must be finite");
    } else if (isConvertedAtLoad(argument, *entry)) {
      castToCopy(staging, argument.dtype);
    }
    if (bytes)
      copyIn(i, 0, staging.data() + from, bytes);
    // The copy of a master the device computes with, from the same
    // (broadcast) tensor: whole (ZeRO), or in the master's own layout
    // (offload: the rank's shard of it with ZeRO-3).
    if (argument.copyIndex) {
      const ModelArgument &copy = model.arguments[*argument.copyIndex];
      castToCopy(staging, copy.dtype);
      uint64_t copyFrom = 0, copyBytes = copy.byteSize;
      if (copy.shardOf) {
        copyFrom = std::min<uint64_t>(static_cast<uint64_t>(collectives.rank) *
                                          copy.byteSize,
                                      staging.size());
        copyBytes = std::min(copyBytes, staging.size() - copyFrom);
      }
      if (copyBytes)
        copyIn(*argument.copyIndex, 0, staging.data() + copyFrom, copyBytes);
    }
    if (argument.name == "optimizer.step" &&
        argument.dtype == TensorDtype::I64 && argument.shape.empty()) {
      int64_t updates = 0;
      std::memcpy(&updates, staging.data(), sizeof(updates));
      firstStep = updates > 0 ? static_cast<uint64_t>(updates) : 0;
    }
  }
  // Fresh optimizer state starts at zero, except the dynamic loss scale.
  if (model.lossScaleIndex && !sourceEntries[*model.lossScaleIndex]) {
    float scale = static_cast<float>(model.lossScale->scale);
    memopt_copy_from_host(ctx.get(), base + offsets[*model.lossScaleIndex],
                          &scale, sizeof(scale));
  }
  if (memopt_get_status(ctx.get()) != MEMOPT_OK)
    return fail(DriverRuntimeError,
                "cannot load the tensors: " + runtimeMessage());
  memopt_set_step(ctx.get(), firstStep);
  hostMemory = std::strcmp(memopt_runtime_name(), "host") == 0;
  for (size_t i = 0; i < offsets.size(); ++i)
    stepArgs.push_back(address(i));
  return DriverSuccess;
}

void TrainRun::bindBatch(void *const *batch) {
  for (size_t j = 0; j < batchArguments.size(); ++j) {
    size_t i = batchArguments[j];
    stepArgs[i] = address(i);
    if (batch)
      bindCallerTensor(stepArgs[i], batch[j], model.arguments[i].byteSize);
  }
}

int TrainRun::runStep(std::optional<double> lr, StepResult &result) {
  auto readStep = [&]() {
    int64_t value = 0;
    if (model.stepIndex)
      memopt_copy_to_host(ctx.get(), &value, stepArgs[*model.stepIndex],
                          sizeof(value));
    return value;
  };
  result = StepResult();
  result.number = stepsRun + 1;
  // The scale this step runs with, and the counter a skipped step leaves.
  result.scale =
      model.lossScale ? static_cast<float>(model.lossScale->scale) : 1.0f;
  if (model.lossScaleIndex)
    memopt_copy_to_host(ctx.get(), &result.scale,
                        stepArgs[*model.lossScaleIndex], sizeof(result.scale));
  int64_t before = readStep();
  // The schedule's factor at the optimizer's 0-based step (a step that loss
  // scaling skipped did not advance it), or the caller's rate's.
  double factor = memopt::runtime::lrFactor(model.lrSchedule, before);
  if (lr) {
    if (model.optimizer.lr == 0.0)
      return fail(DriverInputError,
                  "the step was compiled with learning rate 0, which no "
                  "learning rate can scale");
    factor = *lr / model.optimizer.lr;
  }
  result.lr = model.optimizer.lr * factor;
  memopt_set_lr_scale(ctx.get(), factor);
  memopt_step_begin(ctx.get());
  step(ctx.get(), stepArgs.data(), base + scratchOffset,
       hostBase ? hostBase + hostScratchOffset : nullptr);
  result.seconds = memopt_step_end(ctx.get());
  memopt_copy_to_host(ctx.get(), &result.loss, stepArgs[model.lossIndex],
                      sizeof(result.loss));
  result.skipped = model.lossScale && model.stepIndex && readStep() == before;
  if (model.gradNormIndex)
    memopt_copy_to_host(ctx.get(), &result.gradNorm,
                        stepArgs[*model.gradNormIndex],
                        sizeof(result.gradNorm));
  if (memopt_get_status(ctx.get()) != MEMOPT_OK)
    return fail(DriverRuntimeError, "runtime error during step " +
                                        std::to_string(result.number) + ": " +
                                        runtimeMessage());
  memopt_advance_step(ctx.get());
  stepsRun = result.number;
  return DriverSuccess;
}

void TrainRun::report(const StepResult &result, int64_t i) {
  if (!isFirstRank())
    return;
  char line[256];
  int length = std::snprintf(line, sizeof(line), "step %llu loss %.9g",
                             static_cast<unsigned long long>(result.number),
                             static_cast<double>(result.loss));
  auto append = [&](const char *format, auto... values) {
    length += std::snprintf(line + length, sizeof(line) - length, format,
                            values...);
  };
  if (result.skipped)
    append(" skipped");
  if (model.lossScale)
    append(" scale %.9g", static_cast<double>(result.scale));
  if (!model.lrSchedule.isConstant())
    append(" lr %.9g", result.lr);
  if (model.gradNormIndex)
    append(" grad_norm %.9g", static_cast<double>(result.gradNorm));
  if (options.terminal) {
    // One line rewritten in place: the plain line's fields, the run's
    // throughput so far and the time left.
    double seconds = elapsed() - loopStarted;
    double perStep = seconds / static_cast<double>(i);
    uint64_t total = stepsDone + static_cast<uint64_t>(options.steps);
    length = std::snprintf(line, sizeof(line),
                           "step %llu/%llu loss %.4f",
                           static_cast<unsigned long long>(result.number),
                           static_cast<unsigned long long>(total),
                           static_cast<double>(result.loss));
    if (result.skipped)
      append(" skipped");
    append(" lr %.3g", result.lr);
    if (model.gradNormIndex)
      append(" grad_norm %.3g", static_cast<double>(result.gradNorm));
    if (tokensPerStep)
      append(" %.0f tok/s", double(tokensPerStep) / perStep);
    else
      append(" %.1f samples/s", double(samplesPerStep) / perStep);
    long long left =
        std::llround(perStep * static_cast<double>(options.steps - i));
    append(" ETA %lld:%02lld:%02lld", left / 3600, left / 60 % 60, left % 60);
    out << "\r\x1b[K" << line << (i == options.steps ? "\n" : "");
  } else {
    out << line << "\n";
  }
  out.flush();
  if (!log.is_open())
    return;
  char record[512];
  int n = std::snprintf(record, sizeof(record),
                        "{\"step\": %llu, \"loss\": %.9g, \"lr\": %.9g",
                        static_cast<unsigned long long>(result.number),
                        static_cast<double>(result.loss), result.lr);
  if (model.lossScale)
    n += std::snprintf(record + n, sizeof(record) - n,
                       ", \"skipped\": %s, \"loss_scale\": %.9g",
                       result.skipped ? "true" : "false",
                       static_cast<double>(result.scale));
  if (model.gradNormIndex)
    n += std::snprintf(record + n, sizeof(record) - n, ", \"grad_norm\": %.9g",
                       static_cast<double>(result.gradNorm));
  double perSecond = result.seconds > 0 ? 1.0 / result.seconds : 0.0;
  n += std::snprintf(record + n, sizeof(record) - n,
                     ", \"step_ms\": %.4f, \"samples_per_s\": %.6g",
                     result.seconds * 1e3, double(samplesPerStep) * perSecond);
  if (tokensPerStep)
    n += std::snprintf(record + n, sizeof(record) - n,
                       ", \"tokens_per_s\": %.6g",
                       double(tokensPerStep) * perSecond);
  std::snprintf(record + n, sizeof(record) - n, ", \"elapsed_s\": %.3f}",
                elapsed());
  logRecord(record);
}

int TrainRun::runSteps() {
  // SIGINT and SIGTERM finish the step in flight, then stop.
  std::signal(SIGINT, requestStop);
  std::signal(SIGTERM, requestStop);
  std::vector<double> seconds;
  if (options.evalEvery > 0 && stepsDone == 0)
    if (int code = evaluate(0))
      return code;
  loopStarted = elapsed();
  for (int64_t i = 1; i <= options.steps; ++i) {
    uint64_t number = stepsDone + static_cast<uint64_t>(i);
    if (int code = loadBatch(number - 1))
      return code;
    StepResult result;
    if (int code = runStep(std::nullopt, result))
      return code;
    seconds.push_back(result.seconds);
    report(result, i);
    if ((options.evalEvery > 0 && number % options.evalEvery == 0) ||
        (options.eval && i == options.steps))
      if (int code = evaluate(number))
        return code;
    if (options.saveEvery > 0 && number % options.saveEvery == 0 &&
        i != options.steps)
      if (int code = save(options.savePath))
        return code;
    // Every rank stops after the same step: the ranks agree on the signal.
    float stop = static_cast<float>(stopSignal);
    if (parallel) {
      char errorText[256] = "";
      if (collectives.all_reduce_sum_f32(collectives.state, &stop, 1,
                                         errorText, sizeof(errorText)))
        return fail(DriverRuntimeError,
                    std::string("cannot agree on stopping: ") + errorText);
    }
    if (stop > 0 && i != options.steps) {
      int signal = stopSignal ? static_cast<int>(stopSignal) : SIGTERM;
      if (isFirstRank()) {
        out << (options.terminal ? "\n" : "") << "stopped by signal "
            << signal << " after step " << number
            << (options.savePath.empty() ? "" : ", saving") << "\n";
        out.flush();
      }
      if (!options.savePath.empty())
        if (int code = save(options.savePath))
          return code;
      return 128 + signal;
    }
  }
  if (options.stats)
    return printStats(seconds);
  return DriverSuccess;
}

int TrainRun::printStats(const std::vector<double> &seconds) {
  // The first step includes one-time work (cuBLASLt algorithm selection,
  // module loading): the mean leaves it out when there are more.
  double sum = 0.0, best = 0.0;
  size_t first = seconds.size() > 1 ? 1 : 0;
  for (size_t i = first; i < seconds.size(); ++i) {
    sum += seconds[i];
    if (i == first || seconds[i] < best)
      best = seconds[i];
  }
  size_t count = seconds.size() - first;
  uint64_t arena = memopt_arena_size(ctx.get());
  uint64_t peak = memopt_memory_high_water(ctx.get());
  // Data parallelism: every rank prints its line, with its rank and a hash
  // (FNV-1a) of its parameters, state and optimizer state, which must be
  // the same on every rank.
  std::string rank;
  if (parallel) {
    uint64_t hash = 0xcbf29ce484222325ull;
    std::vector<unsigned char> bytes;
    for (size_t i = 0; i < model.arguments.size(); ++i) {
      if (!isCheckpointed(model.arguments[i].role))
        continue;
      if (int code = readWhole(i, bytes))
        return code;
      for (unsigned char byte : bytes)
        hash = (hash ^ byte) * 0x100000001b3ull;
    }
    char text[64];
    std::snprintf(text, sizeof(text), " rank=%lld state_hash=%016llx",
                  static_cast<long long>(collectives.rank),
                  static_cast<unsigned long long>(hash));
    rank = text;
  }
  char paths[256] = "";
  memopt_kernel_paths(ctx.get(), paths, sizeof(paths));
  char line[768];
  std::snprintf(line, sizeof(line),
                "stats runtime=%s steps=%zu step_ms_mean=%.4f "
                "step_ms_min=%.4f arena_bytes=%llu scratch_bytes=%llu "
                "workspace_bytes=%llu peak_bytes=%llu measured_bytes=%llu "
                "%s%s\n",
                memopt_runtime_name(), count,
                count ? sum / static_cast<double>(count) * 1e3 : 0.0,
                best * 1e3, static_cast<unsigned long long>(arena),
                static_cast<unsigned long long>(model.arenaBytes),
                static_cast<unsigned long long>(peak - arena),
                static_cast<unsigned long long>(peak),
                static_cast<unsigned long long>(
                    memopt_device_memory_measured(ctx.get())),
                paths, rank.c_str());
  out << line;
  out.flush();
  return DriverSuccess;
}

void TrainRun::copyIn(size_t i, uint64_t at, const void *src, uint64_t bytes) {
  if (model.arguments[i].host)
    std::memcpy(address(i) + at, src, bytes);
  else
    memopt_copy_from_host(ctx.get(), address(i) + at, src, bytes);
}

void TrainRun::copyOut(size_t i, uint64_t at, void *dst, uint64_t bytes) {
  if (model.arguments[i].host)
    std::memcpy(dst, address(i) + at, bytes);
  else
    memopt_copy_to_host(ctx.get(), dst, address(i) + at, bytes);
}

int TrainRun::readWhole(size_t i, std::vector<unsigned char> &bytes) {
  const ModelArgument &argument = model.arguments[i];
  uint64_t shard = argument.byteSize;
  uint64_t rank = argument.shardOf ? static_cast<uint64_t>(collectives.rank)
                                   : 0;
  bytes.assign(argument.shardOf ? shard * collectives.size : shard, 0);
  if (shard)
    copyOut(i, 0, bytes.data() + rank * shard, shard);
  if (memopt_get_status(ctx.get()) != MEMOPT_OK)
    return fail(DriverRuntimeError,
                "cannot read back '" + argument.name + "': " +
                    runtimeMessage());
  if (!argument.shardOf)
    return DriverSuccess;
  char errorText[256] = "";
  for (int64_t root = 0; root < collectives.size; ++root)
    if (collectives.broadcast(collectives.state, bytes.data() + root * shard,
                              static_cast<int64_t>(shard), root, errorText,
                              sizeof(errorText)))
      return fail(DriverRuntimeError, "cannot gather '" + argument.name +
                                          "': " + errorText);
  bytes.resize(argument.wholeByteSize);
  return DriverSuccess;
}

int TrainRun::save(const std::string &path,
                   const std::map<std::string, std::string> &metadata) {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<SafetensorsTensorRef> tensors;
  for (size_t i = 0; i < model.arguments.size(); ++i) {
    const ModelArgument &argument = model.arguments[i];
    if (!isCheckpointed(argument.role))
      continue;
    buffers.emplace_back();
    const SafetensorsEntry *source = sourceEntries[i];
    if (source && isConvertedAtLoad(argument, *source)) {
      // The f32 tensor it was loaded from: never trained, so unchanged.
      std::string error;
      buffers.back().resize(source->byteSize());
      if (!params.readData(*source, buffers.back().data(), error))
        return fail(DriverInputError,
                    "cannot read '" + options.paramsPath + "': " + error);
      tensors.push_back(SafetensorsTensorRef{argument.name, source->dtype,
                                             source->shape, nullptr});
      continue;
    }
    if (int code = readWhole(i, buffers.back()))
      return code;
    tensors.push_back(SafetensorsTensorRef{
        argument.name, argument.dtype,
        argument.shardOf.value_or(argument.shape), nullptr});
  }
  if (!isFirstRank())
    return DriverSuccess;
  for (size_t i = 0; i < tensors.size(); ++i)
    tensors[i].data = buffers[i].data();
  // Where the run is: the steps run (the next batch) and the windows' seed.
  int64_t position[2] = {static_cast<int64_t>(stepsRun),
                         static_cast<int64_t>(seed)};
  tensors.push_back({"driver.steps", TensorDtype::I64, {}, &position[0]});
  tensors.push_back({"driver.seed", TensorDtype::I64, {}, &position[1]});
  std::string error;
  if (!writeSafetensors(path, tensors, metadata, error))
    return fail(DriverInputError, "cannot save '" + path + "': " + error);
  return DriverSuccess;
}

int TrainRun::write(size_t i, const void *bytes, uint64_t size) {
  const ModelArgument &argument = model.arguments[i];
  if (argument.shardOf || size != argument.byteSize)
    return fail(DriverInputError, "cannot write '" + argument.name + "'");
  if (size)
    copyIn(i, 0, bytes, size);
  // An offloaded master's device copy follows it.
  if (argument.copyIndex && size) {
    const unsigned char *from = static_cast<const unsigned char *>(bytes);
    std::vector<unsigned char> copy(from, from + size);
    castToCopy(copy, model.arguments[*argument.copyIndex].dtype);
    copyIn(*argument.copyIndex, 0, copy.data(), copy.size());
  }
  if (memopt_get_status(ctx.get()) != MEMOPT_OK)
    return fail(DriverRuntimeError,
                "cannot write '" + argument.name + "': " + runtimeMessage());
  return DriverSuccess;
}

int TrainRun::open() {
  started = std::chrono::steady_clock::now();
  if (int code = startCollectives())
    return code;
  if (int code = bindTensors())
    return code;
  stepsRun = stepsDone;
  if (!batchArguments.empty()) {
    const ModelArgument &first = model.arguments[batchArguments.front()];
    int64_t ranks = parallel && first.batchDim ? model.dataParallel : 1;
    int64_t dim = first.batchDim.value_or(0);
    samplesPerStep = first.shape.empty() ? 1 : first.shape[dim] * ranks;
    if (first.shape.size() == 2 && (first.dtype == TensorDtype::I64 ||
                                    first.dtype == TensorDtype::I32))
      tokensPerStep = samplesPerStep * static_cast<uint64_t>(first.shape[1]);
  }
  if (!options.logPath.empty() && isFirstRank()) {
    log.open(options.logPath, std::ios::app);
    if (!log)
      return fail(DriverInputError,
                  "cannot open the log '" + options.logPath + "'");
  }
  return loadArena();
}

int TrainRun::run() {
  if (int code = open())
    return code;
  if (int code = runSteps()) {
    // Stopped by a signal, after its checkpoint.
    if (code > 128 && parallel)
      memopt_driver_stop_collectives();
    return code;
  }
  if (!options.savePath.empty())
    if (int code = save(options.savePath))
      return code;
  if (parallel)
    memopt_driver_stop_collectives();
  return DriverSuccess;
}

