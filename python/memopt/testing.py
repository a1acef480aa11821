"""The parity oracle: is a training run as close to exact as PyTorch's?

Two float32 programs that compute the same training step agree only up to
rounding, and how far rounding moves a trajectory depends on the model and
on the CPU: every BLAS kernel sums in its own order, and Adam turns the
rounding noise of a near-zero gradient into a step of up to lr. So no fixed
tolerance between memopt and PyTorch FP32 holds on every machine.

The oracle takes PyTorch in float64 as the truth and asks that a candidate
(memopt's run) be no further from it than a small factor of what PyTorch's
own runs at the candidate's precision cost:

    error(candidate) <= FACTOR * max(error(PyTorch), floor)

for the losses and for every tensor, where PyTorch's error is the largest
over ORDERS runs that differ only in the order of the batch's samples, and so
in rounding. A tensor's error is the 2-norm of its
difference from the float64 tensor over the whole tensor (its worst element
is where Adam amplified rounding noise, the same noise on both sides), and it
is reported relative to the size of the true update, |p64 - p0|. The losses
of the steps are compared as one vector in the same way: one step's loss
error is one sample of rounding, whose size varies tenfold from step to step
under mixed precision. The floor is FLOOR_ULPS units of f32 roundoff of the
true value's norm, so that a PyTorch run that happens to be exact does not
make the bound zero. Under mixed precision ("bf16") PyTorch's own run
is torch.autocast's (`autocast`: the CPU autocast of PyTorch 1.13 with
the CUDA policy's f32 norms, which it lacks); the values compared are f32
all the same.

Trajectories test the whole step (forward, backward, optimizer) but are
blind to a gradient scaled uniformly (Adam's update is scale-invariant), and
chaotic models (batch norm on tiny batches) amplify rounding without bound;
`Oracle.check_gradients` compares the first step's gradients instead.

    oracle = Oracle(model, batch, steps=5,
                    optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3))
    verdict = oracle.check(losses, final_state)
    print(verdict.summary())     # or verdict.failures
"""

import contextlib
import copy
import math

import numpy as np
import torch

__all__ = ["Oracle", "Run", "Verdict", "autocast", "run_pytorch", "FACTOR",
           "FLOOR_ULPS", "ORDERS", "UNIT_ROUNDOFF"]

# How much further from float64 than PyTorch a candidate may be. Measured on
# the bundled models, memopt's error is 0.5-2x PyTorch FP32's
# (docs/Reliability.md); 4 leaves room for other CPUs' kernels.
FACTOR = 4.0
# PyTorch's own error is the largest of its runs over ORDERS orders of the
# batch's samples, with the inputs rounded anew (_reordered): one order's
# rounding can be luckily small where Adam amplifies it (a near-zero
# gradient), and the amplified element then moves every tensor through the
# next forwards.
ORDERS = 8
# The floor, in units of roundoff of the true value.
FLOOR_ULPS = 4.0
# f32's: the values compared (losses, parameters, master weights, gradients)
# are f32 under mixed precision too.
UNIT_ROUNDOFF = 2.0 ** -24
# PyTorch 1.13's CPU autocast has bf16 only.
_AUTOCAST = {"bf16": torch.bfloat16}


