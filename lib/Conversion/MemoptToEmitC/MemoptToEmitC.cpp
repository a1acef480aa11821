//===- MemoptToEmitC.cpp - planned train step to EmitC runtime calls ------===//
//
// Lowers the bufferized, planned `@train_step` (docs/Pipeline.md, sections 2
// and 3) to one EmitC function that `translateToCpp` prints as
// `extern "C" void memopt_train_step(ctx, args, scratch)` (section 4).
//
// The lowering is a single walk over the straight-line body, in the spirit of
// upstream's MemRefToEmitC but with a fixed runtime ABI instead of loops:
//
//  - every buffer becomes a typed C pointer (`float *`, `uint16_t *` for
//    f16/bf16, `int32_t *`, `int64_t *`, `uint8_t *` for i1), so that calls
//    type-check against runtime.h without casts: argument `i` is
//    `(T *)args[i]`, a `memref.alloc` is `(T *)(scratch + offset)`, and a
//    `memref.reinterpret_cast` view (a reshape, docs/Pipeline.md section 2)
//    is its source's pointer, and a `memref.view` slot of a flat byte
//    buffer (data parallelism's gradients) that pointer plus its offset;
//  - every `memopt.kernel` is one `emitc.call_opaque` of its runtime entry,
//    whose scalar arguments (dtypes, enum values, collapsed extents such as
//    the `(outer, dim, inner)` of a softmax, attributes) are call attributes
//    printed inline; shape arrays and constant data become `static const`
//    globals, deduplicated (the call itself: KernelCalls.cpp);
//  - `memref.dealloc` vanishes: the arena is the planner's;
//  - the micro-batch loop of gradient accumulation (`scf.for` from 0 by 1)
//    becomes a C `for` loop, its index arithmetic `size_t` expressions, and a
//    micro-batch view (`memref.reinterpret_cast` at a dynamic offset) its
//    source's pointer plus that offset; a dropout inside the loop draws its
//    mask at element offset `iv * numel`, so every micro-batch gets its own.
//
// Linear in the size of the body plus the size of the constants.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/Passes.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/IR/RuntimeDTypes.h"

#include "Lowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <map>
#include <optional>

#define DEBUG_TYPE "convert-memopt-to-emitc"

namespace memopt {
#define GEN_PASS_DEF_CONVERTMEMOPTTOEMITCPASS
#include "memopt/Conversion/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

/// The name of the generated entry point (docs/Pipeline.md, section 4).
static constexpr llvm::StringLiteral kEntryName = "memopt_train_step";
static constexpr llvm::StringLiteral kEvalEntryName = "memopt_eval_step";
using namespace memopt::lowering;

std::string TrainStepLowering::getGlobalName(StringRef prefix) {
  return (Twine("memopt_") + prefix + "_" + Twine(nextGlobal++)).str();
}

std::string TrainStepLowering::emitPointerArray(Location loc, StringRef type,
                                                StringRef prefix,
                                                ArrayRef<Value> buffers) {
  std::string name = getGlobalName(prefix);
  std::string placeholders;
  for (size_t j = 0; j < buffers.size(); ++j)
    placeholders += j ? ", {}" : "{}";
  emitc::VerbatimOp::create(
      builder, loc,
      builder.getStringAttr(
          (type + name + "[] = {{" + placeholders + "};").str()),
      llvm::map_to_vector(buffers, [&](Value v) { return getPointer(v); }));
  return name;
}

std::string TrainStepLowering::getI64Array(ArrayRef<int64_t> values) {
  if (values.empty())
    return "nullptr";
  std::vector<int64_t> key(values.begin(), values.end());
  auto it = i64Arrays.find(key);
  if (it != i64Arrays.end())
    return it->second;
  std::string name = getGlobalName("i64");
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(globalInsertionPoint);
  Type i64 = builder.getI64Type();
  auto type = emitc::ArrayType::get({static_cast<int64_t>(values.size())}, i64);
  auto init = DenseIntElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(values.size())}, i64),
      values);
  emitc::GlobalOp::create(builder, func.getLoc(), name, type, init,
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true, /*const_specifier=*/true);
  i64Arrays.emplace(std::move(key), name);
  return name;
}

