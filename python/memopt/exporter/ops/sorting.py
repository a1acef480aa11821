"""Order statistics: sort, msort, topk, kthvalue, median, quantile, cummax
and cummin, as their values (the indices they also return must be unread).

A sort is a bitonic sorting network along the dimension, padded with +-inf
to a power of two: each of its log2(n) (log2(n) + 1) / 2 stages splits the
dimension into pairs (i, i + j) by a reshape and two slices, and puts their
minimum and maximum in the order the pair's block asks for (a `where` on a
constant mask). It is exact, and its gradient is PyTorch's (each element
receives the gradient of the position it lands in) wherever no two
elements tie: at a tie, maximum splits the gradient evenly between the
equal elements, where PyTorch gives each one a position's. A NaN is not
ordered: it spreads to the other elements of its compare-exchanges, where
PyTorch sorts it last."""

import math

import numpy as np
import torch

from ..registry import handles, returns_tuple
from .arithmetic import lerp
from .common import (as_number, as_rows, float_input, norm_dim,
                     read_results)
from .reductions import scan


def _minimum(ex, a, b):
    return ex.emit.unary("neg", ex.emit.binary(
        "maximum", ex.emit.unary("neg", a), ex.emit.unary("neg", b)))


def sorted_along(ex, x, dim, descending):
    """The values of ``x`` sorted along ``dim``."""
    if x.rank == 0:
        return x
    y, restore = as_rows(ex, x, dim)
    rows, n = y.shape
    m = 1 << max(n - 1, 0).bit_length()
    if m > n:
        pad = np.full((rows, m - n), -np.inf if descending else np.inf,
                      np.float32)
        y = ex.emit.concat([y, ex.emit.constant(pad, y.dtype)], 1)
    k = 2
    while k <= m:
        j = k // 2
        while j >= 1:
            y = _compare_exchange(ex, y, k, j, descending)
            j //= 2
        k *= 2
    if m > n:
        y = ex.emit.slice(y, [0, 0], [rows, n], [1, 1])
    return restore(y)


def _compare_exchange(ex, y, k, j, descending):
    """One stage of the bitonic network on (rows, m): element i and i + j
    (bit j of i clear) are ordered ascending where bit k of i is clear,
    descending where it is set (the other way round for a descending
    sort)."""
    rows, m = y.shape
    groups = m // (2 * j)
    pairs = ex.emit.reshape(y, (rows, groups, 2, j))
    half = (rows, groups, 1, j)
    first = ex.emit.slice(pairs, [0, 0, 0, 0], half, [1] * 4)
    second = ex.emit.slice(pairs, [0, 0, 1, 0], (rows, groups, 2, j),
                           [1] * 4)
    low = _minimum(ex, first, second)
    high = ex.emit.binary("maximum", first, second)
    ascending = ((np.arange(groups) * 2 * j) & k) == 0
    if descending:
        ascending = ~ascending
    if ascending.all():
        ordered = [low, high]
    else:
        mask = ex.emit.broadcast_to(ex.emit.constant(
            ascending.reshape(1, groups, 1, 1), "i1"), half)
        ordered = [ex.emit.where(mask, low, high),
                   ex.emit.where(mask, high, low)]
    return ex.emit.reshape(ex.emit.concat(ordered, 2), (rows, m))


def _indices_unread(ex, call, what):
    if 1 in read_results(call.node, 2):
        ex.fail("the indices (the second result) of %s are read: memopt "
                "computes only the values" % what)


def _positions(ex, x, dim, positions, keep_rank):
    """The elements at ``positions`` along ``dim`` of the sorted ``x``:
    slices of it (one position is dropped unless ``keep_rank``)."""
    parts = []
    for position in positions:
        starts, limits = [0] * x.rank, list(x.shape)
        starts[dim], limits[dim] = position, position + 1
        parts.append(ex.emit.slice(x, starts, limits, [1] * x.rank))
    y = parts[0] if len(parts) == 1 else ex.emit.concat(parts, dim)
    if keep_rank or len(positions) != 1:
        return y
    return ex.emit.reshape(y, x.shape[:dim] + x.shape[dim + 1:])


@handles("input, dim=-1, descending=False, stable=False",
         functions=[torch.sort], methods=["sort"])
def _sort(ex, call):
    x = float_input(ex, call.args["input"])
    _indices_unread(ex, call, "sort")
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    return (sorted_along(ex, x, dim, bool(ex.const(
        call.args["descending"], "descending"))), None)


@handles("input", functions=[torch.msort], methods=["msort"])
def _msort(ex, call):
    return sorted_along(ex, float_input(ex, call.args["input"]), 0, False)


@handles("input, k, dim=-1, largest=True, sorted=True",
         functions=[torch.topk], methods=["topk"])
