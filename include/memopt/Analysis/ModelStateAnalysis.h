//===- ModelStateAnalysis.h - model state of a loss function -----*- C++ -*-===//
//
// Collects the parameters and non-trained state of a `memopt.loss` function
// from its argument roles, for the model-state memory account.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_MODELSTATEANALYSIS_H
#define MEMOPT_ANALYSIS_MODELSTATEANALYSIS_H

#include "memopt/Support/ModelState.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

namespace memopt {

/// The parameters ("param" arguments) and buffers ("state" arguments) of a
/// function marked `memopt.loss`. Pure: reads the IR, never changes it.
class ModelStateAnalysis {
public:
  /// Builds the analysis of `op`, a verified `memopt.loss` function.
  explicit ModelStateAnalysis(mlir::Operation *op);

  /// The trainable parameters, in argument order.
  const std::vector<StateTensor> &getParameters() const { return params; }

  /// The non-trained state (e.g. batch-norm running statistics).
  const std::vector<StateTensor> &getBuffers() const { return buffers; }

  /// The account of training these parameters with `optimizer`.
  ModelStateAccount getAccount(OptimizerKind optimizer) const {
    return computeModelStateAccount(params, buffers, optimizer);
  }

private:
  std::vector<StateTensor> params;
  std::vector<StateTensor> buffers;
};

} // namespace memopt

#endif // MEMOPT_ANALYSIS_MODELSTATEANALYSIS_H
