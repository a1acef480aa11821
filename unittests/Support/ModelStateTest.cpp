//===- ModelStateTest.cpp - tests of the model-state account --------------===//

#include "memopt/Support/ModelState.h"

#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace memopt;

namespace {

StateTensor tensor(std::string name, int64_t elements, std::string dtype,
                   int64_t bytes) {
  return StateTensor{std::move(name), elements, std::move(dtype), bytes};
}

const MemoryPool &pool(const ModelStateAccount &account, llvm::StringRef name) {
  for (const MemoryPool &p : account.pools)
    if (p.name == name)
      return p;
  ADD_FAILURE() << "no pool " << name.str();
  return account.pools.front();
}

// AdamW in f32 keeps 16 bytes per parameter (weight 4, gradient 4, two
// moments 8), plus one step counter.
TEST(ModelStateTest, AdamWFp32IsSixteenBytesPerParameter) {
  std::vector<StateTensor> params = {tensor("fc1.weight", 128 * 64, "f32", 4),
                                     tensor("fc1.bias", 128, "f32", 4)};
  ModelStateAccount account =
      computeModelStateAccount(params, {}, OptimizerKind::AdamW);
  int64_t n = 128 * 64 + 128;
  EXPECT_EQ(account.numParameters, n);
  EXPECT_EQ(account.numParameterTensors, 2);
  EXPECT_EQ(pool(account, "weights").totalBytes(), 4 * n);
  EXPECT_EQ(pool(account, "gradients").totalBytes(), 4 * n);
  EXPECT_EQ(pool(account, "optimizer state").bytesByDtype.at("f32"), 8 * n);
  EXPECT_EQ(pool(account, "optimizer state").bytesByDtype.at("i64"), 8);
  EXPECT_EQ(account.totalBytes(), 16 * n + 8);
}

// A 7B-parameter model in f32 with AdamW: 112 GB of model state
// (REFERENCE.md's memory-per-parameter table).
TEST(ModelStateTest, SevenBillionParametersNeed112GB) {
  std::vector<StateTensor> params = {tensor("w", 7'000'000'000, "f32", 4)};
  ModelStateAccount account =
      computeModelStateAccount(params, {}, OptimizerKind::AdamW);
  EXPECT_EQ(account.totalBytes(), 112'000'000'000 + 8);
}

// SGD with momentum keeps one buffer; bf16 parameters keep their state in
// bf16 (pure low precision, 2 + 2 + 2 bytes per parameter).
TEST(ModelStateTest, SgdBf16) {
  std::vector<StateTensor> params = {tensor("w", 1000, "bf16", 2)};
  ModelStateAccount account =
      computeModelStateAccount(params, {}, OptimizerKind::Sgd);
  EXPECT_EQ(pool(account, "optimizer state").totalBytes(), 2000);
  EXPECT_EQ(pool(account, "optimizer state").bytesByDtype.count("i64"), 0u);
  EXPECT_EQ(account.totalBytes(), 6000);
}

// Mixed precision with AdamW: a bf16 copy (2), the f32 master (4), the f32
// gradient the optimizer reads (4) and two f32 moments (8): 18 bytes per
// parameter, REFERENCE.md's "FP32 master grads" row.
TEST(ModelStateTest, MixedPrecisionBf16IsEighteenBytesPerParameter) {
  StateTensor w = tensor("w", 1000, "f32", 4);
  w.copyDtype = "bf16";
  w.copyElementBytes = 2;
  std::vector<StateTensor> params = {w, tensor("ln.weight", 10, "f32", 4)};
  ModelStateAccount account =
      computeModelStateAccount(params, {}, OptimizerKind::AdamW);
  EXPECT_EQ(pool(account, "weights").bytesByDtype.at("bf16"), 2000);
  EXPECT_EQ(pool(account, "weights").bytesByDtype.at("f32"), 40);
  EXPECT_EQ(pool(account, "master weights").totalBytes(), 4000);
  EXPECT_EQ(pool(account, "gradients").bytesByDtype.at("f32"), 4040);
  EXPECT_EQ(account.totalBytes(), 18 * 1000 + 16 * 10 + 8);
  EXPECT_EQ(account.pools.back().name, "buffers");
}

TEST(ModelStateTest, BuffersAreNotTrained) {
  std::vector<StateTensor> params = {tensor("w", 10, "f32", 4)};
  std::vector<StateTensor> buffers = {tensor("bn.running_mean", 16, "f32", 4),
                                      tensor("bn.running_var", 16, "f32", 4)};
  ModelStateAccount account =
      computeModelStateAccount(params, buffers, OptimizerKind::Sgd);
  EXPECT_EQ(account.numParameters, 10);
  EXPECT_EQ(pool(account, "buffers").totalBytes(), 128);
  EXPECT_EQ(pool(account, "gradients").totalBytes(), 40);
}

TEST(ModelStateTest, ParseOptimizerKind) {
  EXPECT_EQ(parseOptimizerKind("adamw"), OptimizerKind::AdamW);
  EXPECT_EQ(parseOptimizerKind("sgd"), OptimizerKind::Sgd);
  EXPECT_EQ(parseOptimizerKind("adam"), std::nullopt);
}

TEST(ModelStateTest, PrintedTableHasExactBytes) {
  std::vector<StateTensor> params = {tensor("w", 100, "f32", 4)};
  std::string text;
  llvm::raw_string_ostream os(text);
  printModelStateAccount(
      os, computeModelStateAccount(params, {}, OptimizerKind::AdamW));
  EXPECT_NE(text.find("parameters       100 in 1 tensors"), std::string::npos)
      << text;
  EXPECT_NE(text.find("1608 B"), std::string::npos) << text;
  EXPECT_NE(text.find("16.08 B"), std::string::npos) << text;
}

} // namespace
