//===- Bufferize.cpp - tensors to buffers in destination-passing style ----===//
//
// Rewrites the `memopt.train_step` function from tensors to memrefs as
// docs/Pipeline.md section 2 states: every memopt op becomes one
// `memopt.kernel` that reads its operands' buffers and writes one buffer per
// result.
//
// The algorithm is a single forward walk over the (single-block) body, like
// upstream's one-shot bufferization restricted to straight-line code whose
// ops all have static shapes:
//
//  1. Destinations. The loss result is written into the new `%loss`
//     argument. The new value of each "param", "state" and "optim" argument
//     is written by its producing kernel straight into that argument's memref
//     when that cannot clobber a value still needed: every other use of the
//     old argument comes before the producer, or is the producer itself and
//     the runtime entry allows that output to alias that input (elementwise
//     entries, optimizer updates, batch-norm running statistics, loss-scale
//     updates; runtime.h). Otherwise the value gets a scratch buffer like any
//     other and is copied into the argument at the end of the step, with a
//     `memopt.kernel "memopt.reshape"` of identical in and out types (the
//     runtime's plain copy). An argument returned unchanged needs nothing.
//  2. Rewrite. Each op becomes a kernel carrying its inherent attributes in
//     `with` and its discardable ones (`memopt.scope`) as its own; each
//     result without a destination gets a `memref.alloc` right before it.
//     A reduction over dimensions that are not adjacent becomes one kernel
//     per run of adjacent dimensions, through f32 intermediates, as the
//     runtime's reduce entry takes one run.
//  3. Deallocation. Each allocated buffer is freed right after its last user
//     in the block (the kernels and copies that read it).
//
// Linear in the size of the body (block-order queries are amortised O(1)).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "memopt-bufferize"

namespace memopt {
#define GEN_PASS_DEF_BUFFERIZEPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

/// Whether the runtime entry of `op` may write its result `resultIndex` into
/// the buffer of its operand `operandIndex` (runtime.h: elementwise entries,
/// and the "corresponding" outputs of the update entries).
static bool mayOverwriteOperand(Operation *op, unsigned resultIndex,
                                unsigned operandIndex) {
  if (isa<AddOp, SubOp, MulOp, DivOp, MaximumOp, AddScalarOp, MulScalarOp,
          PowScalarOp, NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SigmoidOp,
          ReluOp, SiluOp, GeluOp, ReluGradOp, SiluGradOp, TanhGradOp,
          SigmoidGradOp, GeluGradOp, WhereOp, MaskedFillOp, DropoutOp,
          IncrementOp, ScaleLossOp>(op))
    return true;
  auto pairs = [&](ArrayRef<std::pair<unsigned, unsigned>> allowed) {
    return llvm::is_contained(allowed,
                              std::make_pair(resultIndex, operandIndex));
  };
  if (isa<SgdUpdateOp>(op))
    return pairs({{0, 0}, {1, 2}});
  if (isa<AdamWUpdateOp>(op))
    return pairs({{0, 0}, {1, 2}, {2, 3}});
  if (isa<BatchNormOp>(op))
    return pairs({{3, 3}, {4, 4}});
  if (isa<UpdateScaleOp>(op))
    return pairs({{0, 0}, {1, 1}});
  if (isa<UnscaleOp>(op))
    return resultIndex + 1 < op->getNumResults() &&
           operandIndex == resultIndex + 1;
  return false;
}

/// The reduced dimensions of a `memopt.reduce_*` op split into the runs that
/// one runtime call can reduce: dimensions next to each other, or separated
/// only by dimensions of extent 1. Empty for other ops.
static SmallVector<SmallVector<int64_t>> getReductionRuns(Operation *op) {
  SmallVector<SmallVector<int64_t>> runs;
  if (!isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op))
    return runs;
  ArrayRef<int64_t> shape =
      cast<ShapedType>(op->getOperand(0).getType()).getShape();
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
  for (int64_t d : dims.asArrayRef()) {
    bool adjacent =
        !runs.empty() && llvm::all_of(llvm::seq(runs.back().back() + 1, d),
                                      [&](int64_t k) { return shape[k] == 1; });
    if (!adjacent)
      runs.emplace_back();
    runs.back().push_back(d);
  }
  return runs;
}

/// The inherent attributes of `op`, as the `with` dictionary of its kernel.
/// Attributes left at their default are absent, as in the op.
static DictionaryAttr getInherentAttrs(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  if (std::optional<RegisteredOperationName> info = op->getRegisteredInfo())
    for (StringAttr name : info->getAttributeNames())
      if (std::optional<Attribute> value = op->getInherentAttr(name);
          value && *value)
        attrs.emplace_back(name, *value);
  return DictionaryAttr::get(op->getContext(), attrs);
}

