"""Indexing by indices known at export time, or computed in the step
(gather, take_along_dim, index_select): flip, rot90, index_select,
gather, take_along_dim, take, masked_select, index_fill, index_add,
index_copy, scatter, scatter_add, put, diagonal, diag, diag_embed,
as_strided, Tensor.unfold, repeat_interleave, and the view scatters
(slice_scatter, select_scatter, diagonal_scatter, as_strided_scatter).

A lookup is a row lookup (memopt.embedding) in a table whose rows are the
input's slices along one dimension (flip, index_select), or its elements
(gather, take_along_dim), with the row numbers PyTorch reads computed here;
its gradient is the lookup's, a scatter-add, so repeated indices
accumulate as in PyTorch. A scatter is that scatter-add
(memopt.embedding_grad) in the forward, whose gradient is the lookup. The
indices are a constant of the step, one per slice or per element read,
or computed in the step, where the lookup's range check stops the step at
an index PyTorch would refuse. A diagonal is a strided slice of the
flattened matrices and needs no indices."""

import numpy as np
import torch

from ..emit import FLOAT_TYPES, INDEX_TYPES, Value
from ..registry import handles, register
from .common import EXACT_IN_F32, float_input, full, norm_dim


def _moved_to_front(ex, x, dim):
    """``x`` with dimension ``dim`` first, and the permutation applied."""
    perm = [dim] + [d for d in range(x.rank) if d != dim]
    return ex.emit.transpose(x, perm), perm


def rows_along(ex, x, dim, rows):
    """The slices of ``x`` along ``dim`` numbered ``rows`` (integers in
    [0, extent), or a vector of them computed in the step, which the
    runtime checks against the extent), in that order: the result's extent
    along ``dim`` is len(rows)."""
    y, perm = _moved_to_front(ex, x, dim)
    rest = y.shape[1:]
    table = ex.emit.reshape(y, (y.shape[0], int(np.prod(rest))))
    if not isinstance(rows, Value):
        rows = ex.emit.constant(np.asarray(rows, dtype=np.int64), "i64")
    picked = ex.emit.embedding(table, rows)
    y = ex.emit.reshape(picked, (rows.shape[0],) + rest)
    return ex.emit.transpose(y, list(np.argsort(perm)))


def rows_scattered(ex, source, dim, rows, extent):
    """The inverse of rows_along: a zero tensor of ``extent`` slices along
    ``dim`` into which slice k of ``source`` is added at slice rows[k]
    (repeats accumulate), a scatter-add (memopt.embedding_grad)."""
    y, perm = _moved_to_front(ex, source, dim)
    rest = y.shape[1:]
    table = ex.emit.reshape(y, (y.shape[0], int(np.prod(rest))))
    added = ex.emit.embedding_grad(
        table, ex.emit.constant(np.asarray(rows, dtype=np.int64), "i64"),
        extent)
    y = ex.emit.reshape(added, (extent,) + rest)
    return ex.emit.transpose(y, list(np.argsort(perm)))


def _computed_index(ex, arg, what):
    """The index tensor ``arg`` when the step computes it (from an input, a
    label or the forward: ``y.unsqueeze(1)``, ``x.argmax(1)``), None when it
    is known at export time. Its entries must lie in range: the runtime
    stops the step at one that does not, where PyTorch raises."""
    if not ex.is_symbolic(arg):
        return None
    index = ex.val(arg)
    if index.dtype not in INDEX_TYPES:
        ex.fail("%s must be an integer tensor, got %s" % (what, index.dtype))
    return index


def _computed_positions(ex, x, dim, index):
    """For each element of the computed ``index`` (of x's rank, its extents
    at most x's but along ``dim``), the row-major position in ``x`` it reads:
    its own coordinates with ``dim`` replaced by its value, added up in f32,
    exact because x has at most 2^24 elements, then made an int64 vector.
    An index outside [0, extent) gives position -1, which the lookup's
    range check stops at: it must not read a neighbouring row."""
    if index.rank != max(x.rank, 1) or any(
            i > e for d, (i, e) in enumerate(zip(index.shape, x.shape))
            if d != dim):
        ex.fail("index of shape %s does not fit the input %s"
                % (list(index.shape), x.type))
    if int(np.prod(x.shape)) > EXACT_IN_F32:
        ex.fail("indices computed in the step may index at most 2^24 "
                "elements")
    strides = [int(np.prod(x.shape[d + 1:])) for d in range(x.rank)]
    position = np.indices(index.shape, dtype=np.int64)
    position[dim] = 0
    base = np.tensordot(np.array(strides, dtype=np.int64), position, axes=1)
    return flat_positions(ex, [(index, strides[dim], x.shape[dim])], base)


