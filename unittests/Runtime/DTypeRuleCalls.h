//===- DTypeRuleCalls.h - the dtype table against a runtime -----*- C++ -*-===//
//
// One call per entry of the runtime's dtype table
// (memopt/runtime/DTypeRules.h), valid but for its dtype arguments, and the
// walk of every row over every combination of the six dtypes in its slots:
// the runtime must record an error exactly when the row rejects the
// combination, with the row's message; the twins of kDTypeTwins (offload's
// host-memory entries) against their counterpart's row. unittests/DTypeRules
// runs it on the host runtime, CudaRuntimeTest.cpp on the CUDA runtime (the
// rejections without a device, everything with one).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_DTYPERULECALLS_H
#define MEMOPT_UNITTESTS_RUNTIME_DTYPERULECALLS_H

#include "memopt/runtime.h"
#include "memopt/runtime/DTypeRules.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace memopt {
namespace test {

/// Every combination of the kNumDTypes dtypes in `numSlots` slots.
inline std::vector<std::vector<memopt_dtype>> dtypeCombinations(int numSlots) {
  std::vector<std::vector<memopt_dtype>> result(1);
  for (int slot = 0; slot < numSlots; ++slot) {
    std::vector<std::vector<memopt_dtype>> next;
    for (int d = 0; d < runtime::kNumDTypes; ++d)
      for (std::vector<memopt_dtype> prefix : result) {
        prefix.push_back(static_cast<memopt_dtype>(d));
        next.push_back(prefix);
      }
    result = next;
  }
  return result;
}

/// "(f32, bf16)".
inline std::string describeDTypes(const std::vector<memopt_dtype> &dtypes) {
  std::string text = "(";
  for (size_t i = 0; i < dtypes.size(); ++i)
    text += (i ? ", " : "") + std::string(runtime::dtypeName(dtypes[i]));
  return text + ")";
}

/// The tensors of one call, in the memory of the runtime under test: kCount
/// buffers of kBytes, large enough for every call below, and the scalars
/// `step` and `scale`. Before each call they hold zeros, a step of 1 and a
/// scale of 1: valid data, indices and labels for every entry.
struct DTypeCallBuffers {
  static constexpr size_t kBytes = 4096;
  static constexpr int kCount = 10;
  void *data[kCount];
  int64_t *step;
  float *scale;

