//===- Placement.cpp - Static buffer placement ----------------------------===//
//
// Dynamic storage allocation: every buffer has a lifetime [lower, upper) and a
// size; find offsets so that buffers live at the same time are disjoint in
// memory, with the smallest arena. The problem is NP-hard; the lower bound LB
// (largest total size live at one instant) is often reached on real traces.
//
// placeBuffers() works in units of the alignment times the gcd of the
// aligned sizes (a placement pushed down until every buffer rests on 0 or on
// another one has only sums of sizes as offsets, so nothing is lost) and runs,
// in order:
//
// 1. A portfolio of greedy first-fit placements. Each visits the buffers in one
//    order and puts each one at the lowest offset where it overlaps no
//    already-placed buffer live at the same time. The orders, most useful
//    first: size then start time (for equal sizes, first fit by start time is
//    optimal: interval-graph colouring), the peak live total over the
//    buffer's lifetime, size octave then start, size then lifetime, lifetime,
//    area, start, size then end, peak then area. The best arena wins; the
//    portfolio stops as soon as one reaches LB, and (with a time limit) when
//    the next order would overrun PlacementOptions::heuristicShare of it.
//    Above exactSearchMaxBuffers only the first three orders run.
//    The lowest fitting offset is found with a segment tree over the
//    compressed time axis (T <= 2n slots). Each tree node keeps two disjoint,
//    merged interval sets of occupied memory, as sorted vectors of runs:
//    `own` (buffers whose canonical decomposition contains the node, i.e.
//    live during all of it) and `sub` (everything placed anywhere below the
//    node). A buffer conflicts with a query exactly when it sits in `own` of
//    a node on the two boundary paths of the query range or in `sub` of one
//    of the query's canonical nodes, so a query looks at O(log T) sets.
//    Starting at x = 0, each set in turn moves x to its own next fit (walking
//    its runs from x); the query ends when a full round leaves x unchanged.
//    One placement costs O(log T * (log n + R)) per insertion, R the runs a
//    merge removes or shifts, plus O(J log T log n) per query, where J is the
//    number of times x moves; the 62k-buffer Y_1 trace takes about half a
//    second per order.
//
// 2. Improvement ("squeaky wheel"), while LB is not reached, for at most
//    improvementRounds rounds and within the heuristic budget: mark the
//    buffers that hold up the arena (those reaching its top, the buffers they
//    rest on, and so on down to 0), move them to the front of the order and
//    place again; keep the best. This takes pangu_2.6B from 1.0076 to LB.
//
// 3. If LB is still not reached and there are at most exactSearchMaxBuffers
//    buffers, the exact search of PlacementSearch.cpp (MiniMalloc's canonical
//    search, decision version) until the time limit: first "does everything
//    fit in LB?" for lowerBoundShare of the remaining time, then bisection
//    between the highest refuted capacity and the incumbent. When a capacity
//    one unit below the incumbent is refuted, the arena is proven optimal.
//
// Everything is deterministic for a given input (fixed orders, index
// tie-breaks, node limits); only where a time budget (the heuristic share or
// the time limit) stops the improvement loop or the search can vary.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planning/Placement.h"

#include "PlacementInternal.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <type_traits>

using namespace memopt;
using namespace memopt::detail;

int64_t memopt::alignUp(int64_t value, int64_t alignment) {
  assert(alignment >= 1 && "alignment must be positive");
  return (value + alignment - 1) / alignment * alignment;
}

