//===- MemoryAccount.h - memory account of the planned train step -*- C++
//-*-===//
//
// Where the memory of one training step goes: the bytes of every pool
// (parameters, gradients, optimizer state, activations, ...) at the program
// point where the scratch buffers peak, the activations each module scope
// saves for the backward pass, the live scratch bytes at every program point,
// and a simple FLOP count. Reads the bufferized, planned `@train_step`
// (docs/Pipeline.md, sections 2 and 3); the rules are in docs/MemoryReport.md.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_MEMORYACCOUNT_H
#define MEMOPT_ANALYSIS_MEMORYACCOUNT_H

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace memopt {

class KernelOp;

/// The pools of the memory account, in the order reports list them.
enum class MemoryPoolKind {
  /// Arguments with role "param" that the step uses as they are, and the
  /// scratch buffers that hold a low-precision copy of a parameter (a
  /// `memopt.cast` of a "param" argument, docs/MixedPrecision.md).
  Params,
  /// "param" arguments that the step reads through a low-precision copy:
  /// the FP32 master weights of mixed precision.
  MasterParams,
  /// Scratch buffers that hold a parameter's gradient.
  Grads,
  /// Arguments with role "optim".
  Optimizer,
  /// Arguments with role "state" (e.g. batch-norm running statistics).
  State,
  /// Arguments with role "input", "label", "loss" or any other role.
  Data,
  /// Every scratch buffer that is not a gradient.
  Activations,
  /// Runtime workspace outside the arena (none on the host runtime; the
  /// CUDA runtime's, see MemoryAccount::setWorkspaceBytes).
  Workspace,
};

/// Number of MemoryPoolKind values.
inline constexpr unsigned kNumMemoryPools = 8;

/// The report name of `pool`: "params", "master_params", "grads", ...
llvm::StringRef getMemoryPoolName(MemoryPoolKind pool);

/// Bytes of every pool, indexed by MemoryPoolKind. The pools of the account
/// are the device's; with optimizer offload, the arguments in host memory
/// are counted apart (MemoryAccount::getHostArgumentBytes).
using PoolBytes = std::array<int64_t, kNumMemoryPools>;

/// One scratch buffer (one `memref.alloc`) as the account sees it.
struct AccountedBuffer {
  /// The buffer's live interval, id and size (unknown sizes count as 0).
  BufferInterval interval;
  /// MemoryPoolKind::Grads, MemoryPoolKind::Params (a parameter's
  /// low-precision copy) or MemoryPoolKind::Activations.
  MemoryPoolKind pool = MemoryPoolKind::Activations;
  /// The first kernel that writes the buffer, in program order; null when no
  /// kernel writes it.
  mlir::Operation *producer = nullptr;
  /// The producer's op index, or -1.
  int64_t producerIndex = -1;
  /// The producer's `memopt.scope`, or else the interval's scope; "" when
  /// neither has one.
  std::string scope;
  /// `memopt.offset` of the alloc, or std::nullopt before planning.
  std::optional<int64_t> offset;
  /// A parameter that ZeRO-3 gathered for its readers (pool params).
  bool gathered = false;
  /// A buffer of the host arena (optimizer offload, docs/Offload.md),
  /// outside the device's timeline and peak.
  bool host = false;

  /// The buffer's size in bytes, 0 when unknown.
  int64_t getSizeBytes() const { return interval.sizeBytes.value_or(0); }
};

/// The model state of the step over the whole step, not at the peak
/// (REFERENCE's bytes-per-parameter table, docs/MemoryReport.md).
struct ModelStateBytes {
  /// Parameters used as they are, plus every low-precision parameter copy.
  int64_t weights = 0;
  /// The frozen weights ("frozen" arguments: no gradient, no optimizer
  /// state), counted apart from `weights`.
  int64_t frozenWeights = 0;
  /// The f32 master weights (parameters read through a low-precision copy).
  int64_t masterWeights = 0;
  /// The gradients the optimizer updates read (their `grad` operands).
  int64_t grads = 0;
  /// Every "optim" argument (moments, step counter, loss-scale state).
  int64_t optimizer = 0;

  int64_t getTotal() const {
    return weights + frozenWeights + masterWeights + grads + optimizer;
  }
};

/// Live scratch bytes at one program point (one op index).
struct TimelinePoint {
  /// The op at this index.
  mlir::Operation *op = nullptr;
  /// Live bytes of gradient buffers.
  int64_t grads = 0;
  /// Live bytes of low-precision parameter copies.
  int64_t params = 0;
  /// Live bytes of every other scratch buffer.
  int64_t activations = 0;

  /// All live scratch bytes.
  int64_t getBytes() const { return grads + params + activations; }
};

/// The memory account of a bufferized, planned training step. Pure: reads the
/// IR, never changes it. O(n + b log b + b * p) for n ops, b buffers and p
/// program points covered by their live intervals, plus BufferLiveness.
class MemoryAccount {
public:
  /// Analyses `op`, normally the `@train_step` function after
  /// --memopt-plan-buffers, assuming offsets aligned as it aligns them by
  /// default (kDefaultArenaAlignment).
  explicit MemoryAccount(mlir::Operation *op)
      : MemoryAccount(op, kDefaultArenaAlignment) {}

  /// Analyses `op`; `alignment` (>= 1) is the plan's, used for the lower
  /// bound.
  MemoryAccount(mlir::Operation *op, int64_t alignment);

  /// `memopt.arena_bytes` of the function, or std::nullopt before planning.
  std::optional<int64_t> getArenaBytes() const { return arenaBytes; }

  /// The placement lower bound: the largest total size of the buffers live at
  /// one program point, each rounded up to the alignment. No plan with that
  /// alignment fits in a smaller arena.
  int64_t getLowerBoundBytes() const { return lowerBoundBytes; }

  /// Bytes of every pool at the peak program point: the arguments by role,
  /// and the scratch buffers live at the peak by pool.
  const PoolBytes &getPoolsAtPeak() const { return poolsAtPeak; }

  /// Sum of getPoolsAtPeak().
  int64_t getTotalBytesAtPeak() const;

  /// Sets the `workspace` pool: memory the target's runtime holds outside
  /// the arena for the whole run (the CUDA runtime's cuBLASLt workspace).
  void setWorkspaceBytes(int64_t bytes) {
    poolsAtPeak[static_cast<unsigned>(MemoryPoolKind::Workspace)] = bytes;
  }

  /// Bytes of all arguments in device memory (params, optimizer, state,
  /// data): what the step reads and writes outside the arena.
  int64_t getArgumentBytes() const;

  /// Optimizer offload (docs/Offload.md): the bytes of the arguments in
  /// host memory by pool (the f32 master weights, the optimizer state), the
  /// planned host arena (`memopt.host_arena_bytes`), and all host memory the
  /// step holds, both together. Zero without offload.
  const PoolBytes &getHostArgumentBytes() const { return hostArgumentBytes; }
  int64_t getHostArenaBytes() const { return hostArenaBytes; }
  int64_t getHostBytes() const;
  /// Bytes the step's transfers copy to the host and back to the device
  /// (`memopt.transfer`), each as many times as it runs in a step (a
  /// micro-batch's gradient once per micro-batch).
  int64_t getTransferBytes(MemoryKind to) const {
    return to == MemoryKind::Host ? bytesToHost : bytesToDevice;
  }

  /// Index of the peak program point: the one with the most live scratch
  /// bytes; on a tie, a kernel rather than another op, then the earliest.
  /// -1 when the function has no ops.
  int64_t getPeakIndex() const { return peakIndex; }

  /// The op at the peak, or null.
  mlir::Operation *getPeakOp() const;

  /// Live scratch bytes at the peak (unaligned).
  int64_t getPeakBytes() const;

  /// Live scratch bytes at every program point (op index).
  llvm::ArrayRef<TimelinePoint> getTimeline() const { return timeline; }

  /// Every scratch buffer, in program order of its alloc.
  llvm::ArrayRef<AccountedBuffer> getBuffers() const { return buffers; }

  /// Indices into getBuffers() of the buffers live at the peak, largest
  /// first.
  llvm::SmallVector<unsigned> getBuffersLiveAtPeak() const;

  /// Bytes of the activations saved for the backward pass, by the scope of
  /// the forward kernel that produced them, largest first (then by scope).
  /// A buffer is saved when a forward kernel writes it and it is still live
  /// at the first backward op. The device's buffers only: the host's
  /// (--offload=activations) are getSavedOnHostBytes().
  llvm::ArrayRef<std::pair<std::string, int64_t>> getSavedByScope() const {
    return savedByScope;
  }
  /// Bytes of the activations saved for the backward in host memory.
  int64_t getSavedOnHostBytes() const { return savedOnHostBytes; }

  /// Index of the kernel that writes the `loss` argument (the end of the
  /// forward pass), or -1 when no kernel does.
  int64_t getLossIndex() const { return lossIndex; }

  /// Index of the first backward op: the first kernel after the loss
  /// kernel; -1 when there is none.
  int64_t getFirstBackwardIndex() const { return firstBackwardIndex; }

  /// FLOPs of the kernels up to and including the loss kernel (all kernels
  /// when no kernel writes the loss).
  int64_t getForwardFlops() const { return forwardFlops; }

  /// FLOPs of the kernels after the loss kernel that are not recomputation:
  /// the backward pass and the optimizer update.
  int64_t getBackwardFlops() const { return backwardFlops; }

  /// FLOPs of the kernels that recompute a forward value (marked
  /// `memopt.recompute` by --memopt-remat).
  int64_t getRecomputeFlops() const { return recomputeFlops; }

  /// Fused kernels of the step (docs/Fusion.md): how many attentions and
  /// linear cross-entropies run without storing their scores or logits,
  /// and the FLOPs their backward spends recomputing them (part of the
  /// backward FLOPs).
  struct FusedKernels {
    int64_t attention = 0;
    int64_t linearCrossEntropy = 0;
    int64_t recomputeFlops = 0;
  };
  const FusedKernels &getFusedKernels() const { return fused; }

  /// Elements and tensors of the "param" arguments (trained).
  int64_t getNumParameters() const { return numParameters; }
  int64_t getNumParameterTensors() const { return numParameterTensors; }
  /// Elements and tensors of the "frozen" arguments.
  int64_t getNumFrozenParameters() const { return numFrozenParameters; }
  int64_t getNumFrozenTensors() const { return numFrozenTensors; }
  /// Bytes of the frozen weights stored in NF4 (codes and scales), part of
  /// the model state's frozen weights.
  int64_t getNf4FrozenBytes() const { return nf4FrozenBytes; }

  /// The model state: weights, master weights, gradients, optimizer state.
  const ModelStateBytes &getModelState() const { return modelState; }

  /// ZeRO-3: the most bytes of gathered parameters live at one program
  /// point (0 without ZeRO-3).
  int64_t getMaxGatheredBytes() const { return maxGatheredBytes; }

  /// Number of buffers whose size is unknown (counted as 0 bytes).
  int64_t getNumUnsizedBuffers() const { return numUnsizedBuffers; }

  /// Prints the account in the line format of
  /// -memopt-test-print-memory-account.
  void print(llvm::raw_ostream &os) const;

private:
  /// The steps of the constructor (the file comment of MemoryAccount.cpp),
  /// and what they share.
  struct Walk;
  void countArguments(Walk &walk, mlir::Operation *op);
  void collectBuffers(Walk &walk, mlir::Operation *op);
  void markGradients(Walk &walk);
  void markParamCopies(Walk &walk, mlir::Operation *op);
  llvm::SmallDenseSet<unsigned>
  markGatheredParams(Walk &walk, mlir::FunctionOpInterface func);
  void countModelState(Walk &walk);
  void computeTimeline(Walk &walk, int64_t alignment);
  void collectSavedActivations();
  void countFlops(Walk &walk);

  std::optional<int64_t> arenaBytes;
  int64_t lowerBoundBytes = 0;
  PoolBytes argumentBytes{};
  PoolBytes hostArgumentBytes{};
  int64_t hostArenaBytes = 0;
  int64_t bytesToHost = 0, bytesToDevice = 0;
  PoolBytes poolsAtPeak{};
  int64_t peakIndex = -1;
  int64_t lossIndex = -1;
  int64_t firstBackwardIndex = -1;
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  int64_t recomputeFlops = 0;
  FusedKernels fused;
  int64_t numParameters = 0;
  int64_t numParameterTensors = 0;
  int64_t maxGatheredBytes = 0;
  int64_t numFrozenParameters = 0;
  int64_t numFrozenTensors = 0;
  int64_t nf4FrozenBytes = 0;
  int64_t numUnsizedBuffers = 0;
  ModelStateBytes modelState;
  llvm::SmallVector<TimelinePoint> timeline;
  llvm::SmallVector<AccountedBuffer> buffers;
  llvm::SmallVector<std::pair<std::string, int64_t>> savedByScope;
  int64_t savedOnHostBytes = 0;
};

/// The name reports give `op`: the op a kernel computes ("memopt.matmul"),
/// else the op's own name; "" for null.
llvm::StringRef getReportedOpName(mlir::Operation *op);

/// The `memopt.scope` of `op`; "" when it has none or is null.
llvm::StringRef getReportedScope(mlir::Operation *op);


/// The FLOPs of a memopt op on tensors, by the rules of getKernelFlops.
int64_t getOpFlops(mlir::Operation *op);

} // namespace memopt

#endif // MEMOPT_ANALYSIS_MEMORYACCOUNT_H
