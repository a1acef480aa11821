//===- Passes.td - memopt conversion passes ----------------*- tablegen -*-===//
//
// The passes that lower memopt out of the dialect, toward C++.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_PASSES_TD
#define MEMOPT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMemoptToEmitCPass
    : Pass<"convert-memopt-to-emitc", "mlir::ModuleOp"> {
  let summary = "Lower the planned @train_step to EmitC runtime calls";
  let description = [{
    Turns the bufferized function marked `memopt.train_step`, whose
    `memref.alloc`s carry `memopt.offset` and which carries
    `memopt.arena_bytes` (docs/Pipeline.md, section 3), into an EmitC module
    that `translateToCpp` prints as

    ```c++
    extern "C" void memopt_train_step(memopt_context *ctx,
                                      void *const *args, uint8_t *scratch);
    ```

    Argument `i` is `args[i]`, each allocation `scratch + offset`, and each
    `memopt.kernel` one call of its `runtime.h` entry with the dtype, shape
    and attribute arguments as constants. Deallocations vanish. A kernel
    without a runtime entry, or with operands the entry cannot take, is an
    error naming it.
  }];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
  let options = [
    Option<"emitScopes", "emit-scopes", "bool", /*default=*/"false",
           "Before each kernel whose scope differs from the previous one's, "
           "call memopt_set_scope(ctx, \"<memopt.scope>\") so that runtime "
           "errors name the module (memopt-compile sets it for "
           "--target=cuda)">
  ];
  let statistics = [
    Statistic<"numCalls", "calls", "Number of runtime calls emitted">
  ];
}

#endif // MEMOPT_CONVERSION_PASSES_TD
