//===- Placement.cpp - Static buffer placement ----------------------------===//
//
// Dynamic storage allocation: every buffer has a lifetime [lower, upper) and a
// size; find offsets so that buffers live at the same time are disjoint in
// memory, with the smallest arena. The problem is NP-hard; the lower bound LB
// (largest total size live at one instant) is often reached on real traces.
//
// placeBuffers() works in units of the alignment (sizes rounded up and divided
// by it, so every offset it produces is aligned) and runs, in order:
//
// 1. A portfolio of greedy first-fit placements. Each visits the buffers in one
//    order (size, lifetime length, area, start time) and puts each one at the
//    lowest offset where it overlaps no already-placed buffer live at the same
//    time. The best arena wins; the portfolio stops as soon as one reaches LB.
//    The lowest fitting offset is found with a segment tree over the
//    compressed time axis (T <= 2n slots). Each tree node keeps two disjoint,
//    merged interval sets of occupied memory: `own` (buffers whose canonical
//    decomposition contains the node, i.e. live during all of it) and `sub`
//    (everything placed anywhere below the node). A buffer conflicts with a
//    query exactly when it sits in `own` of a node on the two boundary paths
//    of the query range or in `sub` of one of the query's canonical nodes, so
//    a query looks at O(log T) sets. Starting at x = 0, any set that has an
//    interval meeting [x, x + size) moves x to that interval's end (every
//    offset in between is blocked by the same interval); the query ends when
//    all sets are clear at x. One placement costs O(log T * log n) per
//    insertion plus O(J log T log n) per query, where J is the number of
//    occupied runs jumped over; no all-pairs scan, so the 62k-buffer traces
//    take well under a second per order.
//
// 2. If no heuristic reached LB, an exact branch and bound in the spirit of
//    MiniMalloc (Moffitt, ASPLOS 2023), run until the time limit, starting
//    from the best heuristic arena as incumbent. It builds a bottom-justified
//    solution in non-decreasing offset order: the next buffer may be any
//    unplaced one, and its offset is forced to the highest "floor" (top of
//    the placed buffers) over its lifetime. Every solution can be pushed down
//    until each buffer rests on 0 or on a buffer below it, and sorting that
//    solution by (offset, rank) gives a sequence this search generates, so
//    the search is complete. Symmetry: offsets must not decrease along the
//    sequence, and equal offsets must come in a fixed rank order (size
//    descending), which is also the order candidates are tried in.
//    Pruning: for each time slot t, every unplaced buffer live at t must go
//    above max(floor[t], current offset), stacked, which bounds the arena
//    from below; a branch is cut when that bound reaches the incumbent, or
//    when a buffer below the current level has no unplaced neighbour in time
//    left to rest on.
//    Candidates are tried lowest offset first, larger buffers first. A node
//    costs O(n * T) in the worst case; the search space is exponential, so it
//    is bounded by the time limit (checked every 1024 nodes) and by
//    PlacementOptions::exactSearchMaxBuffers.
//
// Everything is deterministic for a given input (fixed orders, index
// tie-breaks); only the point where the time limit stops the search varies.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planning/Placement.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <functional>
#include <map>
#include <numeric>

using namespace memopt;

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

namespace {

/// The problem in alignment units over compressed time: buffer i is live in
/// slots [first[i], last[i]) and is size[i] units large. Only buffers that
/// can conflict with something (non-empty lifetime, non-zero size) appear.
struct UnitProblem {
  std::vector<size_t> original; // index into the caller's vector
  std::vector<int64_t> size;
  std::vector<int64_t> lower, upper; // original times, for orderings
  std::vector<uint32_t> first, last;
  size_t numSlots = 0;
  int64_t lowerBound = 0; // in units

  size_t numBuffers() const { return size.size(); }
};

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
    auto it = runs.upper_bound(begin);
    if (it != runs.begin() && std::prev(it)->second >= begin) {
      --it;
      begin = it->first;
    }
    while (it != runs.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = runs.erase(it);
    }
    runs.emplace_hint(it, begin, end);
  }

  /// The end of a run meeting [x, x + size), or -1 when there is none.
  int64_t blockerEnd(int64_t x, int64_t size) const {
    auto it = runs.lower_bound(x + size);
    if (it == runs.begin())
      return -1;
    --it;
    return it->second > x ? it->second : -1;
  }

private:
  std::map<int64_t, int64_t> runs;
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
    int64_t x = 0;
    size_t clear = 0, i = 0;
    while (clear < sets.size()) {
      int64_t end = sets[i]->blockerEnd(x, size);
      if (end >= 0) {
        x = end;
        clear = 0;
        continue;
      }
      ++clear;
      i = (i + 1) % sets.size();
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

struct GreedyOrder {
  const char *name;
  std::function<bool(uint32_t, uint32_t)> before;
};

std::vector<GreedyOrder> greedyOrders(const UnitProblem &p) {
  auto life = [&p](uint32_t i) { return p.upper[i] - p.lower[i]; };
  auto area = [&p, life](uint32_t i) {
    return static_cast<long double>(p.size[i]) * life(i);
  };
  // Ties fall back to the next criterion and finally to the index, so every
  // order is total and the result deterministic.
  return {
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
  };
}

//===----------------------------------------------------------------------===//
// Exact branch and bound
//===----------------------------------------------------------------------===//

class ExactSearch {
public:
  ExactSearch(const UnitProblem &p, int64_t incumbent,
              std::chrono::steady_clock::time_point deadline)
      : p(p), deadline(deadline), best(incumbent) {
    size_t n = p.numBuffers();
    floors.assign(p.numSlots, 0);
    remaining.assign(p.numSlots, 0);
    for (size_t i = 0; i < n; ++i)
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t)
        remaining[t] += p.size[i];
    placed.assign(n, false);
    offsets.assign(n, 0);
    // The symmetry rule orders equal offsets by rank, and candidates are tried
    // in rank order, so the first dive is a sensible bottom-left packing.
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (p.size[a] != p.size[b])
        return p.size[a] > p.size[b];
      int64_t lifeA = p.upper[a] - p.lower[a], lifeB = p.upper[b] - p.lower[b];
      if (lifeA != lifeB)
        return lifeA > lifeB;
      return a < b;
    });
    rank.resize(n);
    for (uint32_t r = 0; r < n; ++r)
      rank[order[r]] = r;
  }

  /// Runs until done or out of time. Returns true when it found an arena
  /// below the incumbent; bestOffsets() then holds it.
  bool run() {
    search(0, 0, -1);
    return improved;
  }

  bool finished() const { return !timedOut; }
  int64_t bestArena() const { return best; }
  const std::vector<int64_t> &bestOffsets() const { return bestOffs; }
  uint64_t numNodes() const { return nodes; }

