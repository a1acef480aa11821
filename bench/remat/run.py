#!/usr/bin/python3
"""Rematerialization benchmark (bench/README.md, "Rematerialization").

Exports GPT-style decoders (examples/pytorch/models.py: vocab 64, block 16,
width 32, 4 heads, dropout 0.1, batch 4) of 8, 16, 32, 64 and 128 layers,
runs autodiff, --memopt-remat, bufferize and plan-buffers (heuristic
placement, time-limit=0) on each, and prints:

1. per depth and strategy: the planned arena (activations + gradients), the
   activation bytes at the peak, the recompute FLOPs in % of the forward, and
   for revolve the schedule's stage recomputations next to t(l, s);
2. the fit of revolve's arena against log2(depth);
3. the budget strategy's memory-recompute frontier on 32 layers, with its
   three targets checked;
4. the wall time of --memopt-remat=budget on 128 layers (target <= 1 s).

Run with Debian's python (torch 1.13), from anywhere:
    bench/remat/run.py [--depths 8,16,32,64,128] [--memopt-opt build/bin/memopt-opt]
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRATEGIES = ["none", "blocks", "sqrt", "revolve", "selective"]


def binomial(n, k):
    return math.comb(n, k) if 0 <= k <= n else 0


def revolve_t(l, s):
    r = 0
    while binomial(s + r, s) < l:
        r += 1
    return r * l - binomial(s + r, s + 1)


def export(layers, path):
    sys.path.insert(0, os.path.join(REPO, "python"))
    sys.path.insert(0, os.path.join(REPO, "examples", "pytorch"))
    import memopt
    import models
    import torch
    torch.manual_seed(0)
    model = models.GPT(vocab=64, block=16, embed=32, heads=4, layers=layers,
                       dropout=0.1)
    batch = model.example_batch(torch.Generator().manual_seed(1))
    memopt.export(model, tuple(batch.values()), path)


def run(opt, mlir, remat):
    """(arena, activations at peak, forward flops, recompute flops, summary)"""
    passes = "--memopt-autodiff"
    args = [opt, mlir, passes]
    if remat:
        args.append(f"--memopt-remat={remat} print-summary")
    args += ["--memopt-bufferize", "--memopt-plan-buffers=time-limit=0",
             "--memopt-test-print-memory-account", "-o", os.devnull]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode:
        return None, proc.stderr.strip().splitlines()[0]
    out = proc.stdout
    arena = int(re.search(r"arena_bytes=(\d+)", out).group(1))
    # The largest activation bytes at any program point (the arena also
    # holds the parameter gradients, which grow with depth whatever remat
    # does: they all live until the optimizer update).
    act = max(int(v) for v in
              re.findall(r"^  point \d+ \S+ activations=(\d+)", out, re.M))
    fwd = int(re.search(r"flops: forward=(\d+)", out).group(1))
    rec = int(re.search(r"recompute=(\d+)", out).group(1))
    summary = {k: int(v) for k, v in
               re.findall(r"(\w+)=(\d+)", proc.stderr)} if remat else {}
    return (arena, act, fwd, rec, summary), None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", default="8,16,32,64,128")
    parser.add_argument("--memopt-opt",
                        default=os.path.join(REPO, "build", "bin", "memopt-opt"))
    args = parser.parse_args()
    opt = args.memopt_opt
    depths = [int(d) for d in args.depths.split(",")]
    work = tempfile.mkdtemp(prefix="memopt-remat-bench-")
    files = {}
    for depth in depths:
        files[depth] = os.path.join(work, f"gpt{depth}.mlir")
        export(depth, files[depth])

    print("## Strategies (arena = planned activations + gradients, bytes)\n")
    print("| layers | strategy | arena | activation peak | recompute % of forward | stage recomputations | t(l,s) |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    results = {}
    for depth in depths:
        for strategy in STRATEGIES:
            remat = None if strategy == "none" else f"strategy={strategy}"
            r, err = run(opt, files[depth], remat)
            if err:
                print(f"| {depth} | {strategy} | error: {err} | | | | |")
                continue
            arena, act, fwd, rec, summary = r
            results[(depth, strategy)] = r
            stages = summary.get("recomputed_stages", "")
            target = ""
            if strategy == "revolve":
                target = revolve_t(summary["stages"], summary["snapshots"])
                target = f"{target} (l={summary['stages']}, s={summary['snapshots']})"
            print(f"| {depth} | {strategy} | {arena} | {act} | "
                  f"{100.0 * rec / fwd:.1f} | {stages} | {target} |")

    print("\n## revolve (logarithmic) activation peak against log2(layers)\n")
    xs = [math.log2(d) for d in depths if (d, "revolve") in results]
    ys = [results[(d, "revolve")][1] for d in depths if (d, "revolve") in results]
    if len(xs) >= 2:
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / \
            sum((x - mx) ** 2 for x in xs)
        base = my - slope * mx
        worst = max(abs(y - (base + slope * x)) / y for x, y in zip(xs, ys))
        print(f"least-squares fit: peak = {base:.0f} + {slope:.0f} * log2(layers)"
              f", largest relative residual {100 * worst:.1f}%")
        for d, x, y in zip(depths, xs, ys):
            print(f"- {d} layers: activation peak {y}, fit {base + slope * x:.0f}, "
                  f"blocks {results[(d, 'blocks')][1]}, none {results[(d, 'none')][1]}")

    if 32 in files:
        print("\n## budget frontier, 32 layers\n")
        none_arena = results[(32, "none")][0]
        blocks = results[(32, "blocks")]
        # The error of an impossible budget states the smallest reachable
        # arena.
        _, err = run(opt, files[32], "strategy=budget budget=1")
        low = int(re.search(r"smallest reachable peak, (\d+)", err).group(1))
        budgets = sorted(set([low] + [low + (none_arena - low) * k // 8
                                      for k in range(1, 9)] + [blocks[0]]))
        print("| budget | planned arena | fits | recompute % of forward |")
        print("|---:|---:|---|---:|")
        previous, ok_monotone, ok_fit = None, True, True
        at_blocks = None
        for budget in budgets:
            r, err = run(opt, files[32], f"strategy=budget budget={budget}")
            if err:
                print(f"| {budget} | error: {err} | | |")
                continue
            arena, act, fwd, rec, summary = r
            fits = arena <= budget
            ok_fit &= fits
            if previous is not None and rec > previous:
                ok_monotone = False
            previous = rec
            if budget == blocks[0]:
                at_blocks = rec
            print(f"| {budget} | {arena} | {'yes' if fits else 'NO'} | "
                  f"{100.0 * rec / fwd:.1f} |")
        print(f"\n- planned arena <= budget at every point: "
              f"{'yes' if ok_fit else 'NO'}")
        print(f"- recompute monotone (non-increasing) in the budget: "
              f"{'yes' if ok_monotone else 'NO'}")
        if at_blocks is not None:
            print(f"- at blocks's arena ({blocks[0]}): budget recomputes "
                  f"{at_blocks}, blocks {blocks[3]} FLOPs: "
                  f"{'yes' if at_blocks <= blocks[3] else 'NO'}")

    if 128 in files and (128, "blocks") in results:
        budget = results[(128, "blocks")][0]
        args_ = [opt, files[128], "--memopt-autodiff",
                 f"--memopt-remat=strategy=budget budget={budget}",
                 "--mlir-timing", "-o", os.devnull]
        proc = subprocess.run(args_, capture_output=True, text=True)
        m = re.search(r"([0-9.]+) \([ 0-9.]+%\)\s+RematerializePass", proc.stderr)
        seconds = float(m.group(1)) if m else float("nan")
        print(f"\n## budget compile time, 128 layers\n\n--memopt-remat=budget "
              f"(budget {budget}, planner checks included): {seconds:.3f} s "
              f"(target <= 1 s)")


if __name__ == "__main__":
    main()
