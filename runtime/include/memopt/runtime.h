/*===- runtime.h - memopt runtime C ABI ---------------------------*- C -*-===*\
|*                                                                            *|
|* The interface between the C++ that `--convert-memopt-to-emitc` generates   *|
|* and a runtime: `runtime/host` (portable C++, OpenBLAS) or `runtime/cuda`.  *|
|* Plain C types only, so that C, C++ and CUDA code include it alike.         *|
|*                                                                            *|
|* Conventions (docs/Runtime.md has the full description):                    *|
|*  - Every tensor is a dense row-major buffer inside the context's arena (or *|
|*    any memory the runtime can address: host memory for the host runtime,  *|
|*    device memory for the CUDA one). Shapes are int64_t element counts.     *|
|*  - Error model: sticky first error. Kernel entries return nothing; the     *|
|*    first failure is recorded in the context with a message that names the *|
|*    entry (e.g. "memopt_embedding: index 105 out of range [0, 100)"), and   *|
|*    every later entry is a no-op until memopt_clear_error. The driver       *|
|*    checks memopt_get_status once per step.                                 *|
|*  - Float tensors are f32, f16 or bf16 storage; kernels compute in f32      *|
|*    (reductions accumulate in at least f32) and round the result once, to   *|
|*    nearest even.                                                           *|
|*  - Unless an entry says otherwise, an output may alias an input only for   *|
|*    elementwise entries (same shape, same dtype), which is what the buffer  *|
|*    planner's in-place reuse produces.                                      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MEMOPT_RUNTIME_H
#define MEMOPT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Types
 *===----------------------------------------------------------------------===*/

/// Opaque runtime state: the arena, scratch workspace, step counter, timers,
/// the sticky error and (CUDA) the stream and library handles. One thread uses
/// a context at a time.
typedef struct memopt_context memopt_context;

/// Element types. I1 is stored as one byte per element (0 or 1).
typedef enum memopt_dtype {
  MEMOPT_F32 = 0,
  MEMOPT_F16 = 1,
  MEMOPT_BF16 = 2,
  MEMOPT_I32 = 3,
  MEMOPT_I64 = 4,
  MEMOPT_I1 = 5
} memopt_dtype;

/// Status codes recorded by the context. MEMOPT_OK is zero.
typedef enum memopt_status {
  MEMOPT_OK = 0,
  /// A shape, attribute or dtype argument the entry does not accept.
  MEMOPT_ERROR_INVALID_ARGUMENT = 1,
  /// An index (embedding row, class label) outside its range.
  MEMOPT_ERROR_INDEX_OUT_OF_RANGE = 2,
  /// Memory allocation failed (arena or workspace).
  MEMOPT_ERROR_OUT_OF_MEMORY = 3,
  /// The device or a device library (CUDA, cuBLASLt) reported an error.
  MEMOPT_ERROR_DEVICE = 4,
  /// A collective (data parallelism) failed: another rank, the network.
  MEMOPT_ERROR_COLLECTIVE = 5
} memopt_status;

/// Elementwise unary ops (`memopt.neg` ... `memopt.trunc`).
typedef enum memopt_unary_op {
  MEMOPT_UNARY_NEG = 0,
  MEMOPT_UNARY_EXP = 1,
  MEMOPT_UNARY_LOG = 2,
  MEMOPT_UNARY_SQRT = 3,
  MEMOPT_UNARY_RSQRT = 4,
  MEMOPT_UNARY_TANH = 5,
  MEMOPT_UNARY_SIGMOID = 6,
  MEMOPT_UNARY_RELU = 7,
  MEMOPT_UNARY_SILU = 8,
  /// x * Phi(x) with the exact (erf) Gaussian CDF.
  MEMOPT_UNARY_GELU = 9,
  /// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  MEMOPT_UNARY_GELU_TANH = 10,
  /// x * min(max(x + 3, 0), 6) / 6, as F.hardswish.
  MEMOPT_UNARY_HARDSWISH = 11,
  /// min(max(x + 3, 0), 6) / 6, as F.hardsigmoid.
  MEMOPT_UNARY_HARDSIGMOID = 12,
  /// x * tanh(softplus(x)), softplus(x) = log(1 + e^x), as F.mish.
  MEMOPT_UNARY_MISH = 13,
  MEMOPT_UNARY_ABS = 14,
  /// -1, 0 or 1; NaN at NaN (torch.sign).
  MEMOPT_UNARY_SIGN = 15,
  MEMOPT_UNARY_SIN = 16,
  MEMOPT_UNARY_COS = 17,
  MEMOPT_UNARY_ERF = 18,
  /// e^x - 1, exact near 0.
  MEMOPT_UNARY_EXPM1 = 19,
  /// log(1 + x), exact near 0.
  MEMOPT_UNARY_LOG1P = 20,
  /// log(1 + e^x); x itself above 20 (F.softplus's threshold).
  MEMOPT_UNARY_SOFTPLUS = 21,
  MEMOPT_UNARY_TAN = 22,
  MEMOPT_UNARY_ASIN = 23,
  MEMOPT_UNARY_ACOS = 24,
  MEMOPT_UNARY_ATAN = 25,
  MEMOPT_UNARY_FLOOR = 26,
  MEMOPT_UNARY_CEIL = 27,
  /// To the nearest integer, halves to even (torch.round).
  MEMOPT_UNARY_ROUND = 28,
  /// Toward zero (torch.trunc).
  MEMOPT_UNARY_TRUNC = 29,
  /// sin(pi x) / (pi x) with pi x rounded to f32 first, 1 at 0 (torch.sinc).
  MEMOPT_UNARY_SINC = 30
} memopt_unary_op;

/// Elementwise binary ops on two tensors of one shape and dtype.
typedef enum memopt_binary_op {
  MEMOPT_BINARY_ADD = 0,
  MEMOPT_BINARY_SUB = 1,
  MEMOPT_BINARY_MUL = 2,
  MEMOPT_BINARY_DIV = 3,
  /// max(lhs, rhs); NaN if either is NaN (as torch.maximum).
  MEMOPT_BINARY_MAXIMUM = 4
} memopt_binary_op;

/// Elementwise ops of a tensor and a compile-time scalar.
typedef enum memopt_scalar_op {
  MEMOPT_SCALAR_ADD = 0,
  MEMOPT_SCALAR_MUL = 1,
  /// x ^ value (powf).
  MEMOPT_SCALAR_POW = 2
} memopt_scalar_op;

/// Activation gradients: `memopt.*_grad`. The first operand is the forward
/// input (RELU, SILU, GELU, GELU_TANH, HARDSWISH, HARDSIGMOID, MISH) or the
/// forward output (TANH, SIGMOID).
typedef enum memopt_activation_grad_op {
  MEMOPT_GRAD_RELU = 0,
  MEMOPT_GRAD_SILU = 1,
  MEMOPT_GRAD_TANH = 2,
  MEMOPT_GRAD_SIGMOID = 3,
  MEMOPT_GRAD_GELU = 4,
  MEMOPT_GRAD_GELU_TANH = 5,
  /// x < -3: 0; x <= 3: grad * (x / 3 + 1/2); otherwise (and NaN) grad, as
  /// PyTorch's hardswish_backward.
  MEMOPT_GRAD_HARDSWISH = 6,
  /// -3 < x < 3: grad / 6; otherwise (and NaN) 0.
  MEMOPT_GRAD_HARDSIGMOID = 7,
  /// grad * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x)).
  MEMOPT_GRAD_MISH = 8
} memopt_activation_grad_op;

