//===- ArgumentErrorCases.h - one list of argument errors -------*- C++ -*-===//
//
// One call per kind of argument error the runtimes validate, with the exact
// message it must record. The host and the CUDA runtime tests run the same
// list, so the two runtimes cannot drift apart. Every call fails before it
// touches a tensor (a small dummy block) and, on CUDA, before any CUDA call.
// Invalid enum values stay in their enum's range (UBSan checks enum loads).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_ARGUMENTERRORCASES_H
#define MEMOPT_UNITTESTS_RUNTIME_ARGUMENTERRORCASES_H

#include "memopt/runtime.h"

#include "gtest/gtest.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace memopt {
namespace test {

using Ctx = memopt_context *;

/// A call that must record MEMOPT_ERROR_INVALID_ARGUMENT with `message`.
struct ArgumentErrorCase {
  const char *message;
  std::function<void(Ctx)> call;
};

/// The cases; `p` is a dummy buffer that no call may read or write.
inline std::vector<ArgumentErrorCase> argumentErrorCases(void *p) {
  const memopt_dtype bad = static_cast<memopt_dtype>(6);
  const int64_t shape2[] = {2, 3}, negative2[] = {2, -3}, one[] = {1};
  float *f = static_cast<float *>(p);
  int64_t *i64 = static_cast<int64_t *>(p);
  uint8_t *u8 = static_cast<uint8_t *>(p);
  const double inf = std::numeric_limits<double>::infinity();
  return {
      // Context, memory, casts and selection.
      {"memopt_copy: null buffer",
       [=](Ctx c) { memopt_copy(c, nullptr, p, 4); }},
      {"memopt_fill: unknown dtype 6",
       [=](Ctx c) { memopt_fill(c, bad, p, 4, 0.0); }},
      {"memopt_cast: expected a dtype in (f32, f16, bf16, i32, i64), got i1 "
       "(5)",
       [=](Ctx c) { memopt_cast(c, MEMOPT_F32, p, MEMOPT_I1, p, 4); }},
      {"memopt_where: unknown dtype 6",
       [=](Ctx c) { memopt_where(c, bad, u8, p, p, p, 4); }},
      {"memopt_masked_fill: expected a float dtype (f32, f16, bf16), got i1 "
       "(5)",
       [=](Ctx c) { memopt_masked_fill(c, MEMOPT_I1, p, u8, 1.0, p, 4); }},
      // Elementwise.
      {"memopt_unary: expected a float dtype (f32, f16, bf16), got i32 (3)",
       [=](Ctx c) { memopt_unary(c, MEMOPT_UNARY_NEG, MEMOPT_I32, p, p, 4); }},
      // The first code past the last op (MEMOPT_UNARY_SINC).
      {"memopt_unary: unknown op 31",
       [=](Ctx c) {
         memopt_unary(c, static_cast<memopt_unary_op>(31), MEMOPT_F32, p, p, 4);
       }},
      {"memopt_compare: unknown op 6",
       [=](Ctx c) {
         memopt_compare(c, static_cast<memopt_compare_op>(6), MEMOPT_I64, p, p,
                        u8, 4);
       }},
      {"memopt_binary: unknown op 7",
       [=](Ctx c) {
         memopt_binary(c, static_cast<memopt_binary_op>(7), MEMOPT_F16, p, p, p,
                       4);
       }},
      {"memopt_scalar: unknown op 3",
       [=](Ctx c) {
         memopt_scalar(c, static_cast<memopt_scalar_op>(3), MEMOPT_F32, p, 1.0,
                       p, 4);
       }},
      {"memopt_activation_grad: unknown op 9",
       [=](Ctx c) {
         memopt_activation_grad(c, static_cast<memopt_activation_grad_op>(9),
                                MEMOPT_F32, p, p, p, 4);
       }},
      {"memopt_clamp: bounds [2, 1] are not lo <= hi",
       [=](Ctx c) { memopt_clamp(c, MEMOPT_F32, p, 2.0, 1.0, p, 4); }},
      {"memopt_clamp: expected a float dtype (f32, f16, bf16), got i64 (4)",
       [=](Ctx c) { memopt_clamp(c, MEMOPT_I64, p, -inf, inf, p, 4); }},
      {"memopt_clamp_grad: bounds [nan, 6] are not lo <= hi",
       [=](Ctx c) {
         memopt_clamp_grad(c, MEMOPT_BF16, p, p,
                           std::numeric_limits<double>::quiet_NaN(), 6.0, 0, p,
                           4);
       }},
      {"memopt_clamp_grad: null buffer",
       [=](Ctx c) {
         memopt_clamp_grad(c, MEMOPT_F32, p, nullptr, 0.0, 6.0, 1, p, 4);
       }},
      {"memopt_dropout: probability 1.5 outside [0, 1]",
       [=](Ctx c) { memopt_dropout(c, MEMOPT_F32, p, p, 4, 1, 1.5, 0, 0, 0); }},
      {"memopt_dropout: a mask group of 3 that does not divide 4 elements",
       [=](Ctx c) { memopt_dropout(c, MEMOPT_F32, p, p, 4, 3, 0.5, 0, 0, 0); }},
      // Reductions, softmax, normalisation.
      {"memopt_reduce: result dtype f16 is neither the input's (bf16) nor "
       "f32, and the input is not f32",
       [=](Ctx c) {
         memopt_reduce(c, MEMOPT_REDUCE_SUM, MEMOPT_BF16, p, MEMOPT_F16, p, 1,
                       2, 1);
       }},
      {"memopt_scale_by: null buffer",
       [=](Ctx c) { memopt_scale_by(c, MEMOPT_F32, p, nullptr, p, 4); }},
      {"memopt_reduce: max over an empty extent",
       [=](Ctx c) {
         memopt_reduce(c, MEMOPT_REDUCE_MAX, MEMOPT_F32, p, MEMOPT_F32, p, 1, 0,
                       1);
       }},
      {"memopt_log_softmax_grad: null buffer",
       [=](Ctx c) {
         memopt_log_softmax_grad(c, MEMOPT_F32, p, nullptr, p, 1, 2, 1);
       }},
      {"memopt_layer_norm: expected a float dtype (f32, f16, bf16), got i32 "
       "(3)",
       [=](Ctx c) {
         memopt_layer_norm(c, MEMOPT_F32, p, MEMOPT_I32, p, p, p, f, f, 1, 2,
                           1e-5);
       }},
      {"memopt_layer_norm: cannot normalise 2 empty rows",
       [=](Ctx c) {
         memopt_layer_norm(c, MEMOPT_F32, p, MEMOPT_F32, p, p, p, f, f, 2, 0,
                           1e-5);
       }},
      {"memopt_rms_norm_grad: null buffer",
       [=](Ctx c) {
         memopt_rms_norm_grad(c, MEMOPT_F32, p, p, MEMOPT_F32, p, nullptr, p, p,
                              1, 2);
       }},
      {"memopt_batch_norm: training needs more than one value per channel, "
       "got 1",
       [=](Ctx c) {
         memopt_batch_norm(c, MEMOPT_F32, p, f, f, f, f, p, f, f, f, f, 1, 3, 1,
                           1e-5, 0.1);
       }},
      {"memopt_batch_norm_grad: negative extent -3",
       [=](Ctx c) {
         memopt_batch_norm_grad(c, MEMOPT_F32, p, p, f, f, f, p, f, f, 2, -3,
                                1);
       }},
      // Matrix products, embeddings, convolution, pooling.
      {"memopt_matmul: result dtype bf16 is neither the operands' (f16) nor "
       "f32",
       [=](Ctx c) {
         memopt_matmul(c, MEMOPT_F16, p, p, p, 1, 1, 2, 2, 2, 0, 0,
                       MEMOPT_BF16);
       }},
      {"memopt_matmul: batch sizes 2 and 3 differ and neither is 1",
       [=](Ctx c) {
         memopt_matmul(c, MEMOPT_F32, p, p, p, 2, 3, 2, 2, 2, 0, 0, MEMOPT_F32);
       }},
      {"memopt_nf4_matmul: expected a float dtype (f32, f16, bf16), got i32 "
       "(3)",
       [=](Ctx c) {
         memopt_nf4_matmul(c, MEMOPT_I32, p, u8, p, p, 1024, 2, 2, 2, 1);
       }},
      {"memopt_nf4_matmul: negative extent -2",
       [=](Ctx c) {
         memopt_nf4_matmul(c, MEMOPT_F32, p, u8, p, p, 1024, 2, -2, 2, 1);
       }},
      {"memopt_nf4_matmul: null buffer",
       [=](Ctx c) {
         memopt_nf4_matmul(c, MEMOPT_BF16, p, nullptr, p, p, 1024, 2, 2, 2, 0);
       }},
      {"memopt_nf4_matmul: scratch of 12 bytes is smaller than one column of "
       "op(w) (16 bytes)",
       [=](Ctx c) {
         memopt_nf4_matmul(c, MEMOPT_F16, p, u8, p, p, 12, 2, 3, 4, 1);
       }},
      {"memopt_nf4_matmul: scratch of 0 bytes is smaller than one column of "
       "op(w) (16 bytes)",
       [=](Ctx c) {
         memopt_nf4_matmul(c, MEMOPT_F32, p, u8, p, nullptr, 1024, 2, 3, 4, 0);
       }},
      {"memopt_embedding: expected an index dtype (i32, i64), got f32 (0)",
       [=](Ctx c) {
         memopt_embedding(c, MEMOPT_F32, p, MEMOPT_F32, p, p, 2, 4, 2);
       }},
      {"memopt_embedding_grad: negative extent -4",
       [=](Ctx c) {
         memopt_embedding_grad(c, MEMOPT_F32, p, MEMOPT_I64, p, p, 2, -4, 2,
                               -1);
       }},
      {"memopt_embedding_grad: padding_idx 4 outside [0, 4)",
       [=](Ctx c) {
         memopt_embedding_grad(c, MEMOPT_F32, p, MEMOPT_I64, p, p, 2, 4, 2, 4);
       }},
      {"memopt_conv2d: invalid strides (1, 1), dilations (1, 1) or groups 2 "
       "for 3 input and 4 output channels",
       [=](Ctx c) {
         memopt_conv2d(c, MEMOPT_F32, p, p, p, 1, 3, 4, 4, 4, 1, 1, 1, 1, 0, 0,
                       1, 1, 2);
       }},
      {"memopt_conv2d_grad_input: kernel 5x5 (dilated) exceeds the padded 3x3 "
       "input",
       [=](Ctx c) {
         memopt_conv2d_grad_input(c, MEMOPT_F32, p, p, p, 1, 1, 3, 3, 1, 5, 5,
                                  1, 1, 0, 0, 1, 1, 1);
       }},
      {"memopt_conv2d_grad_filter: negative extent -1",
       [=](Ctx c) {
         memopt_conv2d_grad_filter(c, MEMOPT_F32, p, p, p, 1, 1, 3, 3, 1, 1, 1,
                                   1, 1, -1, 0, 1, 1, 1);
       }},
      {"memopt_max_pool2d: invalid window 2x2, strides (0, 1) or padding "
       "(0, 0) for a 4x4 input",
       [=](Ctx c) {
         memopt_max_pool2d(c, MEMOPT_F32, p, p, 1, 1, 4, 4, 2, 2, 0, 1, 0, 0);
       }},
      {"memopt_max_pool2d_grad: invalid window 2x2, strides (1, 1) or padding "
       "(2, 0) for a 4x4 input",
       [=](Ctx c) {
         memopt_max_pool2d_grad(c, MEMOPT_F32, p, p, p, 1, 1, 4, 4, 2, 2, 1, 1,
                                2, 0);
       }},
      {"memopt_avg_pool2d: invalid window 5x1, strides (1, 1) or padding "
       "(0, 0) for a 4x4 input",
       [=](Ctx c) {
         memopt_avg_pool2d(c, MEMOPT_F32, p, p, 1, 1, 4, 4, 5, 1, 1, 1, 0, 0);
       }},
      {"memopt_avg_pool2d_grad: expected a float dtype (f32, f16, bf16), got "
       "i64 (4)",
       [=](Ctx c) {
         memopt_avg_pool2d_grad(c, MEMOPT_I64, p, p, 1, 1, 4, 4, 2, 2, 1, 1, 0,
                                0);
       }},
      // Shapes.
      {"memopt_broadcast: input dimension 0 (size 3) cannot map to result "
       "dimension 0",
       [=](Ctx c) {
         const int64_t in[] = {3}, dims[] = {0};
         memopt_broadcast(c, MEMOPT_F32, p, 1, in, dims, p, 2, shape2);
       }},
      {"memopt_transpose: invalid permutation entry 0 at 1",
       [=](Ctx c) {
         const int64_t perm[] = {0, 0};
         memopt_transpose(c, MEMOPT_F16, p, 2, shape2, perm, p);
       }},
      {"memopt_transpose: negative size -3 in dimension 1",
       [=](Ctx c) {
         const int64_t perm[] = {1, 0};
         memopt_transpose(c, MEMOPT_F16, p, 2, negative2, perm, p);
       }},
      {"memopt_transpose: invalid rank -1",
       [=](Ctx c) { memopt_transpose(c, MEMOPT_F16, p, -1, shape2, one, p); }},
      {"memopt_slice: invalid slice [0:4:1] of dimension 1 (size 3)",
       [=](Ctx c) {
         const int64_t starts[] = {0, 0}, limits[] = {2, 4}, steps[] = {1, 1};
         memopt_slice(c, MEMOPT_I32, p, 2, shape2, starts, limits, steps, p);
       }},
      {"memopt_slice_grad: invalid slice [1:2:0] of dimension 0 (size 2)",
       [=](Ctx c) {
         const int64_t starts[] = {1, 0}, limits[] = {2, 3}, steps[] = {0, 1};
         memopt_slice_grad(c, MEMOPT_F32, p, 2, shape2, starts, limits, steps,
                           p);
       }},
      {"memopt_concat: null buffer",
       [=](Ctx c) {
         const void *inputs[] = {p, nullptr};
         const int64_t sizes[] = {2, 1};
         memopt_concat(c, MEMOPT_F32, 2, inputs, sizes, p, 1, 1);
       }},
      // Fused attention.
      {"memopt_attention: scale inf is not finite",
       [=](Ctx c) {
         memopt_attention(c, MEMOPT_F32, p, p, p, nullptr, nullptr, p, f, 1, 1,
                          2, 2, 2, 2, inf, 0, -inf, 0.0, 0, 0, 0);
       }},
      {"memopt_attention: a mask without strides",
       [=](Ctx c) {
         memopt_attention(c, MEMOPT_BF16, p, p, p, u8, nullptr, p, f, 1, 1, 2,
                          2, 2, 2, 0.5, 1, -inf, 0.0, 0, 0, 0);
       }},
      {"memopt_attention: null buffer",
       [=](Ctx c) {
         memopt_attention(c, MEMOPT_F32, p, p, p, nullptr, nullptr, p, nullptr,
                          1, 1, 2, 2, 2, 2, 0.5, 0, -inf, 0.0, 0, 0, 0);
       }},
      {"memopt_attention_grad: negative mask stride -1",
       [=](Ctx c) {
         const int64_t strides[] = {0, 0, -1, 1};
         memopt_attention_grad(c, MEMOPT_F32, p, p, p, u8, strides, p, f, p, p,
                               p, p, 1, 1, 2, 2, 2, 2, 0.5, 1, -inf, 0.0, 0, 0,
                               0);
       }},
      {"memopt_attention_grad: probability 1.5 outside [0, 1]",
       [=](Ctx c) {
         memopt_attention_grad(c, MEMOPT_F16, p, p, p, nullptr, nullptr, p, f,
                               p, p, p, p, 1, 1, 2, 2, 2, 2, 0.5, 0, -inf, 1.5,
                               0, 0, 0);
       }},
      // Losses.
      {"memopt_cross_entropy: negative extent -3",
       [=](Ctx c) {
         memopt_cross_entropy(c, MEMOPT_F32, p, MEMOPT_I64, p, f, 2, -3, -100,
                              MEMOPT_REDUCTION_MEAN, 0.0);
       }},
      {"memopt_cross_entropy: label smoothing 1 outside [0, 1)",
       [=](Ctx c) {
         memopt_cross_entropy(c, MEMOPT_F32, p, MEMOPT_I64, p, f, 2, 3, -100,
                              MEMOPT_REDUCTION_MEAN, 1.0);
       }},
      {"memopt_cross_entropy_grad: label smoothing -0.1 outside [0, 1)",
       [=](Ctx c) {
         memopt_cross_entropy_grad(c, MEMOPT_F32, p, MEMOPT_I64, p, f, p, 2, 3,
                                   -100, MEMOPT_REDUCTION_SUM, -0.1);
       }},
      {"memopt_cross_entropy_grad: expected an index dtype (i32, i64), got i1 "
       "(5)",
       [=](Ctx c) {
         memopt_cross_entropy_grad(c, MEMOPT_F32, p, MEMOPT_I1, p, f, p, 2, 3,
                                   -100, MEMOPT_REDUCTION_MEAN, 0.0);
       }},
      {"memopt_linear_cross_entropy: chunk 0 outside [1, 4]",
       [=](Ctx c) {
         memopt_linear_cross_entropy(c, MEMOPT_F32, p, p, MEMOPT_F32, nullptr,
                                     MEMOPT_I64, p, f, f, p, 1024, 2, 2, 4, 0, -100,
                                     MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_linear_cross_entropy: expected an index dtype (i32, i64), got "
       "f16 (1)",
       [=](Ctx c) {
         memopt_linear_cross_entropy(c, MEMOPT_F32, p, p, MEMOPT_F32, p,
                                     MEMOPT_F16, p, f, f, p, 1024, 2, 2, 4, 2, -100,
                                     MEMOPT_REDUCTION_SUM);
       }},
      {"memopt_linear_cross_entropy_grad: scratch of 16 bytes, 768 needed",
       [=](Ctx c) {
         memopt_linear_cross_entropy_grad(c, MEMOPT_BF16, p, p, MEMOPT_BF16,
                                          p, MEMOPT_I32, p, f, f, p, p, p, p,
                                          16, 2, 2, 4, 2,
                                          -100, MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_label_count: null buffer",
       [=](Ctx c) { memopt_label_count(c, MEMOPT_I32, p, nullptr, 2, -100); }},
      {"memopt_mse_loss_grad: null buffer",
       [=](Ctx c) {
         memopt_mse_loss_grad(c, MEMOPT_BF16, p, p, nullptr, p, 2,
                              MEMOPT_REDUCTION_SUM);
       }},
      // Optimizers and loss scaling.
      {"memopt_sgd_update: expected a float dtype (f32, f16, bf16), got i64 "
       "(4)",
       [=](Ctx c) {
         memopt_sgd_update(c, MEMOPT_I64, p, p, p, nullptr, p, p, 2, 0.1, 0.9,
                           0.0);
       }},
      {"memopt_adamw_update: null buffer",
       [=](Ctx c) {
         memopt_adamw_update(c, MEMOPT_F32, p, p, p, p, nullptr, nullptr, p, p,
                             p, 2, 1e-3, 0.9, 0.999, 1e-8, 0.0);
       }},
      {"memopt_adamw8bit_update: null buffer",
       [=](Ctx c) {
         memopt_adamw8bit_update(c, MEMOPT_F32, p, p, u8, nullptr, i64, nullptr,
                                 p, u8, u8, 2, 1e-3, 0.9, 0.999, 1e-8, 0.0);
       }},
      {"memopt_increment: null buffer",
       [=](Ctx c) { memopt_increment(c, i64, nullptr, nullptr); }},
      {"memopt_scale_loss: null buffer",
       [=](Ctx c) { memopt_scale_loss(c, nullptr, f, f); }},
      {"memopt_unscale: expected a float dtype (f32, f16, bf16), got i32 (3)",
       [=](Ctx c) {
         const memopt_dtype dtypes[] = {MEMOPT_F32, MEMOPT_I32};
         const void *grads[] = {p, p};
         void *const results[] = {p, p};
         const int64_t sizes[] = {2, 2};
         memopt_unscale(c, f, 2, dtypes, grads, results, sizes, u8);
       }},
      {"memopt_update_scale: growth interval 0 is not positive",
       [=](Ctx c) { memopt_update_scale(c, f, i64, u8, f, i64, 2.0, 0.5, 0); }},
      // Host memory (offload).
      {"memopt_transfer: null buffer",
       [=](Ctx c) { memopt_transfer(c, MEMOPT_TO_HOST, nullptr, p, 4); }},
      {"memopt_transfer_start: null buffer",
       [=](Ctx c) {
         memopt_transfer_start(c, MEMOPT_TO_HOST, nullptr, p, 4, 0);
       }},
      {"memopt_transfer_start: slot 1024 is outside [0, 1024)",
       [=](Ctx c) { memopt_transfer_start(c, MEMOPT_TO_HOST, p, p, 0, 1024); }},
      {"memopt_transfer_wait: slot -1 is outside [0, 1024)",
       [=](Ctx c) { memopt_transfer_wait(c, -1, 0); }},
      {"memopt_transfer_wait: slot 7 holds no copy (memopt_transfer_start)",
       [=](Ctx c) { memopt_transfer_wait(c, 7, 1); }},
      {"memopt_host_cast: expected a dtype in (f32, f16, bf16, i32, i64), got "
       "i1 (5)",
       [=](Ctx c) { memopt_host_cast(c, MEMOPT_I1, p, MEMOPT_F32, p, 4); }},
      {"memopt_host_sgd_update: negative extent -2",
       [=](Ctx c) {
         memopt_host_sgd_update(c, MEMOPT_BF16, p, p, p, nullptr, p, p, -2, 0.1,
                                0.9, 0.0);
       }},
      {"memopt_host_adamw_update: null buffer",
       [=](Ctx c) {
         memopt_host_adamw_update(c, MEMOPT_F16, p, p, p, p, nullptr, nullptr,
                                  p, p, p, 2, 1e-3, 0.9, 0.999, 1e-8, 0.0);
       }},
      {"memopt_host_adamw8bit_update: expected a dtype in (f32), got bf16 (2)",
       [=](Ctx c) {
         memopt_host_adamw8bit_update(c, MEMOPT_BF16, p, p, u8, u8, i64,
                                      nullptr, p, u8, u8, 2, 1e-3, 0.9, 0.999,
                                      1e-8, 0.0);
       }},
  };
}

/// Runs every case on a fresh context from `create` and expects its status
/// and message; on a context that already holds an error, every case is a
/// no-op.
inline void
expectArgumentErrors(const std::function<memopt_context *()> &create) {
  alignas(256) static unsigned char dummy[1024];
  for (const ArgumentErrorCase &c : argumentErrorCases(dummy)) {
    memopt_context *ctx = create();
    ASSERT_NE(ctx, nullptr);
    c.call(ctx);
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT)
        << c.message;
    EXPECT_STREQ(memopt_get_error_message(ctx), c.message);
    memopt_context_destroy(ctx);
    ctx = create();
    memopt_unary(ctx, MEMOPT_UNARY_NEG, MEMOPT_I1, dummy, dummy, 1);
    std::string first = memopt_get_error_message(ctx);
    c.call(ctx);
    EXPECT_EQ(memopt_get_error_message(ctx), first) << c.message;
    memopt_context_destroy(ctx);
  }
}

} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_ARGUMENTERRORCASES_H
