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
//    globals, deduplicated. KernelLowering builds one call: the checks every
//    entry shares, then one method per family of kernels (elementwise,
//    copies, layout, normalization, linear, collectives and dropout, losses,
//    attention, optimizer);
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

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

//===----------------------------------------------------------------------===//
// Types and sizes
//===----------------------------------------------------------------------===//

/// The `memopt_dtype` enumerator of an element type, or "" if none: the
/// verifiers' mapping (RuntimeDTypes.h), spelled as runtime.h does.
static StringRef getDTypeName(Type type) {
  std::optional<memopt_dtype> dtype = getRuntimeDType(type);
  return dtype ? runtime::dtypeEnumName(*dtype) : "";
}

/// Whether the runtime addresses buffers of `type`: a runtime dtype, or i8
/// (bytes: 8-bit optimizer state, kernel scratch).
static bool isAddressable(Type type) {
  return !getDTypeName(type).empty() || type.isInteger(8);
}

/// The C element type a buffer of `type` is addressed through.
static Type getStorageType(Type type) {
  MLIRContext *ctx = type.getContext();
  if (type.isF16() || type.isBF16())
    return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  if (type.isInteger(1))
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  return type;
}

/// Bytes of one element as stored by the runtime (i1: one byte).
static int64_t getElementBytes(Type type) {
  return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8;
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

/// `shape` collapsed to (outer, shape[dim], inner).
static std::array<int64_t, 3> collapseAround(ArrayRef<int64_t> shape,
                                             int64_t dim) {
  return {product(shape.take_front(dim)), shape[dim],
          product(shape.drop_front(dim + 1))};
}

//===----------------------------------------------------------------------===//
// Lowering
//===----------------------------------------------------------------------===//

namespace {

/// The argument list of one runtime call under construction: SSA operands
/// are referenced by index, everything else is an attribute printed inline.
struct RuntimeCall {
  explicit RuntimeCall(MLIRContext *ctx) : ctx(ctx) {}

  RuntimeCall &value(Value v) {
    args.push_back(IntegerAttr::get(IndexType::get(ctx), operands.size()));
    operands.push_back(v);
    return *this;
  }
  RuntimeCall &verbatim(StringRef text) {
    args.push_back(emitc::OpaqueAttr::get(ctx, text));
    return *this;
  }
  RuntimeCall &i64(int64_t v) {
    args.push_back(IntegerAttr::get(IntegerType::get(ctx, 64), v));
    return *this;
  }
  RuntimeCall &i32(int32_t v) {
    args.push_back(IntegerAttr::get(IntegerType::get(ctx, 32), v));
    return *this;
  }
  RuntimeCall &f64(double v) {
    args.push_back(FloatAttr::get(Float64Type::get(ctx), v));
    return *this;
  }

  MLIRContext *ctx;
  SmallVector<Value> operands;
  SmallVector<Attribute> args;
};

/// Lowers one `memopt.train_step` function into an `emitc.func`.
class TrainStepLowering {
public:
  TrainStepLowering(ModuleOp module, func::FuncOp func, bool emitScopes = false)
      : module(module), func(func), ctx(module.getContext()), builder(ctx),
        emitScopes(emitScopes) {}

  /// Builds the includes, globals and the entry point before `func`, then
  /// erases `func`. On failure, reports the error; the module may then hold a
  /// partial lowering.
  LogicalResult run();

  /// The number of runtime calls emitted.
  unsigned getNumCalls() const { return numCalls; }

private:
  friend class KernelLowering;

  LogicalResult lowerBody(Block &body);
  LogicalResult lowerOps(Block &block, int64_t arenaBytes);
  LogicalResult lowerAlloc(memref::AllocOp alloc, int64_t arenaBytes);
  LogicalResult lowerView(memref::ReinterpretCastOp view);
  LogicalResult lowerSlot(memref::ViewOp view);
  LogicalResult lowerKernel(KernelOp kernel);

  /// Emits `callee` with the arguments of `call`.
  void emitCall(Location loc, StringRef callee, const RuntimeCall &call);

  /// A `static const` global holding `values` (nullptr when empty).
  std::string getI64Array(ArrayRef<int64_t> values);
  /// A local array `<type>name[] = {...}` (type "void *", ...) of the
  /// pointers of `buffers`, emitted at the builder's point; returns its name.
  std::string emitPointerArray(Location loc, StringRef type, StringRef prefix,
                               ArrayRef<Value> buffers);
  /// A global holding the elements of a non-splat constant.
  std::string getConstantData(DenseElementsAttr data, Type elementType);
  /// A fresh global name with `prefix`.
  std::string getGlobalName(StringRef prefix);

  Value getPointer(Value memref) { return pointers.lookup(memref); }

  ModuleOp module;
  func::FuncOp func;
  MLIRContext *ctx;
  OpBuilder builder;
  /// Where globals go: before the entry point.
  Operation *globalInsertionPoint = nullptr;
  Value context, args, scratch;
  DenseMap<Value, Value> pointers;
  /// --emit-scopes: the scope of the last memopt_set_scope call, if any.
  bool emitScopes = false;
  std::optional<std::string> currentScope;
  /// EmitC values of the index arithmetic, and the number of the innermost
  /// loop's micro-batch in the full batch (which dropout's masks follow):
  /// its index, or rank * K + index with data parallelism.
  DenseMap<Value, Value> indices;
  Value loopIndex;
  std::map<std::vector<int64_t>, std::string> i64Arrays;
  unsigned nextGlobal = 0;
  unsigned numCalls = 0;
};
} // namespace

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
  std::string name = getGlobalName("const");
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
  if (offset.getInt() + bytes > arenaBytes)
    return alloc.emitOpError()
           << "occupies bytes [" << offset.getInt() << ", "
           << offset.getInt() + bytes << ") outside the arena of " << arenaBytes
           << " bytes";
  Location loc = alloc.getLoc();
  Value offsetValue =
      emitc::ConstantOp::create(builder, loc, builder.getI64Type(),
                                builder.getI64IntegerAttr(offset.getInt()));
  Value address = emitc::AddOp::create(builder, loc, scratch.getType(), scratch,
                                       offsetValue);
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
            .Case<arith::MulIOp, arith::AddIOp>([&](auto arith)
                                                    -> LogicalResult {
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
              auto forOp = emitc::ForOp::create(builder, loop.getLoc(), lb,
                                                ub, step);
              OpBuilder::InsertionGuard guard(builder);
              builder.setInsertionPointToStart(forOp.getBody());
              Value outer = loopIndex;
              loopIndex = forOp.getInductionVar();
              indices[loop.getInductionVar()] = loopIndex;
              if (loop->hasAttr("memopt.data_parallel")) {
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
                        "memopt.kernel, memref.alloc, memref.dealloc, "
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
      builder.getFunctionType({contextType, argsType, scratchType}, {}));
  entry.setSpecifiersAttr(builder.getStrArrayAttr({"extern \"C\""}));
  globalInsertionPoint = entry;
  Block *block = entry.addEntryBlock();
  context = block->getArgument(0);
  args = block->getArgument(1);
  scratch = block->getArgument(2);

  builder.setInsertionPointToStart(block);
  if (failed(lowerBody(func.getBody().front())))
    return failure();
  func.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

namespace {

/// The runtime call of one `memopt.kernel` under construction: its
/// operands, attributes and the checks every entry shares. Each family of
/// kernels adds its entry's arguments in a method of its own, which returns
/// nullopt for a kernel that is not one of the family's.
class KernelLowering {
public:
  KernelLowering(TrainStepLowering &step, KernelOp kernel);

  /// Emits the kernel's runtime call, or reports why it cannot.
  LogicalResult lower();

private:
  std::optional<LogicalResult> lowerElementwise();
  std::optional<LogicalResult> lowerCopies();
  std::optional<LogicalResult> lowerLayout();
  std::optional<LogicalResult> lowerNormalization();
  std::optional<LogicalResult> lowerLinear();
  std::optional<LogicalResult> lowerCollectivesAndDropout();
  std::optional<LogicalResult> lowerLosses();
  std::optional<LogicalResult> lowerAttention();
  std::optional<LogicalResult> lowerOptimizer();

  /// Reports that the kernel cannot be lowered, and why.
  LogicalResult fail(const Twine &why);
  /// Checks the operand counts; the optional `skip_if` operand is the extra
  /// input allowed by `maxIns`.
  LogicalResult expectCounts(size_t numIns, size_t numOuts, size_t maxIns = 0);
  /// The elementwise families' one shape:
  /// memopt_<family>(ctx, kind, dtype, ins..., [value,] out, n).
  LogicalResult elementwise(StringRef kind, unsigned numIns, bool withValue);

  static MemRefType typeOf(Value v) { return cast<MemRefType>(v.getType()); }
  static ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
  static int64_t numel(Value v) { return typeOf(v).getNumElements(); }
  static StringRef dtype(Value v) {
    return getDTypeName(typeOf(v).getElementType());
  }
  /// Dtype argument `slot` of the runtime entry: the dtype of the operand or
  /// result that the op's binding names (RuntimeDTypes.h), the value whose
  /// element type memopt.kernel's verifier checked against the entry's rule.
  StringRef dtypeArg(unsigned slot);

  // Attributes. A missing required one is an error (reported once the call
  // is built); defaults are the ODS defaults of the tensor op, which the
  // kernel omits like the op does.
  double f64Attr(StringRef attrName);
  int64_t i64Attr(StringRef attrName,
                  std::optional<int64_t> def = std::nullopt);
  SmallVector<int64_t> arrayAttr(StringRef attrName,
                                 ArrayRef<int64_t> def = {});
  /// An attribute of the tensor op's Memopt_Pair kind.
  SmallVector<int64_t> pairAttr(StringRef attrName, ArrayRef<int64_t> def = {});
  /// An attribute with one entry per dimension of a rank-`rank` tensor.
  SmallVector<int64_t> perDimAttr(StringRef attrName, size_t rank);
  StringRef reduction();
  bool geluTanh();
  void setMissing(const Twine &attrName) {
    missing = true;
    missingName = attrName.str();
  }

  /// Appends the current micro-batch's first element in the full batch's
  /// numbering, i * `elements` in the micro-batch loop, 0 outside it.
  void microBatchOffset(int64_t elements);
  /// Appends `v`'s pointer (nullptr for none) to the call.
  void ptr(Value v) { call.value(step.getPointer(v)); }
  void optionalPtr(std::optional<Value> v) {
    if (v)
      ptr(*v);
    else
      call.verbatim("nullptr");
  }

  TrainStepLowering &step;
  KernelOp kernel;
  StringRef name;
  DictionaryAttr attrs;
  SmallVector<Value> ins, outs;
  Location loc;
  const RuntimeDTypeBinding *binding;
  bool usesBinding = false, unbound = false;
  bool missing = false;
  std::string missingName;
  RuntimeCall call;
  StringRef callee;
};

} // namespace

KernelLowering::KernelLowering(TrainStepLowering &step, KernelOp kernel)
    : step(step), kernel(kernel), name(kernel.getKernel()),
      attrs(kernel.getOpAttributes()), ins(kernel.getIns()),
      outs(kernel.getOuts()), loc(kernel.getLoc()),
      binding(lookupRuntimeDTypeBinding(name)), call(step.ctx) {}

LogicalResult KernelLowering::fail(const Twine &why) {
  return kernel.emitOpError() << "'" << name << "' cannot be lowered: " << why;
}

LogicalResult KernelLowering::expectCounts(size_t numIns, size_t numOuts,
                                           size_t maxIns) {
  maxIns = std::max(maxIns, numIns);
  if (ins.size() < numIns || ins.size() > maxIns || outs.size() != numOuts)
    return fail("expected " + Twine(numIns) +
                (maxIns > numIns ? " or " + Twine(maxIns) : Twine()) +
                " inputs and " + Twine(numOuts) + " outputs, got " +
                Twine(ins.size()) + " and " + Twine(outs.size()));
  return success();
}

LogicalResult KernelLowering::elementwise(StringRef kind, unsigned numIns,
                                          bool withValue) {
  if (failed(expectCounts(numIns, 1)))
    return failure();
  call.verbatim(kind).verbatim(dtypeArg(0));
  for (unsigned i = 0; i < numIns; ++i)
    ptr(ins[i]);
  if (withValue)
    call.f64(f64Attr("value"));
  ptr(outs[0]);
  call.i64(numel(outs[0]));
  return success();
}

void KernelLowering::microBatchOffset(int64_t elements) {
  if (!step.loopIndex) {
    call.i64(0);
    return;
  }
  Type indexType = step.builder.getIndexType();
  Value size = emitc::ConstantOp::create(step.builder, loc, indexType,
                                         step.builder.getIndexAttr(elements));
  call.value(emitc::MulOp::create(step.builder, loc, indexType,
                                  step.loopIndex, size));
}

StringRef KernelLowering::dtypeArg(unsigned slot) {
  usesBinding = true;
  SmallVector<Value> values;
  if (binding)
    values = binding->getValues(slot, ins, outs);
  if (values.empty()) {
    unbound = true;
    return "";
  }
  return dtype(values.front());
}

double KernelLowering::f64Attr(StringRef attrName) {
  if (auto attr = attrs.getAs<FloatAttr>(attrName))
    return attr.getValueAsDouble();
  setMissing(attrName);
  return 0.0;
}

int64_t KernelLowering::i64Attr(StringRef attrName,
                                std::optional<int64_t> def) {
  if (auto attr = attrs.getAs<IntegerAttr>(attrName))
    return attr.getInt();
  if (def)
    return *def;
  setMissing(attrName);
  return 0;
}

SmallVector<int64_t> KernelLowering::arrayAttr(StringRef attrName,
                                               ArrayRef<int64_t> def) {
  if (auto attr = attrs.getAs<DenseI64ArrayAttr>(attrName))
    return SmallVector<int64_t>(attr.asArrayRef());
  if (!def.empty())
    return SmallVector<int64_t>(def);
  setMissing(attrName);
  return SmallVector<int64_t>(2, 0);
}

SmallVector<int64_t> KernelLowering::pairAttr(StringRef attrName,
                                              ArrayRef<int64_t> def) {
  SmallVector<int64_t> pair = arrayAttr(attrName, def);
  if (pair.size() != 2) {
    setMissing(attrName + "' pair");
    pair.assign(2, 0);
  }
  return pair;
}

SmallVector<int64_t> KernelLowering::perDimAttr(StringRef attrName,
                                                size_t rank) {
  SmallVector<int64_t> values = arrayAttr(attrName);
  if (values.size() != rank && !missing)
    setMissing(attrName + "' of " + Twine(rank) + " entries");
  return values;
}

StringRef KernelLowering::reduction() {
  auto attr = attrs.getAs<LossReductionAttr>("reduction");
  return attr && attr.getValue() == LossReduction::Sum
             ? "MEMOPT_REDUCTION_SUM"
             : "MEMOPT_REDUCTION_MEAN";
}

bool KernelLowering::geluTanh() {
  auto attr = attrs.getAs<GeluApproximationAttr>("approximate");
  return attr && attr.getValue() == GeluApproximation::Tanh;
}

LogicalResult TrainStepLowering::lowerKernel(KernelOp kernel) {
  return KernelLowering(*this, kernel).lower();
}

LogicalResult KernelLowering::lower() {
  for (auto [index, v] : llvm::enumerate(kernel->getOperands()))
    if (!step.getPointer(v))
      return fail("operand #" + Twine(index) +
                  " is not a function argument, a planned allocation or a "
                  "view of one");
  call.value(step.context);
  std::optional<LogicalResult> built;
  for (auto family :
       {&KernelLowering::lowerElementwise, &KernelLowering::lowerCopies,
        &KernelLowering::lowerLayout, &KernelLowering::lowerNormalization,
        &KernelLowering::lowerLinear,
        &KernelLowering::lowerCollectivesAndDropout,
        &KernelLowering::lowerLosses, &KernelLowering::lowerAttention,
        &KernelLowering::lowerOptimizer}) {
    built = (this->*family)();
    if (built)
      break;
  }
  if (!built)
    return fail("no runtime entry computes it");
  if (failed(*built))
    return failure();

  if (missing)
    return fail("it has no valid '" + missingName + "' attribute");
  // The entry is the binding's (RuntimeDTypes.cpp) unless the family chose
  // one the table does not list (copies, the step counter, loss scaling).
  if (callee.empty() && binding)
    callee = binding->entry;
  if (callee.empty())
    return fail("no runtime entry computes it");
  if (usesBinding && (unbound || !binding || binding->entry != callee))
    return fail("its dtype arguments are not bound to " + callee +
                "'s (lib/Dialect/Memopt/IR/RuntimeDTypes.cpp)");
  for (Value v : llvm::concat<Value>(ins, outs))
    if (!isAddressable(typeOf(v).getElementType()))
      return fail("the runtime has no dtype for its operand types");
  step.emitCall(loc, callee, call);
  return success();
}

/// Elementwise kernels (unary, binary, scalar, activation gradients) and
/// reductions.
std::optional<LogicalResult> KernelLowering::lowerElementwise() {
  // The family is the binding's entry, the op its op code; gelu's tanh
  // approximation is the code's _TANH form.
  StringRef entry = binding ? binding->entry : StringRef();
  std::string kind = binding ? binding->opCode.str() : std::string();
  if ((name == "memopt.gelu" || name == "memopt.gelu_grad") && geluTanh())
    kind += "_TANH";
  if (entry == "memopt_unary" || entry == "memopt_scalar") {
    if (failed(elementwise(kind, 1, entry == "memopt_scalar")))
      return failure();
  } else if (entry == "memopt_binary" || entry == "memopt_activation_grad") {
    if (failed(elementwise(kind, 2, false)))
      return failure();
  } else if (entry == "memopt_compare") {
    auto predicate = attrs.getAs<ComparePredicateAttr>("predicate");
    if (!predicate)
      return fail("it has no comparison predicate");
    std::string code =
        ("MEMOPT_COMPARE_" + stringifyComparePredicate(predicate.getValue()))
            .str();
    if (failed(elementwise(StringRef(code).upper(), 2, false)))
      return failure();
  } else if (entry == "memopt_reduce") {
    if (failed(expectCounts(1, 1)))
      return failure();
    // Collapse to [outer, reduced, inner]: the reduced dimensions of extent
    // above 1 must form one run (extent-1 dimensions fit anywhere).
    ArrayRef<int64_t> shape = shapeOf(ins[0]);
    SmallVector<int64_t> dims = arrayAttr("dims");
    int64_t lo = shape.size(), hi = -1;
    for (int64_t d : dims)
      if (d >= 0 && d < static_cast<int64_t>(shape.size()) && shape[d] != 1) {
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
    std::array<int64_t, 3> extents = {numel(ins[0]), 1, 1};
    if (hi >= 0) {
      for (int64_t d = lo; d <= hi; ++d)
        if (shape[d] != 1 && !llvm::is_contained(dims, d))
          return fail("reduced dimensions are not contiguous");
      extents = {product(shape.take_front(lo)),
                 product(shape.slice(lo, hi - lo + 1)),
                 product(shape.drop_front(hi + 1))};
    }
    call.verbatim(kind).verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(outs[0]);
    call.i64(extents[0]).i64(extents[1]).i64(extents[2]);
  } else {
    return std::nullopt;
  }
  return success();
}

/// Constants, copies, casts and selections.
std::optional<LogicalResult> KernelLowering::lowerCopies() {
  if (name == "memopt.constant") {
    if (failed(expectCounts(0, 1)))
      return failure();
    auto value = attrs.getAs<DenseElementsAttr>("value");
    if (!value)
      return fail("its 'value' is not a dense elements attribute");
    Type elementType = typeOf(outs[0]).getElementType();
    if (value.getNumElements() != numel(outs[0]) ||
        value.getElementType() != elementType)
      return fail("its 'value' does not match the output buffer");
    if (value.isSplat()) {
      double fill;
      if (elementType.isInteger(1))
        fill = value.getSplatValue<bool>() ? 1.0 : 0.0;
      else if (isa<IntegerType>(elementType))
        fill = static_cast<double>(value.getSplatValue<APInt>().getSExtValue());
      else
        fill = value.getSplatValue<APFloat>().convertToDouble();
      call.verbatim(dtypeArg(0));
      ptr(outs[0]);
      call.i64(numel(outs[0])).f64(fill);
    } else {
      std::string data = step.getConstantData(value, elementType);
      callee = "memopt_copy_from_host";
      ptr(outs[0]);
      call.verbatim(data).i64(numel(outs[0]) * getElementBytes(elementType));
    }
  } else if (name == "memopt.reshape") {
    // Also the copies --memopt-bufferize inserts (equal in and out types).
    if (failed(expectCounts(1, 1)))
      return failure();
    callee = "memopt_copy";
    ptr(outs[0]);
    ptr(ins[0]);
    call.i64(numel(outs[0]) *
             getElementBytes(typeOf(outs[0]).getElementType()));
  } else if (name == "memopt.cast") {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (name == "memopt.where") {
    if (failed(expectCounts(3, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(ins[2]);
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (name == "memopt.masked_fill") {
    if (failed(expectCounts(2, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    call.f64(f64Attr("value"));
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (name == "memopt.scale_by") {
    if (failed(expectCounts(2, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (name == "memopt.clamp" || name == "memopt.clamp_grad") {
    // A missing bound is an infinite one; `inclusive` defaults to true.
    bool isGrad = name == "memopt.clamp_grad";
    if (failed(expectCounts(isGrad ? 2 : 1, 1)))
      return failure();
    auto bound = [&](StringRef attrName, double missingValue) {
      auto attr = attrs.getAs<FloatAttr>(attrName);
      return attr ? attr.getValueAsDouble() : missingValue;
    };
    call.verbatim(dtypeArg(0));
    for (Value in : ins)
      ptr(in);
    call.f64(bound("min", -INFINITY)).f64(bound("max", INFINITY));
    if (isGrad) {
      auto inclusive = attrs.getAs<BoolAttr>("inclusive");
      call.i32(!inclusive || inclusive.getValue() ? 1 : 0);
    }
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else {
    return std::nullopt;
  }
  return success();
}

/// Broadcasts, transposes, slices and concatenations.
std::optional<LogicalResult> KernelLowering::lowerLayout() {
  if (name == "memopt.broadcast") {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.i64(shapeOf(ins[0]).size())
        .verbatim(step.getI64Array(shapeOf(ins[0])))
        .verbatim(step.getI64Array(perDimAttr("dims", shapeOf(ins[0]).size())));
    ptr(outs[0]);
    call.i64(shapeOf(outs[0]).size())
        .verbatim(step.getI64Array(shapeOf(outs[0])));
  } else if (name == "memopt.transpose") {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.i64(shapeOf(ins[0]).size())
        .verbatim(step.getI64Array(shapeOf(ins[0])))
        .verbatim(step.getI64Array(
            perDimAttr("permutation", shapeOf(ins[0]).size())));
    ptr(outs[0]);
  } else if (name == "memopt.slice" || name == "memopt.slice_grad") {
    if (failed(expectCounts(1, 1)))
      return failure();
    bool isGrad = name == "memopt.slice_grad";
    // The shape argument is the sliced tensor's: the input of a slice, the
    // result of its gradient.
    ArrayRef<int64_t> fullShape = shapeOf(isGrad ? outs[0] : ins[0]);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.i64(fullShape.size())
        .verbatim(step.getI64Array(fullShape))
        .verbatim(step.getI64Array(perDimAttr("starts", fullShape.size())))
        .verbatim(step.getI64Array(perDimAttr("limits", fullShape.size())))
        .verbatim(step.getI64Array(perDimAttr("strides", fullShape.size())));
    ptr(outs[0]);
  } else if (name == "memopt.concat") {
    if (ins.empty() || failed(expectCounts(ins.size(), 1)))
      return ins.empty() ? fail("it has no inputs") : failure();
    int64_t dim = i64Attr("dim");
    ArrayRef<int64_t> outShape = shapeOf(outs[0]);
    if (dim < 0 || dim >= static_cast<int64_t>(outShape.size()))
      return fail("'dim' is out of range");
    SmallVector<int64_t> sizes =
        llvm::map_to_vector(ins, [&](Value v) { return shapeOf(v)[dim]; });
    // A local array of the input pointers.
    std::string inputs = step.getGlobalName("inputs");
    // `{{` prints one brace; `{}` is an operand.
    std::string format = "const void *" + inputs + "[] = {{";
    for (size_t j = 0; j < ins.size(); ++j)
      format += j ? ", {}" : "{}";
    format += "};";
    emitc::VerbatimOp::create(
        step.builder, loc, step.builder.getStringAttr(format),
        llvm::map_to_vector(ins, [&](Value v) { return step.getPointer(v); }));
    call.verbatim(dtypeArg(0)).i64(ins.size()).verbatim(inputs);
    call.verbatim(step.getI64Array(sizes));
    ptr(outs[0]);
    call.i64(product(outShape.take_front(dim)))
        .i64(product(outShape.drop_front(dim + 1)));
  } else {
    return std::nullopt;
  }
  return success();
}

/// Softmaxes and the norms, with their gradients.
std::optional<LogicalResult> KernelLowering::lowerNormalization() {
  if (name == "memopt.softmax" || name == "memopt.log_softmax") {
    if (failed(expectCounts(1, 1)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(ins[0]);
    int64_t dim = i64Attr("dim");
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
      return fail("'dim' is out of range");
    auto extents = collapseAround(shape, dim);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(extents[0]).i64(extents[1]).i64(extents[2]);
  } else if (name == "memopt.softmax_grad" ||
             name == "memopt.log_softmax_grad") {
    if (failed(expectCounts(2, 1)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(ins[0]);
    int64_t dim = i64Attr("dim");
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
      return fail("'dim' is out of range");
    auto extents = collapseAround(shape, dim);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(extents[0]).i64(extents[1]).i64(extents[2]);
  } else if (name == "memopt.layer_norm" || name == "memopt.rms_norm") {
    bool isLayer = name == "memopt.layer_norm";
    if (failed(expectCounts(isLayer ? 3 : 2, isLayer ? 3 : 2)))
      return failure();
    int64_t cols = numel(ins[1]);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(ins[1]);
    if (isLayer)
      ptr(ins[2]);
    for (Value out : outs)
      ptr(out);
    call.i64(numel(ins[0]) / cols).i64(cols).f64(f64Attr("epsilon"));
  } else if (name == "memopt.layer_norm_grad" ||
             name == "memopt.rms_norm_grad") {
    bool isLayer = name == "memopt.layer_norm_grad";
    if (failed(expectCounts(isLayer ? 5 : 4, isLayer ? 3 : 2)))
      return failure();
    int64_t cols = numel(ins[2]);
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    call.verbatim(dtypeArg(1));
    for (Value in : ArrayRef<Value>(ins).drop_front(2))
      ptr(in);
    for (Value out : outs)
      ptr(out);
    call.i64(numel(ins[1]) / cols).i64(cols);
  } else if (name == "memopt.batch_norm" || name == "memopt.batch_norm_grad") {
    bool isGrad = name == "memopt.batch_norm_grad";
    if (failed(isGrad ? expectCounts(5, 3) : expectCounts(5, 5)))
      return failure();
    Value input = isGrad ? ins[1] : ins[0];
    ArrayRef<int64_t> shape = shapeOf(input);
    if (shape.size() < 2)
      return fail("the input has rank below 2");
    call.verbatim(dtypeArg(0));
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.i64(shape[0]).i64(shape[1]).i64(product(shape.drop_front(2)));
    if (!isGrad)
      call.f64(f64Attr("epsilon")).f64(f64Attr("momentum"));
  } else {
    return std::nullopt;
  }
  return success();
}

/// Matmuls, embeddings, convolutions and pooling.
std::optional<LogicalResult> KernelLowering::lowerLinear() {
  if (name == "memopt.matmul") {
    if (failed(expectCounts(2, 1)))
      return failure();
    ArrayRef<int64_t> a = shapeOf(ins[0]), b = shapeOf(ins[1]),
                      c = shapeOf(outs[0]);
    if (a.size() < 2 || b.size() < 2 || c.size() < 2)
      return fail("an operand has rank below 2");
    bool transA = attrs.contains("transpose_lhs");
    bool transB = attrs.contains("transpose_rhs");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(product(a.drop_back(2)))
        .i64(product(b.drop_back(2)))
        .i64(c[c.size() - 2])
        .i64(c.back())
        .i64(transA ? a[a.size() - 2] : a.back())
        .i32(transA)
        .i32(transB)
        .verbatim(dtypeArg(1));
  } else if (name == "memopt.nf4_matmul") {
    // lhs, packed weight -> result, scratch.
    if (failed(expectCounts(2, 2)))
      return failure();
    ArrayRef<int64_t> c = shapeOf(outs[0]);
    auto weight = attrs.getAs<DenseI64ArrayAttr>("rhs_shape");
    if (c.size() < 2 || !weight || weight.size() != 2)
      return fail("the result has rank below 2 or the weight no shape");
    bool transB = attrs.contains("transpose_rhs");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    ptr(outs[1]);
    call.i64(numel(outs[1]) * 4)
        .i64(numel(outs[0]) / c.back())
        .i64(c.back())
        .i64(weight[transB ? 1 : 0])
        .i32(transB);
  } else if (name == "memopt.embedding" || name == "memopt.embedding_grad") {
    if (failed(expectCounts(2, 1)))
      return failure();
    bool isGrad = name == "memopt.embedding_grad";
    ArrayRef<int64_t> table = shapeOf(isGrad ? outs[0] : ins[0]);
    if (table.size() != 2)
      return fail("the table is not a matrix");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(numel(ins[1])).i64(table[0]).i64(table[1]);
    if (isGrad)
      call.i64(i64Attr("padding_idx", -1));
  } else if (name == "memopt.conv2d" || name == "memopt.conv2d_grad_input" ||
             name == "memopt.conv2d_grad_filter") {
    if (failed(expectCounts(2, 1)))
      return failure();
    // The forward's input [n, c, h, w] and filter [o, c / groups, kh, kw].
    Value input = name == "memopt.conv2d"              ? ins[0]
                  : name == "memopt.conv2d_grad_input" ? outs[0]
                                                       : ins[1];
    Value filter = name == "memopt.conv2d_grad_filter" ? outs[0] : ins[1];
    ArrayRef<int64_t> x = shapeOf(input), f = shapeOf(filter);
    if (x.size() != 4 || f.size() != 4)
      return fail("the input or filter is not 4-D");
    SmallVector<int64_t> strides = pairAttr("strides", {1, 1});
    SmallVector<int64_t> padding = pairAttr("padding", {0, 0});
    SmallVector<int64_t> dilations = pairAttr("dilations", {1, 1});
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
    call.i64(x[0]).i64(x[1]).i64(x[2]).i64(x[3]);
    call.i64(f[0]).i64(f[2]).i64(f[3]);
    call.i64(strides[0]).i64(strides[1]);
    call.i64(padding[0]).i64(padding[1]);
    call.i64(dilations[0]).i64(dilations[1]);
    call.i64(i64Attr("groups", 1));
  } else if (name == "memopt.max_pool2d" || name == "memopt.avg_pool2d" ||
             name == "memopt.max_pool2d_grad" ||
             name == "memopt.avg_pool2d_grad") {
    bool isMaxGrad = name == "memopt.max_pool2d_grad";
    bool isGrad = isMaxGrad || name == "memopt.avg_pool2d_grad";
    if (failed(expectCounts(isMaxGrad ? 2 : 1, 1)))
      return failure();
    ArrayRef<int64_t> x = shapeOf(isGrad ? outs[0] : ins[0]);
    if (x.size() != 4)
      return fail("the input is not 4-D");
    SmallVector<int64_t> window = pairAttr("kernel");
    SmallVector<int64_t> strides = pairAttr("strides");
    SmallVector<int64_t> padding = pairAttr("padding", {0, 0});
    call.verbatim(dtypeArg(0));
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.i64(x[0]).i64(x[1]).i64(x[2]).i64(x[3]);
    call.i64(window[0]).i64(window[1]);
    call.i64(strides[0]).i64(strides[1]);
    call.i64(padding[0]).i64(padding[1]);
  } else {
    return std::nullopt;
  }
  return success();
}

/// Data parallelism's and ZeRO's collectives, and dropout.
std::optional<LogicalResult> KernelLowering::lowerCollectivesAndDropout() {
  if (name == "shard.all_reduce") {
    // Data parallelism's sum over the ranks (--memopt-accumulate), in place
    // when bufferization gave it its operand's buffer.
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(outs[0]));
  } else if (name == "shard.reduce_scatter" || name == "shard.all_slice" ||
             name == "shard.all_gather") {
    // ZeRO's shards (--memopt-shard-optimizer): each call names the size of
    // one rank's slice, the smaller of its two buffers.
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(std::min(numel(ins[0]), numel(outs[0])));
  } else if (name == "memopt.dropout") {
    if (failed(expectCounts(1, 1)))
      return failure();
    // `offset` is 0: one call covers the whole tensor (runtime.h).
    ArrayRef<int64_t> shape = shapeOf(outs[0]);
    int64_t shared = i64Attr("shared", 0);
    if (shared < 0 || shared > static_cast<int64_t>(shape.size()))
      return fail("'shared' is outside the rank");
    int64_t group = 1;
    for (int64_t size : shape.take_back(shared))
      group *= size;
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(outs[0]))
        .i64(group)
        .f64(f64Attr("p"))
        .i64(i64Attr("seed"))
        .i64(i64Attr("stream"));
    // Inside the micro-batch loop: micro-batch i covers mask bits
    // [i * numel / group, (i + 1) * numel / group) of the full batch's
    // numbering. (With every dimension shared, one bit serves all
    // micro-batches, as it serves the full batch: offset 0.)
    if (static_cast<size_t>(shared) < shape.size())
      microBatchOffset(numel(outs[0]) / group);
    else
      call.i64(0);
  } else {
    return std::nullopt;
  }
  return success();
}

/// The losses and the label count.
std::optional<LogicalResult> KernelLowering::lowerLosses() {
  if (name == "memopt.cross_entropy" || name == "memopt.cross_entropy_grad") {
    bool isGrad = name == "memopt.cross_entropy_grad";
    if (failed(expectCounts(isGrad ? 3 : 2, 1)))
      return failure();
    ArrayRef<int64_t> logits = shapeOf(ins[0]);
    if (logits.empty())
      return fail("the logits are a scalar");
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    call.verbatim(dtypeArg(1));
    ptr(ins[1]);
    if (isGrad)
      ptr(ins[2]);
    ptr(outs[0]);
    auto labelSmoothing = attrs.getAs<FloatAttr>("label_smoothing");
    call.i64(numel(ins[1]))
        .i64(logits.back())
        .i64(i64Attr("ignore_index", -100))
        .verbatim(reduction())
        .f64(labelSmoothing ? labelSmoothing.getValueAsDouble() : 0.0);
  } else if (name == "memopt.linear_cross_entropy" ||
             name == "memopt.linear_cross_entropy_grad" ||
             name == "memopt.nf4_linear_cross_entropy" ||
             name == "memopt.nf4_linear_cross_entropy_grad") {
    bool isGrad = name.ends_with("_grad");
    // Forward: x, w, labels[, bias] -> loss, lse, scratch. Gradient: x, w,
    // labels, lse, grad[, bias] -> grad_x, grad_w[, grad_bias], scratch. An
    // NF4 w (its shape an attribute) has no dtype argument and no gradient.
    auto nf4Shape = attrs.getAs<DenseI64ArrayAttr>("w_shape");
    bool nf4 = name.starts_with("memopt.nf4_");
    if (nf4 && (!nf4Shape || nf4Shape.size() != 2))
      return fail("the NF4 weight has no shape");
    size_t numIns = isGrad ? 5 : 3;
    bool hasBias = ins.size() > numIns;
    size_t numWeightGrads = isGrad && !nf4;
    size_t numOuts = isGrad ? 2 + numWeightGrads + hasBias : 3;
    if (failed(expectCounts(numIns, numOuts, numIns + 1)))
      return failure();
    ArrayRef<int64_t> x = shapeOf(ins[0]);
    if (x.empty())
      return fail("x is a scalar");
    Value scratch = outs.back();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    if (!nf4)
      call.verbatim(dtypeArg(1));
    optionalPtr(hasBias ? std::optional<Value>(ins.back()) : std::nullopt);
    call.verbatim(dtypeArg(nf4 ? 1 : 2));
    ptr(ins[2]);
    if (isGrad) {
      ptr(ins[3]); // lse
      ptr(ins[4]); // grad
      for (size_t i = 0; i <= numWeightGrads; ++i)
        ptr(outs[i]); // grad_x[, grad_w]
      optionalPtr(hasBias ? std::optional<Value>(outs[1 + numWeightGrads])
                          : std::nullopt);
    } else {
      ptr(outs[0]); // loss
      ptr(outs[1]); // lse
    }
    ptr(scratch);
    call.i64(numel(scratch) * 4);
    call.i64(numel(ins[2]))
        .i64(x.back())
        .i64(nf4 ? nf4Shape[0] : shapeOf(ins[1])[0])
        .i64(i64Attr("chunk"))
        .i64(i64Attr("ignore_index", -100))
        .verbatim(reduction());
  } else if (name == "memopt.label_count") {
    if (failed(expectCounts(1, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(outs[0]);
    call.i64(numel(ins[0])).i64(i64Attr("ignore_index", -100));
  } else if (name == "memopt.mse_loss" || name == "memopt.mse_loss_grad") {
    bool isGrad = name == "memopt.mse_loss_grad";
    if (failed(expectCounts(isGrad ? 3 : 2, 1)))
      return failure();
    call.verbatim(dtypeArg(0));
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.i64(numel(ins[0])).verbatim(reduction());
  } else {
    return std::nullopt;
  }
  return success();
}

/// Memory-efficient attention and its gradient.
std::optional<LogicalResult> KernelLowering::lowerAttention() {
  if (name == "memopt.attention" || name == "memopt.attention_grad") {
    bool isGrad = name == "memopt.attention_grad";
    size_t numTensors = isGrad ? 6 : 3;
    if (failed(expectCounts(numTensors, isGrad ? 3 : 2, numTensors + 1)))
      return failure();
    std::optional<Value> mask;
    if (ins.size() > numTensors)
      mask = ins.back();
    ArrayRef<int64_t> q = shapeOf(ins[0]), k = shapeOf(ins[1]),
                      v = shapeOf(ins[2]);
    int64_t rank = q.size();
    if (rank < 2 || rank > 4)
      return fail("q is not 2-D to 4-D");
    // (batch, heads) from the leading dimensions; the mask's strides in
    // (batch, heads, query, key) order, 0 where it broadcasts.
    int64_t batch = rank >= 3 ? q[0] : 1, heads = rank == 4 ? q[1] : 1;
    SmallVector<int64_t> maskStrides;
    if (mask) {
      ArrayRef<int64_t> m = shapeOf(*mask);
      SmallVector<int64_t> strides(rank, 0);
      int64_t stride = 1;
      for (int64_t i = rank - 1; i >= 0; --i) {
        strides[i] = m[i] == 1 ? 0 : stride;
        stride *= m[i];
      }
      maskStrides = {rank >= 3 ? strides[0] : 0, rank == 4 ? strides[1] : 0,
                     strides[rank - 2], strides[rank - 1]};
    }
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(ins[2]);
    optionalPtr(mask);
    call.verbatim(step.getI64Array(maskStrides));
    if (isGrad) {
      ptr(ins[3]);
      ptr(ins[4]);
      ptr(ins[5]);
    }
    for (Value out : outs)
      ptr(out);
    call.i64(batch).i64(heads).i64(q[rank - 2]).i64(k[rank - 2]);
    call.i64(q[rank - 1]).i64(v[rank - 1]);
    call.f64(f64Attr("scale")).i64(attrs.get("causal") ? 1 : 0);
    auto maskValue = attrs.getAs<FloatAttr>("mask_value");
    call.f64(maskValue ? maskValue.getValueAsDouble() : -INFINITY);
    auto dropoutP = attrs.getAs<FloatAttr>("dropout_p");
    call.f64(dropoutP ? dropoutP.getValueAsDouble() : 0.0)
        .i64(i64Attr("seed", 0))
        .i64(i64Attr("stream", 0));
    // Micro-batch i draws the dropout mask of its score elements in the
    // full batch's numbering: offset i * (its score count).
    microBatchOffset(batch * heads * q[rank - 2] * k[rank - 2]);
  } else {
    return std::nullopt;
  }
  return success();
}

/// The optimizer updates and loss scaling.
std::optional<LogicalResult> KernelLowering::lowerOptimizer() {
  if (name == "memopt.sgd_update") {
    if (failed(expectCounts(3, 2, 4)))
      return failure();
    call.verbatim(dtypeArg(0));
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(ins[2]);
    optionalPtr(ins.size() == 4 ? std::optional<Value>(ins[3]) : std::nullopt);
    ptr(outs[0]);
    ptr(outs[1]);
    call.i64(numel(ins[0]))
        .f64(f64Attr("lr"))
        .f64(f64Attr("momentum"))
        .f64(f64Attr("weight_decay"));
  } else if (name == "memopt.adamw_update") {
    if (failed(expectCounts(5, 3, 6)))
      return failure();
    // 8-bit moments (packed bytes) update f32 parameters only.
    if (typeOf(ins[2]).getElementType().isInteger(8)) {
      callee = "memopt_adamw8bit_update";
      call.verbatim("MEMOPT_F32");
    } else {
      call.verbatim(dtypeArg(0));
    }
    for (Value v : ArrayRef<Value>(ins).take_front(5))
      ptr(v);
    optionalPtr(ins.size() == 6 ? std::optional<Value>(ins[5]) : std::nullopt);
    for (Value v : outs)
      ptr(v);
    call.i64(numel(ins[0]))
        .f64(f64Attr("lr"))
        .f64(f64Attr("beta1"))
        .f64(f64Attr("beta2"))
        .f64(f64Attr("eps"))
        .f64(f64Attr("weight_decay"));
  } else if (name == "memopt.increment") {
    if (failed(expectCounts(1, 1, 2)))
      return failure();
    callee = "memopt_increment";
    ptr(ins[0]);
    optionalPtr(ins.size() == 2 ? std::optional<Value>(ins[1]) : std::nullopt);
    ptr(outs[0]);
  } else if (name == "memopt.scale_loss") {
    if (failed(expectCounts(2, 1)))
      return failure();
    callee = "memopt_scale_loss";
    ptr(ins[0]);
    ptr(ins[1]);
    ptr(outs[0]);
  } else if (name == "memopt.unscale") {
    if (ins.size() < 2 || outs.size() != ins.size())
      return fail("expected the scale and N gradients in, N results and "
                  "found_inf out");
    size_t n = ins.size() - 1;
    ArrayRef<Value> grads = ArrayRef<Value>(ins).drop_front();
    ArrayRef<Value> results = ArrayRef<Value>(outs).drop_back();
    // Local arrays of the dtypes and of the gradient and result pointers.
    std::string dtypes = step.getGlobalName("dtypes");
    std::string dtypeList;
    SmallVector<Value> dtypeValues;
    if (binding)
      dtypeValues = binding->getValues(0, ins, outs);
    usesBinding = true;
    unbound |= dtypeValues.size() != grads.size();
    for (Value g : dtypeValues)
      dtypeList += (dtypeList.empty() ? "" : ", ") + dtype(g).str();
    emitc::VerbatimOp::create(step.builder, loc,
                              "const memopt_dtype " + dtypes + "[] = {" +
                                  dtypeList + "};");
    std::string gradArray =
        step.emitPointerArray(loc, "const void *", "grads", grads);
    std::string resultArray =
        step.emitPointerArray(loc, "void *", "results", results);
    SmallVector<int64_t> sizes =
        llvm::map_to_vector(grads, [&](Value v) { return numel(v); });
    ptr(ins[0]);
    call.i64(n).verbatim(dtypes).verbatim(gradArray).verbatim(resultArray);
    call.verbatim(step.getI64Array(sizes));
    ptr(outs.back());
  } else if (name == "memopt.update_scale") {
    if (failed(expectCounts(3, 2)))
      return failure();
    callee = "memopt_update_scale";
    for (Value v : llvm::concat<Value>(ins, outs))
      ptr(v);
    call.f64(f64Attr("growth_factor"))
        .f64(f64Attr("backoff_factor"))
        .i64(i64Attr("growth_interval"));
  } else {
    return std::nullopt;
  }
  return success();
}

//===----------------------------------------------------------------------===//
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
      if (op.getName().getStringRef() == "shard.grid") {
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
