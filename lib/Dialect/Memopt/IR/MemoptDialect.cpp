//===- MemoptDialect.cpp - memopt dialect ---------------------------------===//
//
// Registers the dialect and verifies the discardable attributes it gives
// meaning to: argument roles, names and batch dimensions, the `memopt.loss`
// marker of the function that computes the loss, and `memopt.scope`.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include <cmath>
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace memopt;

#include "memopt/Dialect/Memopt/IR/MemoptDialect.cpp.inc"
#include "memopt/Dialect/Memopt/IR/MemoptEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "memopt/Dialect/Memopt/IR/MemoptAttrs.cpp.inc"

void MemoptDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "memopt/Dialect/Memopt/IR/MemoptOps.cpp.inc"
      >();
  registerAttributes();
}

bool memopt::isStepFunction(Operation *op) {
  return op->hasAttr(MemoptDialect::kTrainStepAttrName) ||
         op->hasAttr(MemoptDialect::kEvalStepAttrName);
}

FailureOr<FunctionOpInterface> memopt::findTrainStep(ModuleOp module,
                                                    StringRef purpose) {
  FunctionOpInterface found;
  for (auto func : module.getOps<FunctionOpInterface>()) {
    if (!isStepFunction(func) || func.isExternal())
      continue;
    if (found) {
      func->emitOpError() << "is a second function marked "
                             "'memopt.train_step' (expected one)";
      return failure();
    }
    found = func;
  }
  if (!found) {
    module.emitError() << "no function marked 'memopt.train_step' to "
                       << purpose << " (run --memopt-autodiff first)";
    return failure();
  }
  return found;
}

FailureOr<FunctionOpInterface> memopt::findLossFunction(ModuleOp module,
                                                       StringRef pass) {
  SmallVector<FunctionOpInterface> losses;
  module.walk([&](FunctionOpInterface func) {
    if (func->hasAttr(MemoptDialect::kLossAttrName))
      losses.push_back(func);
  });
  if (losses.size() != 1)
    return emitError(module.getLoc())
           << pass << " expects exactly one function marked memopt.loss, found "
           << losses.size();
  return losses.front();
}

void MemoptDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "memopt/Dialect/Memopt/IR/MemoptAttrs.cpp.inc"
      >();
}

std::optional<ArgumentRole> memopt::symbolizeArgumentRole(StringRef name) {
  return llvm::StringSwitch<std::optional<ArgumentRole>>(name)
      .Case("param", ArgumentRole::Param)
      .Case("frozen", ArgumentRole::Frozen)
      .Case("input", ArgumentRole::Input)
      .Case("label", ArgumentRole::Label)
      .Case("state", ArgumentRole::State)
      .Case("optim", ArgumentRole::Optim)
      .Case("loss", ArgumentRole::Loss)
      .Case("param_copy", ArgumentRole::ParamCopy)
      .Default(std::nullopt);
}

StringRef memopt::stringifyArgumentRole(ArgumentRole role) {
  switch (role) {
  case ArgumentRole::Param:
    return "param";
  case ArgumentRole::Frozen:
    return "frozen";
  case ArgumentRole::Input:
    return "input";
  case ArgumentRole::Label:
    return "label";
  case ArgumentRole::State:
    return "state";
  case ArgumentRole::Optim:
    return "optim";
  case ArgumentRole::Loss:
    return "loss";
  case ArgumentRole::ParamCopy:
    return "param_copy";
  }
  llvm_unreachable("unknown argument role");
}

//===----------------------------------------------------------------------===//
// Argument attributes
//===----------------------------------------------------------------------===//

/// `memopt.memory` names "host" or "device"; `error` starts the message.
template <typename ErrorFn>
static LogicalResult verifyMemoryAttr(NamedAttribute attr, ErrorFn error) {
  auto memory = dyn_cast<StringAttr>(attr.getValue());
  if (!memory || (memory.getValue() != "host" && memory.getValue() != "device"))
    return error() << "must be \"host\" or \"device\", got " << attr.getValue();
  return success();
}

