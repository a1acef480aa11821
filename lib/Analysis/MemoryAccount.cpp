//===- MemoryAccount.cpp - memory account of the planned train step -------===//
//
// The account follows the pools of "do the memory accounting first"
// (docs/MemoryReport.md), as PyTorch's memory snapshot categories and the
// ZeRO paper's model-state / residual-state split do:
//
// 1. Arguments are counted by `memopt.role`: they are live for the whole
//    step, so they belong to every program point.
// 2. Scratch buffers (the `memref.alloc`s) come from BufferLiveness. The
//    gradient of a parameter is the `grad` operand of its optimizer-update
//    kernel, and, walking backwards through the backward pass, the inputs of
//    the adds (sums of partial gradients), reshapes, casts, paddings,
//    unscales and ZeRO's reduce-scatters that write a gradient buffer; every
//    other buffer is an activation.
// 3. A difference array over op indices gives the live scratch bytes per
//    program point per pool; the peak is the point with the most.
//    A cast of a "param" argument is that parameter's low-precision copy
//    (pool params) and the argument its f32 master (pool master_params).
// 4. Saved activations: buffers a forward kernel (one at or before the kernel
//    that writes the `loss` argument) writes that are live at the first
//    backward op (the next kernel), by the producer's `memopt.scope`.
// 5. FLOPs: the cost model's getKernelFlops() per kernel, split at the
//    loss kernel.
//
// O(n + b log b) for n ops and b buffers, plus BufferLiveness.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Planning/Placement.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

#define DEBUG_TYPE "memopt-memory-account"

using namespace mlir;
using namespace memopt;

static constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

static int64_t saturatingAdd(int64_t a, int64_t b) {
  return llvm::checkedAdd(a, b).value_or(kMaxInt64);
}

llvm::StringRef memopt::getMemoryPoolName(MemoryPoolKind pool) {
  switch (pool) {
  case MemoryPoolKind::Params:
    return "params";
  case MemoryPoolKind::MasterParams:
    return "master_params";
  case MemoryPoolKind::Grads:
    return "grads";
  case MemoryPoolKind::Optimizer:
    return "optimizer";
  case MemoryPoolKind::State:
    return "state";
  case MemoryPoolKind::Data:
    return "data";
  case MemoryPoolKind::Activations:
    return "activations";
  case MemoryPoolKind::Workspace:
    return "workspace";
  }
  llvm_unreachable("unknown memory pool");
}

int64_t memopt::getOpFlops(Operation *op) { return getOpCost(op).flops; }

/// The pool of an argument with `memopt.role = role` (null: none); `master`
/// when it is a ZeRO shard (`memopt.shard_of`) or in host memory
/// (optimizer offload).
static MemoryPoolKind getArgumentPool(StringAttr role, bool master = false) {
  std::optional<ArgumentRole> kind =
      role ? symbolizeArgumentRole(role.getValue()) : std::nullopt;
  if (!kind)
    return MemoryPoolKind::Data;
  switch (*kind) {
  case ArgumentRole::Param:
    // A sharded or offloaded parameter is the f32 master of a
    // "param_copy".
    return master ? MemoryPoolKind::MasterParams : MemoryPoolKind::Params;
  case ArgumentRole::ParamCopy:
  case ArgumentRole::Frozen:
    return MemoryPoolKind::Params;
  case ArgumentRole::Optim:
    return MemoryPoolKind::Optimizer;
  case ArgumentRole::State:
    return MemoryPoolKind::State;
  case ArgumentRole::Input:
  case ArgumentRole::Label:
  case ArgumentRole::Loss:
    return MemoryPoolKind::Data;
  }
  llvm_unreachable("unknown argument role");
}

llvm::StringRef memopt::getReportedScope(Operation *op) {
  if (!op)
    return "";
  if (auto scope = op->getAttrOfType<StringAttr>(MemoptDialect::kScopeAttrName))
    return scope.getValue();
  return "";
}

