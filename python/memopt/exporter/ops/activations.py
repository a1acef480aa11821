"""Activations and elementwise functions: relu, gelu, silu, tanh, sigmoid,
exp, log, sqrt, rsqrt, neg, abs, sign, sin, cos, tan, asin, acos, atan,
erf, expm1, log1p, floor, ceil, round, trunc, sinc, square, hardswish,
hardsigmoid, mish, softplus, and those written with them (logsigmoid,
softsign, tanhshrink, leaky_relu, prelu, glu, elu, selu, celu, softshrink,
sinh, cosh, log2, log10, reciprocal, logit, frac, round with decimals);
and the clamps (torch.clamp, hardtanh, relu6)."""

import math
import operator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..dtypes import dtype_name
from ..emit import FLOAT_TYPES, INDEX_TYPES
from ..registry import handles, register
from .common import float_input, full, norm_dim, select, step, unit_sign

_UNARY = ("relu", "silu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt",
          "neg", "abs", "sign", "sin", "cos", "tan", "asin", "acos", "atan",
          "erf", "expm1", "log1p", "floor", "ceil", "trunc", "sinc")


def _unary(kind):
    def handler(ex, call):
        return ex.emit.unary(kind, float_input(ex, call.args["input"]))
    return handler


for _kind in _UNARY:
    _handler = _unary(_kind)
    if hasattr(torch, _kind):
        register("input, **", _handler, functions=[getattr(torch, _kind)])
    register("input", _handler, methods=[_kind])
register("input, inplace=False", _unary("relu"), functions=[F.relu])
register("input, inplace=False", _unary("silu"), functions=[F.silu])
register("input", _unary("neg"), functions=[operator.neg])
register("input", _unary("abs"), functions=[operator.abs])
# NumPy's spellings, and fix (trunc's other name).
for _kind, _alias in (("asin", "arcsin"), ("acos", "arccos"),
                      ("atan", "arctan"), ("trunc", "fix"), ("sign", "sgn")):
    register("input, **", _unary(_kind), functions=[getattr(torch, _alias)],
             methods=[_alias])
for _kind in ("erf", "expm1", "log1p", "sinc"):
    register("input, **", _unary(_kind),
             functions=[getattr(torch.special, _kind)])
for _kind, _module in (("relu", nn.ReLU), ("silu", nn.SiLU),
                       ("tanh", nn.Tanh), ("sigmoid", nn.Sigmoid)):
    register("input", _unary(_kind), modules=[_module])
for _kind, _function, _module in (
        ("hardswish", F.hardswish, nn.Hardswish),
        ("hardsigmoid", F.hardsigmoid, nn.Hardsigmoid),
        ("mish", F.mish, nn.Mish)):
    register("input, inplace=False", _unary(_kind), functions=[_function])
    register("input", _unary(_kind), modules=[_module])


@handles("input, approximate='none'", functions=[F.gelu])
@handles("input", modules=[nn.GELU])
def _gelu(ex, call):
    approximate = call.args.get("approximate")
    if call.module is not None:
        approximate = getattr(call.module, "approximate", "none")
    if approximate not in ("none", "tanh"):
        ex.fail("unknown approximation '%s'" % approximate)
    return ex.emit.gelu(float_input(ex, call.args["input"]), approximate)


def _clamp_bound(ex, arg, name):
    """The bound ``arg`` of a clamp as a float, None if absent: a Python
    number."""
    if arg is None:
        return None
    value = None if ex.is_symbolic(arg) else ex.concrete(arg)
    if not isinstance(value, (bool, int, float)):
        ex.fail("the bound '%s' must be a Python number or a tensor" % name)
    if math.isnan(value):
        ex.fail("the bound '%s' is NaN" % name)
    return float(value)


def _emit_clamp(ex, call, low, high, inclusive):
    if low is not None and high is not None and low > high:
        ex.fail("min %r is above max %r" % (low, high))
    dtype = dtype_name(call.out.dtype, "the result")
    x = ex.val(call.args["input"], dtype) if dtype in FLOAT_TYPES else \
        float_input(ex, call.args["input"])
    return ex.emit.clamp(x, low, high, inclusive)


