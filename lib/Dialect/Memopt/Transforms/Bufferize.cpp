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
//     argument. The new value of each "param", "state", "optim" and
//     "param_copy" argument is written by its producing kernel straight
//     into that argument's memref when that cannot clobber a value still
//     needed: every other use of the
//     old argument comes before the producer, or is the producer itself and
//     the runtime entry allows that output to alias that input (the op's
//     InPlaceOpInterface: elementwise entries, optimizer updates, batch-norm
//     running statistics, loss-scale updates; runtime.h). Otherwise the value
//     gets a scratch buffer like any other and is copied into the argument at
//     the end of the step, with a `memopt.kernel "memopt.reshape"` of identical
//     in and out types (the runtime's plain copy). An argument returned
//     unchanged needs nothing.
//  2. Rewrite. Each op becomes a kernel carrying its inherent attributes in
//     `with` and its discardable ones (`memopt.scope`) as its own; each
//     result without a destination gets a `memref.alloc` right before it.
//     A reduction over dimensions that are not adjacent becomes one kernel
//     per run of adjacent dimensions, through f32 intermediates, as the
//     runtime's reduce entry takes one run.
//  3. Deallocation. Each allocated buffer is freed right after its last user
//     in the block (the kernels and copies that read it, directly or through
//     a view).
//
// With `reuse` (the default; `in-place` and `alias-reshapes` select the two
// rules separately), step 2 also shares buffers, which lowers the
// peak that buffer planning can reach (the "in-place" and "alias" rules of
// TVM's and XLA's static planners, and of PyTorch's inplace ops):
//
//  - In place. A result goes into the buffer of an operand of the same
//    type that its runtime entry may write it over (InPlaceOpInterface:
//    any operand of an elementwise entry, cast or softmax; the state an
//    update replaces) when that buffer is scratch (an alloc, never an
//    argument) and this kernel is the last reader of every value stored in
//    it. A buffer's "storage" is its alloc: the values written in place and
//    the views below share it, and the storage dies at the last use of any
//    of them. A kernel with several results (an update, `memopt.unscale`)
//    also needs that buffer to be a whole alloc or a reshape view of one,
//    and no other operand stored in the same alloc: the runtime goes
//    through the tensors one after the other. Result i of `memopt.unscale`
//    (the unscaled gradient i) so goes into the buffer of gradient i
//    (runtime.h: results[j] may alias grads[j]); the optimizer then reads
//    the unscaled gradient from there, so FP16 loss scaling needs no second
//    set of gradient buffers (with accumulation, the unscale after the loop
//    writes over the f32 accumulators). Under ZeRO the update writes the
//    new parameter shard over the shard it read.
//  - Reshape aliasing. A reshape becomes a `memref.reinterpret_cast` of its
//    operand's buffer (same elements, row-major, offset 0) instead of a copy
//    kernel; BufferLiveness follows the view, so the storage stays live
//    while the view is read. A reshape of an argument is a view of the
//    argument, so the users of the view count as readers of the argument
//    when step 1 decides whether its new value may overwrite it. A reshape
//    of an argument whose result (possibly through more reshapes) is
//    returned stays a copy: the end-of-step copies read their sources after
//    the arguments have been updated.
//  - One flat gradient buffer. A run of consecutive in-place f32
//    `shard.all_reduce` kernels (data parallelism's sums of the accumulators
//    after the loop) becomes one sum over one `memref<B x i8>` allocation
//    that holds the accumulators as `memref.view` slots, one runtime call
//    (FlattenAllReduces.cpp).
//  - Constants where a loop reads them. A `memopt.constant` outside a loop
//    (where folding hoists and merges them) is made again right before each
//    op inside the loop that reads it: a buffer read in a loop lives to the
//    loop's end, so one table shared by every layer (rotary tables, causal
//    masks) would otherwise hold its bytes across the whole forward and
//    backward of every micro-batch.
//
// Optimizer offload (docs/Offload.md): a result lives in the memory of its
// producer (getMemoryKind: host for an op marked memopt.on_host and a
// transfer to the host), its alloc carries `memopt.memory = "host"` there,
// and no rule above writes a result over a buffer of the other memory.
//
// Linear in the size of the body (block-order queries are amortised O(1)),
// plus the uses of each value once for its last use.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/IR/RuntimeDTypes.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/runtime.h"

#include "FlattenAllReduces.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
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
/// the buffer of its operand `operandIndex`: the op's InPlaceOpInterface
/// (runtime.h's aliasing), and the in-place sum of data parallelism
/// (memopt_all_reduce_sum, an upstream op without the interface).
static bool mayWriteResultOver(Operation *op, unsigned resultIndex,
                               unsigned operandIndex) {
  if (isa<shard::AllReduceOp>(op))
    return true;
  auto inPlace = dyn_cast<InPlaceOpInterface>(op);
  return inPlace && inPlace.mayWriteResultOver(resultIndex, operandIndex);
}