/// What the steps of the account share while it is built: the liveness,
/// the argument that receives the loss, the scratch buffer of each
/// allocation, the kernels in program order with their indices, the
/// kernels that write each buffer, and the low-precision parameter copies.
struct MemoryAccount::Walk {
  explicit Walk(Operation *op) : liveness(op), numOps(liveness.getNumOps()) {}

  /// The buffer `value` is (a view of), if it is a scratch buffer.
  std::optional<unsigned> lookupBuffer(Value value) const {
    auto it = bufferOf.find(getBufferRoot(value));
    if (it == bufferOf.end())
      return std::nullopt;
    return it->second;
  }

  BufferLiveness liveness;
  int64_t numOps;
  Value lossArgument;
  llvm::DenseMap<Value, unsigned> bufferOf;
  SmallVector<std::pair<KernelOp, int64_t>> kernels;
  std::vector<SmallVector<KernelOp, 1>> writers;
  /// One copy per parameter and element type, however often it is made.
  llvm::DenseMap<std::pair<unsigned, Type>, int64_t> copyBytes;
};

MemoryAccount::MemoryAccount(Operation *op, int64_t alignment) {
  assert(alignment >= 1 && "alignment must be positive");
  Walk walk(op);
  timeline.resize(walk.numOps);
  op->walk<WalkOrder::PreOrder>([&](Operation *nested) {
    int64_t index = walk.liveness.getIndex(nested);
    if (index >= 0)
      timeline[index].op = nested;
  });
  if (auto arena =
          op->getAttrOfType<IntegerAttr>(MemoptDialect::kArenaBytesAttrName))
    arenaBytes = arena.getInt();
  if (auto host = op->getAttrOfType<IntegerAttr>(
          MemoptDialect::kHostArenaBytesAttrName))
    hostArenaBytes = host.getInt();

  countArguments(walk, op);
  collectBuffers(walk, op);
  markGradients(walk);
  markParamCopies(walk, op);
  countModelState(walk);
  computeTimeline(walk, alignment);
  collectSavedActivations();
  countFlops(walk);
  LLVM_DEBUG(llvm::dbgs() << "memory account: " << buffers.size()
                          << " buffers, peak at " << peakIndex << ", LB "
                          << lowerBoundBytes << "\n");
}

/// 1. Arguments, by role; the parameters' count and the loss argument.
void MemoryAccount::countArguments(Walk &walk, Operation *op) {
  if (auto func = dyn_cast<FunctionOpInterface>(op)) {
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto role = func.getArgAttrOfType<StringAttr>(
          index, MemoptDialect::kRoleAttrName);
      auto shardOf = func.getArgAttrOfType<DenseI64ArrayAttr>(
          index, MemoptDialect::kShardOfAttrName);
      bool host = !func.isExternal() &&
                  getMemoryKind(func.getArgument(index)) == MemoryKind::Host;
      MemoryPoolKind pool = getArgumentPool(role, shardOf || host);
      auto memref = dyn_cast<MemRefType>(type);
      int64_t bytes = memref ? getMemRefSizeInBytes(memref, op).value_or(0) : 0;
      PoolBytes &where = host ? hostArgumentBytes : argumentBytes;
      where[static_cast<unsigned>(pool)] =
          saturatingAdd(where[static_cast<unsigned>(pool)], bytes);
      if (role &&
          role.getValue() == stringifyArgumentRole(ArgumentRole::Frozen) &&
          memref && memref.hasStaticShape()) {
        ++numFrozenTensors;
        // An NF4 weight's elements are those of the shape it packs.
        auto nf4Of = func.getArgAttrOfType<DenseI64ArrayAttr>(
            index, MemoptDialect::kNf4OfAttrName);
        int64_t elements = nf4Of ? llvm::checkedMul(nf4Of[0], nf4Of[1])
                                       .value_or(kMaxInt64)
                                 : memref.getNumElements();
        numFrozenParameters = saturatingAdd(numFrozenParameters, elements);
        if (nf4Of)
          nf4FrozenBytes = saturatingAdd(nf4FrozenBytes, bytes);
        modelState.frozenWeights =
            saturatingAdd(modelState.frozenWeights, bytes);
      }
      // Parameters are counted whole, once: by their master when ZeRO
      // shards it, not by the copy.
      if (role &&
          role.getValue() == stringifyArgumentRole(ArgumentRole::Param) &&
          memref && memref.hasStaticShape()) {
        ++numParameterTensors;
        numParameters = saturatingAdd(
            numParameters,
            shardOf ? ShapedType::getNumElements(shardOf.asArrayRef())
                    : memref.getNumElements());
      }
      if (role && role.getValue() == "loss" && !func.isExternal() &&
          !walk.lossArgument)
        walk.lossArgument = func.getArgument(index);
    }
  }
}

