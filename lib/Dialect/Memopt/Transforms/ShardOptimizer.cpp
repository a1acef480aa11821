//===- ShardOptimizer.cpp - ZeRO: each rank updates its shard -------------===//
//
// ZeRO stages 1 to 3 on the data-parallel step that --memopt-accumulate
// builds (docs/DataParallel.md). There every rank sums the gradients of all
// ranks (`shard.all_reduce` of each f32 accumulator after the micro-batch
// loop) and runs the whole optimizer update on the whole model state. Here
// each rank updates 1/N of every parameter and keeps only that 1/N of the
// optimizer state:
//
//  1. A parameter of n elements is cut into N slices of S = ceil(n / N)
//     elements of its flattened, zero-padded form; rank r owns slice r.
//  2. Its gradient accumulator, flattened and padded alike, is
//     reduce-scattered (`shard.reduce_scatter`, sum): rank r receives the sum
//     over the ranks of slice r only.
//  3. The optimizer state arguments (AdamW's moments, SGD's momentum) become
//     S-element shards; `memopt.shard_of` records their full shape, from
//     which the driver loads and saves whole checkpoints. 8-bit moments
//     (QuantizeMath.h) are cut in whole blocks: S is a multiple of the
//     block, so that a rank's shard is the records of its blocks, a byte
//     range of the whole packed tensor.
//  4. The update runs on the rank's slice of the parameter (`shard.all_slice`,
//     no communication), its gradient slice and its state shards; the new
//     slices are all-gathered (`shard.all_gather`) and unpadded into the
//     parameter, which every rank holds whole.
//  5. Mixed precision: a parameter that the step reads only through one
//     low-precision cast (bf16 or f16; rematerialization's recasts too) is
//     held as that whole copy, a new argument of role "param_copy", and its
//     f32 master weights become a shard like the optimizer state (the ZeRO
//     paper's 2 + 2 + 12/N bytes per parameter). The update's new master
//     slice is cast and all-gathered into the copy (half the bytes of an
//     f32 gather); the cast of a slice is the slice of the cast, so the
//     step computes what the unsharded one does. A parameter that the step
//     also reads in f32 (a norm's weight, an embedding) stays whole.
//
// Stage 2 (`stage=2`) also shards the gradient accumulators: the
// reduce-scatter moves into the micro-batch loop, where each micro-batch's
// gradient is scattered as soon as it is complete and added to an
// S-element accumulator. A rank then never holds more than the gradients in
// flight of one micro-batch, at the cost of one reduce-scatter per
// micro-batch instead of one per step.
//
// Stage 3 (`stage=3`) also shards the parameters, as FSDP does: the
// parameter argument becomes the rank's S-element slice (its f32 master in
// mixed precision; no copy is held), the update writes the new slice, which
// the step returns as it is, and every op that reads the parameter reads a
// whole copy all-gathered right before it, which dies after it. A weight
// read in the forward and again in the backward (or by a recomputation) is
// gathered once for each. A parameter read through a bf16 or f16 cast is
// gathered after the cast of its slice: half the bytes, and the same bits
// (the cast of a slice is the slice of the cast).
//
// Each element of the update sees the same gradient sum as the all-reduce
// gives it (one sum over the ranks per element), so with N = 2, or one
// micro-batch per rank and MPI's one reduction order, the parameters are
// the data-parallel step's bit for bit.
//
// Linear in the size of the step.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/runtime/QuantizeMath.h"

#include "OptimizerUpdates.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace memopt {
#define GEN_PASS_DEF_SHARDOPTIMIZERPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct ShardOptimizerPass
    : public memopt::impl::ShardOptimizerPassBase<ShardOptimizerPass> {
  using Base::Base;

  void runOnOperation() override;
};

/// How one parameter of n elements is cut over N ranks: in shards of a
/// multiple of `granule` elements (the blocks of 8-bit moments, 1 else).
struct ShardShape {
  int64_t numel;
  int64_t ranks;
  int64_t granule = 1;
  int64_t getShard() const {
    int64_t elements = (numel + ranks - 1) / ranks;
    return (elements + granule - 1) / granule * granule;
  }
  int64_t getPadded() const { return getShard() * ranks; }
};

