//===- HostOptimizer.cpp - optimizer offload's entries on the CPU ---------===//
//
// The memopt_host_* entries of optimizer offload (ZeRO-Offload: Ren et al.,
// "ZeRO-Offload: Democratizing Billion-Scale Model Training", 2021): the
// cast and the SGD, AdamW and 8-bit AdamW updates of runtime.h, run on the
// CPU over host memory that memopt_transfer filled (it waited for the
// stream, so nothing here calls CUDA). The loops are the host runtime's
// (memopt/runtime/HostUpdate.h), in a file compiled with its floating-point
// options (CMakeLists.txt), so an update gives the same bits here, on the
// host runtime and, for the device entries, on the GPU.
//
// The loops split [0, n) (whole blocks for 8-bit state) across threads once
// there is enough work to pay for starting them; each element is one
// thread's, so the result does not depend on the number of threads.
// O(n) work and memory traffic per call.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"

#include "memopt/runtime/HostUpdate.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

using namespace memopt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// The most threads a loop uses: MEMOPT_NUM_THREADS (as for the host
/// runtime's kernels), else the machine's hardware threads.
int threadCount() {
  static const int count = [] {
    const char *value = std::getenv("MEMOPT_NUM_THREADS");
    long threads = value && *value ? std::strtol(value, nullptr, 10) : 0;
    if (threads < 1)
      threads = static_cast<long>(std::thread::hardware_concurrency());
    return static_cast<int>(std::clamp(threads, 1L, 256L));
  }();
  return count;
}

/// The fewest elements worth a thread of their own: starting one costs tens
/// of microseconds, an AdamW element a few nanoseconds.
constexpr int64_t kElementGrain = 1 << 16;

/// Calls body(begin, end) on disjoint ranges that cover [0, n), on up to
/// threadCount() threads, at least `grain` iterations each; returns when all
/// have run. A thread that cannot be started leaves its ranges to the
/// calling thread.
template <typename Body>
void parallelFor(int64_t n, int64_t grain, const Body &body) {
  if (n <= 0)
    return;
  int64_t chunks = std::min<int64_t>(threadCount(), n / grain);
  if (chunks < 2) {
    body(int64_t(0), n);
    return;
  }
  auto bound = [&](int64_t k) { return n * k / chunks; };
  std::vector<std::thread> threads;
  int64_t k = 1;
  try {
    for (; k < chunks; ++k)
      threads.emplace_back(body, bound(k), bound(k + 1));
  } catch (const std::system_error &) {
    for (int64_t rest = k; rest < chunks; ++rest)
      body(bound(rest), bound(rest + 1));
  }
  body(int64_t(0), bound(1));
  for (std::thread &thread : threads)
    thread.join();
}

/// HostUpdate.h's loops on threads of their own.
const auto split = [](int64_t n, int64_t width, const auto &body) {
  parallelFor(n, kElementGrain / width, body);
};

} // namespace

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

void memopt_host_cast(memopt_context *ctx, memopt_dtype in_dtype,
                      const void *input, memopt_dtype out_dtype, void *output,
                      int64_t n) {
  cpu::cast(ctx, "memopt_host_cast", split, in_dtype, input, out_dtype, output,
            n);
}

void memopt_host_sgd_update(memopt_context *ctx, memopt_dtype dtype,
                            const void *param, const void *grad,
                            const void *momentum_buffer, const uint8_t *skip,
                            void *new_param, void *new_momentum_buffer,
                            int64_t n, double lr, double momentum,
                            double weight_decay) {
  cpu::sgdUpdate(ctx, "memopt_host_sgd_update", split, dtype, param, grad,
                 momentum_buffer, skip, new_param, new_momentum_buffer, n, lr,
                 momentum, weight_decay);
}

void memopt_host_adamw_update(memopt_context *ctx, memopt_dtype dtype,
                              const void *param, const void *grad,
                              const void *exp_avg, const void *exp_avg_sq,
                              const int64_t *step, const uint8_t *skip,
                              void *new_param, void *new_exp_avg,
                              void *new_exp_avg_sq, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weight_decay) {
  cpu::adamwUpdate(ctx, "memopt_host_adamw_update", split, dtype, param, grad,
                   exp_avg, exp_avg_sq, step, skip, new_param, new_exp_avg,
                   new_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay);
}

