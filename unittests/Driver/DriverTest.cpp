//===- DriverTest.cpp - tests of the train driver -------------------------===//
//
// The command line, the model description and every loading error, then
// end-to-end runs of the hand-written tiny model (TinyTrainStep.cpp) whose
// losses and saved parameters are checked against the same training
// recomputed in double here. The last test runs the standalone `train`
// linked like memopt-compile links it (main from the driver archive).
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "TinyModel.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace memopt::driver;

namespace {

//===----------------------------------------------------------------------===//
// The tiny model in double
//===----------------------------------------------------------------------===//

const float kX[4][3] = {{0.5f, -1.0f, 2.0f},
                        {1.5f, 0.25f, -0.5f},
                        {-2.0f, 1.0f, 0.75f},
                        {0.0f, 3.0f, -1.25f}};
const float kY[4][2] = {
    {1.0f, -0.5f}, {0.25f, 2.0f}, {-1.5f, 0.0f}, {3.0f, 1.0f}};
const float kW[2][3] = {{0.1f, -0.2f, 0.3f}, {-0.4f, 0.5f, 0.6f}};
const float kB[2] = {0.05f, -0.15f};

/// SGD with momentum on y = x W^T + b, mean squared error.
struct Reference {
  double w[2][3], b[2], bufW[2][3] = {}, bufB[2] = {};

  Reference() {
    for (int i = 0; i < 2; ++i) {
      b[i] = kB[i];
      for (int j = 0; j < 3; ++j)
        w[i][j] = kW[i][j];
    }
  }

