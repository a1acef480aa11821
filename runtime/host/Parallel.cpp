//===- Parallel.cpp - the host kernels' worker threads --------------------===//
//
// One process-wide pool: the calling thread runs the first range of a loop
// and workers 1..chunks-1 the others. A loop is published by advancing a
// generation counter; workers spin on it for a short while after each loop
// and then sleep on a condition variable. The caller waits for every
// worker to acknowledge the generation, so the loop's description can be
// rewritten by the next parallelFor.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sched.h>
#include <thread>
#include <vector>

using namespace memopt::host;

namespace {

/// How long an idle worker spins before it sleeps: longer than the gap
/// between two kernels of a step, short enough not to hold a core that
/// OpenBLAS's threads want for a GEMM.
constexpr std::chrono::microseconds kSpin{200};

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

int readThreadCount() {
  for (const char *name : {"MEMOPT_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char *value = std::getenv(name);
    if (!value || !*value)
      continue;
    // OMP_NUM_THREADS may list one count per nesting level: the first one.
    char *end = nullptr;
    long count = std::strtol(value, &end, 10);
    if (end != value && count >= 1)
      return static_cast<int>(std::min(count, 1024L));
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

class Pool {
public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i)
      workers.emplace_back([this, i] { work(i); });
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping.store(true, std::memory_order_relaxed);
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    for (std::thread &worker : workers)
      worker.join();
  }

  bool run(int64_t n, int64_t chunks, detail::RangeFn fn, void *body) {
    if (busy.exchange(true, std::memory_order_acquire))
      return false;
    job = {n, chunks, fn, body};
    pending.store(static_cast<int64_t>(workers.size()),
                  std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex);
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    runChunk(0);
    for (unsigned spins = 0; pending.load(std::memory_order_acquire) != 0;
         ++spins) {
      if (spins < 4096)
        pause();
      else
        std::this_thread::yield();
    }
    busy.store(false, std::memory_order_release);
    return true;
  }

private:
  struct Job {
    int64_t n = 0, chunks = 0;
    detail::RangeFn fn = nullptr;
    void *body = nullptr;
  };

  void runChunk(int64_t index) {
    if (index >= job.chunks)
      return;
    // Range `index` of `chunks` near-equal ones, without overflowing n *
    // index.
    int64_t size = job.n / job.chunks, extra = job.n % job.chunks;
    int64_t begin = index * size + std::min(index, extra);
    int64_t end = begin + size + (index < extra ? 1 : 0);
    job.fn(job.body, begin, end);
  }

  void work(int64_t index) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t now = generation.load(std::memory_order_acquire);
      auto deadline = std::chrono::steady_clock::now() + kSpin;
      for (unsigned spins = 0; now == seen; ++spins) {
        pause();
        now = generation.load(std::memory_order_acquire);
        if (now == seen && spins % 64 == 63 &&
            std::chrono::steady_clock::now() > deadline) {
          std::unique_lock<std::mutex> lock(mutex);
          wake.wait(lock, [&] {
            return generation.load(std::memory_order_acquire) != seen;
          });
          now = generation.load(std::memory_order_acquire);
        }
      }
      seen = now;
      if (stopping.load(std::memory_order_relaxed))
        return;
      runChunk(index);
      pending.fetch_sub(1, std::memory_order_release);
    }
  }

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};
  std::atomic<int64_t> pending{0};
  std::atomic<bool> busy{false};
  std::atomic<bool> stopping{false};
  /// Written by run() before the generation advances, read by the workers
  /// after they see it.
  Job job;
};

Pool &pool() {
  static Pool instance(threadCount());
  return instance;
}

} // namespace

int memopt::host::threadCount() {
  static const int count = readThreadCount();
  return count;
}

bool memopt::host::detail::runParallel(int64_t n, int64_t chunks, RangeFn fn,
                                       void *body) {
  return pool().run(n, chunks, fn, body);
}
