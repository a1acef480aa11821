//===- RematGraph.cpp - the step graph that --memopt-remat rewrites -------===//
//
// Steps 1, 2 and 4 of Rematerialize.cpp: the forward graph and its stages,
// and the recompute rewrite.
//
//===----------------------------------------------------------------------===//

#include "RematGraph.h"

#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <limits>
#include <set>

using namespace mlir;
using namespace memopt;
using namespace memopt::remat;

/// a + b for FLOP counts, which saturate (CostModel) rather than overflow.
int64_t remat::addFlops(int64_t a, int64_t b) {
  return llvm::checkedAdd(a, b).value_or(std::numeric_limits<int64_t>::max());
}

/// Bytes of a statically shaped tensor, rounded up to the planner's 256-byte
/// alignment; 0 when unknown.
int64_t remat::getAlignedBytes(Value value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  Type element = type.getElementType();
  int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 0;
  int64_t bytes = (type.getNumElements() * std::max<int64_t>(bits, 8) + 7) / 8;
  return (bytes + 255) / 256 * 256;
}

/// The stage key of a scope: the prefix up to and including its first
/// numeric component ("transformer.h.3.attn" -> "transformer.h.3"), else its
/// first component ("layer1.conv1" -> "layer1").
static StringRef getStageKey(StringRef scope) {
  SmallVector<StringRef> parts;
  scope.split(parts, '.');
  size_t length = 0;
  for (auto [index, part] : llvm::enumerate(parts)) {
    length += part.size() + (index ? 1 : 0);
    if (!part.empty() && llvm::all_of(part, llvm::isDigit))
      return scope.take_front(length);
  }
  return parts.front();
}

/// Ops the selective strategy recomputes: cheap per element, or the
/// attention score product (a matmul of two activations).
bool remat::isSelectiveCandidate(Operation *op,
                                 const DenseSet<Operation *> &freeOps,
                                 const DenseSet<Operation *> &forward) {
  if (isa<MatmulOp>(op)) {
    return llvm::all_of(op->getOperands(), [&](Value operand) {
      Operation *def = operand.getDefiningOp();
      return def && forward.contains(def) && !freeOps.contains(def);
    });
  }
  return isa<SoftmaxOp, DropoutOp, MaskedFillOp, MulScalarOp, AddScalarOp,
             ReluOp, GeluOp, SiluOp, TanhOp, SigmoidOp, HardswishOp,
             HardsigmoidOp, MishOp, ClampOp, WhereOp, CompareOp>(op);
}

/// Ops the rewrite may clone: no memory effects, no regions, some result.
bool remat::isRecomputable(Operation *op) {
  return isMemoryEffectFree(op) && op->getNumRegions() == 0 &&
         op->getNumResults() > 0;
}

/// Ops the minimal saved set may recompute in the backward: every op the
/// rewrite can clone but the FLOP-heavy ones, whose recompute the user
/// chooses with a strategy.
bool remat::isCheapToRecompute(Operation *op) {
  return isRecomputable(op) &&
         !isa<MatmulOp, Nf4MatmulOp, Conv2DOp, Conv2DGradInputOp, AttentionOp,
              LinearCrossEntropyOp, Nf4LinearCrossEntropyOp>(op);
}

/// The stage boundaries that cheap ops compute from the previous boundary: a
/// residual stream (x + f(x) after each block). One form of the minimal
/// saved set keeps these: rebuilding the stream's last value from the
/// blocks' outputs recomputes every block's sum at the start of the
/// backward, each held until its own block's gradient reads it, which can
/// plan more than keeping them.
DenseSet<Value> remat::getResidualBoundaries(const StepGraph &graph) {
  // Values that cheap ops compute from the latest boundary.
  DenseSet<Value> fromBoundary;
  DenseSet<Value> residual;
  for (Operation *op : graph.forwardOps) {
    bool cheapPath = isCheapToRecompute(op) &&
                     llvm::any_of(op->getOperands(), [&](Value operand) {
                       return fromBoundary.contains(operand);
                     });
    for (Value result : op->getResults()) {
      if (!graph.boundaryIndex.count(result)) {
        if (cheapPath)
          fromBoundary.insert(result);
        continue;
      }
      if (cheapPath)
        residual.insert(result);
      fromBoundary.clear();
      fromBoundary.insert(result);
    }
  }
  return residual;
}