  /// One step; returns the loss before the update.
  double step() {
    double residual[4][2], loss = 0;
    for (int r = 0; r < 4; ++r) {
      for (int o = 0; o < 2; ++o) {
        double prediction = b[o];
        for (int k = 0; k < 3; ++k)
          prediction += kX[r][k] * w[o][k];
        residual[r][o] = prediction - kY[r][o];
        loss += residual[r][o] * residual[r][o];
      }
    }
    loss /= 8;
    for (int o = 0; o < 2; ++o) {
      double gradB = 0;
      for (int r = 0; r < 4; ++r)
        gradB += 2 * residual[r][o] / 8;
      bufB[o] = kTinyMomentum * bufB[o] + gradB;
      for (int k = 0; k < 3; ++k) {
        double gradW = 0;
        for (int r = 0; r < 4; ++r)
          gradW += 2 * residual[r][o] / 8 * kX[r][k];
        bufW[o][k] = kTinyMomentum * bufW[o][k] + gradW;
      }
    }
    for (int o = 0; o < 2; ++o) {
      b[o] -= kTinyLr * bufB[o];
      for (int k = 0; k < 3; ++k)
        w[o][k] -= kTinyLr * bufW[o][k];
    }
    return loss;
  }
};

//===----------------------------------------------------------------------===//
// Fixture
//===----------------------------------------------------------------------===//

int stepCalls = 0;

void countingStep(memopt_context *ctx, void *const *args, uint8_t *scratch,
                  uint8_t *hostScratch) {
  ++stepCalls;
  memopt_train_step(ctx, args, scratch, hostScratch);
}

/// Fails on the second step with an out-of-range embedding index.
void failingStep(memopt_context *ctx, void *const *args, uint8_t *scratch,
                 uint8_t *hostScratch) {
  memopt_train_step(ctx, args, scratch, hostScratch);
  if (memopt_get_step(ctx) == 1) {
    float table[2] = {1.0f, 2.0f}, out = 0;
    int64_t index = 5;
    memopt_embedding(ctx, MEMOPT_F32, table, MEMOPT_I64, &index, &out, 1, 2, 1);
  }
}

class DriverTest : public ::testing::Test {
protected:
  void SetUp() override {
    stepCalls = 0;
    dir = std::filesystem::path(::testing::TempDir()) /
          ("memopt-driver-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    params = path("params.safetensors");
    batch = path("batch.safetensors");
    writeParams(params, {{"fc.weight", TensorDtype::F32, {2, 3}, kW},
                         {"fc.bias", TensorDtype::F32, {2}, kB}});
    writeParams(batch, {{"x", TensorDtype::F32, {4, 3}, kX},
                        {"y", TensorDtype::F32, {4, 2}, kY}});
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::string path(const std::string &name) const {
    return (dir / name).string();
  }

  static void writeParams(const std::string &file,
                          const std::vector<SafetensorsTensorRef> &tensors) {
    std::string error;
    ASSERT_TRUE(writeSafetensors(file, tensors, {}, error)) << error;
  }

  /// Runs the driver on `args` (without argv[0]).
  int run(const std::vector<std::string> &args,
          TrainStepFunction step = countingStep, bool terminal = false) {
    std::vector<const char *> argv = {"train"};
    for (const std::string &arg : args)
      argv.push_back(arg.c_str());
    std::ostringstream outStream, errStream;
    int code = runDriver(static_cast<int>(argv.size()), argv.data(),
                         memopt_model_json, step, nullptr, outStream, errStream,
                         terminal);
    out = outStream.str();
    err = errStream.str();
    return code;
  }

  /// The loss values of `step <i> loss <value>` lines, checking the
  /// numbering from `first`.
  static std::vector<double> parseLosses(const std::string &text,
                                         size_t first = 1) {
    std::vector<double> losses;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      std::string expectedPrefix =
          "step " + std::to_string(losses.size() + first) + " loss ";
      EXPECT_EQ(line.compare(0, expectedPrefix.size(), expectedPrefix), 0)
          << line;
      losses.push_back(
          std::strtod(line.c_str() + expectedPrefix.size(), nullptr));
    }
    return losses;
  }

  std::filesystem::path dir;
  std::string params, batch, out, err;
};

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

TEST_F(DriverTest, Help) {
  EXPECT_EQ(run({"--help"}), 0);
  EXPECT_EQ(out.rfind("usage: train --params", 0), 0u) << out;
  EXPECT_EQ(err, "");
}

TEST_F(DriverTest, ParsesBothFlagSpellings) {
  const char *argv[] = {"train",      "--params=p", "--batch", "b",
                        "--steps=12", "--save",     "s"};
  DriverOptions options;
  std::string error;
  ASSERT_EQ(parseDriverArguments(7, argv, options, error), ParseResult::Run)
      << error;
  EXPECT_EQ(options.paramsPath, "p");
  EXPECT_EQ(options.dataPath, "b");
  EXPECT_EQ(options.steps, 12);
  EXPECT_EQ(options.savePath, "s");
}

struct UsageCase {
  std::vector<std::string> args;
  std::string message;
};

TEST_F(DriverTest, UsageErrors) {
  std::vector<UsageCase> cases = {
      {{}, "missing --params"},
      {{"--params", "p", "--steps", "1"}, "missing --batch, --data or --tokens"},
      {{"--params", "p", "--steps", "1", "--batch", "b", "--tokens", "t"},
       "--batch, --data and --tokens exclude each other"},
      {{"--params", "p", "--steps", "1", "--batch", "b", "--eval-data", "e"},
       "--eval-data applies to --eval or --eval-every"},
      {{"--params", "p", "--steps", "1", "--batch", "b", "--save-every", "2"},
       "--save-every needs --save FILE"},
      {{"--params", "p", "--steps", "1", "--batch", "b", "--token-dtype",
        "uint16"},
       "--token-dtype applies to --tokens and --eval-tokens"},
      {{"--params", "p", "--steps", "1", "--tokens", "t", "--token-dtype",
        "int8"},
       "--token-dtype must be uint16 or uint32, got 'int8'"},
      {{"--params", "p", "--steps", "1", "--batch", "b", "--eval",
        "--eval-batches", "0"},
       "--eval-batches must be an integer >= 1, got '0'"},
      {{"--params", "p", "--batch", "b"}, "missing --steps"},
      {{"--params", "p", "--frobnicate"}, "unknown option '--frobnicate'"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--params"}, "--params needs a value"},
      {{"--params", "--batch", "b"}, "--params needs a value"},
      {{"--save="}, "--save needs a value"},
      {{"--steps", "1", "--steps", "2"}, "--steps is given twice"},
      {{"--params", "p", "--batch", "b", "--steps", "0"},
       "--steps must be an integer >= 1, got '0'"},
      {{"--params", "p", "--batch", "b", "--steps", "-3"},
       "--steps must be an integer >= 1, got '-3'"},
      {{"--params", "p", "--batch", "b", "--steps=abc"},
       "--steps must be an integer >= 1, got 'abc'"},
      {{"--params", "p", "--batch", "b", "--steps=1.5"},
       "--steps must be an integer >= 1, got '1.5'"},
      {{"--params", "p", "--batch", "b", "--steps=99999999999999999999"},
       "--steps must be an integer >= 1, got '99999999999999999999'"},
  };
  for (const UsageCase &usage : cases) {
    EXPECT_EQ(run(usage.args), 1) << usage.message;
    EXPECT_EQ(err, "train: " + usage.message + " (see --help)\n");
    EXPECT_EQ(out, "");
  }
  EXPECT_EQ(stepCalls, 0);
}

//===----------------------------------------------------------------------===//
// Model description
//===----------------------------------------------------------------------===//

TEST_F(DriverTest, ParsesTheTinyModel) {
  ModelDescription model;
  std::string error;
  ASSERT_TRUE(parseModelDescription(memopt_model_json, model, error)) << error;
  EXPECT_EQ(model.arenaBytes, 1792u);
  ASSERT_EQ(model.arguments.size(), 8u);
  EXPECT_EQ(model.lossIndex, 7u);
  EXPECT_EQ(model.arguments[2].name, "fc.weight");
  EXPECT_EQ(model.arguments[2].role, Role::Param);
  EXPECT_EQ(model.arguments[2].byteSize, 24u);
  EXPECT_EQ(model.arguments[6].dtype, TensorDtype::I64);
  EXPECT_TRUE(model.arguments[6].shape.empty());
}

TEST_F(DriverTest, RejectsBadModelDescriptions) {
  const std::string loss =
      R"({"name": "loss", "role": "loss", "dtype": "f32", "shape": []})";
  auto withArguments = [](const std::string &arguments) {
    return R"({"arena_bytes": 0, "arguments": [)" + arguments + "]}";
  };
  std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "parse error"},
      {"[]", "not a JSON object"},
      {R"({"arguments": []})", "'arena_bytes' is not a non-negative integer"},
      {R"({"arena_bytes": -1, "arguments": []})", "'arena_bytes'"},
      {R"({"arena_bytes": 0})", "'arguments' is not an array"},
      {withArguments(""), "no argument has role 'loss'"},
      {withArguments(loss + "," + loss), "appears twice"},
      {withArguments(R"({"name": "l2", "role": "loss", "dtype": "f32",)"
                     R"( "shape": [1]})"),
       "the loss argument 'l2' is not an f32 scalar"},
      {withArguments(R"({"name": "a", "role": "weight", "dtype": "f32",)"
                     R"( "shape": []},)" +
                     loss),
       "argument 0 ('a') has no valid role"},
      {withArguments(R"({"name": "a", "role": "param", "dtype": "f64",)"
                     R"( "shape": []},)" +
                     loss),
       "argument 0 ('a') has no valid dtype"},
      {withArguments(R"({"name": "a", "role": "param", "dtype": "f32",)"
                     R"( "shape": [-2]},)" +
                     loss),
       "negative or non-integer dimension"},
      {withArguments(R"({"role": "param", "dtype": "f32", "shape": []},)" +
                     loss),
       "argument 0 has no name"},
      // ZeRO shards: a shape of non-negative extents, a 1-D shard, and the
      // ranks' cut of the whole tensor.
      {withArguments(R"({"name": "m", "role": "optim", "dtype": "f32",)"
                     R"( "shape": [3], "shard_of": [-10]},)" +
                     loss),
       "argument 0 ('m') has an invalid shard_of"},
      {withArguments(R"({"name": "m", "role": "optim", "dtype": "f32",)"
                     R"( "shape": [3, 1], "shard_of": [10]},)" +
                     loss),
       "argument 0 ('m') has an invalid shard_of"},
      {R"({"arena_bytes": 0, "data_parallel": 4, "arguments": [)"
       R"({"name": "m", "role": "optim", "dtype": "f32", "shape": [2],)"
       R"( "shard_of": [10]},)" +
           loss + "]}",
       "argument 'm' is a shard of 10 elements, which 2 elements on each of "
       "4 rank(s) do not cut evenly"},
      // A low-precision copy needs the sharded f32 master of its name and
      // shape.
      {withArguments(R"({"name": "w", "role": "param_copy", "dtype": "bf16",)"
                     R"( "shape": [4]},)" +
                     loss),
       "argument 'w' (param_copy) is not the f16 or bf16 copy of a sharded "
       "f32 param of its name and shape"},
      {R"({"arena_bytes": 0, "data_parallel": 2, "arguments": [)"
       R"({"name": "w", "role": "param", "dtype": "f32", "shape": [2],)"
       R"( "shard_of": [4]},)"
       R"({"name": "w", "role": "param_copy", "dtype": "bf16",)"
       R"( "shape": [2, 2]},)" +
           loss + "]}",
       "argument 'w' (param_copy) is not the f16 or bf16 copy"},
      {R"({"arena_bytes": 0, "data_parallel": 2, "arguments": [)"
       R"({"name": "w", "role": "param", "dtype": "f32", "shape": [2],)"
       R"( "shard_of": [4]},)"
       R"({"name": "w", "role": "param_copy", "dtype": "f32", "shape": [4]},)" +
           loss + "]}",
       "argument 'w' (param_copy) is not the f16 or bf16 copy"},
  };
  for (const auto &[json, message] : cases) {
    ModelDescription model;
    std::string error;
    EXPECT_FALSE(parseModelDescription(json, model, error)) << json;
    EXPECT_NE(error.find(message), std::string::npos)
        << "'" << error << "' lacks '" << message << "'";
  }
}

TEST_F(DriverTest, ParsesTheDeviceCopyOfAHostMaster) {
  // Optimizer offload: the f32 master in host memory, its f32 (or
  // low-precision) copy in the device's, in the same layout.
  ModelDescription model;
  std::string error;
  ASSERT_TRUE(parseModelDescription(
      R"({"arena_bytes": 0, "host_arena_bytes": 512, "arguments": [)"
      R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3],)"
      R"( "memory": "host"},)"
      R"({"name": "w", "role": "param_copy", "dtype": "f32", "shape": [3]},)"
      R"({"name": "loss", "role": "loss", "dtype": "f32", "shape": []}]})",
      model, error))
      << error;
  EXPECT_EQ(model.hostArenaBytes, 512u);
  EXPECT_TRUE(model.arguments[0].host);
  EXPECT_FALSE(model.arguments[1].host);
  EXPECT_EQ(model.arguments[0].copyIndex, std::optional<size_t>(1));
  // The copy of a master on the device, or in another layout, is no copy.
  for (
      const char *arguments :
      {R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3]},)"
       R"({"name": "w", "role": "param_copy", "dtype": "f32", "shape": [3]},)",
       R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3],)"
       R"( "memory": "host"},)"
       R"({"name": "w", "role": "param_copy", "dtype": "bf16", "shape": [4]},)",
       R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3],)"
       R"( "memory": "elsewhere"},)"}) {
    std::string json = std::string(R"({"arena_bytes": 0, "arguments": [)") +
                       arguments +
                       R"({"name": "loss", "role": "loss", "dtype": "f32",)"
                       R"( "shape": []}]})";
    EXPECT_FALSE(parseModelDescription(json, model, error)) << json;
    EXPECT_TRUE(error.find("param_copy") != std::string::npos ||
                error.find("invalid memory") != std::string::npos)
        << error;
  }
}