def flat_positions(ex, terms, base):
    """The int64 vector of base + sum(index * stride) over ``terms``
    (index, stride, extent), indices computed in the step and of one shape,
    ``base`` a constant of that shape or None: summed in f32, which the
    callers keep exact (below 2^24). Where an index lies outside [0,
    extent) the position is -1, which the lookup's range check stops at,
    so that it never reads a neighbouring row."""
    emit = ex.emit
    shape = terms[0][0].shape
    flat = emit.constant(base.astype(np.float32), "f32") \
        if base is not None else full(ex, shape, 0.0, "f32")
    for index, stride, _ in terms:
        term = emit.cast(index, "f32")
        if stride != 1:
            term = emit.scalar("mul_scalar", term, float(stride))
        flat = emit.binary("add", term, flat)
    outside = full(ex, shape, -1.0, "f32")
    for index, _, extent in terms:
        for predicate, bound in (("lt", 0), ("ge", extent)):
            flat = emit.where(emit.compare(predicate, index, full(
                ex, shape, bound, index.dtype)), outside, flat)
    return emit.cast(emit.reshape(flat, (int(np.prod(shape)),)), "i64")


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
        if x.rank:
            x = _reversed(ex, x, dim)
    return x


def _reversed(ex, x, dim):
    """``x`` with the order of its slices along ``dim`` reversed."""
    n = x.shape[dim]
    return rows_along(ex, x, dim, range(n - 1, -1, -1)) if n > 1 else x


@handles("input, dim, index", functions=[torch.index_select],
         methods=["index_select"])
def _index_select(ex, call):
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    extent = x.shape[dim] if x.rank else 1
    computed = _computed_index(ex, call.args["index"], "index")
    if computed is not None:
        if computed.rank > 1:
            ex.fail("index must be a vector, got %s" % computed.type)
        rows = ex.emit.reshape(computed, (int(np.prod(computed.shape)),))
        if x.rank == 0:
            x = ex.emit.reshape(x, (1,))
        return ex.emit.reshape(rows_along(ex, x, dim, rows),
                               ex.out_shape(call))
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
    computed = _computed_index(ex, call.args[what], what)
    if computed is not None:
        return _gather_computed(ex, call, x, dim, computed, out)
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
    return _elements(ex, x, _positions(ex, x, dim, index), out)


def elements_at(ex, x, dim, index, shape):
    """The elements of ``x`` that the index computed in the step (of x's
    rank) names along ``dim``, as ``shape``: torch.gather."""
    return _elements(ex, x, _computed_positions(ex, x, dim, index), shape)


def _gather_computed(ex, call, x, dim, index, out):
    """gather / take_along_dim by an index the step computes: the lookup
    of the flattened input's elements at positions computed in the step
    (``logp.gather(1, y.unsqueeze(1))``, ``x.take_along_dim(i, 1)``)."""
    if x.rank == 1 and index.rank == 0:
        index = ex.emit.reshape(index, (1,))
    if index.rank != x.rank:
        ex.fail("the index has rank %d, the input %d" % (index.rank, x.rank))
    if "indices" in call.args:
        # take_along_dim: every dimension but dim broadcasts, then gathers.
        shape = tuple(max(a, b) if d != dim else b for d, (a, b) in
                      enumerate(zip(x.shape, index.shape)))
        x = ex.emit.broadcast_to(
            x, shape[:dim] + (x.shape[dim],) + shape[dim + 1:])
        index = ex.emit.broadcast_to(index, shape)
    return elements_at(ex, x, dim, index, out)


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


@handles("input, index", functions=[torch.take], methods=["take"])
def _take(ex, call):
    """The flattened input's elements at a constant index, in its shape."""
    x = float_input(ex, call.args["input"])
    size = int(np.prod(x.shape))
    index = _index_tensor(ex, call.args["index"], "index", size)
    if index.size == 0:
        ex.fail("index is empty")
    return _elements(ex, x, index.reshape(-1), ex.out_shape(call))


