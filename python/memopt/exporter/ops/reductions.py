"""Reductions (sum, mean, amax, amin, max, var, std, var_mean, std_mean,
logsumexp, prod), scans (cumsum, cumprod, the trapezoid rules) and softmax /
log_softmax / softmin."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..dtypes import DTYPES
from ..emit import FLOAT_TYPES
from ..registry import handles, register, returns_tuple
from . import arithmetic
from .indexing import elements_at
from .common import (EXACT_IN_F32, as_rows, float_input, full, in_f32,
                     mask_as_float, norm_dim, read_results)


def in_dtype_name(ex, call):
    """The float dtype the ``dtype`` argument of a reduction or a softmax
    names, None without one."""
    dtype = ex.const(call.args.get("dtype"), "dtype")
    if dtype is None:
        return None
    name = DTYPES.get(dtype)
    if name not in FLOAT_TYPES:
        ex.fail("dtype=%s is not supported (only floating-point dtypes)"
                % dtype)
    return name


def in_dtype(ex, call, x):
    """``x`` converted to the ``dtype`` argument of a reduction or a softmax
    (``F.softmax(s, -1, dtype=torch.float32)``): PyTorch converts the input
    before the op, so the result has that dtype."""
    name = in_dtype_name(ex, call)
    return x if name in (None, x.dtype) else ex.emit.cast(x, name)


def reduced_dims(ex, dim, rank):
    """The sorted dimensions a ``dim`` argument names (all for None or
    an empty sequence; none of a 0-d tensor, whose dimension 0 or -1
    PyTorch takes as the tensor itself)."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return list(range(rank))
    dims = dim if isinstance(dim, (tuple, list)) else [dim]
    dims = sorted(set(norm_dim(ex, d, rank) for d in dims))
    return dims if rank else []


def _reduce(kind):
    def handler(ex, call):
        x = ex.val(call.args["input"])
        dtype = in_dtype_name(ex, call)
        if x.dtype in FLOAT_TYPES:
            if dtype not in (None, x.dtype):
                x = ex.emit.cast(x, dtype)
        elif dtype is not None:
            x = ex.val(call.args["input"], dtype)
        elif kind == "reduce_sum":
            return mask_count(ex, x, ex.const(call.args.get("dim")),
                              ex.out_shape(call))
        else:
            x = float_input(ex, call.args["input"])  # reports the dtype
        dims = reduced_dims(ex, ex.const(call.args.get("dim")), x.rank)
        if dims:
            x = ex.emit.reduce(kind, x, dims)
        return ex.emit.reshape(x, ex.out_shape(call))
    return handler


def mask_count(ex, mask, dim, shape):
    """The number of true elements of ``mask`` over ``dim`` (all for None)
    as int64, PyTorch's sum of a bool tensor: a sum of its 1 and 0 in f32,
    exact because no count exceeds 2^24, made an index."""
    if mask.dtype != "i1":
        ex.fail("the sum of an integer tensor is not supported (only of a "
                "bool mask)")
    if int(np.prod(mask.shape)) > EXACT_IN_F32:
        ex.fail("the sum of a mask of more than 2^24 elements is not "
                "supported")
    x = mask_as_float(ex, mask, "f32")
    dims = reduced_dims(ex, dim, x.rank)
    if dims:
        x = ex.emit.reduce("reduce_sum", x, dims)
    return ex.emit.cast(ex.emit.reshape(x, shape), "i64")


@handles("input, dim=None", functions=[torch.count_nonzero],
         methods=["count_nonzero"])
def _count_nonzero(ex, call):
    x = ex.val(call.args["input"])
    if x.dtype != "i1":
        x = ex.emit.compare("ne", x, full(ex, x.shape, 0, x.dtype))
    return mask_count(ex, x, ex.const(call.args.get("dim")),
                      ex.out_shape(call))


