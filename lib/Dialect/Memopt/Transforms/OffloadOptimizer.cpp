//===- OffloadOptimizer.cpp - the optimizer update in host memory ---------===//
//
// ZeRO-Offload's layout on the tensor-level step (docs/Offload.md): the
// device keeps what it computes with (the weights it reads, the gradients,
// the activations), the host keeps the f32 master weights and the optimizer
// state and runs the update.
//
//  1. Every optimizer update is marked `memopt.on_host`. Its state arguments
//     (AdamW's moments, SGD's momentum, in 32 or 8 bits) must be arguments
//     that only the update reads; they are marked `memopt.memory = "host"`.
//  2. Its parameter argument becomes the host's f32 master weights. The ops
//     that read it otherwise read a new device argument instead, of role
//     "param_copy" and the parameter's name (the form ZeRO gives a sharded
//     master, docs/DataParallel.md): in the parameter's one low-precision
//     compute type when every other reader is a cast to that type (mixed
//     precision, rematerialization's recasts), else in f32. The copy's new
//     value is the cast of the master's new value, computed on the host.
//     A parameter the step computes (ZeRO's slice of a whole f32 weight) is
//     left to the transfers of step 5.
//  3. A low-precision cast of a host value is computed on the host too: the
//     device receives 2 bytes per element instead of 4.
//  4. A gradient that a loop accumulates (micro-batches, and the sums of
//     ZeRO's scattered shards) is accumulated on the host when everything
//     that reads the sum can run there: the update, clipping's sum of
//     squares and its rescale (hasHostEntry). Its zero start, the adds onto
//     it and those readers are marked `memopt.on_host`; each micro-batch's
//     term is copied down as it completes, so the device never holds the
//     running sums. A sum another op reads (data parallelism's all-reduce
//     after the loop, loss scaling's unscale) stays on the device.
//  5. Each device value that a host op reads is copied to the host
//     (`memopt.transfer ... to host`) right before its first host reader in
//     the reader's block, once; each host value that a device op reads, or
//     that the step returns for a device argument, is copied back right
//     after its producer.
//  6. With `params`, every weight copy the device computes with is a host
//     argument too (an f32 reader reads the master itself), and each device
//     op that reads a host argument reads a transfer made right before it:
//     a weight crosses once per use and lives on the device only while that
//     op runs. A copy's new value that the device computes (ZeRO-1/2's
//     gather) is copied to the host once computed.
//
// The transfers copy bytes and the host runtime entries compute what the
// device entries do, so the step is the one without offload, bit for bit.
//
// Linear in the size of the step.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "OptimizerUpdates.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace memopt {
#define GEN_PASS_DEF_OFFLOADOPTIMIZERPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct OffloadOptimizerPass
    : public memopt::impl::OffloadOptimizerPassBase<OffloadOptimizerPass> {
  using Base::Base;

  void runOnOperation() override;
};

/// Rewrites one step function.
class Offloader {
public:
  Offloader(func::FuncOp func, bool params)
      : func(func), body(func.getBody().front()),
        returnOp(cast<func::ReturnOp>(body.getTerminator())),
        b(func.getContext()), params(params) {}

  LogicalResult run();

private:
  LogicalResult offloadUpdate(Operation *update);
  LogicalResult addDeviceCopy(BlockArgument param, Operation *update);
  void markHost(BlockArgument arg) {
    func.setArgAttr(arg.getArgNumber(), MemoptDialect::kMemoryAttrName,
                    b.getStringAttr("host"));
  }
  /// The arguments whose new values the step returns, in result order
  /// after the loss (docs/Pipeline.md, section 1).
  SmallVector<BlockArgument> getUpdatedArguments();
  void accumulateOnHost(Value grad);
  void insertTransfers(ArrayRef<Operation *> hostOps);
  void streamWeights();
  Value transfer(Value value, MemoryKind to, Operation *anchor, bool before);

  func::FuncOp func;
  Block &body;
  func::ReturnOp returnOp;
  OpBuilder b;
  /// The weights the device computes with live on the host too (step 6).
  bool params;
  /// The copy of each value in the other memory, made once per block.
  DenseMap<std::pair<Value, Block *>, Value> transferred;
};
} // namespace

