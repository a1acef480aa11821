"""The read-back of one SGD step that comparisons.py and integer-results.py
share: each case of their model is sum((q + 1) f(a, b)) with q = 0, so
that q's gradient is f's values and a's and b's are the gradients of
sum(f); with a learning rate that is a power of 2, p - LR g gives g back
exactly but for the rounding of p - LR g to p's f32 spacing."""

import math

import torch

LR = 1024.0
ROUNDOFF = 2.0 ** -24


def report(names, start, after, exact):
    """Prints "<name>: ok" for each case (numbered as `names`), or one
    FAILED line per element of its values or gradients that is further from
    PyTorch's float64 than 2 f32 roundoffs of its magnitude plus the
    read-back's rounding (a NaN must be a NaN). `start` and `after` hold
    the parameters before and after the step (float64 tensors by name);
    `exact(i)` gives case i's values and the gradients of their sum with
    respect to a and b, in float64."""
    for i, name in enumerate(names):
        failed = False
        for what, key, want in zip(["value", "d/da", "d/db"],
                                   ["q%d", "a%d", "b%d"], exact(i)):
            key = key % i
            ours = ((start[key] - after[key]) / LR).reshape(-1)
            reading = (ROUNDOFF * (start[key].abs() + after[key].abs()) / LR
                       ).reshape(-1)
            for j, (m, e, r) in enumerate(zip(ours.tolist(), want.tolist(),
                                              reading.tolist())):
                ok = math.isnan(m) if math.isnan(e) else \
                    abs(m - e) <= 2 * ROUNDOFF * abs(e) + r
                if not ok:
                    print("FAILED %s %s, element %d: memopt %r, PyTorch %r"
                          % (name, what, j, m, e))
                    failed = True
        if not failed:
            print("%s: ok" % name)


def exact(f, a, b):
    """f(a, b)'s values and the gradients of their sum with respect to a
    and b (zero where f does not read one), in float64, flattened."""
    args = [torch.tensor(v, dtype=torch.float64, requires_grad=True)
            for v in (a, b)]
    values = f(*args)
    grads = torch.autograd.grad(values.sum(), args, allow_unused=True)
    grads = [g if g is not None else torch.zeros_like(v)
             for g, v in zip(grads, args)]
    return [t.reshape(-1) for t in [values.detach()] + grads]
