#!/usr/bin/env python3
"""Differential testing: random graphs under every option of memopt-compile.

For each random training graph (randgraph.py) this compiles and trains the
step (3 steps on the host runtime, `--save`d afterwards) under:

  base        --no-buffer-reuse: every buffer its own memory (the
              unoptimised compilation)
  plan        the default: shared arena, in-place results, views
  <strategy>  --remat=blocks|sqrt|revolve|selective, revolve with one
              snapshot, and budget (at the memory blocks plans)
  K2, K4      --micro-batches=2|4
  bf16, fp16  --mixed-precision=bf16|fp16
  combo       one random combination of remat x micro-batches x mixed
              precision x buffer reuse, and `combo-ref`, the same without
              remat and with reuse

and compares each with its reference:

  bit-exact   plan against base, every remat strategy against plan, the
              combination against combo-ref: the printed losses and the
              saved parameters, state and optimizer state byte for byte
              (planning and recomputation promise this)
  tolerance   K2/K4 and bf16/fp16 (and combo-ref) against plan: losses,
              and parameters measured against the size of their update
              (docs/Reliability.md states the tolerances and why)

It also checks the unoptimised gradients against two oracles: finite
differences (the base step with SGD at lr 1 turns p into p - g, and the
directional derivative g.d along a random d must match the difference of
the loss along d) and PyTorch autograd in float64 (reference.py): the
first loss and every gradient element.

    run.py [--graphs N] [--first SEED] [--jobs J] [--work DIR]

prints a table of comparisons per option (graphs, mismatches, largest
error against its tolerance, and how many passed only as amplified or
ill-conditioned: docs/Reliability.md) and `differential: G graphs,
C comparisons, M mismatches`; each ill-conditioned graph, and each mismatch
with the commands that reproduce it. Exit code 1 on any mismatch or failed
compilation.
"""

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
import randgraph  # noqa: E402
import reference  # noqa: E402
import memopt.safetensors as st  # noqa: E402
from memopt.testing import FACTOR  # noqa: E402

STEPS = 3
REMAT = ["blocks", "sqrt", "revolve", "selective"]

# Tolerances. Losses: |loss - ref| <= LOSS_RTOL * max(1, |ref|) at every
# step. Parameters: max |p - ref| <= PARAM_RTOL * (largest update of the
# reference, max |ref - p0|, plus four roundings of the largest parameter)
# per tensor under SGD. AdamW's normalised update
# turns the rounding of a near-zero gradient into a full-size step, so under
# AdamW the parameters are only held to Adam's bound (2 lr steps) and the
# losses carry the comparison.
TOLERANCE = {
    "accumulate": {"loss": 1e-5, "param": 1e-3, "unit": 2.0 ** -24},
    "bf16": {"loss": 5e-2, "param": 2e-1, "unit": 2.0 ** -8},
    "fp16": {"loss": 1e-2, "param": 5e-2, "unit": 2.0 ** -11},
}
FD_STEP = 2e-3
FD_RTOL = 1e-2
FD_NOISE = 1e-6
AUTOGRAD_RTOL = 1e-4


