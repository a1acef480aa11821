# Functions memopt writes with other ops, at the inputs where those formulas
# need care: atan2 on the axes, at the origin, at signed zeros and where
# |x| = |y|; copysign onto -0 and +0; xlogy at x = 0; asinh, acosh and atanh
# near 0, 1 and far out; cumprod through zeros; norms of zero vectors and
# max-norms with ties, F.normalize of a zero row, renorm on both sides of
# maxnorm, cdist between equal rows; sorting networks padded to a power of
# two. One SGD step reads back each value and gradient: the loss is
# sum((q + 1) f(a, b)) with q = 0, so q's gradient is f(a, b) and a's and
# b's are the gradients of sum(f(a, b)).
# Each is compared with PyTorch's float64 (C's libm) within 4 times PyTorch
# float32's own error plus 16 units of f32 roundoff of its magnitude (a few
# roundings of the composition, each amplified at most by the derivative of
# atan or log1p, which is at most 1).
# The signs of zeros show where they matter: atan2(+-0, -1) is +-pi.
#
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
#
# CHECK-NOT: FAILED
# CHECK: atan2: ok
# CHECK: copysign: ok
# CHECK: xlogy: ok
# CHECK: kl-div: ok
# CHECK: asinh: ok
# CHECK: acosh: ok
# CHECK: atanh: ok
# CHECK: cumprod: ok
# CHECK: norm-2: ok
# CHECK: norm-3: ok
# CHECK: norm-inf: ok
# CHECK: norm-1: ok
# CHECK: matrix-norm-1: ok
# CHECK: matrix-norm-inf: ok
# CHECK: normalize: ok
# CHECK: renorm: ok
# CHECK: cdist: ok
# CHECK: sort: ok
# CHECK: topk: ok
# CHECK: quantile: ok
# CHECK: cummax: ok
# CHECK: soft-cross-entropy: ok
# CHECK: softplus: ok
# CHECK: prod: ok

import math
import os
import sys

import torch
import torch.nn as nn

import memopt

LR = 1024.0  # a power of 2: the step p - LR g reads g back exactly
ROUNDOFF = 2.0 ** -24
ZERO = float("-0")

CASES = {
    # f(a, b), a, b
    "atan2": (torch.atan2,
              [0.0, ZERO, 0.0, ZERO, 1.0, -1.0, 1.0, -1.0, 3.0, -3.0, 3.0,
               -3.0, 1e-30, 1.0, 0.5, -2.0, 7.0, 0.0],
              [1.0, 1.0, -1.0, -1.0, 0.0, 0.0, ZERO, ZERO, 3.0, 3.0, -3.0,
               -3.0, 1.0, 1e-30, -0.25, 0.125, -1e-3, 0.0]),
    "copysign": (torch.copysign,
                 [1.5, 1.5, -2.0, -2.0, 0.0, 3.0, -0.5],
                 [0.0, ZERO, 0.0, ZERO, -1.0, -1e-30, 7.0]),
    "xlogy": (torch.xlogy,
              [0.0, 0.0, ZERO, 2.0, -1.5, 1e-3],
              [0.0, 2.0, 0.5, 3.0, 1e-20, 1e30]),
}
UNARY = {
    "asinh": (torch.asinh, [0.0, ZERO, 1e-6, -1e-6, 0.5, -3.0, 1e4, -1e8]),
    "acosh": (torch.acosh, [1.0 + 2 ** -20, 1.5, 5.0, 1e4, 1e8]),
    "atanh": (torch.atanh, [0.0, ZERO, 1e-7, -0.5, 0.99, -0.999]),
    "cumprod": (lambda v: torch.cumprod(v, 0),
                [2.0, 0.0, 3.0, -1.5, 0.0, 4.0, 0.5]),
}
ROWS = [[0.0, 0.0, 0.0], [3.0, -4.0, 0.0], [2.0, -2.0, 1.0],
        [1e-3, 0.0, -5.0]]