/// Reductions of `memopt.reduce_*`.
typedef enum memopt_reduce_op {
  MEMOPT_REDUCE_SUM = 0,
  MEMOPT_REDUCE_MEAN = 1,
  MEMOPT_REDUCE_MAX = 2,
  /// The sum of x * x (gradient clipping's norm).
  MEMOPT_REDUCE_SUM_SQUARES = 3
} memopt_reduce_op;

/// Loss reductions; the values match `memopt::LossReduction`.
typedef enum memopt_loss_reduction {
  MEMOPT_REDUCTION_MEAN = 0,
  MEMOPT_REDUCTION_SUM = 1
} memopt_loss_reduction;

/*===----------------------------------------------------------------------===*
 * Context, errors, arena, step counter, timing
 *===----------------------------------------------------------------------===*/

/// Creates a context with no arena. Returns NULL only if the context itself
/// cannot be allocated (or, for CUDA, no device is usable).
memopt_context *memopt_context_create(void);

/// Frees the arena, the workspace and the context. NULL is a no-op.
void memopt_context_destroy(memopt_context *ctx);

/// The first recorded error, or MEMOPT_OK.
memopt_status memopt_get_status(const memopt_context *ctx);

/// The message of the first recorded error ("" when none). It names the
/// failing entry. Valid until the next memopt_clear_error or destroy.
const char *memopt_get_error_message(const memopt_context *ctx);

/// Forgets the recorded error so that entries run again.
void memopt_clear_error(memopt_context *ctx);

/// Allocates the arena: one block of `bytes` bytes, 256-byte aligned and
/// zero-filled, replacing (and freeing) any previous arena. Returns its base,
/// or NULL after recording MEMOPT_ERROR_OUT_OF_MEMORY. Generated code
/// addresses every buffer as base + planned offset.
void *memopt_arena_allocate(memopt_context *ctx, uint64_t bytes);

/// The arena's base (NULL before memopt_arena_allocate).
void *memopt_arena_base(const memopt_context *ctx);

/// The arena's size in bytes.
uint64_t memopt_arena_size(const memopt_context *ctx);

/// The peak number of bytes of device memory this context has held at once:
/// arena plus kernel workspace (f32 staging of f16/bf16 operands, im2col).
uint64_t memopt_memory_high_water(const memopt_context *ctx);

/// Device memory this context's allocations hold as the device itself
/// reports it (CUDA: the growth of cudaMemGetInfo's used bytes across the
/// arena's and the workspace's cudaMalloc, so it includes the allocator's
/// rounding); the host runtime returns memopt_memory_high_water.
uint64_t memopt_device_memory_measured(const memopt_context *ctx);

/// Which implementation the context's library calls took, as
/// space-separated `key=count` pairs of distinct shapes, for `OUT/train
/// --stats`: on the host "conv_onednn=N conv_im2col=M" (convolutions on
/// oneDNN's JIT kernels and on im2col + GEMM, docs/Runtime.md); on CUDA
/// "gemm_cublaslt=N gemm_per_element=M gemm_fallback=K conv_cudnn=C" (one
/// cuBLASLt call, one per batch element, memopt's own kernel). A systematic
/// fallback shows here rather than only as a slow step. Writes at most
/// `size` bytes with the terminating NUL; returns the full length.
int memopt_kernel_paths(const memopt_context *ctx, char *out, size_t size);

/// The runtime's name: "host" or "cuda".
const char *memopt_runtime_name(void);

/// Why memopt_context_create just returned NULL on this thread (e.g. "no
/// CUDA device (...)"). Meaningful only right after such a failure.
const char *memopt_context_create_error(void);

/// Whether the last memopt_context_create on this thread failed because the
/// machine has no device at all (1), rather than for another reason (0): a
/// driver too old for the runtime, a library that cannot start, memory.
/// Tests skip only on the first; the host runtime always answers 0.
int memopt_context_create_found_no_device(void);

/// Names the module scope (`memopt.scope`, e.g. "transformer.h.0.attn") of
/// the entries that follow, for error messages; generated code calls it when
/// the scope changes (memopt-compile --target=cuda). `scope` must stay valid
/// (generated code passes string literals). The CUDA runtime appends
/// " [scope <scope>]" to the errors it records; the host runtime ignores it.
void memopt_set_scope(memopt_context *ctx, const char *scope);

/// Bytes of the CUDA runtime's workspace: one allocation made with the
/// context, shared by cuBLASLt and the kernels that need f32 scratch. The
/// memory report's `workspace` pool for --target=cuda.
#define MEMOPT_CUDA_WORKSPACE_BYTES ((uint64_t)32 << 20)

/// Sets the training step that dropout reads (its counter's high word).
void memopt_set_step(memopt_context *ctx, uint64_t step);

/// The current training step (0 after create).
uint64_t memopt_get_step(const memopt_context *ctx);

/// Adds one to the training step; the driver calls it after each step.
void memopt_advance_step(memopt_context *ctx);

/// Sets the factor every optimizer update multiplies its learning rate by
/// (1 after create): a learning-rate schedule's factor for the next step
/// (LrSchedule.h), as torch's LambdaLR multiplies each group's base lr. The
/// program's lr is a runtime scalar, so one compiled step serves any
/// schedule. A negative or non-finite factor is an invalid argument.
void memopt_set_lr_scale(memopt_context *ctx, double scale);

/// The factor memopt_set_lr_scale set (1 after create).
double memopt_get_lr_scale(const memopt_context *ctx);

/// Starts the step timer (on CUDA: records an event on the stream).
void memopt_step_begin(memopt_context *ctx);

/// Stops the step timer after all queued work finished and returns the
/// seconds since memopt_step_begin (also kept for memopt_last_step_seconds).
double memopt_step_end(memopt_context *ctx);

/// The duration of the last timed step in seconds (0 before any).
double memopt_last_step_seconds(const memopt_context *ctx);

/// Waits until all queued work finished (a no-op on the host).
void memopt_synchronize(memopt_context *ctx);

/*===----------------------------------------------------------------------===*
 * Memory
 *===----------------------------------------------------------------------===*/

/// Size in bytes of one element of `dtype` (I1: 1), or 0 if unknown.
size_t memopt_dtype_size(memopt_dtype dtype);

/// Copies `bytes` bytes from host memory into runtime memory.
void memopt_copy_from_host(memopt_context *ctx, void *dst, const void *src,
                           uint64_t bytes);

/// Copies `bytes` bytes from runtime memory into host memory.
void memopt_copy_to_host(memopt_context *ctx, void *dst, const void *src,
                         uint64_t bytes);

/// Copies `bytes` bytes between runtime buffers (they may overlap).
void memopt_copy(memopt_context *ctx, void *dst, const void *src,
                 uint64_t bytes);

