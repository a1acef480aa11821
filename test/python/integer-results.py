# Integer results computed in the step: the positions of maxima and minima
# (argmax, argmin, the indices of max and min along a dimension), the
# indices of sort, argsort, topk, kthvalue and median (a stable sort's:
# ties keep their order, a NaN goes last), counts of masks (mask.sum(),
# count_nonzero), float-to-integer conversions (.long(): truncation toward
# zero), integer labels clamped and promoted to float, and lookups by
# indices the step computes (gather, take_along_dim, index_select, x[index]
# and x[i, j] by the labels or by an argmax). The cases hold ties (the first
# position wins, as PyTorch's), a NaN (its position wins), negative values
# that truncate toward zero, and labels that a clamp makes valid.
#
# One model holds every case, as comparisons.py: each case is
# sum((q + 1) f(a, b, y)) with q = 0, so one SGD step reads back f's values
# (q's gradient) and the gradients of sum(f) (a's and b's). The labels y are
# an input of the step. Every case is exact in float32 but the mean's
# division (one rounding), so each is compared with PyTorch's float64
# within 2 f32 roundoffs of its magnitude plus the read-back's rounding.
#
# memopt.compile loads the step into this process, which an instrumented
# (sanitized) build's library cannot join, as python-api.py.
#
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
#
# CHECK-NOT: FAILED
# CHECK: argmax: ok
# CHECK: argmin-flat: ok
# CHECK: max-values-and-indices: ok
# CHECK: min-indices-keepdim: ok
# CHECK: mask-mean: ok
# CHECK: count-nonzero: ok
# CHECK: long: ok
# CHECK: gather-labels: ok
# CHECK: clamped-labels: ok
# CHECK: index-select-labels: ok
# CHECK: take-along-argmax: ok
# CHECK: labels-as-floats: ok
# CHECK: bool-of-labels: ok
# CHECK: rows-by-argmax: ok
# CHECK: sort-indices: ok
# CHECK: sort-descending-indices: ok
# CHECK: argsort: ok
# CHECK: topk-indices: ok
# CHECK: kthvalue-indices: ok
# CHECK: median-indices: ok
# CHECK: pick-labels: ok
# CHECK: pick-by-argmax: ok
# CHECK: pick-rows-of-3d: ok

import os
import sys

import torch
import torch.nn as nn

import memopt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import readback  # noqa: E402
from readback import LR  # noqa: E402

NAN = float("nan")
LABELS = [2, -100, 0, 1, 7]

ROWS = [[1.0, 3.0, 3.0, -2.0], [0.5, -1.0, 4.0, 2.0], [-3.0, -3.0, -5.0, 1.5],
        [2.0, 1.0, 0.0, 2.5], [0.25, 0.75, -0.5, -0.5]]
DISTINCT = [[1.0, 3.0, 2.5, -2.0], [0.5, -1.0, 4.0, 2.0],
            [-3.0, -4.0, -5.0, 1.5], [2.0, 1.0, 0.0, 2.5],
            [0.25, 0.75, -0.5, -0.25]]
NO_NAN = [[0.0] * 4] * 5
ONE_NAN = [[0.0] * 4, [0.0, 0.0, 0.0, NAN], [0.0] * 4, [0.0] * 4,
           [0.0] * 4]

