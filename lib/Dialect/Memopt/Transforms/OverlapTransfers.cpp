//===- OverlapTransfers.cpp - copies that run while the device computes --===//
//
// On the bufferized @train_step (docs/Offload.md): every `memopt.transfer`
// kernel becomes the start of an asynchronous copy (`slot = N` in its
// attributes) followed by a `memopt.transfer_wait` on the same slot, and
// the two move apart so that ops run between them:
//
//   memopt.kernel "memopt.transfer" ins(%h) outs(%d) with {slot = 0, ...}
//   ... ops that touch neither %h nor %d ...
//   memopt.transfer_wait %h, %d slot 0
//   memopt.kernel "..." ins(%d ...)
//
// First the wait sinks, then the start rises, one op at a time, past ops
// that touch neither buffer (nor any view of their allocation), until the
// ops passed compute at least as long as the copy takes on the device's
// host link (the cost model's roofline and link times). Neither passes
// another copy's start or wait, so one copy is in flight at a time (the
// runtime's copies share one stream anyway), nor leaves its block. A copy
// to the host (a saved activation, a gradient) thus keeps its device buffer
// only until enough compute has run; a copy to the device (an activation
// for the backward, a weight) starts one stage before its reader.
//
// The wait reads both buffers, so liveness keeps them for the whole flight
// and the plan that follows is exact under the overlap. Allocations are
// passed freely (the start takes its target's along) and deallocations of
// the two buffers follow the wait.
//
// Slots are reused: a copy takes the smallest slot no copy in flight holds.
//
// Linear in the number of ops times the distance each start or wait moves.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

#include <set>

namespace memopt {
#define GEN_PASS_DEF_OVERLAPTRANSFERSPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {

/// The two buffers of one copy.
struct CopyBuffers {
  Value source, target;
  /// Their allocations (or the arguments they are views of).
  Value sourceRoot, targetRoot;

  explicit CopyBuffers(TransferWaitOp wait)
      : source(wait.getSource()), target(wait.getTarget()),
        sourceRoot(getBufferRoot(source)), targetRoot(getBufferRoot(target)) {}

  /// Whether `op` defines either buffer or either allocation.
  bool isDefinedBy(Operation *op) const {
    return llvm::any_of(op->getResults(), [&](Value result) {
      return result == source || result == target || result == sourceRoot ||
             result == targetRoot;
    });
  }

  /// Whether `dealloc` frees either allocation.
  bool isFreedBy(memref::DeallocOp dealloc) const {
    Value root = getBufferRoot(dealloc.getMemref());
    return root == sourceRoot || root == targetRoot;
  }

  /// Whether the copy may not be in flight across `op`.
  bool isBlockedBy(Operation *op) const {
    return isDefinedBy(op) || racesWithCopy(op, source, target);
  }
};

struct OverlapTransfersPass
    : public memopt::impl::OverlapTransfersPassBase<OverlapTransfersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    profile = lookupDeviceProfile(device);
    if (!profile) {
      module.emitError() << "--memopt-overlap-transfers: unknown device '"
                         << device << "'";
      return signalPassFailure();
    }
    FailureOr<FunctionOpInterface> step =
        findTrainStep(module, "overlap the copies of");
    if (failed(step))
      return signalPassFailure();
    FunctionOpInterface func = *step;

    bool hostKernels = false;
    SmallVector<KernelOp> copies;
    func.walk([&](KernelOp kernel) {
      hostKernels |= runsOnHost(kernel);
      if (kernel.getKernel() == TransferOp::getOperationName() &&
          !kernel.getOpAttributes().contains("slot"))
        copies.push_back(kernel);
    });
    if (copies.empty())
      return markAllAnalysesPreserved();

