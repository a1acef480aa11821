//===- PlacementSearch.cpp - Exact search for a placement in a capacity ---===//
//
// The decision version of dynamic storage allocation: place every buffer so
// that offset + size <= capacity. The ideas are those of MiniMalloc (Moffitt,
// ASPLOS 2023), re-derived here:
//
// * Canonical solutions. Any placement can be pushed down until every buffer
//   sits at 0 or on top of a buffer it overlaps in time. Sort such a placement
//   by (offset, rank): each buffer then sits at its "minimum offset", the
//   highest top of the already placed buffers it overlaps in time. The search
//   therefore builds placements in that order: a node picks an unplaced
//   buffer, puts it at its minimum offset, and requires offsets to be
//   non-decreasing along the sequence, with equal offsets in rank order.
//
// * Dominance. Let h be the lowest value of minOffset + size over the unplaced
//   buffers, reached by buffer c. Putting any buffer at an offset >= h is
//   useless: everything placed from then on lies at or above h, so c could be
//   moved down to its minimum offset without conflict, which gives a
//   placement the search reaches by placing c earlier. Since candidates are
//   tried by increasing offset, the loop stops at the first offset >= h.
//
// * Inference. Each time slot ("section": a maximal time range in which the
//   same buffers are live) keeps a floor and the total size of its unplaced
//   buffers. Every unplaced buffer lies above the highest top of the placed
//   buffers it overlaps, above its own minimum offset, and above the offset
//   of the buffer just placed (offsets never decrease), so for every slot
//   max(floor, current offset) + unplaced total must stay within capacity.
//   The floor is raised to the smallest minimum offset of the slot's unplaced
//   buffers whenever one of them changes.
//
// * Decomposition. When no unplaced buffer is live across some slot
//   boundary, the two sides no longer interact: each side is solved on its
//   own, and when one side has no solution the whole node fails at once
//   instead of re-enumerating the other side.
//
// Candidates are tried by (minimum offset, rank); the rank is a static
// preorder (three of them: lifetime width, area, largest slot total in
// different priorities), and the driver in Placement.cpp runs them round robin
// under a doubling node limit.
//
// State changes are recorded on a trail and undone on backtrack, so a node
// costs O(n log n) for its candidate list plus the work proportional to the
// buffers and slots the placed buffer touches.
//
//===----------------------------------------------------------------------===//

#include "PlacementInternal.h"

#include <algorithm>
#include <limits>

using namespace memopt;
using namespace memopt::detail;

namespace {

struct Candidate {
  int64_t offset;
  uint32_t pos; // position in the partition's preorder
  uint32_t index;
};

/// A range of slots [lo, hi) whose unplaced buffers interact with nothing
/// outside it, and those buffers in preorder.
struct Partition {
  std::vector<uint32_t> order;
  uint32_t lo, hi;
};

enum class Status { Found, NotFound, Aborted, TimedOut };

} // namespace