int64_t memopt::computeLowerBound(const std::vector<Buffer> &buffers,
                                  int64_t alignment) {
  // (time, delta); at equal times frees (-) sort before allocations (+)
  // because lifetimes are half-open.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * buffers.size());
  for (const Buffer &b : buffers) {
    if (b.upper <= b.lower || b.size <= 0)
      continue;
    int64_t size = alignUp(b.size, alignment);
    events.emplace_back(b.lower, size);
    events.emplace_back(b.upper, -size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto &event : events) {
    live += event.second;
    peak = std::max(peak, live);
  }
  return peak;
}

Placement memopt::stackBuffers(const std::vector<Buffer> &buffers,
                               int64_t alignment) {
  Placement result;
  result.method = "no-reuse";
  result.lowerBound = computeLowerBound(buffers, alignment);
  result.offsets.reserve(buffers.size());
  for (const Buffer &b : buffers) {
    result.offsets.push_back(result.arenaSize);
    result.arenaSize += alignUp(std::max<int64_t>(b.size, 0), alignment);
  }
  result.provenOptimal = result.arenaSize == result.lowerBound;
  return result;
}

namespace {

UnitProblem buildUnitProblem(const std::vector<Buffer> &buffers,
                             int64_t alignment) {
  UnitProblem p;
  std::vector<int64_t> times;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    if (b.upper <= b.lower || b.size <= 0)
      continue;
    p.original.push_back(i);
    p.size.push_back(alignUp(b.size, alignment) / alignment);
    p.lower.push_back(b.lower);
    p.upper.push_back(b.upper);
    times.push_back(b.lower);
    times.push_back(b.upper);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  p.numSlots = times.empty() ? 0 : times.size() - 1;
  auto slotOf = [&](int64_t t) {
    return static_cast<uint32_t>(
        std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  for (size_t i = 0; i < p.numBuffers(); ++i) {
    p.first.push_back(slotOf(p.lower[i]));
    p.last.push_back(slotOf(p.upper[i]));
  }
  // A canonical placement (every buffer at 0 or on top of another) has only
  // sums of sizes as offsets, and every placement can be pushed down into
  // one, so working in units of the sizes' gcd loses nothing and makes the
  // capacities the search tries coarser.
  int64_t g = 0;
  for (int64_t size : p.size)
    g = std::gcd(g, size);
  if (g > 1)
    for (int64_t &size : p.size)
      size /= g;
  p.unit = alignment * std::max<int64_t>(g, 1);
  std::vector<int64_t> delta(p.numSlots + 1, 0);
  for (size_t i = 0; i < p.numBuffers(); ++i) {
    delta[p.first[i]] += p.size[i];
    delta[p.last[i]] -= p.size[i];
  }
  int64_t live = 0;
  for (size_t t = 0; t < p.numSlots; ++t) {
    live += delta[t];
    p.lowerBound = std::max(p.lowerBound, live);
  }
  return p;
}

//===----------------------------------------------------------------------===//
// Greedy first-fit
//===----------------------------------------------------------------------===//

/// Occupied memory as disjoint half-open runs (begin -> end); touching runs are
/// merged. Placements are never removed, so merging is permanent.
class RunSet {
public:
  bool empty() const { return runs.empty(); }

  void insert(int64_t begin, int64_t end) {
    // First run that ends at or after `begin` (it touches or follows it).
    auto first = std::lower_bound(
        runs.begin(), runs.end(), begin,
        [](const Run &r, int64_t value) { return r.end < value; });
    auto last = first;
    while (last != runs.end() && last->begin <= end) {
      begin = std::min(begin, last->begin);
      end = std::max(end, last->end);
      ++last;
    }
    if (first == last) {
      runs.insert(first, {begin, end});
      return;
    }
    *first = {begin, end};
    runs.erase(first + 1, last);
  }

  /// The lowest y >= x such that [y, y + size) meets no run: walks the runs
  /// from x on, so runs of this set jumped over cost a step each.
  int64_t nextFit(int64_t x, int64_t size) const {
    // First run that ends after x: the only ones that can block.
    auto it = std::upper_bound(
        runs.begin(), runs.end(), x,
        [](int64_t value, const Run &r) { return value < r.end; });
    for (; it != runs.end() && it->begin < x + size; ++it)
      x = std::max(x, it->end);
    return x;
  }

private:
  /// Disjoint, non-touching runs sorted by offset; a sorted vector keeps the
  /// binary searches in cache, which matters more than the insert's memmove.
  struct Run {
    int64_t begin, end;
  };
  std::vector<Run> runs;
};

/// Segment tree over time slots answering "lowest offset free during a slot
/// range" (see the file comment).
class FitIndex {
public:
  explicit FitIndex(size_t numSlots) {
    leaves = 1;
    while (leaves < std::max<size_t>(numSlots, 1))
      leaves *= 2;
    own.resize(2 * leaves);
    sub.resize(2 * leaves);
  }

  int64_t lowestFit(size_t lo, size_t hi, int64_t size) {
    sets.clear();
    forEachPathNode(lo, hi, [&](size_t node) {
      if (!own[node].empty())
        sets.push_back(&own[node]);
    });
    forEachCanonicalNode(lo, hi, [&](size_t node) {
      if (!sub[node].empty())
        sets.push_back(&sub[node]);
    });
    return fitFrom(0, size);
  }

  /// The lowest fit at or above x among the sets of the last query.
  int64_t fitFrom(int64_t x, int64_t size) {
    // Every set moves x to its own next fit; x is the answer once a full
    // round over the sets leaves it unchanged.
    size_t clear = 0, i = 0;
    while (clear < sets.size()) {
      int64_t next = sets[i]->nextFit(x, size);
      if (next != x) {
        x = next;
        clear = 1;
      } else {
        ++clear;
      }
      i = i + 1 == sets.size() ? 0 : i + 1;
    }
    return x;
  }

  void insert(size_t lo, size_t hi, int64_t begin, int64_t end) {
    forEachCanonicalNode(lo, hi, [&](size_t node) {
      own[node].insert(begin, end);
      sub[node].insert(begin, end);
    });
    // Every strict ancestor of a canonical node is on one of the two paths;
    // path nodes below a canonical node are covered by the buffer entirely,
    // so recording it in their `sub` is exact as well.
    forEachPathNode(lo, hi, [&](size_t node) { sub[node].insert(begin, end); });
  }

private:
  template <typename Fn>
  void forEachCanonicalNode(size_t lo, size_t hi, Fn fn) {
    for (size_t l = lo + leaves, r = hi + leaves; l < r; l /= 2, r /= 2) {
      if (l & 1)
        fn(l++);
      if (r & 1)
        fn(--r);
    }
  }

  /// Nodes on the root paths of the first and the last slot of [lo, hi).
  template <typename Fn> void forEachPathNode(size_t lo, size_t hi, Fn fn) {
    size_t a = lo + leaves, b = hi - 1 + leaves;
    while (a != b) {
      fn(a);
      fn(b);
      a /= 2;
      b /= 2;
    }
    for (; a >= 1; a /= 2)
      fn(a);
  }

  size_t leaves;
  std::vector<RunSet> own, sub;
  std::vector<RunSet *> sets;
};

/// First-fit in `order`; returns the arena in units and fills `offsets`.
int64_t greedyFirstFit(const UnitProblem &p, const std::vector<uint32_t> &order,
                       std::vector<int64_t> &offsets) {
  FitIndex index(p.numSlots);
  offsets.assign(p.numBuffers(), 0);
  int64_t arena = 0;
  for (uint32_t i : order) {
    int64_t offset = index.lowestFit(p.first[i], p.last[i], p.size[i]);
    index.insert(p.first[i], p.last[i], offset, offset + p.size[i]);
    offsets[i] = offset;
    arena = std::max(arena, offset + p.size[i]);
  }
  return arena;
}

/// Marks the buffers that hold up the arena: those reaching its top, the
/// buffers they rest on (overlapping in time, top = their offset), and so on
/// down to offset 0. Uses a sweep over the buffers sorted by top, so it costs
/// O(n log n + chain * live).
void markCriticalChains(const UnitProblem &p,
                        const std::vector<int64_t> &offsets, int64_t arena,
                        std::vector<char> &critical) {
  size_t n = p.numBuffers();
  // Buffers by top, to find the ones a critical buffer can rest on.
  std::vector<uint32_t> byTop(n);
  std::iota(byTop.begin(), byTop.end(), 0);
  auto top = [&](uint32_t i) { return offsets[i] + p.size[i]; };
  std::sort(byTop.begin(), byTop.end(),
            [&](uint32_t a, uint32_t b) { return top(a) < top(b); });
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < n; ++i)
    if (top(i) == arena) {
      critical[i] = 1;
      stack.push_back(i);
    }
  while (!stack.empty()) {
    uint32_t c = stack.back();
    stack.pop_back();
    int64_t at = offsets[c];
    if (at == 0)
      continue;
    auto range = std::equal_range(
        byTop.begin(), byTop.end(), at, [&](auto a, auto b) {
          if constexpr (std::is_same_v<decltype(a), int64_t>)
            return a < top(b);
          else
            return top(a) < b;
        });
    for (auto it = range.first; it != range.second; ++it) {
      uint32_t j = *it;
      if (!critical[j] && p.first[j] < p.last[c] && p.first[c] < p.last[j]) {
        critical[j] = 1;
        stack.push_back(j);
      }
    }
  }
}

struct GreedyOrder {
  const char *name;
  std::function<bool(uint32_t, uint32_t)> before;
};

std::vector<GreedyOrder> greedyOrders(const UnitProblem &p) {
  auto life = [&p](uint32_t i) { return p.upper[i] - p.lower[i]; };
  auto area = [&p, life](uint32_t i) {
    return static_cast<long double>(p.size[i]) * life(i);
  };
  // peak[i]: the largest total size live at one slot of buffer i's lifetime,
  // by a sparse table of range maxima over the per-slot totals.
  auto peak = std::make_shared<std::vector<int64_t>>(p.numBuffers());
  {
    std::vector<int64_t> live(p.numSlots + 1, 0);
    for (size_t i = 0; i < p.numBuffers(); ++i) {
      live[p.first[i]] += p.size[i];
      live[p.last[i]] -= p.size[i];
    }
    for (size_t t = 1; t < p.numSlots; ++t)
      live[t] += live[t - 1];
    live.resize(p.numSlots);
    std::vector<std::vector<int64_t>> table{std::move(live)};
    for (size_t w = 1; 2 * w <= p.numSlots; w *= 2) {
      const std::vector<int64_t> &prev = table.back();
      std::vector<int64_t> next(p.numSlots - 2 * w + 1);
      for (size_t t = 0; t < next.size(); ++t)
        next[t] = std::max(prev[t], prev[t + w]);
      table.push_back(std::move(next));
    }
    for (size_t i = 0; i < p.numBuffers(); ++i) {
      size_t len = p.last[i] - p.first[i], level = 0;
      while ((size_t(2) << level) <= len)
        ++level;
      (*peak)[i] = std::max(table[level][p.first[i]],
                            table[level][p.last[i] - (size_t(1) << level)]);
    }
  }
  // Ties fall back to the next criterion and finally to the index, so every
  // order is total and the result deterministic.
  return {
      {"greedy-by-size-start",
       [=, &p](uint32_t a, uint32_t b) {
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         if (p.lower[a] != p.lower[b])
           return p.lower[a] < p.lower[b];
         return a < b;
       }},
      {"greedy-by-peak",
       [=, &p](uint32_t a, uint32_t b) {
         const std::vector<int64_t> &pk = *peak;
         if (pk[a] != pk[b])
           return pk[a] > pk[b];
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         if (life(a) != life(b))
           return life(a) > life(b);
         return a < b;
       }},
      {"greedy-by-octave-start",
       [=, &p](uint32_t a, uint32_t b) {
         int la = 63 - __builtin_clzll(uint64_t(p.size[a])), lb = 63 - __builtin_clzll(uint64_t(p.size[b]));
         if (la != lb)
           return la > lb;
         if (p.lower[a] != p.lower[b])
           return p.lower[a] < p.lower[b];
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         return a < b;
       }},
      {"greedy-by-size",
       [=, &p](uint32_t a, uint32_t b) {
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         if (life(a) != life(b))
           return life(a) > life(b);
         return a < b;
       }},
      {"greedy-by-lifetime",
       [=, &p](uint32_t a, uint32_t b) {
         if (life(a) != life(b))
           return life(a) > life(b);
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         return a < b;
       }},
      {"greedy-by-area",
       [=, &p](uint32_t a, uint32_t b) {
         if (area(a) != area(b))
           return area(a) > area(b);
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         return a < b;
       }},
      {"greedy-by-start",
       [=, &p](uint32_t a, uint32_t b) {
         if (p.lower[a] != p.lower[b])
           return p.lower[a] < p.lower[b];
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         return a < b;
       }},
      {"greedy-by-size-end",
       [=, &p](uint32_t a, uint32_t b) {
         if (p.size[a] != p.size[b])
           return p.size[a] > p.size[b];
         if (p.upper[a] != p.upper[b])
           return p.upper[a] > p.upper[b];
         return a < b;
       }},
      {"greedy-by-peak-area",
       [=](uint32_t a, uint32_t b) {
         const std::vector<int64_t> &pk = *peak;
         if (pk[a] != pk[b])
           return pk[a] > pk[b];
         if (area(a) != area(b))
           return area(a) > area(b);
         return a < b;
       }},
  };
}

} // namespace

namespace {

/// One run of placeBuffers: the greedy orders, the improvement loop and the
/// exact search, each keeping the best placement so far.
class Placer {
public:
  Placer(const std::vector<Buffer> &buffers, const PlacementOptions &options)
      : options(options), start(std::chrono::steady_clock::now()),
        p(buildUnitProblem(buffers, options.alignment)),
        unlimited(options.timeLimitSeconds <= 0) {
    result.offsets.assign(buffers.size(), 0);
    result.lowerBound = p.lowerBound * p.unit;
    // The heuristics get heuristicShare of the time limit (all of the
    // portfolio when the limit is 0): an order starts only when the one
    // before suggests it ends within that budget, and the improvement loop
    // runs until it is spent.
    deadline = start + toDuration(options.timeLimitSeconds);
    heuristicEnd =
        start + toDuration(options.timeLimitSeconds * options.heuristicShare);
  }

  Placement run();

private:
  static std::chrono::steady_clock::duration toDuration(double seconds) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(seconds));
  }
  /// Makes `unitOffsets` (arena `arena`) the result, in bytes.
  void publish(const std::vector<int64_t> &unitOffsets, int64_t arena) {
    for (size_t i = 0; i < p.numBuffers(); ++i)
      result.offsets[p.original[i]] = unitOffsets[i] * p.unit;
    result.arenaSize = arena * p.unit;
  }
  /// First fit in each greedy order (or the buffers stacked in index order
  /// without runHeuristics), keeping the best.
  void placeGreedily();
  /// "Squeaky wheel": the buffers that hold up the arena (those reaching
  /// its top and the chains they rest on) were placed too late; move them
  /// to the front of the order and place again. The walk continues from the
  /// new order whether or not it improved, so it does not stall; the best
  /// placement is kept.
  void improve();
  /// The decision searches of PlacementSearch.cpp (below).
  void searchExactly();

  const PlacementOptions &options;
  std::chrono::steady_clock::time_point start, deadline, heuristicEnd;
  UnitProblem p;
  bool unlimited;
  Placement result;
  int64_t bestArena = -1;
  std::vector<uint32_t> bestOrder;
  std::vector<int64_t> bestOffsets;
  /// How long the last greedy placement took.
  std::chrono::steady_clock::duration lastRun{};
};

} // namespace

