//===- RematSchedule.cpp - checkpoint schedules on chains -----------------===//
//
// Revolve: Griewank and Walther, "Algorithm 799: revolve" (ACM TOMS 2000).
// The number of forward steps that reversing l steps with s snapshots takes,
// T(l, s), satisfies T(1, s) = 0, T(l, 1) = l(l-1)/2 and
//   T(l, s) = min_{0<j<l} j + T(l-j, s-1) + T(j, s)
// (advance j steps, store a snapshot, reverse the tail with one slot less,
// then the head with all slots); its minimum is the closed form
// t(l, s) = r l - C(s+r, s+1). The table is O(l^2 s) and the schedule is read
// from its argmins.
//
// Budget: the chain is cut into segments; each segment is either one kept
// stage or a run of stages recomputed from its input at its first turn (the
// single-level scheme of Chen et al. 2016, with heterogeneous stages as in
// Beaumont et al. 2019). What is kept before a stage only grows along the
// chain and the backward of a segment sees exactly that plus the segment's
// own values, so the least recompute of the stages [i, n) depends only on i
// and on the bytes M kept before i: F(i, M), memoized over the reachable
// states (O(n^3) states for a chain of identical stages, O(n) transitions).
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/RematSchedule.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

using namespace memopt;

/// C(n, k), saturating at INT64_MAX.
static int64_t binomial(int64_t n, int64_t k) {
  if (k < 0 || k > n)
    return 0;
  k = std::min(k, n - k);
  // Exact: c * (n - i) is divisible by (i + 1) at every step.
  __int128 c = 1;
  for (int64_t i = 0; i < k; ++i) {
    c = c * (n - i) / (i + 1);
    if (c > std::numeric_limits<int64_t>::max())
      return std::numeric_limits<int64_t>::max();
  }
  return static_cast<int64_t>(c);
}

int64_t memopt::getRevolveForwardSteps(int64_t steps, int64_t snapshots) {
  assert(steps >= 1 && snapshots >= 1 && "empty chain or no snapshot");
  int64_t r = 0;
  while (binomial(snapshots + r, snapshots) < steps)
    ++r;
  return r * steps - binomial(snapshots + r, snapshots + 1);
}

int64_t memopt::getLogarithmicSnapshots(int64_t steps) {
  int64_t s = 1;
  while (binomial(2 * s, s) < steps)
    ++s;
  return s;
}

int64_t ChainSchedule::getRecomputedStages() const {
  int64_t count = firstKeptStage;
  for (const auto &advances : advancesBefore)
    for (auto [from, to] : advances)
      count += to - from;
  return count;
}

int64_t ChainSchedule::getMaxSnapshots() const {
  int64_t n = static_cast<int64_t>(advancesBefore.size());
  std::vector<bool> held(n, false);
  for (int64_t i = 1; i < n; ++i)
    held[i] = keptInForward[i];
  int64_t best = 0;
  for (int64_t turn = n - 1; turn >= 0; --turn) {
    for (auto [from, to] : advancesBefore[turn])
      held[to] = true;
    best = std::max<int64_t>(best, std::count(held.begin() + 1,
                                              held.begin() + turn + 1, true));
  }
  return best;
}

static ChainSchedule makeEmptySchedule(int64_t stages) {
  ChainSchedule schedule;
  schedule.keptInForward.assign(stages, false);
  schedule.advancesBefore.resize(stages);
  schedule.firstKeptStage = std::max<int64_t>(stages - 1, 0);
  return schedule;
}

namespace {
/// The revolve table T(l, s) and its argmins, for l <= L and s <= S.
struct RevolveTable {
  int64_t maxSnapshots;
  std::vector<int64_t> cost, split; // [l * (S + 1) + s]

  RevolveTable(int64_t length, int64_t snapshots)
      : maxSnapshots(snapshots),
        cost((length + 1) * (snapshots + 1), 0),
        split((length + 1) * (snapshots + 1), 0) {
    for (int64_t l = 2; l <= length; ++l) {
      at(cost, l, 1) = l * (l - 1) / 2;
      for (int64_t s = 2; s <= snapshots; ++s) {
        int64_t best = std::numeric_limits<int64_t>::max(), arg = 1;
        for (int64_t j = 1; j < l; ++j) {
          int64_t c = j + at(cost, l - j, s - 1) + at(cost, j, s);
          if (c < best)
            best = c, arg = j;
        }
        at(cost, l, s) = best;
        at(split, l, s) = arg;
      }
    }
  }
  int64_t &at(std::vector<int64_t> &table, int64_t l, int64_t s) {
    return table[l * (maxSnapshots + 1) + s];
  }
};
} // namespace