void memopt_host_adamw8bit_update(memopt_context *ctx, memopt_dtype dtype,
                                  const void *param, const void *grad,
                                  const void *exp_avg, const void *exp_avg_sq,
                                  const int64_t *step, const uint8_t *skip,
                                  void *new_param, void *new_exp_avg,
                                  void *new_exp_avg_sq, int64_t n, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay) {
  cpu::adamw8bitUpdate(ctx, "memopt_host_adamw8bit_update", split, dtype, param,
                       grad, exp_avg, exp_avg_sq, step, skip, new_param,
                       new_exp_avg, new_exp_avg_sq, n, lr, beta1, beta2, eps,
                       weight_decay);
}

// Gradient accumulation and clipping on the host: the zero a sum starts
// from, the adds onto it, clipping's sum of squares and its rescale. Each
// element is computed in f32 as the device computes it; a sum of squares
// accumulates in double in index order, so it rounds once, as the GPU's
// tree does, but its bits may differ from the GPU's in the last place.

void memopt_host_fill(memopt_context *ctx, memopt_dtype dtype, void *dst,
                      int64_t n, double value) {
  const char *entry = "memopt_host_fill";
  if (!checkDTypes(ctx, entry, {dtype}) || !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {dst}) || isEmpty({n}))
    return;
  if (dtype == MEMOPT_I1) {
    std::fill_n(static_cast<uint8_t *>(dst), n, value != 0.0 ? 1 : 0);
    return;
  }
  cpu::dispatchNumber(dtype, [&](auto storage) {
    using Storage = decltype(storage);
    typename Storage::T v;
    if constexpr (Storage::isFloat)
      v = Storage::store(static_cast<float>(value));
    else
      v = static_cast<typename Storage::T>(value);
    std::fill_n(static_cast<typename Storage::T *>(dst), n, v);
  });
}

void memopt_host_binary(memopt_context *ctx, memopt_binary_op op,
                        memopt_dtype dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n) {
  const char *entry = "memopt_host_binary";
  if (!checkElementwise(ctx, entry, op, MEMOPT_BINARY_MAXIMUM, dtype, n,
                        {lhs, rhs, out}) ||
      isEmpty({n}))
    return;
  cpu::dispatchFloat(dtype, [&](auto storage) {
    using Storage = decltype(storage);
    auto *a = static_cast<const typename Storage::T *>(lhs);
    auto *b = static_cast<const typename Storage::T *>(rhs);
    auto *y = static_cast<typename Storage::T *>(out);
    split(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = Storage::store(
            binaryValue(op, Storage::load(a[i]), Storage::load(b[i])));
    });
  });
}

void memopt_host_scale_by(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const float *factor, void *out,
                          int64_t n) {
  const char *entry = "memopt_host_scale_by";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkPointers(ctx, entry, 1, {factor}) || isEmpty({n}))
    return;
  float f = *factor;
  cpu::dispatchFloat(dtype, [&](auto storage) {
    using Storage = decltype(storage);
    auto *x = static_cast<const typename Storage::T *>(input);
    auto *y = static_cast<typename Storage::T *>(out);
    split(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = Storage::store(Storage::load(x[i]) * f);
    });
  });
}

void memopt_host_reduce(memopt_context *ctx, memopt_reduce_op op,
                        memopt_dtype in_dtype, const void *input,
                        memopt_dtype out_dtype, void *out, int64_t outer,
                        int64_t reduced, int64_t inner) {
  const char *entry = "memopt_host_reduce";
  if (!checkReduce(ctx, entry, op, in_dtype, input, out_dtype, out, outer,
                   reduced, inner) ||
      isEmpty({outer, inner}))
    return;
  cpu::dispatchFloat(in_dtype, [&](auto in) {
    cpu::dispatchFloat(out_dtype, [&](auto outStorage) {
      using In = decltype(in);
      using Out = decltype(outStorage);
      auto *x = static_cast<const typename In::T *>(input);
      auto *y = static_cast<typename Out::T *>(out);
      split(outer * inner, 1, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
          int64_t o = k / inner, i = k % inner;
          const typename In::T *row = x + o * reduced * inner + i;
          float result;
          if (op == MEMOPT_REDUCE_MAX) {
            result = In::load(row[0]);
            for (int64_t r = 1; r < reduced; ++r)
              result = binaryValue(MEMOPT_BINARY_MAXIMUM, result,
                                   In::load(row[r * inner]));
          } else {
            double sum = 0.0;
            for (int64_t r = 0; r < reduced; ++r) {
              double v = In::load(row[r * inner]);
              sum += op == MEMOPT_REDUCE_SUM_SQUARES ? v * v : v;
            }
            if (op == MEMOPT_REDUCE_MEAN)
              sum = reduced ? sum / static_cast<double>(reduced) : NAN;
            result = static_cast<float>(sum);
          }
          y[k] = Out::store(result);
        }
      });
    });
  });
}
