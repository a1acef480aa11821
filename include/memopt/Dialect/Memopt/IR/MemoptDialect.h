//===- MemoptDialect.h - memopt dialect ---------------------------*- C++ -*-===//
//
// Declares the memopt dialect and its attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h.inc"
#include "memopt/Dialect/Memopt/IR/MemoptEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "memopt/Dialect/Memopt/IR/MemoptAttrs.h.inc"

namespace memopt {

/// The alignment of the arena offsets --memopt-plan-buffers gives by default,
/// which the memory account's lower bound and --memopt-verify-plan assume
/// unless told otherwise (docs/Planning.md).
constexpr int64_t kDefaultArenaAlignment = 256;

/// The upstream `shard` collectives that become `memopt.kernel`s: data
/// parallelism's all-reduce and ZeRO's reduce-scatter, all-gather and
/// all-slice (docs/DataParallel.md).
inline constexpr llvm::StringLiteral kCollectiveKernels[] = {
    "shard.all_reduce", "shard.reduce_scatter", "shard.all_gather",
    "shard.all_slice"};

/// The one-axis `shard.grid` of a data-parallel step's ranks.
inline constexpr llvm::StringLiteral kRanksGridName = "memopt_ranks";

/// Whether `kernel` names one of kCollectiveKernels.
inline bool isCollectiveKernel(llvm::StringRef kernel) {
  return llvm::is_contained(kCollectiveKernels, kernel);
}

/// The roles a function argument can play in training (`memopt.role`).
/// ParamCopy is the whole low-precision copy of a parameter whose f32 master
/// weights ZeRO shards (--memopt-shard-optimizer): it has the name of its
/// "param" master, from which the driver loads it, and is never saved.
/// Frozen is a weight the step reads and never trains (PyTorch's
/// requires_grad=False): no gradient, no optimizer state; the driver loads
/// it with the parameters and saves it unchanged.
enum class ArgumentRole {
  Param,
  Frozen,
  Input,
  Label,
  State,
  Optim,
  Loss,
  ParamCopy
};

/// Whether `role` is a weight of the model, trained or frozen.
inline bool isWeightRole(ArgumentRole role) {
  return role == ArgumentRole::Param || role == ArgumentRole::Frozen;
}

/// Returns the role named by `memopt.role = "<name>"`, or std::nullopt.
std::optional<ArgumentRole> symbolizeArgumentRole(llvm::StringRef name);

/// Returns the spelling of `role` in `memopt.role`.
llvm::StringRef stringifyArgumentRole(ArgumentRole role);

/// Whether `op` is a step the planning passes compile: a function marked
/// `memopt.train_step`, or `memopt.eval_step` (which updates nothing).
bool isStepFunction(mlir::Operation *op);

/// Returns the one step function of `module` (isStepFunction) that has a
/// body. Otherwise reports "no function marked 'memopt.train_step' to
/// <purpose>" (or that there are two) on the module and fails.
llvm::FailureOr<mlir::FunctionOpInterface>
findTrainStep(mlir::ModuleOp module, llvm::StringRef purpose);

/// Returns the one function of `module` marked `memopt.loss`. Otherwise
/// reports "<pass> expects exactly one function marked memopt.loss, found
/// N" on the module and fails.
llvm::FailureOr<mlir::FunctionOpInterface>
findLossFunction(mlir::ModuleOp module, llvm::StringRef pass);

/// The loss scaling recorded by `memopt.loss_scale` on a `memopt.loss`
/// function (docs/MixedPrecision.md), with GradScaler's parameters. Its
/// defaults are the only copy of GradScaler's: --memopt-mixed-precision's
/// and the pipeline's options take theirs from here.
struct LossScaleConfig {
  /// Dynamic (GradScaler) or static (a constant scale).
  bool dynamic = true;
  /// The initial scale (dynamic) or the scale (static).
  double scale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
};

/// Reads a `memopt.loss_scale` dictionary; on a malformed one, reports why
/// through `emitError` and fails.
llvm::FailureOr<LossScaleConfig>
parseLossScaleAttr(mlir::Attribute attr,
                   llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Builds the `memopt.loss_scale` dictionary of `config`.
mlir::DictionaryAttr buildLossScaleAttr(mlir::MLIRContext *context,
                                        const LossScaleConfig &config);

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H
