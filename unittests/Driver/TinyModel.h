//===- TinyModel.h - the hand-written model of the driver tests -*- C++ -*-===//
//
// `y = x W^T + b`, mean mse_loss, SGD: TinyTrainStep.cpp implements its
// training step with runtime.h calls; DriverTest.cpp recomputes it in double.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_DRIVER_TINYMODEL_H
#define MEMOPT_UNITTESTS_DRIVER_TINYMODEL_H

#include "memopt/runtime.h"

#include <cstdint>

/// SGD learning rate of the tiny model.
constexpr double kTinyLr = 0.1;
/// SGD momentum of the tiny model.
constexpr double kTinyMomentum = 0.9;

/// The model description compiled into the tiny `train`.
extern "C" const char memopt_model_json[];

/// The tiny model's training step.
extern "C" void memopt_train_step(memopt_context *ctx, void *const *args,
                                  uint8_t *scratch, uint8_t *host_scratch);

#endif // MEMOPT_UNITTESTS_DRIVER_TINYMODEL_H