std::string TrainStepLowering::getConstantData(DenseElementsAttr data,
                                               Type elementType) {
  int64_t n = data.getNumElements();
  Type storage = getStorageType(elementType);
  auto flatType = RankedTensorType::get({n}, storage);
  DenseElementsAttr flat;
  if (elementType.isInteger(1)) {
    SmallVector<APInt> bytes = llvm::map_to_vector(
        data.getValues<bool>(), [](bool b) { return APInt(8, b ? 1 : 0); });
    flat = DenseElementsAttr::get(flatType, bytes);
  } else if (storage != elementType) {
    // f16/bf16: the bit patterns, as uint16_t.
    flat =
        data.reshape(RankedTensorType::get({n}, elementType)).bitcast(storage);
  } else {
    flat = data.reshape(flatType);
  }
  std::string &name = constantData[flat];
  if (!name.empty())
    return name;
  name = getGlobalName("const");
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(globalInsertionPoint);
  emitc::GlobalOp::create(builder, func.getLoc(), name,
                          emitc::ArrayType::get({n}, storage), flat,
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true, /*const_specifier=*/true);
  return name;
}

void TrainStepLowering::emitCall(Location loc, StringRef callee,
                                 const RuntimeCall &call) {
  emitc::CallOpaqueOp::create(builder, loc, TypeRange{}, callee, call.operands,
                              builder.getArrayAttr(call.args), ArrayAttr{});
  ++numCalls;
}

LogicalResult TrainStepLowering::lowerAlloc(memref::AllocOp alloc,
                                            int64_t arenaBytes) {
  MemRefType type = alloc.getType();
  auto offset =
      alloc->getAttrOfType<IntegerAttr>(MemoptDialect::kOffsetAttrName);
  if (!offset)
    return alloc.emitOpError() << "has no '" << MemoptDialect::kOffsetAttrName
                               << "' (run --memopt-plan-buffers first)";
  // (An i8 allocation is a byte buffer that memref.view slots subdivide.)
  if (!isAddressable(type.getElementType()) || !type.hasStaticShape() ||
      !type.getLayout().isIdentity())
    return alloc.emitOpError()
           << "allocates " << type << ", which the runtime cannot address";
  int64_t bytes =
      type.getNumElements() * getElementBytes(type.getElementType());
  // A buffer in host memory is in the host arena (optimizer offload).
  Value base = scratch;
  if (getMemoryKind(alloc) == MemoryKind::Host) {
    auto hostArena = func->getAttrOfType<IntegerAttr>(
        MemoptDialect::kHostArenaBytesAttrName);
    if (!hostArena)
      return alloc.emitOpError()
             << "is in host memory, but the function has no '"
             << MemoptDialect::kHostArenaBytesAttrName
             << "' (run --memopt-plan-buffers first)";
    base = hostScratch;
    arenaBytes = hostArena.getInt();
  }
  if (offset.getInt() + bytes > arenaBytes)
    return alloc.emitOpError()
           << "occupies bytes [" << offset.getInt() << ", "
           << offset.getInt() + bytes << ") outside the arena of " << arenaBytes
           << " bytes";
  Location loc = alloc.getLoc();
  Value offsetValue =
      emitc::ConstantOp::create(builder, loc, builder.getI64Type(),
                                builder.getI64IntegerAttr(offset.getInt()));
  Value address =
      emitc::AddOp::create(builder, loc, base.getType(), base, offsetValue);
  auto pointerType =
      emitc::PointerType::get(getStorageType(type.getElementType()));
  pointers[alloc] =
      pointerType == address.getType()
          ? address
          : emitc::CastOp::create(builder, loc, pointerType, address);
  return success();
}

