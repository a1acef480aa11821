//===- Parallel.h - the host kernels' worker threads ------------*- C++ -*-===//
//
// The host kernels split their loops over independent outputs (elements,
// rows, channels, columns) across a fixed set of worker threads. Every
// output is computed by one call, by the same serial code whatever the
// number of threads, and no sum is split between threads, so a step's
// results are bit for bit the same on 1 thread and on 64.
//
// The number of threads is MEMOPT_NUM_THREADS, else OMP_NUM_THREADS (the
// variable users already set for their BLAS), else the CPUs this process
// may run on. The workers start on the first parallel loop and stay until
// the process exits; between loops they spin briefly (a training step's
// kernels come back to back) and then sleep. GEMMs are OpenBLAS's: it has
// threads of its own and is never called from a worker.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOST_PARALLEL_H
#define MEMOPT_RUNTIME_HOST_PARALLEL_H

#include <cstdint>
#include <type_traits>

namespace memopt {
namespace host {

/// The number of threads parallelFor uses (at least 1).
int threadCount();

/// The grain of an elementwise loop: a few microseconds of work on a few
/// arithmetic operations per element.
constexpr int64_t kElementGrain = 8192;

/// The grain of a loop over rows of `cols` elements each.
inline int64_t rowGrain(int64_t cols) {
  return cols >= kElementGrain ? 1 : kElementGrain / (cols > 0 ? cols : 1);
}

/// Calls body(begin, end) on disjoint ranges that cover [0, n) in order, on
/// up to threadCount() threads; on the calling thread alone, as body(0, n),
/// when n < 2 * grain (too little work to pay for a thread) or when another
/// parallelFor is running. `grain` is the fewest iterations worth one
/// thread: the iterations of about 10 microseconds of work. The iterations
/// must be independent; parallelFor returns when all have run.
template <typename Body>
void parallelFor(int64_t n, int64_t grain, Body &&body);

namespace detail {
using RangeFn = void (*)(void *body, int64_t begin, int64_t end);
/// Runs `fn(body, begin, end)` over [0, n) split into `chunks` ranges, or
/// returns false (having run nothing) when the workers are busy.
bool runParallel(int64_t n, int64_t chunks, RangeFn fn, void *body);
} // namespace detail

template <typename Body>
void parallelFor(int64_t n, int64_t grain, Body &&body) {
  if (n <= 0)
    return;
  int64_t chunks = grain > 0 ? n / grain : n;
  int64_t threads = threadCount();
  if (chunks > threads)
    chunks = threads;
  if (chunks >= 2) {
    using Fn = std::remove_reference_t<Body>;
    auto trampoline = [](void *fn, int64_t begin, int64_t end) {
      (*static_cast<Fn *>(fn))(begin, end);
    };
    if (detail::runParallel(
            n, chunks, trampoline,
            const_cast<void *>(static_cast<const void *>(&body))))
      return;
  }
  body(int64_t(0), n);
}

} // namespace host
} // namespace memopt

#endif // MEMOPT_RUNTIME_HOST_PARALLEL_H