def _clamp_indices(ex, call, low, high):
    """An integer tensor clamped to integer bounds (labels made valid:
    ``y.clamp(min=0)``): exact selections, max winning over min as in
    PyTorch."""
    y = ex.val(call.args["input"])
    for bound, predicate in ((low, "lt"), (high, "gt")):
        if bound is None:
            continue
        if bound != int(bound):
            ex.fail("the bounds of a clamp of an integer tensor must be "
                    "integers, got %r" % bound)
        c = full(ex, y.shape, int(bound), y.dtype)
        y = ex.emit.where(ex.emit.compare(predicate, y, c), c, y)
    return y


def _is_tensor(ex, arg):
    return arg is not None and (ex.is_symbolic(arg) or isinstance(
        ex.concrete(arg), torch.Tensor))


def _clamp_to_tensors(ex, call):
    """min(max(x, low), high) with a bound that is a tensor, broadcast
    together as PyTorch does; a number bound is a one-sided clamp. Where x
    ties with a tensor bound the gradient is split evenly between them
    (torch.maximum's rule; torch.clamp gives it all to x)."""
    shape = ex.out_shape(call)
    dtype = dtype_name(call.out.dtype, "the result")
    if dtype not in FLOAT_TYPES:
        ex.fail("%s tensors are not supported" % dtype)
    y = ex.emit.broadcast_to(ex.val(call.args["input"], dtype), shape)
    for name in ("min", "max"):
        bound = call.args.get(name)
        if bound is None:
            continue
        if not _is_tensor(ex, bound):
            number = _clamp_bound(ex, bound, name)
            y = ex.emit.clamp(y, number if name == "min" else None,
                              number if name == "max" else None, True)
            continue
        b = ex.emit.broadcast_to(ex.val(bound, dtype), shape)
        if name == "min":
            y = ex.emit.binary("maximum", y, b)
        else:
            y = ex.emit.unary("neg", ex.emit.binary(
                "maximum", ex.emit.unary("neg", y), ex.emit.unary("neg", b)))
    return y


def _clamp(ex, call):
    """torch.clamp, torch.clip, clamp_min, clamp_max (function and method
    forms): the gradient passes at the bounds."""
    if _is_tensor(ex, call.args.get("min")) or \
            _is_tensor(ex, call.args.get("max")):
        return _clamp_to_tensors(ex, call)
    low = _clamp_bound(ex, call.args.get("min"), "min")
    high = _clamp_bound(ex, call.args.get("max"), "max")
    if low is None and high is None:
        ex.fail("at least one of 'min' and 'max' must be given")
    if dtype_name(call.out.dtype, "the result") in INDEX_TYPES:
        return _clamp_indices(ex, call, low, high)
    return _emit_clamp(ex, call, low, high, inclusive=True)


for _name, _signature in (("clamp", "input, min=None, max=None"),
                          ("clip", "input, min=None, max=None"),
                          ("clamp_min", "input, min"),
                          ("clamp_max", "input, max")):
    register(_signature, _clamp, functions=[getattr(torch, _name)],
             methods=[_name])


@handles("input, min_val=-1.0, max_val=1.0, inplace=False",
         functions=[F.hardtanh])
@handles("input, inplace=False", functions=[F.relu6])
@handles("input", modules=[nn.Hardtanh, nn.ReLU6])
def _hardtanh(ex, call):
    """nn.Hardtanh, F.hardtanh, nn.ReLU6 and F.relu6: a clamp whose
    gradient stops at the bounds themselves (PyTorch's hardtanh_backward)."""
    if call.module is not None:
        low, high = call.module.min_val, call.module.max_val
    else:
        low = call.args.get("min_val", 0.0)
        high = call.args.get("max_val", 6.0)
    return _emit_clamp(ex, call, _clamp_bound(ex, low, "min_val"),
                       _clamp_bound(ex, high, "max_val"), inclusive=False)