/// Sets `n` elements of `dtype` to `value` (rounded to nearest even for
/// f16/bf16, truncated for integers, `value != 0` for I1).
void memopt_fill(memopt_context *ctx, memopt_dtype dtype, void *dst, int64_t n,
                 double value);

/*===----------------------------------------------------------------------===*
 * Casts, selection, elementwise
 *===----------------------------------------------------------------------===*/

/// `memopt.cast`: converts `n` elements between dtypes other than i1.
/// Between floats, and from an index to a float, it rounds to nearest even
/// (f32 -> f16 overflows to inf; NaN stays NaN); from a float to an index
/// it truncates toward zero, and NaN, the infinities and values out of
/// range give the index type's lowest value; i64 -> i32 keeps the low 32
/// bits.
void memopt_cast(memopt_context *ctx, memopt_dtype in_dtype, const void *input,
                 memopt_dtype out_dtype, void *output, int64_t n);

/// `memopt.where`: out[i] = cond[i] ? a[i] : b[i] over `n` elements of
/// `dtype` (any dtype; cond is I1).
void memopt_where(memopt_context *ctx, memopt_dtype dtype, const uint8_t *cond,
                  const void *a, const void *b, void *out, int64_t n);

/// `memopt.masked_fill`: out[i] = mask[i] ? value : in[i].
void memopt_masked_fill(memopt_context *ctx, memopt_dtype dtype,
                        const void *input, const uint8_t *mask, double value,
                        void *out, int64_t n);

/// Elementwise comparisons; an ordered one (all but NE) is false when either
/// element is NaN, NE true (C's operators, torch.eq/ne/lt/le/gt/ge).
typedef enum memopt_compare_op {
  MEMOPT_COMPARE_EQ = 0,
  MEMOPT_COMPARE_NE = 1,
  MEMOPT_COMPARE_LT = 2,
  MEMOPT_COMPARE_LE = 3,
  MEMOPT_COMPARE_GT = 4,
  MEMOPT_COMPARE_GE = 5
} memopt_compare_op;

/// `memopt.compare`: out[i] = lhs[i] (op) rhs[i], 0 or 1, over `n` elements
/// of a float or index `dtype` (f16 and bf16 compared exactly).
void memopt_compare(memopt_context *ctx, memopt_compare_op op,
                    memopt_dtype dtype, const void *lhs, const void *rhs,
                    uint8_t *out, int64_t n);

/// Elementwise unary op over `n` elements of float `dtype`.
void memopt_unary(memopt_context *ctx, memopt_unary_op op, memopt_dtype dtype,
                  const void *input, void *out, int64_t n);

/// Elementwise binary op over `n` elements of float `dtype` (broadcasting is
/// explicit, through memopt_broadcast).
void memopt_binary(memopt_context *ctx, memopt_binary_op op, memopt_dtype dtype,
                   const void *lhs, const void *rhs, void *out, int64_t n);

/// Elementwise op with a scalar: input (op) value. The scalar is rounded to
/// f32 first.
void memopt_scalar(memopt_context *ctx, memopt_scalar_op op, memopt_dtype dtype,
                   const void *input, double value, void *out, int64_t n);

/// Activation gradient: out = VJP(x_or_y, grad), see
/// memopt_activation_grad_op for which forward value `x_or_y` is.
void memopt_activation_grad(memopt_context *ctx, memopt_activation_grad_op op,
                            memopt_dtype dtype, const void *x_or_y,
                            const void *grad, void *out, int64_t n);

/// `memopt.clamp`: out[i] = min(max(in[i], lo), hi) over `n` elements of
/// float `dtype`, NaN propagating (torch.clamp). A missing bound is
/// -INFINITY (`lo`) or INFINITY (`hi`); neither is NaN and lo <= hi. The
/// bounds are rounded to f32 first.
void memopt_clamp(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  double lo, double hi, void *out, int64_t n);

/// `memopt.clamp_grad`: out[i] = grad[i] where input[i] is inside the bounds,
/// else 0. `inclusive` != 0: lo <= x <= hi, a NaN input gets 0 (torch.clamp);
/// `inclusive` == 0: lo < x < hi, a NaN input gets grad (F.hardtanh,
/// F.relu6). An infinite bound stands for a missing one and excludes
/// nothing. Bounds as memopt_clamp's.
void memopt_clamp_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const void *grad, double lo,
                       double hi, int inclusive, void *out, int64_t n);

/// `memopt.scale_by`: out[i] = input[i] * *factor in f32, `factor` one f32
/// that the step computed (gradient clipping's coefficient). `out` may be
/// `input`.
void memopt_scale_by(memopt_context *ctx, memopt_dtype dtype,
                     const void *input, const float *factor, void *out,
                     int64_t n);

/*===----------------------------------------------------------------------===*
 * Shapes (any dtype; they move elements of memopt_dtype_size bytes)
 *===----------------------------------------------------------------------===*/

/// `memopt.broadcast`: input dimension i maps to output dimension dims[i]
/// (strictly increasing); an input dimension of size 1 is repeated.
void memopt_broadcast(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t in_rank,
                      const int64_t *in_shape, const int64_t *dims, void *out,
                      int64_t out_rank, const int64_t *out_shape);

/// `memopt.transpose`: output dimension i is input dimension perm[i].
void memopt_transpose(memopt_context *ctx, memopt_dtype dtype,
                      const void *input, int64_t rank, const int64_t *in_shape,
                      const int64_t *perm, void *out);

/// `memopt.slice`: in each dimension d takes starts[d], starts[d] +
/// strides[d], ... below limits[d] (strides > 0).
void memopt_slice(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  int64_t rank, const int64_t *in_shape, const int64_t *starts,
                  const int64_t *limits, const int64_t *strides, void *out);

/// `memopt.slice_grad`: `out` (shape `in_shape`, the sliced operand's) is
/// zero except at the sliced positions, which receive `grad`.
void memopt_slice_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *grad, int64_t rank, const int64_t *in_shape,
                       const int64_t *starts, const int64_t *limits,
                       const int64_t *strides, void *out);

/// `memopt.concat` after collapsing dims: input j is [outer, sizes[j],
/// inner], the output [outer, sum(sizes), inner].
void memopt_concat(memopt_context *ctx, memopt_dtype dtype, int64_t num_inputs,
                   const void *const *inputs, const int64_t *sizes, void *out,
                   int64_t outer, int64_t inner);

/*===----------------------------------------------------------------------===*
 * Reductions, softmax, normalisation
 *===----------------------------------------------------------------------===*/

/// `memopt.reduce_*` over the middle extent of [outer, reduced, inner] into
/// [outer, inner] (the caller collapses contiguous reduced dimensions; a
/// non-contiguous set takes one call per run). Accumulates in at least f32,
/// sequentially; MAX propagates NaN. `out_dtype` is `in_dtype` or F32, or
/// any float dtype when `in_dtype` is F32 (memopt/runtime/DTypeRules.h).
void memopt_reduce(memopt_context *ctx, memopt_reduce_op op,
                   memopt_dtype in_dtype, const void *input,
                   memopt_dtype out_dtype, void *out, int64_t outer,
                   int64_t reduced, int64_t inner);

