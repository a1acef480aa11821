//===- BufferLiveness.cpp - live intervals of scratch buffers -------------===//
//
// Program order is the schedule. One recursive pre-order walk numbers every op
// and records where each op's subtree ends. Then, for each `memref.alloc`, a
// worklist follows the buffer through its aliases (any memref produced by an
// op that takes an alias, the memref block arguments of such an op's regions,
// and the memref results and region arguments of the parent of a terminator
// that takes one, which also keeps the buffer live over that whole parent: an
// over-approximation that can only lengthen a lifetime, never shorten it) and
// takes, for every use, the interval [ancestor of the alloc, ancestor of the
// use] in the innermost block containing both. A use inside a loop the buffer
// was not allocated in therefore keeps the buffer live over the whole loop
// (the loop op's subtree), because the next iteration reads it again; a buffer
// allocated and last used inside the body lives within the body's indices.
//
// Why not mlir::Liveness: it tracks SSA values, not buffers (aliases would
// have to be merged on top), it counts the dealloc as a use, and it does not
// model the back edge of a region loop such as scf.for, so a value used in a
// loop body is reported dead after its last use in the body. Its answers are
// also sets of ops per block; turning them into intervals enumerates every op
// of every live range, O(n * m), where the direct walk is O(n + u * d^2) for
// n ops, u uses of buffers and aliases, and region depth d.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

#define DEBUG_TYPE "memopt-buffer-liveness"

using namespace mlir;
using namespace memopt;

std::optional<int64_t> memopt::getMemRefSizeInBytes(MemRefType type,
                                                    Operation *scope) {
  if (!type.hasStaticShape())
    return std::nullopt;
  Type element = type.getElementType();
  if (!isa<IntegerType, FloatType, IndexType, ComplexType, VectorType>(element))
    return std::nullopt;
  if (auto vector = dyn_cast<VectorType>(element);
      vector && vector.isScalable())
    return std::nullopt;
  llvm::TypeSize elementSize = DataLayout::closest(scope).getTypeSize(element);
  if (elementSize.isScalable())
    return std::nullopt;

  // Elements spanned by the layout: the product of the dimensions for the
  // identity layout, offset + 1 + sum((dim - 1) * stride) for a strided one.
  int64_t numElements = 1;
  if (type.getLayout().isIdentity()) {
    for (int64_t dim : type.getShape()) {
      std::optional<int64_t> product = llvm::checkedMul(numElements, dim);
      if (!product)
        return std::nullopt;
      numElements = *product;
    }
  } else {
    SmallVector<int64_t> strides;
    int64_t offset = 0;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        ShapedType::isDynamic(offset) || offset < 0 ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return std::nullopt;
    if (llvm::is_contained(type.getShape(), 0))
      return 0;
    numElements = offset + 1;
    for (auto [dim, stride] : llvm::zip_equal(type.getShape(), strides)) {
      std::optional<int64_t> extent = llvm::checkedMul(dim - 1, stride);
      std::optional<int64_t> sum =
          extent ? llvm::checkedAdd(numElements, *extent) : std::nullopt;
      if (!sum)
        return std::nullopt;
      numElements = *sum;
    }
  }
  return llvm::checkedMul(numElements,
                          static_cast<int64_t>(elementSize.getFixedValue()));
}

/// Gives `op` and the ops nested in it consecutive indices, pre-order.
static void
number(Operation *op, int64_t &next,
       llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> &index) {
  int64_t own = next++;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      for (Operation &nested : block)
        number(&nested, next, index);
  index[op] = {own + 1, next};
}

BufferLiveness::BufferLiveness(Operation *op) {
  int64_t next = 0;
  SmallVector<memref::AllocOp> allocs;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      for (Operation &nested : block)
        number(&nested, next, index);
  numOps = next;
  op->walk<WalkOrder::PreOrder>(
      [&](memref::AllocOp alloc) { allocs.push_back(alloc); });
  for (auto [id, alloc] : llvm::enumerate(allocs))
    analyseAlloc(alloc, id, op);
}