for _name, _kind in (("sum", "reduce_sum"), ("mean", "reduce_mean")):
    register("input, dim=None, keepdim=False, dtype=None", _reduce(_kind),
             functions=[getattr(torch, _name)], methods=[_name])
register("input, dim=(), keepdim=False", _reduce("reduce_max"),
         functions=[torch.amax], methods=["amax"])


@handles("input, dim=(), keepdim=False", functions=[torch.amin],
         methods=["amin"])
def _amin(ex, call):
    x = float_input(ex, call.args["input"])
    dims = reduced_dims(ex, ex.const(call.args.get("dim")), x.rank)
    return ex.emit.reshape(_extreme_values(ex, x, dims, False),
                           ex.out_shape(call))


def _extreme_values(ex, x, dims, largest):
    """The maxima of ``x`` over ``dims`` (``x`` itself for none), or the
    minima as -amax(-x): exact, with torch.amax's / torch.amin's gradient
    (ties split evenly)."""
    if not dims:
        return x
    if largest:
        return ex.emit.reduce("reduce_max", x, dims)
    return ex.emit.unary("neg", ex.emit.reduce(
        "reduce_max", ex.emit.unary("neg", x), dims))


def _extreme(largest):
    """torch.max / torch.min: of every element, of two tensors (the
    elementwise maximum / minimum), or along a dimension, where they return
    the values and the indices. When nothing reads the indices, the values'
    gradient goes to the maximal elements, split evenly among ties (as
    torch.amax's), where PyTorch's goes to the one index it returns (the
    same where there is no tie); when the indices are read, the values are
    looked up at them, and their gradient goes to that index, as PyTorch's."""
    def handler(ex, call):
        other = call.args.get("dim")
        if isinstance(other, (torch.fx.Node, torch.Tensor)):
            call.args["other"] = call.args.pop("dim")
            return (arithmetic.binary_handler("maximum") if largest
                    else arithmetic.minimum_handler)(ex, call)
        x = float_input(ex, call.args["input"])
        if other is None:
            return _extreme_values(ex, x, list(range(x.rank)), largest)
        dims = reduced_dims(ex, ex.const(other, "dim"), x.rank)
        values_shape, indices_shape = (tuple(t.shape) for t in call.out)
        if 1 not in read_results(call.node, 2):
            return ex.emit.reshape(_extreme_values(ex, x, dims, largest),
                                   values_shape), None
        indices = _first_extreme_index(ex, x, dims, largest)
        if not dims:
            return x, indices
        kept = tuple(1 if d in dims else e for d, e in enumerate(x.shape))
        indices = ex.emit.reshape(indices, kept)
        # The values looked up at the indices: the gradient goes to the
        # index returned, as PyTorch's.
        values = elements_at(ex, x, dims[0], indices, values_shape)
        return values, ex.emit.reshape(indices, indices_shape)
    return returns_tuple(handler)


def _first_extreme_index(ex, x, dims, largest):
    """The position along ``dims`` (one dimension, or none of a 0-d
    tensor) of the first maximum (minimum) of ``x``, or of its first NaN,
    as PyTorch's argmax / argmin, as int64 with ``dims`` reduced: the
    smallest position whose element equals the extreme, found in f32, where
    every position below 2^24 is exact. No gradient."""
    if not dims:
        return full(ex, x.shape, 0, "i64")
    dim, = dims
    n = x.shape[dim]
    if n > EXACT_IN_F32:
        ex.fail("the index of an extreme along a dimension of more than "
                "2^24 elements is not supported")
    emit = ex.emit
    kept = tuple(1 if d == dim else e for d, e in enumerate(x.shape))
    extreme = emit.broadcast_to(
        emit.reshape(_extreme_values(ex, x, dims, largest), kept), x.shape)
    position = emit.broadcast_to(emit.constant(
        np.arange(n, dtype=np.float32).reshape(
            [n if d == dim else 1 for d in range(x.rank)]), "f32"), x.shape)
    candidate = emit.where(emit.compare("eq", x, extreme), position,
                           full(ex, x.shape, float(n), "f32"))
    candidate = emit.where(emit.compare("ne", x, x), position, candidate)
    first = emit.unary("neg", emit.reduce(
        "reduce_max", emit.unary("neg", candidate), dims))
    return emit.cast(first, "i64")