/// Reverses stages [a, b) from the snapshot at boundary a with `s` slots;
/// `top` when boundary a..b is the forward's own sweep.
static void reverseRange(RevolveTable &table, ChainSchedule &schedule,
                         int64_t a, int64_t b, int64_t s, bool top) {
  int64_t length = b - a;
  if (length <= 1)
    return;
  if (s == 1) {
    for (int64_t k = b - 1; k > a; --k)
      if (!(top && k == b - 1))
        schedule.advancesBefore[k].push_back({a, k});
    return;
  }
  int64_t m = a + table.at(table.split, length, s);
  if (top)
    schedule.keptInForward[m] = true;
  else
    schedule.advancesBefore[b - 1].push_back({a, m});
  reverseRange(table, schedule, m, b, s - 1, top);
  reverseRange(table, schedule, a, m, s, /*top=*/false);
}

ChainSchedule memopt::buildRevolveSchedule(int64_t stages, int64_t snapshots) {
  ChainSchedule schedule = makeEmptySchedule(stages);
  if (stages <= 1)
    return schedule;
  snapshots = std::max<int64_t>(1, std::min(snapshots, stages));
  RevolveTable table(stages, snapshots);
  reverseRange(table, schedule, 0, stages, snapshots, /*top=*/true);
  return schedule;
}

ChainSchedule memopt::buildBlocksSchedule(int64_t stages) {
  ChainSchedule schedule = makeEmptySchedule(stages);
  for (int64_t i = 1; i < stages; ++i)
    schedule.keptInForward[i] = true;
  return schedule;
}

ChainSchedule memopt::buildSqrtSchedule(int64_t stages) {
  ChainSchedule schedule = makeEmptySchedule(stages);
  if (stages <= 1)
    return schedule;
  auto segment = static_cast<int64_t>(
      std::ceil(std::sqrt(static_cast<double>(stages))));
  for (int64_t i = segment; i < stages; i += segment)
    schedule.keptInForward[i] = true;
  schedule.firstKeptStage = ((stages - 1) / segment) * segment;
  return schedule;
}

//===----------------------------------------------------------------------===//
// Budget
//===----------------------------------------------------------------------===//

static int64_t satAdd(int64_t a, int64_t b) {
  if (a > std::numeric_limits<int64_t>::max() - b)
    return std::numeric_limits<int64_t>::max();
  return a + b;
}

std::optional<ChainCost>
memopt::evaluateChainPlan(const std::vector<ChainStage> &chain,
                          const std::vector<StageChoice> &plan) {
  if (plan.size() != chain.size())
    return std::nullopt;
  ChainCost cost;
  int64_t kept = 0;
  size_t n = chain.size();
  for (size_t i = 0; i < n;) {
    if (plan[i] == StageChoice::Continue)
      return std::nullopt;
    if (plan[i] == StageChoice::Keep) {
      int64_t bytes = satAdd(chain[i].inputBytes, chain[i].savedBytes);
      cost.peakBytes = std::max(cost.peakBytes, satAdd(kept, bytes));
      kept = satAdd(kept, bytes);
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < n && plan[j] == StageChoice::Continue)
      ++j;
    int64_t live = satAdd(kept, chain[i].inputBytes);
    for (size_t k = i; k < j; ++k) {
      live = satAdd(live, chain[k].savedBytes);
      cost.recomputeFlops = satAdd(cost.recomputeFlops, chain[k].flops);
    }
    cost.peakBytes = std::max(cost.peakBytes, live);
    kept = satAdd(kept, chain[i].inputBytes);
    i = j;
  }
  return cost;
}

namespace {
/// The memoized dynamic program over (stage, bytes kept before it).
class ChainSolver {
public:
  /// `minimizePeak`: ignore recompute and minimize the peak.
  ChainSolver(const std::vector<ChainStage> &chain, int64_t budget,
              bool minimizePeak)
      : chain(chain), budget(budget), minimizePeak(minimizePeak),
        memo(chain.size() + 1) {}

