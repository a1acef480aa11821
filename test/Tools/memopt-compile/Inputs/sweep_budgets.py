"""Sweeps memory budgets over an example and checks the chooser.

    sweep_budgets.py MEMOPT_COMPILE MODEL.mlir DEVICE

First runs --explore with the device's default budget to learn every
combination's planned peak, then one --explore per budget: each of those
peaks, one byte below each, and a budget below the smallest. For every
budget: when something fits, the chosen combination's planned peak is at
most the budget and no fitting combination is estimated faster; when
nothing fits, the command fails. Across budgets, from the largest down, the
chosen step time never decreases. Exits 1 on a violation.
"""

import json
import subprocess
import sys


def explore(tool, model, device, budget=None):
    cmd = [tool, model, "--explore", "--report=json", "--device=" + device]
    if budget is not None:
        cmd.append("--memory-budget=%d" % budget)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    return run.returncode, json.loads(run.stdout), run.stderr


def main(tool, model, device):
    _, first, _ = explore(tool, model, device)
    peaks = sorted({c["planned_peak_bytes"] for c in first["combinations"]
                    if "error" not in c})
    budgets = sorted({b for p in peaks for b in (p, p - 1)} |
                     {peaks[0] // 2, peaks[-1] * 2}, reverse=True)
    errors, last_time, feasible = [], 0.0, 0
    for budget in budgets:
        rc, report, stderr = explore(tool, model, device, budget)
        combos = report["combinations"]
        chosen = report["chosen"]
        if chosen is None:
            if rc == 0 or "cannot be met" not in stderr:
                errors.append("budget %d: nothing fits but rc=%d" % (budget, rc))
            if any(c.get("fits") for c in combos):
                errors.append("budget %d: a combination fits, none chosen"
                              % budget)
            last_time = float("inf")
            continue
        feasible += 1
        c = combos[chosen]
        if rc != 0 or c["planned_peak_bytes"] > budget or not c["fits"]:
            errors.append("budget %d: chosen peak %d (rc %d)"
                          % (budget, c["planned_peak_bytes"], rc))
        fastest = min(x["step_seconds"] for x in combos if x.get("fits"))
        if c["step_seconds"] != fastest:
            errors.append("budget %d: chosen %.6f s, fastest fitting %.6f s"
                          % (budget, c["step_seconds"], fastest))
        if c["step_seconds"] < last_time:
            errors.append("budget %d: step time %.6f s after %.6f s at a "
                          "larger budget" % (budget, c["step_seconds"],
                                             last_time))
        last_time = c["step_seconds"]
    for e in errors:
        print("VIOLATION", e)
    print("%d budgets, %d feasible, %d combinations each"
          % (len(budgets), feasible, len(first["combinations"])))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