UNARY.update({
    "norm-2": (lambda v: torch.linalg.vector_norm(v, 2, dim=1), ROWS),
    "norm-3": (lambda v: torch.linalg.vector_norm(v, 3, dim=1), ROWS),
    "norm-inf": (lambda v: torch.linalg.vector_norm(v, float("inf"), dim=1),
                 ROWS),
    "norm-1": (lambda v: torch.norm(v, 1, dim=1), ROWS),
    "matrix-norm-1": (lambda v: torch.linalg.matrix_norm(v, 1).reshape(1),
                      [[1.0, -2.0], [3.0, 0.0], [-1.0, 2.0]]),
    "matrix-norm-inf": (lambda v: torch.linalg.norm(
        v, float("inf")).reshape(1), [[1.0, -2.0], [3.0, 0.0], [-2.0, 1.0]]),
    "normalize": (lambda v: torch.nn.functional.normalize(v, dim=1), ROWS),
    # Rows of norm 0, 5, 3 and 4.15 against maxnorm 4 (a row dominated by
    # one element would cancel 0.8 - 0.8 in its gradient, which PyTorch
    # sums in double).
    "renorm": (lambda v: torch.renorm(v, 2, 0, 4.0),
               ROWS[:3] + [[1.0, 2.0, -3.5]]),
    "cdist": (lambda v: torch.cdist(v, v[1:]), ROWS),
    # Weights on the sorted positions make each gradient name the position
    # its element landed in; 5 and 7 elements pad the network to 8.
    "sort": (lambda v: torch.sort(v, dim=1, descending=True)[0] *
             torch.arange(1.0, 6.0), [[3.0, -1.0, 2.0, 7.0, 0.5],
                                      [-2.0, -8.0, 4.0, 1.0, 9.0]]),
    "topk": (lambda v: torch.topk(v, 3, largest=False).values *
             torch.tensor([1.0, 10.0, 100.0]),
             [5.0, -3.0, 2.5, 8.0, -7.0, 0.0, 1.0]),
    "quantile": (lambda v: torch.quantile(
        v, torch.tensor([0.1, 0.5, 0.9], dtype=v.dtype), dim=0),
                 [[1.0, 4.0], [-2.0, 0.0], [7.0, 3.0], [0.5, -1.0]]),
    "cummax": (lambda v: torch.cummax(v, 0)[0] * torch.arange(1.0, 8.0),
               [1.0, -2.0, 3.0, 2.0, 5.0, 4.0, 6.0]),
    # Class probabilities as the target, with class weights and smoothing.
    "soft-cross-entropy": (lambda v: torch.nn.functional.cross_entropy(
        v, torch.tensor([[0.7, 0.2, 0.1], [0.0, 0.5, 0.5]], dtype=v.dtype),
        weight=torch.tensor([1.0, 2.0, 0.5], dtype=v.dtype),
        label_smoothing=0.1, reduction="none"),
        [[2.0, -1.0, 0.5], [0.0, 3.0, -2.0]]),
    "softplus": (lambda v: torch.nn.functional.softplus(v, 2.0, 3.0),
                 [-2.0, 0.0, 1.0, 1.5, 1.5000001, 4.0]),
    # One zero and two zeros in a row (5 elements pad the tree to 8).
    "prod": (lambda v: torch.prod(v, 1),
             [[2.0, 0.0, 3.0, -1.5, 4.0], [0.5, 0.0, 3.0, 0.0, 2.0],
              [1.5, -2.0, 0.25, 3.0, 1.0]]),
})
CASES.update({
    # A zero target contributes 0, and its input no gradient.
    "kl-div": (lambda x, t: torch.nn.functional.kl_div(
        x, t, reduction="none"),
        [-1.0, -0.5, -2.0, -0.1], [0.0, 0.25, 0.5, 0.25]),
})


class Model(nn.Module):
    def __init__(self, f, *columns):
        super().__init__()
        self.f = f
        self.a = nn.Parameter(torch.tensor(columns[0]))
        if len(columns) > 1:
            self.b = nn.Parameter(torch.tensor(columns[1]))
        with torch.no_grad():
            shape = f(*self.operands()).shape
        self.q = nn.Parameter(torch.zeros(shape))

    def operands(self):
        return (self.a, self.b) if hasattr(self, "b") else (self.a,)

    def forward(self):
        return ((self.q + 1.0) * self.f(*self.operands())).sum()


def evaluated(f, columns, dtype):
    """f's values and the gradients of their sum in ``dtype``, per element,
    at the f32 inputs memopt reads."""
    args = [torch.tensor(c).to(dtype).requires_grad_() for c in columns]
    values = f(*args)
    grads = torch.autograd.grad(values.sum(), args)
    return [t.double().reshape(-1) for t in [values.detach()] + list(grads)]


def close(ours, exact, pytorch32, reading):
    """Within 4 times PyTorch float32's own error (cancellation in a
    gradient costs both alike) plus 16 f32 roundoffs of the true magnitude
    and the read-back's rounding; anything where PyTorch's is NaN (the
    gradient at atan2's origin)."""
    if math.isnan(exact):
        return True
    own = abs(pytorch32 - exact) if math.isfinite(pytorch32) else 0.0
    return abs(ours - exact) <= 4 * own + 16 * ROUNDOFF * abs(exact) + \
        reading


def check(name, f, columns, out_dir):
    model = Model(f, *columns)
    start = {k: v.detach().double().clone() for k, v in
             model.named_parameters()}
    program = memopt.compile(
        model, (), out_dir=os.path.join(out_dir, name),
        optimizer=torch.optim.SGD(model.parameters(), lr=LR))
    program.step()
    after = {k: v.double() for k, v in program.state_dict().items()}
    program.close()
    # q's gradient is f; a's and b's are f's partial derivatives.
    names = ["q", "a", "b"][:len(columns) + 1]
    ours = [((start[k] - after[k]) / LR).reshape(-1) for k in names]
    # Reading g back from p - LR g rounds to p's f32 spacing.
    reading = [(ROUNDOFF * (start[k].abs() + after[k].abs()) / LR
                ).reshape(-1) for k in names]
    failed = False
    for what, mine, exact, single, slack in zip(
            ["value", "d/da", "d/db"], ours,
            evaluated(f, columns, torch.float64),
            evaluated(f, columns, torch.float32), reading):
        for i, (m, e, t, r) in enumerate(zip(
                mine.tolist(), exact.tolist(), single.tolist(),
                slack.tolist())):
            if not close(m, e, t, r):
                print("FAILED %s %s, element %d: memopt %r, PyTorch %r"
                      % (name, what, i, m, e))
                failed = True
    if not failed:
        print("%s: ok" % name)


def main():
    out_dir = sys.argv[1]
    for name, (f, a, b) in CASES.items():
        check(name, f, [a, b], out_dir)
    for name, (f, a) in UNARY.items():
        check(name, f, [a], out_dir)


if __name__ == "__main__":
    main()
