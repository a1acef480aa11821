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