TEST_F(DriverTest, ParsesTheHostCopyOfAHostMaster) {
  // --offload=params: the low-precision copy lives on the host too; an f32
  // copy of a host master on the host would be the master again.
  ModelDescription model;
  std::string error;
  ASSERT_TRUE(parseModelDescription(
      R"({"arena_bytes": 0, "host_arena_bytes": 512, "arguments": [)"
      R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3],)"
      R"( "memory": "host"},)"
      R"({"name": "w", "role": "param_copy", "dtype": "bf16", "shape": [3],)"
      R"( "memory": "host"},)"
      R"({"name": "loss", "role": "loss", "dtype": "f32", "shape": []}]})",
      model, error))
      << error;
  EXPECT_TRUE(model.arguments[1].host);
  EXPECT_EQ(model.arguments[0].copyIndex, std::optional<size_t>(1));
  EXPECT_FALSE(parseModelDescription(
      R"({"arena_bytes": 0, "host_arena_bytes": 512, "arguments": [)"
      R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3],)"
      R"( "memory": "host"},)"
      R"({"name": "w", "role": "param_copy", "dtype": "f32", "shape": [3],)"
      R"( "memory": "host"},)"
      R"({"name": "loss", "role": "loss", "dtype": "f32", "shape": []}]})",
      model, error));
  EXPECT_NE(error.find("param_copy"), std::string::npos) << error;
}