class CapacitySearch::Impl {
public:
  explicit Impl(const UnitProblem &p) : p(p) {
    size_t n = p.numBuffers();
    slotBuffers.assign(p.numSlots, {});
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t)
        slotBuffers[t].push_back(i);
    // Overlapping pairs by a sweep over start slots with the list of
    // buffers still live: O(n log n + n * live), independent of lifetimes'
    // lengths in slots.
    overlaps.assign(n, {});
    std::vector<uint32_t> byFirst(n), active;
    for (uint32_t i = 0; i < n; ++i)
      byFirst[i] = i;
    std::sort(byFirst.begin(), byFirst.end(), [&](uint32_t a, uint32_t b) {
      return p.first[a] != p.first[b] ? p.first[a] < p.first[b] : a < b;
    });
    for (uint32_t i : byFirst) {
      size_t kept = 0;
      for (uint32_t j : active)
        if (p.last[j] > p.first[i]) {
          active[kept++] = j;
          overlaps[i].push_back(j);
          overlaps[j].push_back(i);
        }
      active.resize(kept);
      active.push_back(i);
    }
    offset.assign(n, -1);
    minOffset.assign(n, 0);
    solution.assign(n, 0);
    floor.assign(p.numSlots, 0);
    total.assign(p.numSlots, 0);
    cuts.assign(p.numSlots, 0);
    slotMark.assign(p.numSlots, 0);
    // One candidate list per depth, allocated up front: a reference to one
    // must survive the recursion below it.
    pool.resize(n + 1);
  }

  Result solve(int64_t cap, int heuristicIndex, uint64_t nodeLimit,
               std::chrono::steady_clock::time_point until) {
    capacity = cap;
    heuristic = heuristicIndex;
    nodesLeft = nodeLimit;
    deadline = until;
    size_t n = p.numBuffers();
    std::fill(offset.begin(), offset.end(), -1);
    std::fill(minOffset.begin(), minOffset.end(), 0);
    std::fill(floor.begin(), floor.end(), 0);
    std::fill(total.begin(), total.end(), 0);
    std::fill(cuts.begin(), cuts.end(), 0);
    trailTop = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (p.size[i] > capacity)
        return Result::Infeasible;
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t)
        total[t] += p.size[i];
      for (uint32_t t = p.first[i]; t + 1 < p.last[i]; ++t)
        ++cuts[t];
    }
    for (int64_t sum : total)
      if (sum > capacity)
        return Result::Infeasible;

    // Top-level partitions: split wherever no buffer crosses a boundary.
    Status status = Status::Found;
    uint32_t lo = 0;
    for (uint32_t t = 0; t < p.numSlots && status == Status::Found; ++t) {
      if (t + 1 < p.numSlots && cuts[t] != 0)
        continue;
      status = solveRange(lo, t + 1, nullptr);
      lo = t + 1;
    }
    switch (status) {
    case Status::Found:
      return Result::Found;
    case Status::NotFound:
      return Result::Infeasible;
    case Status::Aborted:
      return Result::Aborted;
    case Status::TimedOut:
      return Result::TimedOut;
    }
    return Result::Infeasible;
  }

  const std::vector<int64_t> &offsets() const { return solution; }
  uint64_t numNodes() const { return nodes; }