/// The low-precision element type of `op` when it is a cast of a float to a
/// narrower float; null otherwise.
static Type getNarrowingCastElement(Operation *op) {
  auto castOp = dyn_cast<CastOp>(op);
  if (!castOp)
    return Type();
  Type from = getElementTypeOrSelf(castOp.getInput().getType());
  Type to = getElementTypeOrSelf(castOp.getType());
  if (!isa<FloatType>(from) || !isa<FloatType>(to) ||
      to.getIntOrFloatBitWidth() >= from.getIntOrFloatBitWidth())
    return Type();
  return to;
}

SmallVector<BlockArgument> Offloader::getUpdatedArguments() {
  SmallVector<BlockArgument> updated;
  for (BlockArgument arg : body.getArguments()) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  MemoptDialect::kRoleAttrName);
    std::optional<ArgumentRole> kind =
        role ? symbolizeArgumentRole(role.getValue()) : std::nullopt;
    if (kind == ArgumentRole::Param || kind == ArgumentRole::State ||
        kind == ArgumentRole::Optim || kind == ArgumentRole::ParamCopy)
      updated.push_back(arg);
  }
  return updated;
}

LogicalResult Offloader::addDeviceCopy(BlockArgument param, Operation *update) {
  SmallVector<Operation *> readers;
  for (Operation *user : param.getUsers())
    if (user != update && !llvm::is_contained(readers, user))
      readers.push_back(user);
  if (readers.empty())
    return success();
  // One low-precision type for every reader, or the parameter's own.
  Type low = getNarrowingCastElement(readers.front());
  for (Operation *reader : readers)
    if (getNarrowingCastElement(reader) != low)
      low = Type();
  // With the weights on the host, an f32 reader reads the master itself.
  if (params && !low)
    return success();
  auto paramType = cast<RankedTensorType>(param.getType());
  auto copyType = low ? paramType.clone(low) : paramType;

  unsigned index = param.getArgNumber();
  SmallVector<NamedAttribute> attrs = {b.getNamedAttr(
      MemoptDialect::kRoleAttrName,
      b.getStringAttr(stringifyArgumentRole(ArgumentRole::ParamCopy)))};
  for (StringRef name :
       {MemoptDialect::kNameAttrName, MemoptDialect::kShardOfAttrName})
    if (Attribute attr = func.getArgAttr(index, name))
      attrs.push_back(b.getNamedAttr(name, attr));
  if (failed(func.insertArgument(body.getNumArguments(), copyType,
                                 b.getDictionaryAttr(attrs), param.getLoc())))
    return update->emitOpError()
           << "cannot add the device copy of " << describeParam(func, param);
  BlockArgument copy = body.getArguments().back();
  if (params)
    markHost(copy);
  for (Operation *reader : readers) {
    if (low) {
      reader->getResult(0).replaceAllUsesWith(copy);
      reader->erase();
    } else {
      reader->replaceUsesOfWith(param, copy);
    }
  }

  // The copy's new value: the master's new value, cast on the host.
  Value next = update->getResult(0);
  if (low) {
    b.setInsertionPointAfter(update);
    auto castOp = CastOp::create(b, update->getLoc(), copyType, next);
    castOp->setAttr(MemoptDialect::kOnHostAttrName, b.getUnitAttr());
    if (Attribute scope = update->getAttr(MemoptDialect::kScopeAttrName))
      castOp->setAttr(MemoptDialect::kScopeAttrName, scope);
    next = castOp;
  }
  returnOp->insertOperands(returnOp.getNumOperands(), next);
  return success();
}

LogicalResult Offloader::offloadUpdate(Operation *update) {
  UpdateOperands operands = *getUpdateOperands(update);
  for (OpOperand *state : operands.states) {
    auto arg = dyn_cast<BlockArgument>(state->get());
    if (!arg || arg.getOwner() != &body || !arg.hasOneUse())
      return update->emitOpError()
             << "of " << describeParam(func, operands.param->get())
             << " cannot be offloaded: its optimizer state is not an "
                "argument read by this update only";
    markHost(arg);
  }
  update->setAttr(MemoptDialect::kOnHostAttrName, b.getUnitAttr());
  auto param = dyn_cast<BlockArgument>(operands.param->get());
  if (!param || param.getOwner() != &body)
    return success();
  if (failed(addDeviceCopy(param, update)))
    return failure();
  markHost(param);
  return success();
}