void Placer::placeGreedily() {
  std::vector<uint32_t> order(p.numBuffers());
  std::vector<int64_t> offsets;
  std::vector<GreedyOrder> orders = greedyOrders(p);
  if (!options.runHeuristics) {
    // Testing the exact search alone: start from the buffers stacked in
    // index order (a valid placement), one "order" that costs nothing.
    orders.clear();
    bestArena = 0;
    bestOffsets.resize(p.numBuffers());
    for (size_t i = 0; i < p.numBuffers(); ++i) {
      bestOffsets[i] = bestArena;
      bestArena += p.size[i];
    }
    result.method = "stacked";
  }
  // Beyond the exact search's reach, the improvement loop is worth more than
  // the orders that never win on large traces.
  if (p.numBuffers() > options.exactSearchMaxBuffers && !unlimited)
    orders.resize(3);
  for (const GreedyOrder &g : orders) {
    auto t0 = std::chrono::steady_clock::now();
    if (bestArena >= 0 && !unlimited && t0 + lastRun > heuristicEnd)
      break;
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), g.before);
    int64_t arena = greedyFirstFit(p, order, offsets);
    lastRun = std::chrono::steady_clock::now() - t0;
    if (bestArena < 0 || arena < bestArena) {
      bestArena = arena;
      bestOrder = order;
      bestOffsets = offsets;
      result.method = g.name;
    }
    if (bestArena == p.lowerBound)
      break;
  }
}