@handles("input, *, decimals=0", functions=[torch.round], methods=["round"])
def _round(ex, call):
    """To the nearest integer, halves to even; with `decimals` d, as
    PyTorch computes it: round(x * 10^d) / 10^d, or round(x / 10^-d) *
    10^-d for d < 0, each in the input's type. The gradient is zero."""
    x = float_input(ex, call.args["input"])
    decimals = ex.const(call.args.get("decimals", 0), "decimals")
    if not isinstance(decimals, int):
        ex.fail("decimals=%r must be an integer" % (decimals,))
    if decimals == 0:
        return ex.emit.unary("round", x)
    factor = ex.emit.constant(
        np.full(x.shape, 10.0 ** abs(decimals), np.float32), x.dtype)
    inward, outward = ("mul", "div") if decimals > 0 else ("div", "mul")
    rounded = ex.emit.unary("round", ex.emit.binary(inward, x, factor))
    return ex.emit.binary(outward, rounded, factor)


def _erfc(ex, x):
    """1 - erf(x): exact to f32's absolute rounding (a value far in the
    upper tail rounds to 0)."""
    return ex.emit.scalar("add_scalar", ex.emit.unary(
        "neg", ex.emit.unary("erf", x)), 1.0)


@handles("input", functions=[torch.erfc, torch.special.erfc],
         methods=["erfc"])
def _erfc_handler(ex, call):
    return _erfc(ex, float_input(ex, call.args["input"]))


@handles("input", functions=[torch.special.ndtr])
def _ndtr(ex, call):
    """The standard normal CDF, erfc(-x / sqrt 2) / 2, as PyTorch's."""
    x = float_input(ex, call.args["input"])
    return ex.emit.scalar("mul_scalar", _erfc(ex, ex.emit.scalar(
        "mul_scalar", x, -math.sqrt(0.5))), 0.5)


@handles("input, lambd=0.5", functions=[F.hardshrink])
@handles("input", modules=[nn.Hardshrink])
def _hardshrink(ex, call):
    """x where |x| > lambda, 0 elsewhere: x times a 0/1 step, exact, with
    the gradient passing where it is 1."""
    lambd = call.module.lambd if call.module is not None else \
        ex.const(call.args["lambd"], "lambd")
    x = float_input(ex, call.args["input"])
    return ex.emit.binary("mul", x, step(ex, ex.emit.unary("abs", x), lambd))


@handles("input, threshold, value, inplace=False", functions=[F.threshold])
@handles("input", modules=[nn.Threshold])
def _threshold(ex, call):
    """x where x > threshold, value elsewhere: x s + value (1 - s) for the
    0/1 step s, exact; the gradient passes where x is kept."""
    if call.module is not None:
        threshold, value = call.module.threshold, call.module.value
    else:
        threshold = ex.const(call.args["threshold"], "threshold")
        value = ex.const(call.args["value"], "value")
    x = float_input(ex, call.args["input"])
    kept = step(ex, x, threshold)
    y = ex.emit.binary("mul", x, kept)
    if value == 0:
        return y
    dropped = ex.emit.scalar("add_scalar", ex.emit.unary("neg", kept), 1.0)
    return ex.emit.binary("add", y, ex.emit.scalar("mul_scalar", dropped,
                                                   value))


@handles("input", functions=[torch.frac], methods=["frac"])
def _frac(ex, call):
    """x - trunc(x), with x's sign; its gradient is 1, as PyTorch's."""
    x = float_input(ex, call.args["input"])
    return ex.emit.binary("sub", x, ex.emit.unary("trunc", x))


@handles("input, **", functions=[torch.square], methods=["square"])
def _square(ex, call):
    x = float_input(ex, call.args["input"])
    return ex.emit.binary("mul", x, x)


def _module_or_args(ex, call, names):
    """The hyperparameters ``names`` of an activation: the module's
    attributes, or the function's arguments (known at export time)."""
    if call.module is not None:
        return [getattr(call.module, name) for name in names]
    return [ex.const(call.args[name], name) for name in names]


