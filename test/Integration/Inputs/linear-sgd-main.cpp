//===- linear-sgd-main.cpp - run one generated training step --------------===//
//
// Drives the memopt_train_step that test/Integration/codegen-runs.mlir
// generates: one SGD step of a linear layer, with the expected values worked
// out by hand in that test. Prints the results and "ok" when every value is
// within 1e-5 of the expected one.
//
//===----------------------------------------------------------------------===//

#include "memopt/runtime.h"

#include <cmath>
#include <cstdio>

extern "C" void memopt_train_step(memopt_context *ctx, void *const *args,
                                  uint8_t *scratch, uint8_t *host_scratch);

static bool near(float actual, float expected) {
  return std::fabs(actual - expected) <= 1e-5f;
}

int main() {
  memopt_context *ctx = memopt_context_create();
  auto *scratch = static_cast<uint8_t *>(memopt_arena_allocate(ctx, 768));
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float y[2] = {0.0f, 1.0f};
  float weight[2] = {0.5f, -1.0f};
  float momentumBuffer[2] = {1.0f, -1.0f};
  int64_t step = 0;
  float loss = 0.0f;
  void *const args[] = {x, y, weight, momentumBuffer, &step, &loss};
  memopt_train_step(ctx, args, scratch, nullptr);
  if (memopt_get_status(ctx) != MEMOPT_OK) {
    std::printf("error: %s\n", memopt_get_error_message(ctx));
    return 1;
  }
  std::printf("loss %.6g\n", loss);
  std::printf("weight %.6g %.6g\n", weight[0], weight[1]);
  std::printf("momentum_buffer %.6g %.6g\n", momentumBuffer[0],
              momentumBuffer[1]);
  std::printf("step %lld\n", static_cast<long long>(step));
  bool ok = near(loss, 4.5625f) && near(weight[0], 1.36f) &&
            near(weight[1], 0.44f) && near(momentumBuffer[0], -8.6f) &&
            near(momentumBuffer[1], -14.4f) && step == 1;
  std::printf("%s\n", ok ? "ok" : "mismatch");
  memopt_context_destroy(ctx);
  return ok ? 0 : 1;
}
