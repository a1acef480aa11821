//===- CostModelTest.cpp - the cost model against hand-computed values ----===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace memopt;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() {
    context.loadDialect<MemoptDialect, arith::ArithDialect, func::FuncDialect,
                        scf::SCFDialect>();
  }

  /// Parses `body` as the body of `func.func @f` and returns its first op.
  Operation *parseFirstOp(llvm::StringRef module) {
    parsed = parseSourceString<ModuleOp>(module, &context);
    EXPECT_TRUE(parsed);
    auto func = cast<func::FuncOp>(parsed->getBody()->front());
    return &func.getBody().front().front();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> parsed;
};

const DeviceProfile &device(llvm::StringRef name) {
  const DeviceProfile *profile = lookupDeviceProfile(name);
  EXPECT_NE(profile, nullptr) << name.str();
  return *profile;
}

TEST(DeviceProfileTest, NamedProfilesAndBudgets) {
  for (llvm::StringRef name : {"a100-40gb", "a100-80gb", "h100-80gb",
                               "h200-141gb", "gh200-96gb", "rtx4090-24gb"})
    EXPECT_NE(lookupDeviceProfile(name), nullptr) << name.str();
  EXPECT_EQ(lookupDeviceProfile("H100-80GB"), lookupDeviceProfile("h100-80gb"));
  EXPECT_EQ(lookupDeviceProfile("v100"), nullptr);

  const DeviceProfile &h100 = device("h100-80gb");
  EXPECT_EQ(h100.memoryBytes, 80 * kGiB);
  EXPECT_DOUBLE_EQ(h100.halfFlops, 989.5e12);
  EXPECT_DOUBLE_EQ(h100.bandwidth, 3.35e12);
  // 1 GiB + 5% of 80 GiB = 5 GiB reserved.
  EXPECT_EQ(getDeviceReserveBytes(h100), 5 * kGiB);
  EXPECT_EQ(getDefaultBudgetBytes(h100), 75 * kGiB);
  // 24 GiB - 1 GiB - 1.2 GiB.
  EXPECT_EQ(getDefaultBudgetBytes(device("rtx4090-24gb")),
            24 * kGiB - kGiB - 24 * kGiB / 20);
}

TEST(DeviceProfileTest, HostLinks) {
  // Each direction of the datasheets' interconnect figure.
  EXPECT_EQ(device("a100-80gb").hostLink, "PCIe 4.0 x16");
  EXPECT_DOUBLE_EQ(device("a100-80gb").hostLinkBandwidth, 32e9);
  EXPECT_EQ(device("h100-80gb").hostLink, "PCIe 5.0 x16");
  EXPECT_DOUBLE_EQ(device("h200-141gb").hostLinkBandwidth, 64e9);
  EXPECT_EQ(device("gh200-96gb").hostLink, "NVLink-C2C");
  EXPECT_DOUBLE_EQ(device("gh200-96gb").hostLinkBandwidth, 450e9);
  EXPECT_DOUBLE_EQ(device("rtx4090-24gb").hostLinkBandwidth, 32e9);
  // 64 GB over PCIe 5.0 x16: one second; over NVLink-C2C, 64/450 s.
  EXPECT_DOUBLE_EQ(
      estimateHostTransferSeconds(int64_t(64e9), device("h100-80gb")), 1.0);
  EXPECT_DOUBLE_EQ(
      estimateHostTransferSeconds(int64_t(64e9), device("gh200-96gb")),
      64.0 / 450.0);
  EXPECT_EQ(estimateHostTransferSeconds(0, device("rtx4090-24gb")), 0.0);
}

TEST(CostModelOptionsTest, GemmEfficiencyCurve) {
  CostModelOptions options;
  EXPECT_DOUBLE_EQ(getGemmEfficiency(64, options), 0.375);
  EXPECT_DOUBLE_EQ(getGemmEfficiency(192, options), 0.5625);
  EXPECT_NEAR(getGemmEfficiency(8192, options), 0.744186, 1e-6);
  EXPECT_DOUBLE_EQ(getGemmEfficiency(0, options), 0.75);
  // Smaller GEMMs are never faster per FLOP.
  for (int64_t d = 1; d < 4096; d *= 2)
    EXPECT_LT(getGemmEfficiency(d, options), getGemmEfficiency(2 * d, options));
}

TEST_F(CostModelTest, MatmulWithSharedWeights) {
  // [4, 16, 64] x [192, 64]^T: 4·16·192 outputs of length 64.
  Operation *op = parseFirstOp(R"mlir(
    func.func @f(%x: tensor<4x16x64xf32>, %w: tensor<192x64xf32>) {
      %y = memopt.matmul %x, %w transpose_rhs : tensor<4x16x64xf32>, tensor<192x64xf32> -> tensor<4x16x192xf32>
      return
    })mlir");
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.flops, 1572864);
  EXPECT_EQ(cost.bytes, (4096 + 12288 + 12288) * 4);
  EXPECT_TRUE(cost.isGemm);
  EXPECT_FALSE(cost.lowPrecision);
  // M = 4·16 = 64 (the batch folds into M), N = 192, K = 64.
  EXPECT_EQ(cost.gemmMinDim, 64);
}