@handles("input, beta=1, threshold=20", functions=[F.softplus])
@handles("input", modules=[nn.Softplus])
def _softplus(ex, call):
    """softplus(beta x) / beta, x itself where beta x > threshold: the op
    is threshold 20's; another beta scales around it, and a lower threshold
    selects x by an exact step on beta x. Between 20 and 80, f32's
    log1p(exp(t)) is t itself, so those thresholds are 20's."""
    beta, threshold = _module_or_args(ex, call, ("beta", "threshold"))
    if not threshold <= 80:
        ex.fail("threshold=%r is not supported (at most 80, where exp "
                "still fits f32)" % threshold)
    if not beta > 0:
        ex.fail("beta=%r is not supported (it must be positive)" % beta)
    x = float_input(ex, call.args["input"])
    scaled = x if beta == 1 else ex.emit.scalar("mul_scalar", x, beta)
    y = ex.emit.unary("softplus", scaled)
    if beta != 1:
        y = ex.emit.scalar("mul_scalar", y, 1.0 / beta)
    if threshold < 20:
        y = select(ex, y, x, step(ex, scaled, threshold))
    return y


@handles("input", functions=[F.logsigmoid], modules=[nn.LogSigmoid])
def _logsigmoid(ex, call):
    """log sigmoid(x) = -softplus(-x)."""
    x = float_input(ex, call.args["input"])
    return ex.emit.unary("neg", ex.emit.unary(
        "softplus", ex.emit.unary("neg", x)))


@handles("input", functions=[F.softsign], modules=[nn.Softsign])
def _softsign(ex, call):
    """x / (1 + |x|)."""
    x = float_input(ex, call.args["input"])
    return ex.emit.binary("div", x, ex.emit.scalar(
        "add_scalar", ex.emit.unary("abs", x), 1.0))


@handles("input", functions=[F.tanhshrink], modules=[nn.Tanhshrink])
def _tanhshrink(ex, call):
    """x - tanh(x)."""
    x = float_input(ex, call.args["input"])
    return ex.emit.binary("sub", x, ex.emit.unary("tanh", x))


@handles("input, negative_slope=0.01, inplace=False",
         functions=[F.leaky_relu])
@handles("input", modules=[nn.LeakyReLU])
def _leaky_relu(ex, call):
    """relu(x) - a relu(-x): x above 0 and a x below, each rounded as
    PyTorch rounds it. At exactly 0 the gradient is 0 (PyTorch's is a)."""
    (slope,) = _module_or_args(ex, call, ("negative_slope",))
    x = float_input(ex, call.args["input"])
    negative = ex.emit.unary("relu", ex.emit.unary("neg", x))
    return ex.emit.binary("sub", ex.emit.unary("relu", x),
                          ex.emit.scalar("mul_scalar", negative, slope))


def _elu_values(ex, x, alpha, scale=1.0, inner=1.0):
    """scale (relu(x) + alpha expm1(-relu(-x) / inner)): x above 0 and
    alpha (e^(x / inner) - 1) below, both times scale (ELU: inner 1; CELU:
    inner alpha; SELU: its constants)."""
    negative = ex.emit.unary("relu", ex.emit.unary("neg", x))
    below = ex.emit.scalar("mul_scalar", ex.emit.unary(
        "expm1", ex.emit.scalar("mul_scalar", negative, -1.0 / inner)), alpha)
    y = ex.emit.binary("add", ex.emit.unary("relu", x), below)
    return y if scale == 1.0 else ex.emit.scalar("mul_scalar", y, scale)


@handles("input, alpha=1.0, inplace=False", functions=[F.elu])
@handles("input", modules=[nn.ELU])
def _elu(ex, call):
    (alpha,) = _module_or_args(ex, call, ("alpha",))
    return _elu_values(ex, float_input(ex, call.args["input"]), alpha)


@handles("input, alpha=1.0, inplace=False", functions=[F.celu])
@handles("input", modules=[nn.CELU])
def _celu(ex, call):
    (alpha,) = _module_or_args(ex, call, ("alpha",))
    if alpha == 0:
        ex.fail("alpha=0 is not supported (CELU divides by it)")
    return _elu_values(ex, float_input(ex, call.args["input"]), alpha,
                       inner=alpha)


