//===- Accumulate.cpp - gradient accumulation over micro-batches ----------===//
//
// Splits the batch of `@train_step` (on tensors, after autodiff and remat)
// into K micro-batches: the forward and backward ops run inside one
// `scf.for` over the micro-batches, the gradients are summed in f32
// accumulators carried by the loop (iter_args), and the optimizer runs once
// after the loop (docs/Accumulation.md).
//
// 1. Classify. The optimizer ops (`memopt.increment`, `adamw_update`,
//    `sgd_update`, `unscale`, `update_scale`) and everything that uses them
//    run after the loop. Of the other ops, those that depend on an "input"
//    or "label" argument go into the loop; the rest (casts of parameters,
//    constants) does not depend on the batch and stays before the loop, so
//    it runs once per step.
// 2. Batch-dimension propagation, one forward sweep: every value is
//    uniform (batch-independent), batched along one dimension, partial (a
//    sum over the batch: summing it over the micro-batches gives the full
//    batch's value; parameter gradients and the loss) or local (a
//    per-micro-batch statistic, such as batch norm's). Each op has a rule
//    (elementwise, broadcast, reshape, transpose, slice, reductions,
//    matmul, embedding, norms, conv, pooling, losses and their backward
//    ops; BatchRules.cpp); an op whose batch dimension cannot be split is
//    an error.
// 3. Exact losses. A `reduction<mean>` loss is rebuilt as a sum scaled by
//    one over the full batch's count (cross-entropy: `memopt.label_count`
//    of the full batch's labels, before the loop; MSE: the element count),
//    and so are their gradients, so that the accumulated loss and gradients
//    equal the full batch's whatever the padding of each micro-batch.
// 4. Rebuild. The loop slices each input and label with
//    `tensor.extract_slice` at offset `iv * micro-batch` (a view after
//    bufferization), clones the loop ops with micro-batch result types, and
//    adds each partial value that leaves the loop into its accumulator.
//    Batch-independent operands that an elementwise op needs at the
//    micro-batch shape (a broadcast of a bias or of position embeddings)
//    are rebuilt inside the loop at that shape.
//
// Linear in the number of ops. The loop's results, right after it, are the
// full-batch gradients: the single point where data parallelism would
// all-reduce them (DDP's `no_sync` pattern).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "BatchRules.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "memopt-accumulate"

