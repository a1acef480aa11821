//===- PlanBuffers.cpp - static arena offsets for @train_step -------------===//
//
// Static buffer planning, as in TVM's and XLA's static memory planners and
// MiniMalloc: every `memref.alloc` of the training step gets a fixed offset in
// one arena that the runtime allocates once.
//
// 1. BufferLiveness gives each buffer an inclusive interval [a, b] of op
//    indices in program order; the placement problem uses the half-open
//    lifetime [a, b + 1) and the buffer's byte size.
// 2. memopt::placeBuffers solves it: first-fit in four orders (O(n log n log T)
//    each, T distinct lifetime ends), stopping at the lower bound, then, for at
//    most 2000 buffers and within `time-limit`, an exact branch and bound
//    (exponential in the worst case, bounded by the time limit).
// 3. memopt::checkPlacement, which shares no code with the placer, verifies
//    the result (O(n log n)) before anything is written; a rejection is a
//    planner bug and fails the pass.
//    With reuse=false, memopt::stackBuffers gives every buffer its own
//    bytes instead, back to back in program order (docs/BufferReuse.md).
// 4. The offsets go on the allocs (`memopt.offset`), the arena size on the
//    function (`memopt.arena_bytes`).
//
// With optimizer offload (docs/Offload.md) the buffers in host memory
// (`memopt.memory = "host"`) are placed the same way in an arena of their
// own, `memopt.host_arena_bytes`.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Planning/Placement.h"
#include "memopt/Planning/PlanChecker.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "memopt-plan-buffers"

namespace memopt {
#define GEN_PASS_DEF_PLANBUFFERSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

/// The largest buffer and alignment placeBuffers() accepts.
static constexpr int64_t kMaxBufferBytes = int64_t(1) << 40;
static constexpr int64_t kMaxAlignment = int64_t(1) << 30;

namespace {
struct PlanBuffersPass
    : public memopt::impl::PlanBuffersPassBase<PlanBuffersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment < 1 || alignment > kMaxAlignment) {
      module.emitError() << "--memopt-plan-buffers: alignment "
                         << alignment.getValue() << " is not in [1, 2^30]";
      return signalPassFailure();
    }
    if (!(timeLimit >= 0)) {
      module.emitError() << "--memopt-plan-buffers: time-limit must be a "
                            "non-negative number of seconds";
      return signalPassFailure();
    }
    FailureOr<FunctionOpInterface> step = findTrainStep(module, "plan");
    if (failed(step) || failed(planFunction(*step)))
      return signalPassFailure();
    // Only attributes changed: the live intervals still hold.
    markAnalysesPreserved<BufferLiveness>();
  }

  /// Places the buffers of `func` and writes the offsets and the arena
  /// sizes: one arena per memory (docs/Offload.md), the host's only when
  /// it has buffers.
  LogicalResult planFunction(FunctionOpInterface func) {
    const auto &liveness = getChildAnalysis<BufferLiveness>(func);
    SmallVector<const BufferInterval *> device, host;
    for (const BufferInterval &interval : liveness.getBuffers())
      (getMemoryKind(memref::AllocOp(interval.alloc)) == MemoryKind::Host
           ? host
           : device)
          .push_back(&interval);
    if (failed(planArena(func, device, MemoptDialect::kArenaBytesAttrName)))
      return failure();
    if (!host.empty() &&
        failed(planArena(func, host, MemoptDialect::kHostArenaBytesAttrName)))
      return failure();
    return success();
  }

  /// Places `buffers` in one arena whose size goes in `arenaAttrName`.
  LogicalResult planArena(FunctionOpInterface func,
                          ArrayRef<const BufferInterval *> buffers,
                          StringRef arenaAttrName) {
    std::vector<Buffer> problem;
    bool valid = true;
    for (const BufferInterval *interval : buffers) {
      memref::AllocOp alloc = interval->alloc;
      MemRefType type = alloc.getType();
      if (!interval->sizeBytes) {
        InFlightDiagnostic diag = alloc.emitOpError();
        if (!type.hasStaticShape())
          diag << "has a dynamic shape (" << type
               << "); --memopt-plan-buffers needs static shapes";
        else if (type.getLayout().isIdentity() &&
                 type.getElementType().isIntOrIndexOrFloat())
          // A plain static memref has a size unless it overflows 64 bits.
          diag << "(" << type
               << ") is 2^63 bytes or more, above the 2^40-byte limit of "
                  "--memopt-plan-buffers";
        else
          diag << "has no known byte size (" << type
               << "); --memopt-plan-buffers needs a static layout and an "
                  "integer, float, index, complex or vector element type";
        valid = false;
        continue;
      }
      if (*interval->sizeBytes > kMaxBufferBytes) {
        alloc.emitOpError()
            << "is " << *interval->sizeBytes
            << " bytes, above the 2^40-byte limit of --memopt-plan-buffers";
        valid = false;
        continue;
      }
      problem.push_back({interval->id, interval->start, interval->end + 1,
                         *interval->sizeBytes});
    }
    if (!valid)
      return failure();

    Placement placement;
    if (reuse) {
      PlacementOptions options;
      options.alignment = alignment;
      options.timeLimitSeconds = timeLimit;
      placement = placeBuffers(problem, options);
    } else {
      placement = stackBuffers(problem, alignment);
    }
    LLVM_DEBUG(llvm::dbgs()
               << "@" << func.getName() << " " << arenaAttrName << ": "
               << problem.size() << " buffers, arena " << placement.arenaSize
               << ", LB " << placement.lowerBound << ", method "
               << placement.method
               << (placement.provenOptimal ? ", optimal" : "") << "\n");
    if (std::optional<std::string> error = checkPlacement(
            problem, placement.offsets, placement.arenaSize, alignment))
      return func.emitOpError()
             << "buffer plan rejected by the independent checker (a planner "
                "bug): "
             << *error;

    Builder builder(func.getContext());
    for (auto [interval, offset] : llvm::zip_equal(buffers, placement.offsets))
      memref::AllocOp(interval->alloc)
          ->setAttr(MemoptDialect::kOffsetAttrName,
                    builder.getI64IntegerAttr(offset));
    func->setAttr(arenaAttrName,
                  builder.getI64IntegerAttr(placement.arenaSize));
    numBuffers += problem.size();
    lowerBoundBytes += placement.lowerBound;
    arenaBytes += placement.arenaSize;
    return success();
  }
};
} // namespace