/// 2. Scratch buffers, their producers, writers and scopes; where the
/// forward ends and the backward starts.
void MemoryAccount::collectBuffers(Walk &walk, Operation *op) {
  for (const BufferInterval &interval : walk.liveness.getBuffers()) {
    memref::AllocOp alloc = interval.alloc;
    AccountedBuffer buffer;
    buffer.interval = interval;
    if (!interval.sizeBytes)
      ++numUnsizedBuffers;
    if (auto offset =
            alloc->getAttrOfType<IntegerAttr>(MemoptDialect::kOffsetAttrName))
      buffer.offset = offset.getInt();
    buffer.host = getMemoryKind(alloc) == MemoryKind::Host;
    walk.bufferOf[alloc.getResult()] = buffers.size();
    buffers.push_back(std::move(buffer));
  }

  op->walk<WalkOrder::PreOrder>([&](KernelOp kernel) {
    walk.kernels.emplace_back(kernel, walk.liveness.getIndex(kernel));
  });
  walk.writers.resize(buffers.size());
  for (auto [kernel, index] : walk.kernels) {
    for (Value out : kernel.getOuts()) {
      if (walk.lossArgument && out == walk.lossArgument && lossIndex < 0)
        lossIndex = index;
      std::optional<unsigned> id = walk.lookupBuffer(out);
      if (!id)
        continue;
      walk.writers[*id].push_back(kernel);
      AccountedBuffer &buffer = buffers[*id];
      if (!buffer.producer) {
        buffer.producer = kernel;
        buffer.producerIndex = index;
      }
    }
  }
  // With gradient accumulation the loss argument receives a copy of the
  // loss accumulator after the loop (with data parallelism, its sum over the
  // ranks); the forward of each micro-batch ends where the accumulator is
  // updated, inside the loop.
  if (lossIndex >= 0)
    for (auto [kernel, index] : walk.kernels)
      if (index == lossIndex &&
          (isOpNamed<ReshapeOp>(kernel.getKernel()) ||
           kernel.getKernel() == "shard.all_reduce") &&
          kernel.getIns().size() == 1)
        if (std::optional<unsigned> id = walk.lookupBuffer(kernel.getIns()[0]))
          for (KernelOp writer : walk.writers[*id])
            if (writer->getParentOfType<scf::ForOp>() &&
                walk.liveness.getIndex(writer) < lossIndex) {
              lossIndex = walk.liveness.getIndex(writer);
              break;
            }
  for (AccountedBuffer &buffer : buffers) {
    buffer.scope = getReportedScope(buffer.producer).str();
    if (buffer.scope.empty() && buffer.interval.scope)
      buffer.scope = buffer.interval.scope.getValue().str();
  }
  // (The copies to the host of what the loss read, --offload=activations,
  // finish the forward.)
  auto isCopyToHost = [](KernelOp kernel) {
    auto to = kernel.getOpAttributes().getAs<MemoryKindAttr>("to");
    return isOpNamed<TransferOp>(kernel.getKernel()) && to &&
           to.getValue() == MemoryKind::Host;
  };
  if (lossIndex >= 0)
    for (auto [kernel, index] : walk.kernels)
      if (index > lossIndex && !isCopyToHost(kernel)) {
        firstBackwardIndex = index;
        break;
      }
}