class Runner:
    """Compiles and trains one graph under many flag sets."""

    def __init__(self, graph, work, cache):
        self.graph, self.work, self.cache = graph, work, cache
        os.makedirs(work, exist_ok=True)
        self.model = os.path.join(work, "model.mlir")
        with open(self.model, "w") as f:
            f.write(graph.mlir)
        self.params = os.path.join(work, "params.safetensors")
        st.save(graph.params, self.params)
        self.batch = os.path.join(work, "batch.safetensors")
        st.save(graph.inputs, self.batch)

    def compile(self, tag, flags):
        """Compiles into WORK/tag; returns (out dir, None) or (None, error)."""
        out = os.path.join(self.work, tag)
        cmd = ["memopt-compile", self.model, "-o", out, "--report=json",
               "--cxx=" + os.path.join(HERE, "cached-cxx")] + flags
        run = subprocess.run(cmd, capture_output=True, text=True,
                             env={**os.environ, "MEMOPT_CXX_CACHE": self.cache})
        if run.returncode != 0:
            return None, (f"memopt-compile {' '.join(flags)} failed: " +
                          (run.stderr.strip().splitlines() or ["?"])[0])
        return out, None

    def train(self, out, params, steps, save=None):
        cmd = [os.path.join(out, "train"), "--params", params, "--batch",
               self.batch, "--steps", str(steps)]
        if save:
            cmd += ["--save", save]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            return None, f"train failed: {run.stderr.strip()}"
        return run.stdout, None

    def run(self, tag, flags):
        """Compiles and trains STEPS steps: a dict with the losses, the
        saved bytes and the report, or with `error`."""
        out, error = self.compile(tag, flags)
        if error:
            return {"error": error, "flags": flags}
        result = self.trained(out, STEPS, os.path.join(self.work,
                                                       tag + ".safetensors"))
        result["flags"] = flags
        if "error" not in result:
            with open(os.path.join(out, "memory_report.json")) as f:
                result["report"] = json.load(f)
        return result

    def trained(self, out, steps, saved):
        """Trains the program in `out` for `steps` steps from the initial
        parameters, saving to `saved`."""
        stdout, error = self.train(out, self.params, steps, saved)
        if error:
            return {"error": error}
        with open(saved, "rb") as f:
            data = f.read()
        losses = [float(m) for m in
                  re.findall(r"^step \d+ loss (\S+)", stdout, re.M)]
        skipped = [" skipped" in line for line in stdout.splitlines()
                   if line.startswith("step ")]
        return {"stdout": stdout, "losses": losses, "skipped": skipped,
                "bytes": data, "saved": saved, "out": out}

    def saved_after(self, result, steps):
        """The state `result`'s program saves after `steps` steps."""
        if steps == 0:
            return self.params
        path = os.path.join(self.work, f"after{steps}.safetensors")
        _, error = self.train(result["out"], self.params, steps, path)
        if error:
            raise RuntimeError(error)
        return path


def planned(report):
    """The step's planned memory: the arguments plus the arena."""
    return report["arena_bytes"] + sum(
        report["pools"][p] for p in ("params", "master_params", "optimizer",
                                     "state", "data"))


def compare_exact(result, ref):
    if result["stdout"] != ref["stdout"]:
        return f"losses {result['losses']} != {ref['losses']}", None
    if result["bytes"] != ref["bytes"]:
        got, want = st.load(result["saved"]), st.load(ref["saved"])
        names = sorted(n for n in want if not np.array_equal(
            got.get(n), want[n]))
        return f"saved tensors differ: {', '.join(names[:5])}", None
    return None, 0.0


def compare_close(result, ref, params0, tolerance, optimizer, lr, runner,
                  emulated=None):
    """None or a message, and the largest error as a fraction of its
    tolerance.

    With `emulated` (reference.rounding_error's loss and gradient errors),
    a loss or parameter whose emulated error exceeds its tolerance is
    instead allowed four times the emulated error.

    A step that dynamic loss scaling skipped leaves the parameters as they
    were, so without dropout (whose mask follows the step) the run equals
    the reference run with fewer steps: step i compares with the
    reference's step (steps taken before i) + 1. With dropout only the
    losses before the first skipped step are compared."""
    taken = [0]
    for skipped in result["skipped"]:
        taken.append(taken[-1] + (not skipped))
    steps = range(len(result["losses"]))
    pairs = [(result["losses"][i], ref["losses"][taken[i]]) for i in steps]
    ref_saved = ref["saved"]
    if any(result["skipped"]):
        if runner.graph.has_dropout:
            first = result["skipped"].index(True)
            pairs, ref_saved = pairs[:first], None
        else:
            ref_saved = runner.saved_after(ref, taken[-1])

    def bound(name, tol):
        """The tolerance of the loss (name None) or a parameter."""
        if emulated is None:
            return tol
        error = emulated[0] if name is None else emulated[1].get(name, 0.0)
        return 4 * error if error > tol else tol

    worst = 0.0
    loss_tolerance = bound(None, tolerance["loss"])
    for step, (got, want) in enumerate(pairs):
        error = abs(got - want) / max(1.0, abs(want)) / loss_tolerance
        worst = max(worst, error)
        if not error <= 1:
            return (f"step {step + 1} loss {got} against {want} "
                    f"(tolerance {loss_tolerance:.3g})"), worst
    if ref_saved is None:
        return None, worst
    got, want = st.load(result["saved"]), st.load(ref_saved)
    want = {name: want[name].astype(np.float64) for name in params0}
    updates = {name: float(np.abs(want[name] - p0).max())
               for name, p0 in params0.items()}
    for name, p0 in params0.items():
        a, b = got[name].astype(np.float64), want[name]
        update = updates[name]
        diff = np.abs(a - b)
        # Plus four roundings of the parameter: an update below that is
        # rounding itself.
        scale = (bound(name, tolerance["param"]) * max(update, 1e-7) +
                 4 * 2.0 ** -23 * float(np.abs(b).max()))
        if update == 0:
            # A gradient that cancels exactly (x - mean(x) summed) in the
            # reference may, in another order or precision, leave the
            # rounding of the terms it cancels: one rounding of the
            # model's largest update.
            scale += tolerance["unit"] * max(updates.values())
        if optimizer == "adamw":
            if float(diff.max()) > 2 * lr * len(result["losses"]):
                return (f"{name}: largest difference {diff.max():.3g} "
                        f"beyond Adam's bound 2 lr steps"), worst
        else:
            error = float(diff.max()) / scale
            worst = max(worst, error)
            if not error <= 1:
                return (f"{name}: largest difference {diff.max():.3g} "
                        f"against an update of {update:.3g}"), worst
    return None, worst