/// `memopt.softmax` along the middle extent of [outer, dim, inner],
/// subtracting the maximum first. `out` may alias `input`.
void memopt_softmax(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t outer, int64_t dim, int64_t inner);

/// `memopt.log_softmax`: x - max - log(sum(exp(x - max))).
void memopt_log_softmax(memopt_context *ctx, memopt_dtype dtype,
                        const void *input, void *out, int64_t outer,
                        int64_t dim, int64_t inner);

/// `memopt.softmax_grad`: y * (g - sum(g * y)) from the softmax output y.
void memopt_softmax_grad(memopt_context *ctx, memopt_dtype dtype,
                         const void *output, const void *grad, void *out,
                         int64_t outer, int64_t dim, int64_t inner);

/// `memopt.log_softmax_grad`: g - exp(y) * sum(g) from the output y.
void memopt_log_softmax_grad(memopt_context *ctx, memopt_dtype dtype,
                             const void *output, const void *grad, void *out,
                             int64_t outer, int64_t dim, int64_t inner);

/// `memopt.layer_norm` over the last `cols` elements of each of `rows` rows:
/// y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) with
/// the biased variance. `mean` and `rstd` are f32 [rows]. `weight` and
/// `bias` ([cols]) have `w_dtype`.
void memopt_layer_norm(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, memopt_dtype w_dtype,
                       const void *weight, const void *bias, void *out,
                       float *mean, float *rstd, int64_t rows, int64_t cols,
                       double eps);

/// `memopt.layer_norm_grad`: gradients of input (dtype), weight and bias
/// (w_dtype) from the result gradient and the saved mean and rstd.
void memopt_layer_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            memopt_dtype w_dtype, const void *weight,
                            const float *mean, const float *rstd,
                            void *grad_input, void *grad_weight,
                            void *grad_bias, int64_t rows, int64_t cols);

/// `memopt.rms_norm`: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) +
/// eps) per row; `rstd` is f32 [rows].
void memopt_rms_norm(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     memopt_dtype w_dtype, const void *weight, void *out,
                     float *rstd, int64_t rows, int64_t cols, double eps);

/// `memopt.rms_norm_grad`: gradients of input and weight.
void memopt_rms_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *grad, const void *input,
                          memopt_dtype w_dtype, const void *weight,
                          const float *rstd, void *grad_input,
                          void *grad_weight, int64_t rows, int64_t cols);

/// `memopt.batch_norm` in training mode on [batch, channels, spatial]:
/// per-channel batch statistics over batch * spatial (> 1) elements; `mean`
/// and `rstd` (biased variance) are saved; running stats become (1 -
/// momentum) * old + momentum * batch, with the unbiased variance. All
/// per-channel tensors are f32 [channels]; new_running_* may alias
/// running_*.
void memopt_batch_norm(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const float *weight,
                       const float *bias, const float *running_mean,
                       const float *running_var, void *out, float *mean,
                       float *rstd, float *new_running_mean,
                       float *new_running_var, int64_t batch, int64_t channels,
                       int64_t spatial, double eps, double momentum);

/// `memopt.batch_norm_grad`: gradients of input, weight and bias.
void memopt_batch_norm_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            const float *weight, const float *mean,
                            const float *rstd, void *grad_input,
                            float *grad_weight, float *grad_bias, int64_t batch,
                            int64_t channels, int64_t spatial);

/*===----------------------------------------------------------------------===*
 * Matrix products, embeddings, convolution, pooling
 *===----------------------------------------------------------------------===*/

/// `memopt.matmul`: for each batch element, c = op(a) * op(b) with op(a)
/// [m, k] (a stored [k, m] if trans_a) and op(b) [k, n] (b stored [n, k] if
/// trans_b), c [m, n]. batch_a and batch_b are equal, or one of them is 1
/// (a matrix shared by every batch element); c has max(batch_a, batch_b)
/// matrices. a and b have `dtype`; products accumulate in f32; c has
/// `out_dtype` (`dtype` or F32).
void memopt_matmul(memopt_context *ctx, memopt_dtype dtype, const void *a,
                   const void *b, void *c, int64_t batch_a, int64_t batch_b,
                   int64_t m, int64_t n, int64_t k, int trans_a, int trans_b,
                   memopt_dtype out_dtype);

/// The bytes of an NF4-packed tensor of `n` elements (QLoRA's frozen
/// weights, memopt/runtime/Nf4Math.h): the 4-bit codes, two per byte, one
/// 8-bit code per block of 64 elements (its double-quantized absmax), zero
/// padding to 4 bytes, one f32 scale per 256 blocks and one f32 offset (4
/// bytes for n = 0; 0 for a negative n).
static inline uint64_t memopt_nf4_packed_bytes(int64_t n) {
  if (n < 0)
    return 0;
  uint64_t u = (uint64_t)n, blocks = (u + 63) / 64;
  return ((u + 1) / 2 + blocks + 3) / 4 * 4 + 4 * ((blocks + 255) / 256) + 4;
}

/// The bytes of scratch memopt_nf4_matmul needs for an [n, k] (or [k, n])
/// weight: one chunk of op(w)'s columns in f32, 4 * k * chunk rounded up to
/// 256, with chunk = max(1, min(ceil(n / 8), floor(8 MiB / (4 k)))): an
/// eighth of the weight's columns, and at most 2^21 weight elements, so
/// that the scratch stays small beside a 16-bit copy of the weight at any
/// size while a large weight's chunks keep their GEMMs at full speed (on
/// the host, 1 and 2 MiB chunks of a 4096 x 4096 weight measured slower,
/// 32 MiB no faster). The compiler plans a buffer of this size next to the
/// call; 0 when n or k is <= 0.
static inline uint64_t memopt_nf4_matmul_scratch_bytes(int64_t n, int64_t k) {
  if (n <= 0 || k <= 0)
    return 0;
  uint64_t column = 4 * (uint64_t)k, chunk = ((uint64_t)8 << 20) / column;
  uint64_t eighth = ((uint64_t)n + 7) / 8;
  if (chunk > eighth)
    chunk = eighth;
  if (chunk < 1)
    chunk = 1;
  return (column * chunk + 255) / 256 * 256;
}

/// `memopt.nf4_matmul`: c [m, n] = a [m, k] * op(w) with w the NF4-packed
/// (memopt_nf4_packed_bytes) frozen weight of logical shape [n, k] when
/// trans_b (nn.Linear's y = x w^T) and [k, n] otherwise (the input
/// gradient, dy w). a and c have `dtype`; each weight element is
/// dequantized in f32 and rounded once to `dtype`; products accumulate in
/// f32 and c is rounded once. No dequantized copy of the weight exists:
/// `chunk` = min(n, scratch_bytes / (4 k)) columns of op(w) at a time are
/// dequantized into `scratch` and one GEMM writes c's columns of the chunk,
/// as memopt_matmul of a and that chunk of the dequantized weight computes
/// them (on the host, the same bits; with one chunk, memopt_matmul's bits
/// for the whole weight). `scratch` holds at least one column (4 k bytes);
/// memopt_nf4_matmul_scratch_bytes(n, k) is the planned size.
void memopt_nf4_matmul(memopt_context *ctx, memopt_dtype dtype, const void *a,
                       const void *w, void *c, void *scratch,
                       uint64_t scratch_bytes, int64_t m, int64_t n, int64_t k,
                       int trans_b);