/// 2. (cont.) Gradient buffers.
void MemoryAccount::markGradients(Walk &walk) {
  // Gradients: the update's `grad` operand, then backwards through the
  // walk.kernels of the backward pass that only sum, copy or rescale gradients.
  SmallVector<unsigned> worklist;
  auto markGrad = [&](Value value) {
    std::optional<unsigned> id = walk.lookupBuffer(value);
    if (!id || buffers[*id].pool == MemoryPoolKind::Grads)
      return;
    buffers[*id].pool = MemoryPoolKind::Grads;
    worklist.push_back(*id);
  };
  for (auto [kernel, index] : walk.kernels) {
    llvm::StringRef name = kernel.getKernel();
    if (isOpNamed<AdamWUpdateOp, SgdUpdateOp>(name) &&
        kernel.getIns().size() >= 2)
      markGrad(kernel.getIns()[1]);
  }
  while (!worklist.empty()) {
    unsigned id = worklist.pop_back_val();
    for (KernelOp writer : walk.writers[id]) {
      if (walk.liveness.getIndex(writer) <= lossIndex)
        continue;
      llvm::StringRef name = writer.getKernel();
      auto ins = writer.getIns();
      // ZeRO scatters a flattened, zero-padded (slice_grad) accumulator;
      // offload copies the gradient to the host.
      if (isOpNamed<AddOp, ReshapeOp, CastOp, SliceGradOp, TransferOp>(name) ||
          name == "shard.reduce_scatter") {
        for (Value in : ins)
          markGrad(in);
      } else if (isOpNamed<UnscaleOp>(name)) {
        // unscale(scale, d_1..d_n) -> (g_1..g_n, found_inf).
        for (auto [position, out] : llvm::enumerate(writer.getOuts()))
          if (walk.lookupBuffer(out) == id && position + 1 < ins.size())
            markGrad(ins[position + 1]);
      }
    }
  }
}

/// Whether `arg` is an argument of `func`'s body of role "param".
static bool isParamArgument(FunctionOpInterface func, BlockArgument arg) {
  if (!arg || arg.getOwner() != &func.getFunctionBody().front())
    return false;
  auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                MemoptDialect::kRoleAttrName);
  return role && role.getValue() == stringifyArgumentRole(ArgumentRole::Param);
}

/// 2. (cont.) Low-precision parameter copies and their f32 masters.
void MemoryAccount::markParamCopies(Walk &walk, Operation *op) {
  // Mixed precision: a cast of a "param" argument is the parameter's
  // low-precision copy (pool params) and the argument its f32 master. The
  // model state counts one copy per parameter and element type, however
  // often it is made (rematerialization recomputes copies).
  if (auto func = dyn_cast<FunctionOpInterface>(op); func && !func.isExternal()) {
    llvm::SmallDenseSet<unsigned> masters;
    for (auto [kernel, index] : walk.kernels) {
      if (!isOpNamed<CastOp>(kernel.getKernel()) || kernel.getIns().size() != 1 ||
          kernel.getOuts().size() != 1)
        continue;
      auto arg = dyn_cast<BlockArgument>(getBufferRoot(kernel.getIns()[0]));
      // (Not ZeRO's sharded master, nor the host's master under offload:
      // the cast of its new value goes into the "param_copy" argument,
      // counted with the arguments.)
      if (!isParamArgument(func, arg) ||
          func.getArgAttr(arg.getArgNumber(),
                          MemoptDialect::kShardOfAttrName) ||
          getMemoryKind(arg) == MemoryKind::Host)
        continue;
      if (std::optional<unsigned> id = walk.lookupBuffer(kernel.getOuts()[0])) {
        buffers[*id].pool = MemoryPoolKind::Params;
        Type copyType = kernel.getOuts()[0].getType();
        if (auto shaped = dyn_cast<ShapedType>(copyType))
          copyType = shaped.getElementType();
        walk.copyBytes[{arg.getArgNumber(), copyType}] =
            buffers[*id].getSizeBytes();
      }
      masters.insert(arg.getArgNumber());
    }
    auto moveArgument = [&](unsigned index, MemoryPoolKind from,
                            MemoryPoolKind to) {
      auto memref = dyn_cast<MemRefType>(func.getArgumentTypes()[index]);
      int64_t bytes = memref ? getMemRefSizeInBytes(memref, op).value_or(0) : 0;
      argumentBytes[static_cast<unsigned>(from)] -= bytes;
      argumentBytes[static_cast<unsigned>(to)] =
          saturatingAdd(argumentBytes[static_cast<unsigned>(to)], bytes);
    };
    for (unsigned index : masters)
      moveArgument(index, MemoryPoolKind::Params, MemoryPoolKind::MasterParams);
    for (unsigned index : markGatheredParams(walk, func))
      moveArgument(index, MemoryPoolKind::MasterParams, MemoryPoolKind::Params);
  }
}