    // Each copy a slot of its own for now: the starts are recognized by
    // it while they move; assignSlots reuses them after.
    OpBuilder builder(&getContext());
    SmallVector<TransferWaitOp> waits;
    for (auto [index, copy] : llvm::enumerate(copies)) {
      setSlot(copy, index);
      builder.setInsertionPointAfter(copy);
      waits.push_back(
          TransferWaitOp::create(builder, copy.getLoc(), copy.getIns()[0],
                                 copy.getOuts()[0], index, hostKernels));
    }
    // All waits first: a copy to the host releases its device buffer as
    // early as the compute allows, before the next copy's start rises.
    for (auto [copy, wait] : llvm::zip_equal(copies, waits))
      sinkWait(copy, wait);
    for (auto [copy, wait] : llvm::zip_equal(copies, waits))
      raiseStart(copy, wait);
    assignSlots(func);
    numCopies += copies.size();
  }

  /// The seconds the device (or, for a host kernel, the host) spends in
  /// `op`, loops unrolled.
  double getSeconds(Operation *op) const {
    double seconds = 0;
    int64_t outer = getRunsPerStep(op);
    op->walk([&](KernelOp kernel) {
      double once = estimateRunSeconds(getOpCost(kernel), runsOnHost(kernel),
                                       *profile, costOptions);
      seconds += once * static_cast<double>(getRunsPerStep(kernel) /
                                            std::max<int64_t>(1, outer));
    });
    return seconds;
  }

  double getCopySeconds(KernelOp copy) const {
    return estimateHostTransferSeconds(
        getCopyBytes(cast<ShapedType>(copy.getOuts()[0].getType())), *profile);
  }

  static bool isCopyBoundary(Operation *op) {
    return getTransferSlot(op) || isa<TransferWaitOp>(op) ||
           op->hasTrait<OpTrait::IsTerminator>();
  }

  /// Moves `wait` down past ops that touch neither buffer until they cover
  /// the copy's time; the buffers' deallocations follow it.
  void sinkWait(KernelOp copy, TransferWaitOp wait) {
    CopyBuffers buffers(wait);
    double remaining = getCopySeconds(copy);
    Operation *after = nullptr;
    SmallVector<Operation *> deallocs;
    for (Operation *next = wait->getNextNode(); next && remaining > 0;
         next = next->getNextNode()) {
      if (auto dealloc = dyn_cast<memref::DeallocOp>(next)) {
        if (buffers.isFreedBy(dealloc))
          deallocs.push_back(dealloc);
        continue;
      }
      if (isa<memref::AllocOp>(next))
        continue;
      if (isCopyBoundary(next) || buffers.isBlockedBy(next))
        break;
      remaining -= getSeconds(next);
      after = next;
    }
    if (!after)
      return;
    wait->moveAfter(after);
    ++numMoved;
    Operation *last = wait;
    for (Operation *dealloc : deallocs)
      if (dealloc->isBeforeInBlock(wait)) {
        dealloc->moveAfter(last);
        last = dealloc;
      }
  }

  /// Moves `copy` up past ops that touch neither buffer until they, with
  /// the ops its wait sank past, cover the copy's time; the target's
  /// allocation comes along.
  void raiseStart(KernelOp copy, TransferWaitOp wait) {
    CopyBuffers buffers(wait);
    double remaining = getCopySeconds(copy);
    for (Operation *op = copy->getNextNode(); op && op != wait.getOperation();
         op = op->getNextNode())
      remaining -= getSeconds(op);
    Operation *before = nullptr;
    Operation *targetAlloc = nullptr;
    for (Operation *prev = copy->getPrevNode(); prev && remaining > 0;
         prev = prev->getPrevNode()) {
      // The target's allocation comes along; any other passes.
      if (isa<memref::AllocOp>(prev) &&
          prev->getResult(0) != buffers.sourceRoot) {
        if (prev->getResult(0) == buffers.target)
          targetAlloc = prev;
        continue;
      }
      if (auto dealloc = dyn_cast<memref::DeallocOp>(prev);
          dealloc && !buffers.isFreedBy(dealloc))
        continue;
      if (isCopyBoundary(prev) || buffers.isBlockedBy(prev))
        break;
      remaining -= getSeconds(prev);
      before = prev;
    }
    if (!before)
      return;
    copy->moveBefore(before);
    ++numMoved;
    if (targetAlloc && copy->isBeforeInBlock(targetAlloc))
      targetAlloc->moveBefore(copy);
  }

  static void setSlot(KernelOp copy, int64_t slot) {
    NamedAttrList attrs(copy.getOpAttributes());
    attrs.set("slot", Builder(copy.getContext()).getI64IntegerAttr(slot));
    copy.setOpAttributesAttr(attrs.getDictionary(copy.getContext()));
  }

  /// Gives each copy the smallest slot that no copy in flight holds.
  static void assignSlots(FunctionOpInterface func) {
    std::set<int64_t> free;
    int64_t next = 0;
    DenseMap<std::pair<Value, Value>, SmallVector<int64_t>> inFlight;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (auto kernel = dyn_cast<KernelOp>(op); kernel && getTransferSlot(op)) {
        int64_t slot;
        if (free.empty()) {
          slot = next++;
        } else {
          slot = *free.begin();
          free.erase(free.begin());
        }
        setSlot(kernel, slot);
        inFlight[{kernel.getIns()[0], kernel.getOuts()[0]}].push_back(slot);
        return;
      }
      if (auto wait = dyn_cast<TransferWaitOp>(op)) {
        SmallVector<int64_t> &slots =
            inFlight[{wait.getSource(), wait.getTarget()}];
        if (slots.empty())
          return; // No start: --memopt-verify-plan reports it.
        int64_t slot = slots.front();
        slots.erase(slots.begin());
        wait.setSlot(slot);
        free.insert(slot);
      }
    });
  }

  const DeviceProfile *profile = nullptr;
  CostModelOptions costOptions;
};

} // namespace
