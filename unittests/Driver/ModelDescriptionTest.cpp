//===- ModelDescriptionTest.cpp - the model description's one schema ------===//

#include "ModelDescription.h"

#include "memopt/runtime.h"

#include "gtest/gtest.h"

using namespace memopt::driver;

namespace {

ModelArgument makeArgument(std::string name, Role role, TensorDtype dtype,
                           std::vector<int64_t> shape) {
  ModelArgument argument;
  argument.name = std::move(name);
  argument.role = role;
  argument.dtype = dtype;
  argument.shape = std::move(shape);
  return argument;
}

/// A description with every field the writer writes set away from its
/// default.
ModelDescription makeFullDescription() {
  ModelDescription model;
  model.arenaBytes = 4096;
  model.hostArenaBytes = 1024;
  model.optimizer = {"adamw", 3e-4, 0.8, 0.95, 1e-6, 0.0, 0.1};
  model.lrSchedule = {memopt::runtime::LrScheduleKind::Cosine, 10, 100, 0.1};
  model.dataParallel = 2;
  model.mixedPrecision = "fp16";
  model.lossScale = LossScaleDescription{true, 1024.0, 3.0, 0.25, 7};
  ModelArgument ids =
      makeArgument("ids", Role::Input, TensorDtype::I64, {4, 8});
  ids.bound = 128;
  ids.batchDim = 0;
  ModelArgument labels =
      makeArgument("labels", Role::Label, TensorDtype::I64, {4, 8});
  labels.bound = 128;
  labels.ignoreIndex = -100;
  labels.batchDim = 0;
  ModelArgument master =
      makeArgument("w", Role::Param, TensorDtype::F32, {5000});
  master.shardOf = std::vector<int64_t>{100, 100};
  master.host = true;
  ModelArgument copy =
      makeArgument("w", Role::ParamCopy, TensorDtype::BF16, {100, 100});
  ModelArgument frozen =
      makeArgument("base", Role::Frozen, TensorDtype::U8,
                   {static_cast<int64_t>(memopt_nf4_packed_bytes(8 * 16))});
  frozen.nf4Of = std::vector<int64_t>{8, 16};
  model.arguments = {
      ids,
      labels,
      master,
      copy,
      frozen,
      makeArgument("optimizer.step", Role::Optim, TensorDtype::I64, {}),
      makeArgument("optimizer.loss_scale", Role::Optim, TensorDtype::F32, {}),
      makeArgument("loss", Role::Loss, TensorDtype::F32, {})};
  EvalDescription eval;
  eval.arenaBytes = 512;
  eval.arguments = {makeArgument("ids", Role::Input, TensorDtype::I64, {4, 8}),
                    makeArgument("loss", Role::Loss, TensorDtype::F32, {})};
  model.eval = eval;
  return model;
}

void expectSameArguments(const std::vector<ModelArgument> &read,
                         const std::vector<ModelArgument> &written) {
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE(written[i].name);
    EXPECT_EQ(read[i].name, written[i].name);
    EXPECT_EQ(read[i].role, written[i].role);
    EXPECT_EQ(read[i].dtype, written[i].dtype);
    EXPECT_EQ(read[i].shape, written[i].shape);
    EXPECT_EQ(read[i].bound, written[i].bound);
    EXPECT_EQ(read[i].ignoreIndex, written[i].ignoreIndex);
    EXPECT_EQ(read[i].batchDim, written[i].batchDim);
    EXPECT_EQ(read[i].shardOf, written[i].shardOf);
    EXPECT_EQ(read[i].nf4Of, written[i].nf4Of);
    EXPECT_EQ(read[i].host, written[i].host);
  }
}

