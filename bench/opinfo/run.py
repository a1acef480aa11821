#!/usr/bin/env python3
"""PyTorch's own operator database against memopt: for every differentiable
op of torch 1.13's op_db (torch.testing._internal.common_methods_invocations)
and its first float32 sample inputs, a module whose parameter is the
sample's input and whose loss is the mean square of the op's (first)
result is exported, compiled with memopt.compile and stepped once with SGD;
its loss and gradient are compared with PyTorch float64's, within the
parity oracle's bound for one step (memopt.testing: FACTOR times PyTorch
float32's own error, with the oracle's floor).

Each sample ends as one of
    pass         loss and gradient within the bound
    unsupported  an ExportError (its message says what)
    wrong        compiled and ran, outside the bound
    crash        any other exception: a compiler diagnostic, a runtime
                 error, an exception of another type
and an op passes when every sample tried passes. Prints a table of ops by
outcome and the counts.

    /usr/bin/python3 bench/opinfo/run.py [--samples N] [--ops a,b,...]
                                          [--table FILE.md]

torch's test utilities import `expecttest`, which Debian does not package:
the runner puts a stand-in (ACCEPT = False and unittest.TestCase) on the
path.
"""

import argparse
import collections
import math
import os
import sys
import tempfile
import traceback

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))

# The learning rate that reads the gradient back: p1 = p0 - LR g.
LR = 1024.0


