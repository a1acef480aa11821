//===- Program.cpp - the C API of a compiled training step ----------------===//
//
// A memopt_program is a TrainRun opened without data: the caller passes each
// batch. Failures come back as codes with the TrainRun's message; nothing
// throws across the C boundary.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "TrainRun.h"

#include <cmath>
#include <cstring>
#include <new>
#include <sstream>

using namespace memopt::driver;

// The generated steps and model description (as main.cpp binds them).
extern "C" void memopt_train_step(memopt_context *ctx, void *const *args,
                                  uint8_t *scratch, uint8_t *host_scratch);
extern "C" __attribute__((weak)) void memopt_eval_step(memopt_context *ctx,
                                                       void *const *args,
                                                       uint8_t *scratch,
                                                       uint8_t *host_scratch);
extern "C" const char memopt_model_json[];

struct memopt_program {
  DriverOptions options;
  ModelDescription model;
  std::ostringstream out, err;
  std::unique_ptr<TrainRun> run;
  std::string error;

  /// Records `message` as the last failure and returns `code`.
  int fail(int code, std::string message) {
    error = std::move(message);
    return code;
  }
  /// The checkpointed training-step argument `name` (a weight, state or
  /// optimizer state) and its index; null, with the failure recorded,
  /// when there is none.
  const ModelArgument *lookup(const char *name, size_t &index) {
    for (index = 0; index < model.arguments.size(); ++index)
      if (model.arguments[index].name == name &&
          isCheckpointed(model.arguments[index].role))
        return &model.arguments[index];
    fail(DriverInputError,
         std::string("the program holds no weight or state named '") + name +
             "'");
    return nullptr;
  }
  /// Runs `body` (which returns a DriverExitCode from `run`), taking the
  /// run's message on failure and turning exceptions into codes.
  template <typename Body> int guard(Body body) {
    error.clear();
    try {
      int code = body();
      if (code && error.empty())
        error = run->getError();
      return code;
    } catch (const std::bad_alloc &) {
      return fail(DriverRuntimeError, "out of host memory");
    } catch (const std::exception &e) {
      return fail(DriverRuntimeError,
                  std::string("internal error: ") + e.what());
    }
  }
};

namespace {

void copyMessage(const std::string &message, char *error, size_t size) {
  if (!error || !size)
    return;
  size_t n = std::min(message.size(), size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

} // namespace

extern "C" const char *memopt_program_model_json(void) {
  return memopt_model_json;
}

extern "C" memopt_program *memopt_program_open(const char *params_path,
                                               char *error,
                                               size_t error_size) {
  try {
    auto program = std::make_unique<memopt_program>();
    std::string message;
    if (!parseModelDescription(memopt_model_json, program->model, message)) {
      copyMessage("invalid embedded model description: " + message, error,
                  error_size);
      return nullptr;
    }
    if (program->model.dataParallel > 1) {
      copyMessage("the step was compiled for " +
                      std::to_string(program->model.dataParallel) +
                      " ranks (--data-parallel); a program in one process "
                      "runs one: use `mpirun -np N OUT/train`",
                  error, error_size);
      return nullptr;
    }
    program->options.paramsPath = params_path ? params_path : "";
    program->options.program = "memopt_program";
    program->run = std::make_unique<TrainRun>(
        program->options, program->model, memopt_train_step, memopt_eval_step,
        program->out, program->err);
    if (program->run->open()) {
      copyMessage(program->run->getError(), error, error_size);
      return nullptr;
    }
    return program.release();
  } catch (const std::exception &e) {
    copyMessage(std::string("cannot open the program: ") + e.what(), error,
                error_size);
    return nullptr;
  }
}

extern "C" void memopt_program_close(memopt_program *program) {
  delete program;
}

extern "C" const char *memopt_program_error(const memopt_program *program) {
  return program->error.c_str();
}

extern "C" int64_t
memopt_program_num_batch_tensors(const memopt_program *program) {
  return static_cast<int64_t>(program->run->getBatchArguments().size());
}

extern "C" const char *
memopt_program_batch_tensor_name(const memopt_program *program,
                                 int64_t index) {
  const std::vector<size_t> &batch = program->run->getBatchArguments();
  if (index < 0 || static_cast<size_t>(index) >= batch.size())
    return nullptr;
  return program->model.arguments[batch[static_cast<size_t>(index)]]
      .name.c_str();
}

extern "C" int memopt_program_step(memopt_program *program,
                                   void *const *batch, double lr,
                                   memopt_program_step_result *result) {
  return program->guard([&] {
    program->run->bindBatch(batch);
    StepResult step;
    std::optional<double> rate;
    if (!std::isnan(lr))
      rate = lr;
    int code = program->run->runStep(rate, step);
    // The arena's own buffers again: the caller's may go away.
    program->run->bindBatch(nullptr);
    if (code)
      return code;
    *result = {step.number, step.loss,    step.skipped,  step.scale,
               step.lr,     step.gradNorm, step.seconds};
    return 0;
  });
}

extern "C" int memopt_program_evaluate(memopt_program *program,
                                       void *const *batch, float *loss) {
  return program->guard(
      [&] { return program->run->evaluateBatch(batch, *loss); });
}

extern "C" int memopt_program_read(memopt_program *program, const char *name,
                                   void *data, uint64_t size) {
  return program->guard([&] {
    size_t index;
    const ModelArgument *argument = program->lookup(name, index);
    if (!argument)
      return static_cast<int>(DriverInputError);
    std::vector<unsigned char> bytes;
    if (int code = program->run->readWhole(index, bytes))
      return code;
    if (bytes.size() != size)
      return program->fail(DriverInputError,
                           "'" + argument->name + "' has " +
                               std::to_string(bytes.size()) + " bytes, not " +
                               std::to_string(size));
    std::memcpy(data, bytes.data(), size);
    return 0;
  });
}

extern "C" int memopt_program_write(memopt_program *program, const char *name,
                                    const void *data, uint64_t size) {
  return program->guard([&] {
    size_t index;
    const ModelArgument *argument = program->lookup(name, index);
    if (!argument)
      return static_cast<int>(DriverInputError);
    if (size != argument->byteSize)
      return program->fail(DriverInputError,
                           "'" + argument->name + "' has " +
                               std::to_string(argument->byteSize) +
                               " bytes, not " + std::to_string(size));
    return program->run->write(index, data, size);
  });
}

extern "C" int memopt_program_save(memopt_program *program, const char *path,
                                   const char *metadata) {
  return program->guard([&] {
    std::map<std::string, std::string> header = {{"format", "pt"}};
    std::istringstream lines(metadata ? metadata : "");
    for (std::string line; std::getline(lines, line);) {
      size_t equals = line.find('=');
      if (equals != std::string::npos)
        header[line.substr(0, equals)] = line.substr(equals + 1);
    }
    return program->run->save(path, header);
  });
}
