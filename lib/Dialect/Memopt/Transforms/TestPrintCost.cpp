//===- TestPrintCost.cpp - print the cost model's figures -----------------===//
//
// Prints the cost of every op and the step estimate of every function with
// a body, for lit tests of the cost model (docs/Budget.md). Linear in the
// number of ops.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace memopt {
#define GEN_PASS_DEF_TESTPRINTCOSTPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct TestPrintCostPass
    : public memopt::impl::TestPrintCostPassBase<TestPrintCostPass> {
  using Base::Base;

  void runOnOperation() override {
    const DeviceProfile *profile = lookupDeviceProfile(device);
    if (!profile) {
      getOperation().emitError() << "--memopt-test-print-cost: unknown device '"
                                 << device.getValue() << "'";
      return signalPassFailure();
    }
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<FunctionOpInterface>()) {
      if (func.isExternal())
        continue;
      os << "cost of @" << func.getName() << " on " << profile->name << ":\n";
      int64_t index = 0;
      func->walk([&](Operation *op) {
        OpCost cost = getOpCost(op);
        if (cost.flops == 0 && cost.bytes == 0)
          return;
        os << "  op " << index++ << " " << op->getName();
        if (auto kernel = dyn_cast<KernelOp>(op))
          os << " " << kernel.getKernel();
        os << " flops=" << cost.flops << " bytes=" << cost.bytes;
        if (cost.isGemm)
          os << " gemm" << (cost.lowPrecision ? " low" : "")
             << " min=" << cost.gemmMinDim;
        os << llvm::format(" seconds=%.4e",
                           estimateOpSeconds(cost, *profile))
           << "\n";
      });
      StepCost step = estimateStepCost(func, *profile);
      os << "  step: flops=" << step.flops << " bytes=" << step.bytes
         << " kernels=" << step.numKernels
         << llvm::format(" seconds=%.4e gemm_seconds=%.4e", step.seconds,
                         step.gemmSeconds);
      if (step.transferBytes)
        os << " transfer_bytes=" << step.transferBytes
           << llvm::format(" transfer_seconds=%.4e exposed_seconds=%.4e",
                           step.transferSeconds, step.exposedTransferSeconds);
      os << "\n";
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