def load_op_db():
    stub = tempfile.mkdtemp(prefix="memopt-expecttest-")
    with open(os.path.join(stub, "expecttest.py"), "w") as f:
        f.write("import unittest\nACCEPT = False\n"
                "class TestCase(unittest.TestCase):\n    pass\n")
    sys.path.insert(0, stub)
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def mapped(value, fn):
    """``value`` with ``fn`` applied to each tensor inside it (lists,
    tuples and dicts are rebuilt)."""
    import torch
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(mapped(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: mapped(v, fn) for k, v in value.items()}
    return value


def make_module(op, sample, dtype):
    import torch
    import torch.nn as nn

    def convert(t):
        t = t.detach().clone()
        return t.double() if dtype == torch.float64 and \
            t.is_floating_point() else t
    args, kwargs = mapped(sample.args, convert), mapped(sample.kwargs, convert)

    class OpModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(sample.input.detach().clone().to(dtype))
            # Whether the op returns a sequence, known before tracing (a
            # traced result is one proxy either way).
            with torch.no_grad():
                self.first = isinstance(op.op(self.p, *args, **kwargs),
                                        (tuple, list))

        def forward(self):
            out = op.op(self.p, *args, **kwargs)
            if self.first:
                out = out[0]
            return (out * out).mean()
    return OpModule()


def pytorch_step(module):
    """The loss and the parameter's gradient."""
    loss = module()
    (grad,) = __import__("torch").autograd.grad(loss, [module.p])
    return float(loss), grad.double().numpy()


def run_sample(op, sample, out_dir):
    import numpy as np
    import torch
    import memopt
    from memopt.exporter import ExportError
    from memopt.testing import FACTOR, FLOOR_ULPS, UNIT_ROUNDOFF

    if "dropout" in op.name:
        return "skipped", "random: memopt's masks are its own stream"
    if not isinstance(sample.input, torch.Tensor) or \
            sample.input.dtype != torch.float32 or sample.input.numel() == 0:
        return "skipped", "the sample's input is not a float32 tensor"
    exact = pytorch_step(make_module(op, sample, torch.float64))
    single = pytorch_step(make_module(op, sample, torch.float32))
    if not all(np.isfinite(v).all() for v in (exact[0], exact[1])):
        return "skipped", "PyTorch's own float64 result is not finite"
    model = make_module(op, sample, torch.float32)
    p0 = model.p.detach().double().numpy().copy()
    try:
        program = memopt.compile(
            model, (), out_dir=out_dir,
            optimizer=torch.optim.SGD(model.parameters(), lr=LR))
        loss = float(program.step())
        p1 = program.state_dict()["p"].double().numpy()
        program.close()
    except ExportError as e:
        return "unsupported", str(e).splitlines()[0]
    except Exception as e:  # noqa: BLE001 - every other outcome is a crash
        lines = [line for line in str(e).splitlines() if line.strip()]
        return "crash", "%s: %s" % (type(e).__name__,
                                    lines[0] if lines else "")
    # SGD carries the gradient back through the parameter: where the input
    # holds a NaN or an infinity (the reference samples of the nan* ops)
    # nothing comes back, and only the finite elements are compared.
    finite = np.isfinite(p0)
    grad = np.where(finite, (p0 - p1) / LR, 0.0)
    reading = UNIT_ROUNDOFF * (np.linalg.norm(p1[finite]) / LR +
                               np.linalg.norm(grad))
    for what, ours, theirs, truth, extra in (
            ("loss", np.array(loss), np.array(single[0]),
             np.array(exact[0]), 0.0),
            ("gradient", grad, np.where(finite, single[1], 0.0),
             np.where(finite, exact[1], 0.0), reading)):
        floor = FLOOR_ULPS * UNIT_ROUNDOFF * np.linalg.norm(truth)
        bound = FACTOR * max(np.linalg.norm(theirs - truth), floor) + extra
        error = np.linalg.norm(ours - truth)
        if not error <= bound:
            if what == "gradient" and pytorch_backward_is_wrong(
                    op, sample, grad, exact[1]):
                return "skipped", ("PyTorch's float64 gradient disagrees "
                                   "with central differences (memopt's "
                                   "agrees)")
            return "wrong", "%s error %.3g > allowed %.3g" % (what, error,
                                                              bound)
    return "pass", ""


def pytorch_backward_is_wrong(op, sample, ours, theirs):
    """Whether the float64 loss's central difference along the direction
    in which memopt's gradient and PyTorch's differ sides with memopt's:
    within 1% of their difference of memopt's slope. (torch 1.13's
    as_strided_scatter backward returns uninitialized memory.)"""
    import numpy as np
    import torch
    module = make_module(op, sample, torch.float64)
    p0 = module.p.detach().clone()
    gap = float(np.linalg.norm(ours - theirs))
    direction = torch.from_numpy((ours - theirs) / gap).reshape(p0.shape)
    h = 1e-6 * max(1.0, float(p0.abs().max()))
    losses = []
    with torch.no_grad():
        for sign in (1.0, -1.0):
            module.p.copy_(p0 + sign * h * direction)
            losses.append(float(module()))
    slope = (losses[0] - losses[1]) / (2 * h)
    ours_slope = float(np.dot(ours.reshape(-1), direction.reshape(-1)))
    return abs(slope - ours_slope) < 0.01 * gap


def variant_name(op):
    return op.name + ("." + op.variant_test_name
                      if op.variant_test_name else "")


def is_tried(op):
    """Whether the runner tries ``op``: differentiable, with float32."""
    import torch
    return op.supports_autograd and \
        torch.float32 in op.supported_dtypes("cpu")


ORDER = ("crash", "wrong", "unsupported", "skipped", "pass")


def evaluate(op, samples, work):
    """The worst outcome (and its detail) of ``op``'s first ``samples``
    float32 samples, each compiled under ``work``."""
    import torch
    name = variant_name(op)
    results = []
    try:
        for index, sample in enumerate(op.sample_inputs(
                "cpu", torch.float32, requires_grad=True)):
            if index == samples:
                break
            results.append(run_sample(
                op, sample, os.path.join(work, "%s-%d" % (name, index))))
    except Exception as e:  # noqa: BLE001 - PyTorch's own sample failed
        if not results:
            results.append(("skipped", "PyTorch: %s" % (
                traceback.format_exception_only(type(e), e)[-1].strip())))
    tried = [r for r in results if r[0] != "skipped"] or results
    return min(tried, key=lambda r: ORDER.index(r[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1,
                        help="float32 samples per op (default 1)")
    parser.add_argument("--ops", help="only these ops (comma-separated)")
    parser.add_argument("--table", help="also write the table to FILE.md")
    args = parser.parse_args()
    import torch
    torch.manual_seed(0)
    op_db = load_op_db()
    wanted = set(args.ops.split(",")) if args.ops else None
    work = tempfile.mkdtemp(prefix="memopt-opinfo-")
    outcomes = collections.OrderedDict()
    for op in op_db:
        name = variant_name(op)
        if wanted and op.name not in wanted and name not in wanted:
            continue
        if not is_tried(op):
            continue
        outcomes[name] = worst = evaluate(op, args.samples, work)
        print("%-40s %-11s %s" % (name, worst[0], worst[1][:120]),
              flush=True)
    counts = collections.Counter(outcome for outcome, _ in outcomes.values())
    lines = ["| op | outcome | detail |", "|---|---|---|"]
    for name, (outcome, detail) in outcomes.items():
        lines.append("| %s | %s | %s |" % (name, outcome,
                                           detail.replace("|", "\\|")[:160]))
    summary = ", ".join("%s %d" % (k, counts[k]) for k in
                        ("pass", "unsupported", "wrong", "crash", "skipped"))
    print("\nops: %d (%s); %d float32 sample(s) per op"
          % (len(outcomes), summary, args.samples))
    if args.table:
        with open(args.table, "w") as f:
            f.write("\n".join(lines) + "\n\n" + summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
