//===- TestPrintLiveness.cpp - print the live interval of each buffer -----===//
//
// Prints the BufferLiveness analysis of every function with a body, one line
// per `memref.alloc`, for lit tests of the analysis that buffer planning
// relies on (as upstream's -test-print-liveness does for mlir::Liveness).
// Linear in the size of the IR, plus the analysis itself.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/raw_ostream.h"

namespace memopt {
#define GEN_PASS_DEF_TESTPRINTBUFFERLIVENESSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct TestPrintBufferLivenessPass
    : public memopt::impl::TestPrintBufferLivenessPassBase<
          TestPrintBufferLivenessPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<FunctionOpInterface>()) {
      if (func.isExternal())
        continue;
      auto &liveness = getChildAnalysis<BufferLiveness>(func);
      os << "liveness of @" << func.getName() << " (" << liveness.getNumOps()
         << " ops):\n";
      liveness.print(os);
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
