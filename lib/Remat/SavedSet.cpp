//===- SavedSet.cpp - the least bytes the backward must keep -------------===//
//
// The flow network (one per forward graph): value i becomes an arc
// in(i) -> out(i) whose capacity is what keeping it costs; out(i) -> in(j)
// (infinite) for every recomputable user j; source -> in(i) (infinite) for a
// value only the forward can compute; out(i) -> sink (infinite) for a value
// the backward reads. A finite cut is a set of kept values that separates
// every unrecomputable value from every read one, i.e. from which the
// backward can recompute all it reads, and a minimum cut keeps the least
// bytes. Capacities are bytes scaled by n + 1, less 1 for a value the
// backward reads itself: at most n such units, so the cut still keeps the
// least bytes, and among equal byte counts it keeps what needs no recompute. Dinic's algorithm; the kept values are the arcs from the
// source side of the final residual graph to the sink side.
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/SavedSet.h"

#include <algorithm>
#include <limits>
#include <queue>

using namespace memopt;

namespace {

/// Dinic's maximum flow on a graph with int64 capacities.
class MaxFlow {
public:
  explicit MaxFlow(int64_t nodes) : adjacency(nodes), level(nodes), next(nodes) {}

  static constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;

  void addArc(int64_t from, int64_t to, int64_t capacity) {
    adjacency[from].push_back(static_cast<int64_t>(arcs.size()));
    arcs.push_back({to, capacity});
    adjacency[to].push_back(static_cast<int64_t>(arcs.size()));
    arcs.push_back({from, 0});
  }

  void run(int64_t source, int64_t sink) {
    while (buildLevels(source, sink)) {
      std::fill(next.begin(), next.end(), 0);
      while (push(source, sink, kInfinite) > 0) {
      }
    }
  }

  /// Nodes reachable from `source` in the residual graph (after run()).
  std::vector<bool> getSourceSide(int64_t source) const {
    std::vector<bool> seen(adjacency.size(), false);
    std::vector<int64_t> stack{source};
    seen[source] = true;
    while (!stack.empty()) {
      int64_t node = stack.back();
      stack.pop_back();
      for (int64_t arc : adjacency[node])
        if (arcs[arc].capacity > 0 && !seen[arcs[arc].to]) {
          seen[arcs[arc].to] = true;
          stack.push_back(arcs[arc].to);
        }
    }
    return seen;
  }

private:
  struct Arc {
    int64_t to, capacity;
  };

  bool buildLevels(int64_t source, int64_t sink) {
    std::fill(level.begin(), level.end(), -1);
    std::queue<int64_t> queue;
    level[source] = 0;
    queue.push(source);
    while (!queue.empty()) {
      int64_t node = queue.front();
      queue.pop();
      for (int64_t arc : adjacency[node])
        if (arcs[arc].capacity > 0 && level[arcs[arc].to] < 0) {
          level[arcs[arc].to] = level[node] + 1;
          queue.push(arcs[arc].to);
        }
    }
    return level[sink] >= 0;
  }

  /// One augmenting path of the level graph (iterative depth-first search
  /// with per-node arc pointers); the flow it carries, 0 when none.
  int64_t push(int64_t source, int64_t sink, int64_t limit) {
    std::vector<int64_t> path; // arcs from source
    int64_t node = source;
    while (true) {
      if (node == sink) {
        int64_t flow = limit;
        for (int64_t arc : path)
          flow = std::min(flow, arcs[arc].capacity);
        for (int64_t arc : path) {
          arcs[arc].capacity -= flow;
          arcs[arc ^ 1].capacity += flow;
        }
        return flow;
      }
      bool advanced = false;
      for (int64_t &i = next[node];
           i < static_cast<int64_t>(adjacency[node].size()); ++i) {
        int64_t arc = adjacency[node][i];
        const Arc &a = arcs[arc];
        if (a.capacity > 0 && level[a.to] == level[node] + 1) {
          path.push_back(arc);
          node = a.to;
          advanced = true;
          break;
        }
      }
      if (advanced)
        continue;
      // Dead end: retreat, and never try this node again in this phase.
      level[node] = -1;
      if (path.empty())
        return 0;
      int64_t arc = path.back();
      path.pop_back();
      node = arcs[arc ^ 1].to;
      ++next[node];
    }
  }

  std::vector<std::vector<int64_t>> adjacency;
  std::vector<Arc> arcs;
  std::vector<int64_t> level, next;
};

} // namespace

std::vector<bool>
memopt::chooseSavedSet(const std::vector<SavedSetValue> &values) {
  int64_t n = static_cast<int64_t>(values.size());
  int64_t source = 2 * n, sink = 2 * n + 1;
  auto in = [](int64_t i) { return 2 * i; };
  auto out = [](int64_t i) { return 2 * i + 1; };
  MaxFlow flow(2 * n + 2);
  for (int64_t i = 0; i < n; ++i) {
    const SavedSetValue &value = values[i];
    int64_t capacity = (n + 1) * std::max<int64_t>(value.bytes, 1) -
                       (value.readByBackward ? 1 : 0);
    flow.addArc(in(i), out(i), capacity);
    if (!value.recomputable)
      flow.addArc(source, in(i), MaxFlow::kInfinite);
    else
      for (int64_t operand : value.operands)
        flow.addArc(out(operand), in(i), MaxFlow::kInfinite);
    if (value.readByBackward)
      flow.addArc(out(i), sink, MaxFlow::kInfinite);
  }
  flow.run(source, sink);
  std::vector<bool> sourceSide = flow.getSourceSide(source);
  std::vector<bool> keep(n, false);
  for (int64_t i = 0; i < n; ++i)
    keep[i] = sourceSide[in(i)] && !sourceSide[out(i)];
  return keep;
}
