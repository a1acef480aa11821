//===- PlanCache.h - library plans made once per call site ------*- C++ -*-===//
//
// Library calls need a plan before they run: cuBLASLt matmuls and cuDNN
// convolutions their descriptors, layouts and algorithm, the host's oneDNN
// convolutions their primitives. A step calls the same entries with the same
// shapes every time, so a runtime makes each plan once, the first time its
// key (shapes, dtypes, options, alignments) is seen, and reuses it for every
// later call: a steady-state step creates no descriptor, asks no heuristic
// and compiles no kernel. The context owns one cache per library, and the
// plans (whose destructors release what they hold) die with it, before the
// library handles.
//
// Plain C++, shared by both runtimes; the unit tests check the caching
// without a device.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_PLANCACHE_H
#define MEMOPT_RUNTIME_PLANCACHE_H

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace memopt {
namespace runtime {

/// Plans of type `Plan` by `Key` (ordered by operator<).
template <typename Key, typename Plan> class PlanCache {
public:
  /// The plan for `key`: the cached one, or a new one that `make(Plan &)`
  /// fills in. A `make` that returns false (after recording an error) leaves
  /// nothing cached, so the next call tries again; null is returned.
  template <typename Make> Plan *get(const Key &key, Make &&make) {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = plans.find(key);
    if (found != plans.end())
      return found->second.get();
    auto plan = std::make_unique<Plan>();
    if (!make(*plan))
      return nullptr;
    Plan *result = plan.get();
    plans.emplace(key, std::move(plan));
    return result;
  }

  /// How many plans were made (for the tests and --stats).
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex);
    return plans.size();
  }

  /// Calls fn(key, plan) for every plan (for the path counts of --stats).
  template <typename Fn> void forEach(Fn &&fn) const {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &[key, plan] : plans)
      fn(key, *plan);
  }

  /// Destroys every plan.
  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    plans.clear();
  }

private:
  mutable std::mutex mutex;
  std::map<Key, std::unique_ptr<Plan>> plans;
};

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_PLANCACHE_H