CASES = {
    # name: f(a, b, y), a, b, what is added to a
    "argmax": (lambda a, b, y: torch.gather(
        a, 1, a.argmax(1, keepdim=True)).squeeze(1) * b,
        ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], ONE_NAN),
    "argmin-flat": (lambda a, b, y: torch.index_select(
        a.reshape(-1), 0, a.argmin().reshape(1)) * b + a.argmin(),
        ROWS, [2.0], NO_NAN),
    "max-values-and-indices": (
        lambda a, b, y: (lambda m: m.values * b + m.indices)(a.max(1)),
        ROWS, [1.0, -1.0, 2.0, -2.0, 3.0], NO_NAN),
    "min-indices-keepdim": (
        lambda a, b, y: a.min(dim=0, keepdim=True).indices * b,
        ROWS, [[1.0, 2.0, 3.0, 4.0]], NO_NAN),
    "mask-mean": (lambda a, b, y: (a * b).sum() / (a > 0).sum(),
                  ROWS, [[1.0, 0.5, 2.0, -1.0]], NO_NAN),
    "count-nonzero": (lambda a, b, y: torch.count_nonzero(
        torch.relu(a), dim=1) * b + (y != -100).sum(),
        ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "long": (lambda a, b, y: (a * 1.5).long() * b,
             ROWS, [[1.0, 2.0, -1.0, 0.5]], NO_NAN),
    "gather-labels": (lambda a, b, y: torch.gather(
        a, 1, y.clamp(0, 3).unsqueeze(1)).squeeze(1) * b,
        ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "clamped-labels": (lambda a, b, y: a[:, 0] * y.clamp(min=0) +
                       b * torch.clamp_max(y, 1),
                       ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "index-select-labels": (lambda a, b, y: torch.index_select(
        a, 0, y.clamp(0, 4)) * b, ROWS, [[1.0, 2.0, -1.0, 0.5]], NO_NAN),
    "take-along-argmax": (lambda a, b, y: torch.take_along_dim(
        a, a.argmax(0, keepdim=True), 0) * b,
        ROWS, [[1.0, 2.0, 3.0, 4.0]], NO_NAN),
    "labels-as-floats": (lambda a, b, y: a[:, 1] * y + b * y.float(),
                         ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "bool-of-labels": (lambda a, b, y: a[:, 2] * y.bool() +
                       b * y.long().clamp(-1, 1),
                       ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "rows-by-argmax": (lambda a, b, y: a[a.argmax(0)] * b,
                       ROWS, [[1.0, 2.0, 3.0, 4.0]], NO_NAN),
    # A stable sort's indices: ties keep their order, a NaN goes last
    # (first when descending).
    "sort-indices": (lambda a, b, y: (lambda s: s.values * b + s.indices)(
        torch.sort(a, dim=1, stable=True)),
        ROWS, [[1.0, 2.0, -1.0, 0.5]], ONE_NAN),
    "sort-descending-indices": (lambda a, b, y: (
        lambda s: s.values * b + s.indices)(
        torch.sort(a, dim=0, descending=True, stable=True)),
        ROWS, [[1.0, 2.0, -1.0, 0.5]], ONE_NAN),
    # PyTorch's unstable forms leave the order of ties open: no ties here.
    "argsort": (lambda a, b, y: a.argsort(1, descending=True) * b,
                DISTINCT, [[1.0, 2.0, -1.0, 0.5]], NO_NAN),
    "topk-indices": (lambda a, b, y: (lambda t: t.values * b + t.indices)(
        torch.topk(a, 2, dim=1, largest=False)),
        DISTINCT, [[1.0, 2.0]], NO_NAN),
    "kthvalue-indices": (lambda a, b, y: (lambda t: t.values * b + t.indices)(
        torch.kthvalue(a, 2, dim=1)),
        DISTINCT, [1.0, 2.0, -1.0, 0.5, 3.0], NO_NAN),
    "median-indices": (lambda a, b, y: (lambda t: t.values * b + t.indices)(
        torch.median(a, dim=0, keepdim=True)),
        DISTINCT, [[1.0, 2.0, -1.0, 0.5]], NO_NAN),
    # x[i, j] by integer tensors, one computed in the step.
    "pick-labels": (lambda a, b, y: a[torch.arange(5), y.clamp(0, 3)] * b,
                    ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "pick-by-argmax": (lambda a, b, y: a[a.argmax(1),
                                        torch.tensor([0, 1, 2, 3, -1])] * b,
                       ROWS, [1.0, 2.0, 3.0, 4.0, 5.0], NO_NAN),
    "pick-rows-of-3d": (lambda a, b, y: a.reshape(5, 2, 2)[
        y.clamp(0, 4), -1, :] * b, ROWS, [[1.0, -2.0]], NO_NAN),
}


class Model(nn.Module):
    """Parameters a, b and q and a buffer na for each case."""

    def __init__(self):
        super().__init__()
        y = torch.tensor(LABELS)
        for i, (f, a, b, na) in enumerate(CASES.values()):
            self.register_parameter("a%d" % i, nn.Parameter(torch.tensor(a)))
            self.register_parameter("b%d" % i, nn.Parameter(torch.tensor(b)))
            self.register_buffer("na%d" % i, torch.tensor(na))
            with torch.no_grad():
                shape = f(*self.operands(i), y).shape
            self.register_parameter("q%d" % i,
                                    nn.Parameter(torch.zeros(shape)))

    def operands(self, i):
        return (getattr(self, "a%d" % i) + getattr(self, "na%d" % i),
                getattr(self, "b%d" % i))

    def forward(self, y):
        loss = 0.0
        for i, f in enumerate(case[0] for case in CASES.values()):
            loss = loss + ((getattr(self, "q%d" % i) + 1.0) *
                           f(*self.operands(i), y)).sum()
        return loss


def main():
    model = Model()
    start = {k: v.detach().double().clone()
             for k, v in model.named_parameters()}
    labels = torch.tensor(LABELS)
    program = memopt.compile(
        model, (labels,), out_dir=sys.argv[1],
        optimizer=torch.optim.SGD(model.parameters(), lr=LR))
    program.step(labels)
    after = {k: v.double() for k, v in program.state_dict().items()}
    program.close()
    cases = list(CASES.values())

    def exact(i):
        f, a, b, na = cases[i]
        return readback.exact(lambda a, b: f(a + torch.tensor(
            na, dtype=torch.float64), b, labels), a, b)
    readback.report(list(CASES), start, after, exact)


if __name__ == "__main__":
    main()