LogicalResult MemoptDialect::verifyRegionArgAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned argIndex,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  auto argError = [&]() {
    return op->emitOpError() << "argument #" << argIndex << " attribute '"
                             << name << "' ";
  };

  if (name == kRoleAttrName) {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (!role || !symbolizeArgumentRole(role.getValue()))
      return argError()
             << "must be one of \"param\", \"frozen\", \"input\", "
                "\"label\", \"state\", \"optim\", \"loss\", \"param_copy\", "
                "got "
             << attr.getValue();
    return success();
  }
  if (name == kNameAttrName) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return argError() << "must be a non-empty string, got "
                        << attr.getValue();
    return success();
  }
  if (name == kBatchDimAttrName) {
    auto dim = dyn_cast<IntegerAttr>(attr.getValue());
    if (!dim)
      return argError() << "must be an integer, got " << attr.getValue();
    if (regionIndex >= op->getNumRegions() ||
        op->getRegion(regionIndex).empty())
      return success();
    Type argType = op->getRegion(regionIndex).getArgument(argIndex).getType();
    // A tensor before bufferization, a memref after.
    auto shaped = dyn_cast<ShapedType>(argType);
    if (!shaped || !shaped.hasRank())
      return argError() << "needs a ranked tensor or memref argument, got "
                        << argType;
    int64_t value = dim.getInt();
    if (value < 0 || value >= shaped.getRank())
      return argError() << "is " << value << ", outside [0, "
                        << shaped.getRank() << ") for type " << argType;
    return success();
  }
  if (name == kMemoryAttrName)
    return verifyMemoryAttr(attr, argError);
  if (name == kShardOfAttrName) {
    auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!shape || llvm::any_of(shape.asArrayRef(),
                               [](int64_t dim) { return dim < 0; }))
      return argError() << "must be an array of non-negative extents, got "
                        << attr.getValue();
    return success();
  }
  if (name == kNf4OfAttrName) {
    auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!shape || shape.size() != 2 ||
        llvm::any_of(shape.asArrayRef(), [](int64_t dim) { return dim <= 0; }))
      return argError() << "must be the two positive extents of a matrix, got "
                        << attr.getValue();
    return success();
  }
  if (name == kHparamsAttrName) {
    auto hparams = dyn_cast<DictionaryAttr>(attr.getValue());
    bool valid = hparams && llvm::all_of(hparams, [](NamedAttribute entry) {
      return isa<FloatAttr>(entry.getValue()) &&
             llvm::is_contained({"lr", "weight_decay", "beta1", "beta2", "eps",
                                 "momentum"},
                                entry.getName().strref());
    });
    if (!valid)
      return argError() << "must be a dictionary of float values named lr, "
                           "weight_decay, beta1, beta2, eps or momentum, got "
                        << attr.getValue();
    return success();
  }
  return op->emitOpError() << "argument #" << argIndex
                           << " has unknown memopt attribute '" << name
                           << "' (expected memopt.role, memopt.name, "
                              "memopt.batch_dim, memopt.shard_of, "
                              "memopt.nf4_of or memopt.hparams)";
}

//===----------------------------------------------------------------------===//
// Mixed precision attributes
//===----------------------------------------------------------------------===//

FailureOr<LossScaleConfig>
memopt::parseLossScaleAttr(Attribute attr,
                           function_ref<InFlightDiagnostic()> emitError) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto bad = [&]() -> InFlightDiagnostic {
    InFlightDiagnostic diag = emitError();
    diag << "attribute '" << MemoptDialect::kLossScaleAttrName << "' ";
    return diag;
  };
  if (!dict) {
    bad() << "must be a dictionary, got " << attr;
    return failure();
  }
  auto mode = dict.getAs<StringAttr>("mode");
  if (!mode || (mode.getValue() != "dynamic" && mode.getValue() != "static")) {
    bad() << "needs mode = \"dynamic\" or \"static\"";
    return failure();
  }
  LossScaleConfig config;
  config.dynamic = mode.getValue() == "dynamic";
  // Each number: present, finite, and in its range.
  auto number = [&](StringRef key, double &value, StringRef range,
                    function_ref<bool(double)> valid) -> LogicalResult {
    auto found = dict.getAs<FloatAttr>(key);
    if (!found || !std::isfinite(found.getValueAsDouble()) ||
        !valid(found.getValueAsDouble())) {
      bad() << "needs " << key << ", a float " << range;
      return failure();
    }
    value = found.getValueAsDouble();
    return success();
  };
  if (failed(number("scale", config.scale, "> 0",
                    [](double v) { return v > 0; })))
    return failure();
  if (!config.dynamic) {
    if (dict.size() != 2) {
      bad() << "with mode = \"static\" has only mode and scale";
      return failure();
    }
    return config;
  }
  if (failed(number("growth_factor", config.growthFactor, "> 1",
                    [](double v) { return v > 1; })) ||
      failed(number("backoff_factor", config.backoffFactor, "in (0, 1)",
                    [](double v) { return v > 0 && v < 1; })))
    return failure();
  auto interval = dict.getAs<IntegerAttr>("growth_interval");
  if (!interval || interval.getInt() < 1) {
    bad() << "needs growth_interval, an integer >= 1";
    return failure();
  }
  config.growthInterval = interval.getInt();
  if (dict.size() != 5) {
    bad() << "with mode = \"dynamic\" has only mode, scale, growth_factor, "
             "backoff_factor and growth_interval";
    return failure();
  }
  return config;
}

