//===- PrintModelState.cpp - print the model-state account ----------------===//
//
// Prints, for each `memopt.loss` function, the bytes the training step keeps
// alive across steps whatever the activations: weights, gradients, optimizer
// state and buffers (ModelStateAnalysis). Linear in the number of arguments.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/ModelStateAnalysis.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/raw_ostream.h"

namespace memopt {
#define GEN_PASS_DEF_PRINTMODELSTATEPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct PrintModelStatePass
    : public memopt::impl::PrintModelStatePassBase<PrintModelStatePass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<OptimizerKind> kind = parseOptimizerKind(optimizer);
    if (!kind) {
      getOperation().emitError()
          << "unknown optimizer '" << optimizer
          << "' for --memopt-print-model-state (expected adamw or sgd)";
      return signalPassFailure();
    }
    llvm::raw_ostream &os = llvm::outs();
    getOperation().walk([&](FunctionOpInterface func) {
      if (!func->hasAttr(MemoptDialect::kLossAttrName))
        return;
      os << "model state of @" << func.getName() << " (optimizer "
         << optimizer << "):\n";
      ModelStateAnalysis analysis(func);
      printModelStateAccount(os, analysis.getAccount(*kind));
    });
    markAllAnalysesPreserved();
  }
};
} // namespace