  struct Value {
    int64_t flops = std::numeric_limits<int64_t>::max();
    int64_t peak = std::numeric_limits<int64_t>::max();
    int64_t next = -1; // segment end (exclusive); -2 = Keep
    bool feasible() const { return next != -1; }
  };

  bool better(int64_t flops, int64_t peak, const Value &v) const {
    if (minimizePeak)
      return peak < v.peak || (peak == v.peak && flops < v.flops);
    return flops < v.flops || (flops == v.flops && peak < v.peak);
  }

  const Value &solve(size_t i, int64_t kept) {
    auto [it, inserted] = memo[i].try_emplace(kept);
    if (!inserted)
      return it->second;
    Value best;
    if (i == chain.size()) {
      best.flops = 0, best.peak = 0, best.next = static_cast<int64_t>(i);
      memo[i][kept] = best;
      return memo[i][kept];
    }
    int64_t input = chain[i].inputBytes;
    // Keep the stage.
    int64_t keepBytes = satAdd(input, chain[i].savedBytes);
    if (satAdd(kept, keepBytes) <= budget) {
      const Value &rest = solve(i + 1, satAdd(kept, keepBytes));
      if (rest.feasible()) {
        int64_t peak = std::max(rest.peak, satAdd(kept, keepBytes));
        if (better(rest.flops, peak, best))
          best.flops = rest.flops, best.peak = peak, best.next = -2;
      }
    }
    // Recompute the segment [i, j).
    int64_t live = satAdd(kept, input), flops = 0;
    for (size_t j = i + 1; j <= chain.size(); ++j) {
      live = satAdd(live, chain[j - 1].savedBytes);
      flops = satAdd(flops, chain[j - 1].flops);
      if (live > budget)
        break;
      const Value &rest = solve(j, satAdd(kept, input));
      if (!rest.feasible())
        continue;
      int64_t total = satAdd(flops, rest.flops);
      int64_t peak = std::max(rest.peak, live);
      if (better(total, peak, best))
        best.flops = total, best.peak = peak,
        best.next = static_cast<int64_t>(j);
    }
    memo[i][kept] = best;
    return memo[i][kept];
  }

  std::optional<std::vector<StageChoice>> plan() {
    if (!solve(0, 0).feasible())
      return std::nullopt;
    std::vector<StageChoice> choices(chain.size(), StageChoice::Continue);
    size_t i = 0;
    int64_t kept = 0;
    while (i < chain.size()) {
      const Value &v = solve(i, kept);
      if (v.next == -2) {
        choices[i] = StageChoice::Keep;
        kept = satAdd(kept, satAdd(chain[i].inputBytes, chain[i].savedBytes));
        ++i;
      } else {
        choices[i] = StageChoice::Checkpoint;
        kept = satAdd(kept, chain[i].inputBytes);
        i = static_cast<size_t>(v.next);
      }
    }
    return choices;
  }

private:
  const std::vector<ChainStage> &chain;
  int64_t budget;
  bool minimizePeak;
  std::vector<std::unordered_map<int64_t, Value>> memo;
};
} // namespace

std::optional<std::vector<StageChoice>>
memopt::solveChainBudget(const std::vector<ChainStage> &chain,
                         int64_t budgetBytes) {
  if (budgetBytes < 0)
    return std::nullopt;
  ChainSolver solver(chain, budgetBytes, /*minimizePeak=*/false);
  return solver.plan();
}

int64_t memopt::getMinimumChainPeak(const std::vector<ChainStage> &chain) {
  ChainSolver solver(chain, std::numeric_limits<int64_t>::max(),
                     /*minimizePeak=*/true);
  return solver.solve(0, 0).peak;
}

//===----------------------------------------------------------------------===//
// Exact search on small general graphs
//===----------------------------------------------------------------------===//