namespace memopt {
#define GEN_PASS_DEF_ACCUMULATEPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;
using namespace memopt::accumulate;

namespace {

struct AccumulatePass
    : public memopt::impl::AccumulatePassBase<AccumulatePass> {
  using Base::Base;

  void runOnOperation() override;

private:
  LogicalResult accumulate(func::FuncOp func);
  /// The micro-batches of the global batch: K on every rank.
  int64_t getParts() const { return microBatches * dataParallel; }
  /// Whether the IR's batch is the global one, which the ranks split
  /// (otherwise it is each rank's: `rank-batch`).
  bool splitsAcrossRanks() const { return dataParallel > 1 && !rankBatch; }
  /// The parts the IR's batch is cut into: the global batch's micro-batches,
  /// or the rank's with `rank-batch`.
  int64_t getSplit() const {
    return splitsAcrossRanks() ? getParts() : microBatches;
  }
};

} // namespace

/// Ops that run after the loop: the optimizer step.
static bool isOptimizerOp(Operation *op) {
  return isa<IncrementOp, AdamWUpdateOp, SgdUpdateOp, UnscaleOp,
             UpdateScaleOp>(op);
}

static ArrayRef<int64_t> getShape(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// A cross-entropy (plain or fused, loss or gradient) that averages over its
/// labels: the labels, the ignored index and, for a gradient, the operand
/// index of the loss's incoming gradient.
struct MeanCrossEntropy {
  Value labels;
  int64_t ignoreIndex;
  std::optional<unsigned> gradOperand;
};

static std::optional<MeanCrossEntropy> getMeanCrossEntropy(Operation *op) {
  auto get = [](auto ce,
                std::optional<unsigned> gradOperand =
                    std::nullopt) -> std::optional<MeanCrossEntropy> {
    if (ce.getReduction() != LossReduction::Mean)
      return std::nullopt;
    return MeanCrossEntropy{ce.getLabels(),
                            static_cast<int64_t>(ce.getIgnoreIndex()),
                            gradOperand};
  };
  if (auto ce = dyn_cast<CrossEntropyOp>(op))
    return get(ce);
  if (auto ce = dyn_cast<LinearCrossEntropyOp>(op))
    return get(ce);
  if (auto ce = dyn_cast<CrossEntropyGradOp>(op))
    return get(ce, 2);
  if (auto ce = dyn_cast<LinearCrossEntropyGradOp>(op))
    return get(ce, 4);
  if (auto ce = dyn_cast<Nf4LinearCrossEntropyOp>(op))
    return get(ce);
  if (auto ce = dyn_cast<Nf4LinearCrossEntropyGradOp>(op))
    return get(ce, 4);
  return std::nullopt;
}

/// `type` with dimension `dim` divided by `k`.
static RankedTensorType getMicroType(Type type, int64_t dim, int64_t k) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[dim] /= k;
  return RankedTensorType::get(shape, tensor.getElementType());
}

namespace {

/// Builds the micro-batch loop of one train step (steps 1-4 of the file
/// comment), over the state the steps share.
class StepAccumulator {
public:
  /// `k` micro-batches on each of `ranks` ranks: `parts` micro-batches of
  /// the global batch, the IR's batch values split into `split`.
  StepAccumulator(func::FuncOp func, Block &body, func::ReturnOp returnOp,
                  int64_t k, int64_t ranks, int64_t parts, int64_t split,
                  bool acrossRanks, bool allowBatchNorm)
      : ctx(func.getContext()), func(func), body(body), returnOp(returnOp),
        k(k), ranks(ranks), parts(parts), split(split),
        acrossRanks(acrossRanks), allowBatchNorm(allowBatchNorm), b(returnOp),
        loc(func.getLoc()),
        f32Scalar(RankedTensorType::get({}, b.getF32Type())) {}

  LogicalResult run();

private:
  /// The batch arguments, checked, and their batch dimension.
  LogicalResult findBatchArguments();
  /// 1-2. After the loop, in the loop or before it; each value's kind.
  /// Sums over the batch of the data alone that an op cannot take as sums
  /// (a divisor) are hoisted: made once on the full batch before the loop.
  LogicalResult classify();
  /// One classification with the current hoisted ops; the op whose rule
  /// failed, if one did.
  LogicalResult classifyOnce(Operation *&failedAt);
  /// Whether each value depends on the model state (a parameter, an
  /// optimizer state or a running statistic), not on the data alone.
  void findModelDependence();
  /// The values that leave the loop: accumulated or carried.
  LogicalResult findEscapingValues();
  /// 3-4. Rebuild: the rank's share of the batch arguments, then the loop.
  void splitAcrossRanks();
  LogicalResult buildLoop();
  LogicalResult sliceBatchArguments();
  /// Clones one loop op at the micro-batch shape; a mean loss becomes a sum
  /// scaled by one over the full batch's count.
  LogicalResult cloneOp(Operation *op);
  void accumulateAndYield();
  void finishAfterLoop();

  /// The sum over all ranks of a rank's partial value.
  Value sumOverRanks(Value partial);
  /// The rank's share of full-batch labels: views of a batch argument,
  /// which holds the rank's share already, rebuilt at its shape (null after
  /// an error).
  Value getRankLabels(Value labels);
  /// One over the count of the full batch's labels (over every rank) that
  /// are not `ignoreIndex`, made once per labels before the loop.
  Value getInverseCount(Value labels, int64_t ignoreIndex);
  /// The f32 accumulator's type of a partial value.
  RankedTensorType accumulatorType(Value v);
  /// An index constant.
  Value index(int64_t value);
  /// A view of `value` (full batch) at this micro-batch along `dim`.
  FailureOr<Value> sliceAt(Value value, int64_t dim);
  /// A batch-independent value at the micro-batch shape along `dim`: a
  /// broadcast or a splat rebuilt at that shape, otherwise a slice of it.
  FailureOr<Value> getMicro(Value value, int64_t dim);
  static void copyScope(Operation *from, Operation *to) {
    if (Attribute scope = from->getAttr(MemoptDialect::kScopeAttrName))
      to->setAttr(MemoptDialect::kScopeAttrName, scope);
  }