LogicalResult TrainStepLowering::lowerSlot(memref::ViewOp view) {
  // The slots --memopt-bufferize cuts from a flat byte buffer: a dense
  // static buffer of a runtime dtype at a constant byte offset.
  MemRefType type = view.getType();
  std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
  Value pointer = getPointer(view.getSource());
  if (!shift || !type.hasStaticShape() ||
      getDTypeName(type.getElementType()).empty())
    return view.emitOpError() << "is not a static slot of a runtime dtype at "
                                 "a constant byte offset";
  if (!pointer)
    return view.emitOpError() << "views a buffer that is not a planned "
                                 "allocation";
  Location loc = view.getLoc();
  Value offset = emitc::ConstantOp::create(builder, loc, builder.getI64Type(),
                                           builder.getI64IntegerAttr(*shift));
  Value address =
      emitc::AddOp::create(builder, loc, pointer.getType(), pointer, offset);
  pointers[view] = emitc::CastOp::create(
      builder, loc,
      emitc::PointerType::get(getStorageType(type.getElementType())), address);
  return success();
}

LogicalResult TrainStepLowering::lowerView(memref::ReinterpretCastOp view) {
  auto source = dyn_cast<MemRefType>(view.getSource().getType());
  MemRefType type = view.getType();
  // A micro-batch view: a contiguous part of a dense buffer at a dynamic
  // offset (in elements).
  if (source && source.getLayout().isIdentity() && type.hasStaticShape() &&
      view.getOffsets().size() == 1 && view.getSizes().empty() &&
      view.getStrides().empty() &&
      type.getElementType() == source.getElementType() &&
      llvm::equal(view.getStaticStrides(),
                  source.getStridesAndOffset().first)) {
    Value pointer = getPointer(view.getSource());
    Value offset = indices.lookup(view.getOffsets().front());
    if (!pointer || !offset)
      return view.emitOpError() << "views a buffer or an offset that was not "
                                   "lowered";
    Value elements = emitc::CastOp::create(builder, view.getLoc(),
                                           builder.getI64Type(), offset);
    pointers[view] = emitc::AddOp::create(builder, view.getLoc(),
                                          pointer.getType(), pointer, elements);
    return success();
  }
  // Only the views --memopt-bufferize makes for reshapes: all of a dense
  // buffer, row-major, from its first element.
  if (!source || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getElementType() != source.getElementType() ||
      !source.hasStaticShape() ||
      type.getNumElements() != source.getNumElements() ||
      !llvm::equal(view.getStaticOffsets(), ArrayRef<int64_t>{0}))
    return view.emitOpError()
           << "is not a view of a whole dense buffer with the same element "
              "type (only reshapes can be lowered)";
  Value pointer = getPointer(view.getSource());
  if (!pointer)
    return view.emitOpError()
           << "views a buffer that is not a function argument, a planned "
              "allocation or a view of one";
  pointers[view] = pointer;
  return success();
}

LogicalResult TrainStepLowering::lowerBody(Block &body) {
  auto arenaAttr =
      func->getAttrOfType<IntegerAttr>(MemoptDialect::kArenaBytesAttrName);
  if (!arenaAttr)
    return func.emitOpError()
           << "has no '" << MemoptDialect::kArenaBytesAttrName
           << "' (run --memopt-plan-buffers first)";

  // Argument i is args[i], seen through the pointer type of its elements.
  Location loc = func.getLoc();
  auto constPointer = emitc::OpaqueType::get(ctx, "void *const");
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
        !isAddressable(type.getElementType()))
      return func.emitOpError()
             << "argument #" << arg.getArgNumber() << " has type "
             << arg.getType()
             << ", expected a dense static memref of a runtime dtype";
    Value index =
        emitc::ConstantOp::create(builder, loc, builder.getIndexType(),
                                  builder.getIndexAttr(arg.getArgNumber()));
    Value slot = emitc::SubscriptOp::create(
        builder, loc, emitc::LValueType::get(constPointer), args,
        ValueRange{index});
    Value raw = emitc::LoadOp::create(builder, loc, constPointer, slot);
    auto pointerType =
        emitc::PointerType::get(getStorageType(type.getElementType()));
    pointers[arg] = emitc::CastOp::create(builder, loc, pointerType, raw);
  }

  return lowerOps(body, arenaAttr.getInt());
}