/// Builds the flat, padded and sharded forms of tensors of one parameter.
class Sharder {
public:
  /// The ops built carry `scope` (`memopt.scope`) when it is not null.
  Sharder(OpBuilder &b, Location loc, ShardShape shape, Attribute scope)
      : b(b), loc(loc), shape(shape), scope(scope) {}

  /// `value` as n elements zero-padded to N x S.
  Value flattenAndPad(Value value) {
    Type element = getElementTypeOrSelf(value.getType());
    auto flat = RankedTensorType::get({shape.numel}, element);
    if (value.getType() != flat)
      value = build<ReshapeOp>(flat, value);
    if (shape.getPadded() == shape.numel)
      return value;
    return build<SliceGradOp>(
        RankedTensorType::get({shape.getPadded()}, element), value,
        b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({shape.numel}),
        b.getDenseI64ArrayAttr({1}));
  }

  /// The sum over the ranks of the rank's slice of `value`.
  Value reduceScatter(Value value) {
    return build<shard::ReduceScatterOp>(
        getShardType(value), kRanksGridName, ArrayRef<int16_t>{0},
        flattenAndPad(value), shard::ReductionKind::Sum, APInt(64, 0));
  }

  /// The rank's slice of `value`, which every rank holds.
  Value slice(Value value) {
    return build<shard::AllSliceOp>(getShardType(value), kRanksGridName,
                                    ArrayRef<int16_t>{0}, flattenAndPad(value),
                                    APInt(64, 0));
  }

  /// Every rank's slice gathered into a tensor of type `full`.
  Value gather(Value slice, RankedTensorType full) {
    Type element = full.getElementType();
    Value value = build<shard::AllGatherOp>(
        RankedTensorType::get({shape.getPadded()}, element),
        kRanksGridName, ArrayRef<int16_t>{0}, slice, APInt(64, 0));
    auto flat = RankedTensorType::get({shape.numel}, element);
    if (shape.getPadded() != shape.numel)
      value = build<SliceOp>(flat, value, b.getDenseI64ArrayAttr({0}),
                             b.getDenseI64ArrayAttr({shape.numel}),
                             b.getDenseI64ArrayAttr({1}));
    if (flat != full)
      value = build<ReshapeOp>(full, value);
    return value;
  }

  /// `value` cast to `element`, in the same shape.
  Value castTo(Value value, Type element) {
    return build<CastOp>(
        llvm::cast<RankedTensorType>(value.getType()).clone(element), value);
  }

  RankedTensorType getShardType(Value value) const {
    return RankedTensorType::get({shape.getShard()},
                                 getElementTypeOrSelf(value.getType()));
  }

private:
  template <typename OpT, typename... Args> Value build(Args &&...args) {
    auto op = OpT::create(b, loc, std::forward<Args>(args)...);
    if (scope)
      op->setAttr(MemoptDialect::kScopeAttrName, scope);
    return op->getResult(0);
  }

  OpBuilder &b;
  Location loc;
  ShardShape shape;
  Attribute scope;
};

} // namespace

/// The element type of the low-precision copy through which the step reads
/// `param`, the f32 parameter of `func` that `update` updates, when its
/// master weights can be sharded: `param` is named (its copy takes the
/// name), every other use of it is a `memopt.cast` to that one type (mixed
/// precision's copy, and rematerialization's recasts), and only `returnOp`
/// reads the new value. Null otherwise: the parameter stays whole.
static Type getMasterCopyElement(func::FuncOp func, BlockArgument param,
                                 Operation *update, func::ReturnOp returnOp) {
  if (!func.getArgAttr(param.getArgNumber(), MemoptDialect::kNameAttrName))
    return Type();
  Type element;
  for (Operation *user : param.getUsers()) {
    if (user == update)
      continue;
    auto castOp = dyn_cast<CastOp>(user);
    Type to = castOp ? getElementTypeOrSelf(castOp.getType()) : Type();
    if (!to || to.isF32() || (element && element != to))
      return Type();
    element = to;
  }
  bool returnedOnly =
      llvm::all_of(update->getResult(0).getUsers(), [&](Operation *user) {
        return user == returnOp.getOperation();
      });
  return returnedOnly ? element : Type();
}

