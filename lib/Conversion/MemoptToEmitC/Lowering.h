//===- Lowering.h - the EmitC lowering's shared parts -----------*- C++ -*-===//
//
// What the lowering of the step (MemoptToEmitC.cpp) and the lowering of its
// kernels into runtime calls (KernelCalls.cpp, TrainingKernelCalls.cpp)
// share: the C types of buffers, the call under construction, the step
// lowering's state and the kernel lowering's.
// Private to lib/Conversion/MemoptToEmitC.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_CONVERSION_MEMOPTTOEMITC_LOWERING_H
#define MEMOPT_LIB_CONVERSION_MEMOPTTOEMITC_LOWERING_H

#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/IR/RuntimeDTypes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <map>
#include <optional>
#include <string>

namespace memopt::lowering {

//===----------------------------------------------------------------------===//
// Types and sizes
//===----------------------------------------------------------------------===//

/// The `memopt_dtype` enumerator of an element type, or "" if none: the
/// verifiers' mapping (RuntimeDTypes.h), spelled as runtime.h does.
inline mlir::StringRef getDTypeName(mlir::Type type) {
  std::optional<memopt_dtype> dtype = getRuntimeDType(type);
  return dtype ? runtime::dtypeEnumName(*dtype) : "";
}

/// Whether the runtime addresses buffers of `type`: a runtime dtype, or i8
/// (bytes: 8-bit optimizer state, kernel scratch).
inline bool isAddressable(mlir::Type type) {
  return !getDTypeName(type).empty() || type.isInteger(8);
}

/// The C element type a buffer of `type` is addressed through.
inline mlir::Type getStorageType(mlir::Type type) {
  mlir::MLIRContext *ctx = type.getContext();
  if (type.isF16() || type.isBF16())
    return mlir::IntegerType::get(ctx, 16, mlir::IntegerType::Unsigned);
  if (type.isInteger(1))
    return mlir::IntegerType::get(ctx, 8, mlir::IntegerType::Unsigned);
  return type;
}

/// Bytes of one element as stored by the runtime (i1: one byte).
inline int64_t getElementBytes(mlir::Type type) {
  return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8;
}

inline int64_t product(mlir::ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

/// `shape` collapsed to (outer, shape[dim], inner).
inline std::array<int64_t, 3> collapseAround(mlir::ArrayRef<int64_t> shape,
                                             int64_t dim) {
  return {product(shape.take_front(dim)), shape[dim],
          product(shape.drop_front(dim + 1))};
}

//===----------------------------------------------------------------------===//
// Lowering
//===----------------------------------------------------------------------===//

/// The argument list of one runtime call under construction: SSA operands
/// are referenced by index, everything else is an attribute printed inline.
struct RuntimeCall {
  explicit RuntimeCall(mlir::MLIRContext *ctx) : ctx(ctx) {}

  RuntimeCall &value(mlir::Value v) {
    args.push_back(
        mlir::IntegerAttr::get(mlir::IndexType::get(ctx), operands.size()));
    operands.push_back(v);
    return *this;
  }
  RuntimeCall &verbatim(mlir::StringRef text) {
    args.push_back(mlir::emitc::OpaqueAttr::get(ctx, text));
    return *this;
  }
  RuntimeCall &i64(int64_t v) {
    args.push_back(mlir::IntegerAttr::get(mlir::IntegerType::get(ctx, 64), v));
    return *this;
  }
  RuntimeCall &i32(int32_t v) {
    args.push_back(mlir::IntegerAttr::get(mlir::IntegerType::get(ctx, 32), v));
    return *this;
  }
  RuntimeCall &f64(double v) {
    args.push_back(mlir::FloatAttr::get(mlir::Float64Type::get(ctx), v));
    return *this;
  }

  mlir::MLIRContext *ctx;
  mlir::SmallVector<mlir::Value> operands;
  mlir::SmallVector<mlir::Attribute> args;
};

/// Lowers one `memopt.train_step` function into an `emitc.func`.
class TrainStepLowering {
public:
  TrainStepLowering(mlir::ModuleOp module, mlir::func::FuncOp func,
                    bool emitScopes = false)
      : module(module), func(func), ctx(module.getContext()), builder(ctx),
        emitScopes(emitScopes) {}

  /// Builds the includes, globals and the entry point before `func`, then
  /// erases `func`. On failure, reports the error; the module may then hold a
  /// partial lowering.
  mlir::LogicalResult run();

  /// The number of runtime calls emitted.
  unsigned getNumCalls() const { return numCalls; }

private:
  friend class KernelLowering;

  mlir::LogicalResult lowerBody(mlir::Block &body);
  mlir::LogicalResult lowerOps(mlir::Block &block, int64_t arenaBytes);
  mlir::LogicalResult lowerAlloc(mlir::memref::AllocOp alloc,
                                 int64_t arenaBytes);
  mlir::LogicalResult lowerView(mlir::memref::ReinterpretCastOp view);
  mlir::LogicalResult lowerSlot(mlir::memref::ViewOp view);
  mlir::LogicalResult lowerKernel(KernelOp kernel);

  /// Emits `callee` with the arguments of `call`.
  void emitCall(mlir::Location loc, mlir::StringRef callee,
                const RuntimeCall &call);

  /// A `static const` global holding `values` (nullptr when empty).
  std::string getI64Array(mlir::ArrayRef<int64_t> values);
  /// A local array `<type>name[] = {...}` (type "void *", ...) of the
  /// pointers of `buffers`, emitted at the builder's point; returns its name.
  std::string emitPointerArray(mlir::Location loc, mlir::StringRef type,
                               mlir::StringRef prefix,
                               mlir::ArrayRef<mlir::Value> buffers);
  /// A global holding the elements of a non-splat constant (one per
  /// distinct value: bufferization clones a constant for each loop reader).
  std::string getConstantData(mlir::DenseElementsAttr data,
                              mlir::Type elementType);
  /// A fresh global name with `prefix`.
  std::string getGlobalName(mlir::StringRef prefix);

  mlir::Value getPointer(mlir::Value memref) { return pointers.lookup(memref); }

  mlir::ModuleOp module;
  mlir::func::FuncOp func;
  mlir::MLIRContext *ctx;
  mlir::OpBuilder builder;
  /// Where globals go: before the entry point.
  mlir::Operation *globalInsertionPoint = nullptr;
  /// The entry's parameters: the context, the argument pointers, and the
  /// bases of the device arena and of the host arena (optimizer offload).
  mlir::Value context, args, scratch, hostScratch;
  mlir::DenseMap<mlir::Value, mlir::Value> pointers;
  /// --emit-scopes: the scope of the last memopt_set_scope call, if any.
  bool emitScopes = false;
  std::optional<std::string> currentScope;
  /// EmitC values of the index arithmetic, and the number of the innermost
  /// loop's micro-batch in the full batch (which dropout's masks follow):
  /// its index, or rank * K + index with data parallelism.
  mlir::DenseMap<mlir::Value, mlir::Value> indices;
  mlir::Value loopIndex;
  std::map<std::vector<int64_t>, std::string> i64Arrays;
  /// The global of each constant's elements, one per distinct value.
  mlir::DenseMap<mlir::Attribute, std::string> constantData;
  unsigned nextGlobal = 0;
  unsigned numCalls = 0;
};

/// The runtime call of one `memopt.kernel` under construction: its
/// operands, attributes and the checks every entry shares. Each family of
/// kernels adds its entry's arguments in a method of its own, which returns
/// nullopt for a kernel that is not one of the family's.
class KernelLowering {
public:
  KernelLowering(TrainStepLowering &step, KernelOp kernel);

  /// Emits the kernel's runtime call, or reports why it cannot.
  mlir::LogicalResult lower();

private:
  std::optional<mlir::LogicalResult> lowerElementwise();
  std::optional<mlir::LogicalResult> lowerCopies();
  std::optional<mlir::LogicalResult> lowerLayout();
  std::optional<mlir::LogicalResult> lowerNormalization();
  std::optional<mlir::LogicalResult> lowerLinear();
  std::optional<mlir::LogicalResult> lowerCollectivesAndDropout();
  std::optional<mlir::LogicalResult> lowerLosses();
  std::optional<mlir::LogicalResult> lowerAttention();
  std::optional<mlir::LogicalResult> lowerOptimizer();

  /// Reports that the kernel cannot be lowered, and why.
  mlir::LogicalResult fail(const mlir::Twine &why);
  /// Checks the operand counts; the optional `skip_if` operand is the extra
  /// input allowed by `maxIns`.
  mlir::LogicalResult expectCounts(size_t numIns, size_t numOuts,
                                   size_t maxIns = 0);
  /// The elementwise families' one shape:
  /// memopt_<family>(ctx, kind, dtype, ins..., [value,] out, n).
  mlir::LogicalResult elementwise(mlir::StringRef kind, unsigned numIns,
                                  bool withValue);

  /// Whether the kernel computes one of the ops `OpTys`.
  template <typename... OpTys> bool is() const {
    return isOpNamed<OpTys...>(name);
  }

  static mlir::MemRefType typeOf(mlir::Value v) {
    return mlir::cast<mlir::MemRefType>(v.getType());
  }
  static mlir::ArrayRef<int64_t> shapeOf(mlir::Value v) {
    return typeOf(v).getShape();
  }
  static int64_t numel(mlir::Value v) { return typeOf(v).getNumElements(); }
  static mlir::StringRef dtype(mlir::Value v) {
    return getDTypeName(typeOf(v).getElementType());
  }
  /// Dtype argument `slot` of the runtime entry: the dtype of the operand or
  /// result that the op's binding names (RuntimeDTypes.h), the value whose
  /// element type memopt.kernel's verifier checked against the entry's rule.
  mlir::StringRef dtypeArg(unsigned slot);

  // Attributes. A missing required one is an error (reported once the call
  // is built); defaults are the ODS defaults of the tensor op, which the
  // kernel omits like the op does.
  double f64Attr(mlir::StringRef attrName);
  int64_t i64Attr(mlir::StringRef attrName,
                  std::optional<int64_t> def = std::nullopt);
  mlir::SmallVector<int64_t> arrayAttr(mlir::StringRef attrName,
                                       mlir::ArrayRef<int64_t> def = {});
  /// An attribute of the tensor op's Memopt_Pair kind.
  mlir::SmallVector<int64_t> pairAttr(mlir::StringRef attrName,
                                      mlir::ArrayRef<int64_t> def = {});
  /// An attribute with one entry per dimension of a rank-`rank` tensor.
  mlir::SmallVector<int64_t> perDimAttr(mlir::StringRef attrName, size_t rank);
  mlir::StringRef reduction();
  bool geluTanh();
  void setMissing(const mlir::Twine &attrName) {
    missing = true;
    missingName = attrName.str();
  }

  /// Appends the current micro-batch's first element in the full batch's
  /// numbering, i * `elements` in the micro-batch loop, 0 outside it.
  void microBatchOffset(int64_t elements);
  /// Appends `v`'s pointer (nullptr for none) to the call.
  void ptr(mlir::Value v) { call.value(step.getPointer(v)); }
  void optionalPtr(std::optional<mlir::Value> v) {
    if (v)
      ptr(*v);
    else
      call.verbatim("nullptr");
  }

  TrainStepLowering &step;
  KernelOp kernel;
  mlir::StringRef name;
  mlir::DictionaryAttr attrs;
  mlir::SmallVector<mlir::Value> ins, outs;
  mlir::Location loc;
  const RuntimeDTypeBinding *binding;
  bool usesBinding = false, unbound = false;
  bool missing = false;
  std::string missingName;
  RuntimeCall call;
  mlir::StringRef callee;
  /// The host entry's name, when the kernel runs on the host.
  std::string hostCallee;
};

} // namespace memopt::lowering

#endif // MEMOPT_LIB_CONVERSION_MEMOPTTOEMITC_LOWERING_H