void Placer::improve() {
  std::vector<uint32_t> walk = bestOrder;
  std::vector<char> critical(p.numBuffers());
  int64_t walkArena = bestArena;
  std::vector<int64_t> walkOffsets = bestOffsets;
  for (int round = 0; options.runHeuristics &&
                      round < options.improvementRounds && !unlimited &&
                      bestArena > p.lowerBound;
       ++round) {
    auto t0 = std::chrono::steady_clock::now();
    if (t0 + lastRun > heuristicEnd)
      break;
    // New order: the critical buffers first, each group in its old order.
    std::fill(critical.begin(), critical.end(), 0);
    markCriticalChains(p, walkOffsets, walkArena, critical);
    std::vector<std::pair<uint64_t, uint32_t>> keyed(walk.size());
    for (size_t k = 0; k < walk.size(); ++k) {
      uint32_t i = walk[k];
      keyed[k] = {critical[i] ? k : walk.size() + k, i};
    }
    std::sort(keyed.begin(), keyed.end());
    for (size_t k = 0; k < walk.size(); ++k)
      walk[k] = keyed[k].second;
    walkArena = greedyFirstFit(p, walk, walkOffsets);
    lastRun = std::chrono::steady_clock::now() - t0;
    if (walkArena < bestArena) {
      bestArena = walkArena;
      bestOffsets = walkOffsets;
      result.method = "greedy-improved";
    }
  }
}

