//===- TestPrintMemoryAccount.cpp - print the memory account --------------===//
//
// Prints the MemoryAccount analysis of every function with a body, for lit
// tests of the figures the memory report of memopt-compile shows. Linear in
// the size of the printed account, plus the analysis itself.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/raw_ostream.h"

namespace memopt {
#define GEN_PASS_DEF_TESTPRINTMEMORYACCOUNTPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct TestPrintMemoryAccountPass
    : public memopt::impl::TestPrintMemoryAccountPassBase<
          TestPrintMemoryAccountPass> {
  using Base::Base;

  void runOnOperation() override {
    if (alignment < 1 || alignment > (int64_t(1) << 30)) {
      getOperation().emitError()
          << "--memopt-test-print-memory-account: alignment "
          << alignment.getValue() << " is not in [1, 2^30]";
      return signalPassFailure();
    }
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<FunctionOpInterface>()) {
      if (func.isExternal())
        continue;
      MemoryAccount account(func, alignment);
      os << "memory account of @" << func.getName() << " ("
         << account.getTimeline().size() << " ops):\n";
      account.print(os);
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
