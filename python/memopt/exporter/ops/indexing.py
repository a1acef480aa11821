"""Indexing by indices known at export time: flip, index_select, gather,
take_along_dim and diagonal.

A lookup is a row lookup (memopt.embedding) in a table whose rows are the
input's slices along one dimension (flip, index_select), or its elements
(gather, take_along_dim), with the row numbers PyTorch reads computed here;
its gradient is the lookup's, a scatter-add, so repeated indices
accumulate as in PyTorch. The indices are a constant of the step, one per
slice or per element read. A diagonal is a strided slice of the flattened
matrices and needs no indices."""

import numpy as np
import torch

from ..emit import FLOAT_TYPES
from ..registry import handles
from .common import float_input, norm_dim


def _moved_to_front(ex, x, dim):
    """``x`` with dimension ``dim`` first, and the permutation applied."""
    perm = [dim] + [d for d in range(x.rank) if d != dim]
    return ex.emit.transpose(x, perm), perm


def rows_along(ex, x, dim, rows):
    """The slices of ``x`` along ``dim`` numbered ``rows`` (integers in
    [0, extent)), in that order: the result's extent along ``dim`` is
    len(rows)."""
    y, perm = _moved_to_front(ex, x, dim)
    rest = y.shape[1:]
    table = ex.emit.reshape(y, (y.shape[0], int(np.prod(rest))))
    picked = ex.emit.embedding(
        table, ex.emit.constant(np.asarray(rows, dtype=np.int64), "i64"))
    y = ex.emit.reshape(picked, (len(rows),) + rest)
    return ex.emit.transpose(y, list(np.argsort(perm)))


def _index_tensor(ex, arg, what, extent):
    """The constant integer tensor ``arg`` with its negative entries wrapped,
    checked against ``extent``; indices computed in ``forward`` are
    refused."""
    index = ex.const(arg, what)
    if not isinstance(index, torch.Tensor) or \
            index.dtype not in (torch.int64, torch.int32):
        ex.fail("%s must be an integer tensor known at export time" % what)
    if index.numel() and not bool(((index >= -extent) &
                                   (index < extent)).all()):
        ex.fail("%s has an entry out of range for a dimension of size %d"
                % (what, extent))
    return (index.to(torch.int64) % max(extent, 1)).numpy()


@handles("input, dims", functions=[torch.flip], methods=["flip"])
@handles("input", functions=[torch.fliplr, torch.flipud],
         methods=["fliplr", "flipud"])
def _flip(ex, call):
    """The input with the order of the elements along each of ``dims``
    reversed (fliplr: dimension 1, flipud: dimension 0)."""
    x = ex.val(call.args["input"])
    if "dims" in call.args:
        dims = ex.const(call.args["dims"], "dims")
        dims = [dims] if isinstance(dims, int) else list(dims)
    else:
        dims = [1 if call.node.target in (torch.fliplr, "fliplr") else 0]
        if x.rank < dims[0] + 1:
            ex.fail("expected a tensor of rank %d or more, got %s"
                    % (dims[0] + 1, x.type))
    if x.dtype not in FLOAT_TYPES:
        ex.fail("only a floating-point tensor can be flipped")
    for dim in sorted(set(norm_dim(ex, d, x.rank) for d in dims)):
        if x.rank and x.shape[dim] > 1:
            x = rows_along(ex, x, dim, range(x.shape[dim] - 1, -1, -1))
    return x


@handles("input, dim, index", functions=[torch.index_select],
         methods=["index_select"])
def _index_select(ex, call):
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    extent = x.shape[dim] if x.rank else 1
    index = _index_tensor(ex, call.args["index"], "index", extent)
    if index.ndim > 1 or index.size == 0:
        ex.fail("index must be a non-empty vector, got shape %s"
                % list(index.shape))
    if x.rank == 0:
        return x
    return rows_along(ex, x, dim, index.reshape(-1))


@handles("input, dim, index, sparse_grad=False", functions=[torch.gather],
         methods=["gather"])