static MemRefType toMemRef(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

namespace {
struct BufferizePass : public memopt::impl::BufferizePassBase<BufferizePass> {
  using Base::Base;

  void runOnOperation() override;

private:
  LogicalResult bufferize(func::FuncOp func);
};
} // namespace

/// Checks that `func` is a train step this pass handles: one block of memopt
/// tensor ops on static shapes, returning the loss and the new value of each
/// updated argument. Fills `updated` with those arguments' indices.
static LogicalResult checkTrainStep(func::FuncOp func,
                                    SmallVectorImpl<unsigned> &updated) {
  if (func.isExternal())
    return func.emitOpError() << "marked memopt.train_step has no body";
  if (!func.getBody().hasOneBlock())
    return func.emitOpError()
           << "has control flow (" << func.getBody().getBlocks().size()
           << " blocks); --memopt-bufferize handles one block";
  for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return func.emitOpError()
             << "argument #" << index
             << " must be a statically shaped tensor, got " << type;
    auto role =
        func.getArgAttrOfType<StringAttr>(index, MemoptDialect::kRoleAttrName);
    std::optional<ArgumentRole> kind =
        role ? symbolizeArgumentRole(role.getValue()) : std::nullopt;
    if (!kind)
      return func.emitOpError()
             << "argument #" << index << " has no valid 'memopt.role'";
    if (*kind == ArgumentRole::Loss)
      return func.emitOpError() << "argument #" << index
                                << " already has role \"loss\": the function "
                                   "looks bufferized";
    if (*kind == ArgumentRole::Param || *kind == ArgumentRole::State ||
        *kind == ArgumentRole::Optim)
      updated.push_back(index);
  }

  Type lossType =
      RankedTensorType::get({}, Float32Type::get(func.getContext()));
  ArrayRef<Type> results = func.getResultTypes();
  if (results.size() != updated.size() + 1 || results.front() != lossType)
    return func.emitOpError()
           << "must return the loss (" << lossType
           << ") and then the new value of each of its " << updated.size()
           << " param, state and optim arguments, got " << results.size()
           << " result" << (results.size() == 1 ? "" : "s");
  for (auto [position, argIndex] : llvm::enumerate(updated))
    if (results[position + 1] != func.getArgumentTypes()[argIndex])
      return func.emitOpError()
             << "result #" << position + 1 << " has type "
             << results[position + 1] << " but is the new value of argument #"
             << argIndex << " of type " << func.getArgumentTypes()[argIndex];

  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!isa<MemoptDialect>(op.getDialect()) || isa<KernelOp>(op) ||
        op.getNumRegions() != 0)
      return op.emitOpError()
             << "cannot be bufferized: --memopt-bufferize handles memopt "
                "tensor ops only";
    for (Type type :
         llvm::concat<const Type>(op.getOperandTypes(), op.getResultTypes())) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.hasStaticShape())
        return op.emitOpError() << "has a value of type " << type
                                << ", expected a statically shaped tensor";
    }
  }
  if (!isa<func::ReturnOp>(func.getBody().front().getTerminator()))
    return func.emitOpError() << "must end with func.return";
  return success();
}