private:
  /// Lower bound on any completion of the current partial solution.
  int64_t bound(int64_t current) const {
    int64_t result = 0;
    for (size_t t = 0; t < p.numSlots; ++t) {
      int64_t top = remaining[t] ? std::max(current, floors[t]) + remaining[t]
                                 : floors[t];
      result = std::max(result, top);
    }
    return result;
  }

  void search(size_t depth, int64_t current, int64_t lastRank) {
    if (stopped)
      return;
    if ((++nodes & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
      stopped = timedOut = true;
      return;
    }
    size_t n = p.numBuffers();
    if (depth == n) {
      int64_t arena = 0;
      for (int64_t f : floors)
        arena = std::max(arena, f);
      if (arena < best) {
        best = arena;
        bestOffs = offsets;
        improved = true;
        if (best <= p.lowerBound)
          stopped = true;
      }
      return;
    }
    if (bound(current) >= best)
      return;

    struct Candidate {
      int64_t offset;
      uint32_t index;
    };
    std::vector<Candidate> candidates;
    for (uint32_t i = 0; i < n; ++i) {
      if (placed[i])
        continue;
      int64_t offset = 0;
      bool alone = true;
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t) {
        offset = std::max(offset, floors[t]);
        alone &= remaining[t] == p.size[i];
      }
      // Below the current level a buffer must later rest on another unplaced
      // buffer; with none left beside it, this branch can never complete.
      if (offset < current && alone)
        return;
      if (offset < current ||
          (offset == current && static_cast<int64_t>(rank[i]) < lastRank))
        continue;
      if (offset + p.size[i] >= best)
        continue;
      candidates.push_back({offset, i});
    }
    std::sort(candidates.begin(), candidates.end(),
              [&](const Candidate &a, const Candidate &b) {
                if (a.offset != b.offset)
                  return a.offset < b.offset;
                return rank[a.index] < rank[b.index];
              });

    std::vector<int64_t> saved;
    for (const Candidate &c : candidates) {
      uint32_t i = c.index;
      saved.assign(floors.begin() + p.first[i], floors.begin() + p.last[i]);
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t) {
        floors[t] = c.offset + p.size[i];
        remaining[t] -= p.size[i];
      }
      placed[i] = true;
      offsets[i] = c.offset;
      search(depth + 1, c.offset, rank[i]);
      placed[i] = false;
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t) {
        floors[t] = saved[t - p.first[i]];
        remaining[t] += p.size[i];
      }
      if (stopped)
        return;
    }
  }

  const UnitProblem &p;
  std::chrono::steady_clock::time_point deadline;
  int64_t best;
  std::vector<int64_t> floors, remaining, offsets, bestOffs;
  std::vector<bool> placed;
  std::vector<uint32_t> rank;
  uint64_t nodes = 0;
  bool improved = false, stopped = false, timedOut = false;
};

} // namespace

Placement memopt::placeBuffers(const std::vector<Buffer> &buffers,
                               const PlacementOptions &options) {
  assert(options.alignment >= 1 && "alignment must be positive");
  auto start = std::chrono::steady_clock::now();
  const int64_t align = options.alignment;
  UnitProblem p = buildUnitProblem(buffers, align);

  Placement result;
  result.offsets.assign(buffers.size(), 0);
  result.lowerBound = p.lowerBound * align;
  auto publish = [&](const std::vector<int64_t> &unitOffsets, int64_t arena) {
    for (size_t i = 0; i < p.numBuffers(); ++i)
      result.offsets[p.original[i]] = unitOffsets[i] * align;
    result.arenaSize = arena * align;
  };
  if (p.numBuffers() == 0) {
    result.method = "trivial";
    result.provenOptimal = true;
    return result;
  }

  int64_t bestArena = -1;
  std::vector<uint32_t> order(p.numBuffers());
  std::vector<int64_t> offsets;
  for (const GreedyOrder &g : greedyOrders(p)) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), g.before);
    int64_t arena = greedyFirstFit(p, order, offsets);
    if (bestArena < 0 || arena < bestArena) {
      bestArena = arena;
      publish(offsets, arena);
      result.method = g.name;
    }
    if (bestArena == p.lowerBound)
      break;
  }
  if (bestArena == p.lowerBound) {
    result.provenOptimal = true;
    return result;
  }
  if (options.timeLimitSeconds <= 0 ||
      p.numBuffers() > options.exactSearchMaxBuffers)
    return result;

  auto deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(options.timeLimitSeconds));
  ExactSearch search(p, bestArena, deadline);
  if (search.run()) {
    publish(search.bestOffsets(), search.bestArena());
    result.method = "exact";
  }
  result.searchNodes = search.numNodes();
  result.provenOptimal =
      search.finished() || search.bestArena() == p.lowerBound;
  return result;
}