/// `memopt.embedding`: out[i, :] = weight[indices[i], :] for `num_indices`
/// indices (I32 or I64) into a [num_rows, dim] table.
void memopt_embedding(memopt_context *ctx, memopt_dtype dtype,
                      const void *weight, memopt_dtype index_dtype,
                      const void *indices, void *out, int64_t num_indices,
                      int64_t num_rows, int64_t dim);

/// `memopt.embedding_grad`: out ([num_rows, dim]) = 0, then row
/// indices[i] += grad[i, :] in index order (accumulated in f32, so repeated
/// indices sum deterministically), skipping the positions whose index is
/// `padding_idx` (negative: none; otherwise in [0, num_rows)), whose row
/// stays zero.
void memopt_embedding_grad(memopt_context *ctx, memopt_dtype dtype,
                           const void *grad, memopt_dtype index_dtype,
                           const void *indices, void *out, int64_t num_indices,
                           int64_t num_rows, int64_t dim, int64_t padding_idx);

/// `memopt.conv2d` (no bias): input [n, c, h, w], filter [o, c / groups, kh,
/// kw], output [n, o, oh, ow] with oh = (h + 2 pad_h - dil_h (kh - 1) - 1) /
/// stride_h + 1 (likewise ow).
void memopt_conv2d(memopt_context *ctx, memopt_dtype dtype, const void *input,
                   const void *filter, void *out, int64_t n, int64_t c,
                   int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
                   int64_t stride_h, int64_t stride_w, int64_t pad_h,
                   int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t groups);

/// `memopt.conv2d_grad_input`: the input gradient [n, c, h, w] from the
/// output gradient and the filter; the shape arguments are the forward's.
void memopt_conv2d_grad_input(memopt_context *ctx, memopt_dtype dtype,
                              const void *grad, const void *filter,
                              void *grad_input, int64_t n, int64_t c, int64_t h,
                              int64_t w, int64_t o, int64_t kh, int64_t kw,
                              int64_t stride_h, int64_t stride_w, int64_t pad_h,
                              int64_t pad_w, int64_t dil_h, int64_t dil_w,
                              int64_t groups);

/// `memopt.conv2d_grad_filter`: the filter gradient [o, c / groups, kh, kw]
/// from the output gradient and the forward input.
void memopt_conv2d_grad_filter(memopt_context *ctx, memopt_dtype dtype,
                               const void *grad, const void *input,
                               void *grad_filter, int64_t n, int64_t c,
                               int64_t h, int64_t w, int64_t o, int64_t kh,
                               int64_t kw, int64_t stride_h, int64_t stride_w,
                               int64_t pad_h, int64_t pad_w, int64_t dil_h,
                               int64_t dil_w, int64_t groups);

/// `memopt.max_pool2d` on [n, c, h, w] (floor mode, padding is -inf):
/// oh = (h + 2 pad_h - kh) / stride_h + 1. NaN propagates.
void memopt_max_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w);

/// `memopt.max_pool2d_grad`: routes each output gradient to its window's
/// maximum in `input` (the first in row-major order on ties; in a window
/// with NaNs, its last NaN, as PyTorch); `grad_input` has the input's shape.
void memopt_max_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, const void *input,
                            void *grad_input, int64_t n, int64_t c, int64_t h,
                            int64_t w, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w);

/// `memopt.avg_pool2d` (floor mode, padding counted in the divisor kh * kw).
void memopt_avg_pool2d(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, void *out, int64_t n, int64_t c,
                       int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                       int64_t pad_w);

/// `memopt.avg_pool2d_grad`: spreads each output gradient / (kh * kw) over
/// its window; `grad_input` is [n, c, h, w].
void memopt_avg_pool2d_grad(memopt_context *ctx, memopt_dtype dtype,
                            const void *grad, void *grad_input, int64_t n,
                            int64_t c, int64_t h, int64_t w, int64_t kh,
                            int64_t kw, int64_t stride_h, int64_t stride_w,
                            int64_t pad_h, int64_t pad_w);

/*===----------------------------------------------------------------------===*
 * Fused attention (FlashAttention-style: the scores never exist whole)
 *===----------------------------------------------------------------------===*/

/// `memopt.attention` over `batch * heads` independent problems, each with
/// q [sq, d], k [sk, d], v [sk, dv] and out [sq, dv], dense row-major and
/// consecutive (problem p = b * heads + h starts at p * sq * d in q, and so
/// on); q, k, v and out have `dtype`. For query row i and key row j:
///   s[i, j] = masked(i, j) ? mask_value : scale * (q[i] . k[j])
///   masked(i, j) = (causal && j > i) || (mask && mask[b * mask_strides[0] +
///                  h * mask_strides[1] + i * mask_strides[2] +
///                  j * mask_strides[3]] != 0)
///   p[i, :] = softmax(s[i, :]);  p'[i, j] = keep(e) ? p[i, j] / (1 - dropout_p)
///                                                   : 0
///   out[i] = sum_j p'[i, j] v[j];  lse[i] = log(sum_j exp(s[i, j])) (f32)
/// with e = offset + ((b * heads + h) * sq + i) * sk + j and keep(e) the
/// mask memopt_dropout draws for element e with the same (dropout_p, seed,
/// stream) and the context's step: the fused op draws the mask the unfused
/// softmax -> dropout would. `mask` is I1 (NULL: none), a stride of 0
/// broadcasts that dimension. Scores, the softmax and the sums are computed
/// in f32 block by block and never stored; out is rounded once. A row whose
/// every score is -inf has lse -inf and a NaN output, as softmax.
void memopt_attention(memopt_context *ctx, memopt_dtype dtype, const void *q,
                      const void *k, const void *v, const uint8_t *mask,
                      const int64_t *mask_strides, void *out, float *lse,
                      int64_t batch, int64_t heads, int64_t sq, int64_t sk,
                      int64_t d, int64_t dv, double scale, int causal,
                      double mask_value, double dropout_p, uint64_t seed,
                      uint64_t stream, uint64_t offset);

/// `memopt.attention_grad`: grad_q [.., sq, d], grad_k [.., sk, d] and
/// grad_v [.., sk, dv] (`dtype`) from the forward's operands and attributes,
/// its out and lse, and grad_out [.., sq, dv]. The scores are recomputed
/// block by block from q, k and lse (FlashAttention-2's backward), with
/// delta[i] = grad_out[i] . out[i] from `out` as stored. A masked score is a
/// constant: it passes no gradient to q and k (as masked_fill's backward);
/// a row whose every score is -inf passes none at all. Every gradient
/// accumulates in f32 and is rounded once, in a fixed order (deterministic,
/// no atomics).
void memopt_attention_grad(memopt_context *ctx, memopt_dtype dtype,
                           const void *q, const void *k, const void *v,
                           const uint8_t *mask, const int64_t *mask_strides,
                           const void *out, const float *lse,
                           const void *grad_out, void *grad_q, void *grad_k,
                           void *grad_v, int64_t batch, int64_t heads,
                           int64_t sq, int64_t sk, int64_t d, int64_t dv,
                           double scale, int causal, double mask_value,
                           double dropout_p, uint64_t seed, uint64_t stream,
                           uint64_t offset);