def unoptimised_gradients(runner, base_flags):
    """Compiles the unoptimised step with SGD at lr 1 (p becomes p - g):
    (its program, first loss, {parameter: gradient}) or an error."""
    flags = base_flags + ["--optimizer=sgd", "--lr=1", "--momentum=0",
                          "--weight-decay=0"]
    out, error = runner.compile("fd", flags)
    if error:
        return error
    saved = os.path.join(runner.work, "fd.safetensors")
    stdout, error = runner.train(out, runner.params, 1, saved)
    if error:
        return error
    after = st.load(saved)
    loss = float(re.search(r"^step 1 loss (\S+)", stdout, re.M).group(1))
    return out, loss, {n: v.astype(np.float64) - after[n].astype(np.float64)
                       for n, v in runner.graph.params.items()}


def gradcheck(runner, out, base, gradients):
    """Finite-difference check of the unoptimised gradient: for each
    parameter, the derivative along a random direction of that parameter
    against a five-point central difference of the loss, or, where a kink
    lies inside the stencil, a one-sided second-order difference.

    A difference is allowed FD_RTOL of the derivative, plus the rounding of
    the f32 loss through its weights (FD_NOISE of the loss per evaluation,
    plus twice the noise measured with steps a thousand times smaller) and
    its own truncation error, estimated by its distance from the
    lower-order difference. A stencil that fails is tried again with a
    tenth of the step. `base` is the loss at the parameters."""
    graph = runner.graph
    rng = np.random.default_rng(graph.seed + 7919)
    probe = os.path.join(runner.work, "probe.safetensors")
    worst = 0.0
    for name, value in graph.params.items():
        direction = rng.standard_normal(value.shape)
        analytic = float(np.sum(gradients[name] * direction))

        def loss_at(t):
            """The loss with `name` moved by t along the direction."""
            moved = dict(graph.params)
            moved[name] = (value + t * direction).astype(np.float32)
            st.save(moved, probe)
            stdout, error = runner.train(out, probe, 1)
            if error:
                raise RuntimeError(error)
            return float(re.search(r"^step 1 loss (\S+)", stdout,
                                   re.M).group(1))

        def stencil(h):
            """(error / allowed, finite difference, allowed) at step h."""
            losses = {k: loss_at(k * h) for k in (2, 1, -1, -2)}
            losses[0] = base
            rounding = FD_NOISE * max(1.0, abs(losses[0])) + 2 * measured
            central = (losses[1] - losses[-1]) / (2 * h)
            five = (8 * (losses[1] - losses[-1]) -
                    (losses[2] - losses[-2])) / (12 * h)
            # One-sided second-order differences, and their first-order
            # counterparts as the estimate of their truncation.
            forward = (-3 * losses[0] + 4 * losses[1] - losses[2]) / (2 * h)
            backward = (3 * losses[0] - 4 * losses[-1] + losses[-2]) / (2 * h)
            estimates = [
                (five, 1.5 * rounding / h + abs(five - central)),
                (forward, 4 * rounding / h +
                 abs(forward - (losses[1] - losses[0]) / h)),
                (backward, 4 * rounding / h +
                 abs(backward - (losses[0] - losses[-1]) / h)),
            ]
            # Smooth, the three agree; a kink (relu, pooling) inside the
            # stencil leaves the side without it, whose derivative autodiff
            # gives.
            return min((abs(v - analytic) / (FD_RTOL * abs(analytic) + e),
                        v, FD_RTOL * abs(analytic) + e) for v, e in estimates)

        try:
            # The rounding noise of the loss, measured: its change under
            # steps a thousand times smaller, less what g.d explains.
            tiny = FD_STEP * 1e-3
            measured = max(abs(loss_at(k * tiny) - base - k * tiny * analytic)
                           for k in (1, -1, 2))
            ratio, numeric, allowed = stencil(FD_STEP)
            if not ratio <= 1:
                # Higher derivatives too large for the step (or kinks on
                # both sides): a tenth of it, whose rounding allowance is
                # ten times larger.
                ratio, numeric, allowed = min((ratio, numeric, allowed),
                                              stencil(FD_STEP / 10))
        except RuntimeError as error:
            return str(error), None
        worst = max(worst, ratio)
        if not ratio <= 1:
            return (f"d/d{name} along a random direction: {analytic:.6g}, "
                    f"finite difference {numeric:.6g} (allowed "
                    f"{allowed:.3g})"), worst
    return None, worst


