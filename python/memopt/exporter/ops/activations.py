"""Activations: relu, gelu, silu, tanh, sigmoid, exp, log, sqrt, rsqrt,
neg, hardswish, hardsigmoid, mish, and the clamps (torch.clamp, hardtanh,
relu6)."""

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles, register
from .common import float_input

_UNARY = ("relu", "silu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt",
          "neg")


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
    number (a tensor bound, even a constant one, is refused)."""
    if arg is None:
        return None
    value = None if ex.is_symbolic(arg) else ex.concrete(arg)
    if not isinstance(value, (bool, int, float)):
        ex.fail("the bound '%s' must be a Python number; tensor bounds are "
                "not supported" % name)
    if math.isnan(value):
        ex.fail("the bound '%s' is NaN" % name)
    return float(value)


def _emit_clamp(ex, call, low, high, inclusive):
    if low is not None and high is not None and low > high:
        ex.fail("min %r is above max %r" % (low, high))
    return ex.emit.clamp(float_input(ex, call.args["input"]), low, high,
                         inclusive)


def _clamp(ex, call):
    """torch.clamp, torch.clip, clamp_min, clamp_max (function and method
    forms): the gradient passes at the bounds."""
    low = _clamp_bound(ex, call.args.get("min"), "min")
    high = _clamp_bound(ex, call.args.get("max"), "max")
    if low is None and high is None:
        ex.fail("at least one of 'min' and 'max' must be given")
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
