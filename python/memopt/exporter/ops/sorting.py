"""Order statistics: sort, argsort, msort, topk, kthvalue, median,
quantile, cummax and cummin: their values, and the indices of sort, topk,
kthvalue and median (those of cummax and cummin must be unread).

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
from .common import (EXACT_IN_F32, as_number, as_rows, float_input, full,
                     norm_dim, read_results)
from .indexing import elements_at
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


def _indices_read(call):
    return isinstance(call.out, tuple) and \
        1 in read_results(call.node, 2)


def sorted_positions(ex, x, dim, descending):
    """The positions along ``dim`` of ``x``'s elements in the order of a
    stable sort (ascending, or ``descending``) that puts NaN above every
    number, as PyTorch's sort with stable=True, in f32 with x's shape: the
    bitonic network on the keys (class, value, position), class 1 for a NaN
    (-1 when descending, which negates the values), 2 for the padding, so
    that no two keys tie. Positions up to 2^24 are exact in f32."""
    emit = ex.emit
    y, restore = as_rows(ex, x, dim)
    rows, n = y.shape
    if n > EXACT_IN_F32:
        ex.fail("the indices of a sort along more than 2^24 elements are not "
                "supported")
    m = 1 << max(n - 1, 0).bit_length()
    nan = emit.compare("ne", y, y)
    value = emit.unary("neg", y) if descending else y
    value = emit.where(nan, full(ex, y.shape, 0.0, "f32"), value)
    klass = emit.where(nan, full(ex, y.shape, -1.0 if descending else 1.0,
                                 "f32"), full(ex, y.shape, 0.0, "f32"))
    position = emit.broadcast_to(emit.constant(
        np.arange(m, dtype=np.float32).reshape(1, m), "f32"), (rows, m))
    if m > n:
        pad = (rows, m - n)
        value = emit.concat([value, full(ex, pad, 0.0, "f32")], 1)
        klass = emit.concat([klass, full(ex, pad, 2.0, "f32")], 1)
    keys = [klass, value, position]
    k = 2
    while k <= m:
        j = k // 2
        while j >= 1:
            keys = _exchange_keys(ex, keys, k, j)
            j //= 2
        k *= 2
    position = keys[2]
    if m > n:
        position = emit.slice(position, [0, 0], [rows, n], [1, 1])
    return restore(position)


def _exchange_keys(ex, keys, k, j):
    """One stage of the bitonic network of sorted_positions: the pair
    (i, i + j) is swapped where its keys are out of the order its block
    asks for (ascending where bit k of i is clear)."""
    emit = ex.emit
    rows, m = keys[0].shape
    groups = m // (2 * j)
    half = (rows, groups, 1, j)
    firsts, seconds = [], []
    for key in keys:
        pairs = emit.reshape(key, (rows, groups, 2, j))
        firsts.append(emit.slice(pairs, [0, 0, 0, 0], half, [1] * 4))
        seconds.append(emit.slice(pairs, [0, 0, 1, 0], (rows, groups, 2, j),
                                  [1] * 4))
    one, zero = full(ex, half, 1.0, "f32"), full(ex, half, 0.0, "f32")

    def above(index, otherwise):
        """1 where the first key is above the second in key ``index``,
        ``otherwise`` where they are equal there, 0 below."""
        a, b = firsts[index], seconds[index]
        return emit.where(emit.compare("gt", a, b), one, emit.where(
            emit.compare("eq", a, b), otherwise, zero))

    greater = above(0, above(1, above(2, zero)))
    ascending = ((np.arange(groups) * 2 * j) & k) == 0
    if not ascending.all():
        mask = emit.broadcast_to(emit.constant(
            ascending.reshape(1, groups, 1, 1), "i1"), half)
        greater = emit.where(mask, greater, emit.scalar(
            "add_scalar", emit.unary("neg", greater), 1.0))
    swap = emit.compare("ne", greater, zero)
    return [emit.reshape(emit.concat(
        [emit.where(swap, b, a), emit.where(swap, a, b)], 2), (rows, m))
        for a, b in zip(firsts, seconds)]


def _sorted_with_indices(ex, x, dim, descending, count=None):
    """The values and int64 indices of a stable sort along ``dim`` (the
    first ``count`` along it): the indices from sorted_positions, the values
    looked up at them, so that each element receives the gradient of the
    position it lands in, as PyTorch's."""
    if x.rank == 0:
        return x, full(ex, (), 0, "i64")
    position = sorted_positions(ex, x, dim, descending)
    if count is not None and count < x.shape[dim]:
        limits = list(position.shape)
        limits[dim] = count
        position = ex.emit.slice(position, [0] * x.rank, limits,
                                 [1] * x.rank)
    indices = ex.emit.cast(position, "i64")
    return elements_at(ex, x, dim, indices, indices.shape), indices


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
    """The sorted values, and the indices of a stable sort when they are
    read (PyTorch's unstable sort leaves the order of ties open)."""
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    descending = bool(ex.const(call.args["descending"], "descending"))
    if _indices_read(call):
        return _sorted_with_indices(ex, x, dim, descending)
    return (sorted_along(ex, x, dim, descending), None)


@handles("input, dim=-1, descending=False", functions=[torch.argsort],
         methods=["argsort"])
def _argsort(ex, call):
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    if x.rank == 0:
        return full(ex, (), 0, "i64")
    return ex.emit.cast(sorted_positions(ex, x, dim, bool(ex.const(
        call.args["descending"], "descending"))), "i64")


@handles("input", functions=[torch.msort], methods=["msort"])
def _msort(ex, call):
    return sorted_along(ex, float_input(ex, call.args["input"]), 0, False)


@handles("input, k, dim=-1, largest=True, sorted=True",
         functions=[torch.topk], methods=["topk"])
def _topk(ex, call):
    """The k largest (or smallest) along ``dim``, in order (also when
    ``sorted=False`` leaves PyTorch's order open)."""
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    k = ex.const(call.args["k"], "k")
    out = tuple(call.out[0].shape)
    if k == 0:
        ex.fail("k = 0 selects nothing")
    largest = bool(ex.const(call.args["largest"], "largest"))
    if _indices_read(call):
        values, indices = _sorted_with_indices(ex, x, dim, largest, k)
        return ex.emit.reshape(values, out), ex.emit.reshape(indices, out)
    y = sorted_along(ex, x, dim, largest)
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
        out = tuple(call.out[0].shape)
        dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
        if _indices_read(call) and not x.rank:
            return x, full(ex, (), 0, "i64")
        if _indices_read(call):
            values, indices = _sorted_with_indices(ex, x, dim, False)
            at = position(x.shape[dim])
            starts, limits = [0] * x.rank, list(x.shape)
            starts[dim], limits[dim] = at, at + 1
            return tuple(ex.emit.reshape(ex.emit.slice(
                v, starts, limits, [1] * x.rank), out)
                for v in (values, indices))
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