/// The operands whose buffers result `resultIndex` of `op` may be written
/// into (mayWriteResultOver), in operand order.
static SmallVector<unsigned> getReusableOperands(Operation *op,
                                                 unsigned resultIndex) {
  return llvm::to_vector(
      llvm::make_filter_range(llvm::seq(op->getNumOperands()), [&](unsigned i) {
        return mayWriteResultOver(op, resultIndex, i);
      }));
}

/// The reduced dimensions of a `memopt.reduce_*` op split into the runs that
/// one runtime call can reduce: dimensions next to each other, or separated
/// only by dimensions of extent 1. Empty for other ops.
static SmallVector<SmallVector<int64_t>> getReductionRuns(Operation *op) {
  SmallVector<SmallVector<int64_t>> runs;
  if (!isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceSumSquaresOp>(op))
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

/// The scratch buffer the runtime entry of `op` needs beyond its results
/// (runtime.h), or nullopt: the chunked linear cross-entropy's
/// logits chunk (and, for its gradient, the grad_x accumulator; for an NF4
/// weight, a dequantized chunk of it), the NF4 product's dequantized chunk
/// of its weight.
static std::optional<MemRefType> getScratchType(Operation *op) {
  // runtime.h sizes them in multiples of 256 bytes; f32 elements keep each
  // a buffer of a dtype the runtime knows.
  auto f32Buffer = [&](uint64_t bytes) {
    return MemRefType::get({static_cast<int64_t>(bytes / 4)},
                           Float32Type::get(op->getContext()));
  };
  // An NF4 w has no element type: `w` is null.
  auto scratch = [&](Value x, Value w, int64_t chunk, int grad) {
    auto type = cast<RankedTensorType>(x.getType());
    int64_t width = type.getShape().back();
    int64_t rows = width > 0 ? type.getNumElements() / width : 0;
    memopt_dtype dtype = getRuntimeDType(type).value_or(MEMOPT_F32);
    if (!w)
      return f32Buffer(memopt_nf4_linear_cross_entropy_scratch_bytes(
          dtype, rows, width, chunk, grad));
    memopt_dtype wDtype = getRuntimeDType(w.getType()).value_or(MEMOPT_F32);
    return f32Buffer(memopt_linear_cross_entropy_scratch_bytes(
        dtype, wDtype, rows, width, chunk, grad));
  };
  if (auto product = dyn_cast<Nf4MatmulOp>(op)) {
    // The chunk of the weight's columns dequantized at a time.
    ArrayRef<int64_t> weight = product.getRhsShape();
    bool transposed = product.getTransposeRhs();
    return f32Buffer(memopt_nf4_matmul_scratch_bytes(
        weight[transposed ? 0 : 1], weight[transposed ? 1 : 0]));
  }
  if (auto loss = dyn_cast<LinearCrossEntropyOp>(op))
    return scratch(loss.getX(), loss.getW(), loss.getChunk(), /*grad=*/0);
  if (auto grad = dyn_cast<LinearCrossEntropyGradOp>(op))
    return scratch(grad.getX(), grad.getW(), grad.getChunk(), /*grad=*/1);
  if (auto loss = dyn_cast<Nf4LinearCrossEntropyOp>(op))
    return scratch(loss.getX(), Value(), loss.getChunk(), /*grad=*/0);
  if (auto grad = dyn_cast<Nf4LinearCrossEntropyGradOp>(op))
    return scratch(grad.getX(), Value(), grad.getChunk(), /*grad=*/1);
  return std::nullopt;
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
        *kind == ArgumentRole::Optim || *kind == ArgumentRole::ParamCopy)
      updated.push_back(index);
  }

  Type lossType =
      RankedTensorType::get({}, Float32Type::get(func.getContext()));
  ArrayRef<Type> results = func.getResultTypes();
  if (results.size() != updated.size() + 1 || results.front() != lossType)
    return func.emitOpError()
           << "must return the loss (" << lossType
           << ") and then the new value of each of its " << updated.size()
           << " param, state, optim and param_copy arguments, got "
           << results.size() << " result" << (results.size() == 1 ? "" : "s");
  for (auto [position, argIndex] : llvm::enumerate(updated))
    if (results[position + 1] != func.getArgumentTypes()[argIndex])
      return func.emitOpError()
             << "result #" << position + 1 << " has type "
             << results[position + 1] << " but is the new value of argument #"
             << argIndex << " of type " << func.getArgumentTypes()[argIndex];

  // Memopt tensor ops, and the micro-batch loop of --memopt-accumulate: an
  // scf.for from 0 by 1 whose body holds memopt tensor ops, micro-batch
  // views (tensor.extract_slice) and index arithmetic.
  auto checkBlock = [&](Block &block, bool inLoop,
                        auto &self) -> LogicalResult {
    for (Operation &op : block.without_terminator()) {
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        if (inLoop)
          return op.emitOpError() << "is nested in another loop; "
                                     "--memopt-bufferize handles one level";
        std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
        std::optional<int64_t> step = getConstantIntValue(loop.getStep());
        if (!lb || *lb != 0 || !step || *step != 1 ||
            !getConstantIntValue(loop.getUpperBound()))
          return op.emitOpError() << "must count from 0 to a constant by 1 "
                                     "to be bufferized";
        for (Type type : loop.getResultTypes()) {
          auto tensor = dyn_cast<RankedTensorType>(type);
          if (!tensor || !tensor.hasStaticShape())
            return op.emitOpError() << "carries a value of type " << type
                                    << ", expected a statically shaped tensor";
        }
        if (failed(self(*loop.getBody(), true, self)))
          return failure();
        continue;
      }
      if (isa<arith::ConstantIndexOp, arith::MulIOp, arith::AddIOp>(op) &&
          op.getResult(0).getType().isIndex())
        continue;
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
        if (!inLoop || !slice.getSourceType().hasStaticShape() ||
            !slice.getType().hasStaticShape() || !slice.hasUnitStride() ||
            slice.getSourceType().getRank() != slice.getType().getRank())
          return op.emitOpError()
                 << "cannot be bufferized: only micro-batch views (unit "
                    "strides, static sizes, in the loop) are supported";
        continue;
      }
      // The collectives of data parallelism (--memopt-accumulate) and ZeRO
      // (--memopt-shard-optimizer) become kernels like the memopt ops.
      bool isCollective = isCollectiveKernel(op.getName().getStringRef());
      std::optional<shard::ReductionKind> reduction;
      if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
        reduction = reduce.getReduction();
      if (auto reduce = dyn_cast<shard::ReduceScatterOp>(op))
        reduction = reduce.getReduction();
      if (reduction && *reduction != shard::ReductionKind::Sum)
        return op.emitOpError() << "cannot be bufferized: only sums are";
      if ((!isa<MemoptDialect>(op.getDialect()) && !isCollective) ||
          isa<KernelOp>(op) || op.getNumRegions() != 0)
        return op.emitOpError()
               << "cannot be bufferized: --memopt-bufferize handles memopt "
                  "tensor ops (and shard collectives) only";
      for (Type type : llvm::concat<const Type>(op.getOperandTypes(),
                                                op.getResultTypes())) {
        auto tensor = dyn_cast<RankedTensorType>(type);
        if (!tensor || !tensor.hasStaticShape())
          return op.emitOpError() << "has a value of type " << type
                                  << ", expected a statically shaped tensor";
      }
    }
    return success();
  };
  if (failed(checkBlock(func.getBody().front(), false, checkBlock)))
    return failure();
  if (!isa<func::ReturnOp>(func.getBody().front().getTerminator()))
    return func.emitOpError() << "must end with func.return";
  return success();
}