TEST_F(DriverTest, ParsesAParamCopyWithTheNameOfItsMaster) {
  ModelDescription model;
  std::string error;
  ASSERT_TRUE(parseModelDescription(
      R"({"arena_bytes": 0, "data_parallel": 2, "arguments": [)"
      R"({"name": "w", "role": "param", "dtype": "f32", "shape": [3],)"
      R"( "shard_of": [5]},)"
      R"({"name": "w", "role": "param_copy", "dtype": "f16", "shape": [5]},)"
      R"({"name": "loss", "role": "loss", "dtype": "f32", "shape": []}]})",
      model, error))
      << error;
  ASSERT_EQ(model.arguments.size(), 3u);
  EXPECT_EQ(model.arguments[1].role, Role::ParamCopy);
  EXPECT_EQ(model.arguments[1].byteSize, 10u);
  EXPECT_EQ(model.arguments[0].wholeByteSize, 20u);
  EXPECT_EQ(model.arguments[0].copyIndex, std::optional<size_t>(1));
}

TEST_F(DriverTest, ParsesTheLossScale) {
  const std::string arguments =
      R"("arguments": [)"
      R"({"name": "optimizer.step", "role": "optim", "dtype": "i64", "shape": []},)"
      R"({"name": "optimizer.loss_scale", "role": "optim", "dtype": "f32", "shape": []},)"
      R"({"name": "loss", "role": "loss", "dtype": "f32", "shape": []}]})";
  ModelDescription model;
  std::string error;
  ASSERT_TRUE(parseModelDescription(
      R"({"arena_bytes": 0, "loss_scale": {"mode": "dynamic", "scale": 1024,)"
      R"( "growth_factor": 2, "backoff_factor": 0.5, "growth_interval": 3},)" +
          arguments,
      model, error))
      << error;
  ASSERT_TRUE(model.lossScale.has_value());
  EXPECT_TRUE(model.lossScale->dynamic);
  EXPECT_EQ(model.lossScale->scale, 1024.0);
  EXPECT_EQ(model.stepIndex, std::optional<size_t>(0));
  EXPECT_EQ(model.lossScaleIndex, std::optional<size_t>(1));

  ASSERT_TRUE(parseModelDescription(
      R"({"arena_bytes": 0, "loss_scale": {"mode": "static", "scale": 8},)" +
          arguments,
      model, error))
      << error;
  ASSERT_TRUE(model.lossScale.has_value());
  EXPECT_FALSE(model.lossScale->dynamic);

  // Without a loss_scale section the argument is ordinary optimizer state.
  ASSERT_TRUE(parseModelDescription(R"({"arena_bytes": 0, )" + arguments,
                                    model, error))
      << error;
  EXPECT_FALSE(model.lossScale.has_value());
  EXPECT_FALSE(model.lossScaleIndex.has_value());

  const std::string noScaleArgument =
      R"("arguments": [{"name": "loss", "role": "loss", "dtype": "f32",)"
      R"( "shape": []}]})";
  std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"arena_bytes": 0, "loss_scale": {"mode": "auto", "scale": 8},)" +
           arguments,
       "'loss_scale' needs mode"},
      {R"({"arena_bytes": 0, "loss_scale": {"mode": "static", "scale": 0},)" +
           arguments,
       "a positive scale"},
      {R"({"arena_bytes": 0, "loss_scale": {"mode": "dynamic", "scale": 8},)" +
           noScaleArgument,
       "needs the f32 scalar optim argument 'optimizer.loss_scale'"},
  };
  for (const auto &[json, message] : cases) {
    EXPECT_FALSE(parseModelDescription(json, model, error)) << json;
    EXPECT_NE(error.find(message), std::string::npos)
        << "'" << error << "' lacks '" << message << "'";
  }
}