# SELU's constants (Klambauer et al. 2017), as torch.nn.SELU.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@handles("input, inplace=False", functions=[F.selu])
@handles("input", modules=[nn.SELU])
def _selu(ex, call):
    return _elu_values(ex, float_input(ex, call.args["input"]), _SELU_ALPHA,
                       scale=_SELU_SCALE)


def _hyperbolic(exp, combine):
    """(f(x) combine f(-x)) / 2: sinh with f = expm1 and sub (no
    cancellation near 0), cosh with f = exp and add."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        up = ex.emit.unary(exp, x)
        down = ex.emit.unary(exp, ex.emit.unary("neg", x))
        return ex.emit.scalar("mul_scalar",
                              ex.emit.binary(combine, up, down), 0.5)
    return handler


register("input", _hyperbolic("expm1", "sub"), functions=[torch.sinh],
         methods=["sinh"])
register("input", _hyperbolic("exp", "add"), functions=[torch.cosh],
         methods=["cosh"])


@handles("input, lambd=0.5", functions=[F.softshrink])
@handles("input", modules=[nn.Softshrink])
def _softshrink(ex, call):
    """x - clamp(x, -lambda, lambda): x -+ lambda outside the band, 0 in it;
    the gradient 0 in the band and at its edges, as PyTorch's."""
    lambd = call.module.lambd if call.module is not None else \
        ex.const(call.args["lambd"], "lambd")
    if lambd < 0:
        ex.fail("lambd must be non-negative, got %r" % lambd)
    x = float_input(ex, call.args["input"])
    return ex.emit.binary("sub", x, ex.emit.clamp(x, -lambd, lambd))


def _scaled_log(scale):
    """log(x) times a constant: log2, log10."""
    def handler(ex, call):
        return ex.emit.scalar(
            "mul_scalar", ex.emit.unary("log", float_input(
                ex, call.args["input"])), scale)
    return handler


register("input", _scaled_log(1.0 / math.log(2.0)), functions=[torch.log2],
         methods=["log2"])
register("input", _scaled_log(1.0 / math.log(10.0)),
         functions=[torch.log10], methods=["log10"])


@handles("input", functions=[torch.reciprocal], methods=["reciprocal"])
def _reciprocal(ex, call):
    return ex.emit.scalar("pow_scalar", float_input(ex, call.args["input"]),
                          -1.0)


@handles("input, eps=None", functions=[torch.logit, torch.special.logit],
         methods=["logit"])
def _logit(ex, call):
    """log(x) - log1p(-x), x clamped to [eps, 1 - eps] first when eps is
    given (no gradient outside the band, as PyTorch's; at its edges it
    passes)."""
    x = float_input(ex, call.args["input"])
    eps = ex.const(call.args.get("eps"), "eps")
    if eps is not None:
        x = ex.emit.clamp(x, eps, 1.0 - eps)
    return ex.emit.binary("sub", ex.emit.unary("log", x),
                          ex.emit.unary("log1p", ex.emit.unary("neg", x)))


@handles("input, weight", functions=[F.prelu, torch.prelu])
@handles("input", modules=[nn.PReLU])
def _prelu(ex, call):
    """relu(x) - w relu(-x), w one slope or one per channel (dimension 1),
    as leaky_relu with a trained slope; at exactly 0 the gradient is 0."""
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        weight = ex.param(call.module.weight, "weight")
    else:
        weight = float_input(ex, call.args["weight"])
    single = weight.rank == 0 or weight.shape == (1,)
    if weight.rank > 1 or not (single or (x.rank >= 2 and
                                          weight.shape[0] == x.shape[1])):
        ex.fail("the weight must hold one slope or one per channel "
                "(dimension 1 of the input), got %s for %s"
                % (weight.type, x.type))
    if single:
        slope = ex.emit.broadcast_to(
            ex.emit.reshape(weight, (1,) * x.rank), x.shape)
    else:
        slope = ex.emit.broadcast(weight, [1], x.shape)
    negative = ex.emit.unary("relu", ex.emit.unary("neg", x))
    return ex.emit.binary("sub", ex.emit.unary("relu", x),
                          ex.emit.binary("mul", slope, negative))