// Decision searches (see PlacementSearch.cpp), in two phases.
//
// 1. Until lowerBoundShare of the remaining time has passed: can everything
//    fit in LB? On real traces and on the MiniMalloc set, LB is often
//    reachable, and the search is strongest when the capacity is tight.
// 2. Then bisection between the lowest capacity not refuted and the
//    incumbent: a found placement becomes the incumbent (its arena can be
//    below the capacity asked for); a search that gives up at the node limit
//    moves the bisection up for this pass only; one that finishes without
//    a placement refutes its capacity for good.
//
// Both phases run the preorders round robin under a node limit that doubles
// every round, so a preorder that suits the instance is not starved.
void Placer::searchExactly() {
  CapacitySearch search(p);
  int64_t refutedBelow = p.lowerBound; // no arena below this exists
  bool timedOut = false;
  auto record = [&](CapacitySearch::Result r, int64_t target) {
    switch (r) {
    case CapacitySearch::Result::Found: {
      int64_t arena = 0;
      for (size_t i = 0; i < p.numBuffers(); ++i)
        arena = std::max(arena, search.offsets()[i] + p.size[i]);
      assert(arena <= target && "search exceeded its capacity");
      (void)target;
      bestArena = arena;
      publish(search.offsets(), arena);
      result.method = "exact";
      break;
    }
    case CapacitySearch::Result::Infeasible:
      refutedBelow = std::max(refutedBelow, target + 1);
      break;
    case CapacitySearch::Result::Aborted:
      break;
    case CapacitySearch::Result::TimedOut:
      timedOut = true;
      break;
    }
  };
  const uint64_t firstLimit = std::max<uint64_t>(p.numBuffers(), 64);
  auto doubled = [](uint64_t limit) {
    return limit > (UINT64_MAX >> 1) ? limit : 2 * limit;
  };
  auto now = std::chrono::steady_clock::now();
  auto phaseEnd =
      now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                (deadline - now) * options.lowerBoundShare);
  for (uint64_t limit = 2 * firstLimit;
       !timedOut && refutedBelow == p.lowerBound && bestArena > p.lowerBound;
       limit = doubled(limit))
    for (int h = 0; h < CapacitySearch::numHeuristics && !timedOut &&
                    refutedBelow == p.lowerBound && bestArena > p.lowerBound;
         ++h)
      record(search.solve(p.lowerBound, h, limit, phaseEnd), p.lowerBound);
  timedOut = false;
  // record() updates timedOut, refutedBelow and bestArena.
  uint64_t limit = 2 * firstLimit;
  while (!timedOut && refutedBelow < bestArena) {
    for (int h = 0; h < CapacitySearch::numHeuristics && !timedOut; ++h) {
      int64_t low = refutedBelow;
      while (!timedOut && low < bestArena) {
        int64_t target = low + (bestArena - low) / 2;
        CapacitySearch::Result r = search.solve(target, h, limit, deadline);
        record(r, target);
        if (r != CapacitySearch::Result::Found)
          low = target + 1;
      }
    }
    limit = doubled(limit);
  }
  result.searchNodes = search.numNodes();
  result.provenOptimal = refutedBelow >= bestArena;
}

Placement Placer::run() {
  if (p.numBuffers() == 0) {
    result.method = "trivial";
    result.provenOptimal = true;
    return result;
  }
  placeGreedily();
  improve();
  publish(bestOffsets, bestArena);
  if (bestArena == p.lowerBound) {
    result.provenOptimal = true;
    return result;
  }
  if (!unlimited && p.numBuffers() <= options.exactSearchMaxBuffers)
    searchExactly();
  return result;
}

Placement memopt::placeBuffers(const std::vector<Buffer> &buffers,
                               const PlacementOptions &options) {
  assert(options.alignment >= 1 && "alignment must be positive");
  return Placer(buffers, options).run();
}