Value Offloader::transfer(Value value, MemoryKind to, Operation *anchor,
                          bool before) {
  Value &copy = transferred[{value, anchor->getBlock()}];
  if (copy)
    return copy;
  if (before)
    b.setInsertionPoint(anchor);
  else
    b.setInsertionPointAfter(anchor);
  auto op = TransferOp::create(b, value.getLoc(), value,
                               MemoryKindAttr::get(b.getContext(), to));
  if (Attribute scope = anchor->getAttr(MemoptDialect::kScopeAttrName))
    op->setAttr(MemoptDialect::kScopeAttrName, scope);
  copy = op;
  return copy;
}

/// Whether every reader of `value` can read it on the host (step 4): an
/// offloaded update reading it as its gradient, a sum of squares, or a
/// rescale whose result's readers can; the last two are added to `readers`.
static bool collectHostReaders(Value value,
                               SmallVectorImpl<Operation *> &readers) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (std::optional<UpdateOperands> update = getUpdateOperands(user)) {
      if (update->grad != &use || !runsOnHost(user))
        return false;
    } else if (isa<ReduceSumSquaresOp>(user) ||
               (isa<ScaleByOp>(user) && use.getOperandNumber() == 0 &&
                collectHostReaders(user->getResult(0), readers))) {
      readers.push_back(user);
    } else {
      return false;
    }
  }
  return true;
}

void Offloader::accumulateOnHost(Value grad) {
  auto sum = dyn_cast<OpResult>(grad);
  auto loop = sum ? dyn_cast<scf::ForOp>(sum.getOwner()) : scf::ForOp();
  if (!loop || !getElementTypeOrSelf(sum.getType()).isF32())
    return;
  unsigned index = sum.getResultNumber();
  BlockArgument iterArg = loop.getRegionIterArg(index);
  auto zero = loop.getInitArgs()[index].getDefiningOp<ConstantOp>();
  if (!zero || !zero.getValue().isSplat() || !iterArg.hasOneUse())
    return;
  // The adds from the iteration argument to the yielded value, one per
  // micro-batch's term (--memopt-accumulate), each read by the next only.
  SmallVector<Operation *> adds;
  Value link = iterArg;
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  while (link != yield.getOperand(index)) {
    if (!link.hasOneUse())
      return;
    auto add = dyn_cast<AddOp>(*link.getUsers().begin());
    if (!add || add->getBlock() != loop.getBody())
      return;
    adds.push_back(add);
    link = add.getResult();
  }
  if (adds.empty() || !link.hasOneUse())
    return;
  SmallVector<Operation *> readers;
  if (!collectHostReaders(sum, readers))
    return;
  // A zero of its own, made on the host.
  b.setInsertionPoint(loop);
  Operation *start = b.clone(*zero);
  loop->setOperand(loop.getNumControlOperands() + index, start->getResult(0));
  if (zero->use_empty())
    zero->erase();
  adds.push_back(start);
  for (Operation *op : llvm::concat<Operation *>(adds, readers))
    op->setAttr(MemoptDialect::kOnHostAttrName, b.getUnitAttr());
}

void Offloader::insertTransfers(ArrayRef<Operation *> hostOps) {
  SmallVector<BlockArgument> updated = getUpdatedArguments();
  for (Operation *op : hostOps) {
    // What the host reads, in host memory.
    for (OpOperand &operand : op->getOpOperands())
      if (getMemoryKind(operand.get()) == MemoryKind::Device)
        operand.set(transfer(operand.get(), MemoryKind::Host, op, true));
    // What the device reads, and the device arguments' new values, back.
    for (Value result : op->getResults()) {
      for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
        Operation *user = use.getOwner();
        // A loop carries a host sum in host memory (step 4).
        if (isa<TransferOp, scf::ForOp, scf::YieldOp>(user) || runsOnHost(user))
          continue;
        if (user == returnOp.getOperation()) {
          unsigned position = use.getOperandNumber();
          if (position == 0 ||
              getMemoryKind(updated[position - 1]) == MemoryKind::Host)
            continue;
        }
        use.set(transfer(result, MemoryKind::Device, op, false));
      }
    }
  }
}