TEST_F(DriverTest, InvalidEmbeddedModelIsAnInputError) {
  std::vector<const char *> argv = {"train",   "--params",    params.c_str(),
                                    "--batch", batch.c_str(), "--steps",
                                    "1"};
  std::ostringstream outStream, errStream;
  EXPECT_EQ(runDriver(7, argv.data(), "{}", countingStep, nullptr, outStream,
                      errStream),
            1);
  EXPECT_EQ(errStream.str().rfind(
                "train: invalid embedded model description: 'arena_bytes'", 0),
            0u)
      << errStream.str();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST_F(DriverTest, MissingParamsFile) {
  std::string missing = path("missing.safetensors");
  EXPECT_EQ(run({"--params", missing, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err, "train: cannot read '" + missing +
                     "': No such file or directory\n");
  EXPECT_EQ(stepCalls, 0);
}

TEST_F(DriverTest, CorruptBatchFile) {
  // Claims a 16-byte header, but only "{}" follows.
  std::ofstream(batch, std::ios::binary | std::ios::trunc)
      << std::string("\x10\0\0\0\0\0\0\0{}", 10);
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err, "train: cannot read '" + batch +
                     "': header length 16 exceeds the 2 bytes after the "
                     "length prefix\n");
}

TEST_F(DriverTest, MissingTensor) {
  writeParams(params, {{"fc.weight", TensorDtype::F32, {2, 3}, kW}});
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err,
            "train: tensor 'fc.bias' (param) not found in '" + params + "'\n");
  EXPECT_EQ(stepCalls, 0);
}

TEST_F(DriverTest, MissingInput) {
  writeParams(batch, {{"x", TensorDtype::F32, {4, 3}, kX}});
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err, "train: tensor 'y' not found in '" + batch + "'\n");
}