namespace {

/// Bufferizes one train step: the steps of the file comment, and the state
/// they share (each value's buffer, each buffer's storage and last read).
class StepBufferizer {
public:
  StepBufferizer(func::FuncOp func, bool reuse, bool inPlace,
                 bool aliasReshapes)
      : ctx(func.getContext()), func(func), body(func.getBody().front()),
        returnOp(cast<func::ReturnOp>(body.getTerminator())),
        numArgs(func.getNumArguments()), reuseInPlace(reuse && inPlace),
        reuseViews(reuse && aliasReshapes), b(ctx), builder(ctx) {}

  /// Rewrites the step; `updated` are the arguments it returns new values
  /// of (checkTrainStep).
  LogicalResult run(ArrayRef<unsigned> updated);

  // What was made, for the pass's statistics.
  unsigned numKernels = 0, numAllocs = 0, numCopies = 0, reused = 0, views = 0;
  size_t getNumInPlace() const { return destination.size(); }

private:
  /// 1. The argument each in-place value is written into, and the copies.
  LogicalResult chooseDestinations(ArrayRef<unsigned> updated);
  /// The new signature: memrefs, plus the loss, and no results.
  LogicalResult convertSignature();
  /// Clones each constant read inside a loop before each such reader.
  void materializeConstantsInLoops();
  /// The returned values, and the program positions of the ops.
  void numberPositions();
  /// 2. Kernels, views and loops for the ops of `block`.
  LogicalResult bufferizeBlock(Block &block);
  /// A micro-batch view: a dynamic offset into its source's buffer.
  LogicalResult bufferizeSlice(tensor::ExtractSliceOp slice);
  /// The micro-batch loop: accumulators become buffers updated in place
  /// across iterations; body values get buffers in the body.
  LogicalResult bufferizeLoop(scf::ForOp loop);
  /// A reshape whose result has no destination: a view of its operand's
  /// buffer, unless it is a returned view of an argument. False when it
  /// stays a copy.
  bool bufferizeReshapeAsView(Operation &op);
  /// Any other op: a kernel (or one per run of reduced dimensions) writing
  /// into its destination, a dying operand or a new buffer.
  void bufferizeKernel(Operation &op);
  /// The copies into updated arguments, the return, the tensor ops erased,
  /// the flat gradient buffer and 3. the deallocations.
  void finish();