@handles("input, mask", functions=[torch.masked_select],
         methods=["masked_select"])
def _masked_select(ex, call):
    """The elements where a constant bool mask (broadcast with the input) is
    True, in row-major order: a lookup of those positions."""
    x = float_input(ex, call.args["input"])
    mask = ex.const(call.args["mask"], "mask")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        ex.fail("the mask must be a bool tensor known at export time")
    shape = tuple(torch.broadcast_shapes(x.shape, tuple(mask.shape)))
    x = ex.emit.broadcast_to(x, shape)
    positions = np.flatnonzero(np.broadcast_to(mask.numpy(), shape))
    if positions.size == 0:
        ex.fail("the mask selects nothing")
    return _elements(ex, x, positions, ex.out_shape(call))


def _elements(ex, x, positions, shape):
    """The elements of ``x`` at the row-major ``positions`` (constants, or
    a vector computed in the step), as ``shape``."""
    flat = ex.emit.reshape(x, (int(np.prod(x.shape)),))
    return ex.emit.reshape(rows_along(ex, flat, 0, positions), shape)


@handles("input, dim, index, value", functions=[torch.index_fill],
         methods=["index_fill"])
def _index_fill(ex, call):
    """The slices along ``dim`` that a constant index names, filled with a
    number: masked_fill by a constant mask."""
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    value = ex.const(call.args["value"], "value")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, (int, float)):
        ex.fail("value must be a number known at export time")
    extent = x.shape[dim] if x.rank else 1
    index = _index_tensor(ex, call.args["index"], "index", extent)
    mask = np.zeros(extent, dtype=bool)
    mask[index.reshape(-1)] = True
    mask = mask.reshape((-1,) + (1,) * (x.rank - dim - 1)) if x.rank else \
        mask.reshape(())
    mask = np.broadcast_to(mask, x.shape)
    return ex.emit.masked_fill(x, ex.emit.constant(mask, "i1"), float(value))


@handles("input, dim, index, source, alpha=1", functions=[torch.index_add],
         methods=["index_add"])
@handles("input, dim, index, source", functions=[torch.index_copy],
         methods=["index_copy"])