/// ZeRO-3 gathers a parameter where the step reads it, before its update:
/// from its sharded argument, or from the low-precision cast of that
/// argument (stages 1 and 2 gather the updated slices, after). Marks each
/// gathered copy, and what is cut from it (the unpadded slice), pool params:
/// weights that live only around their readers. Returns the sharded
/// arguments gathered in their own type: the parameters themselves, not
/// the masters of a copy.
llvm::SmallDenseSet<unsigned>
MemoryAccount::markGatheredParams(Walk &walk, FunctionOpInterface func) {
  // (Under offload, ZeRO-3 gathers the device's copy of the shard.)
  auto getShardedParam = [&](Value value) -> std::optional<unsigned> {
    auto arg = dyn_cast<BlockArgument>(getBufferRoot(value));
    if (!arg || arg.getOwner() != &func.getFunctionBody().front() ||
        !func.getArgAttr(arg.getArgNumber(), MemoptDialect::kShardOfAttrName))
      return std::nullopt;
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  MemoptDialect::kRoleAttrName);
    if (!role ||
        (role.getValue() != stringifyArgumentRole(ArgumentRole::Param) &&
         role.getValue() != stringifyArgumentRole(ArgumentRole::ParamCopy)))
      return std::nullopt;
    return arg.getArgNumber();
  };
  llvm::SmallDenseSet<unsigned> weights, updated;
  for (auto [kernel, index] : walk.kernels) {
    for (Value out : kernel.getOuts())
      if (std::optional<unsigned> param = getShardedParam(out))
        updated.insert(*param);
    if (kernel.getIns().size() != 1 || kernel.getOuts().size() != 1)
      continue;
    llvm::StringRef name = kernel.getKernel();
    std::optional<unsigned> in = walk.lookupBuffer(kernel.getIns()[0]);
    std::optional<unsigned> out = walk.lookupBuffer(kernel.getOuts()[0]);
    if (!out)
      continue;
    if (isOpNamed<SliceOp, ReshapeOp>(name)) {
      if (in && buffers[*in].gathered)
        buffers[*out].gathered = true;
    } else if (isOpNamed<TransferOp>(name)) {
      // --offload=params: a weight copied to the device right before the op
      // that reads it.
      auto arg = dyn_cast<BlockArgument>(getBufferRoot(kernel.getIns()[0]));
      if (arg && arg.getOwner() == &func.getFunctionBody().front() &&
          getMemoryKind(arg) == MemoryKind::Host) {
        auto role = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), MemoptDialect::kRoleAttrName);
        if (role &&
            (role.getValue() == stringifyArgumentRole(ArgumentRole::Param) ||
             role.getValue() == stringifyArgumentRole(ArgumentRole::ParamCopy)))
          buffers[*out].pool = MemoryPoolKind::Params;
      }
    } else if (name == "shard.all_gather") {
      std::optional<unsigned> param = getShardedParam(kernel.getIns()[0]);
      bool own = bool(param);
      // ZeRO's gather of the cast of its shard, or (--offload=params) of
      // the shard's copy on the device.
      if (!param && in && walk.writers[*in].size() == 1 &&
          isOpNamed<CastOp, TransferOp>(walk.writers[*in].front().getKernel()))
        param = getShardedParam(walk.writers[*in].front().getIns()[0]);
      buffers[*out].gathered = param && !updated.contains(*param);
      if (own && buffers[*out].gathered &&
          isParamArgument(func, func.getArgument(*param)))
        weights.insert(*param);
    }
    if (buffers[*out].gathered)
      buffers[*out].pool = MemoryPoolKind::Params;
  }
  return weights;
}