@handles("input, indices, dim=None", functions=[torch.take_along_dim],
         methods=["take_along_dim"])
def _gather(ex, call):
    """out[i...] = input[i... with index[i...] along dim]: a lookup of the
    flattened input's elements, one per element of the result.
    take_along_dim broadcasts the index and the input against each other
    (without a dim, it indexes the flattened input)."""
    x = float_input(ex, call.args["input"])
    out = ex.out_shape(call)
    dim = ex.const(call.args.get("dim"), "dim")
    if "indices" in call.args and dim is None:
        x = ex.emit.reshape(x, (int(np.prod(x.shape)),))
        dim = 0
    if x.rank == 0:
        x = ex.emit.reshape(x, (1,))
    dim = norm_dim(ex, dim, x.rank)
    what = "index" if "index" in call.args else "indices"
    index = _index_tensor(ex, call.args[what], what, x.shape[dim])
    if x.rank == 1:
        index = index.reshape(-1)
    if index.size == 0:
        ex.fail("%s is empty" % what)
    if index.ndim != x.rank and not (index.ndim <= 1 and x.rank == 1):
        ex.fail("%s has rank %d, the input %d" % (what, index.ndim, x.rank))
    index = index.reshape(index.shape + (1,) * (x.rank - index.ndim))
    if "indices" in call.args:
        # take_along_dim: every dimension but dim broadcasts, then gathers.
        shape = tuple(max(a, b) if d != dim else b for d, (a, b) in
                      enumerate(zip(x.shape, index.shape)))
        x = ex.emit.broadcast_to(
            x, shape[:dim] + (x.shape[dim],) + shape[dim + 1:])
        index = np.broadcast_to(index, shape)
    if any(i > s for d, (i, s) in enumerate(zip(index.shape, x.shape))
           if d != dim):
        ex.fail("%s of shape %s is larger than the input %s outside "
                "dimension %d" % (what, list(index.shape), x.type, dim))
    strides = np.array([int(np.prod(x.shape[d + 1:]))
                        for d in range(x.rank)], dtype=np.int64)
    position = np.indices(index.shape, dtype=np.int64)
    position[dim] = index
    flat = np.tensordot(strides, position, axes=1).reshape(-1)
    table = ex.emit.reshape(x, (int(np.prod(x.shape)), 1))
    picked = ex.emit.embedding(table, ex.emit.constant(flat, "i64"))
    return ex.emit.reshape(picked, out)


@handles("input, offset=0, dim1=0, dim2=1", functions=[torch.diagonal],
         methods=["diagonal"])
def _diagonal(ex, call):
    """The ``offset``-th diagonal of the matrices over ``dim1`` and ``dim2``,
    as a new last dimension: those two dimensions moved last and
    flattened, then every (columns + 1)-th element from the diagonal's
    first."""
    x = float_input(ex, call.args["input"])
    if x.rank < 2:
        ex.fail("expected a tensor of rank 2 or more, got %s" % x.type)
    d1, d2 = (norm_dim(ex, ex.const(call.args[k], k), x.rank)
              for k in ("dim1", "dim2"))
    if d1 == d2:
        ex.fail("dim1 and dim2 are both dimension %d" % d1)
    offset = ex.const(call.args["offset"], "offset")
    out = ex.out_shape(call)
    length = out[-1]
    if length == 0:
        ex.fail("the diagonal %d of a %dx%d matrix is empty"
                % (offset, x.shape[d1], x.shape[d2]))
    rest = [d for d in range(x.rank) if d not in (d1, d2)]
    y = ex.emit.transpose(x, rest + [d1, d2])
    rows, cols = x.shape[d1], x.shape[d2]
    batch = tuple(x.shape[d] for d in rest)
    y = ex.emit.reshape(y, batch + (rows * cols,))
    first = offset if offset >= 0 else -offset * cols
    starts = [0] * len(batch) + [first]
    limits = list(batch) + [first + (length - 1) * (cols + 1) + 1]
    y = ex.emit.slice(y, starts, limits, [1] * len(batch) + [cols + 1])
    return ex.emit.reshape(y, out)