def _arg_extreme(largest):
    """torch.argmax / argmin: the first extreme's position along ``dim``,
    or in the flattened input without one."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        dim = ex.const(call.args.get("dim"), "dim")
        if dim is None:
            x = ex.emit.reshape(x, (int(np.prod(x.shape)),))
            dim = 0
        dims = [norm_dim(ex, dim, x.rank)] if x.rank else []
        return ex.emit.reshape(_first_extreme_index(ex, x, dims, largest),
                               ex.out_shape(call))
    return handler


register("input, dim=None, keepdim=False", _arg_extreme(True),
         functions=[torch.argmax], methods=["argmax"])
register("input, dim=None, keepdim=False", _arg_extreme(False),
         functions=[torch.argmin], methods=["argmin"])


register("input, dim=None, keepdim=False", _extreme(True),
         functions=[torch.max], methods=["max"])
register("input, dim=None, keepdim=False", _extreme(False),
         functions=[torch.min], methods=["min"])


def _softmax(kind, negate=False):
    """softmax or log_softmax (of -x: softmin)."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        if call.module is not None:
            dim = call.module.dim
        else:
            dim = ex.const(call.args.get("dim"))
            x = in_dtype(ex, call, x)
        if dim is None:
            ex.fail("the dimension must be given explicitly")
        if negate:
            x = ex.emit.unary("neg", x)
        dim = norm_dim(ex, dim, x.rank)
        if x.rank == 0:
            # A scalar is its own one-element dimension.
            return ex.emit.reshape(
                ex.emit.softmax(kind, ex.emit.reshape(x, (1,)), 0), ())
        return ex.emit.softmax(kind, x, dim)
    return handler


# softmin: the softmax of -x.
register("input, dim=None, _stacklevel=3, dtype=None",
         _softmax("softmax", negate=True), functions=[F.softmin])
register("input", _softmax("softmax", negate=True), modules=[nn.Softmin])


for _name in ("softmax", "log_softmax"):
    _handler = _softmax(_name)
    register("input, dim=None, _stacklevel=3, dtype=None", _handler,
             functions=[getattr(F, _name)])
    register("input, dim, dtype=None", _handler,
             functions=[getattr(torch, _name)], methods=[_name])
register("input", _softmax("softmax"), modules=[nn.Softmax])
register("input", _softmax("log_softmax"), modules=[nn.LogSoftmax])


def _kept(x, dims):
    """x's shape with ``dims`` reduced to extent 1."""
    return tuple(1 if i in dims else d for i, d in enumerate(x.shape))


def variance(ex, x, dims, correction):
    """The variance of ``x`` over ``dims`` as sum((x - mean)^2) / (n -
    correction), in the reduced shape, and the mean in x's shape with
    ``dims`` kept as 1."""
    count = 1
    for d in dims:
        count *= x.shape[d]
    mean = ex.emit.reshape(ex.emit.reduce("reduce_mean", x, dims),
                           _kept(x, dims))
    centered = ex.emit.binary("sub", x, ex.emit.broadcast_to(mean, x.shape))
    squares = ex.emit.reduce("reduce_sum",
                             ex.emit.binary("mul", centered, centered), dims)
    if count - correction <= 0:
        ex.fail("the variance of %d elements with correction %r divides by "
                "zero" % (count, correction))
    return ex.emit.scalar("mul_scalar", squares,
                          1.0 / (count - correction)), mean