DictionaryAttr memopt::buildLossScaleAttr(MLIRContext *context,
                                          const LossScaleConfig &config) {
  Builder b(context);
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("mode",
                     b.getStringAttr(config.dynamic ? "dynamic" : "static")),
      b.getNamedAttr("scale", b.getF64FloatAttr(config.scale))};
  if (config.dynamic) {
    entries.push_back(b.getNamedAttr("growth_factor",
                                     b.getF64FloatAttr(config.growthFactor)));
    entries.push_back(b.getNamedAttr(
        "backoff_factor", b.getF64FloatAttr(config.backoffFactor)));
    entries.push_back(b.getNamedAttr(
        "growth_interval", b.getI64IntegerAttr(config.growthInterval)));
  }
  return b.getDictionaryAttr(entries);
}

//===----------------------------------------------------------------------===//
// Operation attributes
//===----------------------------------------------------------------------===//

/// Checks the signature of a function marked `memopt.loss`: every argument
/// has a role and a unique name, batch dimensions sit on inputs and labels,
/// and the results are the scalar f32 loss followed by the new value of each
/// state argument.
static LogicalResult verifyLossFunction(FunctionOpInterface func) {
  llvm::StringSet<> names;
  // The state arguments (index, type), and the first batch size seen.
  SmallVector<std::pair<unsigned, Type>> stateArgs;
  std::optional<std::pair<unsigned, int64_t>> batch;
  ArrayRef<Type> argTypes = func.getArgumentTypes();
  for (auto [index, argType] : llvm::enumerate(argTypes)) {
    auto argError = [&, index = index]() {
      return func.emitOpError() << "argument #" << index << " ";
    };
    auto role = func.getArgAttrOfType<StringAttr>(
        index, MemoptDialect::kRoleAttrName);
    if (!role)
      return argError() << "of a memopt.loss function has no 'memopt.role' "
                           "(expected \"param\", \"input\", \"label\" or "
                           "\"state\")";
    auto name = func.getArgAttrOfType<StringAttr>(
        index, MemoptDialect::kNameAttrName);
    if (!name)
      return argError() << "of a memopt.loss function has no 'memopt.name'";
    if (!names.insert(name.getValue()).second)
      return argError() << "reuses the name '" << name.getValue() << "'";

    auto tensor = dyn_cast<RankedTensorType>(argType);
    if (!tensor || !tensor.hasStaticShape())
      return argError() << "must be a statically shaped tensor, got "
                        << argType;

    // The role string was checked by verifyRegionArgAttribute.
    ArgumentRole kind = *symbolizeArgumentRole(role.getValue());
    if (kind == ArgumentRole::Optim || kind == ArgumentRole::Loss)
      return argError() << "has role \"" << role.getValue()
                        << "\", which only a training step has";
    bool isData = kind == ArgumentRole::Input || kind == ArgumentRole::Label;
    auto batchDim = func.getArgAttrOfType<IntegerAttr>(
        index, MemoptDialect::kBatchDimAttrName);
    if (batchDim && !isData)
      return argError() << "has 'memopt.batch_dim' but role \""
                        << role.getValue()
                        << "\" (only inputs and labels have a batch)";
    if (batchDim) {
      int64_t size = tensor.getDimSize(batchDim.getInt());
      if (!batch)
        batch = {index, size};
      else if (batch->second != size)
        return argError() << "has batch size " << size << " but argument #"
                          << batch->first << " has " << batch->second
                          << " (every memopt.batch_dim indexes the same "
                             "examples)";
    }
    if ((kind == ArgumentRole::Param || kind == ArgumentRole::State) &&
        !isa<FloatType>(tensor.getElementType()))
      return argError() << "has role \"" << role.getValue()
                        << "\" and must be a float tensor, got " << argType;
    if (kind == ArgumentRole::State)
      stateArgs.push_back({static_cast<unsigned>(index), argType});
  }

  ArrayRef<Type> results = func.getResultTypes();
  Type lossType = RankedTensorType::get({}, Float32Type::get(func.getContext()));
  if (results.empty())
    return func.emitOpError() << "marked memopt.loss must return the loss, "
                                 "of type "
                              << lossType << ", but returns nothing";
  if (results.front() != lossType)
    return func.emitOpError()
           << "marked memopt.loss must return the loss as its first result, "
              "of type "
           << lossType << ", got " << results.front();
  if (results.size() - 1 != stateArgs.size())
    return func.emitOpError()
           << "marked memopt.loss must return the loss followed by one value "
              "per \"state\" argument: expected "
           << stateArgs.size() + 1 << " result"
           << (stateArgs.empty() ? "" : "s") << ", got " << results.size();
  for (auto [position, state] : llvm::enumerate(stateArgs)) {
    auto [argIndex, stateType] = state;
    Type resultType = results[position + 1];
    if (resultType == stateType)
      continue;
    StringAttr name = func.getArgAttrOfType<StringAttr>(
        argIndex, MemoptDialect::kNameAttrName);
    return func.emitOpError()
           << "result #" << position + 1
           << " returns the new value of argument #" << argIndex << " ('"
           << name.getValue() << "') and must have type " << stateType
           << ", got " << resultType;
  }
  return success();
}