  MLIRContext *ctx;
  func::FuncOp func;
  Block &body;
  func::ReturnOp returnOp;
  const int64_t k, ranks, parts, split;
  const bool acrossRanks, allowBatchNorm;
  OpBuilder b;
  Location loc;
  RankedTensorType f32Scalar;
  /// The examples of the IR's batch (every batch argument has as many).
  int64_t batchSize = 0;

  DenseMap<Value, BatchKind> kinds;
  SmallVector<BlockArgument> batchArgs;
  DenseSet<Operation *> after, inLoop, hoisted;
  DenseSet<Value> fromModel;
  SmallVector<Operation *> loopOps;
  DenseMap<Operation *, OpRule> rules;
  DenseMap<Value, BlockArgument> stateOfResult;
  llvm::SetVector<Value> accumulated, carried;
  DenseMap<std::pair<Value, int64_t>, Value> inverseCounts, rebuilt;
  scf::ForOp loop;
  Block *loopBody = nullptr;
  Value iv;
  IRMapping map;
};

} // namespace

LogicalResult StepAccumulator::run() {
  if (failed(findBatchArguments()) || failed(classify()) ||
      failed(findEscapingValues()))
    return failure();
  splitAcrossRanks();
  if (failed(buildLoop()) || failed(sliceBatchArguments()))
    return failure();
  for (Operation *op : loopOps)
    if (failed(cloneOp(op)))
      return failure();
  accumulateAndYield();
  finishAfterLoop();
  return success();
}

LogicalResult StepAccumulator::findBatchArguments() {
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto role = func.getArgAttrOfType<StringAttr>(i, MemoptDialect::kRoleAttrName);
    std::optional<ArgumentRole> kind =
        role ? symbolizeArgumentRole(role.getValue()) : std::nullopt;
    kinds[arg] = BatchKind::uniform();
    if (kind != ArgumentRole::Input && kind != ArgumentRole::Label)
      continue;
    auto name = func.getArgAttrOfType<StringAttr>(i, MemoptDialect::kNameAttrName);
    std::string label =
        name ? ("'" + name.getValue() + "'").str() : "#" + std::to_string(i);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    auto batchDim =
        func.getArgAttrOfType<IntegerAttr>(i, MemoptDialect::kBatchDimAttrName);
    if (!type || !batchDim || batchDim.getInt() < 0 ||
        batchDim.getInt() >= type.getRank())
      return func.emitOpError()
             << "argument " << label << " (role \"" << role.getValue()
             << "\") needs a valid '" << MemoptDialect::kBatchDimAttrName
             << "' to be split into micro-batches";
    int64_t d = batchDim.getInt();
    int64_t size = type.getDimSize(d);
    if (size % split != 0)
      return func.emitOpError()
             << "argument " << label << " has a batch of " << size
             << " along dimension " << d << ", which micro-batches=" << k
             << (acrossRanks ? " x data-parallel=" + std::to_string(ranks)
                           : std::string())
             << " does not divide";
    for (int64_t e = 0; e < d; ++e)
      if (type.getDimSize(e) != 1)
        return func.emitOpError()
               << "argument " << label << " has its batch dimension " << d
               << " after a dimension of extent " << type.getDimSize(e)
               << ": a micro-batch would not be contiguous";
    kinds[arg] = BatchKind::batched(d);
    batchArgs.push_back(arg);
    batchSize = size;
  }
  return success();
}

void StepAccumulator::findModelDependence() {
  for (BlockArgument arg : body.getArguments()) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  MemoptDialect::kRoleAttrName);
    if (role && role.getValue() != "input" && role.getValue() != "label")
      fromModel.insert(arg);
  }
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return fromModel.contains(v); }))
      fromModel.insert_range(op.getResults());
}