/// Stage 2: the loop accumulates the rank's slice of gradient `result` (a
/// result of `loop`), reduce-scattered after each micro-batch. Returns the
/// loop's result, now the slice, or null after an error.
static Value shardAccumulator(scf::ForOp loop, OpResult result,
                              ShardShape shape) {
  unsigned index = result.getResultNumber();
  BlockArgument accumulator = loop.getRegionIterArg(index);
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  auto add = yield.getOperand(index).getDefiningOp<AddOp>();
  auto init = loop.getInitArgs()[index].getDefiningOp<ConstantOp>();
  if (!add || add.getLhs() != accumulator || !accumulator.hasOneUse() ||
      !init) {
    emitError(loop.getLoc())
        << "stage 2 expects the loop to add each micro-batch's gradient to a "
           "zero-initialised accumulator (--memopt-accumulate's form)";
    return Value();
  }
  OpBuilder b(add);
  Sharder sharder(b, add.getLoc(), shape,
                  add->getAttr(MemoptDialect::kScopeAttrName));
  Value slice = sharder.reduceScatter(add.getRhs());
  RankedTensorType type = sharder.getShardType(slice);
  accumulator.setType(type);
  auto sum = AddOp::create(b, add.getLoc(), type, accumulator, slice);
  sum->setAttrs(add->getAttrs());
  yield.setOperand(index, sum);
  add.erase();
  b.setInsertionPoint(loop);
  loop.getInitArgsMutable()[index].set(ConstantOp::create(
      b, init.getLoc(), DenseElementsAttr::get(type, b.getF32FloatAttr(0.0))));
  if (init->use_empty())
    init.erase();
  result.setType(type);
  return result;
}

/// Makes argument `arg` of `func` a shard of type `type`, marked with the
/// shape `whole` of the tensor it is cut from (`memopt.shard_of`).
static void makeShardArgument(func::FuncOp func, BlockArgument arg,
                              RankedTensorType type, ArrayRef<int64_t> whole) {
  arg.setType(type);
  func.setArgAttr(arg.getArgNumber(), MemoptDialect::kShardOfAttrName,
                  DenseI64ArrayAttr::get(func.getContext(), whole));
}

/// Checks that `update` has the form ZeRO shards: an f32 parameter
/// argument, the ranks' sum of an accumulator as its gradient, optimizer
/// state arguments that only it reads, and no loss-scaling skip.
static LogicalResult checkUpdate(func::FuncOp func, Operation *update,
                                 const UpdateOperands &operands) {
  auto paramType = cast<RankedTensorType>(operands.param->get().getType());
  auto reduce = operands.grad->get().getDefiningOp<shard::AllReduceOp>();
  bool skips = bool(operands.skip);
  if (skips || !reduce || !reduce->hasOneUse() ||
      !isa<BlockArgument>(operands.param->get()) ||
      !paramType.getElementType().isF32())
    return update->emitOpError()
           << "of " << describeParam(func, operands.param->get())
           << " cannot be sharded: ZeRO updates f32 parameters whose gradient "
              "is the ranks' sum of an accumulator"
           << (skips ? " (FP16 dynamic loss scaling skips steps on every "
                       "rank's overflow check: use bf16)"
                     : "");
  for (OpOperand *state : operands.states) {
    auto arg = dyn_cast<BlockArgument>(state->get());
    if (!arg || arg.getOwner() != &func.getBody().front() || !arg.hasOneUse())
      return update->emitOpError()
             << "of " << describeParam(func, operands.param->get())
             << " cannot be sharded: its optimizer state is not an argument "
                "read by this update only";
  }
  return success();
}