LogicalResult TrainStepLowering::lowerOps(Block &block, int64_t arenaBytes) {
  Type indexType = builder.getIndexType();
  for (Operation &op : block) {
    LogicalResult result =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](memref::AllocOp alloc) {
              return lowerAlloc(alloc, arenaBytes);
            })
            .Case([&](arith::ConstantIndexOp constant) {
              indices[constant] = emitc::ConstantOp::create(
                  builder, constant.getLoc(), indexType,
                  builder.getIndexAttr(constant.value()));
              return success();
            })
            .Case<arith::MulIOp, arith::AddIOp>(
                [&](auto arith) -> LogicalResult {
                  Value lhs = indices.lookup(arith.getLhs());
                  Value rhs = indices.lookup(arith.getRhs());
                  if (!lhs || !rhs)
                    return arith.emitOpError() << "has operands that are not "
                                                  "loop index arithmetic";
                  if (isa<arith::MulIOp>(arith.getOperation()))
                    indices[arith] = emitc::MulOp::create(
                        builder, arith.getLoc(), indexType, lhs, rhs);
                  else
                    indices[arith] = emitc::AddOp::create(
                        builder, arith.getLoc(), indexType, lhs, rhs);
                  return success();
                })
            .Case([&](scf::ForOp loop) -> LogicalResult {
              Value lb = indices.lookup(loop.getLowerBound());
              Value ub = indices.lookup(loop.getUpperBound());
              Value step = indices.lookup(loop.getStep());
              if (!lb || !ub || !step || loop.getNumResults() != 0 ||
                  loop.getBody()->getOperations().size() < 1)
                return loop.emitOpError()
                       << "must have constant bounds and no results to be "
                          "lowered (run --memopt-bufferize first)";
              auto forOp =
                  emitc::ForOp::create(builder, loop.getLoc(), lb, ub, step);
              OpBuilder::InsertionGuard guard(builder);
              builder.setInsertionPointToStart(forOp.getBody());
              Value outer = loopIndex;
              loopIndex = forOp.getInductionVar();
              indices[loop.getInductionVar()] = loopIndex;
              if (loop->hasAttr(MemoptDialect::kDataParallelAttrName)) {
                // Rank r's micro-batch i is micro-batch r * K + i.
                Value rank = emitc::CallOpaqueOp::create(
                                 builder, loop.getLoc(), TypeRange{indexType},
                                 "memopt_rank", ValueRange{context})
                                 .getResult(0);
                loopIndex = emitc::AddOp::create(
                    builder, loop.getLoc(), indexType,
                    emitc::MulOp::create(builder, loop.getLoc(), indexType,
                                         rank, ub),
                    loopIndex);
              }
              LogicalResult lowered = lowerOps(*loop.getBody(), arenaBytes);
              loopIndex = outer;
              return lowered;
            })
            .Case([&](scf::YieldOp yield) -> LogicalResult {
              if (yield.getNumOperands() != 0)
                return yield.emitOpError() << "yields values";
              return success();
            })
            .Case([&](memref::DeallocOp) { return success(); })
            .Case(
                [&](memref::ReinterpretCastOp view) { return lowerView(view); })
            .Case([&](memref::ViewOp view) { return lowerSlot(view); })
            .Case([&](KernelOp kernel) {
              if (emitScopes) {
                auto scopeAttr = kernel->getAttrOfType<StringAttr>(
                    MemoptDialect::kScopeAttrName);
                std::string scope = scopeAttr ? scopeAttr.str() : "";
                if (currentScope != scope) {
                  // A C string literal; scopes are module paths, but escape
                  // anything that would end or break the literal.
                  std::string literal = "\"";
                  for (char c : scope) {
                    if (c == '"' || c == '\\')
                      literal += '\\';
                    if (static_cast<unsigned char>(c) < 0x20)
                      continue;
                    literal += c;
                  }
                  literal += '"';
                  RuntimeCall call(ctx);
                  call.value(context).verbatim(literal);
                  emitCall(kernel.getLoc(), "memopt_set_scope", call);
                  currentScope = scope;
                }
              }
              return lowerKernel(kernel);
            })
            .Case([&](TransferWaitOp wait) {
              RuntimeCall call(ctx);
              call.value(context).i64(wait.getSlot()).i32(wait.getHost());
              emitCall(wait.getLoc(), "memopt_transfer_wait", call);
              return success();
            })
            .Case([&](func::ReturnOp ret) -> LogicalResult {
              if (ret.getNumOperands() != 0)
                return ret.emitOpError()
                       << "returns values; a bufferized train step returns "
                          "nothing";
              emitc::ReturnOp::create(builder, ret.getLoc(), Value());
              return success();
            })
            .Default([&](Operation *other) -> LogicalResult {
              return other->emitOpError()
                     << "cannot be lowered to runtime calls (expected "
                     << KernelOp::getOperationName() << ", "
                     << TransferWaitOp::getOperationName()
                     << ", memref.alloc, memref.dealloc, "
                        "memref.reinterpret_cast, memref.view or the "
                        "micro-batch loop)";
            });
    if (failed(result))
      return failure();
  }
  return success();
}