def _variance_handler(root, with_mean):
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        dim = ex.const(call.args.get("dim"))
        unbiased = ex.const(call.args.get("unbiased"))
        if isinstance(dim, bool):  # torch.var(x, False): the unbiased flag
            dim, unbiased = None, dim
        correction = ex.const(call.args.get("correction"))
        if correction is not None and unbiased is not None:
            ex.fail("give either unbiased or correction, not both")
        if correction is None:
            correction = 0 if unbiased is False else 1
        dims = reduced_dims(ex, dim, x.rank)
        var, mean = variance(ex, x, dims, float(correction))
        shape = _kept(x, dims) if ex.const(call.args.get("keepdim")) else \
            tuple(d for i, d in enumerate(x.shape) if i not in dims)
        result = ex.emit.reshape(
            ex.emit.unary("sqrt", var) if root else var, shape)
        if not with_mean:
            return result
        return result, ex.emit.reshape(mean, shape)
    return handler


_VARIANCE_SIGNATURE = "input, dim=None, unbiased=None, keepdim=False, " \
    "correction=None"
register(_VARIANCE_SIGNATURE, _variance_handler(False, False),
         functions=[torch.var], methods=["var"])
register(_VARIANCE_SIGNATURE, _variance_handler(True, False),
         functions=[torch.std], methods=["std"])
register(_VARIANCE_SIGNATURE, returns_tuple(_variance_handler(False, True)),
         functions=[torch.var_mean])
register(_VARIANCE_SIGNATURE, returns_tuple(_variance_handler(True, True)),
         functions=[torch.std_mean])


@handles("input, dim, keepdim=False", functions=[torch.logsumexp],
         methods=["logsumexp"])
def _logsumexp(ex, call):
    """m + log(sum(e^(x - m))), m the maximum: no exponential overflows, and
    m's gradient (1 - the sum of the softmax, at the maximum) is zero up to
    rounding."""
    x = float_input(ex, call.args["input"])
    dims = reduced_dims(ex, ex.const(call.args["dim"]), x.rank)
    if not dims:
        return ex.emit.reshape(x, ex.out_shape(call))
    peak = ex.emit.reshape(ex.emit.reduce("reduce_max", x, dims),
                           _kept(x, dims))
    shifted = ex.emit.binary("sub", x, ex.emit.broadcast_to(peak, x.shape))
    sums = ex.emit.reduce("reduce_sum", ex.emit.unary("exp", shifted), dims)
    result = ex.emit.binary("add", ex.emit.unary("log", sums),
                            ex.emit.reshape(peak, sums.shape))
    return ex.emit.reshape(result, ex.out_shape(call))


_IDENTITY = {"add": 0.0, "mul": 1.0, "maximum": -np.inf}


def scan(ex, x, dim, kind):
    """The inclusive scan of ``x`` along ``dim`` by ``kind`` ("add", "mul"
    or "maximum"), by doubling: step k combines each element with the one
    2^k before it (the identity before the start), so log2(n) steps of
    elementwise ops, each differentiable as written."""
    n = x.shape[dim]
    shift = 1
    while shift < n:
        limits = list(x.shape)
        limits[dim] = n - shift
        head = ex.emit.slice(x, [0] * x.rank, limits, [1] * x.rank)
        fill = list(x.shape)
        fill[dim] = shift
        identity = np.full(fill, _IDENTITY[kind], np.float32)
        shifted = ex.emit.concat([ex.emit.constant(identity, x.dtype), head],
                                 dim)
        x = ex.emit.binary(kind, x, shifted)
        shift *= 2
    return x


def _scan_handler(kind):
    """torch.cumsum / cumprod along ``dim``, in ``dtype`` if given; in f32
    under mixed precision, as autocast's."""
    @in_f32
    def handler(ex, call):
        x = in_dtype(ex, call, float_input(ex, call.args["input"]))
        dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
        if x.rank == 0 or 0 in x.shape:
            return x
        return scan(ex, x, dim, kind)
    return handler


for _name, _kind in (("cumsum", "add"), ("cumprod", "mul")):
    register("input, dim, dtype=None", _scan_handler(_kind),
             functions=[getattr(torch, _name)], methods=[_name])