/// Mixed precision (point 5): appends the whole `element` copy of `param`
/// as a "param_copy" argument, reads it where the step cast `param`, and
/// makes `param` its master's shard of type `shardType`. Returns the copy,
/// or null after an error.
static BlockArgument addMasterCopy(func::FuncOp func, BlockArgument param,
                                   Operation *update, Type element,
                                   RankedTensorType shardType) {
  auto paramType = cast<RankedTensorType>(param.getType());
  Builder b(func.getContext());
  Block &body = func.getBody().front();
  NamedAttribute attrs[] = {
      b.getNamedAttr(
          MemoptDialect::kRoleAttrName,
          b.getStringAttr(stringifyArgumentRole(ArgumentRole::ParamCopy))),
      b.getNamedAttr(
          MemoptDialect::kNameAttrName,
          func.getArgAttr(param.getArgNumber(), MemoptDialect::kNameAttrName))};
  if (failed(func.insertArgument(
          body.getNumArguments(),
          RankedTensorType::get(paramType.getShape(), element),
          b.getDictionaryAttr(attrs), param.getLoc()))) {
    update->emitOpError() << "cannot add the copy of "
                          << describeParam(func, param);
    return BlockArgument();
  }
  BlockArgument copy = body.getArguments().back();
  for (Operation *user : llvm::make_early_inc_range(param.getUsers())) {
    if (user == update)
      continue;
    user->getResult(0).replaceAllUsesWith(copy);
    user->erase();
  }
  makeShardArgument(func, param, shardType, paramType.getShape());
  return copy;
}

/// Stage 3: each op other than `update` that reads `whole` (a value of
/// type `wholeType` that the step no longer has) reads instead a copy
/// gathered right before it from the slice that `makeSlice` builds. A
/// low-precision cast of `whole` is moved to the slice: its readers gather
/// the cast slice.
static void gatherAtUses(Value whole, RankedTensorType wholeType,
                         Operation *update, ShardShape shape,
                         llvm::function_ref<Value(Sharder &)> makeSlice) {
  SmallVector<Operation *> users;
  for (Operation *user : whole.getUsers())
    if (user != update && !llvm::is_contained(users, user))
      users.push_back(user);
  for (Operation *user : users) {
    OpBuilder b(user);
    Sharder sharder(b, user->getLoc(), shape,
                    user->getAttr(MemoptDialect::kScopeAttrName));
    auto castOp = dyn_cast<CastOp>(user);
    Type to = castOp ? getElementTypeOrSelf(castOp.getType()) : Type();
    if (to && to.getIntOrFloatBitWidth() < 32) {
      gatherAtUses(castOp.getResult(), castOp.getType(), nullptr, shape,
                   [&](Sharder &at) { return at.castTo(makeSlice(at), to); });
      castOp.erase();
      continue;
    }
    user->replaceUsesOfWith(whole,
                            sharder.gather(makeSlice(sharder), wholeType));
  }
}