  /// Whether `value`'s producer may write it into argument `arg`: every
  /// other reader of the argument comes first. With `reuse`, a reshape may
  /// become a view of the argument: its users read the argument too
  /// (counting them for a reshape that stays a copy only makes this more
  /// conservative).
  bool canWriteInto(OpResult value, BlockArgument arg);
  /// A loop's result lives in the loop's accumulator: copied at the end.
  static bool isKernelResult(Value v) {
    return isa<OpResult>(v) && !isa<scf::ForOp>(v.getDefiningOp());
  }
  int64_t getUsePosition(Value value, Operation *user);
  int64_t getLastUse(Value value);
  void store(Value value, Value memref);
  /// The buffer of an operand of `op` that `result` may overwrite, or null.
  /// A kernel with several results (the unscale) overwrites an operand only
  /// when it is a whole buffer or a reshape view (identity layout) and no
  /// other operand is stored in the same alloc: the runtime reads and writes
  /// one tensor pair after the other.
  Value findDyingOperand(Operation &op, OpResult result);
  Value newAlloc(Location loc, MemRefType type);
  void copyInto(Location loc, Value from, Value to);
  /// Whether the producer of `value` (in the loop body) may write it into
  /// the buffer of the loop's `iterArg`: every other reader of the
  /// iteration's value comes first, or is the producer and may alias it.
  bool canWriteIntoIterArg(OpResult value, BlockArgument iterArg);

  MLIRContext *ctx;
  func::FuncOp func;
  Block &body;
  func::ReturnOp returnOp;
  unsigned numArgs;
  bool reuseInPlace, reuseViews;
  Builder b;
  OpBuilder builder;

  /// The argument each in-place value is written into (numArgs stands for
  /// the new loss argument), and the copies into updated arguments at the
  /// end, as (source value, argument index).
  DenseMap<Value, unsigned> destination;
  SmallVector<std::pair<Value, unsigned>> copies;
  DenseMap<unsigned, Value> newValueOf;
  /// Values returned, directly or through reshapes.
  DenseSet<Value> returned;
  /// Program positions of the ops in pre-order (the return is last), and
  /// the last position inside each loop.
  DenseMap<Operation *, int64_t> position, loopEnd;
  /// `buffer` maps each tensor value to the memref holding it, `storageOf`
  /// each memref to the alloc or argument it lives in, and `storageEnd` each
  /// alloc to the last position at which a value stored in it is read.
  /// `loopDestination` maps a value yielded by a loop to the accumulator
  /// buffer it is written into.
  DenseMap<Value, Value> buffer, storageOf, loopDestination;
  DenseMap<Value, int64_t> storageEnd;
  SmallVector<Value> allocs;
  SmallVector<Operation *> tensorOps;
};

} // namespace

LogicalResult StepBufferizer::run(ArrayRef<unsigned> updated) {
  if (failed(chooseDestinations(updated)) || failed(convertSignature()))
    return failure();
  materializeConstantsInLoops();
  numberPositions();
  for (BlockArgument arg : body.getArguments())
    buffer[arg] = storageOf[arg] = arg;
  if (failed(bufferizeBlock(body)))
    return failure();
  finish();
  LLVM_DEBUG(llvm::dbgs() << "bufferized @" << func.getName() << ": "
                          << allocs.size() << " buffers, " << destination.size()
                          << " written in place, " << reused
                          << " into a dying operand, " << views << " views, "
                          << copies.size() << " copies\n");
  return success();
}

