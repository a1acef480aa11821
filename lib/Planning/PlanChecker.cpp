//===- PlanChecker.cpp - Independent check of a buffer placement ----------===//
//
// A sweep over time. Events are the starts and ends of lifetimes, ends first
// at equal times because lifetimes are half-open. The buffers live at the
// current instant are kept in a map keyed by offset; the map only ever holds
// pairwise disjoint memory ranges (every insertion is checked), so a new
// buffer overlaps some live buffer exactly when it overlaps its predecessor or
// its successor in offset order. O(n log n) time, O(n) memory.
//
// Deliberately written apart from the placer (no shared helpers) so that a
// bug in one is not mirrored in the other.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planning/PlanChecker.h"

#include <algorithm>
#include <map>
#include <sstream>

using namespace memopt;

namespace {

std::string describe(const Buffer &b, int64_t offset) {
  std::ostringstream os;
  os << "buffer " << b.id << " (bytes [" << offset << ", " << offset + b.size
     << "), live [" << b.lower << ", " << b.upper << "))";
  return os.str();
}

} // namespace

std::optional<std::string>
memopt::checkPlacement(const std::vector<Buffer> &buffers,
                       const std::vector<int64_t> &offsets, int64_t arenaSize,
                       int64_t alignment) {
  if (alignment < 1)
    return "alignment " + std::to_string(alignment) + " is not positive";
  if (offsets.size() != buffers.size())
    return "placement has " + std::to_string(offsets.size()) + " offsets for " +
           std::to_string(buffers.size()) + " buffers";
  if (arenaSize < 0)
    return "arena size " + std::to_string(arenaSize) + " is negative";

  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    int64_t offset = offsets[i];
    if (b.size < 0)
      return "buffer " + std::to_string(b.id) + " has negative size " +
             std::to_string(b.size);
    if (offset < 0 || offset % alignment != 0) {
      std::ostringstream os;
      os << describe(b, offset) << ": offset " << offset
         << (offset < 0 ? " is negative"
                        : " is not a multiple of the alignment " +
                              std::to_string(alignment));
      return os.str();
    }
    // offset <= arenaSize first, so the subtraction cannot overflow.
    if (offset > arenaSize || b.size > arenaSize - offset) {
      std::ostringstream os;
      os << describe(b, offset) << " lies outside the arena [0, " << arenaSize
         << ")";
      return os.str();
    }
  }

  // (time, kind, index): kind 0 = end, 1 = start, so ends sort first.
  struct Event {
    int64_t time;
    int kind;
    size_t index;
  };
  std::vector<Event> events;
  events.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    if (b.size == 0 || b.upper <= b.lower)
      continue;
    events.push_back({b.lower, 1, i});
    events.push_back({b.upper, 0, i});
  }
  std::sort(events.begin(), events.end(), [](const Event &x, const Event &y) {
    if (x.time != y.time)
      return x.time < y.time;
    if (x.kind != y.kind)
      return x.kind < y.kind;
    return x.index < y.index;
  });

  auto conflict = [&](size_t a, size_t b, int64_t time) {
    std::ostringstream os;
    os << "buffers " << buffers[a].id << " and " << buffers[b].id
       << " are both live at time " << time
       << " and overlap in memory: " << describe(buffers[a], offsets[a]) << ", "
       << describe(buffers[b], offsets[b]);
    return os.str();
  };

  std::map<int64_t, size_t> live; // offset -> buffer index
  for (const Event &e : events) {
    int64_t begin = offsets[e.index];
    if (e.kind == 0) {
      live.erase(begin);
      continue;
    }
    int64_t end = begin + buffers[e.index].size;
    auto next = live.lower_bound(begin);
    if (next != live.end() && next->first < end)
      return conflict(next->second, e.index, e.time);
    if (next != live.begin()) {
      auto prev = std::prev(next);
      if (prev->first + buffers[prev->second].size > begin)
        return conflict(prev->second, e.index, e.time);
    }
    live.emplace(begin, e.index);
  }
  return std::nullopt;
}