LogicalResult StepAccumulator::classify() {
  // A sum over the batch that depends on the data alone (how many labels
  // count, their weights' sum) is a sum of the micro-batches' sums, but an
  // op that divides by it is not linear in it. Such a sum is hoisted: made
  // once on the full batch before the loop, batch-independent from then on,
  // as the fused cross-entropy's label count is. The ops that feed it stay
  // at the full batch for it (they are cloned into the loop for their other
  // users). Only on one rank: under data parallelism a rank holds its share
  // of the batch only.
  findModelDependence();
  for (;;) {
    Operation *failedAt = nullptr;
    LogicalResult result = success();
    {
      ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
      result = classifyOnce(failedAt);
    }
    if (succeeded(result))
      return success();
    bool more = false;
    if (failedAt && ranks == 1)
      for (Value operand : failedAt->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (kinds.lookup(operand).isPartial() &&
              !fromModel.contains(operand) && !hoisted.contains(def))
            more |= hoisted.insert(def).second;
    if (!more)
      return classifyOnce(failedAt); // reports the failure
  }
}

LogicalResult StepAccumulator::classifyOnce(Operation *&failedAt) {
  after.clear();
  loopOps.clear();
  rules.clear();
  inLoop.clear();
  // 1. Classify: after the loop, in the loop, or before it.
  for (Operation &op : body.without_terminator()) {
    if (!isa<MemoptDialect>(op.getDialect()) || op.getNumRegions() != 0)
      return op.emitOpError() << "is not a memopt tensor op; "
                                 "--memopt-accumulate handles those only";
    bool usesAfter = llvm::any_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && after.contains(def);
    });
    SmallVector<BatchKind> in = llvm::map_to_vector(
        op.getOperands(), [&](Value v) { return kinds.lookup(v); });
    if (isOptimizerOp(&op) || usesAfter) {
      after.insert(&op);
      for (Value v : op.getResults())
        kinds[v] = BatchKind::uniform();
      continue;
    }
    // 2. Propagation.
    FailureOr<OpRule> rule =
        inferBatchRule(&op, in, k, split, batchSize, allowBatchNorm);
    if (failed(rule)) {
      failedAt = &op;
      return failure();
    }
    if (hoisted.contains(&op)) {
      for (Value v : op.getResults())
        kinds[v] = BatchKind::uniform();
      continue;
    }
    for (auto [v, kind] : llvm::zip(op.getResults(), rule->results)) {
      kinds[v] = kind;
      if (kind.isBatched() && getShape(v)[kind.dim] % split != 0)
        return op.emitOpError()
               << "has a batch dimension " << kind.dim << " of extent "
               << getShape(v)[kind.dim] << ", which " << split
               << " micro-batches do not divide";
    }
    if (llvm::any_of(rule->results, [](BatchKind b) { return !b.isUniform(); })) {
      loopOps.push_back(&op);
      rules[&op] = std::move(*rule);
    }
  }
  if (loopOps.empty())
    return func.emitOpError() << "has no op that depends on the batch";
  inLoop.insert_range(loopOps);
  // Casts that only the loop reads (a parameter's low-precision copy, and
  // remat's recast of it) are made in the loop where they are read: made
  // before it, each would live across the whole loop, every copy of every
  // parameter at once (docs/Accumulation.md).
  bool sunk = false;
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (isa<CastOp>(op) && !inLoop.contains(&op) && !after.contains(&op) &&
        !op.use_empty() &&
        llvm::all_of(op.getUsers(),
                     [&](Operation *user) { return inLoop.contains(user); })) {
      inLoop.insert(&op);
      rules[&op] = OpRule{{BatchKind::uniform()}, {-1}};
      sunk = true;
    }
  if (sunk) {
    loopOps.clear();
    for (Operation &op : body.without_terminator())
      if (inLoop.contains(&op))
        loopOps.push_back(&op);
  }
  return success();
}