TEST_F(DriverTest, WrongDtype) {
  uint16_t half[6] = {};
  writeParams(params, {{"fc.weight", TensorDtype::F16, {2, 3}, half},
                       {"fc.bias", TensorDtype::F32, {2}, kB}});
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err, "train: tensor 'fc.weight' in '" + params +
                     "' has dtype F16, expected F32\n");
}

TEST_F(DriverTest, WrongShape) {
  writeParams(params, {{"fc.weight", TensorDtype::F32, {3, 2}, kW},
                       {"fc.bias", TensorDtype::F32, {2}, kB}});
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err, "train: tensor 'fc.weight' in '" + params +
                     "' has shape [3, 2], expected [2, 3]\n");
}

TEST_F(DriverTest, PartialOptimizerState) {
  float zeros[6] = {};
  writeParams(params, {{"fc.weight", TensorDtype::F32, {2, 3}, kW},
                       {"fc.bias", TensorDtype::F32, {2}, kB},
                       {"optimizer.fc.weight.momentum_buffer",
                        TensorDtype::F32,
                        {2, 3},
                        zeros}});
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1"}), 1);
  EXPECT_EQ(err, "train: tensor 'optimizer.fc.bias.momentum_buffer' (optim) "
                 "not found in '" +
                     params +
                     "', which has optimizer state "
                     "('optimizer.fc.weight.momentum_buffer')\n");
}

