//===- Pipelines.cpp - the memopt compilation pipeline --------------------===//
//
// The order of the passes, and why:
// 1. autodiff first: every later pass sees the whole training step (forward,
//    backward and update), which is what must fit in memory;
// 2. remat (only when a strategy is chosen): on tensors, after autodiff, so
//    that it sees which forward values the backward reads, and before
//    bufferize, whose buffers and lifetimes follow from its clones;
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
  if (options.remat != "none") {
    RematerializePassOptions remat;
    remat.strategy = options.remat;
    remat.budget = options.memoryBudget;
    remat.snapshots = options.rematSnapshots;
    pm.addPass(createRematerializePass(remat));
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
  Option<double> planTimeLimit{
      *this, "plan-time-limit",
      llvm::cl::desc("Seconds the buffer placer may search"),
      llvm::cl::init(1.0)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Remat strategy: none, blocks, sqrt, revolve, budget, "
                     "selective or auto"),
      llvm::cl::init("none")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes the planned arena may take (remat budget/auto)"),
      llvm::cl::init(0)};
  Option<int64_t> rematSnapshots{
      *this, "remat-snapshots",
      llvm::cl::desc("revolve: snapshot slots (0: logarithmic)"),
      llvm::cl::init(0)};
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
        options.remat = cl.remat;
        options.memoryBudget = cl.memoryBudget;
        options.rematSnapshots = cl.rematSnapshots;
        buildMemoptPipeline(pm, options);
      });
}