LogicalResult StepAccumulator::findEscapingValues() {
  // Values that leave the loop: partial sums are accumulated; the new value
  // of a "state" argument updated per micro-batch (batch-norm running
  // statistics) is carried by the loop.
  {
    unsigned position = 1;
    for (BlockArgument arg : body.getArguments()) {
      auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    MemoptDialect::kRoleAttrName);
      if (!role || (role.getValue() != "param" && role.getValue() != "state" &&
                    role.getValue() != "optim"))
        continue;
      if (role.getValue() == "state" &&
          position < returnOp.getNumOperands())
        stateOfResult[returnOp.getOperand(position)] = arg;
      ++position;
    }
  }
  for (Operation *op : loopOps)
    for (Value v : op->getResults()) {
      // A hoisted sum reads the full batch's values before the loop.
      bool escapes = llvm::any_of(v.getUsers(), [&](Operation *user) {
        return !inLoop.contains(user) && !hoisted.contains(user);
      });
      if (!escapes)
        continue;
      BatchKind kind = kinds.lookup(v);
      if (kind.isPartial()) {
        accumulated.insert(v);
      } else if (kind.isLocal() && stateOfResult.contains(v) &&
                 llvm::all_of(v.getUsers(), [&](Operation *user) {
                   return inLoop.contains(user) || isa<func::ReturnOp>(user);
                 })) {
        carried.insert(v);
      } else {
        return op->emitOpError()
               << "has a result that depends on the micro-batch and is used "
                  "after the loop (only sums over the batch, such as "
                  "gradients and the loss, and state updates can be)";
      }
    }
  return success();
}

void StepAccumulator::splitAcrossRanks() {
  if (acrossRanks) {
    for (BlockArgument arg : batchArgs)
      arg.setType(getMicroType(arg.getType(), kinds.lookup(arg).dim, ranks));
    func.setType(FunctionType::get(ctx, body.getArgumentTypes(),
                                   func.getResultTypes()));
  }
}

Value StepAccumulator::sumOverRanks(Value partial) {
  if (ranks == 1)
    return partial;
  return shard::AllReduceOp::create(b, loc, partial, kRanksGridName,
                                    ArrayRef<shard::GridAxis>{0},
                                    shard::ReductionKind::Sum)
      .getResult();
}

Value StepAccumulator::getRankLabels(Value labels) {
  if (!acrossRanks || isa<BlockArgument>(labels))
    return labels;
  auto reshape = labels.getDefiningOp<ReshapeOp>();
  Value input = reshape ? getRankLabels(reshape.getInput()) : Value();
  if (!input) {
    if (!reshape)
      emitError(labels.getLoc())
          << "the labels of a loss are computed, not a view of a label "
             "argument: data parallelism cannot count each rank's share";
    return Value();
  }
  return ReshapeOp::create(
      b, reshape.getLoc(),
      getMicroType(labels.getType(), kinds.lookup(labels).dim, ranks), input);
}

Value StepAccumulator::getInverseCount(Value labels, int64_t ignoreIndex) {
  Value &inverse = inverseCounts[{labels, ignoreIndex}];
  if (!inverse) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(returnOp);
    Value rankLabels = getRankLabels(labels);
    if (!rankLabels)
      return Value();
    Value count = sumOverRanks(LabelCountOp::create(
        b, loc, f32Scalar, rankLabels, b.getI64IntegerAttr(ignoreIndex)));
    Value one = ConstantOp::create(
        b, loc, DenseElementsAttr::get(f32Scalar, b.getF32FloatAttr(1.0)));
    inverse = DivOp::create(b, loc, f32Scalar, one, count);
  }
  return inverse;
}

RankedTensorType StepAccumulator::accumulatorType(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return RankedTensorType::get(type.getShape(), b.getF32Type());
}