  void *t(int i) const { return data[i]; }
  float *f(int i) const { return static_cast<float *>(data[i]); }
  uint8_t *u8(int i) const { return static_cast<uint8_t *>(data[i]); }
};

using Ctx = memopt_context *;
using DTypes = const memopt_dtype *;

/// A call of `entry` that is valid but for its dtype arguments.
struct DTypeCall {
  const char *entry;
  std::function<void(Ctx, DTypes, const DTypeCallBuffers &)> call;
};

constexpr double kDTypeCallInf = std::numeric_limits<double>::infinity();

/// One call per entry that takes dtype arguments.
inline std::vector<DTypeCall> dtypeCalls() {
  static const int64_t vec3[] = {3}, dims1[] = {1}, shape23[] = {2, 3},
                       perm10[] = {1, 0}, vec4[] = {4}, start1[] = {1},
                       limit3[] = {3}, stride1[] = {1}, sizes12[] = {1, 2},
                       size4[] = {4};
  using B = const DTypeCallBuffers;
  return {
      // Memory, casts and selection.
      {"memopt_fill",
       [](Ctx c, DTypes d, B &b) { memopt_fill(c, d[0], b.t(0), 4, 1.0); }},
      {"memopt_cast",
       [](Ctx c, DTypes d, B &b) {
         memopt_cast(c, d[0], b.t(0), d[1], b.t(1), 4);
       }},
      {"memopt_where",
       [](Ctx c, DTypes d, B &b) {
         memopt_where(c, d[0], b.u8(0), b.t(1), b.t(2), b.t(3), 4);
       }},
      {"memopt_masked_fill",
       [](Ctx c, DTypes d, B &b) {
         memopt_masked_fill(c, d[0], b.t(0), b.u8(1), 1.0, b.t(2), 4);
       }},
      // Elementwise.
      {"memopt_compare",
       [](Ctx c, DTypes d, B &b) {
         memopt_compare(c, MEMOPT_COMPARE_LT, d[0], b.t(0), b.t(1), b.u8(2),
                        4);
       }},
      {"memopt_unary",
       [](Ctx c, DTypes d, B &b) {
         memopt_unary(c, MEMOPT_UNARY_NEG, d[0], b.t(0), b.t(1), 4);
       }},
      {"memopt_binary",
       [](Ctx c, DTypes d, B &b) {
         memopt_binary(c, MEMOPT_BINARY_ADD, d[0], b.t(0), b.t(1), b.t(2), 4);
       }},
      {"memopt_scalar",
       [](Ctx c, DTypes d, B &b) {
         memopt_scalar(c, MEMOPT_SCALAR_MUL, d[0], b.t(0), 2.0, b.t(1), 4);
       }},
      {"memopt_activation_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_activation_grad(c, MEMOPT_GRAD_RELU, d[0], b.t(0), b.t(1),
                                b.t(2), 4);
       }},
      {"memopt_clamp",
       [](Ctx c, DTypes d, B &b) {
         memopt_clamp(c, d[0], b.t(0), -1.0, kDTypeCallInf, b.t(1), 4);
       }},
      {"memopt_scale_by",
       [](Ctx c, DTypes d, B &b) {
         memopt_scale_by(c, d[0], b.t(0), b.scale, b.t(1), 4);
       }},
      {"memopt_clamp_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_clamp_grad(c, d[0], b.t(0), b.t(1), 0.0, 6.0, 0, b.t(2), 4);
       }},
      // Shapes.
      {"memopt_broadcast",
       [](Ctx c, DTypes d, B &b) {
         memopt_broadcast(c, d[0], b.t(0), 1, vec3, dims1, b.t(1), 2, shape23);
       }},
      {"memopt_transpose",
       [](Ctx c, DTypes d, B &b) {
         memopt_transpose(c, d[0], b.t(0), 2, shape23, perm10, b.t(1));
       }},
      {"memopt_slice",
       [](Ctx c, DTypes d, B &b) {
         memopt_slice(c, d[0], b.t(0), 1, vec4, start1, limit3, stride1,
                      b.t(1));
       }},
      {"memopt_slice_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_slice_grad(c, d[0], b.t(0), 1, vec4, start1, limit3, stride1,
                           b.t(1));
       }},
      {"memopt_concat",
       [](Ctx c, DTypes d, B &b) {
         const void *inputs[] = {b.t(0), b.t(1)};
         memopt_concat(c, d[0], 2, inputs, sizes12, b.t(2), 2, 1);
       }},
      // Reductions, softmax, normalisation.
      {"memopt_reduce",
       [](Ctx c, DTypes d, B &b) {
         memopt_reduce(c, MEMOPT_REDUCE_SUM, d[0], b.t(0), d[1], b.t(1), 1, 2,
                       1);
       }},
      {"memopt_softmax",
       [](Ctx c, DTypes d, B &b) {
         memopt_softmax(c, d[0], b.t(0), b.t(1), 1, 4, 1);
       }},
      {"memopt_log_softmax",
       [](Ctx c, DTypes d, B &b) {
         memopt_log_softmax(c, d[0], b.t(0), b.t(1), 1, 4, 1);
       }},
      {"memopt_softmax_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_softmax_grad(c, d[0], b.t(0), b.t(1), b.t(2), 1, 4, 1);
       }},
      {"memopt_log_softmax_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_log_softmax_grad(c, d[0], b.t(0), b.t(1), b.t(2), 1, 4, 1);
       }},
      {"memopt_layer_norm",
       [](Ctx c, DTypes d, B &b) {
         memopt_layer_norm(c, d[0], b.t(0), d[1], b.t(1), b.t(2), b.t(3),
                           b.f(4), b.f(5), 2, 4, 1e-5);
       }},
      {"memopt_layer_norm_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_layer_norm_grad(c, d[0], b.t(0), b.t(1), d[1], b.t(2), b.f(3),
                                b.f(4), b.t(5), b.t(6), b.t(7), 2, 4);
       }},
      {"memopt_rms_norm",
       [](Ctx c, DTypes d, B &b) {
         memopt_rms_norm(c, d[0], b.t(0), d[1], b.t(1), b.t(2), b.f(3), 2, 4,
                         1e-6);
       }},
      {"memopt_rms_norm_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_rms_norm_grad(c, d[0], b.t(0), b.t(1), d[1], b.t(2), b.f(3),
                              b.t(4), b.t(5), 2, 4);
       }},
      {"memopt_batch_norm",
       [](Ctx c, DTypes d, B &b) {
         memopt_batch_norm(c, d[0], b.t(0), b.f(1), b.f(2), b.f(3), b.f(4),
                           b.t(5), b.f(6), b.f(7), b.f(8), b.f(9), 2, 2, 2,
                           1e-5, 0.1);
       }},
      {"memopt_batch_norm_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_batch_norm_grad(c, d[0], b.t(0), b.t(1), b.f(2), b.f(3), b.f(4),
                                b.t(5), b.f(6), b.f(7), 2, 2, 2);
       }},
      // Products, embeddings, convolution, pooling.
      {"memopt_matmul",
       [](Ctx c, DTypes d, B &b) {
         memopt_matmul(c, d[0], b.t(0), b.t(1), b.t(2), 1, 1, 2, 2, 2, 0, 0,
                       d[1]);
       }},
      {"memopt_nf4_matmul",
       [](Ctx c, DTypes d, B &b) {
         memopt_nf4_matmul(c, d[0], b.t(0), b.u8(1), b.t(2), b.t(3),
                           DTypeCallBuffers::kBytes, 2, 3, 4, 1);
       }},
      {"memopt_embedding",
       [](Ctx c, DTypes d, B &b) {
         memopt_embedding(c, d[0], b.t(0), d[1], b.t(1), b.t(2), 2, 3, 2);
       }},
      {"memopt_embedding_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_embedding_grad(c, d[0], b.t(0), d[1], b.t(1), b.t(2), 2, 3, 2,
                               -1);
       }},
      {"memopt_conv2d",
       [](Ctx c, DTypes d, B &b) {
         memopt_conv2d(c, d[0], b.t(0), b.t(1), b.t(2), 1, 2, 4, 4, 3, 3, 3, 1,
                       1, 0, 0, 1, 1, 1);
       }},
      {"memopt_conv2d_grad_input",
       [](Ctx c, DTypes d, B &b) {
         memopt_conv2d_grad_input(c, d[0], b.t(0), b.t(1), b.t(2), 1, 2, 4, 4,
                                  3, 3, 3, 1, 1, 0, 0, 1, 1, 1);
       }},
      {"memopt_conv2d_grad_filter",
       [](Ctx c, DTypes d, B &b) {
         memopt_conv2d_grad_filter(c, d[0], b.t(0), b.t(1), b.t(2), 1, 2, 4, 4,
                                   3, 3, 3, 1, 1, 0, 0, 1, 1, 1);
       }},
      {"memopt_max_pool2d",
       [](Ctx c, DTypes d, B &b) {
         memopt_max_pool2d(c, d[0], b.t(0), b.t(1), 1, 1, 4, 4, 2, 2, 2, 2, 0,
                           0);
       }},
      {"memopt_max_pool2d_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_max_pool2d_grad(c, d[0], b.t(0), b.t(1), b.t(2), 1, 1, 4, 4, 2,
                                2, 2, 2, 0, 0);
       }},
      {"memopt_avg_pool2d",
       [](Ctx c, DTypes d, B &b) {
         memopt_avg_pool2d(c, d[0], b.t(0), b.t(1), 1, 1, 4, 4, 2, 2, 2, 2, 0,
                           0);
       }},
      {"memopt_avg_pool2d_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_avg_pool2d_grad(c, d[0], b.t(0), b.t(1), 1, 1, 4, 4, 2, 2, 2, 2,
                                0, 0);
       }},
      // Fused attention.
      {"memopt_attention",
       [](Ctx c, DTypes d, B &b) {
         memopt_attention(c, d[0], b.t(0), b.t(1), b.t(2), nullptr, nullptr,
                          b.t(3), b.f(4), 1, 1, 2, 2, 2, 2, 0.5, 0,
                          -kDTypeCallInf, 0.0, 0, 0, 0);
       }},
      {"memopt_attention_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_attention_grad(c, d[0], b.t(0), b.t(1), b.t(2), nullptr,
                               nullptr, b.t(3), b.f(4), b.t(5), b.t(6), b.t(7),
                               b.t(8), 1, 1, 2, 2, 2, 2, 0.5, 0, -kDTypeCallInf,
                               0.0, 0, 0, 0);
       }},
      // Randomness.
      {"memopt_dropout",
       [](Ctx c, DTypes d, B &b) {
         memopt_dropout(c, d[0], b.t(0), b.t(1), 4, 1, 0.5, 1, 2, 0);
       }},
      // Collectives.
      {"memopt_all_reduce_sum",
       [](Ctx c, DTypes d, B &b) {
         memopt_all_reduce_sum(c, d[0], b.t(0), b.t(1), 4);
       }},
      {"memopt_reduce_scatter_sum",
       [](Ctx c, DTypes d, B &b) {
         memopt_reduce_scatter_sum(c, d[0], b.t(0), b.t(1), 4);
       }},
      {"memopt_all_gather",
       [](Ctx c, DTypes d, B &b) {
         memopt_all_gather(c, d[0], b.t(0), b.t(1), 4);
       }},
      {"memopt_all_slice",
       [](Ctx c, DTypes d, B &b) {
         memopt_all_slice(c, d[0], b.t(0), b.t(1), 4);
       }},
      // Losses.
      {"memopt_cross_entropy",
       [](Ctx c, DTypes d, B &b) {
         memopt_cross_entropy(c, d[0], b.t(0), d[1], b.t(1), b.f(2), 2, 3, -100,
                              MEMOPT_REDUCTION_MEAN, 0.0);
       }},
      {"memopt_label_count",
       [](Ctx c, DTypes d, B &b) {
         memopt_label_count(c, d[0], b.t(0), b.f(1), 4, -100);
       }},
      {"memopt_cross_entropy_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_cross_entropy_grad(c, d[0], b.t(0), d[1], b.t(1), b.f(2),
                                   b.t(3), 2, 3, -100, MEMOPT_REDUCTION_MEAN,
                                   0.0);
       }},
      {"memopt_linear_cross_entropy",
       [](Ctx c, DTypes d, B &b) {
         memopt_linear_cross_entropy(c, d[0], b.t(0), b.t(1), d[1], nullptr,
                                     d[2], b.t(2), b.f(3), b.f(4), b.t(5),
                                     DTypeCallBuffers::kBytes, 2, 2, 3, 2, -100,
                                     MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_linear_cross_entropy_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_linear_cross_entropy_grad(
             c, d[0], b.t(0), b.t(1), d[1], nullptr, d[2], b.t(2), b.f(3),
             b.f(4), b.t(5), b.t(6), nullptr, b.t(7), DTypeCallBuffers::kBytes,
             2, 2, 3, 2, -100, MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_nf4_linear_cross_entropy",
       [](Ctx c, DTypes d, B &b) {
         memopt_nf4_linear_cross_entropy(
             c, d[0], b.t(0), b.u8(1), nullptr, d[1], b.t(2), b.f(3), b.f(4),
             b.t(5), DTypeCallBuffers::kBytes, 2, 2, 3, 2, -100,
             MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_nf4_linear_cross_entropy_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_nf4_linear_cross_entropy_grad(
             c, d[0], b.t(0), b.u8(1), nullptr, d[1], b.t(2), b.f(3), b.f(4),
             b.t(5), nullptr, b.t(7), DTypeCallBuffers::kBytes, 2, 2, 3, 2,
             -100, MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_mse_loss",
       [](Ctx c, DTypes d, B &b) {
         memopt_mse_loss(c, d[0], b.t(0), b.t(1), b.f(2), 4,
                         MEMOPT_REDUCTION_MEAN);
       }},
      {"memopt_mse_loss_grad",
       [](Ctx c, DTypes d, B &b) {
         memopt_mse_loss_grad(c, d[0], b.t(0), b.t(1), b.f(2), b.t(3), 4,
                              MEMOPT_REDUCTION_MEAN);
       }},
      // Optimizers and loss scaling.
      {"memopt_sgd_update",
       [](Ctx c, DTypes d, B &b) {
         memopt_sgd_update(c, d[0], b.t(0), b.t(1), b.t(2), nullptr, b.t(3),
                           b.t(4), 4, 0.1, 0.9, 0.0);
       }},
      {"memopt_adamw_update",
       [](Ctx c, DTypes d, B &b) {
         memopt_adamw_update(c, d[0], b.t(0), b.t(1), b.t(2), b.t(3), b.step,
                             nullptr, b.t(4), b.t(5), b.t(6), 4, 1e-3, 0.9,
                             0.999, 1e-8, 0.0);
       }},
      {"memopt_adamw8bit_update",
       [](Ctx c, DTypes d, B &b) {
         memopt_adamw8bit_update(c, d[0], b.t(0), b.t(1), b.u8(2), b.u8(3),
                                 b.step, nullptr, b.t(4), b.u8(5), b.u8(6), 4,
                                 1e-3, 0.9, 0.999, 1e-8, 0.0);
       }},
      {"memopt_unscale",
       [](Ctx c, DTypes d, B &b) {
         const void *grads[] = {b.t(0)};
         void *const results[] = {b.t(1)};
         memopt_unscale(c, b.scale, 1, d, grads, results, size4, b.u8(2));
       }},
      // Host memory (offload): the twins of kDTypeTwins, whose buffers are
      // host memory.
      {"memopt_host_cast",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_cast(c, d[0], b.t(0), d[1], b.t(1), 4);
       }},
      {"memopt_host_sgd_update",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_sgd_update(c, d[0], b.t(0), b.t(1), b.t(2), nullptr,
                                b.t(3), b.t(4), 4, 0.1, 0.9, 0.0);
       }},
      {"memopt_host_adamw_update",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_adamw_update(c, d[0], b.t(0), b.t(1), b.t(2), b.t(3),
                                  b.step, nullptr, b.t(4), b.t(5), b.t(6), 4,
                                  1e-3, 0.9, 0.999, 1e-8, 0.0);
       }},
      {"memopt_host_adamw8bit_update",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_adamw8bit_update(c, d[0], b.t(0), b.t(1), b.u8(2), b.u8(3),
                                      b.step, nullptr, b.t(4), b.u8(5), b.u8(6),
                                      4, 1e-3, 0.9, 0.999, 1e-8, 0.0);
       }},
      {"memopt_host_fill",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_fill(c, d[0], b.t(0), 4, 1.0);
       }},
      {"memopt_host_binary",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_binary(c, MEMOPT_BINARY_ADD, d[0], b.t(0), b.t(1), b.t(2),
                            4);
       }},
      {"memopt_host_scale_by",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_scale_by(c, d[0], b.t(0), b.scale, b.t(1), 4);
       }},
      {"memopt_host_reduce",
       [](Ctx c, DTypes d, B &b) {
         memopt_host_reduce(c, MEMOPT_REDUCE_SUM, d[0], b.t(0), d[1], b.t(1), 1,
                            2, 1);
       }},
  };
}