LogicalResult StepBufferizer::chooseDestinations(ArrayRef<unsigned> updated) {
  for (auto [position, argIndex] : llvm::enumerate(updated))
    newValueOf[argIndex] = returnOp.getOperand(position + 1);

  Value loss = returnOp.getOperand(0);
  if (isKernelResult(loss))
    destination[loss] = numArgs;
  else
    copies.push_back({loss, numArgs});
  for (auto [position, argIndex] : llvm::enumerate(updated)) {
    Value value = returnOp.getOperand(position + 1);
    BlockArgument arg = body.getArgument(argIndex);
    if (value == arg)
      continue;
    if (getMemoryKind(value) != getMemoryKind(arg))
      return returnOp.emitOpError()
             << "returns a value in "
             << stringifyMemoryKind(getMemoryKind(value))
             << " memory as the new value of argument #" << argIndex
             << ", which lives in " << stringifyMemoryKind(getMemoryKind(arg))
             << " memory (expected a memopt.transfer)";
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
    if (isKernelResult(value) && !destination.contains(value) &&
        canWriteInto(result, arg))
      destination[value] = argIndex;
    else
      copies.push_back({value, argIndex});
  }
  return success();
}

LogicalResult StepBufferizer::convertSignature() {
  for (BlockArgument arg : body.getArguments())
    arg.setType(toMemRef(arg.getType()));
  NamedAttribute lossAttrs[] = {
      b.getNamedAttr(MemoptDialect::kRoleAttrName, b.getStringAttr("loss")),
      b.getNamedAttr(MemoptDialect::kNameAttrName, b.getStringAttr("loss"))};
  auto lossMemRef = MemRefType::get({}, b.getF32Type());
  if (failed(func.insertArgument(
          numArgs, lossMemRef, b.getDictionaryAttr(lossAttrs), func.getLoc())))
    return func.emitOpError() << "cannot add the loss argument";
  func.setType(FunctionType::get(ctx, body.getArgumentTypes(), {}));
  return success();
}

void StepBufferizer::materializeConstantsInLoops() {
  for (auto constant : llvm::make_early_inc_range(body.getOps<ConstantOp>())) {
    for (OpOperand &use :
         llvm::make_early_inc_range(constant.getResult().getUses())) {
      Operation *user = use.getOwner();
      if (user->getBlock() == &body)
        continue;
      builder.setInsertionPoint(user);
      use.set(builder.clone(*constant)->getResult(0));
    }
    if (constant->use_empty())
      constant->erase();
  }
}

void StepBufferizer::numberPositions() {
  // Values that are returned, directly or through reshapes: a reshape of an
  // argument among them stays a copy (see the header).
  returned.insert_range(returnOp.getOperands());
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (isa<ReshapeOp>(op) && returned.contains(op.getResult(0)))
      returned.insert(op.getOperand(0));

  // Program positions of the ops in pre-order (the return is last), the
  // last position inside each loop, and the last position at which each
  // value is read: a read inside a loop that the value is not defined in
  // counts at the end of that loop (the next iteration reads it again).
  {
    int64_t next = 0;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op != func)
        position[op] = next++;
    });
    func.walk([&](scf::ForOp loop) {
      loopEnd[loop] = position.lookup(loop.getBody()->getTerminator());
    });
  }
}

bool StepBufferizer::canWriteInto(OpResult value, BlockArgument arg) {
  Operation *producer = value.getOwner();
  if (getMemoryKind(value) != getMemoryKind(arg))
    return false;
  SmallVector<Value> readers = {arg};
  while (!readers.empty()) {
    for (OpOperand &use : readers.pop_back_val().getUses()) {
      Operation *user = body.findAncestorOpInBlock(*use.getOwner());
      if (user == producer) {
        if (!mayWriteResultOver(producer, value.getResultNumber(),
                                use.getOperandNumber()))
          return false;
        continue;
      }
      if (!user->isBeforeInBlock(producer))
        return false;
      if (reuseViews && isa<ReshapeOp>(use.getOwner()))
        readers.push_back(use.getOwner()->getResult(0));
    }
  }
  return true;
}

int64_t StepBufferizer::getUsePosition(Value value, Operation *user) {
  Operation *ancestor = value.getParentBlock()->findAncestorOpInBlock(*user);
  if (ancestor && ancestor != user)
    return loopEnd.lookup(ancestor);
  return position.lookup(user);
}

int64_t StepBufferizer::getLastUse(Value value) {
  int64_t last = -1;
  if (Operation *producer = value.getDefiningOp())
    last = position.lookup(producer);
  for (Operation *user : value.getUsers())
    last = std::max(last, getUsePosition(value, user));
  return last;
}

void StepBufferizer::store(Value value, Value memref) {
  buffer[value] = memref;
  Value storage = storageOf.lookup(memref);
  if (storage.getDefiningOp<memref::AllocOp>())
    storageEnd[storage] = std::max(storageEnd[storage], getLastUse(value));
}