void Offloader::streamWeights() {
  SmallVector<BlockArgument> updated = getUpdatedArguments();
  // Every copy the device computes with is a host argument; one the device
  // computes (ZeRO-1/2's gather of the new shards) goes to the host once
  // computed.
  for (auto [position, arg] : llvm::enumerate(updated)) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  MemoptDialect::kRoleAttrName);
    if (!role ||
        role.getValue() != stringifyArgumentRole(ArgumentRole::ParamCopy))
      continue;
    markHost(arg);
    OpOperand &next = returnOp->getOpOperand(position + 1);
    if (getMemoryKind(next.get()) == MemoryKind::Device) {
      Operation *producer = next.get().getDefiningOp();
      next.set(producer
                   ? transfer(next.get(), MemoryKind::Host, producer, false)
                   : transfer(next.get(), MemoryKind::Host, returnOp, true));
    }
  }
  // Each device op that reads a host argument reads a copy made right
  // before it: the weight lives on the device only while the op runs.
  for (BlockArgument arg : body.getArguments()) {
    if (getMemoryKind(arg) != MemoryKind::Host)
      continue;
    for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
      Operation *user = use.getOwner();
      if (isa<TransferOp, func::ReturnOp>(user) || runsOnHost(user))
        continue;
      b.setInsertionPoint(user);
      auto copy = TransferOp::create(
          b, arg.getLoc(), arg,
          MemoryKindAttr::get(b.getContext(), MemoryKind::Device));
      if (Attribute scope = user->getAttr(MemoptDialect::kScopeAttrName))
        copy->setAttr(MemoptDialect::kScopeAttrName, scope);
      // One copy for all of the user's operands that read the argument.
      for (OpOperand &other : user->getOpOperands())
        if (other.get() == arg)
          other.set(copy);
    }
  }
}

LogicalResult Offloader::run() {
  SmallVector<Operation *> updates;
  for (Operation &op : body)
    if (getUpdateOperands(&op))
      updates.push_back(&op);
  if (updates.empty())
    return func.emitOpError()
           << "has no optimizer update to offload (--memopt-offload-optimizer "
              "runs after --memopt-autodiff)";
  for (Operation *update : updates)
    if (failed(offloadUpdate(update)))
      return failure();
  // A narrowing cast of an update's new value runs on the host (step 3).
  for (Operation *update : updates)
    for (Operation *user : update->getResult(0).getUsers())
      if (getNarrowingCastElement(user))
        user->setAttr(MemoptDialect::kOnHostAttrName, b.getUnitAttr());
  // The accumulated gradients (step 4), each seen through clipping's
  // rescale.
  for (Operation *update : updates) {
    Value grad = getUpdateOperands(update)->grad->get();
    while (auto rescale = grad.getDefiningOp<ScaleByOp>())
      grad = rescale.getInput();
    accumulateOnHost(grad);
  }
  SmallVector<Operation *> hostOps;
  func.walk([&](Operation *op) {
    if (runsOnHost(op))
      hostOps.push_back(op);
  });
  insertTransfers(hostOps);
  if (params)
    streamWeights();
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 returnOp.getOperandTypes()));
  return success();
}

void OffloadOptimizerPass::runOnOperation() {
  FailureOr<FunctionOpInterface> step =
      findTrainStep(getOperation(), "offload");
  if (failed(step))
    return signalPassFailure();
  auto func = dyn_cast<func::FuncOp>(step->getOperation());
  if (!func || !func.getBody().hasOneBlock()) {
    step->emitOpError() << "must be a func.func of one block to be offloaded";
    return signalPassFailure();
  }
  if (failed(Offloader(func, params).run()))
    return signalPassFailure();
}