/// Shards `update` (checked by checkUpdate) over `ranks` ranks at `stage`.
static LogicalResult shardUpdate(func::FuncOp func, Operation *update,
                                 int64_t ranks, int64_t stage) {
  UpdateOperands operands = *getUpdateOperands(update);
  auto paramType = cast<RankedTensorType>(operands.param->get().getType());
  auto reduce = operands.grad->get().getDefiningOp<shard::AllReduceOp>();
  auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  auto adamw = dyn_cast<AdamWUpdateOp>(update);
  bool quantized = adamw && adamw.hasQuantizedState();
  ShardShape shape{paramType.getNumElements(), ranks,
                   quantized ? runtime::kQuantBlock : 1};
  OpBuilder b(update);
  Sharder sharder(b, update->getLoc(), shape,
                  update->getAttr(MemoptDialect::kScopeAttrName));

  // The gradient's slice: scattered after the loop (stage 1) or in it.
  Value grad;
  if (stage >= 2) {
    auto loop = reduce.getInput().getDefiningOp<scf::ForOp>();
    if (!loop)
      return reduce.emitOpError() << "sums no accumulator of the micro-batch "
                                     "loop: stage 2 has nothing to shard";
    grad = shardAccumulator(loop, cast<OpResult>(reduce.getInput()), shape);
    if (!grad)
      return failure();
  } else {
    grad = sharder.reduceScatter(reduce.getInput());
  }
  operands.grad->set(grad);
  reduce.erase();

  // The state arguments become shards, the parameter its slice or, read
  // through a low-precision copy, its master's shard.
  for (OpOperand *state : operands.states) {
    auto arg = cast<BlockArgument>(state->get());
    if (quantized) {
      // The records of the shard's blocks, of the whole packed tensor.
      makeShardArgument(
          func, arg,
          RankedTensorType::get({runtime::quantizedStateBytes(shape.getShard())},
                                getElementTypeOrSelf(arg.getType())),
          {runtime::quantizedStateBytes(shape.numel)});
      continue;
    }
    makeShardArgument(func, arg, sharder.getShardType(arg),
                      paramType.getShape());
  }
  RankedTensorType shardType = sharder.getShardType(grad);
  auto param = cast<BlockArgument>(operands.param->get());
  Value newParam = update->getResult(0);
  // The new parameter's slice, and the new state in its arguments' types.
  newParam.setType(shardType);
  for (auto [result, state] :
       llvm::zip_equal(update->getResults().drop_front(), operands.states))
    result.setType(state->get().getType());
  if (stage == 3) {
    // The parameter is its slice; its readers gather it; the new slice is
    // the step's result.
    if (!llvm::all_of(newParam.getUsers(), [&](Operation *user) {
          return user == returnOp.getOperation();
        }))
      return update->emitOpError()
             << "of " << describeParam(func, param)
             << " cannot be sharded at stage 3: the step reads the updated "
                "parameter, which no rank holds whole";
    makeShardArgument(func, param, shardType, paramType.getShape());
    gatherAtUses(param, paramType, update, shape,
                 [&](Sharder &) -> Value { return param; });
    return success();
  }
  Type copyElement = getMasterCopyElement(func, param, update, returnOp);
  BlockArgument copy;
  if (copyElement) {
    copy = addMasterCopy(func, param, update, copyElement, shardType);
    if (!copy)
      return failure();
  } else {
    operands.param->set(sharder.slice(param));
  }
  // The new parameter (or its copy), whole on every rank.
  b.setInsertionPointAfter(update);
  if (copy) {
    Value low = sharder.castTo(newParam, copyElement);
    returnOp->insertOperands(
        returnOp.getNumOperands(),
        sharder.gather(low, cast<RankedTensorType>(copy.getType())));
    return success();
  }
  SmallVector<OpOperand *> uses = llvm::map_to_vector(
      newParam.getUses(), [](OpOperand &use) { return &use; });
  Value whole = sharder.gather(newParam, paramType);
  for (OpOperand *use : uses)
    use->set(whole);
  return success();
}

void ShardOptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (stage < 1 || stage > 3) {
    emitError(module.getLoc()) << "--memopt-shard-optimizer option 'stage' is "
                               << static_cast<int64_t>(stage)
                               << ", expected 1, 2 or 3";
    return signalPassFailure();
  }
  auto grid = SymbolTable::lookupSymbolIn(module, kRanksGridName);
  auto ranksGrid = dyn_cast_or_null<shard::GridOp>(grid);
  if (!ranksGrid || ranksGrid.getShape().size() != 1 ||
      ranksGrid.getShape()[0] < 2) {
    emitError(module.getLoc())
        << "--memopt-shard-optimizer needs a data-parallel step over at "
           "least 2 ranks (--memopt-accumulate with data-parallel=N, which "
           "declares shard.grid @"
        << kRanksGridName << ")";
    return signalPassFailure();
  }
  FailureOr<FunctionOpInterface> step = findTrainStep(module, "shard");
  if (failed(step))
    return signalPassFailure();
  auto func = dyn_cast<func::FuncOp>(step->getOperation());
  if (!func || !func.getBody().hasOneBlock()) {
    step->emitOpError() << "must be a func.func of one block to be sharded";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  SmallVector<Operation *> updates;
  for (Operation &op : body)
    if (std::optional<UpdateOperands> operands = getUpdateOperands(&op)) {
      if (failed(checkUpdate(func, &op, *operands)))
        return signalPassFailure();
      updates.push_back(&op);
    }
  for (Operation *update : updates)
    if (failed(shardUpdate(func, update, ranksGrid.getShape()[0], stage)))
      return signalPassFailure();
  func.setType(FunctionType::get(&getContext(), body.getArgumentTypes(),
                                 body.getTerminator()->getOperandTypes()));
}