def autograd_check(runner, loss, gradients):
    """The unoptimised step's first loss and gradients against PyTorch
    autograd in float64 (reference.py). Allowed: AUTOGRAD_RTOL of
    max(1, |loss|) and of each gradient's largest element, plus the parity
    oracle's FACTOR (memopt.testing) times what f32 itself costs on this
    graph (PyTorch's own f32 against its float64: a graph that amplifies
    rounding amplifies memopt's too), plus
    the rounding of p - g, from which the gradient is read."""
    graph = runner.graph
    exact = reference.evaluate(graph.mlir, graph.params, graph.inputs)
    single = reference.evaluate(graph.mlir, graph.params, graph.inputs,
                                dtype=reference.torch.float32)
    want_loss, want = exact
    allowed = (AUTOGRAD_RTOL * max(1.0, abs(want_loss)) +
               FACTOR * abs(single[0] - want_loss))
    worst = abs(loss - want_loss) / allowed
    if not worst <= 1:
        return f"loss {loss} against PyTorch's {want_loss:.9g}", worst
    for name, expected in want.items():
        size = float(np.abs(expected).max())
        diff = float(np.abs(gradients[name] - expected).max())
        allowed = (AUTOGRAD_RTOL * size +
                   FACTOR * float(np.abs(single[1][name] - expected).max()) +
                   2.0 ** -23 * float(np.abs(graph.params[name]).max()))
        ratio = diff / allowed if allowed > 0 else float(diff > 0) * np.inf
        worst = max(worst, ratio)
        if not ratio <= 1:
            return (f"d/d{name}: largest difference {diff:.3g} from "
                    f"PyTorch autograd (largest element {size:.3g})"), worst
    return None, worst


def emulated_rounding(graph, precision):
    """reference.rounding_error for `precision` ("bf16" or "fp16"), under
    the loss scale of the first step that dynamic loss scaling takes."""
    if precision == "bf16":
        return reference.rounding_error(graph, "bf16")
    exact = reference.evaluate(graph.mlir, graph.params, graph.inputs)
    scale = 65536.0
    while True:
        loss, params = reference.rounding_error(graph, "f16", scale, exact)
        if scale <= 1 or all(np.isfinite(e) for e in params.values()):
            return loss, params
        scale /= 2


