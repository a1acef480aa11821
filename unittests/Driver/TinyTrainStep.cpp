//===- TinyTrainStep.cpp - a hand-written training step for tests ---------===//
//
// What memopt-compile would generate for `y = x W^T + b` with a mean
// mse_loss and SGD (lr 0.1, momentum 0.9), written by hand against
// runtime.h: the two symbols a compiled `train` links, so that the driver
// is tested without the compiler. Arguments, in order:
//   x [4, 3] input, y [4, 2] label, fc.weight [2, 3] param, fc.bias [2]
//   param, optimizer.fc.weight.momentum_buffer, optimizer.fc.bias.
//   momentum_buffer, optimizer.step (i64 scalar), loss (f32 scalar).
//
//===----------------------------------------------------------------------===//

#include "TinyModel.h"

#include "memopt/runtime.h"

extern "C" const char memopt_model_json[] = R"memopt({
  "arena_bytes": 1792,
  "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9,
                "weight_decay": 0.0},
  "arguments": [
    {"name": "x", "role": "input", "dtype": "f32", "shape": [4, 3]},
    {"name": "y", "role": "label", "dtype": "f32", "shape": [4, 2]},
    {"name": "fc.weight", "role": "param", "dtype": "f32", "shape": [2, 3]},
    {"name": "fc.bias", "role": "param", "dtype": "f32", "shape": [2]},
    {"name": "optimizer.fc.weight.momentum_buffer", "role": "optim",
     "dtype": "f32", "shape": [2, 3]},
    {"name": "optimizer.fc.bias.momentum_buffer", "role": "optim",
     "dtype": "f32", "shape": [2]},
    {"name": "optimizer.step", "role": "optim", "dtype": "i64", "shape": []},
    {"name": "loss", "role": "loss", "dtype": "f32", "shape": []}
  ]
})memopt";

extern "C" void memopt_train_step(memopt_context *ctx, void *const *args,
                                  uint8_t *scratch, uint8_t *host_scratch) {
  const void *x = args[0];
  const void *y = args[1];
  void *weight = args[2];
  void *bias = args[3];
  void *weightBuffer = args[4];
  void *biasBuffer = args[5];
  auto *step = static_cast<int64_t *>(args[6]);
  auto *loss = static_cast<float *>(args[7]);

  void *h = scratch + 0;
  void *biasRows = scratch + 256;
  void *prediction = scratch + 512;
  auto *gradLoss = reinterpret_cast<float *>(scratch + 768);
  void *gradPrediction = scratch + 1024;
  void *gradWeight = scratch + 1280;
  void *gradBias = scratch + 1536;

  const int64_t biasShape[] = {2};
  const int64_t rowsShape[] = {4, 2};
  const int64_t biasDims[] = {1};

  // Forward.
  memopt_matmul(ctx, MEMOPT_F32, x, weight, h, 1, 1, 4, 2, 3, 0, 1, MEMOPT_F32);
  memopt_broadcast(ctx, MEMOPT_F32, bias, 1, biasShape, biasDims, biasRows, 2,
                   rowsShape);
  memopt_binary(ctx, MEMOPT_BINARY_ADD, MEMOPT_F32, h, biasRows, prediction, 8);
  memopt_mse_loss(ctx, MEMOPT_F32, prediction, y, loss, 8,
                  MEMOPT_REDUCTION_MEAN);

  // Backward.
  memopt_fill(ctx, MEMOPT_F32, gradLoss, 1, 1.0);
  memopt_mse_loss_grad(ctx, MEMOPT_F32, prediction, y, gradLoss, gradPrediction,
                       8, MEMOPT_REDUCTION_MEAN);
  memopt_matmul(ctx, MEMOPT_F32, gradPrediction, x, gradWeight, 1, 1, 2, 3, 4,
                1, 0, MEMOPT_F32);
  memopt_reduce(ctx, MEMOPT_REDUCE_SUM, MEMOPT_F32, gradPrediction, MEMOPT_F32,
                gradBias, 1, 4, 2);

  // Update.
  memopt_increment(ctx, step, nullptr, step);
  memopt_sgd_update(ctx, MEMOPT_F32, weight, gradWeight, weightBuffer, nullptr,
                    weight, weightBuffer, 6, kTinyLr, kTinyMomentum, 0.0);
  memopt_sgd_update(ctx, MEMOPT_F32, bias, gradBias, biasBuffer, nullptr, bias,
                    biasBuffer, 2, kTinyLr, kTinyMomentum, 0.0);
}