Value StepBufferizer::findDyingOperand(Operation &op, OpResult result) {
  if (!reuseInPlace)
    return Value();
  for (unsigned index : getReusableOperands(&op, result.getResultNumber())) {
    Value operand = op.getOperand(index);
    Value memref = buffer.lookup(operand);
    Value storage = storageOf.lookup(memref);
    if (operand.getType() != result.getType() ||
        getMemoryKind(operand) != getMemoryKind(result) ||
        !storage.getDefiningOp<memref::AllocOp>() ||
        storageEnd.lookup(storage) != position.lookup(&op))
      continue;
    if (op.getNumResults() > 1 &&
        (!cast<MemRefType>(memref.getType()).getLayout().isIdentity() ||
         llvm::any_of(op.getOpOperands(), [&](OpOperand &other) {
           return other.getOperandNumber() != index &&
                  storageOf.lookup(buffer.lookup(other.get())) == storage;
         })))
      continue;
    return memref;
  }
  return Value();
}

Value StepBufferizer::newAlloc(Location loc, MemRefType type) {
  Value out = memref::AllocOp::create(builder, loc, type);
  allocs.push_back(out);
  storageOf[out] = out;
  ++numAllocs;
  return out;
}

void StepBufferizer::copyInto(Location loc, Value from, Value to) {
  KernelOp::create(builder, loc, ReshapeOp::getOperationName(),
                   ValueRange{from}, ValueRange{to}, b.getDictionaryAttr({}));
  ++numCopies;
}

bool StepBufferizer::canWriteIntoIterArg(OpResult value,
                                         BlockArgument iterArg) {
  Operation *producer = value.getOwner();
  if (producer->getBlock() != iterArg.getOwner())
    return false;
  for (OpOperand &use : iterArg.getUses()) {
    Operation *user =
        iterArg.getOwner()->findAncestorOpInBlock(*use.getOwner());
    if (user == producer) {
      if (!mayWriteResultOver(producer, value.getResultNumber(),
                              use.getOperandNumber()))
        return false;
      continue;
    }
    if (!user->isBeforeInBlock(producer) || isa<ReshapeOp>(user))
      return false;
  }
  return true;
}

LogicalResult StepBufferizer::bufferizeBlock(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block.without_terminator())) {
    builder.setInsertionPoint(&op);
    if (isa<arith::ConstantIndexOp, arith::MulIOp, arith::AddIOp>(op))
      continue;
    tensorOps.push_back(&op);
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      if (failed(bufferizeSlice(slice)))
        return failure();
    } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (failed(bufferizeLoop(loop)))
        return failure();
    } else if (!bufferizeReshapeAsView(op)) {
      bufferizeKernel(op);
    }
  }
  return success();
}

LogicalResult StepBufferizer::bufferizeSlice(tensor::ExtractSliceOp slice) {
  Operation &op = *slice;
  Value source = buffer.lookup(slice.getSource());
  auto sourceType = cast<MemRefType>(source.getType());
  if (!sourceType.getLayout().isIdentity())
    return slice.emitOpError() << "slices a view; expected a buffer";
  SmallVector<int64_t> strides = sourceType.getStridesAndOffset().first;
  ArrayRef<int64_t> sizes = slice.getStaticSizes();
  // Contiguous: only full dimensions after the first partial one,
  // and dimensions of extent 1 before it.
  size_t first = 0;
  while (first < sizes.size() && sizes[first] == 1)
    ++first;
  bool contiguous = true;
  for (size_t d = first + 1; d < sizes.size(); ++d)
    contiguous &= sizes[d] == sourceType.getDimSize(d);
  if (!contiguous)
    return slice.emitOpError() << "is not a contiguous part of its source";
  Value offset = arith::ConstantIndexOp::create(builder, op.getLoc(), 0);
  for (auto [d, ofr] : llvm::enumerate(slice.getMixedOffsets())) {
    Value term;
    if (auto v = dyn_cast<Value>(ofr))
      term = v;
    else if (int64_t c = *getConstantIntValue(ofr))
      term = arith::ConstantIndexOp::create(builder, op.getLoc(), c);
    else
      continue;
    Value stride =
        arith::ConstantIndexOp::create(builder, op.getLoc(), strides[d]);
    Value scaled = arith::MulIOp::create(builder, op.getLoc(), term, stride);
    offset = arith::AddIOp::create(builder, op.getLoc(), offset, scaled);
  }
  auto type = MemRefType::get(
      slice.getType().getShape(), sourceType.getElementType(),
      StridedLayoutAttr::get(ctx, ShapedType::kDynamic, strides));
  SmallVector<OpFoldResult> viewSizes = llvm::map_to_vector(
      slice.getType().getShape(),
      [&](int64_t size) -> OpFoldResult { return b.getIndexAttr(size); });
  SmallVector<OpFoldResult> viewStrides = llvm::map_to_vector(
      strides, [&](int64_t v) -> OpFoldResult { return b.getIndexAttr(v); });
  Value view = memref::ReinterpretCastOp::create(builder, op.getLoc(), type,
                                                 source, OpFoldResult(offset),
                                                 viewSizes, viewStrides);
  storageOf[view] = storageOf.lookup(source);
  store(slice.getResult(), view);
  ++views;
  return success();
}