@contextlib.contextmanager
def autocast(precision):
    """torch.autocast on the CPU to `precision` ("bf16"; None: no autocast),
    with two repairs that make PyTorch 1.13's CPU autocast the policy of its
    CUDA autocast (REFERENCE.md), which memopt's mixed precision follows:

    - layer and group norms run in f32 (inputs, affine parameters and
      result): the CPU policy leaves them out, so a bf16 input meets the
      norm's f32 weight and the call fails;
    - hardtanh (ReLU6) runs on the f32 values of its bf16 input and returns
      them in bf16, which is exact both ways: the CPU kernels have no bf16
      backward for it;
    - F.pad runs in its input's dtype (the CPU policy lists the reflection
      and replication pads as f32): on the f32 values of a bf16 input,
      returned in bf16, exact both ways, as the CPU kernels have no bf16
      reflection pad;
    - the transposed convolutions run in the compute type, as every
      convolution on CUDA (the CPU policy lists them as f32, and its bf16
      kernels fail): the input, weight and bias rounded to bf16, the
      products summed in f32 and the result rounded to bf16, which is what
      a CUDA kernel with f32 accumulation computes.
    """
    if precision is None:
        yield
        return
    functional = torch.nn.functional
    saved = {name: getattr(functional, name)
             for name in ("layer_norm", "group_norm", "hardtanh", "pad",
                          "conv_transpose1d", "conv_transpose2d")}

    def in_f32(function):
        def run(input, *args, **kwargs):
            with torch.autocast("cpu", enabled=False):
                return function(
                    input.float(),
                    *[a.float() if torch.is_tensor(a) else a for a in args],
                    **{k: v.float() if torch.is_tensor(v) else v
                       for k, v in kwargs.items()})
        return run

    def hardtanh(input, *args, **kwargs):
        if input.dtype != torch.bfloat16:
            return saved["hardtanh"](input, *args, **kwargs)
        kwargs.pop("inplace", None)  # the result is a new bf16 tensor
        return saved["hardtanh"](input.float(), *args[:2],
                                 **kwargs).to(input.dtype)

    low = _AUTOCAST[precision]

    def pad(input, *args, **kwargs):
        if input.dtype != low:
            return saved["pad"](input, *args, **kwargs)
        with torch.autocast("cpu", enabled=False):
            return saved["pad"](input.float(), *args, **kwargs).to(low)

    def in_low(function):
        def run(input, weight, bias=None, *args, **kwargs):
            def rounded(t):
                return None if t is None else t.to(low).float()
            with torch.autocast("cpu", enabled=False):
                return function(rounded(input), rounded(weight),
                                rounded(bias), *args, **kwargs).to(low)
        return run

    functional.layer_norm = in_f32(saved["layer_norm"])
    functional.group_norm = in_f32(saved["group_norm"])
    functional.hardtanh = hardtanh
    functional.pad = pad
    functional.conv_transpose1d = in_low(saved["conv_transpose1d"])
    functional.conv_transpose2d = in_low(saved["conv_transpose2d"])
    try:
        with torch.autocast("cpu", dtype=_AUTOCAST[precision]):
            yield
    finally:
        for name, function in saved.items():
            setattr(functional, name, function)


class Run:
    """One training run: the loss of every step, the first step's
    gradients and the final state (parameters and batch-norm running
    statistics), as float64 numpy arrays keyed by PyTorch's names."""

    def __init__(self, losses, gradients, state):
        self.losses = losses
        self.gradients = gradients
        self.state = state


def state_of(model):
    """The tensors memopt saves: parameters (tied ones once, under their
    first name) and batch-norm running statistics."""
    tensors = dict(model.named_parameters())
    tensors.update({k: v for k, v in model.named_buffers()
                    if k.endswith(("running_mean", "running_var"))})
    return {k: v.detach().to(torch.float64).numpy().copy()
            for k, v in tensors.items()}


def run_pytorch(model, batch, steps, optimizer, dtype=torch.float32,
                micro_batches=1, precision=None, hook=None):
    """Trains a copy of `model` for `steps` steps in `dtype` (floating
    parameters, buffers and inputs converted), optionally under
    `autocast(precision)` ("bf16"). Each step runs
    `micro_batches` forwards and backwards over equal slices of the batch,
    each loss divided by their number (PyTorch's accumulation loop), then
    `optimizer(parameters).step()`. `hook(model)`, if given, is called on
    the copy before training (the oracle rounds the parameters anew with
    it, and its own tests plant a wrong gradient)."""
    model = copy.deepcopy(model).to(dtype)
    if hook:
        hook(model)
    batch = {k: v.to(dtype) if v.is_floating_point() else v
             for k, v in batch.items()}
    size = next(iter(batch.values())).shape[0]
    if size % micro_batches:
        raise ValueError(f"batch of {size} is not divisible into "
                         f"{micro_batches} micro-batches")
    part = size // micro_batches
    opt = optimizer(model.parameters())
    losses, gradients = [], None
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        for i in range(micro_batches):
            micro = {k: v[i * part:(i + 1) * part] for k, v in batch.items()}
            with autocast(precision):
                loss = model(**micro)
            (loss.float() / micro_batches).backward()
            total += loss.item() / micro_batches
        if gradients is None:
            gradients = {k: p.grad.detach().to(torch.float64).numpy().copy()
                         for k, p in model.named_parameters()
                         if p.grad is not None}
        opt.step()
        losses.append(total)
    return Run(losses, gradients, state_of(model))


