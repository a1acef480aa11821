# Comparisons computed in the step, and the NaN-aware ops written with them,
# at the inputs that need care: NaN in either or both operands of fmax and
# fmin, ties (the gradient goes to the first operand, as PyTorch's), +inf and
# -inf in nan_to_num (its defaults and given values), a row of NaNs in
# nansum, masks from a parameter (x > y), from integer labels
# (labels != -100) and from isnan / isinf / isfinite combined by the logical
# ops, and a mask promoted to 1 and 0 in arithmetic.
#
# One model holds every case; the NaNs and infinities come from buffers
# added to the parameters, so that every parameter and its gradient is
# finite. One SGD step reads back each value and gradient: the loss is
# sum((q + 1) f(a, b)) with q = 0, so q's gradient is f(a, b) and a's and
# b's are the gradients of sum(f(a, b)). Every case is exact in float32 but
# nanmean's division (one rounding), so each is compared with PyTorch's
# float64 within 2 f32 roundoffs of its magnitude plus the read-back's
# rounding; a NaN must be a NaN.
#
# memopt.compile loads the step into this process, which an instrumented
# (sanitized) build's library cannot join, as python-api.py.
#
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
#
# CHECK-NOT: FAILED
# CHECK: fmax: ok
# CHECK: fmin: ok
# CHECK: nan-to-num: ok
# CHECK: nan-to-num-defaults: ok
# CHECK: nansum: ok
# CHECK: nanmean: ok
# CHECK: greater: ok
# CHECK: labels: ok
# CHECK: logical: ok
# CHECK: isfinite: ok

import os
import sys

import torch
import torch.nn as nn

import memopt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import readback  # noqa: E402
from readback import LR  # noqa: E402

NAN, INF = float("nan"), float("inf")
LABELS = torch.tensor([0, -100, 2, -100, 1])

CASES = {
    # name: f(a, b), a, b, what is added to a, what is added to b
    "fmax": (torch.fmax, [1.0, 2.0, 3.0, -1.0, 0.5, 4.0],
             [2.0, 1.0, 3.0, 5.0, -0.5, 1.0],
             [0.0, 0.0, 0.0, NAN, 0.0, NAN], [0.0, 0.0, 0.0, 0.0, NAN, NAN]),
    "fmin": (torch.fmin, [1.0, 2.0, 3.0, -1.0, 0.5, 4.0],
             [2.0, 1.0, 3.0, 5.0, -0.5, 1.0],
             [0.0, 0.0, 0.0, NAN, 0.0, NAN], [0.0, 0.0, 0.0, 0.0, NAN, NAN]),
    "nan-to-num": (lambda a, b: torch.nan_to_num(a, nan=0.5, posinf=7.0,
                                                 neginf=-3.0) * b,
                   [1.0, 2.0, -3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0],
                   [0.0, NAN, INF, -INF, 0.0], [0.0] * 5),
    # The defaults (0 and the largest and lowest f32: PyTorch's float64
    # computes them in f32 too), scaled by 2^-100 so that the read-back of
    # the value stays finite.
    "nan-to-num-defaults": (lambda a, b: torch.nan_to_num(
        a.float()).type_as(b) * 2.0 ** -100,
                            [1.0, 2.0, -3.0, 4.0], [0.0],
                            [0.0, NAN, INF, -INF], [0.0]),
    "nansum": (lambda a, b: torch.nansum(a, dim=1),
               [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], [0.0],
               [[0.0, NAN, 0.0], [NAN, NAN, NAN], [0.0, 0.0, 0.0]], [0.0]),
    "nanmean": (lambda a, b: torch.nanmean(a, dim=1),
                [[1.0, 2.0, 3.0], [4.0, 5.0, 6.5], [7.0, 8.0, 9.0]], [0.0],
                [[0.0, NAN, 0.0], [NAN, 0.0, NAN], [0.0, 0.0, 0.0]], [0.0]),
    "greater": (lambda a, b: torch.where(a > b, a * 2.0, b) +
                (a >= 0).float() * b - b.lt(a) * a,
                [1.0, -2.0, 3.0, 0.0, 5.0], [0.5, -1.0, 3.0, 2.0, -4.0],
                [0.0] * 5, [0.0] * 5),
    "labels": (lambda a, b: a * (LABELS != -100) + b * LABELS.eq(2),
               [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0],
               [0.0] * 5, [0.0] * 5),
    "logical": (lambda a, b: torch.where(
        torch.logical_xor(a > 0, b > 0) | torch.isnan(a) |
        (torch.isinf(b) & ~(b > 0)), torch.nan_to_num(a, nan=1.0),
        torch.nan_to_num(b, neginf=-2.0, posinf=2.0)),
        [1.0, -1.0, 2.0, 3.0, -4.0, 5.0], [1.0, 1.0, -2.0, 0.0, 4.0, 6.0],
        [0.0, 0.0, 0.0, NAN, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, -INF, INF]),
    "isfinite": (lambda a, b: torch.where(torch.isfinite(a), a, b) +
                 torch.isposinf(a) * b - torch.isneginf(a) * b,
                 [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0],
                 [0.0, INF, -INF, NAN], [0.0] * 4),
}


class Model(nn.Module):
    """Parameters a, b and q and buffers na, nb for each case."""

    def __init__(self):
        super().__init__()
        for i, (f, a, b, na, nb) in enumerate(CASES.values()):
            self.register_parameter("a%d" % i, nn.Parameter(torch.tensor(a)))
            self.register_parameter("b%d" % i, nn.Parameter(torch.tensor(b)))
            self.register_buffer("na%d" % i, torch.tensor(na))
            self.register_buffer("nb%d" % i, torch.tensor(nb))
            with torch.no_grad():
                shape = f(*self.operands(i)).shape
            self.register_parameter("q%d" % i,
                                    nn.Parameter(torch.zeros(shape)))

    def operands(self, i):
        return (getattr(self, "a%d" % i) + getattr(self, "na%d" % i),
                getattr(self, "b%d" % i) + getattr(self, "nb%d" % i))

    def forward(self):
        loss = 0.0
        for i, f in enumerate(case[0] for case in CASES.values()):
            loss = loss + ((getattr(self, "q%d" % i) + 1.0) *
                           f(*self.operands(i))).sum()
        return loss


def main():
    model = Model()
    start = {k: v.detach().double().clone()
             for k, v in model.named_parameters()}
    program = memopt.compile(
        model, (), out_dir=sys.argv[1],
        optimizer=torch.optim.SGD(model.parameters(), lr=LR))
    program.step()
    after = {k: v.double() for k, v in program.state_dict().items()}
    program.close()
    cases = list(CASES.values())

    def exact(i):
        f, a, b, na, nb = cases[i]
        return readback.exact(lambda a, b: f(
            a + torch.tensor(na, dtype=torch.float64),
            b + torch.tensor(nb, dtype=torch.float64)), a, b)
    readback.report(list(CASES), start, after, exact)


if __name__ == "__main__":
    main()
