/*===- Program.h - a compiled training step behind a C API --------*- C -*-===*\
|*                                                                            *|
|* `memopt-compile --library` links the generated steps, the driver and the   *|
|* runtime into OUT/libmemopt_program.so, whose C API is this header: what    *|
|* OUT/train does with its command line, a caller (memopt.compile in Python)  *|
|* does batch by batch from its own buffers (docs/Python.md).                 *|
|*                                                                            *|
|* Lifetime: the program owns its arena (parameters, state, optimizer state,  *|
|* scratch) until memopt_program_close. Batch buffers stay the caller's: a    *|
|* step or evaluation reads them during the call only (in place on the host   *|
|* runtime, copied on CUDA), never writes them and keeps no pointer to them.  *|
|* Every function that returns int returns 0 on success, else 1 (bad input)   *|
|* or 2 (runtime error) with the message in memopt_program_error. A program   *|
|* is used by one thread at a time.                                           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MEMOPT_DRIVER_PROGRAM_H
#define MEMOPT_DRIVER_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memopt_program memopt_program;

/// What one training step did.
typedef struct memopt_program_step_result {
  /// The step's number (1 for a fresh program's first).
  uint64_t step;
  float loss;
  /// 1 when loss scaling skipped the update (an overflow).
  int32_t skipped;
  /// The loss scale the step ran with (1 without scaling).
  float loss_scale;
  /// The learning rate the step ran with.
  double lr;
  /// The global gradient norm (0 without --clip-grad-norm).
  float grad_norm;
  double seconds;
} memopt_program_step_result;

/// The model description memopt-compile embedded (docs/Pipeline.md,
/// section 5): the arguments' names, roles, dtypes and shapes.
const char *memopt_program_model_json(void);

/// Opens the program with the tensors of the safetensors file `params_path`:
/// the weights, or a checkpoint (then also the optimizer state and the step
/// count). Null on failure, with the message in `error`.
memopt_program *memopt_program_open(const char *params_path, char *error,
                                    size_t error_size);
void memopt_program_close(memopt_program *program);

/// The last failure's message ("" when none).
const char *memopt_program_error(const memopt_program *program);

/// The batch tensors, in the order memopt_program_step and
/// memopt_program_evaluate take their pointers: the step's inputs and
/// labels, in argument order.
int64_t memopt_program_num_batch_tensors(const memopt_program *program);
const char *memopt_program_batch_tensor_name(const memopt_program *program,
                                             int64_t index);

/// Runs one training step on `batch` (one host pointer per batch tensor,
/// holding the tensor's dtype and shape contiguously). `lr`: the learning
/// rate to run with; NaN for the compiled one (its schedule's value).
int memopt_program_step(memopt_program *program, void *const *batch, double lr,
                        memopt_program_step_result *result);

/// Runs the evaluation step on `batch` (as for memopt_program_step) into
/// `loss`; 1 when the program has no evaluation step.
int memopt_program_evaluate(memopt_program *program, void *const *batch,
                            float *loss);

/// Copies the training-step argument `name` (a weight, state or optimizer
/// state) out of or into the program; `size` must be its bytes.
int memopt_program_read(memopt_program *program, const char *name, void *data,
                        uint64_t size);
int memopt_program_write(memopt_program *program, const char *name,
                         const void *data, uint64_t size);

/// Writes the checkpoint OUT/train writes (weights, state, optimizer state,
/// `driver.steps`, `driver.seed`) to `path`, atomically, with `metadata`
/// ("key=value" lines; may be null) in its header.
int memopt_program_save(memopt_program *program, const char *path,
                        const char *metadata);

#ifdef __cplusplus
}
#endif

#endif // MEMOPT_DRIVER_PROGRAM_H