Value StepAccumulator::index(int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

LogicalResult StepAccumulator::buildLoop() {
  // Counts are made before the loop is built (they read full-batch labels).
  for (Operation *op : loopOps)
    if (std::optional<MeanCrossEntropy> ce = getMeanCrossEntropy(op))
      if (!getInverseCount(ce->labels, ce->ignoreIndex))
        return failure();
  SmallVector<Value> inits;
  for (Value v : accumulated) {
    RankedTensorType type = accumulatorType(v);
    inits.push_back(ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0))));
  }
  for (Value v : carried)
    inits.push_back(stateOfResult.lookup(v));
  loop = scf::ForOp::create(b, loc, index(0), index(k), index(1), inits);
  loop->setAttr(MemoptDialect::kMicroBatchesAttrName, b.getI64IntegerAttr(k));
  if (ranks > 1)
    loop->setAttr(MemoptDialect::kDataParallelAttrName,
                  b.getI64IntegerAttr(ranks));
  loopBody = loop.getBody();
  b.setInsertionPointToStart(loopBody);
  iv = loop.getInductionVar();

  for (auto [v, iterArg] :
       llvm::zip(carried, loop.getRegionIterArgs().drop_front(accumulated.size())))
    map.map(stateOfResult.lookup(v), iterArg);
  return success();
}

FailureOr<Value> StepAccumulator::sliceAt(Value value, int64_t dim) {
  auto type = cast<RankedTensorType>(value.getType());
  for (int64_t e = 0; e < dim; ++e)
    if (type.getDimSize(e) != 1)
      return emitError(value.getLoc())
             << "cannot take a contiguous micro-batch of a value of type "
             << type << " along dimension " << dim;
  int64_t micro = type.getDimSize(dim) / k;
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  for (int64_t size : type.getShape())
    sizes.push_back(b.getIndexAttr(size));
  sizes[dim] = b.getIndexAttr(micro);
  offsets[dim] = arith::MulIOp::create(b, loc, iv, index(micro)).getResult();
  return tensor::ExtractSliceOp::create(b, loc, getMicroType(type, dim, k),
                                        value, offsets, sizes, strides)
      .getResult();
}

LogicalResult StepAccumulator::sliceBatchArguments() {
  for (BlockArgument arg : batchArgs) {
    if (arg.use_empty())
      continue;
    FailureOr<Value> slice = sliceAt(arg, kinds.lookup(arg).dim);
    if (failed(slice))
      return failure();
    map.map(arg, *slice);
  }
  return success();
}

FailureOr<Value> StepAccumulator::getMicro(Value value, int64_t dim) {
  Value &result = rebuilt[{value, dim}];
  if (result)
    return result;
  RankedTensorType micro = getMicroType(value.getType(), dim, split);
  Operation *def = value.getDefiningOp();
  if (auto broadcast = dyn_cast_or_null<BroadcastOp>(def)) {
    ArrayRef<int64_t> dims = broadcast.getDims();
    const int64_t *it = llvm::find(dims, dim);
    if (it == dims.end() ||
        getShape(broadcast.getInput())[it - dims.begin()] == 1) {
      Operation *clone = b.clone(*def);
      clone->getResult(0).setType(micro);
      return result = clone->getResult(0);
    }
  }
  DenseElementsAttr splat;
  if (auto constant = dyn_cast_or_null<ConstantOp>(def))
    if ((splat = dyn_cast<DenseElementsAttr>(constant.getValue())) &&
        splat.isSplat()) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop);
      return result =
                 ConstantOp::create(b, def->getLoc(), splat.resizeSplat(micro));
    }
  if (acrossRanks)
    return emitError(value.getLoc())
           << "a value of type " << value.getType()
           << " that does not depend on the batch has the batch's extent "
              "along dimension "
           << dim
           << ": each rank would need its own slice of it, which "
              "data parallelism does not support (broadcast it from a "
              "batch-independent shape instead)";
  FailureOr<Value> slice = sliceAt(value, dim);
  if (failed(slice))
    return failure();
  return result = *slice;
}

