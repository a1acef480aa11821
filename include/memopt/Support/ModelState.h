//===- ModelState.h - memory account of the model state ----------*- C++ -*-===//
//
// The part of the memory account that does not depend on activations:
// weights, gradients, optimizer state and non-trained state (buffers), by
// element type. Plain data in, plain data out: the IR-facing analysis
// (memopt/Analysis/ModelStateAnalysis.h) collects the tensors.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_SUPPORT_MODELSTATE_H
#define MEMOPT_SUPPORT_MODELSTATE_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
class StringRef;
} // namespace llvm

namespace memopt {

/// The optimizers whose state memopt accounts for.
enum class OptimizerKind { AdamW, Sgd };

/// Parses "adamw" or "sgd".
std::optional<OptimizerKind> parseOptimizerKind(llvm::StringRef name);

/// One tensor of model state: its element count and element type.
struct StateTensor {
  std::string name;
  int64_t numElements = 0;
  /// The element type's spelling ("f32", "bf16", ...).
  std::string dtype;
  /// Bytes per element.
  int64_t elementBytes = 0;
  /// Mixed precision: the dtype and element bytes of the low-precision copy
  /// the step computes with; empty and 0 when the tensor is used as it is.
  std::string copyDtype;
  int64_t copyElementBytes = 0;
  /// A frozen weight: stored, never trained (no gradient, no optimizer
  /// state).
  bool frozen = false;
};

/// Bytes of one pool of memory, by element type.
struct MemoryPool {
  std::string name;
  std::map<std::string, int64_t> bytesByDtype;

  /// Sum over element types.
  int64_t totalBytes() const;
};

/// The model-state account of one training step.
struct ModelStateAccount {
  OptimizerKind optimizer = OptimizerKind::AdamW;
  int64_t numParameterTensors = 0;
  /// Trainable scalars (elements of all trained parameters).
  int64_t numParameters = 0;
  /// Frozen weights: tensors and scalars.
  int64_t numFrozenTensors = 0;
  int64_t numFrozenParameters = 0;
  /// Weights, frozen weights (only with frozen tensors), master weights
  /// (only with low-precision copies), gradients, optimizer state, buffers,
  /// in that order.
  std::vector<MemoryPool> pools;

  /// Sum over pools.
  int64_t totalBytes() const;
};

/// Accounts for training `params` with `optimizer` while carrying the
/// non-trained `buffers`. Gradients and optimizer moments take each
/// parameter's element type; AdamW keeps two moments and one i64 step
/// counter, SGD one momentum buffer. A parameter with a low-precision copy
/// (mixed precision) counts the copy as its weight, itself as its master
/// weight, and its gradient in its own type (the gradient the optimizer
/// reads): 2 + 4 + 4 + 8 = 18 bytes for bf16 with AdamW. A frozen tensor
/// counts its own bytes as a frozen weight, and nothing else.
ModelStateAccount computeModelStateAccount(
    const std::vector<StateTensor> &params,
    const std::vector<StateTensor> &buffers, OptimizerKind optimizer);

/// Prints `account` as an aligned table, with exact byte counts.
void printModelStateAccount(llvm::raw_ostream &os,
                            const ModelStateAccount &account);

} // namespace memopt

#endif // MEMOPT_SUPPORT_MODELSTATE_H