def _trapezoid(cumulative):
    """The trapezoid rule along ``dim``: the sums (or, cumulative, the
    running sums) of (y[i] + y[i + 1]) / 2 times dx, a number, or the steps
    of the sample points x (1-D along ``dim``, or broadcasting with y)."""
    def handler(ex, call):
        y = float_input(ex, call.args["y"])
        if y.rank == 0:
            ex.fail("y must have at least one dimension")
        dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), y.rank)
        out = ex.out_shape(call)
        n = y.shape[dim]
        if n < 2:
            return ex.emit.constant(np.zeros(out, np.float32), y.dtype)

        def part(v, first):
            starts, limits = [0] * v.rank, list(v.shape)
            starts[dim], limits[dim] = first, first + n - 1
            return ex.emit.slice(v, starts, limits, [1] * v.rank)

        pairs = ex.emit.binary("add", part(y, 0), part(y, 1))
        if call.args["x"] is not None:
            x = float_input(ex, call.args["x"])
            if x.rank == 1 and x.shape[0] == n:
                shape = [1] * y.rank
                shape[dim] = n
                x = ex.emit.reshape(x, tuple(shape))
            elif x.rank != y.rank or x.shape[dim] != n:
                ex.fail("x %s must be 1-D or of y's rank, with y's extent "
                        "%d along dimension %d" % (x.type, n, dim))
            steps = ex.emit.binary("sub", part(x, 1), part(x, 0))
            shape = tuple(torch.broadcast_shapes(pairs.shape, steps.shape))
            pairs = ex.emit.binary("mul", ex.emit.broadcast_to(pairs, shape),
                                   ex.emit.broadcast_to(steps, shape))
            scale = 0.5
        else:
            dx = call.args["dx"]
            scale = 0.5 * (1.0 if dx is None else ex.const(dx, "dx"))
        pairs = ex.emit.scalar("mul_scalar", pairs, scale)
        if cumulative:
            return ex.emit.reshape(scan(ex, pairs, dim, "add"), out)
        return ex.emit.reshape(ex.emit.reduce("reduce_sum", pairs, [dim]),
                               out)
    return handler


register("y, x=None, dx=None, dim=-1", _trapezoid(False),
         functions=[torch.trapezoid, torch.trapz])
register("y, x=None, dx=None, dim=-1", _trapezoid(True),
         functions=[torch.cumulative_trapezoid])


@handles("input, dim=None, keepdim=False, dtype=None",
         functions=[torch.prod], methods=["prod"])
@in_f32
def _prod(ex, call):
    """The product over ``dim`` (of all elements without one): a halving
    tree of muls along the dimension, padded with ones to a power of two;
    the gradient is the product rule as written, through zeros too. In f32
    under mixed precision, as autocast's."""
    x = in_dtype(ex, call, float_input(ex, call.args["input"]))
    dim = ex.const(call.args["dim"], "dim")
    if dim is None:
        x, dim = ex.emit.reshape(x, (int(np.prod(x.shape)),)), 0
    dim = norm_dim(ex, dim, x.rank)
    if x.rank == 0:
        return x
    y, restore = as_rows(ex, x, dim)
    rows, n = y.shape
    m = 1 << max(n - 1, 0).bit_length()
    if m > n:
        y = ex.emit.concat([y, ex.emit.constant(
            np.ones((rows, m - n), np.float32), y.dtype)], 1)
    while m > 1:
        m //= 2
        halves = ex.emit.reshape(y, (rows, 2, m))
        y = ex.emit.binary(
            "mul", ex.emit.slice(halves, [0, 0, 0], [rows, 1, m], [1] * 3),
            ex.emit.slice(halves, [0, 1, 0], [rows, 2, m], [1] * 3))
        y = ex.emit.reshape(y, (rows, m))
    return ex.emit.reshape(restore(y), ex.out_shape(call))