/// The model state: weights, master weights, optimizer state, gradients.
void MemoryAccount::countModelState(Walk &walk) {
  modelState.weights =
      argumentBytes[static_cast<unsigned>(MemoryPoolKind::Params)] -
      modelState.frozenWeights;
  auto both = [&](MemoryPoolKind pool) {
    return saturatingAdd(argumentBytes[static_cast<unsigned>(pool)],
                         hostArgumentBytes[static_cast<unsigned>(pool)]);
  };
  modelState.masterWeights = both(MemoryPoolKind::MasterParams);
  modelState.optimizer = both(MemoryPoolKind::Optimizer);
  for (const auto &entry : walk.copyBytes)
    modelState.weights = saturatingAdd(modelState.weights, entry.second);
  // A gradient that ZeRO stage 1 scatters after the loop is held whole
  // until then: the step's gradient is the scattered buffer. Under offload
  // the update reads the host's copy of the device's gradient.
  auto getHeldGradient = [&](Value grad) {
    std::optional<unsigned> id = walk.lookupBuffer(grad);
    while (id && walk.writers[*id].size() == 1 &&
           (walk.writers[*id].front().getKernel() == "shard.reduce_scatter" ||
            isOpNamed<SliceGradOp, TransferOp>(
                walk.writers[*id].front().getKernel()))) {
      std::optional<unsigned> source =
          walk.lookupBuffer(walk.writers[*id].front().getIns()[0]);
      if (!source)
        break;
      id = source;
    }
    return id;
  };
  // (Counted once per buffer: data parallelism's flat buffer holds every
  // gradient.)
  llvm::SmallDenseSet<unsigned> heldGradients;
  for (auto [kernel, index] : walk.kernels) {
    llvm::StringRef name = kernel.getKernel();
    if (isOpNamed<AdamWUpdateOp, SgdUpdateOp>(name) &&
        kernel.getIns().size() >= 2)
      if (std::optional<unsigned> id = getHeldGradient(kernel.getIns()[1]);
          id && heldGradients.insert(*id).second)
        modelState.grads = saturatingAdd(modelState.grads,
                                         buffers[*id].getSizeBytes());
  }
}