def check_graph(args):
    """Runs every variant of one graph; returns its comparisons."""
    seed, workroot, cache, keep, conv = args
    graph = randgraph.generate(seed, conv)
    work = os.path.join(workroot, f"g{seed}")
    runner = Runner(graph, work, cache)
    rng = np.random.default_rng(seed + 104729)
    optimizer = str(rng.choice(["sgd", "sgd-momentum", "adamw"]))
    if optimizer == "adamw":
        lr, opt = 1e-3, ["--optimizer=adamw", "--lr=1e-3"]
    else:
        lr = 0.05
        opt = ["--optimizer=sgd", "--lr=0.05", "--momentum=" +
               ("0.9" if optimizer == "sgd-momentum" else "0")]
        optimizer = "sgd"
    params0 = {n: p.astype(np.float64) for n, p in graph.params.items()}
    results = {}
    comparisons = []  # (option, seed, message or None, error ratio)

    def variant(tag, flags):
        results[tag] = runner.run(tag, opt + flags)
        return results[tag]

    def record(option, tag, ref, how):
        result = results[tag]
        if "error" in result or "error" in results[ref]:
            message = result.get("error") or results[ref]["error"]
            comparisons.append((option, seed, message, None,
                                result["flags"], None))
            return
        note = None

        def first_steps():
            """The result and the reference after one step each."""
            return [runner.trained(r["out"], 1, os.path.join(
                work, f"{t}.1.safetensors")) for r, t in
                ((result, tag), (results[ref], ref))]

        if how == "exact":
            message, ratio = compare_exact(result, results[ref])
        else:
            message, ratio = compare_close(result, results[ref], params0,
                                           TOLERANCE[how], optimizer, lr,
                                           runner)
            one = None
            if message and not message.startswith("step 1 "):
                # Training that amplifies rounding (a loss that jumps
                # about) separates two trajectories whatever their first
                # step: then the error of one step from the same start
                # must be within the tolerance.
                one = first_steps()
                local, _ = compare_close(one[0], one[1], params0,
                                         TOLERANCE[how], optimizer, lr,
                                         runner)
                if local is None:
                    note = f"amplified ({message})"
                    message = None
            if message and how in ("bf16", "fp16"):
                # A graph can amplify rounding beyond any tolerance (a
                # layer norm of nearly constant rows): where the same
                # precision's rounding, emulated in PyTorch, already moves
                # the first step beyond the tolerance, memopt's first step
                # may be off by four times what the emulation is.
                emulated = emulated_rounding(runner.graph, how)
                one = one or first_steps()
                local, _ = compare_close(one[0], one[1], params0,
                                         TOLERANCE[how], optimizer, lr,
                                         runner, emulated)
                if local is None:
                    worst = max(emulated[1].items(), key=lambda i: i[1],
                                default=("loss", emulated[0]))
                    note = (f"ill-conditioned ({message}; emulated {how} "
                            f"rounding moves the loss by {emulated[0]:.3g} "
                            f"and d/d{worst[0]} by {worst[1]:.3g})")
                    message = None
        comparisons.append((option, seed, message, ratio, result["flags"],
                            note))

    base = ["--no-buffer-reuse"]
    variant("plan", [])
    variant("base", base)
    record("planning (reuse vs none)", "plan", "base", "exact")
    for strategy in REMAT:
        variant(strategy, ["--remat=" + strategy])
        record("remat=" + strategy, strategy, "plan", "exact")
    variant("revolve-1", ["--remat=revolve", "--remat-snapshots=1"])
    record("remat=revolve snapshots=1", "revolve-1", "plan", "exact")
    if "error" not in results["blocks"]:
        budget = planned(results["blocks"]["report"])
        variant("budget", ["--remat=budget", f"--memory-budget={budget}"])
        record("remat=budget", "budget", "plan", "exact")
        if "error" not in results["budget"] and \
                planned(results["budget"]["report"]) > budget:
            comparisons.append(("remat=budget", seed, "planned peak "
                                f"{planned(results['budget']['report'])} > "
                                f"budget {budget}", None, [], None))
    for k in (2, 4):
        variant(f"K{k}", [f"--micro-batches={k}"])
        record(f"micro-batches={k}", f"K{k}", "plan", "accumulate")
    for mp in ("bf16", "fp16"):
        variant(mp, ["--mixed-precision=" + mp])
        record("mixed-precision=" + mp, mp, "plan", mp)

    # One random combination of every option, against the same precision
    # and micro-batches without remat (bit-exact) and that against plan.
    remat = str(rng.choice(REMAT + ["none"]))
    k = int(rng.choice([1, 2, 4]))
    mp = str(rng.choice(["none", "bf16", "fp16"]))
    reuse = bool(rng.random() < 0.5)
    combo = ["--remat=" + remat, f"--micro-batches={k}",
             "--mixed-precision=" + mp] + ([] if reuse else base)
    name = (f"combo remat={remat} K={k} mp={mp} "
            f"reuse={'on' if reuse else 'off'}")
    reference = ["--micro-batches=%d" % k, "--mixed-precision=" + mp]
    variant("combo-ref", reference)
    variant("combo", combo)
    record(name, "combo", "combo-ref", "exact")
    how = mp if mp != "none" else "accumulate"
    record(f"combo-ref K={k} mp={mp}", "combo-ref", "plan", how)

    step = unoptimised_gradients(runner, base)
    if isinstance(step, str):
        comparisons.append(("finite differences (base)", seed, step, None,
                            base, None))
    else:
        out, loss, gradients = step
        message, ratio = gradcheck(runner, out, loss, gradients)
        comparisons.append(("finite differences (base)", seed, message,
                            ratio, base, None))
        message, ratio = autograd_check(runner, loss, gradients)
        comparisons.append(("PyTorch autograd (base)", seed, message, ratio,
                            base, None))
    if not keep and all(c[2] is None for c in comparisons):
        shutil.rmtree(work, ignore_errors=True)
    return seed, graph.ops, comparisons


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graphs", type=int, default=1000)
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", default=None)
    parser.add_argument("--conv", action="store_true",
                        help="graphs that start with convolutions and "
                        "pooling of an image input")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directories of passing graphs")
    args = parser.parse_args()
    if shutil.which("memopt-compile") is None:
        sys.exit("run.py: memopt-compile is not on PATH")
    work = args.work or tempfile.mkdtemp(prefix="memopt-differential-")
    cache = os.path.join(work, "cxx-cache")
    os.makedirs(cache, exist_ok=True)

    # One JSON line per graph: a run given the same --work resumes where
    # it stopped, and the summary covers every graph of the range.
    log = os.path.join(work, "results.jsonl")
    done = {}
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                record = json.loads(line)
                done[record["seed"]] = record
    seeds = range(args.first, args.first + args.graphs)
    tasks = [(s, work, cache, args.keep, args.conv) for s in seeds
             if s not in done]
    start = time.time()
    with open(log, "a") as f, multiprocessing.Pool(args.jobs) as pool:
        for n, (seed, graph_ops, comparisons) in enumerate(
                pool.imap_unordered(check_graph, tasks), 1):
            done[seed] = {"seed": seed, "ops": graph_ops,
                          "comparisons": comparisons}
            f.write(json.dumps(done[seed]) + "\n")
            f.flush()
            if n % 25 == 0:
                print(f"{n} of {len(tasks)} graphs, "
                      f"{time.time() - start:.0f} s", file=sys.stderr)
    seconds = time.time() - start

    table = {}
    failures = []
    conditioned = []
    ops = {}
    for seed in seeds:
        for op in done[seed]["ops"]:
            ops[op] = ops.get(op, 0) + 1
        for option, s, message, ratio, flags, *note in \
                done[seed]["comparisons"]:
            row = table.setdefault(option, [0, 0, 0.0, 0, 0])
            row[0] += 1
            if message:
                row[1] += 1
                failures.append((option, s, message, flags))
            if ratio is not None:
                row[2] = max(row[2], ratio)
            if note and note[0]:
                ill = note[0].startswith("ill-conditioned")
                row[4 if ill else 3] += 1
                if ill:
                    conditioned.append((option, s, note[0]))

    print(f"{'option':<44} {'graphs':>6} {'mismatches':>10} "
          f"{'worst/tol':>9} {'amplified':>9} {'ill-cond':>8}")
    for option in sorted(table):
        n, bad, worst, amplified, ill = table[option]
        print(f"{option:<44} {n:>6} {bad:>10} {worst:>9.3g} {amplified:>9}"
              f" {ill:>8}")
    print("ops generated: " + ", ".join(f"{op} {n}" for op, n in
                                        sorted(ops.items())))
    for option, seed, note in sorted(conditioned, key=lambda c: c[1]):
        print(f"seed {seed} {option}: {note}")
    for option, seed, message, flags in sorted(failures, key=lambda f: f[1]):
        print(f"MISMATCH seed {seed} {option}: {message}\n  reproduce: "
              f"{os.path.relpath(os.path.join(HERE, 'randgraph.py'))} {seed}"
              f"{' --conv' if args.conv else ''}"
              f" > g.mlir && memopt-compile g.mlir -o out {' '.join(flags)}"
              f"  (work: {os.path.join(work, 'g%d' % seed)})")
    total = sum(row[0] for row in table.values())
    print(f"differential: {args.graphs} graphs, {total} comparisons, "
          f"{len(failures)} mismatches, {seconds:.0f} s"
          + (f" ({args.graphs - len(tasks)} graphs from an earlier run)"
             if len(tasks) < args.graphs else ""))
    if not args.work and not failures and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