LogicalResult StepAccumulator::cloneOp(Operation *op) {
  const OpRule &rule = rules[op];
  Operation *clone = b.clone(*op, map);
  b.setInsertionPoint(clone);
  for (auto [i, dim] : llvm::enumerate(rule.sliceOperand)) {
    if (dim < 0)
      continue;
    FailureOr<Value> micro = getMicro(op->getOperand(i), dim);
    if (failed(micro))
      return failure();
    clone->setOperand(i, *micro);
  }
  b.setInsertionPointToEnd(loopBody);
  // Micro-batch result types and the slice limits along the batch.
  for (auto [result, kind] : llvm::zip(clone->getResults(), rule.results))
    if (kind.isBatched())
      result.setType(getMicroType(result.getType(), kind.dim, split));
  if (isa<SliceOp, SliceGradOp>(clone)) {
    int64_t d = rule.results[0].dim;
    SmallVector<int64_t> limits(
        clone->getAttrOfType<DenseI64ArrayAttr>("limits").asArrayRef());
    limits[d] /= split;
    clone->setAttr("limits", b.getDenseI64ArrayAttr(limits));
  }
  for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
    map.map(from, to);

  // Exact normalisation of mean losses by the full batch's count.
  auto scaleAfter = [&](Value value, auto makeScaled) {
    b.setInsertionPointAfter(clone);
    Operation *scaled = makeScaled(value);
    copyScope(op, scaled);
    map.map(op->getResult(0), scaled->getResult(0));
    b.setInsertionPointToEnd(loopBody);
  };
  auto scaleGradOperand = [&](auto makeScaled, unsigned index = 2) {
    b.setInsertionPoint(clone);
    Operation *scaled = makeScaled(clone->getOperand(index));
    copyScope(op, scaled);
    clone->setOperand(index, scaled->getResult(0));
    b.setInsertionPointToEnd(loopBody);
  };
  auto sum = LossReductionAttr::get(ctx, LossReduction::Sum);
  if (std::optional<MeanCrossEntropy> ce = getMeanCrossEntropy(op)) {
    // A sum per micro-batch, scaled by the inverse of the full batch's
    // label count (over every rank): the loss after it, or the incoming
    // gradient before it.
    clone->setAttr("reduction", sum);
    Value inverse = getInverseCount(ce->labels, ce->ignoreIndex);
    auto scale = [&](Value v) {
      return MulOp::create(b, loc, f32Scalar, v, inverse).getOperation();
    };
    if (ce->gradOperand)
      scaleGradOperand(scale, *ce->gradOperand);
    else
      scaleAfter(clone->getResult(0), scale);
  } else if (isa<MseLossOp, MseLossGradOp>(clone) &&
             clone->getAttrOfType<LossReductionAttr>("reduction").getValue() ==
                 LossReduction::Mean) {
    clone->setAttr("reduction", sum);
    // Over the global batch: with `rank-batch`, every rank's elements.
    double inverse =
        1.0 /
        (cast<RankedTensorType>(op->getOperand(0).getType()).getNumElements() *
         static_cast<double>(acrossRanks ? 1 : ranks));
    auto makeScaled = [&](Value v) {
      return MulScalarOp::create(b, loc, f32Scalar, v,
                                 b.getF64FloatAttr(inverse))
          .getOperation();
    };
    if (isa<MseLossOp>(clone))
      scaleAfter(clone->getResult(0), makeScaled);
    else
      scaleGradOperand(makeScaled);
  } else if (isa<ReduceMeanOp>(clone) && rule.results[0].isPartial() &&
             llvm::none_of(op->getOperands(), [&](Value v) {
               return kinds.lookup(v).isPartial();
             })) {
    // A mean over the batch: the mean of each micro-batch over the
    // number of micro-batches of all ranks.
    scaleAfter(clone->getResult(0), [&](Value v) {
      return MulScalarOp::create(b, loc, v.getType(), v,
                                 b.getF64FloatAttr(1.0 / parts))
          .getOperation();
    });
  }
  return success();
}