/// 3. Live scratch bytes per program point, the peak and the lower bound.
void MemoryAccount::computeTimeline(Walk &walk, int64_t alignment) {
  SmallVector<int64_t> gradDelta(walk.numOps + 1, 0),
      activationDelta(walk.numOps + 1, 0), paramDelta(walk.numOps + 1, 0),
      gatheredDelta(walk.numOps + 1, 0);
  std::vector<Buffer> problem;
  for (const AccountedBuffer &buffer : buffers) {
    const BufferInterval &interval = buffer.interval;
    int64_t size = buffer.getSizeBytes();
    if (size <= 0 || buffer.host || interval.start < 0 ||
        interval.end < interval.start || interval.end >= walk.numOps)
      continue;
    SmallVector<int64_t> &delta =
        buffer.pool == MemoryPoolKind::Grads    ? gradDelta
        : buffer.pool == MemoryPoolKind::Params ? paramDelta
                                                : activationDelta;
    delta[interval.start] += size;
    delta[interval.end + 1] -= size;
    if (buffer.gathered) {
      gatheredDelta[interval.start] += size;
      gatheredDelta[interval.end + 1] -= size;
    }
    problem.push_back({interval.id, interval.start, interval.end + 1, size});
  }
  int64_t grads = 0, activations = 0, paramCopies = 0, gathered = 0;
  for (int64_t index = 0; index < walk.numOps; ++index) {
    gathered += gatheredDelta[index];
    maxGatheredBytes = std::max(maxGatheredBytes, gathered);
    grads += gradDelta[index];
    activations += activationDelta[index];
    paramCopies += paramDelta[index];
    timeline[index].grads = grads;
    timeline[index].params = paramCopies;
    timeline[index].activations = activations;
    if (peakIndex < 0) {
      peakIndex = index;
      continue;
    }
    int64_t bytes = timeline[index].getBytes();
    int64_t best = timeline[peakIndex].getBytes();
    if (bytes > best ||
        (bytes == best && !isa<KernelOp>(timeline[peakIndex].op) &&
         isa<KernelOp>(timeline[index].op)))
      peakIndex = index;
  }
  lowerBoundBytes = computeLowerBound(problem, alignment);

  poolsAtPeak = argumentBytes;
  if (peakIndex >= 0) {
    poolsAtPeak[static_cast<unsigned>(MemoryPoolKind::Grads)] =
        timeline[peakIndex].grads;
    poolsAtPeak[static_cast<unsigned>(MemoryPoolKind::Activations)] =
        timeline[peakIndex].activations;
    poolsAtPeak[static_cast<unsigned>(MemoryPoolKind::Params)] +=
        timeline[peakIndex].params;
  }
}