def _index_add(ex, call):
    """index_add: input + alpha S, where slice j of S along ``dim`` sums the
    source slices k with index[k] = j: a scatter-add of the source's slices
    (rows_scattered), whose gradient is their lookup. index_copy: the named
    slices of the input replaced (masked to zero, then S added; its indices
    must be distinct, as PyTorch's result is otherwise unspecified)."""
    x = float_input(ex, call.args["input"])
    source = float_input(ex, call.args["source"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    if x.rank == 0:
        x, source = (ex.emit.reshape(v, (1,)) for v in (x, source))
    index = _index_tensor(ex, call.args["index"], "index",
                          x.shape[dim]).reshape(-1)
    if source.rank != x.rank or source.shape[dim] != index.size:
        ex.fail("the source %s does not hold one slice per index"
                % source.type)
    added = rows_scattered(ex, source, dim, index, x.shape[dim])
    copy = "alpha" not in call.args
    if copy:
        if len(set(index.tolist())) != index.size:
            ex.fail("index_copy with a repeated index is not supported "
                    "(PyTorch's result is unspecified)")
        mask = np.zeros(x.shape[dim], dtype=bool)
        mask[index] = True
        mask = np.broadcast_to(
            mask.reshape((-1,) + (1,) * (x.rank - dim - 1)), x.shape)
        x = ex.emit.masked_fill(x, ex.emit.constant(mask, "i1"), 0.0)
    else:
        alpha = ex.const(call.args["alpha"], "alpha")
        if alpha != 1:
            added = ex.emit.scalar("mul_scalar", added, float(alpha))
    return ex.emit.reshape(ex.emit.binary("add", x, added),
                           ex.out_shape(call))


@handles("input, diagonal=0", functions=[torch.diag], methods=["diag"])
@handles("input, offset=0, dim1=-2, dim2=-1", functions=[torch.diag_embed],
         methods=["diag_embed"])
def _diag_embed(ex, call):
    """diag of a vector and diag_embed: matrices holding the last
    dimension's elements on a diagonal and zeros elsewhere, a lookup of a
    table of the elements and one zero (concat), whose gradient drops the
    zero's; diag of a matrix is its diagonal (``_diagonal``)."""
    x = float_input(ex, call.args["input"])
    embed = "dim1" in call.args
    if not embed:
        if x.rank == 2:
            call.args.update(offset=call.args.pop("diagonal"), dim1=0, dim2=1)
            return _diagonal(ex, call)
        if x.rank != 1:
            ex.fail("expected a vector or a matrix, got %s" % x.type)
    offset = ex.const(call.args.get("offset", call.args.get("diagonal")),
                      "offset")
    out = ex.out_shape(call)
    n = x.shape[-1] if x.rank else 1
    size = n + abs(offset)
    rows, cols = np.indices((size, size))
    on = cols - rows == offset
    lookup = np.full((size, size), n, dtype=np.int64)
    lookup[on] = np.arange(n)
    zero = ex.emit.constant(np.zeros(x.shape[:-1] + (1,), np.float32), "f32")
    if x.dtype != "f32":
        zero = ex.emit.cast(zero, x.dtype)
    table = ex.emit.concat([x, zero], x.rank - 1)
    y = rows_along(ex, table, x.rank - 1, lookup.reshape(-1))
    y = ex.emit.reshape(y, x.shape[:-1] + (size, size))
    if embed:
        rank = len(out)
        d1, d2 = (norm_dim(ex, ex.const(call.args[k], k), rank)
                  for k in ("dim1", "dim2"))
        # y holds [batch..., d1, d2]; put them where PyTorch puts them.
        rest = iter(range(rank - 2))
        source = [rank - 2 if d == d1 else rank - 1 if d == d2 else
                  next(rest) for d in range(rank)]
        y = ex.emit.transpose(y, source)
    return ex.emit.reshape(y, out)


@handles("input, k=1, dims=None", functions=[torch.rot90],
         methods=["rot90"])
def _rot90(ex, call):
    """k quarter turns in the plane of ``dims``, as PyTorch composes them:
    one is a flip of dims[1] and a transpose, two flip both, three a
    transpose and a flip of dims[1]."""
    x = float_input(ex, call.args["input"])
    dims = ex.const(call.args["dims"], "dims")
    dims = [norm_dim(ex, d, x.rank) for d in (dims or (0, 1))]
    if len(dims) != 2 or dims[0] == dims[1]:
        ex.fail("dims must name two different dimensions")
    k = ex.const(call.args["k"], "k") % 4
    swap = list(range(x.rank))
    swap[dims[0]], swap[dims[1]] = dims[1], dims[0]
    if k == 1:
        return ex.emit.transpose(_reversed(ex, x, dims[1]), swap)
    if k == 2:
        return _reversed(ex, _reversed(ex, x, dims[0]), dims[1])
    if k == 3:
        return _reversed(ex, ex.emit.transpose(x, swap), dims[1])
    return x


def _positions(ex, x, dim, index):
    """For each element of ``index`` (a constant, wrapped), the row-major
    position in ``x`` it reads (gather) or writes (scatter): its own
    coordinates with ``dim`` replaced by its value."""
    if index.ndim != max(x.rank, 1) or any(
            i > s for d, (i, s) in enumerate(zip(index.shape, x.shape))
            if d != dim):
        ex.fail("index of shape %s does not fit the input %s"
                % (list(index.shape), x.type))
    strides = np.array([int(np.prod(x.shape[d + 1:]))
                        for d in range(x.rank)], dtype=np.int64)
    position = np.indices(index.shape, dtype=np.int64)
    position[dim] = index
    return np.tensordot(strides, position, axes=1).reshape(-1)


def _scattered(ex, x, positions, values):
    """``x`` plus ``values`` (one per position) added at its row-major
    ``positions``: a scatter-add, whose gradient is the lookup of those
    positions."""
    added = rows_scattered(ex, ex.emit.reshape(values, (positions.size,)), 0,
                           positions, int(np.prod(x.shape)))
    return ex.emit.binary("add", x, ex.emit.reshape(added, x.shape))


@handles("input, dim, index, src=None, value=None, reduce=None",
         functions=[torch.scatter], methods=["scatter"])
@handles("input, dim, index, src", functions=[torch.scatter_add],
         methods=["scatter_add"])
@handles("input, index, source, accumulate=False", functions=[torch.put],
         methods=["put"])
def _scatter(ex, call):
    """scatter_add (and put with accumulate): the source elements that a
    constant index names added to the input, a scatter-add. scatter (and
    put): the named positions replaced, masked to zero first, with distinct
    positions only (PyTorch leaves the result of a repeat unspecified); a
    number (``value``) is a masked_fill."""
    x = float_input(ex, call.args["input"])
    flat = "source" in call.args
    if flat:
        shape = x.shape
        x = ex.emit.reshape(x, (int(np.prod(shape)),))
        dim = 0
    else:
        dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    if x.rank == 0:
        x = ex.emit.reshape(x, (1,))
    if call.args.get("reduce") is not None:
        ex.fail("reduce='%s' is not supported" % call.args["reduce"])
    index = _index_tensor(ex, call.args["index"], "index", x.shape[dim])
    if flat or index.ndim == 0:
        index = index.reshape(-1)
    positions = _positions(ex, x, dim, index)
    add = call.node.target in (torch.scatter_add, "scatter_add") or \
        (flat and ex.const(call.args["accumulate"], "accumulate"))
    source = call.args.get("src", call.args.get("source"))
    out = ex.out_shape(call)
    if positions.size == 0:
        return ex.emit.reshape(x, out)
    if not add:
        if len(set(positions.tolist())) != positions.size:
            ex.fail("index names a position twice (PyTorch's result is "
                    "unspecified)")
        mask = np.zeros(int(np.prod(x.shape)), dtype=bool)
        mask[positions] = True
        mask = ex.emit.constant(mask.reshape(x.shape), "i1")
        if source is None:
            value = ex.const(call.args["value"], "value")
            if not isinstance(value, (int, float)):
                ex.fail("value must be a number")
            return ex.emit.reshape(
                ex.emit.masked_fill(x, mask, float(value)), out)
        x = ex.emit.masked_fill(x, mask, 0.0)
    src = float_input(ex, source)
    if flat:
        src = ex.emit.reshape(src, (int(np.prod(src.shape)),))
    elif src.rank == 0:
        src = ex.emit.reshape(src, (1,))
    if src.shape != index.shape:
        # The source elements at the index's coordinates.
        if src.rank != index.ndim or any(
                i > s for i, s in zip(index.shape, src.shape)):
            ex.fail("index of shape %s is larger than the source %s"
                    % (list(index.shape), src.type))
        strides = np.array([int(np.prod(src.shape[d + 1:]))
                            for d in range(src.rank)], dtype=np.int64)
        own = np.tensordot(strides, np.indices(index.shape, dtype=np.int64),
                           axes=1).reshape(-1)
        src = _elements(ex, src, own, (own.size,))
    return ex.emit.reshape(_scattered(ex, x, positions, src), out)


def _view_positions(shape, view):
    """The row-major positions in a tensor of ``shape`` that the view
    ``view`` (a function of a tensor, PyTorch's own, which has already
    accepted the arguments) reads: the view applied to the tensor of
    positions."""
    numbered = torch.arange(int(np.prod(shape)), dtype=torch.int64)
    return view(numbered.reshape(shape)).contiguous().numpy()


def _replaced(ex, x, positions, source):
    """``x`` with the elements at the distinct row-major ``positions`` set
    to those of ``source`` (in its row-major order): masked to zero, then a
    scatter-add; the gradient reaches x where it is kept and the source
    through the lookup."""
    positions = positions.reshape(-1)
    if positions.size == 0:
        return x
    if len(set(positions.tolist())) != positions.size:
        ex.fail("the view names an element twice (PyTorch's result is "
                "unspecified)")
    mask = np.zeros(int(np.prod(x.shape)), dtype=bool)
    mask[positions] = True
    kept = ex.emit.masked_fill(x, ex.emit.constant(mask.reshape(x.shape),
                                                   "i1"), 0.0)
    return _scattered(ex, kept, positions, source)


def _slice_view(ex, call, rank):
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), rank)
    start, end, step = (ex.const(call.args[k], k)
                        for k in ("start", "end", "step"))
    index = [slice(None)] * rank
    index[dim] = slice(start, end, step)
    return lambda t: t[tuple(index)]