void StepAccumulator::accumulateAndYield() {
  // Accumulate right after each micro-batch sum is computed, so that the
  // parameter-sized partial gradient dies at once instead of living to the
  // end of the body; then yield. A parameter used twice (a tied embedding)
  // has its micro-batch's terms summed first, then added, as PyTorch's
  // AccumulateGrad adds the engine's sum: the accumulator then holds
  // g_0 + g_1 + ... in micro-batch order whatever the number of terms, which
  // is also what data parallelism's all-reduce adds (the ranks' sums), so
  // that N ranks of K micro-batches equal N * K micro-batches bit for bit
  // for N * K = 2.
  SmallVector<Value> yields;
  for (auto [v, acc] : llvm::zip(accumulated, loop.getRegionIterArgs())) {
    Value micro = map.lookup(v);
    Operation *producer = v.getDefiningOp();
    Operation *def = micro.getDefiningOp();
    if (def && def->getBlock() == loopBody)
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToEnd(loopBody);
    if (micro.getType() != acc.getType()) {
      auto cast = CastOp::create(b, loc, acc.getType(), micro);
      copyScope(producer, cast);
      micro = cast;
    }
    auto add = AddOp::create(b, loc, acc.getType(), acc, micro);
    copyScope(producer, add);
    yields.push_back(add);
  }
  for (Value v : carried)
    yields.push_back(map.lookup(v));
  b.setInsertionPointToEnd(loopBody);
  scf::YieldOp::create(b, loc, yields);
}

void StepAccumulator::finishAfterLoop() {
  // After the loop: the data-parallel all-reduce point, then the optimizer.
  b.setInsertionPointAfter(loop);
  for (auto [v, result] : llvm::zip(accumulated, loop.getResults())) {
    Value replacement = sumOverRanks(result);
    if (result.getType() != v.getType()) {
      auto cast = CastOp::create(b, loc, v.getType(), result);
      copyScope(v.getDefiningOp(), cast);
      replacement = cast;
    }
    Value(v).replaceUsesWithIf(replacement, [&](OpOperand &use) {
      return !inLoop.contains(use.getOwner()) &&
             use.getOwner()->getBlock() == &body;
    });
  }
  for (auto [v, result] :
       llvm::zip(carried, loop.getResults().drop_front(accumulated.size())))
    Value(v).replaceUsesWithIf(result, [&](OpOperand &use) {
      return isa<func::ReturnOp>(use.getOwner());
    });
  SmallVector<Operation *> optimizerOps;
  for (Operation &op : body)
    if (after.contains(&op))
      optimizerOps.push_back(&op);
  for (Operation *op : optimizerOps)
    op->moveBefore(returnOp);
  for (Operation *op : llvm::reverse(loopOps))
    if (op->use_empty())
      op->erase();
  // Full-batch broadcasts and splats that the loop rebuilt at the
  // micro-batch shape are dead now.
  for (Block *block : {loopBody, &body})
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*block)))
      if (isa<MemoptDialect>(op.getDialect()) && isOpTriviallyDead(&op))
        op.erase();
}

LogicalResult AccumulatePass::accumulate(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError() << "has control flow; --memopt-accumulate "
                                 "expects one block";
  Block &body = func.getBody().front();
  auto returnOp = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!returnOp)
    return func.emitOpError() << "must end with func.return";
  return StepAccumulator(func, body, returnOp, microBatches, dataParallel,
                         getParts(), getSplit(), splitsAcrossRanks(),
                         allowBatchNorm)
      .run();
}

void AccumulatePass::runOnOperation() {
  ModuleOp module = getOperation();
  for (auto [name, value] : {std::pair<StringRef, int64_t>{"micro-batches",
                                                          microBatches},
                             {"data-parallel", dataParallel}})
    if (value < 1) {
      emitError(module.getLoc())
          << "--memopt-accumulate option '" << name << "' is " << value
          << ", expected at least 1";
      return signalPassFailure();
    }
  FailureOr<FunctionOpInterface> step = findTrainStep(module, "accumulate");
  if (failed(step))
    return signalPassFailure();
  auto func = dyn_cast<func::FuncOp>(step->getOperation());
  if (!func) {
    step->emitOpError() << "must be a func.func to be accumulated";
    return signalPassFailure();
  }
  if (getParts() == 1)
    return;
  if (dataParallel > 1 &&
      !SymbolTable::lookupSymbolIn(module, kRanksGridName)) {
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    shard::GridOp::create(builder, module.getLoc(), kRanksGridName,
                          ArrayRef<int64_t>{dataParallel});
  }
  if (failed(accumulate(func)) || failed(verify(func)))
    return signalPassFailure();
}