/*===----------------------------------------------------------------------===*
 * Randomness
 *===----------------------------------------------------------------------===*/

/// `memopt.dropout` (and its backward, which is the same call on the
/// gradient): out[i] = keep(i / group) ? in[i] * (1 / (1 - p)) : 0 over `n`
/// elements, each `group` consecutive ones sharing a mask bit (1:
/// elementwise; n must be a multiple of it). keep(i) is a pure function of
/// (seed, stream, the context's step, offset + i):
///   K = seed ^ (stream * 0x9E3779B97F4A7C15)          (mod 2^64)
///   key = {lo32(K), hi32(K)}
///   j = offset + i
///   ctr = {lo32(j / 4), hi32(j / 4), lo32(step), hi32(step)}
///   r = Philox4x32-10(ctr, key); bits = r[j % 4]
///   keep = (bits >> 8) >= ceil(p * 2^24)   (i.e. (bits >> 8) * 2^-24 >= p)
/// The scale 1 / (1 - p) is computed in double and rounded to f32; the
/// product is rounded once. `offset` (in mask bits) lets separate calls
/// (micro-batches) draw disjoint masks from one stream. 0 <= p <= 1.
void memopt_dropout(memopt_context *ctx, memopt_dtype dtype, const void *input,
                    void *out, int64_t n, int64_t group, double p,
                    uint64_t seed, uint64_t stream, uint64_t offset);

/// The raw Philox4x32-10 block for (counter, key): a pure function exposed
/// so that other runtimes and tests can check their generator against it.
void memopt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                          uint32_t result[4]);

/*===----------------------------------------------------------------------===*
 * Losses (computed in f32; losses and their incoming gradients are f32
 * scalars)
 *===----------------------------------------------------------------------===*/

/// `memopt.cross_entropy`: logits [rows, classes], labels [rows] (I32 or
/// I64). A row's loss is lse - (1 - label_smoothing) logit[label] -
/// label_smoothing / classes * sum(logits), with label_smoothing in [0, 1)
/// (F.cross_entropy's). Rows whose label is `ignore_index` contribute
/// nothing; MEAN divides by the number of the other rows, and is NaN when
/// every row is ignored (as PyTorch). Other labels must lie in [0, classes).
void memopt_cross_entropy(memopt_context *ctx, memopt_dtype dtype,
                          const void *logits, memopt_dtype label_dtype,
                          const void *labels, float *loss, int64_t rows,
                          int64_t classes, int64_t ignore_index,
                          memopt_loss_reduction reduction,
                          double label_smoothing);

/// `memopt.label_count`: the number of the `n` labels (I32 or I64) that
/// differ from `ignore_index`, as a float (exact below 2^24).
void memopt_label_count(memopt_context *ctx, memopt_dtype label_dtype,
                        const void *labels, float *count, int64_t n,
                        int64_t ignore_index);

/// `memopt.cross_entropy_grad`: grad_loss * (softmax(logits) - (1 -
/// label_smoothing) onehot(label) - label_smoothing / classes) per row, zero
/// for ignored rows, divided by the number of the others under MEAN (all
/// zero when every row is ignored).
void memopt_cross_entropy_grad(memopt_context *ctx, memopt_dtype dtype,
                               const void *logits, memopt_dtype label_dtype,
                               const void *labels, const float *grad_loss,
                               void *out, int64_t rows, int64_t classes,
                               int64_t ignore_index,
                               memopt_loss_reduction reduction,
                               double label_smoothing);

/// `memopt.linear_cross_entropy`: the cross-entropy (as
/// memopt_cross_entropy) of logits = x w^T + bias, x [rows, dim], w
/// [classes, dim], bias [classes] (NULL: none), computed in `dtype` (x's and
/// bias's), without the logits matrix: `chunk` classes at a time, the chunk's
/// f32 logits (products accumulated in f32) go to `scratch` and feed an
/// online log-sum-exp. w is `w_dtype`: dtype, or F32 under a 16-bit dtype
/// (a mixed-precision master weight, each chunk rounded to dtype as it is
/// used, so that no 16-bit copy of the whole weight exists). `lse` (f32
/// [rows]) receives each row's log-sum-exp, which the gradient reads.
/// `scratch` holds at least memopt_linear_cross_entropy_scratch_bytes(dtype,
/// w_dtype, rows, dim, chunk, 0).
void memopt_linear_cross_entropy(memopt_context *ctx, memopt_dtype dtype,
                                 const void *x, const void *w,
                                 memopt_dtype w_dtype, const void *bias,
                                 memopt_dtype label_dtype,
                                 const void *labels, float *loss, float *lse,
                                 void *scratch, uint64_t scratch_bytes,
                                 int64_t rows, int64_t dim, int64_t classes,
                                 int64_t chunk, int64_t ignore_index,
                                 memopt_loss_reduction reduction);

/// `memopt.linear_cross_entropy_grad`: with dlogits = grad_loss *
/// (exp(logits - lse) - onehot(label)) (zero for ignored rows, divided by
/// the number of the others under MEAN), grad_x = dlogits w, grad_w =
/// dlogits^T x and grad_bias = the column sums of dlogits (NULL when there is
/// no bias), computed `chunk` classes at a time: each chunk's rows of grad_w
/// and grad_bias are complete in one chunk and rounded once; grad_x
/// accumulates over the chunks in f32 (in `scratch` unless dtype is F32) and
/// is rounded once at the end. w and grad_w are `w_dtype`: an F32 grad_w of
/// a 16-bit dtype is the GEMM's f32 result, unrounded.
void memopt_linear_cross_entropy_grad(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    memopt_dtype w_dtype, const void *bias, memopt_dtype label_dtype,
    const void *labels, const float *lse, const float *grad_loss, void *grad_x,
    void *grad_w, void *grad_bias, void *scratch, uint64_t scratch_bytes, int64_t rows,
    int64_t dim, int64_t classes, int64_t chunk, int64_t ignore_index,
    memopt_loss_reduction reduction);

/// `memopt.nf4_linear_cross_entropy`: memopt_linear_cross_entropy with w
/// the NF4-packed (memopt_nf4_packed_bytes) frozen weight [classes, dim]:
/// each chunk's rows of w are dequantized (as memopt_nf4_matmul dequantizes
/// them, rounded to `dtype`) into `scratch` before its product, so that no
/// dequantized copy of the whole weight exists. `scratch` holds at least
/// memopt_nf4_linear_cross_entropy_scratch_bytes(dtype, rows, dim, chunk, 0).
void memopt_nf4_linear_cross_entropy(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    const void *bias, memopt_dtype label_dtype, const void *labels,
    float *loss, float *lse, void *scratch, uint64_t scratch_bytes,
    int64_t rows, int64_t dim, int64_t classes, int64_t chunk,
    int64_t ignore_index, memopt_loss_reduction reduction);