std::vector<GraphValue>
StepGraph::getValueGraph(SmallVectorImpl<Operation *> &ops) const {
  DenseMap<Operation *, int64_t> index;
  for (Operation *op : forwardOps)
    if (!freeOps.contains(op)) {
      index[op] = static_cast<int64_t>(ops.size());
      ops.push_back(op);
    }
  std::vector<GraphValue> values(ops.size());
  for (auto [i, op] : llvm::enumerate(ops)) {
    GraphValue &value = values[i];
    for (Value result : op->getResults())
      value.bytes += getAlignedBytes(result);
    value.flops = getOpFlops(op);
    for (Value operand : op->getOperands())
      if (auto it = index.find(operand.getDefiningOp()); it != index.end())
        if (!llvm::is_contained(value.operands, it->second))
          value.operands.push_back(it->second);
  }
  for (auto [position, op] : llvm::enumerate(backwardOps))
    for (Value operand : op->getOperands())
      if (auto it = index.find(operand.getDefiningOp()); it != index.end()) {
        GraphValue &value = values[it->second];
        if (value.firstUse < 0)
          value.firstUse = static_cast<int64_t>(position);
        value.lastUse = static_cast<int64_t>(position);
      }
  for (auto [i, op] : llvm::enumerate(ops))
    values[i].kind = !isRecomputable(op)      ? GraphValue::Kind::Kept
                     : values[i].lastUse >= 0 ? GraphValue::Kind::Candidate
                                              : GraphValue::Kind::Recomputed;
  return values;
}

LogicalResult StepGraph::build(FunctionOpInterface func) {
  Region &region = func.getFunctionBody();
  if (!region.hasOneBlock())
    return func.emitOpError()
           << "must have one block for --memopt-remat (run it before "
              "--memopt-accumulate)";
  body = &region.front();
  if (body->getTerminator()->getNumOperands() == 0)
    return func.emitOpError() << "returns no loss";
  findForward(func);
  classifyOps(func);
  cutStages();
  measureStages();
  return success();
}

void StepGraph::findForward(FunctionOpInterface func) {
  // Seeds: the loss and the new value of every "state" argument.
  Operation *terminator = body->getTerminator();
  SmallVector<Value> seeds{terminator->getOperand(0)};
  unsigned result = 1;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role =
        func.getArgAttrOfType<StringAttr>(i, MemoptDialect::kRoleAttrName);
    std::optional<ArgumentRole> kind =
        role ? symbolizeArgumentRole(role.getValue()) : std::nullopt;
    if (!kind || (*kind != ArgumentRole::Param &&
                  *kind != ArgumentRole::State && *kind != ArgumentRole::Optim))
      continue;
    if (*kind == ArgumentRole::State && result < terminator->getNumOperands())
      seeds.push_back(terminator->getOperand(result));
    ++result;
  }
  SmallVector<Operation *> worklist;
  for (Value seed : seeds)
    if (Operation *def = seed.getDefiningOp())
      if (def->getBlock() == body && forward.insert(def).second)
        worklist.push_back(def);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (def->getBlock() == body && forward.insert(def).second)
          worklist.push_back(def);
  }
}

void StepGraph::classifyOps(FunctionOpInterface func) {
  DenseSet<Operation *> readsData;
  for (Operation &op : body->without_terminator()) {
    if (!forward.contains(&op)) {
      backwardOps.push_back(&op);
      continue;
    }
    forwardOps.push_back(&op);
    bool data = llvm::any_of(op.getOperands(), [&](Value operand) {
      if (auto arg = dyn_cast<BlockArgument>(operand)) {
        auto role = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), MemoptDialect::kRoleAttrName);
        return role &&
               (role.getValue() == "input" || role.getValue() == "label");
      }
      Operation *def = operand.getDefiningOp();
      return def && readsData.contains(def);
    });
    if (data)
      readsData.insert(&op);
    else
      freeOps.insert(&op);
  }
}

void StepGraph::cutStages() {
  SmallVector<Operation *> chain;
  for (Operation *op : forwardOps)
    if (!freeOps.contains(op))
      chain.push_back(op);
  DenseMap<Operation *, int64_t> position;
  for (auto [index, op] : llvm::enumerate(chain))
    position[op] = static_cast<int64_t>(index);
  DenseMap<Value, int64_t> lastUse;
  for (Operation *op : chain)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && position.count(def))
        lastUse[operand] = std::max(lastUse.lookup(operand), position[op]);

  // With scopes, a cut also needs a new stage key on its far side.
  bool hasScopes = llvm::any_of(chain, [](Operation *op) {
    auto scope = op->getAttrOfType<StringAttr>(MemoptDialect::kScopeAttrName);
    return scope && !scope.getValue().empty();
  });
  SmallVector<StringRef> keys(chain.size());
  StringRef previousKey;
  for (auto [index, op] : llvm::enumerate(chain)) {
    auto scope = op->getAttrOfType<StringAttr>(MemoptDialect::kScopeAttrName);
    if (scope && !scope.getValue().empty())
      previousKey = getStageKey(scope.getValue());
    keys[index] = previousKey;
  }

  boundaries.push_back(Value());
  StringRef stageKey = chain.empty() ? StringRef() : keys[0];
  // Values defined so far and read after the gap, by last use.
  std::set<std::pair<int64_t, const void *>> open;
  DenseMap<const void *, Value> byPointer;
  for (auto [index, op] : llvm::enumerate(chain)) {
    int64_t gap = static_cast<int64_t>(index);
    stageOf[op] = getNumStages() - 1;
    for (Value result : op->getResults())
      if (int64_t last = lastUse.lookup(result); last > gap) {
        open.insert({last, result.getAsOpaquePointer()});
        byPointer[result.getAsOpaquePointer()] = result;
      }
    while (!open.empty() && open.begin()->first <= gap)
      open.erase(open.begin());
    if (open.size() != 1 || gap + 1 >= static_cast<int64_t>(chain.size()))
      continue;
    if (hasScopes && keys[gap + 1] == stageKey)
      continue;
    boundaryIndex[byPointer[open.begin()->second]] = getNumStages();
    boundaries.push_back(byPointer[open.begin()->second]);
    stageKey = keys[gap + 1];
  }
}