def _topk(ex, call):
    """The k largest (or smallest) along ``dim``, in order (also when
    ``sorted=False`` leaves PyTorch's order open)."""
    x = float_input(ex, call.args["input"])
    _indices_unread(ex, call, "topk")
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    k = ex.const(call.args["k"], "k")
    out = tuple(call.out[0].shape)
    if k == 0:
        ex.fail("k = 0 selects nothing")
    y = sorted_along(ex, x, dim, bool(ex.const(call.args["largest"],
                                                "largest")))
    if x.rank:
        y = _positions(ex, y, dim, range(k), keep_rank=True)
    return (ex.emit.reshape(y, out), None)


def _order_statistic(ex, call, what, position):
    """The value at ``position(n)`` of the ascending sort along ``dim``
    (all elements when there is no ``dim``)."""
    x = float_input(ex, call.args["input"])
    whole = call.args.get("dim") is None
    if whole:
        out = tuple(call.out.shape)
        x, dim = ex.emit.reshape(x, (int(np.prod(x.shape)),)), 0
    else:
        _indices_unread(ex, call, what)
        out = tuple(call.out[0].shape)
        dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    if x.rank:
        x = _positions(ex, sorted_along(ex, x, dim, False), dim,
                       [position(x.shape[dim])], keep_rank=False)
    y = ex.emit.reshape(x, out)
    return y if whole else (y, None)


@handles("input, k, dim=-1, keepdim=False", functions=[torch.kthvalue],
         methods=["kthvalue"])
def _kthvalue(ex, call):
    k = ex.const(call.args["k"], "k")
    return _order_statistic(ex, call, "kthvalue", lambda n: k - 1)


@handles("input, dim=None, keepdim=False", functions=[torch.median],
         methods=["median"])
def _median(ex, call):
    """The lower median, PyTorch's, for an even count."""
    return _order_statistic(ex, call, "median", lambda n: (n - 1) // 2)


for _handler in (_sort, _topk, _kthvalue, _median):
    returns_tuple(_handler)


@handles("input, q, dim=None, keepdim=False, interpolation='linear'",
         functions=[torch.quantile], methods=["quantile"])
def _quantile(ex, call):
    """The q-quantiles (a number, or a constant 1-D tensor whose values
    lead the result's dimensions) along ``dim`` (of all elements without
    one): the sorted values at floor and ceil of q (n - 1), combined by
    PyTorch's interpolation rule."""
    x = float_input(ex, call.args["input"])
    q = as_number(ex, call.args["q"])
    scalar_q = q is not None and not isinstance(
        ex.concrete(call.args["q"]), torch.Tensor)
    qs = [q] if q is not None else ex.const(call.args["q"], "q").tolist()
    if not isinstance(qs, list):
        qs = [qs]
    mode = ex.const(call.args["interpolation"], "interpolation")
    dim = ex.const(call.args["dim"], "dim")
    if dim is None:
        x, dim = ex.emit.reshape(x, (int(np.prod(x.shape)),)), 0
    dim = norm_dim(ex, dim, x.rank)
    if x.rank == 0:
        x, dim = ex.emit.reshape(x, (1,)), 0
    n = x.shape[dim]
    y = sorted_along(ex, x, dim, False)
    values = []
    for level in qs:
        # PyTorch computes the rank in the input's precision.
        rank = float(np.float32(level) * np.float32(n - 1))
        below, above = math.floor(rank), math.ceil(rank)
        low = _positions(ex, y, dim, [below], keep_rank=False)
        high = _positions(ex, y, dim, [above], keep_rank=False)
        fraction = rank - below
        if mode == "lower" or below == above:
            values.append(low)
        elif mode == "higher":
            values.append(high)
        elif mode == "nearest":
            # round half to even, as PyTorch's round.
            values.append(high if round(rank) == above else low)
        elif mode == "midpoint":
            values.append(ex.emit.scalar("mul_scalar", ex.emit.binary(
                "add", low, high), 0.5))
        elif mode == "linear":
            values.append(lerp(ex, low, high, fraction))
        else:
            ex.fail("interpolation=%r is not supported" % mode)
    shape = values[0].shape
    stacked = values[0] if scalar_q else ex.emit.concat(
        [ex.emit.reshape(v, (1,) + shape) for v in values], 0)
    return ex.emit.reshape(stacked, tuple(call.out.shape))


def _running_extreme(largest):
    """torch.cummax / cummin: the running maximum (minimum) along ``dim``,
    a scan by maximum."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        _indices_unread(ex, call, "cummax" if largest else "cummin")
        dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
        if x.rank == 0:
            return (x, None)
        if largest:
            return (scan(ex, x, dim, "maximum"), None)
        return (ex.emit.unary("neg", scan(ex, ex.emit.unary("neg", x), dim,
                                          "maximum")), None)
    return returns_tuple(handler)


handles("input, dim", functions=[torch.cummax], methods=["cummax"])(
    _running_extreme(True))
handles("input, dim", functions=[torch.cummin], methods=["cummin"])(
    _running_extreme(False))