/// Calls `call` (of `entry`, whose dtypes `rule` governs) with every
/// combination of dtypes in the rule's slots; see walkDTypeRules.
inline int walkDTypeRow(memopt_context *ctx, const char *entry,
                        const runtime::DTypeRule &rule, const DTypeCall &call,
                        const DTypeCallBuffers &buffers,
                        const std::function<void()> &reset, bool onlyRejected) {
  int walked = 0;
  for (const std::vector<memopt_dtype> &dtypes :
       dtypeCombinations(rule.numSlots)) {
    bool accepted = runtime::acceptsDTypes(rule, dtypes.data());
    if (accepted && onlyRejected)
      continue;
    reset();
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    call.call(ctx, dtypes.data(), buffers);
    // The status first: on CUDA it collects asynchronous errors.
    memopt_status status = memopt_get_status(ctx);
    std::string message = memopt_get_error_message(ctx);
    if (accepted) {
      EXPECT_EQ(status, MEMOPT_OK)
          << entry << describeDTypes(dtypes)
          << ": the table accepts it, the runtime recorded: " << message;
    } else {
      EXPECT_EQ(status, MEMOPT_ERROR_INVALID_ARGUMENT)
          << entry << describeDTypes(dtypes)
          << ": the table rejects it, the runtime recorded: " << message;
      EXPECT_EQ(message,
                std::string(entry) + ": " +
                    runtime::describeDTypeRejection(rule, dtypes.data()));
    }
    memopt_clear_error(ctx);
    ++walked;
  }
  return walked;
}