TEST(ModelDescriptionTest, WriteReadsBack) {
  ModelDescription written = makeFullDescription();
  std::string json = writeModelDescription(written);
  ModelDescription read;
  std::string error;
  ASSERT_TRUE(parseModelDescription(json, read, error)) << error << "\n"
                                                        << json;
  EXPECT_EQ(read.arenaBytes, written.arenaBytes);
  EXPECT_EQ(read.hostArenaBytes, 1024u);
  EXPECT_EQ(read.optimizer.kind, "adamw");
  EXPECT_EQ(read.optimizer.lr, 3e-4);
  EXPECT_EQ(read.optimizer.beta1, 0.8);
  EXPECT_EQ(read.optimizer.beta2, 0.95);
  EXPECT_EQ(read.optimizer.eps, 1e-6);
  EXPECT_EQ(read.optimizer.weightDecay, 0.1);
  EXPECT_EQ(read.lrSchedule.kind, memopt::runtime::LrScheduleKind::Cosine);
  EXPECT_EQ(read.lrSchedule.warmupSteps, 10);
  EXPECT_EQ(read.lrSchedule.decaySteps, 100);
  EXPECT_EQ(read.lrSchedule.minRatio, 0.1);
  EXPECT_EQ(read.dataParallel, 2);
  EXPECT_EQ(read.mixedPrecision, "fp16");
  ASSERT_TRUE(read.lossScale);
  EXPECT_TRUE(read.lossScale->dynamic);
  EXPECT_EQ(read.lossScale->scale, 1024.0);
  EXPECT_EQ(read.lossScale->growthFactor, 3.0);
  EXPECT_EQ(read.lossScale->backoffFactor, 0.25);
  EXPECT_EQ(read.lossScale->growthInterval, 7);
  expectSameArguments(read.arguments, written.arguments);
  ASSERT_TRUE(read.eval);
  EXPECT_EQ(read.eval->arenaBytes, 512u);
  expectSameArguments(read.eval->arguments, written.eval->arguments);
  // What the reader derives: the loss, the step, the copy's master.
  EXPECT_EQ(read.lossIndex, 7u);
  EXPECT_EQ(read.stepIndex, 5u);
  EXPECT_EQ(read.lossScaleIndex, 6u);
  EXPECT_EQ(read.arguments[2].copyIndex, 3u);
  // Written again, the same text.
  EXPECT_EQ(writeModelDescription(read), json);
}

TEST(ModelDescriptionTest, OneArgumentPerLine) {
  std::string json = writeModelDescription(makeFullDescription());
  EXPECT_NE(json.find("\n    {\"name\":\"labels\",\"role\":\"label\",\"dtype\":"
                      "\"i64\",\"shape\":[4,8],\"bound\":128,\"ignore_index\":"
                      "-100,\"batch_dim\":0},\n"),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find("\"optimizer\": {\"kind\":\"adamw\",\"lr\":0.0003,"
                "\"betas\":[0.8,0.95],\"eps\":1e-06,\"weight_decay\":0.1}"),
      std::string::npos)
      << json;
}

TEST(ModelDescriptionTest, SgdWritesMomentum) {
  ModelDescription model = makeFullDescription();
  model.optimizer = {"sgd", 0.1, 0.9, 0.999, 1e-8, 0.9, 0.0};
  std::string json = writeModelDescription(model);
  EXPECT_EQ(json.find("betas"), std::string::npos) << json;
  ModelDescription read;
  std::string error;
  ASSERT_TRUE(parseModelDescription(json, read, error)) << error;
  EXPECT_EQ(read.optimizer.kind, "sgd");
  EXPECT_EQ(read.optimizer.momentum, 0.9);
}

TEST(ModelDescriptionTest, RejectsUnknownSpellings) {
  std::string json = writeModelDescription(makeFullDescription());
  ModelDescription read;
  std::string error;
  std::string badPrecision = json;
  badPrecision.replace(badPrecision.find("\"fp16\""), 6, "\"f16\"");
  EXPECT_FALSE(parseModelDescription(badPrecision, read, error));
  EXPECT_EQ(error, "'mixed_precision' is not \"bf16\" or \"fp16\"");
  std::string badOptimizer = json;
  badOptimizer.replace(badOptimizer.find("\"adamw\""), 7, "\"adam\"");
  EXPECT_FALSE(parseModelDescription(badOptimizer, read, error));
  EXPECT_EQ(error, "'optimizer' has a kind other than \"adamw\" or \"sgd\"");
}

TEST(ModelDescriptionTest, NamesRoundTrip) {
  for (Role role : {Role::Param, Role::Frozen, Role::Input, Role::Label,
                    Role::State, Role::Optim, Role::Loss, Role::ParamCopy}) {
    Role read;
    ASSERT_TRUE(parseRole(getRoleName(role), read));
    EXPECT_EQ(read, role);
  }
  for (TensorDtype dtype :
       {TensorDtype::F32, TensorDtype::F16, TensorDtype::BF16, TensorDtype::I64,
        TensorDtype::I32, TensorDtype::Bool, TensorDtype::U8}) {
    TensorDtype read;
    ASSERT_TRUE(parseModelDtype(getModelDtypeName(dtype), read));
    EXPECT_EQ(read, dtype);
  }
}

} // namespace