LogicalResult StepBufferizer::bufferizeLoop(scf::ForOp loop) {
  Block *loopBody = loop.getBody();
  auto yield = cast<scf::YieldOp>(loopBody->getTerminator());
  SmallVector<Value> accumulators;
  for (auto [init, iterArg, result, yielded] :
       llvm::zip(loop.getInitArgs(), loop.getRegionIterArgs(),
                 loop.getResults(), yield.getOperands())) {
    Value initBuffer = buffer.lookup(init);
    Value storage = storageOf.lookup(initBuffer);
    Value acc;
    if (isa<OpResult>(init) && init.hasOneUse() &&
        storage.getDefiningOp<memref::AllocOp>() && storage == initBuffer &&
        storageEnd.lookup(storage) == position.lookup(loop)) {
      acc = initBuffer;
    } else if (getMemoryKind(init) == MemoryKind::Host) {
      // The runtime copies buffers on the device only.
      return loop.emitOpError()
             << "carries a host value whose initial value is not a buffer "
                "of its own (--memopt-offload-optimizer starts each host sum "
                "from a zero of its own)";
    } else {
      acc = newAlloc(loop.getLoc(), toMemRef(init.getType()));
      copyInto(loop.getLoc(), initBuffer, acc);
    }
    accumulators.push_back(acc);
    buffer[iterArg] = acc;
    storageEnd[acc] = std::max(storageEnd.lookup(acc), loopEnd.lookup(loop));
    auto yieldedResult = dyn_cast<OpResult>(yielded);
    if (yieldedResult && !loopDestination.contains(yielded) &&
        canWriteIntoIterArg(yieldedResult, iterArg))
      loopDestination[yielded] = acc;
    // A chain of adds onto the accumulator (one per partial sum,
    // --memopt-accumulate) updates it in place link by link.
    SmallVector<Value> chain;
    for (Value link = yielded;;) {
      auto add = link.getDefiningOp<AddOp>();
      if (!add || add->getBlock() != loopBody ||
          loopDestination.contains(link) != (link == yielded))
        break;
      chain.push_back(link);
      if (add.getLhs() == iterArg) {
        if (canWriteIntoIterArg(cast<OpResult>(link), iterArg))
          for (Value v : chain)
            loopDestination[v] = acc;
        break;
      }
      link = add.getLhs();
      if (!link.hasOneUse())
        break;
    }
  }
  if (failed(bufferizeBlock(*loopBody)))
    return failure();
  // Values the body computed elsewhere are copied at its end.
  builder.setInsertionPoint(yield);
  for (auto [acc, yielded, iterArg] :
       llvm::zip(accumulators, yield.getOperands(), loop.getRegionIterArgs())) {
    if (yielded == iterArg || loopDestination.lookup(yielded) == acc)
      continue;
    if (getMemoryKind(iterArg) == MemoryKind::Host)
      return yield.emitOpError()
             << "yields a host value that is not computed into its loop's "
                "buffer";
    copyInto(yield.getLoc(), buffer.lookup(yielded), acc);
  }
  // The loop on buffers: no iter_args.
  builder.setInsertionPoint(loop);
  auto newLoop =
      scf::ForOp::create(builder, loop.getLoc(), loop.getLowerBound(),
                         loop.getUpperBound(), loop.getStep());
  for (NamedAttribute attr : loop->getDiscardableAttrs())
    newLoop->setAttr(attr.getName(), attr.getValue());
  Block *newBody = newLoop.getBody();
  newBody->getOperations().splice(newBody->begin(), loopBody->getOperations(),
                                  loopBody->begin(), yield->getIterator());
  loop.getInductionVar().replaceAllUsesWith(newLoop.getInductionVar());
  for (auto [result, acc] : llvm::zip(loop.getResults(), accumulators))
    store(result, acc);
  return success();
}

bool StepBufferizer::bufferizeReshapeAsView(Operation &op) {
  if (auto reshape = dyn_cast<ReshapeOp>(op);
      reuseViews && reshape && !destination.contains(reshape.getResult()) &&
      !loopDestination.contains(reshape.getResult())) {
    Value source = buffer.lookup(reshape.getInput());
    bool ofArgument = isa<BlockArgument>(storageOf.lookup(source));
    MemRefType type = toMemRef(reshape.getResult().getType());
    if (!(ofArgument && returned.contains(reshape.getResult())) &&
        type.getElementType() ==
            cast<MemRefType>(source.getType()).getElementType() &&
        cast<MemRefType>(source.getType()).getLayout().isIdentity()) {
      // Row-major strides, static also for an extent of 0 (where the
      // identity layout's strides would be dynamic).
      SmallVector<int64_t> strides = computeSuffixProduct(type.getShape());
      Value view = memref::ReinterpretCastOp::create(builder, op.getLoc(), type,
                                                     source, /*offset=*/0,
                                                     type.getShape(), strides);
      storageOf[view] = storageOf.lookup(source);
      store(reshape.getResult(), view);
      ++views;
      return true;
    }
  }
  return false;
}