/// `memopt.nf4_linear_cross_entropy_grad`: memopt_linear_cross_entropy_grad
/// with an NF4-packed w, which has no gradient: grad_x and grad_bias (NULL
/// when there is no bias) only, with the products of
/// memopt_nf4_linear_cross_entropy.
void memopt_nf4_linear_cross_entropy_grad(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    const void *bias, memopt_dtype label_dtype, const void *labels,
    const float *lse, const float *grad_loss, void *grad_x, void *grad_bias,
    void *scratch, uint64_t scratch_bytes, int64_t rows, int64_t dim,
    int64_t classes, int64_t chunk, int64_t ignore_index,
    memopt_loss_reduction reduction);

/// The bytes of scratch memopt_linear_cross_entropy (grad = 0) or its
/// gradient (grad = 1) needs: the f32 logits of one chunk, rows * chunk * 4;
/// for the gradient with a 16-bit `dtype` also that chunk rounded to `dtype`
/// (the GEMMs' operand) and the f32 accumulator of grad_x, rows * dim * 4;
/// with an f32 `w_dtype` under a 16-bit dtype, one chunk of w rounded to
/// dtype, chunk * dim * 2. Each part starts at a multiple of 256 bytes. The
/// compiler plans a buffer of this size next to the call; 0 for an unknown
/// dtype.
static inline uint64_t memopt_linear_cross_entropy_scratch_bytes(
    memopt_dtype dtype, memopt_dtype w_dtype, int64_t rows, int64_t dim,
    int64_t chunk, int grad) {
  uint64_t size = dtype == MEMOPT_F32 ? 4 : (dtype == MEMOPT_F16 ||
                                             dtype == MEMOPT_BF16) ? 2 : 0;
  if (size == 0 || rows < 0 || dim < 0 || chunk < 0)
    return 0;
  uint64_t r = (uint64_t)rows;
#define MEMOPT_ROUND256(x) ((((uint64_t)(x)) + 255) / 256 * 256)
  uint64_t bytes = MEMOPT_ROUND256(r * (uint64_t)chunk * 4);
  if (grad && size == 2)
    bytes += MEMOPT_ROUND256(r * (uint64_t)chunk * 2) +
             MEMOPT_ROUND256(r * (uint64_t)dim * 4);
  if (size == 2 && w_dtype == MEMOPT_F32)
    bytes += MEMOPT_ROUND256((uint64_t)chunk * (uint64_t)dim * 2);
#undef MEMOPT_ROUND256
  return bytes;
}

/// The bytes of scratch the NF4 fused loss (grad = 0) or its gradient
/// (grad = 1) needs: memopt_linear_cross_entropy_scratch_bytes with w in
/// `dtype`, then one chunk of w dequantized in f32, chunk * dim * 4 (rounded
/// up to 256). 0 for an unknown dtype.
static inline uint64_t memopt_nf4_linear_cross_entropy_scratch_bytes(
    memopt_dtype dtype, int64_t rows, int64_t dim, int64_t chunk, int grad) {
  if (rows < 0 || dim < 0 || chunk < 0 ||
      (dtype != MEMOPT_F32 && dtype != MEMOPT_F16 && dtype != MEMOPT_BF16))
    return 0;
  return memopt_linear_cross_entropy_scratch_bytes(dtype, dtype, rows, dim,
                                                   chunk, grad) +
         ((uint64_t)chunk * (uint64_t)dim * 4 + 255) / 256 * 256;
}

/// `memopt.mse_loss`: sum((input - target)^2), / n under MEAN.
void memopt_mse_loss(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     const void *target, float *loss, int64_t n,
                     memopt_loss_reduction reduction);

/// `memopt.mse_loss_grad`: grad_loss * 2 * (input - target), / n under MEAN.
void memopt_mse_loss_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const void *target,
                          const float *grad_loss, void *out, int64_t n,
                          memopt_loss_reduction reduction);

/*===----------------------------------------------------------------------===*
 * Optimizer updates and loss scaling. `skip` is an I1 scalar or NULL (never
 * skip); when *skip is 1 every output equals its input. Outputs may alias
 * the corresponding inputs (in-place update).
 *===----------------------------------------------------------------------===*/

/// `memopt.sgd_update` (torch.optim.SGD, no dampening, not Nesterov):
/// g' = grad + weight_decay * param; buf' = momentum * buf + g';
/// param' = param - lr * buf'. Computed in f32.
void memopt_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                       const void *param, const void *grad,
                       const void *momentum_buffer, const uint8_t *skip,
                       void *new_param, void *new_momentum_buffer, int64_t n,
                       double lr, double momentum, double weight_decay);

/// `memopt.adamw_update` (torch.optim.AdamW), *step the 1-based count of
/// this update: param *= 1 - lr * weight_decay; m' = beta1 m + (1 - beta1) g;
/// v' = beta2 v + (1 - beta2) g^2; param' = param - lr / (1 - beta1^step) *
/// m' / (sqrt(v') / sqrt(1 - beta2^step) + eps). Scalars in double, rounded
/// to f32 once; elementwise math in f32.
void memopt_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                         const void *param, const void *grad,
                         const void *exp_avg, const void *exp_avg_sq,
                         const int64_t *step, const uint8_t *skip,
                         void *new_param, void *new_exp_avg,
                         void *new_exp_avg_sq, int64_t n, double lr,
                         double beta1, double beta2, double eps,
                         double weight_decay);

/// `memopt.adamw_update` with 8-bit moments (memopt/runtime/QuantizeMath.h):
/// exp_avg and exp_avg_sq each hold quantizedStateBytes(n) bytes, one record
/// per block of 256 elements: its f32 absmax, then its 256 codes (past n,
/// the code of 0); the update of each block dequantizes it, computes
/// memopt_adamw_update's formulas in f32 and quantizes the new moments. The
/// outputs may be the inputs.
void memopt_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                             const void *param, const void *grad,
                             const void *exp_avg, const void *exp_avg_sq,
                             const int64_t *step, const uint8_t *skip,
                             void *new_param, void *new_exp_avg,
                             void *new_exp_avg_sq, int64_t n, double lr,
                             double beta1, double beta2, double eps,
                             double weight_decay);

/// `memopt.increment`: *out = *step + 1, or *step when *skip is 1.
void memopt_increment(memopt_context *ctx, const int64_t *step,
                      const uint8_t *skip, int64_t *out);

/// `memopt.scale_loss`: *out = *loss * *scale.
void memopt_scale_loss(memopt_context *ctx, const float *loss,
                       const float *scale, float *out);

/// `memopt.unscale` over `num_tensors` gradients: results[j][i] =
/// grads[j][i] * inv, inv = (float)(1.0 / (double)*scale), and *found_inf =
/// 1 if any element of any gradient is inf or NaN, else 0 (GradScaler's
/// unscale and non-finite check). results[j] may alias grads[j].
void memopt_unscale(memopt_context *ctx, const float *scale,
                    int64_t num_tensors, const memopt_dtype *dtypes,
                    const void *const *grads, void *const *results,
                    const int64_t *sizes, uint8_t *found_inf);

