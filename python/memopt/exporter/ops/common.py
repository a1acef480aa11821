"""Operand helpers the op families share."""

import functools
import operator

import numpy as np
import torch

from ..dtypes import NUMPY
from ..emit import FLOAT_TYPES


# Integers up to 2^24 are exact in f32: the bound of the counts and
# positions that the exporter computes in f32 (mask sums, argmax, sort
# indices, the positions of lookups by computed indices).
EXACT_IN_F32 = 1 << 24


def norm_dim(ex, dim, rank):
    dim = operator.index(dim)
    if not -max(rank, 1) <= dim < max(rank, 1):
        ex.fail("dimension %d is out of range for rank %d" % (dim, rank))
    return dim % rank if rank else 0


def full(ex, shape, value, dtype):
    """A constant of ``shape`` filled with the number ``value`` in
    ``dtype`` (a splat: one fill at run time)."""
    return ex.emit.constant(
        np.full(shape, value, NUMPY.get(dtype, np.float32)), dtype)


def mask_as_float(ex, mask, dtype):
    """The i1 ``mask`` as 1 and 0 of float ``dtype``: a ``where`` between
    constants (PyTorch's promotion of a bool tensor in arithmetic)."""
    return ex.emit.where(mask, full(ex, mask.shape, 1.0, dtype),
                         full(ex, mask.shape, 0.0, dtype))


def float_input(ex, arg):
    x = ex.val(arg)
    if x.dtype not in FLOAT_TYPES:
        ex.fail("expected a float tensor, got element type %s" % x.dtype)
    return x


def as_number(ex, arg):
    """The Python number ``arg`` stands for, or None if it is a tensor of
    more than one element or not known at export time."""
    if ex.is_symbolic(arg):
        return None
    value = ex.concrete(arg)
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return float(value)
    ex.fail("unsupported operand of type %s" % type(value).__name__)


# The fields of the named tuples PyTorch returns (values, indices).
_FIELDS = {"values": 0, "indices": 1}


def tuple_element(node):
    """The index (or slice) of the tuple element the fx ``node`` takes:
    ``t[i]``, or ``t.values`` / ``t.indices`` of a (values, indices) named
    tuple; None for any other node."""
    if node.op != "call_function" or len(node.args) != 2:
        return None
    if node.target is operator.getitem:
        return node.args[1]
    if node.target is getattr and node.args[1] in _FIELDS:
        return _FIELDS[node.args[1]]
    return None


def read_results(node, length):
    """The elements of the fx ``node``'s tuple result (of ``length``) that
    something reads, as non-negative indices; all of them when the tuple
    itself is used other than through an element."""
    read = set()
    for user in node.users:
        element = tuple_element(user)
        if not isinstance(element, int):
            return set(range(length))
        if user.users:
            read.add(element % length)
    return read


def only_first_result_read(node, length):
    """Whether only the first element of the fx ``node``'s tuple result (of
    ``length``) is read (``values, _ = x.max(1)``, ``out, _ = mha(...)``)."""
    return read_results(node, length) <= {0}


def values_shape(ex, call, what):
    """PyTorch's result shape for a call that may also return indices
    (max along a dimension, pooling with indices), which memopt does not
    compute: the values' shape, once it is sure nothing reads the
    indices."""
    if not isinstance(call.out, tuple):
        return tuple(call.out.shape)
    if not only_first_result_read(call.node, 2):
        ex.fail("the indices (the second result) of %s are read: memopt "
                "computes only the values" % what)
    return tuple(call.out[0].shape)


def unit_sign(ex, x):
    """copysign(1, x) with no gradient: 1 for +0 and above, -1 for -0 and
    below (1/x tells the zeros apart, and its sign is 0 only at +-inf)."""
    emit = ex.emit
    inverse_sign = emit.unary("sign", emit.scalar("pow_scalar", x, -1.0))
    return emit.unary("sign", emit.binary("add", emit.unary("sign", x),
                                          emit.scalar("mul_scalar",
                                                      inverse_sign, 0.5)))


def step(ex, x, edge=0.0):
    """1 where x > edge, 0 elsewhere (exactly: x - edge is 0 only at x =
    edge), with no gradient."""
    if edge:
        x = ex.emit.scalar("add_scalar", x, -edge)
    return ex.emit.unary("sign", ex.emit.unary("relu", x))


def select(ex, a, b, selector):
    """a (1 - selector) + b selector: exactly b where the 0/1 ``selector``
    is 1 and a where it is 0 (for finite a and b), with the gradient
    passing to the selected operand only."""
    rest = ex.emit.scalar("add_scalar", ex.emit.unary("neg", selector), 1.0)
    return ex.emit.binary("add", ex.emit.binary("mul", a, rest),
                          ex.emit.binary("mul", b, selector))


def in_f32(handler):
    """``handler`` with the ops it emits marked to run in f32 under mixed
    precision (``memopt.precision = "f32"``): the decompositions of what
    autocast runs in f32 (norms, distances, cumulative sums and products),
    whose own ops the pass would otherwise run in the input's dtype."""
    @functools.wraps(handler)
    def wrapped(ex, call):
        saved = ex.emit.precision
        ex.emit.precision = "f32"
        try:
            return handler(ex, call)
        finally:
            ex.emit.precision = saved
    return wrapped


def as_rows(ex, x, dim):
    """``x`` with ``dim`` moved last, flattened to rows: (rows, n), and the
    function that undoes it for a result of (rows, m)."""
    perm = [d for d in range(x.rank) if d != dim] + [dim]
    moved = ex.emit.transpose(x, perm) if dim != x.rank - 1 else x
    lead = moved.shape[:-1]
    rows = int(np.prod(lead))
    flat = ex.emit.reshape(moved, (rows, x.shape[dim]))

    def restore(y):
        y = ex.emit.reshape(y, lead + (y.shape[-1],))
        if dim == x.rank - 1:
            return y
        return ex.emit.transpose(y, list(np.argsort(perm)))
    return flat, restore