LogicalResult MemoptDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  if (name == kScopeAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "attribute '" << name
                               << "' must be a string, got "
                               << attr.getValue();
    return success();
  }
  if (name == kLossAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError()
             << "attribute '" << name << "' must be a unit attribute";
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func)
      return op->emitOpError()
             << "attribute '" << name << "' only applies to functions";
    if (func.isExternal())
      return op->emitOpError() << "marked memopt.loss must have a body";
    return verifyLossFunction(func);
  }
  if (name == kTrainStepAttrName || name == kEvalStepAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitOpError() << "attribute '" << name
                               << "' must be a unit attribute on a function";
    return success();
  }
  if (name == kMemoryAttrName)
    return verifyMemoryAttr(attr, [&] {
      return op->emitOpError() << "attribute '" << name << "' ";
    });
  if (name == kOnHostAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError()
             << "attribute '" << name << "' must be a unit attribute";
    return success();
  }
  if (name == kOffsetAttrName || name == kArenaBytesAttrName ||
      name == kHostArenaBytesAttrName) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || bytes.getInt() < 0)
      return op->emitOpError() << "attribute '" << name
                               << "' must be a non-negative integer, got "
                               << attr.getValue();
    return success();
  }
  if (name == kPrecisionAttrName) {
    auto precision = dyn_cast<StringAttr>(attr.getValue());
    if (!precision || (precision.getValue() != "f32" &&
                       precision.getValue() != "bf16" &&
                       precision.getValue() != "f16"))
      return op->emitOpError() << "attribute '" << name
                               << "' must be \"f32\", \"bf16\" or \"f16\", got "
                               << attr.getValue();
    return success();
  }
  if (name == kOptimizerAttrName) {
    auto optimizer = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !optimizer ||
        (optimizer.getValue() != "adamw" && optimizer.getValue() != "sgd"))
      return op->emitOpError() << "attribute '" << name
                               << "' must be \"adamw\" or \"sgd\" on a "
                                  "function, got "
                               << attr.getValue();
    return success();
  }
  if (name == kLossScaleAttrName) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitOpError()
             << "attribute '" << name << "' only applies to functions";
    return parseLossScaleAttr(attr.getValue(),
                              [&] { return op->emitOpError(); });
  }
  if (name == kRecomputeAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError()
             << "attribute '" << name << "' must be a unit attribute";
    return success();
  }
  if (name == kMicroBatchesAttrName || name == kDataParallelAttrName) {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (!count || count.getInt() < 1 || op->getNumRegions() != 1)
      return op->emitOpError() << "attribute '" << name
                               << "' must be a positive integer on a loop";
    return success();
  }
  return op->emitOpError() << "has unknown memopt attribute '" << name
                           << "' (expected memopt.scope, memopt.loss, "
                              "memopt.train_step, memopt.eval_step, "
                              "memopt.offset, "
                              "memopt.arena_bytes, memopt.memory, "
                              "memopt.on_host, memopt.host_arena_bytes, "
                              "memopt.precision, "
                              "memopt.optimizer, memopt.loss_scale, "
                              "memopt.recompute, "
                              "memopt.micro_batches or memopt.data_parallel)";
}
