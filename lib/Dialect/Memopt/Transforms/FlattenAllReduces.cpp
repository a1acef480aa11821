//===- FlattenAllReduces.cpp - one sum over the ranks per run -------------===//
//
// Data parallelism's gradient sums after the micro-batch loop, merged into
// one collective over one flat buffer (FlattenAllReduces.h). Linear in the
// size of the body.
//
//===----------------------------------------------------------------------===//

#include "FlattenAllReduces.h"

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace memopt;

/// Whether `value` is the whole result of an f32 `memref.alloc` of `block`
/// with a static, row-major shape: a buffer that a flat buffer's slot can
/// replace.
static bool isFlattenable(Value value, Block &block) {
  auto alloc = value.getDefiningOp<memref::AllocOp>();
  MemRefType type = alloc ? alloc.getType() : MemRefType();
  return alloc && alloc->getBlock() == &block && type.hasStaticShape() &&
         type.getLayout().isIdentity() && type.getElementType().isF32();
}

/// Whether `op` fills exactly `buffer` with zeros (an accumulator's start).
static bool isZeroFill(Operation *op, Value buffer) {
  auto kernel = dyn_cast<KernelOp>(op);
  if (!kernel || kernel.getKernel() != ConstantOp::getOperationName() ||
      !kernel.getIns().empty() || kernel.getOuts().size() != 1 ||
      kernel.getOuts()[0] != buffer)
    return false;
  auto value = kernel.getOpAttributes().getAs<DenseElementsAttr>("value");
  return value && value.isSplat() && isa<FloatType>(value.getElementType()) &&
         value.getSplatValue<APFloat>().isPosZero();
}

void memopt::flattenAllReduces(Block &body, OpBuilder &builder,
                               SmallVectorImpl<Value> &allocs) {
  auto isInPlaceSum = [](Operation &op) {
    auto kernel = dyn_cast<KernelOp>(op);
    return kernel &&
           kernel.getKernel() == shard::AllReduceOp::getOperationName() &&
           kernel.getIns().size() == 1 && kernel.getOuts().size() == 1 &&
           kernel.getIns()[0] == kernel.getOuts()[0];
  };
  SmallVector<SmallVector<KernelOp>> runs(1);
  for (Operation &op : body) {
    if (isInPlaceSum(op) && isFlattenable(cast<KernelOp>(op).getIns()[0], body))
      runs.back().push_back(cast<KernelOp>(op));
    else if (!runs.back().empty())
      runs.emplace_back();
  }
  MLIRContext *ctx = body.getParentOp()->getContext();
  Type f32 = Float32Type::get(ctx);
  for (SmallVector<KernelOp> &run : runs) {
    // (A buffer summed twice in a row stays as it is.)
    llvm::SmallPtrSet<Value, 8> distinct;
    for (KernelOp kernel : run)
      distinct.insert(kernel.getIns()[0]);
    if (run.size() < 2 || distinct.size() != run.size())
      continue;
    // The slots, and the allocation the flat buffer takes the place of.
    SmallVector<memref::AllocOp> accumulators;
    SmallVector<int64_t> slots;
    int64_t bytes = 0;
    for (KernelOp kernel : run) {
      auto alloc = kernel.getIns()[0].getDefiningOp<memref::AllocOp>();
      bytes = llvm::alignTo(bytes, kDefaultArenaAlignment);
      slots.push_back(bytes);
      bytes += alloc.getType().getNumElements() * 4;
      accumulators.push_back(alloc);
    }
    Operation *first = *llvm::min_element(
        accumulators, [](memref::AllocOp a, memref::AllocOp b) {
          return a->isBeforeInBlock(b);
        });
    Location loc = first->getLoc();
    builder.setInsertionPoint(first);
    Value flat = memref::AllocOp::create(
        builder, loc, MemRefType::get({bytes}, builder.getI8Type()));
    auto viewAt = [&](int64_t offset, MemRefType type) -> Value {
      Value shift = arith::ConstantIndexOp::create(builder, loc, offset);
      return memref::ViewOp::create(builder, loc, type, flat, shift,
                                    ValueRange{});
    };
    auto allType = MemRefType::get({bytes / 4}, f32);
    Value all = viewAt(0, allType);
    auto zeros = DenseElementsAttr::get(
        RankedTensorType::get(allType.getShape(), f32), APFloat(0.0f));
    KernelOp::create(
        builder, loc, ConstantOp::getOperationName(), ValueRange{},
        ValueRange{all},
        builder.getDictionaryAttr(builder.getNamedAttr("value", zeros)));
    for (auto [alloc, offset] : llvm::zip_equal(accumulators, slots)) {
      Value slot = viewAt(offset, alloc.getType());
      for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
        if (isZeroFill(user, alloc))
          user->erase();
      alloc.getResult().replaceAllUsesWith(slot);
      llvm::erase(allocs, alloc.getResult());
    }
    // (Erased only now: the builder inserts the slots before the first.)
    for (memref::AllocOp alloc : accumulators)
      alloc.erase();
    allocs.push_back(flat);

    KernelOp last = run.back();
    builder.setInsertionPointAfter(last);
    auto merged = KernelOp::create(builder, last.getLoc(), last.getKernel(),
                                   ValueRange{all}, ValueRange{all},
                                   last.getOpAttributes());
    merged->setDiscardableAttrs(last->getDiscardableAttrDictionary());
    for (KernelOp kernel : run)
      kernel.erase();
  }
}