/// Calls every row's entry on `ctx` with every combination of dtypes in its
/// slots, after `reset` (which restores the buffers), and expects it to
/// record an error exactly when the row rejects the combination, with the
/// row's message; clears the error after each. The twins (kDTypeTwins) are
/// walked likewise against their counterpart's row, naming themselves, on
/// `hostBuffers` (host memory; `buffers` when null, as on the host runtime).
/// With `onlyRejected`, skips the combinations the row accepts (a CUDA
/// context without a device, where argument checks run but kernels cannot).
/// Returns the number of calls.
inline int walkDTypeRules(memopt_context *ctx, const DTypeCallBuffers &buffers,
                          const std::function<void()> &reset,
                          bool onlyRejected = false,
                          const DTypeCallBuffers *hostBuffers = nullptr) {
  std::vector<DTypeCall> calls = dtypeCalls();
  std::map<std::string, const DTypeCall *> byEntry;
  for (const DTypeCall &call : calls) {
    EXPECT_NE(runtime::findDTypeRule(call.entry), nullptr)
        << call.entry << " has a call here but no row in the table";
    byEntry[call.entry] = &call;
  }
  auto findCall = [&](const char *entry) -> const DTypeCall * {
    auto it = byEntry.find(entry);
    if (it != byEntry.end())
      return it->second;
    ADD_FAILURE() << entry << " has a row but no call in DTypeRuleCalls.h";
    return nullptr;
  };
  int walked = 0;
  for (const runtime::DTypeRule &rule : runtime::kDTypeRules)
    if (const DTypeCall *call = findCall(rule.entry))
      walked += walkDTypeRow(ctx, rule.entry, rule, *call, buffers, reset,
                             onlyRejected);
  for (const runtime::DTypeTwin &twin : runtime::kDTypeTwins) {
    const runtime::DTypeRule *rule = runtime::findDTypeRule(twin.of);
    EXPECT_NE(rule, nullptr)
        << twin.entry << " is the twin of " << twin.of << ", which has no row";
    if (const DTypeCall *call = findCall(twin.entry); call && rule)
      walked += walkDTypeRow(ctx, twin.entry, *rule, *call,
                             hostBuffers ? *hostBuffers : buffers, reset,
                             onlyRejected);
  }
  return walked;
}

} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_DTYPERULECALLS_H