namespace {
/// evaluateGraphPlan on a per-value kept flag.
GraphCost evaluateGraph(const std::vector<GraphValue> &graph,
                        const std::vector<char> &kept) {
  int64_t m = static_cast<int64_t>(graph.size());
  GraphCost cost;
  // The recompute closure: non-kept values the backward reads and, through
  // non-kept values, what they depend on; each op runs once.
  std::vector<char> cloned(m, 0);
  for (int64_t v = m - 1; v >= 0; --v) {
    if (kept[v])
      continue;
    if (graph[v].lastUse < 0 && !cloned[v])
      continue;
    cloned[v] = 1;
    cost.recomputeFlops += graph[v].flops;
    for (int64_t operand : graph[v].operands)
      if (!kept[operand])
        cloned[operand] = 1;
  }
  std::vector<int64_t> positions{0};
  for (const GraphValue &value : graph)
    if (value.firstUse >= 0)
      positions.push_back(value.firstUse);
  for (int64_t position : positions) {
    int64_t live = 0;
    for (int64_t v = 0; v < m; ++v) {
      const GraphValue &value = graph[v];
      if (value.lastUse < position)
        continue;
      if (kept[v] || value.firstUse <= position)
        live += value.bytes;
    }
    cost.peakBytes = std::max(cost.peakBytes, live);
  }
  return cost;
}

std::vector<char> getKeptFlags(const std::vector<GraphValue> &graph,
                               const std::vector<bool> &keep) {
  std::vector<char> kept(graph.size(), 0);
  size_t next = 0;
  for (size_t v = 0; v < graph.size(); ++v) {
    if (graph[v].kind == GraphValue::Kind::Kept)
      kept[v] = 1;
    else if (graph[v].kind == GraphValue::Kind::Candidate)
      kept[v] = keep[next++];
  }
  return kept;
}

/// Branch-and-bound over the candidates in program order (keep first).
struct GraphSearch {
  const std::vector<GraphValue> &graph;
  int64_t budget;
  std::vector<int64_t> candidates;
  std::vector<char> kept;
  std::optional<std::vector<char>> best;
  GraphCost bestCost;

  bool improves(const GraphCost &cost) const {
    return !best || cost.recomputeFlops < bestCost.recomputeFlops ||
           (cost.recomputeFlops == bestCost.recomputeFlops &&
            cost.peakBytes < bestCost.peakBytes);
  }

  void search(size_t depth) {
    // Bounds of every completion: the undecided candidates recomputed give
    // the least peak, kept the least recompute.
    std::vector<char> low = kept, high = kept;
    for (size_t i = depth; i < candidates.size(); ++i)
      low[candidates[i]] = 0, high[candidates[i]] = 1;
    GraphCost least = evaluateGraph(graph, low);
    if (least.peakBytes > budget)
      return;
    GraphCost cheapest = evaluateGraph(graph, high);
    if (best && (cheapest.recomputeFlops > bestCost.recomputeFlops ||
                 (cheapest.recomputeFlops == bestCost.recomputeFlops &&
                  least.peakBytes >= bestCost.peakBytes)))
      return;
    // Keeping every undecided candidate fits: no completion recomputes less.
    if (cheapest.peakBytes <= budget && improves(cheapest))
      best = high, bestCost = cheapest;
    if (depth == candidates.size())
      return;
    int64_t v = candidates[depth];
    kept[v] = 1;
    search(depth + 1);
    kept[v] = 0;
    search(depth + 1);
  }
};
} // namespace

std::optional<GraphCost>
memopt::evaluateGraphPlan(const std::vector<GraphValue> &graph,
                          const std::vector<bool> &keep) {
  size_t candidates = 0;
  for (size_t v = 0; v < graph.size(); ++v) {
    candidates += graph[v].kind == GraphValue::Kind::Candidate;
    for (int64_t operand : graph[v].operands)
      if (operand < 0 || operand >= static_cast<int64_t>(v))
        return std::nullopt;
  }
  if (keep.size() != candidates)
    return std::nullopt;
  return evaluateGraph(graph, getKeptFlags(graph, keep));
}

std::optional<std::vector<bool>>
memopt::solveGraphBudget(const std::vector<GraphValue> &graph,
                         int64_t budgetBytes) {
  GraphSearch search{graph, budgetBytes, {}, {}, std::nullopt, {}};
  for (size_t v = 0; v < graph.size(); ++v)
    if (graph[v].kind == GraphValue::Kind::Candidate)
      search.candidates.push_back(static_cast<int64_t>(v));
  if (static_cast<int64_t>(search.candidates.size()) >
      kMaxGraphSearchCandidates)
    return std::nullopt;
  search.kept = getKeptFlags(
      graph, std::vector<bool>(search.candidates.size(), false));
  search.search(0);
  if (!search.best)
    return std::nullopt;
  std::vector<bool> keep;
  for (int64_t v : search.candidates)
    keep.push_back((*search.best)[v]);
  return keep;
}
