"""Reductions (sum, mean, amax, max) and softmax / log_softmax."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..dtypes import DTYPES
from ..emit import FLOAT_TYPES
from ..registry import handles, register
from .common import float_input, norm_dim


def _in_dtype(ex, call, x):
    """``x`` converted to the ``dtype`` argument of a reduction or a softmax
    (``F.softmax(s, -1, dtype=torch.float32)``): PyTorch converts the input
    before the op, so the result has that dtype."""
    dtype = ex.const(call.args.get("dtype"), "dtype")
    if dtype is None:
        return x
    name = DTYPES.get(dtype)
    if name not in FLOAT_TYPES:
        ex.fail("dtype=%s is not supported (only floating-point dtypes)"
                % dtype)
    return x if name == x.dtype else ex.emit.cast(x, name)


def _reduce(kind):
    def handler(ex, call):
        x = _in_dtype(ex, call, float_input(ex, call.args["input"]))
        dim = ex.const(call.args.get("dim"))
        if dim is None or (isinstance(dim, (tuple, list)) and not dim):
            dims = list(range(x.rank))
        elif isinstance(dim, (tuple, list)):
            dims = [norm_dim(ex, d, x.rank) for d in dim]
        else:
            dims = [norm_dim(ex, dim, x.rank)]
        dims = sorted(set(dims))
        return ex.emit.reshape(ex.emit.reduce(kind, x, dims),
                               ex.out_shape(call))
    return handler


for _name, _kind in (("sum", "reduce_sum"), ("mean", "reduce_mean")):
    register("input, dim=None, keepdim=False, dtype=None", _reduce(_kind),
             functions=[getattr(torch, _name)], methods=[_name])
register("input, dim=(), keepdim=False", _reduce("reduce_max"),
         functions=[torch.amax], methods=["amax"])


@handles("input, dim=None, keepdim=False", functions=[torch.max],
         methods=["max"])
def _max(ex, call):
    if call.args.get("dim") is not None:
        ex.fail("max along a dimension also returns indices: use "
                "torch.amax")
    x = float_input(ex, call.args["input"])
    return ex.emit.reduce("reduce_max", x, list(range(x.rank)))


def _softmax(kind):
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        if call.module is not None:
            dim = call.module.dim
        else:
            dim = ex.const(call.args.get("dim"))
            x = _in_dtype(ex, call, x)
        if dim is None:
            ex.fail("the dimension must be given explicitly")
        return ex.emit.softmax(kind, x, norm_dim(ex, dim, x.rank))
    return handler


for _name in ("softmax", "log_softmax"):
    _handler = _softmax(_name)
    register("input, dim=None, _stacklevel=3, dtype=None", _handler,
             functions=[getattr(F, _name)])
    register("input, dim, dtype=None", _handler,
             functions=[getattr(torch, _name)], methods=[_name])
register("input", _softmax("softmax"), modules=[nn.Softmax])
register("input", _softmax("log_softmax"), modules=[nn.LogSoftmax])