@handles("input, dim=-1", functions=[F.glu])
@handles("input", modules=[nn.GLU])
def _glu(ex, call):
    """a sigmoid(b), a and b the halves of the input along `dim`."""
    x = float_input(ex, call.args["input"])
    dim = call.module.dim if call.module is not None else \
        ex.const(call.args["dim"], "dim")
    dim = norm_dim(ex, dim, x.rank)
    if x.rank == 0 or x.shape[dim] % 2:
        ex.fail("dimension %d of %s must have an even extent"
                % (dim, x.type))
    half = x.shape[dim] // 2
    starts, strides = [0] * x.rank, [1] * x.rank
    limits = list(x.shape)
    limits[dim] = half
    a = ex.emit.slice(x, starts, limits, strides)
    starts[dim], limits[dim] = half, x.shape[dim]
    b = ex.emit.slice(x, starts, limits, strides)
    return ex.emit.binary("mul", a, ex.emit.unary("sigmoid", b))


def _scaled(scale):
    """x times a constant: positive (1), deg2rad, rad2deg."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        return x if scale == 1 else ex.emit.scalar("mul_scalar", x, scale)
    return handler


register("input", _scaled(1.0), functions=[torch.positive],
         methods=["positive"])
register("input", _scaled(math.pi / 180.0), functions=[torch.deg2rad],
         methods=["deg2rad"])
register("input", _scaled(180.0 / math.pi), functions=[torch.rad2deg],
         methods=["rad2deg"])


@handles("input", functions=[torch.asinh, torch.arcsinh],
         methods=["asinh", "arcsinh"])
def _asinh(ex, call):
    """s log1p(t + t^2 / (1 + sqrt(1 + t^2))) for t = s x = |x|, s =
    copysign(1, x): odd, without cancellation for negative or small x;
    writing |x| as s x gives the gradient 1 at 0, as PyTorch's. (t^2
    overflows above |x| = 1.8e19, where PyTorch's result is still finite.)"""
    x = float_input(ex, call.args["input"])
    s = unit_sign(ex, x)
    t = ex.emit.binary("mul", x, s)
    square = ex.emit.binary("mul", t, t)
    root = ex.emit.scalar("add_scalar", ex.emit.unary(
        "sqrt", ex.emit.scalar("add_scalar", square, 1.0)), 1.0)
    inner = ex.emit.binary("add", t, ex.emit.binary("div", square, root))
    return ex.emit.binary("mul", s, ex.emit.unary("log1p", inner))


@handles("input", functions=[torch.acosh, torch.arccosh],
         methods=["acosh", "arccosh"])
def _acosh(ex, call):
    """log1p((x - 1) + sqrt((x - 1)(x + 1))): accurate near 1, NaN below
    it, as PyTorch's."""
    x = float_input(ex, call.args["input"])
    below = ex.emit.scalar("add_scalar", x, -1.0)
    root = ex.emit.unary("sqrt", ex.emit.binary(
        "mul", below, ex.emit.scalar("add_scalar", x, 1.0)))
    return ex.emit.unary("log1p", ex.emit.binary("add", below, root))


@handles("input", functions=[torch.atanh, torch.arctanh],
         methods=["atanh", "arctanh"])
def _atanh(ex, call):
    """s log1p(2t / (1 - t)) / 2 for t = s x = |x|, s = copysign(1, x): odd,
    accurate near 0 and near +-1 (log1p of a non-negative argument), +-inf
    at +-1, NaN beyond."""
    x = float_input(ex, call.args["input"])
    s = unit_sign(ex, x)
    t = ex.emit.binary("mul", x, s)
    ratio = ex.emit.binary("div", ex.emit.scalar("mul_scalar", t, 2.0),
                           ex.emit.scalar("add_scalar",
                                          ex.emit.unary("neg", t), 1.0))
    return ex.emit.binary("mul", s, ex.emit.scalar(
        "mul_scalar", ex.emit.unary("log1p", ratio), 0.5))


@handles("input", functions=[torch.exp2, torch.special.exp2],
         methods=["exp2"])
def _exp2(ex, call):
    return ex.emit.unary("exp", ex.emit.scalar(
        "mul_scalar", float_input(ex, call.args["input"]), math.log(2.0)))