class Verdict:
    """The outcome of one comparison: every failure, and the worst ratio of
    an error to its allowance (at most 1 when it passes)."""

    def __init__(self):
        self.failures = []
        self.worst = 0.0
        self.worst_name = None
        self.losses = 0
        self.tensors = 0

    @property
    def ok(self):
        return not self.failures

    def _record(self, name, error, own, floor, scale, what):
        allowed = FACTOR * max(own, floor)
        if error == 0:
            ratio = 0.0
        elif allowed > 0 and math.isfinite(error):
            ratio = error / allowed
        else:
            ratio = math.inf
        if ratio > self.worst or self.worst_name is None:
            self.worst, self.worst_name = ratio, name
        if not ratio <= 1:
            self.failures.append(
                f"{name}: {what} {_relative(error, scale)} from float64, "
                f"PyTorch's own {_relative(own, scale)}, allowed "
                f"{_relative(allowed, scale)}")

    def summary(self):
        """One line: what was compared and how close the worst came."""
        parts = []
        if self.losses:
            parts.append(f"{self.losses} losses")
        if self.tensors:
            parts.append(f"{self.tensors} tensors")
        return (f"{' and '.join(parts)} within the oracle (worst "
                f"{self.worst:.2f} of allowed, {self.worst_name})")


def _relative(error, scale):
    if scale > 0:
        return f"{error:.3g} ({error / scale:.3g} relative)"
    return f"{error:.3g}"


def _rounded_anew(tensor, generator):
    """`tensor` (f32) rounded once more: t (1 + 2^-23 r), r standard normal,
    rounded to f32, about one unit of roundoff moved either way."""
    noise = torch.randn(tensor.shape, generator=generator,
                        dtype=torch.float64)
    return (tensor.double() * (1 + 2.0 ** -23 * noise)).float()


def _rounding_anew(order):
    """run_pytorch's hook for the order-th of PyTorch's own runs (none for
    the 0th): its parameters rounded anew (_rounded_anew).

    Permuting the batch's samples (_reordered) changes how every sum over
    samples rounds, but leaves each sample's forward values rounded as
    before, and a forward's rounding is what decides a max-pool window whose
    two largest values are within a few ulps of each other, or the side of
    a ReLU input within a few ulps of zero. There the exact gradient jumps
    (the loss is not differentiable at the tie), so any f32 program, PyTorch
    included, may route it either way, and an error that size is PyTorch's
    own. Moving every parameter and input by about an ulp changes each
    layer's output by about what its rounding does, so these runs see such
    jumps as often as another f32 program would (docs/Reliability.md,
    "Discontinuities")."""
    if order == 0:
        return None
    generator = torch.Generator().manual_seed(1000 + order)

    def hook(model):
        with torch.no_grad():
            for p in model.parameters():
                if p.dtype == torch.float32:
                    p.copy_(_rounded_anew(p, generator))
    return hook


def _reordered(batch, order, micro_batches):
    """The batch as the order-th of PyTorch's ORDERS own runs sees it (0: as
    given): its samples permuted, so that each sum over the batch rounds
    differently while the loss, a mean over samples, is the same function
    (samples move only within their micro-batch, whose statistics, batch
    norm's, they share), and its floating-point inputs rounded anew
    (_rounding_anew says why)."""
    if order == 0:
        return batch
    generator = torch.Generator().manual_seed(order)
    batch = {k: _rounded_anew(v, generator) if v.dtype == torch.float32
             else v for k, v in batch.items()}
    size = next(iter(batch.values())).shape[0]
    part = size // micro_batches
    generator = torch.Generator().manual_seed(order)

    def within(start):
        if order == 1:
            return torch.arange(start + part - 1, start - 1, -1)
        return start + torch.randperm(part, generator=generator)
    index = torch.cat([within(start) for start in range(0, size, part)])
    return {k: v[index] for k, v in batch.items()}


