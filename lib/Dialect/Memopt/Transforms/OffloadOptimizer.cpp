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
//     left to the transfers of step 4.
//  3. A low-precision cast of a host value is computed on the host too: the
//     device receives 2 bytes per element instead of 4.
//  4. Each device value that a host op reads is copied to the host
//     (`memopt.transfer ... to host`) right before its first host reader,
//     once; each host value that a device op reads, or that the step returns
//     for a device argument, is copied back right after its producer.
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
  explicit Offloader(func::FuncOp func)
      : func(func), body(func.getBody().front()),
        returnOp(cast<func::ReturnOp>(body.getTerminator())),
        b(func.getContext()) {}

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
  void insertTransfers(ArrayRef<Operation *> hostOps);
  Value transfer(Value value, MemoryKind to, Operation *anchor, bool before);

  func::FuncOp func;
  Block &body;
  func::ReturnOp returnOp;
  OpBuilder b;
  /// The copy of each value in the other memory, made once.
  DenseMap<Value, Value> transferred;
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
  Value &copy = transferred[value];
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
        if (isa<TransferOp>(user) || runsOnHost(user))
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
  SmallVector<Operation *> hostOps;
  for (Operation &op : body)
    if (runsOnHost(&op))
      hostOps.push_back(&op);
  insertTransfers(hostOps);
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
  if (failed(Offloader(func).run()))
    return signalPassFailure();
}