LogicalResult BufferizePass::bufferize(func::FuncOp func) {
  SmallVector<unsigned> updated;
  if (failed(checkTrainStep(func, updated)))
    return failure();

  MLIRContext *ctx = &getContext();
  Block &body = func.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  unsigned numArgs = func.getNumArguments();

  // 1. Destinations: the argument each in-place value is written into
  // (numArgs stands for the new loss argument), and the copies into updated
  // arguments at the end, as (source value, argument index).
  DenseMap<Value, unsigned> destination;
  SmallVector<std::pair<Value, unsigned>> copies;
  DenseMap<unsigned, Value> newValueOf;
  for (auto [position, argIndex] : llvm::enumerate(updated))
    newValueOf[argIndex] = returnOp.getOperand(position + 1);

  auto canWriteInto = [&](OpResult value, BlockArgument arg) {
    Operation *producer = value.getOwner();
    return llvm::all_of(arg.getUses(), [&](OpOperand &use) {
      Operation *user = use.getOwner();
      if (user == producer)
        return mayOverwriteOperand(producer, value.getResultNumber(),
                                   use.getOperandNumber());
      return user->isBeforeInBlock(producer);
    });
  };

  Value loss = returnOp.getOperand(0);
  if (isa<OpResult>(loss))
    destination[loss] = numArgs;
  else
    copies.push_back({loss, numArgs});
  for (auto [position, argIndex] : llvm::enumerate(updated)) {
    Value value = returnOp.getOperand(position + 1);
    BlockArgument arg = body.getArgument(argIndex);
    if (value == arg)
      continue;
    if (auto source = dyn_cast<BlockArgument>(value)) {
      // The copy reads the source argument at the end of the step: it must
      // still hold its old value then.
      auto it = newValueOf.find(source.getArgNumber());
      if (it != newValueOf.end() && it->second != source)
        return returnOp.emitOpError()
               << "returns argument #" << source.getArgNumber()
               << " as the new value of argument #" << argIndex
               << " while argument #" << source.getArgNumber()
               << " is itself updated; --memopt-bufferize cannot order "
                  "these copies";
      copies.push_back({value, argIndex});
      continue;
    }
    auto result = cast<OpResult>(value);
    if (!destination.contains(value) && canWriteInto(result, arg))
      destination[value] = argIndex;
    else
      copies.push_back({value, argIndex});
  }

  // The new signature: memrefs, plus the loss, and no results.
  for (BlockArgument arg : body.getArguments())
    arg.setType(toMemRef(arg.getType()));
  Builder b(ctx);
  NamedAttribute lossAttrs[] = {
      b.getNamedAttr(MemoptDialect::kRoleAttrName, b.getStringAttr("loss")),
      b.getNamedAttr(MemoptDialect::kNameAttrName, b.getStringAttr("loss"))};
  auto lossMemRef = MemRefType::get({}, b.getF32Type());
  if (failed(func.insertArgument(
          numArgs, lossMemRef, b.getDictionaryAttr(lossAttrs), func.getLoc())))
    return func.emitOpError() << "cannot add the loss argument";
  func.setType(FunctionType::get(ctx, body.getArgumentTypes(), {}));

  // 2. Kernels.
  DenseMap<Value, Value> buffer;
  for (BlockArgument arg : body.getArguments())
    buffer[arg] = arg;
  SmallVector<Value> allocs;
  SmallVector<Operation *> tensorOps;
  OpBuilder builder(ctx);
  for (Operation &op : body.without_terminator()) {
    tensorOps.push_back(&op);
    builder.setInsertionPoint(&op);
    SmallVector<Value> outs;
    for (OpResult result : op.getResults()) {
      auto it = destination.find(result);
      if (it != destination.end()) {
        outs.push_back(body.getArgument(it->second));
      } else {
        auto alloc = memref::AllocOp::create(builder, op.getLoc(),
                                             toMemRef(result.getType()));
        allocs.push_back(alloc);
        outs.push_back(alloc);
        ++numAllocs;
      }
      buffer[result] = outs.back();
    }
    SmallVector<Value> ins =
        llvm::map_to_vector(op.getOperands(), [&](Value operand) {
          return buffer.lookup(operand);
        });
    auto emitKernel = [&](ValueRange kernelIns, ValueRange kernelOuts,
                          DictionaryAttr attrs) {
      auto kernel =
          KernelOp::create(builder, op.getLoc(), op.getName().getStringRef(),
                           kernelIns, kernelOuts, attrs);
      for (NamedAttribute attr : op.getDiscardableAttrs())
        kernel->setAttr(attr.getName(), attr.getValue());
      ++numKernels;
    };
    SmallVector<SmallVector<int64_t>> runs = getReductionRuns(&op);
    if (runs.size() <= 1) {
      emitKernel(ins, outs, getInherentAttrs(&op));
      continue;
    }
    // One kernel per run, last run first (so that the earlier dimension
    // numbers stay valid), through f32 intermediates.
    Value current = ins.front();
    SmallVector<int64_t> shape(cast<ShapedType>(current.getType()).getShape());
    for (size_t i = runs.size(); i-- > 0;) {
      for (int64_t d : llvm::reverse(runs[i]))
        shape.erase(shape.begin() + d);
      Value next = outs.front();
      if (i != 0) {
        next = memref::AllocOp::create(builder, op.getLoc(),
                                       MemRefType::get(shape, b.getF32Type()));
        allocs.push_back(next);
        ++numAllocs;
      }
      emitKernel(current, next,
                 b.getDictionaryAttr(
                     b.getNamedAttr("dims", b.getDenseI64ArrayAttr(runs[i]))));
      current = next;
    }
  }
  numInPlace += destination.size();

  builder.setInsertionPoint(returnOp);
  for (auto [value, argIndex] : copies) {
    KernelOp::create(builder, returnOp.getLoc(), ReshapeOp::getOperationName(),
                     ValueRange{buffer.lookup(value)},
                     ValueRange{body.getArgument(argIndex)},
                     b.getDictionaryAttr({}));
    ++numCopies;
  }
  func::ReturnOp::create(builder, returnOp.getLoc());
  returnOp.erase();
  for (Operation *op : llvm::reverse(tensorOps))
    op->erase();

  // 3. Deallocations, after the last user in the block.
  for (Value alloc : allocs) {
    Operation *last = alloc.getDefiningOp();
    for (Operation *user : alloc.getUsers())
      if (last->isBeforeInBlock(user))
        last = user;
    builder.setInsertionPointAfter(last);
    memref::DeallocOp::create(builder, alloc.getLoc(), alloc);
  }
  LLVM_DEBUG(llvm::dbgs() << "bufferized @" << func.getName() << ": "
                          << allocs.size() << " buffers, " << destination.size()
                          << " written in place, " << copies.size()
                          << " copies\n");
  return success();
}

void BufferizePass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<func::FuncOp> steps;
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(MemoptDialect::kTrainStepAttrName))
      steps.push_back(func);
  if (steps.empty()) {
    module.emitError() << "no function marked 'memopt.train_step' to "
                          "bufferize (run --memopt-autodiff first)";
    return signalPassFailure();
  }
  if (steps.size() > 1) {
    steps[1].emitOpError() << "is a second function marked "
                              "'memopt.train_step' (expected one)";
    return signalPassFailure();
  }
  if (failed(bufferize(steps.front())))
    return signalPassFailure();
}