void BufferLiveness::analyseAlloc(memref::AllocOp alloc, int64_t id,
                                  Operation *root) {
  BufferInterval interval;
  interval.alloc = alloc;
  interval.id = id;
  interval.start = interval.end = getIndex(alloc);
  interval.sizeBytes = getMemRefSizeInBytes(alloc.getType(), alloc);
  interval.scope =
      alloc->getAttrOfType<StringAttr>(MemoptDialect::kScopeAttrName);
  bool allocHasScope = static_cast<bool>(interval.scope);

  // Widens [lo, hi] so that it covers `user`, seen from the innermost block
  // that holds both the alloc and the user.
  auto cover = [&](Operation *user, int64_t &lo, int64_t &hi) {
    Operation *allocSide = alloc;
    while (allocSide && allocSide != root) {
      Block *block = allocSide->getBlock();
      if (Operation *userSide = block->findAncestorOpInBlock(*user)) {
        lo = std::min(lo, getIndex(allocSide));
        hi = std::max(hi, getSubtreeEnd(userSide));
        return;
      }
      allocSide = allocSide->getParentOp();
    }
  };

  bool hasUse = false;
  int64_t deallocLo = interval.start, deallocHi = interval.end;
  int64_t scopeIndex = std::numeric_limits<int64_t>::max();
  llvm::SetVector<Value> aliases;
  aliases.insert(alloc.getResult());
  auto addMemRefs = [&](ValueRange values) {
    for (Value value : values)
      if (isa<BaseMemRefType>(value.getType()))
        aliases.insert(value);
  };
  for (size_t i = 0; i < aliases.size(); ++i) {
    for (OpOperand &use : aliases[i].getUses()) {
      Operation *user = use.getOwner();
      if (getIndex(user) < 0)
        continue;
      if (isa<memref::DeallocOp>(user)) {
        cover(user, deallocLo, deallocHi);
        continue;
      }
      hasUse = true;
      cover(user, interval.start, interval.end);
      if (!allocHasScope)
        if (auto scope =
                user->getAttrOfType<StringAttr>(MemoptDialect::kScopeAttrName);
            scope && getIndex(user) < scopeIndex) {
          interval.scope = scope;
          scopeIndex = getIndex(user);
        }
      addMemRefs(user->getResults());
      for (Region &region : user->getRegions())
        if (!region.empty())
          addMemRefs(region.front().getArguments());
      // A buffer yielded by a region flows out of its parent and, for a loop,
      // into the next iteration through the region's arguments: it stays live
      // over the whole parent.
      Operation *parent = user->getParentOp();
      if (user->hasTrait<OpTrait::IsTerminator>() && parent && parent != root) {
        cover(parent, interval.start, interval.end);
        addMemRefs(parent->getResults());
        for (Region &region : parent->getRegions())
          if (!region.empty())
            addMemRefs(region.front().getArguments());
      }
    }
  }
  if (!hasUse) {
    interval.start = deallocLo;
    interval.end = deallocHi;
  }
  LLVM_DEBUG(llvm::dbgs() << "buffer " << id << ": " << aliases.size()
                          << " alias(es), live [" << interval.start << ", "
                          << interval.end << "]\n");
  buffers.push_back(interval);
}

void BufferLiveness::print(llvm::raw_ostream &os) const {
  for (const BufferInterval &buffer : buffers) {
    os << "buffer " << buffer.id << " "
       << memref::AllocOp(buffer.alloc).getType() << " size=";
    if (buffer.sizeBytes)
      os << *buffer.sizeBytes;
    else
      os << "?";
    os << " live=[" << buffer.start << ", " << buffer.end << "]";
    if (buffer.scope)
      os << " scope=\"" << buffer.scope.getValue() << "\"";
    os << "\n";
  }
}