/// 4. Activations saved for the backward pass, by scope.
void MemoryAccount::collectSavedActivations() {
  if (firstBackwardIndex >= 0) {
    llvm::StringMap<int64_t> saved;
    // (A host buffer is the copy of a forward value, made before the
    // first backward op, possibly after the loss.)
    for (const AccountedBuffer &buffer : buffers)
      if (buffer.producer && buffer.pool == MemoryPoolKind::Activations &&
          (buffer.producerIndex <= lossIndex || buffer.host) &&
          buffer.interval.start <= firstBackwardIndex &&
          firstBackwardIndex <= buffer.interval.end) {
        if (buffer.host)
          savedOnHostBytes =
              saturatingAdd(savedOnHostBytes, buffer.getSizeBytes());
        else
          saved[buffer.scope] =
              saturatingAdd(saved[buffer.scope], buffer.getSizeBytes());
      }
    for (const auto &entry : saved)
      savedByScope.emplace_back(entry.getKey().str(), entry.getValue());
    llvm::sort(savedByScope, [](const auto &a, const auto &b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
  }
}

/// 5. FLOPs.
void MemoryAccount::countFlops(Walk &walk) {
  for (auto [kernel, index] : walk.kernels) {
    if (isOpNamed<TransferOp>(kernel.getKernel()) &&
        kernel.getOuts().size() == 1) {
      auto to = kernel.getOpAttributes().getAs<MemoryKindAttr>("to");
      int64_t bytes =
          getMemRefSizeInBytes(cast<MemRefType>(kernel.getOuts()[0].getType()),
                               kernel)
              .value_or(0);
      int64_t &total =
          to && to.getValue() == MemoryKind::Host ? bytesToHost : bytesToDevice;
      bytes =
          llvm::checkedMul(bytes, getRunsPerStep(kernel)).value_or(kMaxInt64);
      total = saturatingAdd(total, bytes);
    }
    OpCost cost = getOpCost(kernel);
    int64_t flops = cost.flops;
    fused.recomputeFlops = saturatingAdd(fused.recomputeFlops,
                                         cost.recomputeFlops);
    if (!kernel->hasAttr(MemoptDialect::kRecomputeAttrName)) {
      fused.attention += isOpNamed<AttentionOp>(kernel.getKernel());
      fused.linearCrossEntropy +=
          isOpNamed<LinearCrossEntropyOp, Nf4LinearCrossEntropyOp>(
              kernel.getKernel());
    }
    if (kernel->hasAttr(MemoptDialect::kRecomputeAttrName))
      recomputeFlops = saturatingAdd(recomputeFlops, flops);
    else if (lossIndex < 0 || index <= lossIndex)
      forwardFlops = saturatingAdd(forwardFlops, flops);
    else
      backwardFlops = saturatingAdd(backwardFlops, flops);
  }
}

int64_t MemoryAccount::getTotalBytesAtPeak() const {
  int64_t total = 0;
  for (int64_t bytes : poolsAtPeak)
    total = saturatingAdd(total, bytes);
  return total;
}

int64_t MemoryAccount::getHostBytes() const {
  int64_t total = hostArenaBytes;
  for (int64_t bytes : hostArgumentBytes)
    total = saturatingAdd(total, bytes);
  return total;
}

int64_t MemoryAccount::getArgumentBytes() const {
  int64_t total = 0;
  for (int64_t bytes : argumentBytes)
    total = saturatingAdd(total, bytes);
  return total;
}

Operation *MemoryAccount::getPeakOp() const {
  return peakIndex >= 0 ? timeline[peakIndex].op : nullptr;
}

int64_t MemoryAccount::getPeakBytes() const {
  return peakIndex >= 0 ? timeline[peakIndex].getBytes() : 0;
}

SmallVector<unsigned> MemoryAccount::getBuffersLiveAtPeak() const {
  SmallVector<unsigned> live;
  if (peakIndex < 0)
    return live;
  for (auto [id, buffer] : llvm::enumerate(buffers))
    if (buffer.interval.start <= peakIndex &&
        peakIndex <= buffer.interval.end && buffer.getSizeBytes() > 0 &&
        !buffer.host)
      live.push_back(id);
  llvm::stable_sort(live, [&](unsigned a, unsigned b) {
    return buffers[a].getSizeBytes() > buffers[b].getSizeBytes();
  });
  return live;
}

llvm::StringRef memopt::getReportedOpName(Operation *op) {
  if (!op)
    return "";
  if (auto kernel = dyn_cast<KernelOp>(op))
    return kernel.getKernel();
  return op->getName().getStringRef();
}

void MemoryAccount::print(llvm::raw_ostream &os) const {
  os << "  arena_bytes=";
  if (arenaBytes)
    os << *arenaBytes;
  else
    os << "?";
  os << " lower_bound_bytes=" << lowerBoundBytes << "\n  pools:";
  for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
    os << " " << getMemoryPoolName(static_cast<MemoryPoolKind>(pool)) << "="
       << poolsAtPeak[pool];
  if (getHostBytes()) {
    os << "\n  host: arena_bytes=" << hostArenaBytes
       << " to_host=" << bytesToHost << " to_device=" << bytesToDevice
       << " pools:";
    for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
      if (hostArgumentBytes[pool])
        os << " " << getMemoryPoolName(static_cast<MemoryPoolKind>(pool)) << "="
           << hostArgumentBytes[pool];
  }
  os << "\n  peak: index=" << peakIndex
     << " op=" << getReportedOpName(getPeakOp()) << " scope=\""
     << getReportedScope(getPeakOp()) << "\" bytes=" << getPeakBytes()
     << "\n  loss=" << lossIndex << " first_backward=" << firstBackwardIndex
     << " saved:";
  for (const auto &[scope, bytes] : savedByScope)
    os << " \"" << scope << "\"=" << bytes;
  os << "\n  flops: forward=" << forwardFlops << " backward=" << backwardFlops
     << " recompute=" << getRecomputeFlops() << "\n";
  for (const AccountedBuffer &buffer : buffers) {
    os << "  buffer " << buffer.interval.id << " "
       << getMemoryPoolName(buffer.pool) << (buffer.host ? " host" : "")
       << " size=" << buffer.getSizeBytes() << " live=["
       << buffer.interval.start << ", " << buffer.interval.end
       << "] producer=" << buffer.producerIndex << " scope=\"" << buffer.scope
       << "\"\n";
  }
  for (auto [index, point] : llvm::enumerate(timeline))
    os << "  point " << index << " " << getReportedOpName(point.op)
       << " activations=" << point.activations << " grads=" << point.grads
       << "\n";
}