LogicalResult TrainStepLowering::run() {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitOpError()
           << "must have a body of one block to be lowered to C++";
  if (!func.getResultTypes().empty())
    return func.emitOpError() << "returns values; run --memopt-bufferize first";

  Location loc = func.getLoc();
  builder.setInsertionPointToStart(module.getBody());
  emitc::IncludeOp::create(builder, loc, "cmath", /*is_standard_include=*/true);
  emitc::IncludeOp::create(builder, loc, "cstddef",
                           /*is_standard_include=*/true);
  emitc::IncludeOp::create(builder, loc, "cstdint",
                           /*is_standard_include=*/true);
  emitc::IncludeOp::create(builder, loc, "memopt/runtime.h");

  builder.setInsertionPoint(func);
  Type contextType =
      emitc::PointerType::get(emitc::OpaqueType::get(ctx, "memopt_context"));
  Type argsType =
      emitc::PointerType::get(emitc::OpaqueType::get(ctx, "void *const"));
  Type scratchType =
      emitc::PointerType::get(IntegerType::get(ctx, 8, IntegerType::Unsigned));
  auto entry = emitc::FuncOp::create(
      builder, loc,
      func->hasAttr(MemoptDialect::kEvalStepAttrName) ? kEvalEntryName
                                                      : kEntryName,
      builder.getFunctionType({contextType, argsType, scratchType, scratchType},
                              {}));
  entry.setSpecifiersAttr(builder.getStrArrayAttr({"extern \"C\""}));
  globalInsertionPoint = entry;
  Block *block = entry.addEntryBlock();
  context = block->getArgument(0);
  args = block->getArgument(1);
  scratch = block->getArgument(2);
  hostScratch = block->getArgument(3);

  builder.setInsertionPointToStart(block);
  if (failed(lowerBody(func.getBody().front())))
    return failure();
  func.erase();
  return success();
}

// Pass
//===----------------------------------------------------------------------===//

namespace {
struct ConvertMemoptToEmitCPass
    : public memopt::impl::ConvertMemoptToEmitCPassBase<
          ConvertMemoptToEmitCPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp step;
    SmallVector<Operation *> grids;
    for (Operation &op : module.getBody()->getOperations()) {
      auto func = dyn_cast<func::FuncOp>(op);
      if (func && isStepFunction(func) && !step) {
        step = func;
        continue;
      }
      if (isa<emitc::EmitCDialect>(op.getDialect()))
        continue;
      // Data parallelism's grid of ranks: the runtime knows the ranks.
      if (isa<shard::GridOp>(op)) {
        grids.push_back(&op);
        continue;
      }
      op.emitOpError() << "cannot be lowered to C++: the module may hold only "
                          "the function marked 'memopt.train_step'";
      return signalPassFailure();
    }
    if (!step) {
      module.emitError() << "no function marked 'memopt.train_step' to lower";
      return signalPassFailure();
    }
    TrainStepLowering lowering(module, step, emitScopes);
    if (failed(lowering.run()))
      return signalPassFailure();
    for (Operation *grid : grids)
      grid->erase();
    numCalls += lowering.getNumCalls();
    LLVM_DEBUG(llvm::dbgs()
               << "emitted " << lowering.getNumCalls() << " runtime calls\n");
  }
};
} // namespace