TEST_F(DriverTest, UnwritableSavePath) {
  std::string save = path("no/such/dir/out.safetensors");
  EXPECT_EQ(run({"--params", params, "--batch", batch, "--steps", "1", "--save",
                 save}),
            1);
  EXPECT_EQ(err.rfind("train: cannot save '" + save + "': cannot create", 0),
            0u)
      << err;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

TEST_F(DriverTest, TrainsAndSaves) {
  std::string save = path("trained.safetensors");
  ASSERT_EQ(run({"--params", params, "--batch", batch, "--steps", "3", "--save",
                 save}),
            0)
      << err;
  EXPECT_EQ(err, "");
  EXPECT_EQ(stepCalls, 3);

  Reference reference;
  std::vector<double> losses = parseLosses(out);
  ASSERT_EQ(losses.size(), 3u) << out;
  for (double loss : losses) {
    double expected = reference.step();
    EXPECT_NEAR(loss, expected, 1e-5 * std::fabs(expected)) << out;
  }
  // The loss falls.
  EXPECT_LT(losses[2], losses[0]);

  SafetensorsReader reader;
  std::string error;
  ASSERT_TRUE(reader.open(save, error)) << error;
  auto readFloats = [&](const std::string &name, size_t count) {
    const SafetensorsEntry *entry = reader.lookup(name);
    std::vector<float> values(count);
    EXPECT_NE(entry, nullptr) << name;
    if (!entry)
      return values;
    EXPECT_EQ(entry->dtype, TensorDtype::F32);
    EXPECT_EQ(entry->byteSize(), count * sizeof(float));
    EXPECT_TRUE(reader.readData(*entry, values.data(), error)) << error;
    return values;
  };
  std::vector<float> weight = readFloats("fc.weight", 6);
  std::vector<float> bias = readFloats("fc.bias", 2);
  std::vector<float> bufW =
      readFloats("optimizer.fc.weight.momentum_buffer", 6);
  std::vector<float> bufB = readFloats("optimizer.fc.bias.momentum_buffer", 2);
  for (int o = 0; o < 2; ++o) {
    EXPECT_NEAR(bias[o], reference.b[o], 1e-5);
    EXPECT_NEAR(bufB[o], reference.bufB[o], 1e-5);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(weight[o * 3 + k], reference.w[o][k], 1e-5);
      EXPECT_NEAR(bufW[o * 3 + k], reference.bufW[o][k], 1e-5);
    }
  }
  const SafetensorsEntry *step = reader.lookup("optimizer.step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->dtype, TensorDtype::I64);
  EXPECT_TRUE(step->shape.empty());
  int64_t updates = 0;
  ASSERT_TRUE(reader.readData(*step, &updates, error)) << error;
  EXPECT_EQ(updates, 3);
  // Inputs, labels and the loss are not part of the checkpoint.
  EXPECT_EQ(reader.lookup("x"), nullptr);
  EXPECT_EQ(reader.lookup("loss"), nullptr);
  // The position a resumed run continues from: 3 steps run.
  const SafetensorsEntry *position = reader.lookup("driver.steps");
  ASSERT_NE(position, nullptr);
  int64_t stepsRun = 0;
  ASSERT_TRUE(reader.readData(*position, &stepsRun, error)) << error;
  EXPECT_EQ(stepsRun, 3);
  EXPECT_NE(reader.lookup("driver.seed"), nullptr);
  EXPECT_EQ(reader.getEntries().size(), 7u);
}

TEST_F(DriverTest, ProgressLineOnATerminal) {
  // On a terminal each step rewrites one line: its number of the total, the
  // loss, the rate, the throughput and the time left; the last ends it.
  ASSERT_EQ(run({"--params", params, "--batch", batch, "--steps", "3"},
                countingStep, /*terminal=*/true),
            0)
      << err;
  Reference reference;
  std::vector<std::string> updates;
  for (size_t at = out.find("\r\x1b[K"); at != std::string::npos;) {
    size_t next = out.find("\r\x1b[K", at + 1);
    updates.push_back(out.substr(at + 4, next == std::string::npos
                                             ? std::string::npos
                                             : next - at - 4));
    at = next;
  }
  ASSERT_EQ(updates.size(), 3u) << out;
  for (size_t i = 0; i < updates.size(); ++i) {
    char loss[32];
    std::snprintf(loss, sizeof(loss), "%.4f", reference.step());
    std::string prefix = "step " + std::to_string(i + 1) + "/3 loss " + loss +
                         " lr ";
    EXPECT_EQ(updates[i].rfind(prefix, 0), 0u) << updates[i];
    EXPECT_NE(updates[i].find(" samples/s ETA 0:00:"), std::string::npos)
        << updates[i];
    EXPECT_EQ(updates[i].find('\n'), i + 1 < updates.size()
                                         ? std::string::npos
                                         : updates[i].size() - 1)
        << updates[i];
  }
  EXPECT_EQ(out.rfind("\r\x1b[K", 0), 0u) << out;
}

TEST_F(DriverTest, ResumingContinuesTheRun) {
  ASSERT_EQ(run({"--params", params, "--batch", batch, "--steps", "3"}), 0)
      << err;
  std::string continuous = out;

  std::string save = path("resume.safetensors");
  ASSERT_EQ(run({"--params", params, "--batch", batch, "--steps", "2", "--save",
                 save}),
            0)
      << err;
  std::string first = out;
  // Saving over the file it was loaded from is safe.
  ASSERT_EQ(
      run({"--params", save, "--batch", batch, "--steps", "1", "--save", save}),
      0)
      << err;
  std::vector<double> all = parseLosses(continuous);
  std::vector<double> head = parseLosses(first);
  // The resumed run numbers its step 3.
  std::vector<double> tail = parseLosses(out, 3);
  ASSERT_EQ(all.size(), 3u);
  ASSERT_EQ(head.size(), 2u);
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(head[0], all[0]);
  EXPECT_EQ(head[1], all[1]);
  EXPECT_EQ(tail[0], all[2]);
}

TEST_F(DriverTest, RuntimeErrorNamesTheStep) {
  EXPECT_EQ(
      run({"--params", params, "--batch", batch, "--steps", "3"}, failingStep),
      2);
  EXPECT_EQ(parseLosses(out).size(), 1u) << out;
  EXPECT_EQ(
      err.rfind("train: runtime error during step 2: memopt_embedding", 0), 0u)
      << err;
}

TEST_F(DriverTest, StandaloneTrainBinary) {
  ASSERT_EQ(run({"--params", params, "--batch", batch, "--steps", "3"}), 0)
      << err;
  std::string log = path("log.txt");
  std::string command = std::string("'") + MEMOPT_TINY_TRAIN_PATH +
                        "' --params '" + params + "' --batch '" + batch +
                        "' --steps 3 > '" + log + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), out);

  std::string bad = std::string("'") + MEMOPT_TINY_TRAIN_PATH +
                    "' --steps 0 > '" + log + "' 2>&1";
  int status = std::system(bad.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
}

} // namespace