TEST_F(CostModelTest, BatchedAndLowPrecisionMatmul) {
  Operation *op = parseFirstOp(R"mlir(
    func.func @f(%q: tensor<2x4x32x16xbf16>, %k: tensor<2x4x32x16xbf16>) {
      %s = memopt.matmul %q, %k transpose_rhs : tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16> -> tensor<2x4x32x32xf32>
      return
    })mlir");
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.flops, 2 * (2 * 4 * 32 * 32) * 16);
  EXPECT_EQ(cost.bytes, 2 * 4096 * 2 + 8192 * 4);
  EXPECT_TRUE(cost.lowPrecision);
  EXPECT_EQ(cost.gemmMinDim, 16);
}

TEST_F(CostModelTest, ElementwiseAndDataMovement) {
  Operation *add = parseFirstOp(R"mlir(
    func.func @f(%a: tensor<1000xf32>) {
      %b = memopt.add %a, %a : tensor<1000xf32>
      %c = memopt.reshape %b : tensor<1000xf32> to tensor<10x100xf32>
      return
    })mlir");
  OpCost addCost = getOpCost(add);
  EXPECT_EQ(addCost.flops, 1000);
  EXPECT_EQ(addCost.bytes, 12000);
  EXPECT_FALSE(addCost.isGemm);
  OpCost reshapeCost = getOpCost(add->getNextNode());
  EXPECT_EQ(reshapeCost.flops, 0);
  EXPECT_EQ(reshapeCost.bytes, 8000);
  EXPECT_EQ(getOpCost(add->getNextNode()->getNextNode()).bytes, 0);
}

TEST(RooflineTest, ComputeBoundGemm) {
  // 1024³ FP32 GEMM on an A100: 2^31 FLOP at 19.5 TFLOP/s · 0.75 ·
  // 1024/1088 = 156.0 µs; its 12 MiB take 10.1 µs at 80% of 1555 GB/s.
  OpCost gemm;
  gemm.flops = int64_t(2) << 30;
  gemm.bytes = 3 * 4 * (int64_t(1) << 20);
  gemm.isGemm = true;
  gemm.gemmMinDim = 1024;
  const DeviceProfile &a100 = device("a100-40gb");
  EXPECT_NEAR(estimateOpSeconds(gemm, a100), 160.01e-6, 0.01e-6);
  // In bf16 it runs on tensor cores, 16x the FP32 rate.
  gemm.lowPrecision = true;
  EXPECT_NEAR(estimateOpSeconds(gemm, a100), 10.1149e-6 + 4e-6, 0.01e-6);
  // TF32 for FP32 operands when asked.
  gemm.lowPrecision = false;
  CostModelOptions tf32;
  tf32.fp32Math = Fp32MathMode::Tf32;
  EXPECT_NEAR(estimateOpSeconds(gemm, a100, tf32), 19.5 / 156 * 156.01e-6 +
                                                       4e-6,
              0.01e-6);
}

TEST(RooflineTest, MemoryBoundElementwise) {
  // An add of 2^20 floats on an H100 moves 12 MiB: 4.70 µs at 80% of
  // 3.35 TB/s, against 0.03 µs of arithmetic.
  OpCost add;
  add.flops = int64_t(1) << 20;
  add.bytes = 12 * (int64_t(1) << 20);
  EXPECT_NEAR(estimateOpSeconds(add, device("h100-80gb")), 8.6951e-6,
              0.0001e-6);
  EXPECT_EQ(estimateOpSeconds(OpCost(), device("h100-80gb")), 0.0);
}

TEST_F(CostModelTest, StepCountsLoopTrips) {
  // An add inside a loop of 4 trips and one outside: 5 executions.
  Operation *first = parseFirstOp(R"mlir(
    func.func @f(%a: tensor<256xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %b = memopt.add %a, %a : tensor<256xf32>
      }
      %c = memopt.add %a, %a : tensor<256xf32>
      return
    })mlir");
  Operation *func = first->getParentOp();
  const DeviceProfile &h100 = device("h100-80gb");
  StepCost step = estimateStepCost(func, h100);
  EXPECT_EQ(step.flops, 5 * 256);
  EXPECT_EQ(step.bytes, 5 * 3 * 1024);
  EXPECT_EQ(step.numKernels, 5);
  OpCost one;
  one.flops = 256;
  one.bytes = 3 * 1024;
  EXPECT_DOUBLE_EQ(step.seconds, 5 * estimateOpSeconds(one, h100));
  EXPECT_EQ(step.gemmSeconds, 0.0);
}

} // namespace