def _select_view(ex, call, rank):
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), rank)
    index = ex.const(call.args["index"], "index")
    return lambda t: t.select(dim, index)


def _diagonal_view(ex, call, rank):
    offset, dim1, dim2 = (ex.const(call.args[k], k)
                          for k in ("offset", "dim1", "dim2"))
    return lambda t: t.diagonal(offset, dim1, dim2)


def _strided_view(ex, call, rank):
    """as_strided over the input's storage, which is memopt's row-major
    layout only when PyTorch's input is contiguous."""
    concrete = ex.concrete(call.args["input"])
    if isinstance(concrete, torch.Tensor) and not (
            concrete.is_contiguous() and concrete.storage_offset() == 0):
        ex.fail("as_strided reads the storage of a non-contiguous tensor, "
                "whose layout memopt does not keep: call .contiguous() "
                "first")
    size, stride = (tuple(ex.const(call.args[k], k))
                    for k in ("size", "stride"))
    offset = ex.const(call.args["storage_offset"], "storage_offset") or 0
    return lambda t: t.reshape(-1).as_strided(size, stride, offset)


_VIEWS = {"slice": _slice_view, "select": _select_view,
          "diagonal": _diagonal_view, "as_strided": _strided_view}


def _view_scatter(name):
    """torch.{name}_scatter: the input with the elements its ``name`` view
    reads replaced by ``src``."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        positions = _view_positions(x.shape, _VIEWS[name](ex, call, x.rank))
        source = ex.emit.reshape(float_input(ex, call.args["src"]),
                                 (positions.size,))
        return _replaced(ex, x, positions, source)
    return handler


for _name, _signature in (
        ("slice", "input, src, dim=0, start=None, end=None, step=1"),
        ("select", "input, src, dim, index"),
        ("diagonal", "input, src, offset=0, dim1=0, dim2=1"),
        ("as_strided", "input, src, size, stride, storage_offset=None")):
    register(_signature, _view_scatter(_name),
             functions=[getattr(torch, _name + "_scatter")],
             methods=[_name + "_scatter"])


@handles("input, size, stride, storage_offset=None",
         functions=[torch.as_strided], methods=["as_strided"])
def _as_strided(ex, call):
    """A lookup of the elements the strided view reads (repeats
    accumulate in the gradient)."""
    x = float_input(ex, call.args["input"])
    positions = _view_positions(x.shape, _strided_view(ex, call, x.rank))
    if positions.size == 0:
        ex.fail("the view is empty")
    return _elements(ex, x, positions.reshape(-1), positions.shape)


@handles("input, dimension, size, step", methods=["unfold"])
def _unfold(ex, call):
    """Tensor.unfold: the windows of ``size`` every ``step`` along a
    dimension, as a new last dimension; a lookup of their elements."""
    x = float_input(ex, call.args["input"])
    dimension, size, step = (ex.const(call.args[k], k)
                             for k in ("dimension", "size", "step"))
    positions = _view_positions(
        x.shape, lambda t: t.unfold(dimension, size, step))
    if positions.size == 0:
        return ex.emit.constant(np.zeros(positions.shape, np.float32),
                                x.dtype)
    return _elements(ex, x, positions.reshape(-1), positions.shape)


@handles("input, repeats, dim=None, output_size=None",
         functions=[torch.repeat_interleave], methods=["repeat_interleave"])
def _repeat_interleave(ex, call):
    """Each slice along ``dim`` (each element of the flattened input
    without one) repeated ``repeats`` times (a number, or a constant count
    per slice): a lookup of the slices in that order."""
    x = float_input(ex, call.args["input"])
    dim = ex.const(call.args["dim"], "dim")
    if dim is None:
        x, dim = ex.emit.reshape(x, (int(np.prod(x.shape)),)), 0
    dim = norm_dim(ex, dim, x.rank)
    if x.rank == 0:
        x = ex.emit.reshape(x, (1,))
    repeats = ex.const(call.args["repeats"], "repeats")
    if isinstance(repeats, torch.Tensor):
        repeats = repeats.numpy()
    rows = np.repeat(np.arange(x.shape[dim]), repeats)
    if rows.size == 0:
        ex.fail("the result is empty")
    return ex.emit.reshape(rows_along(ex, x, dim, rows), ex.out_shape(call))
