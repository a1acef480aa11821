//===- VerifyPlan.cpp - independent check of the arena offsets ------------===//
//
// Trusts nothing that --memopt-plan-buffers computed: the live intervals are
// re-derived from the IR (BufferLiveness), the offsets and the arena size are
// read back from the attributes, and the proof that no two buffers live at the
// same time share a byte is memopt::checkPlacement, a sweep over time that
// shares no code with the placer (O(n log n)).
//
// With optimizer offload the host arena (`memopt.host_arena_bytes`) is
// checked the same way over the buffers in host memory, and every kernel is
// checked to read and write only the memory it runs in (docs/Offload.md),
// and every asynchronous copy to end in its block with no access to its
// buffers in flight.
//
// Per-buffer faults (no offset, misaligned, outside the arena) are reported
// at each alloc. When the checker finds an overlap, the pair is located with
// the checker alone: the shortest prefix of the buffers it rejects ends with
// one buffer of a conflicting pair, and the shortest prefix that it rejects
// together with that buffer ends with the other. Binary search makes this
// O(n log^2 n), paid only when the plan is wrong.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Planning/PlanChecker.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "memopt-verify-plan"

namespace memopt {
#define GEN_PASS_DEF_VERIFYPLANPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
/// The buffers of a function with their planned offsets.
struct PlannedBuffers {
  std::vector<Buffer> buffers;
  std::vector<int64_t> offsets;
  std::vector<const BufferInterval *> intervals;
  int64_t arenaSize = 0;
  int64_t alignment = 1;

  /// Whether the checker rejects the buffers at `indices` on their own.
  bool rejects(ArrayRef<size_t> indices) const {
    std::vector<Buffer> subset;
    std::vector<int64_t> subsetOffsets;
    for (size_t i : indices) {
      subset.push_back(buffers[i]);
      subsetOffsets.push_back(offsets[i]);
    }
    return checkPlacement(subset, subsetOffsets, arenaSize, alignment)
        .has_value();
  }