void StepGraph::measureStages() {
  savedByStage.resize(getNumStages());
  stageFlops.assign(getNumStages(), 0);
  for (Operation *op : backwardOps)
    for (Value operand : op->getOperands())
      if (isForwardValue(operand))
        readByBackward.insert(operand);
  for (Operation *op : forwardOps) {
    int64_t flops = getOpFlops(op);
    forwardFlops = addFlops(forwardFlops, flops);
    auto it = stageOf.find(op);
    if (it == stageOf.end())
      continue;
    stageFlops[it->second] = addFlops(stageFlops[it->second], flops);
    for (Value result : op->getResults())
      if (readByBackward.contains(result))
        savedByStage[it->second].push_back(result);
  }
}

void Recomputer::run() {
  nextTurn = graph.getNumStages() - 1;
  for (Operation *op : graph.backwardOps) {
    OpBuilder builder(op);
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      if (!graph.isForwardValue(value))
        continue;
      if (!available.count(value)) {
        // Stage k's backward reads its input, boundary k, which stage k-1
        // computes.
        auto boundary = graph.boundaryIndex.find(value);
        auto stage = graph.stageOf.find(value.getDefiningOp());
        if (boundary != graph.boundaryIndex.end())
          startTurns(boundary->second, builder);
        else if (stage != graph.stageOf.end())
          startTurns(stage->second, builder);
      }
      // Later backward ops reuse the clones of values the backward reads
      // and of FLOP-heavy ops (a recomputed stage runs its matmuls once
      // per turn); the cheap intermediates that rebuild them die at once
      // and are recomputed again where needed, as in the minimal saved
      // set, instead of living across the stage's backward.
      DenseMap<Value, Value> scratch;
      Value replacement = materialize(value, scratch, builder);
      for (auto [original, copy] : scratch)
        if (graph.readByBackward.contains(original) ||
            !isCheapToRecompute(original.getDefiningOp()))
          available[original] = copy;
      if (replacement != value)
        operand.set(replacement);
    }
  }
}

void Recomputer::startTurns(int64_t stage, OpBuilder &builder) {
  for (; nextTurn >= stage; --nextTurn) {
    if (nextTurn >= static_cast<int64_t>(advancesBefore.size()))
      continue;
    for (auto [from, to] : advancesBefore[nextTurn]) {
      Value boundary = graph.boundaries[to];
      if (available.count(boundary))
        continue;
      DenseMap<Value, Value> scratch;
      available[boundary] = materialize(boundary, scratch, builder);
    }
  }
}

Value Recomputer::lookup(Value value,
                         const DenseMap<Value, Value> &cache) const {
  if (!graph.isForwardValue(value))
    return value;
  if (auto it = cache.find(value); it != cache.end())
    return it->second;
  if (auto it = available.find(value); it != available.end())
    return it->second;
  return Value();
}

Value Recomputer::materialize(Value value, DenseMap<Value, Value> &cache,
                              OpBuilder &builder) {
  if (Value found = lookup(value, cache))
    return found;
  // Iterative depth-first post-order: an op is expanded once (its missing
  // operands pushed), cloned when it is on top again; a copy pushed by a
  // second user is skipped once cloned. O(ops + operands).
  SmallVector<Operation *> stack{value.getDefiningOp()};
  DenseSet<Operation *> expanded;
  while (!stack.empty()) {
    Operation *op = stack.back();
    if (llvm::all_of(op->getResults(),
                     [&](Value result) { return lookup(result, cache); })) {
      stack.pop_back();
      continue;
    }
    if (expanded.insert(op).second) {
      // Free producers (broadcast biases, masks) go below the others so
      // that their clones come last, right before their user, instead of
      // living across the whole recomputed chain.
      for (bool free : {true, false})
        for (Value operand : llvm::reverse(op->getOperands()))
          if (!lookup(operand, cache) &&
              graph.freeOps.contains(operand.getDefiningOp()) == free)
            stack.push_back(operand.getDefiningOp());
      continue;
    }
    stack.pop_back();
    IRMapping mapping;
    for (Value operand : op->getOperands())
      mapping.map(operand, lookup(operand, cache));
    Operation *clone = builder.clone(*op, mapping);
    clone->setAttr(MemoptDialect::kRecomputeAttrName, builder.getUnitAttr());
    ++numClones;
    cloneFlops = addFlops(cloneFlops, getOpFlops(op));
    for (auto [original, copy] :
         llvm::zip(op->getResults(), clone->getResults()))
      if (!lookup(original, cache))
        cache[original] = copy;
  }
  return lookup(value, cache);
}