void StepBufferizer::bufferizeKernel(Operation &op) {
  SmallVector<Value> outs;
  for (OpResult result : op.getResults()) {
    Value out;
    if (auto it = destination.find(result); it != destination.end()) {
      out = body.getArgument(it->second);
    } else if ((out = loopDestination.lookup(result))) {
    } else if ((out = findDyingOperand(op, result))) {
      ++reused;
    } else {
      out = newAlloc(op.getLoc(), toMemRef(result.getType()));
      if (getMemoryKind(result) == MemoryKind::Host)
        out.getDefiningOp()->setAttr(MemoptDialect::kMemoryAttrName,
                                     b.getStringAttr("host"));
    }
    outs.push_back(out);
    store(result, out);
  }
  // A kernel's scratch is a planned buffer: one more output, dead right
  // after the kernel.
  if (std::optional<MemRefType> scratch = getScratchType(&op))
    outs.push_back(newAlloc(op.getLoc(), *scratch));
  SmallVector<Value> ins = llvm::map_to_vector(
      op.getOperands(), [&](Value operand) { return buffer.lookup(operand); });
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
    return;
  }
  // One kernel per run, last run first (so that the earlier dimension
  // numbers stay valid), through f32 intermediates.
  Value current = ins.front();
  SmallVector<int64_t> shape(cast<ShapedType>(current.getType()).getShape());
  for (size_t i = runs.size(); i-- > 0;) {
    for (int64_t d : llvm::reverse(runs[i]))
      shape.erase(shape.begin() + d);
    Value next = outs.front();
    if (i != 0)
      next = newAlloc(op.getLoc(), MemRefType::get(shape, b.getF32Type()));
    emitKernel(current, next,
               b.getDictionaryAttr(
                   b.getNamedAttr("dims", b.getDenseI64ArrayAttr(runs[i]))));
    current = next;
  }
}

void StepBufferizer::finish() {
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
  for (Operation *op : llvm::reverse(tensorOps)) {
    if (auto loop = dyn_cast<scf::ForOp>(op))
      loop.getBody()->getTerminator()->dropAllReferences();
    op->dropAllReferences();
  }
  for (Operation *op : llvm::reverse(tensorOps))
    op->erase();
  flattenAllReduces(body, builder, allocs);

  // 3. Deallocations, after the last user in the block of the buffer or of
  // a view of it.
  for (Value alloc : allocs) {
    Operation *last = alloc.getDefiningOp();
    Block *block = last->getBlock();
    SmallVector<Value> aliases = {alloc};
    while (!aliases.empty()) {
      for (Operation *use : aliases.pop_back_val().getUsers()) {
        Operation *user = block->findAncestorOpInBlock(*use);
        if (last->isBeforeInBlock(user))
          last = user;
        user = use;
        if (isa<memref::ReinterpretCastOp, memref::ViewOp>(user))
          aliases.push_back(user->getResult(0));
      }
    }
    builder.setInsertionPointAfter(last);
    memref::DeallocOp::create(builder, alloc.getLoc(), alloc);
  }
  LLVM_DEBUG(llvm::dbgs() << "bufferized @" << func.getName() << ": "
                          << allocs.size() << " buffers, " << destination.size()
                          << " written in place, " << reused
                          << " into a dying operand, " << views << " views, "
                          << copies.size() << " copies\n");
}

LogicalResult BufferizePass::bufferize(func::FuncOp func) {
  SmallVector<unsigned> updated;
  if (failed(checkTrainStep(func, updated)))
    return failure();
  StepBufferizer bufferizer(func, reuse, inPlace, aliasReshapes);
  if (failed(bufferizer.run(updated)))
    return failure();
  numKernels += bufferizer.numKernels;
  numAllocs += bufferizer.numAllocs;
  numCopies += bufferizer.numCopies;
  numInPlace += bufferizer.getNumInPlace();
  numReused += bufferizer.reused;
  numViews += bufferizer.views;
  return success();
}

void BufferizePass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<FunctionOpInterface> step = findTrainStep(module, "bufferize");
  if (failed(step))
    return signalPassFailure();
  auto func = dyn_cast<func::FuncOp>(step->getOperation());
  if (!func) {
    step->emitOpError() << "must be a func.func to be bufferized";
    return signalPassFailure();
  }
  if (failed(bufferize(func)))
    return signalPassFailure();
}