  /// The smallest k in [1, n] such that rejects(prefix(k) + extra), knowing
  /// that it holds for k = n. Rejection is monotone: adding buffers never
  /// removes a conflict.
  size_t shortestRejectedPrefix(size_t n, std::optional<size_t> extra) const {
    size_t lo = 1, hi = n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      auto indices = llvm::to_vector(llvm::seq<size_t>(0, mid));
      if (extra)
        indices.push_back(*extra);
      if (rejects(indices))
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }
};

struct VerifyPlanPass
    : public memopt::impl::VerifyPlanPassBase<VerifyPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment < 1) {
      module.emitError() << "--memopt-verify-plan: alignment "
                         << alignment.getValue() << " is not positive";
      return signalPassFailure();
    }
    FailureOr<FunctionOpInterface> step =
        findTrainStep(module, "verify the plan of");
    if (failed(step) || failed(verifyFunction(*step)))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }

  LogicalResult verifyFunction(FunctionOpInterface func) {
    // Built afresh rather than taken from the analysis manager, so that a
    // cached result that a pass wrongly preserved cannot hide a conflict.
    BufferLiveness liveness(func);
    SmallVector<const BufferInterval *> device, host;
    for (const BufferInterval &interval : liveness.getBuffers())
      (getMemoryKind(memref::AllocOp(interval.alloc)) == MemoryKind::Host
           ? host
           : device)
          .push_back(&interval);
    bool valid = succeeded(verifyMemories(func));
    valid &= succeeded(verifyCopies(func));
    valid &= succeeded(
        verifyArena(func, device, MemoptDialect::kArenaBytesAttrName));
    if (!host.empty() || func->hasAttr(MemoptDialect::kHostArenaBytesAttrName))
      valid &= succeeded(
          verifyArena(func, host, MemoptDialect::kHostArenaBytesAttrName));
    return success(valid);
  }

  /// Each kernel reads and writes the memory it runs in: the host's for a
  /// kernel marked `memopt.on_host`, the device's for any other, and a
  /// transfer the memory it copies from and the memory it copies to.
  LogicalResult verifyMemories(FunctionOpInterface func) {
    bool valid = true;
    func.walk([&](KernelOp kernel) {
      MemoryKind runsIn =
          runsOnHost(kernel) ? MemoryKind::Host : MemoryKind::Device;
      MemoryKind writes = runsIn;
      if (kernel.getKernel() == TransferOp::getOperationName()) {
        auto to = kernel.getOpAttributes().getAs<MemoryKindAttr>("to");
        if (!to) {
          kernel.emitOpError() << "copies to no memory ('to' is missing)";
          valid = false;
          return;
        }
        writes = to.getValue();
        if (Attribute slot = kernel.getOpAttributes().get("slot");
            slot &&
            (!isa<IntegerAttr>(slot) || cast<IntegerAttr>(slot).getInt() < 0)) {
          kernel.emitOpError() << "has slot " << slot
                               << "; a copy's slot is a non-negative integer";
          valid = false;
          return;
        }
        runsIn =
            writes == MemoryKind::Host ? MemoryKind::Device : MemoryKind::Host;
      }
      auto check = [&](ValueRange buffers, MemoryKind expected,
                       StringRef what) {
        for (auto [i, buffer] : llvm::enumerate(buffers)) {
          MemoryKind memory = getMemoryKind(buffer);
          if (memory == expected)
            continue;
          kernel.emitOpError()
              << what << " #" << i << " lives in "
              << stringifyMemoryKind(memory) << " memory, but the kernel "
              << what << "s " << stringifyMemoryKind(expected) << " memory";
          valid = false;
        }
      };
      check(kernel.getIns(), runsIn, "read");
      check(kernel.getOuts(), writes, "write");
    });
    return success(valid);
  }

  /// Each asynchronous copy (a transfer kernel with a slot) ends with a
  /// `memopt.transfer_wait` on its slot later in its block, no other copy
  /// takes the slot meanwhile, and no op between the two reads or writes
  /// the copy's target or writes its source (or any view of their
  /// allocations): no read of a buffer before its copy arrives.
  LogicalResult verifyCopies(FunctionOpInterface func) {
    bool valid = true;
    func.walk([&](Block *block) {
      llvm::MapVector<int64_t, KernelOp> inFlight;
      for (Operation &op : *block) {
        if (std::optional<int64_t> slot = getTransferSlot(&op)) {
          auto copy = cast<KernelOp>(op);
          checkConflicts(&op, inFlight, valid);
          if (!inFlight.insert({*slot, copy}).second) {
            copy.emitOpError() << "starts a copy on slot " << *slot
                               << ", whose copy is still in flight";
            valid = false;
          }
          continue;
        }
        if (auto wait = dyn_cast<TransferWaitOp>(op)) {
          auto found = inFlight.find(wait.getSlot());
          if (found == inFlight.end() ||
              found->second.getIns()[0] != wait.getSource() ||
              found->second.getOuts()[0] != wait.getTarget()) {
            wait.emitOpError() << "waits on slot " << wait.getSlot()
                               << ", where no copy of these buffers started "
                                  "in its block";
            valid = false;
            continue;
          }
          inFlight.erase(found);
          checkConflicts(&op, inFlight, valid);
          continue;
        }
        if (!isa<memref::DeallocOp>(op))
          checkConflicts(&op, inFlight, valid);
      }
      for (auto &[slot, copy] : inFlight) {
        copy.emitOpError() << "starts a copy on slot " << slot
                           << " that no memopt.transfer_wait ends";
        valid = false;
      }
    });
    return success(valid);
  }

  /// Reports `op` if it races with a copy in flight.
  static void checkConflicts(Operation *op,
                             const llvm::MapVector<int64_t, KernelOp> &inFlight,
                             bool &valid) {
    for (auto [slot, copy] : inFlight) {
      if (!racesWithCopy(op, copy.getIns()[0], copy.getOuts()[0]))
        continue;
      op->emitOpError() << "reads or writes the target, or writes the "
                           "source, of the copy in flight on slot "
                        << slot << " before its memopt.transfer_wait";
      valid = false;
    }
  }

  /// The buffers of one arena, whose size is the function's `arenaAttrName`,
  /// are inside it, aligned, and never share a byte while both live.
  LogicalResult verifyArena(FunctionOpInterface func,
                            ArrayRef<const BufferInterval *> buffers,
                            StringRef arenaAttrName) {
    auto arenaAttr = func->getAttrOfType<IntegerAttr>(arenaAttrName);
    if (!arenaAttr)
      return func.emitOpError() << "has no '" << arenaAttrName
                                << "'; run --memopt-plan-buffers first";
    PlannedBuffers plan;
    plan.arenaSize = arenaAttr.getInt();
    plan.alignment = alignment;

    bool valid = true;
    for (const BufferInterval *each : buffers) {
      const BufferInterval &interval = *each;
      memref::AllocOp alloc = interval.alloc;
      auto offsetAttr =
          alloc->getAttrOfType<IntegerAttr>(MemoptDialect::kOffsetAttrName);
      if (!offsetAttr) {
        alloc.emitOpError() << "has no 'memopt.offset'";
        valid = false;
        continue;
      }
      if (!interval.sizeBytes) {
        alloc.emitOpError()
            << "has no static byte size (" << alloc.getType() << ")";
        valid = false;
        continue;
      }
      int64_t offset = offsetAttr.getInt();
      int64_t size = *interval.sizeBytes;
      if (offset % alignment != 0) {
        alloc.emitOpError()
            << "offset " << offset << " is not a multiple of the alignment "
            << alignment.getValue();
        valid = false;
        continue;
      }
      if (offset > plan.arenaSize || size > plan.arenaSize - offset) {
        alloc.emitOpError()
            << "occupies bytes [" << offset << ", " << offset + size
            << "), outside the arena [0, " << plan.arenaSize << ") of '"
            << arenaAttrName << "'";
        valid = false;
        continue;
      }
      plan.buffers.push_back(
          {interval.id, interval.start, interval.end + 1, size});
      plan.offsets.push_back(offset);
      plan.intervals.push_back(&interval);
    }

    std::optional<std::string> error = checkPlacement(
        plan.buffers, plan.offsets, plan.arenaSize, plan.alignment);
    if (!error)
      return success(valid);
    LLVM_DEBUG(llvm::dbgs() << "checker: " << *error << "\n");

    // Every buffer passes alone, so the checker found an overlap.
    size_t n = plan.buffers.size();
    size_t second = plan.shortestRejectedPrefix(n, std::nullopt) - 1;
    size_t first =
        second == 0 ? 0 : plan.shortestRejectedPrefix(second, second) - 1;
    if (first == second) {
      // Unreachable unless the checker rejects a single in-bounds, aligned
      // buffer; report its message rather than guess.
      return memref::AllocOp(plan.intervals[second]->alloc).emitOpError()
             << "buffer plan rejected: " << *error;
    }
    auto describe = [&](size_t i) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "bytes [" << plan.offsets[i] << ", "
         << plan.offsets[i] + plan.buffers[i].size << ") live over ops ["
         << plan.intervals[i]->start << ", " << plan.intervals[i]->end << "]";
      return text;
    };
    InFlightDiagnostic diag =
        memref::AllocOp(plan.intervals[second]->alloc).emitOpError()
        << "overlaps a buffer live at the same time: " << describe(second)
        << " and " << describe(first);
    diag.attachNote(plan.intervals[first]->alloc->getLoc())
        << "the other buffer is allocated here";
    return failure();
  }
};
} // namespace