def _norm(array):
    return float(np.linalg.norm(np.asarray(array, dtype=np.float64).ravel()))


class Oracle:
    """PyTorch's float64 run of a model (the truth) and its run at the
    precision under test ("f32", or "bf16" under torch.autocast);
    `check` and `check_gradients` measure a candidate against them."""

    def __init__(self, model, batch, steps, optimizer, micro_batches=1,
                 precision="f32"):
        if precision not in ("f32", *_AUTOCAST):
            raise ValueError(f"unknown precision {precision!r}")
        self.initial = state_of(model)
        self.exact = run_pytorch(model, batch, steps, optimizer,
                                 torch.float64, micro_batches)
        # How far PyTorch's own runs are from float64, per quantity: the
        # largest distance over the runs (kept instead of the runs, so that
        # a large model needs the memory of one run).
        self.own_distance = {}
        low = None if precision == "f32" else precision
        for order in range(ORDERS):
            self.add_run(run_pytorch(
                model, _reordered(batch, order, micro_batches), steps,
                optimizer, torch.float32, micro_batches, low,
                hook=_rounding_anew(order)))
        self.steps = steps

    def add_run(self, run):
        """Counts `run` (run_pytorch's result) as one more of PyTorch's own
        runs at the precision under test."""
        distances = [("losses", run.losses, self.exact.losses)]
        distances += [(name, run.state[name], exact)
                      for name, exact in self.exact.state.items()]
        distances += [("d/d" + name, run.gradients[name], exact)
                      for name, exact in self.exact.gradients.items()]
        for key, got, exact in distances:
            distance = _norm(np.asarray(got) - np.asarray(exact))
            self.own_distance[key] = max(self.own_distance.get(key, 0.0),
                                         distance)

    @staticmethod
    def _floor(value):
        return FLOOR_ULPS * UNIT_ROUNDOFF * value

    def check(self, losses, state=None):
        """The candidate's losses (one per step) and final state (name ->
        array; None to compare the losses only) against the float64 run."""
        verdict = Verdict()
        if len(losses) != self.steps:
            verdict.failures.append(f"{len(losses)} losses for "
                                    f"{self.steps} steps")
        if len(losses) == self.steps:
            exact = np.array(self.exact.losses)
            verdict._record("losses", _norm(np.array(losses) - exact),
                            self.own_distance["losses"],
                            self._floor(_norm(exact)), 0.0,
                            f"{list(losses)!r} are")
            verdict.losses = self.steps
        for name, exact in self.exact.state.items() if state is not None else ():
            if name not in state:
                verdict.failures.append(f"{name}: missing")
                continue
            got = np.asarray(state[name], dtype=np.float64)
            if got.shape != exact.shape:
                verdict.failures.append(f"{name}: shape {got.shape}, "
                                        f"expected {exact.shape}")
                continue
            update = _norm(exact - self.initial[name])
            verdict._record(name, _norm(got - exact),
                            self.own_distance[name],
                            self._floor(_norm(exact)), update, "is")
            verdict.tensors += 1
        return verdict

    def check_gradients(self, gradients, rounding=None):
        """The candidate's first-step gradients (name -> array) against
        float64's. `rounding` (name -> number) adds to a tensor's floor what
        reading the gradient back costs (e.g. the rounding of p - lr g)."""
        verdict = Verdict()
        rounding = rounding or {}
        for name, exact in self.exact.gradients.items():
            if name not in gradients:
                verdict.failures.append(f"{name}: no gradient")
                continue
            got = np.asarray(gradients[name], dtype=np.float64)
            size = _norm(exact)
            verdict._record(f"d/d{name}", _norm(got - exact),
                            self.own_distance["d/d" + name],
                            self._floor(size) + rounding.get(name, 0.0),
                            size, "is")
            verdict.tensors += 1
        return verdict
