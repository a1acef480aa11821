//===- main.cpp - main of a compiled `train` binary -----------------------===//
//
// Binds the driver to the symbols memopt-compile generates:
// `memopt_train_step` (OUT/train_step.cpp), `memopt_eval_step`
// (OUT/eval_step.cpp) and `memopt_model_json` (OUT/model_info.cpp). It lives in the memopt_driver archive, so that a
// link of those two files against the archive yields the program.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <unistd.h>

extern "C" void memopt_train_step(memopt_context *ctx, void *const *args,
                                  uint8_t *scratch, uint8_t *host_scratch);
// Weak: a program linked without an evaluation step (the driver's tests)
// has none, and the driver says so when asked to evaluate.
extern "C" __attribute__((weak)) void memopt_eval_step(memopt_context *ctx,
                                                       void *const *args,
                                                       uint8_t *scratch,
                                                       uint8_t *host_scratch);
extern "C" const char memopt_model_json[];

int main(int argc, char **argv) {
  // A progress line for a person at a terminal. Under mpirun the ranks'
  // output is a pseudo-terminal whatever mpirun's own is: plain lines.
  const char *term = std::getenv("TERM");
  bool terminal = isatty(STDOUT_FILENO) && term && std::strcmp(term, "dumb") &&
                  !std::getenv("OMPI_COMM_WORLD_SIZE") &&
                  !std::getenv("PMI_SIZE");
  return memopt::driver::runDriver(argc, argv, memopt_model_json,
                                   memopt_train_step, memopt_eval_step,
                                   std::cout, std::cerr, terminal);
}