/// `memopt.update_scale` (GradScaler.update): if *found_inf, new scale =
/// scale * backoff_factor and the tracker resets to 0; otherwise the tracker
/// adds one and, on reaching growth_interval, the scale is multiplied by
/// growth_factor (kept only if finite) and the tracker resets to 0.
void memopt_update_scale(memopt_context *ctx, const float *scale,
                         const int64_t *growth_tracker,
                         const uint8_t *found_inf, float *new_scale,
                         int64_t *new_growth_tracker, double growth_factor,
                         double backoff_factor, int64_t growth_interval);

/*===----------------------------------------------------------------------===*
 * Host memory (offload). Optimizer offload (ZeRO-Offload) keeps the f32
 * master weights and the optimizer state in host memory and updates them on
 * the CPU: the generated step copies each gradient to the host with
 * memopt_transfer, updates through the memopt_host_* entries and copies the
 * new parameter back. On the host runtime, host memory is its own memory
 * and each memopt_host_* entry computes what its device counterpart does.
 *===----------------------------------------------------------------------===*/

/// Allocates the host arena: one block of host memory of `bytes` bytes
/// (rounded up to a multiple of 256, at least 256), 256-byte aligned and
/// zero-filled, replacing (and freeing) any previous host arena; the context
/// frees it at memopt_context_destroy. On CUDA it is page-locked
/// (cudaHostAlloc), so that memopt_transfer copies it by DMA. Returns its
/// base, or NULL after recording MEMOPT_ERROR_OUT_OF_MEMORY. It is not
/// device memory: neither memopt_memory_high_water nor
/// memopt_device_memory_measured counts it.
void *memopt_host_arena_allocate(memopt_context *ctx, uint64_t bytes);

/// The host arena's size in bytes (0 before memopt_host_arena_allocate).
uint64_t memopt_host_arena_size(const memopt_context *ctx);

/// The direction of memopt_transfer.
typedef enum memopt_transfer_direction {
  /// From runtime memory (the arena, a device argument) to host memory.
  MEMOPT_TO_HOST = 0,
  /// From host memory to runtime memory.
  MEMOPT_TO_DEVICE = 1
} memopt_transfer_direction;

/// Copies `bytes` bytes from `src` to `dst` between runtime memory and host
/// memory (the host arena) in `direction`, and returns when the copy is
/// complete: a memopt_host_* entry after it reads complete data, and a host
/// buffer it read from may be reused. On CUDA: a copy on the context's
/// stream, then a wait for the stream (so also for the kernels queued before
/// it); on the host: memmove. The buffers must not overlap.
void memopt_transfer(memopt_context *ctx, memopt_transfer_direction direction,
                     const void *src, void *dst, uint64_t bytes);

/// The most copies in flight at once: slots are 0 to MEMOPT_MAX_TRANSFER_SLOTS
/// - 1.
#define MEMOPT_MAX_TRANSFER_SLOTS 1024

/// Starts copying `bytes` bytes from `src` to `dst` as memopt_transfer
/// does, without waiting: the copy reads `src` once the work queued before
/// it is done, and the work queued after it runs meanwhile.
/// memopt_transfer_wait(ctx, slot, ...) ends it; until then neither `dst`
/// may be read or written nor `src` written. A slot holds one copy at a
/// time: starting on a slot whose copy was not waited for is an error
/// (MEMOPT_ERROR_INVALID_ARGUMENT), as is a slot outside
/// [0, MEMOPT_MAX_TRANSFER_SLOTS). On CUDA: the copy runs on the context's
/// copy stream after an event on its stream; on the host: memmove.
void memopt_transfer_start(memopt_context *ctx,
                           memopt_transfer_direction direction, const void *src,
                           void *dst, uint64_t bytes, int64_t slot);

/// Ends the copy that memopt_transfer_start started on `slot`: the work
/// queued after this call runs after the copy (on CUDA, the context's stream
/// waits for its event), and with `host_wait` nonzero the call also returns
/// only when the copy is complete, so that host code may read what it wrote
/// or reuse the host memory it read. Waiting on a slot with no copy started
/// is an error (MEMOPT_ERROR_INVALID_ARGUMENT).
void memopt_transfer_wait(memopt_context *ctx, int64_t slot, int32_t host_wait);

/// memopt_cast on the CPU over host memory: the same dtypes, the same
/// rounding and the same bits. `output` may be `input` when the two dtypes
/// have one size.
void memopt_host_cast(memopt_context *ctx, memopt_dtype in_dtype,
                      const void *input, memopt_dtype out_dtype, void *output,
                      int64_t n);

/// memopt_sgd_update on the CPU over host memory (every pointer, `skip`
/// included), with the same bits as the device entry; outputs may alias
/// their inputs.
void memopt_host_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                            const void *param, const void *grad,
                            const void *momentum_buffer, const uint8_t *skip,
                            void *new_param, void *new_momentum_buffer,
                            int64_t n, double lr, double momentum,
                            double weight_decay);

/// memopt_adamw_update on the CPU over host memory (every pointer, `step`
/// and `skip` included), with the same bits as the device entry; outputs may
/// alias their inputs. *step < 1 is an invalid argument.
void memopt_host_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                              const void *param, const void *grad,
                              const void *exp_avg, const void *exp_avg_sq,
                              const int64_t *step, const uint8_t *skip,
                              void *new_param, void *new_exp_avg,
                              void *new_exp_avg_sq, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weight_decay);

/// memopt_adamw8bit_update on the CPU over host memory (every pointer,
/// `step` and `skip` included), with the same bits as the device entry;
/// outputs may alias their inputs.
void memopt_host_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                                  const void *param, const void *grad,
                                  const void *exp_avg, const void *exp_avg_sq,
                                  const int64_t *step, const uint8_t *skip,
                                  void *new_param, void *new_exp_avg,
                                  void *new_exp_avg_sq, int64_t n, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay);

/* Gradient accumulation and clipping on the host: the sums that optimizer
 * offload accumulates over micro-batches in host memory, and clipping's
 * reads of them. On the host runtime each is its device entry; on CUDA a
 * CPU loop with the device entry's arithmetic per element (a sum of squares
 * may differ from the GPU's in the last place: its order differs). */

/// memopt_fill over host memory.
void memopt_host_fill(memopt_context *ctx, memopt_dtype dtype, void *dst,
                      int64_t n, double value);

/// memopt_binary over host memory.
void memopt_host_binary(memopt_context *ctx, memopt_binary_op op,
                        memopt_dtype dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n);

/// memopt_scale_by over host memory (`factor` too).
void memopt_host_scale_by(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const float *factor, void *out,
                          int64_t n);

/// memopt_reduce over host memory.
void memopt_host_reduce(memopt_context *ctx, memopt_reduce_op op,
                        memopt_dtype in_dtype, const void *input,
                        memopt_dtype out_dtype, void *out, int64_t outer,
                        int64_t reduced, int64_t inner);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The collective entries (data parallelism, ZeRO). */
#include "memopt/runtime_collectives.h"

#endif /* MEMOPT_RUNTIME_H */
