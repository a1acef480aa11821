//===- Pipelines.cpp - the memopt compilation pipeline --------------------===//
//
// The order of the passes, and why:
// 1. autodiff first: every later pass sees the whole training step (forward,
//    backward and update), which is what must fit in memory;
// 2. accumulate (only with micro-batches > 1): after autodiff (and remat),
//    so the loop wraps the whole forward and backward, and before bufferize,
//    so that every body value gets a buffer that lives one iteration;
// 3. bufferize: from here on every value is a buffer with a lifetime;
// 4. plan-buffers: offsets in one arena from the buffers' live ranges;
// 5. verify-plan: an independent check of the plan before code is generated.
//
//===----------------------------------------------------------------------===//

#include "memopt/Pipelines/Pipelines.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace memopt;

void memopt::buildMemoptPipeline(OpPassManager &pm,
                                 const MemoptPipelineOptions &options) {
  AutodiffPassOptions autodiff;
  autodiff.optimizer = options.optimizer;
  autodiff.lr = options.lr;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.eps = options.eps;
  autodiff.weightDecay = options.weightDecay;
  autodiff.momentum = options.momentum;
  pm.addPass(createAutodiffPass(autodiff));
  if (options.microBatches != 1) {
    AccumulatePassOptions accumulate;
    accumulate.microBatches = options.microBatches;
    accumulate.allowBatchNorm = options.accumulateAllowBatchNorm;
    pm.addPass(createAccumulatePass(accumulate));
  }
  pm.addPass(createBufferizePass());
  PlanBuffersPassOptions plan;
  plan.timeLimit = options.planTimeLimit;
  pm.addPass(createPlanBuffersPass(plan));
  pm.addPass(createVerifyPlanPass());
}

namespace {
/// The textual options of --memopt-pipeline.
struct PipelineCLOptions : public PassPipelineOptions<PipelineCLOptions> {
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Gradient accumulation: micro-batches per step"),
      llvm::cl::init(1)};
  Option<bool> accumulateAllowBatchNorm{
      *this, "accumulate-allow-batch-norm",
      llvm::cl::desc("Accept batch norm's per-micro-batch statistics"),
      llvm::cl::init(false)};
  Option<double> planTimeLimit{
      *this, "plan-time-limit",
      llvm::cl::desc("Seconds the buffer placer may search"),
      llvm::cl::init(1.0)};
};
} // namespace

void memopt::registerMemoptPipelines() {
  PassPipelineRegistration<PipelineCLOptions>(
      "memopt-pipeline",
      "The training pipeline: autodiff, bufferize, plan and verify buffers",
      [](OpPassManager &pm, const PipelineCLOptions &cl) {
        MemoptPipelineOptions options;
        options.optimizer = cl.optimizer;
        options.lr = cl.lr;
        options.beta1 = cl.beta1;
        options.beta2 = cl.beta2;
        options.eps = cl.eps;
        options.weightDecay = cl.weightDecay;
        options.momentum = cl.momentum;
        options.planTimeLimit = cl.planTimeLimit;
        options.microBatches = cl.microBatches;
        options.accumulateAllowBatchNorm = cl.accumulateAllowBatchNorm;
        buildMemoptPipeline(pm, options);
      });
}