private:
  /// Solves the unplaced buffers live in slots [lo, hi) (all of them lie
  /// inside), taken from `from` when given, else from all buffers.
  Status solveRange(uint32_t lo, uint32_t hi, const Partition *from) {
    Partition part;
    part.lo = lo;
    part.hi = hi;
    auto consider = [&](uint32_t i) {
      if (offset[i] < 0 && p.first[i] < hi && lo < p.last[i])
        part.order.push_back(i);
    };
    if (from) {
      for (uint32_t i : from->order)
        consider(i);
    } else {
      // Buffers live in [lo, hi) are exactly those listed in its slots; a
      // buffer is first seen in its first slot inside the range.
      for (uint32_t t = lo; t < hi; ++t)
        for (uint32_t i : slotBuffers[t])
          if (p.first[i] == t || t == lo)
            consider(i);
    }
    if (part.order.empty())
      return Status::Found;
    preorder(part.order);
    return search(part, 0, 0);
  }

  void preorder(std::vector<uint32_t> &order) {
    size_t n = order.size();
    keys.resize(p.numBuffers());
    for (uint32_t i : order) {
      int64_t peak = 0;
      for (uint32_t t = p.first[i]; t < p.last[i]; ++t)
        peak = std::max(peak, total[t]);
      int64_t width = p.upper[i] - p.lower[i];
      long double area = static_cast<long double>(width) * p.size[i];
      keys[i] = {width, area, peak};
    }
    auto cmp = [&](uint32_t a, uint32_t b) {
      const Key &x = keys[a], &y = keys[b];
      switch (heuristic) {
      case 0: // width, area, total
        if (x.width != y.width)
          return x.width > y.width;
        if (x.area != y.area)
          return x.area > y.area;
        if (x.total != y.total)
          return x.total > y.total;
        break;
      case 1: // total, area, width
        if (x.total != y.total)
          return x.total > y.total;
        if (x.area != y.area)
          return x.area > y.area;
        if (x.width != y.width)
          return x.width > y.width;
        break;
      default: // total, width, area
        if (x.total != y.total)
          return x.total > y.total;
        if (x.width != y.width)
          return x.width > y.width;
        if (x.area != y.area)
          return x.area > y.area;
        break;
      }
      return a < b;
    };
    std::sort(order.begin(), order.begin() + n, cmp);
  }

  Status search(const Partition &part, int64_t lastOffset, uint32_t lastPos) {
    if (nodesLeft == 0)
      return Status::Aborted;
    --nodesLeft;
    if ((++nodes & 255) == 0 && std::chrono::steady_clock::now() > deadline)
      return Status::TimedOut;

    std::vector<Candidate> &candidates = pool[depth];
    candidates.clear();
    // Dominance bound first, so that only the candidates that can be tried
    // (offset below minHeight, not before the last placement in the
    // canonical order) are collected and sorted.
    int64_t minHeight = std::numeric_limits<int64_t>::max();
    bool any = false;
    for (uint32_t i : part.order)
      if (offset[i] < 0) {
        any = true;
        minHeight = std::min(minHeight, minOffset[i] + p.size[i]);
      }
    if (!any) {
      for (uint32_t i : part.order)
        solution[i] = offset[i];
      return Status::Found;
    }
    for (uint32_t pos = 0; pos < part.order.size(); ++pos) {
      uint32_t i = part.order[pos];
      int64_t at = minOffset[i]; // kPlaced for placed buffers
      if (at >= minHeight || at < lastOffset ||
          (at == lastOffset && pos < lastPos))
        continue;
      candidates.push_back({at, pos, i});
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate &a, const Candidate &b) {
                if (a.offset != b.offset)
                  return a.offset < b.offset;
                return a.pos < b.pos;
              });
    // The largest unplaced total of a slot, before the next placement: while
    // offset + maxTotal <= capacity, only slots whose floor a placement
    // raises need checking.
    int64_t maxTotal = 0;
    for (uint32_t t = part.lo; t < part.hi; ++t)
      maxTotal = std::max(maxTotal, total[t]);
    for (const Candidate &c : candidates) {
      size_t mark = trailTop;
      place(c.index, c.offset);
      Status status = Status::NotFound;
      if (consistent(part, c.offset, maxTotal)) {
        ++depth;
        status = descend(part, c);
        --depth;
      }
      unplace(c.index, mark);
      if (status != Status::NotFound)
        return status;
    }
    return Status::NotFound;
  }

  /// After placing c: continue in the same partition, or split it where the
  /// placed buffer was the last one crossing a boundary.
  Status descend(const Partition &part, const Candidate &c) {
    uint32_t i = c.index;
    solution[i] = c.offset;
    std::vector<uint32_t> cutpoints;
    for (uint32_t t = p.first[i]; t + 1 < p.last[i]; ++t)
      if (--cuts[t] == 0)
        cutpoints.push_back(t + 1);
    Status status;
    if (cutpoints.empty()) {
      status = search(part, c.offset, c.pos);
    } else {
      status = Status::Found;
      uint32_t lo = part.lo;
      cutpoints.push_back(part.hi);
      for (uint32_t hi : cutpoints) {
        status = solveRange(lo, hi, &part);
        lo = hi;
        if (status != Status::Found)
          break;
      }
    }
    for (uint32_t t = p.first[i]; t + 1 < p.last[i]; ++t)
      ++cuts[t];
    return status;
  }

  /// Whether every slot can still take its unplaced buffers after a buffer
  /// was placed at `current`: for each slot, max(current, floor) + unplaced
  /// total, and the smallest minimum offset of its unplaced buffers + unplaced
  /// total, must stay within capacity.
  ///
  /// `maxTotal` is the largest unplaced total before that placement. A slot
  /// the placed buffer covers has floor = its top and lost its size, so it
  /// checks as current + old total; other slots keep their total and floor,
  /// and only `current` rose; so when current + maxTotal fits, the first
  /// condition holds everywhere. The second can only have changed in the
  /// slots of buffers whose minimum offset place() raised (it held before,
  /// and totals only shrink), so only those are scanned.
  bool consistent(const Partition &part, int64_t current, int64_t maxTotal) {
    if (current + maxTotal > capacity)
      for (uint32_t t = part.lo; t < part.hi; ++t)
        if (std::max(current, floor[t]) + total[t] > capacity)
          return false;
    ++stamp;
    for (uint32_t j : changed)
      for (uint32_t t = p.first[j]; t < p.last[j]; ++t) {
        if (slotMark[t] == stamp)
          continue;
        slotMark[t] = stamp;
        // Some unplaced buffer of the slot must be able to start at or
        // below capacity - total; placed ones have minOffset = kPlaced.
        int64_t limit = capacity - total[t];
        bool fits = false;
        for (uint32_t k : slotBuffers[t])
          if (minOffset[k] <= limit) {
            fits = true;
            break;
          }
        if (!fits)
          return false;
      }
    return true;
  }

  void place(uint32_t i, int64_t at) {
    // The trail is written through raw indices: push_back of a pair spills
    // it to the stack and stalls on store forwarding in this hot loop.
    size_t need = trailTop + 1 + (p.last[i] - p.first[i]) + overlaps[i].size();
    if (need > trail.size())
      trail.resize(std::max(need, 2 * trail.size()));
    TrailEntry *out = trail.data() + trailTop;
    offset[i] = at;
    *out++ = {i, minOffset[i]};
    minOffset[i] = kPlaced;
    int64_t top = at + p.size[i];
    uint32_t n = p.numBuffers();
    for (uint32_t t = p.first[i]; t < p.last[i]; ++t) {
      *out++ = {n + t, floor[t]};
      floor[t] = top;
      total[t] -= p.size[i];
    }
    changed.clear();
    for (uint32_t j : overlaps[i]) {
      int64_t old = minOffset[j];
      if (old >= top) // also skips placed buffers
        continue;
      *out++ = {j, old};
      minOffset[j] = top;
      changed.push_back(j);
    }
    trailTop = out - trail.data();
  }

  void unplace(uint32_t i, size_t mark) {
    uint32_t n = p.numBuffers();
    while (trailTop > mark) {
      const TrailEntry &e = trail[--trailTop];
      if (e.where < n)
        minOffset[e.where] = e.old;
      else
        floor[e.where - n] = e.old;
    }
    for (uint32_t t = p.first[i]; t < p.last[i]; ++t)
      total[t] += p.size[i];
    offset[i] = -1;
  }

  struct Key {
    int64_t width;
    long double area;
    int64_t total;
  };

  const UnitProblem &p;
  std::vector<std::vector<uint32_t>> slotBuffers, overlaps;
  static constexpr int64_t kPlaced = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> offset, minOffset, solution, floor, total;
  std::vector<uint32_t> cuts, slotMark, changed;
  struct TrailEntry {
    uint32_t where; // a buffer's minOffset, or numBuffers + slot: a floor
    int64_t old;
  };
  std::vector<TrailEntry> trail;
  size_t trailTop = 0;
  std::vector<Key> keys;
  std::vector<std::vector<Candidate>> pool; // candidate lists, by depth
  size_t depth = 0;
  uint32_t stamp = 0;
  int64_t capacity = 0;
  int heuristic = 0;
  uint64_t nodesLeft = 0, nodes = 0;
  std::chrono::steady_clock::time_point deadline;
};

CapacitySearch::CapacitySearch(const UnitProblem &p)
    : impl(std::make_unique<Impl>(p)) {}
CapacitySearch::~CapacitySearch() = default;

CapacitySearch::Result
CapacitySearch::solve(int64_t capacity, int heuristic, uint64_t nodeLimit,
                      std::chrono::steady_clock::time_point deadline) {
  return impl->solve(capacity, heuristic, nodeLimit, deadline);
}

const std::vector<int64_t> &CapacitySearch::offsets() const {
  return impl->offsets();
}

uint64_t CapacitySearch::numNodes() const { return impl->numNodes(); }
