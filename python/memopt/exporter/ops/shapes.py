"""Shapes and indexing: views and reshapes, transposes (and movedim),
broadcasts, dtype conversions, indexing and slicing (narrow, select),
concatenation and splitting, repeat and tile, padding, rolling, tril,
triu and trace, and zero_/fill_ of a computed tensor."""

import builtins
import math
import operator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..dtypes import dtype_name
from ..emit import FLOAT_TYPES, INDEX_TYPES
from ..registry import handles, register, returns_tuple
from .common import (EXACT_IN_F32, as_number, float_input, full,
                     norm_dim, read_results)
from .indexing import flat_positions, rows_along


@handles("input, *rest, **", functions=[torch.reshape, torch.flatten,
                                        torch.squeeze, torch.unsqueeze],
         methods=["view", "reshape", "flatten", "squeeze", "unsqueeze",
                  "view_as", "reshape_as", "unflatten"])
@handles("input, dim, sizes", functions=[torch.unflatten])
@handles("input", functions=[torch.atleast_1d, torch.atleast_2d,
                             torch.atleast_3d])
@handles("input", modules=[nn.Flatten, nn.Unflatten])
def _reshape(ex, call):
    """view, reshape, flatten, unflatten, squeeze, unsqueeze, atleast_nd:
    expand-free shape changes whose result shape is PyTorch's."""
    return ex.emit.reshape(ex.val(call.args["input"]), ex.out_shape(call))


@handles("input", functions=[torch.conj, torch.conj_physical,
                             torch.resolve_conj, torch.resolve_neg,
                             torch.real],
         methods=["conj", "resolve_conj", "resolve_neg"])
@handles("input, *rest, **", methods=["contiguous"])
@handles("input", modules=[nn.Identity])
@handles("input, memory_format=None", functions=[torch.clone],
         methods=["clone"])
def _identity(ex, call):
    """Copies and views that change nothing, and the conjugate or real part
    of a real tensor."""
    return ex.val(call.args["input"])


@handles("input, *rest, **",
         methods=["to", "type", "type_as", "float", "long", "int", "bool",
                  "cpu", "cuda"])
def _convert(ex, call):
    """Tensor.to / float / long / bool / type_as ...: a no-op, a cast (a
    float made an index truncates toward zero), a mask as 1 and 0, or the
    mask of the nonzero elements."""
    x = ex.val(call.args["input"])
    dtype = dtype_name(call.out.dtype, "the result")
    if dtype == x.dtype:
        return x
    if dtype in FLOAT_TYPES:
        return ex.emit.cast(x, dtype) if x.dtype in FLOAT_TYPES \
            else ex.val(call.args["input"], dtype)
    if dtype == "i1":
        return ex.emit.compare("ne", x, full(ex, x.shape, 0, x.dtype))
    if x.dtype == "i1":
        return ex.emit.where(x, full(ex, x.shape, 1, dtype),
                             full(ex, x.shape, 0, dtype))
    return ex.emit.cast(x, dtype)


@handles("input, *rest, **", methods=["expand", "expand_as"])
@handles("input, *rest", functions=[torch.broadcast_to])
def _expand(ex, call):
    return ex.emit.broadcast_to(ex.val(call.args["input"]),
                                ex.out_shape(call))


@handles("input, dim0, dim1",
         functions=[torch.transpose, torch.swapaxes, torch.swapdims],
         methods=["transpose", "swapaxes", "swapdims"])
@handles("input", functions=[torch.t], methods=["t"])
def _transpose(ex, call):
    x = ex.val(call.args["input"])
    perm = list(range(x.rank))
    if "dim0" in call.args:
        d0 = norm_dim(ex, ex.const(call.args["dim0"]), x.rank)
        d1 = norm_dim(ex, ex.const(call.args["dim1"]), x.rank)
        if x.rank == 0:  # a scalar's only dimension swapped with itself
            return x
        perm[d0], perm[d1] = perm[d1], perm[d0]
    elif x.rank == 2:  # .t(), .T
        perm = [1, 0]
    elif x.rank > 2:
        ex.fail(".t() / .T expects a tensor of rank 2 at most")
    return ex.emit.transpose(x, perm)


def _swap_last(ex, call):
    x = ex.val(call.args["input"])
    if x.rank < 2:
        ex.fail("expects a tensor of rank 2 or more")
    return ex.emit.transpose(x, list(range(x.rank - 2)) +
                             [x.rank - 1, x.rank - 2])


@handles("input, *dims", methods=["permute"])
@handles("input, dims", functions=[torch.permute])
def _permute(ex, call):
    x = ex.val(call.args["input"])
    dims = ex.const(call.args["dims"])
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return ex.emit.transpose(x, [norm_dim(ex, d, x.rank) for d in dims])


@handles("input, name", functions=[builtins.getattr])
def _getattr(ex, call):
    name = ex.const(call.args["name"])
    if name == "T":  # reverses every dimension
        x = ex.val(call.args["input"])
        return ex.emit.transpose(x, list(reversed(range(x.rank))))
    if name in ("mT", "mH"):  # a real tensor's adjoint is its transpose
        return _swap_last(ex, call)
    if name == "H":
        x = ex.val(call.args["input"])
        if x.rank != 2:
            ex.fail(".H expects a matrix, got %s" % x.type)
        return ex.emit.transpose(x, [1, 0])
    ex.fail("attribute '%s' is not supported" % name)


@handles("input, index", functions=[operator.getitem])
def _getitem(ex, call):
    """Static indexing: ints, slices with a positive step, None and
    Ellipsis, as one memopt.slice and a reshape."""
    x = ex.val(call.args["input"])
    if ex.is_symbolic(call.args["index"]):
        if isinstance(call.args["index"], torch.fx.Node):
            return _lookup_rows(ex, call, x, ex.val(call.args["index"]))
        return _lookup_elements(ex, call, x, call.args["index"])
    index = ex.const(call.args["index"], "index")
    if isinstance(index, torch.Tensor):
        return _gather_rows(ex, call, x, index)
    if not isinstance(index, tuple):
        index = (index,)
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    items = []
    for item in index:
        if item is Ellipsis:
            items.extend([slice(None)] * (x.rank - consumed))
        else:
            items.append(item)
    starts, limits, strides = [], [], []
    dim = 0
    for item in items:
        if item is None:
            continue
        if dim >= x.rank:
            ex.fail("too many indices for a tensor of rank %d" % x.rank)
        size = x.shape[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            count = len(range(start, stop, step))
            if count == 0:
                ex.fail("the slice %s of dimension %d is empty" % (item, dim))
            starts.append(start)
            limits.append(start + (count - 1) * step + 1)
            strides.append(step)
        elif isinstance(item, int) and not isinstance(item, bool):
            i = item + size if item < 0 else item
            starts.append(i)
            limits.append(i + 1)
            strides.append(1)
        else:
            ex.fail("indexing with %s is not supported (only ints, slices, "
                    "None and ...)" % type(item).__name__)
        dim += 1
    starts += [0] * (x.rank - dim)
    limits += list(x.shape[dim:])
    strides += [1] * (x.rank - dim)
    y = x
    if tuple(starts) != (0,) * x.rank or tuple(limits) != x.shape or \
            tuple(strides) != (1,) * x.rank:
        y = ex.emit.slice(x, starts, limits, strides)
    return ex.emit.reshape(y, ex.out_shape(call))


def _lookup_rows(ex, call, x, index):
    """x[index] with an integer tensor the step computes (``table[ids]``):
    the rows of ``x`` it names, by memopt.embedding, whose range check
    stops the step at an index outside [0, rows) (PyTorch raises, or wraps
    a negative one)."""
    if index.dtype == "i1":
        ex.fail("indexing with a bool mask computed in the step is not "
                "supported: the result's shape would depend on the data")
    if index.dtype not in INDEX_TYPES:
        ex.fail("indexing with a %s tensor is not supported (only an "
                "integer tensor, which gathers rows)" % index.dtype)
    if x.dtype not in FLOAT_TYPES or x.rank == 0:
        ex.fail("only rows of a floating-point tensor can be gathered")
    table = ex.emit.reshape(x, (x.shape[0], int(np.prod(x.shape[1:]))))
    rows = ex.emit.reshape(index, (int(np.prod(index.shape)),))
    return ex.emit.reshape(ex.emit.embedding(table, rows), ex.out_shape(call))


def _lookup_elements(ex, call, x, items):
    """x[i, j, ...] with integer tensors (or ints) for its leading
    dimensions, one of them computed in the step (``logits[arange(n),
    labels]``), and full slices after them: the rows of x viewed as a table
    over those dimensions, at the positions the indices name, broadcast
    together as PyTorch does. The positions are summed in f32 (exact: the
    table has at most 2^24 rows); an index outside its dimension (a
    negative one too, which PyTorch would wrap) becomes position -1, where
    the lookup's range check stops the step."""
    if not isinstance(items, (tuple, list)):
        ex.fail("unsupported index %s" % type(items).__name__)

    def whole(item):
        value = ex.const(item, "index")
        return value is Ellipsis or value == slice(None)

    indices = []
    for position, item in enumerate(items):
        if isinstance(item, torch.fx.Node) and ex.is_symbolic(item):
            indices.append(ex.val(item))
            continue
        value = ex.const(item, "index")
        if isinstance(value, int) and not isinstance(value, bool) or \
                isinstance(value, torch.Tensor) and value.dtype in (
                    torch.int64, torch.int32):
            value = torch.as_tensor(value, dtype=torch.int64)
            extent = x.shape[position] if position < x.rank else 0
            if value.numel() and not bool(((value >= -extent) &
                                           (value < extent)).all()):
                ex.fail("index %d is out of range for a dimension of size %d"
                        % (position, extent))
            indices.append(ex.emit.constant(
                (value % max(extent, 1)).numpy(), "i64"))
            continue
        if isinstance(value, torch.Tensor) or not all(
                whole(rest) for rest in items[position:]):
            ex.fail("indexing with tensors is supported on the leading "
                    "dimensions, followed by full slices only")
        break
    lead = len(indices)
    if x.dtype not in FLOAT_TYPES or lead > x.rank:
        ex.fail("only a floating-point tensor of rank %d or more can be "
                "indexed so" % lead)
    for index in indices:
        if index.dtype not in INDEX_TYPES:
            ex.fail("indexing with a %s tensor is not supported" % index.dtype)
    shape = tuple(np.broadcast_shapes(*(i.shape for i in indices)))
    rows = int(np.prod(x.shape[:lead]))
    if rows > EXACT_IN_F32:
        ex.fail("indexing %d rows by indices computed in the step is not "
                "supported (at most 2^24)" % rows)
    emit = ex.emit
    terms = [(emit.broadcast_to(index, shape),
              int(np.prod(x.shape[d + 1:lead])), x.shape[d])
             for d, index in enumerate(indices)]
    table = emit.reshape(x, (rows, int(np.prod(x.shape[lead:]))))
    picked = emit.embedding(table, flat_positions(ex, terms, None))
    return emit.reshape(picked, ex.out_shape(call))


def _gather_rows(ex, call, x, index):
    """x[index] with a constant integer tensor: rows of ``x`` (dimension 0)
    gathered by memopt.embedding, whose backward scatter-adds."""
    if index.dtype not in (torch.int64, torch.int32) or index.dim() == 0:
        ex.fail("indexing with a %s tensor of shape %s is not supported (only "
                "an integer tensor of rank 1 or more, which gathers rows)"
                % (index.dtype, list(index.shape)))
    if x.dtype not in FLOAT_TYPES or x.rank == 0:
        ex.fail("only rows of a floating-point tensor can be gathered")
    rows = x.shape[0]
    if index.numel() and not bool(((index >= -rows) & (index < rows)).all()):
        ex.fail("an index is out of range for a dimension of size %d" % rows)
    flat = (index.reshape(-1) % rows).to(torch.int64).numpy()
    table = ex.emit.reshape(x, (rows, int(np.prod(x.shape[1:]))))
    gathered = ex.emit.embedding(table, ex.emit.constant(flat, "i64"))
    return ex.emit.reshape(gathered, ex.out_shape(call))


@handles("tensors, dim=0", functions=[torch.cat, torch.concat])
def _cat(ex, call):
    dtype = dtype_name(call.out.dtype, "the result")
    values = ex.vals(call.args["tensors"], dtype)
    dim = norm_dim(ex, ex.const(call.args["dim"]), values[0].rank)
    if len(values) == 1:
        return values[0]
    return ex.emit.concat(values, dim)


@handles("tensors, dim=0", functions=[torch.stack])
def _stack(ex, call):
    """torch.stack: each operand with a unit dimension at ``dim``, then one
    concat."""
    dtype = dtype_name(call.out.dtype, "the result")
    values = ex.vals(call.args["tensors"], dtype)
    rank = values[0].rank + 1
    dim = norm_dim(ex, ex.const(call.args["dim"]), rank)
    values = [ex.emit.reshape(v, v.shape[:dim] + (1,) + v.shape[dim:])
              for v in values]
    if len(values) == 1:
        return values[0]
    return ex.emit.concat(values, dim)


@returns_tuple
@handles("input, chunks, dim=0", functions=[torch.chunk],
         methods=["chunk"])
@handles("input, split_size=None, dim=0", methods=["split"])
@handles("input, split_size_or_sections=None, dim=0",
         functions=[torch.split])
@handles("input, split_sizes, dim=0", functions=[torch.split_with_sizes],
         methods=["split_with_sizes"])
@handles("input, indices_or_sections, dim=0", functions=[torch.tensor_split],
         methods=["tensor_split"])
@handles("input, indices_or_sections",
         functions=[torch.hsplit, torch.vsplit, torch.dsplit],
         methods=["hsplit", "vsplit", "dsplit"])
@handles("input, dim=0", functions=[torch.unbind], methods=["unbind"])
def _split(ex, call):
    """chunk, split, split_with_sizes, tensor_split, hsplit, vsplit, dsplit
    and unbind: a tuple of consecutive slices along ``dim``, their sizes
    those of PyTorch's pieces (an unbind's without the dimension)."""
    x = ex.val(call.args["input"])
    target = call.node.target
    name = target if isinstance(target, str) else target.__name__
    if "dim" in call.args:
        dim = ex.const(call.args["dim"], "dim")
    else:  # hsplit splits columns (of a vector, its elements)
        dim = {"vsplit": 0, "hsplit": 1 if x.rank > 1 else 0,
               "dsplit": 2}[name]
    dim = norm_dim(ex, dim, x.rank)
    unbind = name == "unbind"
    read = read_results(call.node, len(call.out))
    pieces, start = [], 0
    for index, piece in enumerate(call.out):
        size = 1 if unbind else piece.shape[dim]
        if size == 0:  # memopt has no empty tensors
            if index in read:
                ex.fail("piece %d is empty, which memopt does not support"
                        % index)
            pieces.append(None)
            continue
        starts = [0] * x.rank
        limits = list(x.shape)
        starts[dim], limits[dim] = start, start + size
        y = x
        if size != x.shape[dim]:
            y = ex.emit.slice(x, starts, limits, [1] * x.rank)
        pieces.append(ex.emit.reshape(y, tuple(piece.shape)))
        start += size
    return tuple(pieces)


# The element that padding position j (from -low to n + high) of a
# dimension of n copies, per non-constant mode of F.pad.
_BORDER_INDEX = {
    "reflect": lambda j, n: abs(j) if j < n else 2 * (n - 1) - j,
    "replicate": lambda j, n: min(max(j, 0), n - 1),
    "circular": lambda j, n: j % n,
}


@handles("input, pad, mode='constant', value=None", functions=[F.pad])
@handles("input, pad, value=0", functions=[torch.constant_pad_nd])
def _pad(ex, call):
    """F.pad. In constant mode, negative amounts crop (a slice), positive
    ones pad with zeros (memopt.slice_grad, whose backward is the slice),
    and a value other than 0 is added where the padding is (a constant over
    the padded dimensions, broadcast over the others). In reflect,
    replicate and circular mode, each padded dimension is a lookup of the
    input's slices (indexing.rows_along), whose backward adds a copied
    slice's gradient to its source."""
    x = float_input(ex, call.args["input"])
    amounts = list(ex.const(call.args["pad"], "padding"))
    mode = ex.const(call.args.get("mode", "constant"))
    value = ex.const(call.args["value"])
    if len(amounts) % 2 or len(amounts) // 2 > x.rank:
        ex.fail("the padding %s does not pair up with the dimensions of %s"
                % (amounts, x.type))
    low, high = [0] * x.rank, [0] * x.rank
    for i in range(len(amounts) // 2):
        low[x.rank - 1 - i] = amounts[2 * i]
        high[x.rank - 1 - i] = amounts[2 * i + 1]
    if mode in _BORDER_INDEX:
        # Negative amounts crop first; the rest pads the cropped input.
        for d, (lo, hi) in enumerate(zip(low, high)):
            first = max(-lo, 0)
            n = x.shape[d] - first - max(-hi, 0)
            if lo or hi:
                rows = [first + _BORDER_INDEX[mode](j, n)
                        for j in range(-max(lo, 0), n + max(hi, 0))]
                x = rows_along(ex, x, d, rows)
        return x
    if mode != "constant":
        ex.fail("mode='%s' is not supported" % mode)
    if not isinstance(value, (int, float, type(None))) or (
            value is not None and not math.isfinite(value)):
        ex.fail("padding with value=%r is not supported (a finite number)"
                % (value,))
    if any(lo < 0 or hi < 0 for lo, hi in zip(low, high)):
        starts = [max(-lo, 0) for lo in low]
        limits = [d - max(-hi, 0) for d, hi in zip(x.shape, high)]
        x = ex.emit.slice(x, starts, limits, [1] * x.rank)
        low, high = [max(lo, 0) for lo in low], [max(hi, 0) for hi in high]
    if not any(low) and not any(high):
        return x
    shape = [lo + d + hi for lo, d, hi in zip(low, x.shape, high)]
    y = ex.emit.pad(x, low, shape)
    if not value:
        return y
    padded = len(amounts) // 2
    fill = np.full(shape[-padded:], value, dtype=np.float32)
    fill[tuple(slice(lo, lo + d) for lo, d in
               zip(low[-padded:], x.shape[-padded:]))] = 0
    fill = ex.emit.constant(fill, "f32")
    if padded < x.rank:
        fill = ex.emit.broadcast(fill, list(range(x.rank - padded, x.rank)),
                                 shape)
    return ex.emit.binary("add", y, fill)


@handles("input, shifts, dims=None", functions=[torch.roll],
         methods=["roll"])
def _roll(ex, call):
    """torch.roll along given dimensions: two slices and a concat each."""
    x = ex.val(call.args["input"])
    shifts, dims = ex.const(call.args["shifts"]), ex.const(call.args["dims"])
    if dims is None or dims == ():
        ex.fail("torch.roll without dims (of the flattened tensor) is not "
                "supported")
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        ex.fail("shifts and dims differ in length")
    for shift, dim in zip(shifts, dims):
        dim = norm_dim(ex, dim, x.rank)
        size = x.shape[dim]
        shift %= size
        if shift == 0:
            continue
        def part(start, stop):
            starts, limits = [0] * x.rank, list(x.shape)
            starts[dim], limits[dim] = start, stop
            return ex.emit.slice(x, starts, limits, [1] * x.rank)
        x = ex.emit.concat([part(size - shift, size), part(0, size - shift)],
                           dim)
    return x


def inplace_fill(ex, node):
    """``t.zero_()`` / ``t.fill_(v)`` where ``t`` is a tensor the model
    computed (a clone of a parameter, say) or a static view ``t = base[i]``
    of one: every later use of ``base`` reads a masked_fill of its old
    value, the positions of the view taken from PyTorch itself."""
    target = node.args[0]
    value = 0.0 if node.target == "zero_" else as_number(ex, node.args[1])
    if value is None:
        ex.fail("filling with a tensor is not supported")
    base, index = target, None
    if target.op == "call_function" and target.target is operator.getitem:
        base, index = target.args[0], ex.const(target.args[1], "index")
    later = [u for u in list(node.users) + list(target.users)
             if u is not node and u is not target]
    if base is not target and later:
        ex.fail("the view it fills is read afterwards: fill the tensor the "
                "view is taken from, or use masked_fill")
    old = ex.val(base)
    if old.dtype not in FLOAT_TYPES or base.op in ("get_attr",
                                                   "placeholder"):
        ex.fail("only a floating-point tensor computed by the model can be "
                "filled in place (clone a parameter first)")
    mask = torch.zeros(old.shape, dtype=torch.bool)
    if index is None:
        mask[...] = True
    else:
        mask[index] = True
    ex.values[base] = ex.emit.masked_fill(
        old, ex.emit.constant(mask.numpy(), "i1"), value)
    if base is target:
        ex.values[node] = ex.values[base]


@handles("input, source, destination", functions=[torch.movedim,
                                                  torch.moveaxis],
         methods=["movedim", "moveaxis"])
def _movedim(ex, call):
    x = ex.val(call.args["input"])
    source, destination = (ex.const(call.args[k]) for k in
                           ("source", "destination"))
    if isinstance(source, int):
        source, destination = [source], [destination]
    if len(source) != len(destination):
        ex.fail("source and destination name different numbers of "
                "dimensions")
    perm = [None] * x.rank
    for s, d in zip(source, destination):
        perm[norm_dim(ex, d, x.rank)] = norm_dim(ex, s, x.rank)
    rest = iter(i for i in range(x.rank) if i not in perm)
    return ex.emit.transpose(x, [next(rest) if p is None else p
                                 for p in perm])


@handles("input, dim, start, length", functions=[torch.narrow],
         methods=["narrow"])
@handles("input, dim, index", functions=[torch.select], methods=["select"])
def _narrow(ex, call):
    """narrow: a slice of `length` from `start`; select: of one, whose
    dimension goes."""
    x = ex.val(call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"]), x.rank)
    # A 0-d tensor start (torch.narrow takes one) is its integer.
    start = int(ex.const(call.args.get("start", call.args.get("index"))))
    start += x.shape[dim] if start < 0 else 0
    length = int(ex.const(call.args.get("length", 1)))
    if not 0 <= start <= start + length <= x.shape[dim]:
        ex.fail("the range [%d, %d) is outside dimension %d of extent %d"
                % (start, start + length, dim, x.shape[dim]))
    starts, limits = [0] * x.rank, list(x.shape)
    starts[dim], limits[dim] = start, start + length
    y = ex.emit.slice(x, starts, limits, [1] * x.rank)
    return ex.emit.reshape(y, ex.out_shape(call))


@handles("input, *sizes", methods=["repeat"])
@handles("input, dims", functions=[torch.tile], methods=["tile"])
def _repeat(ex, call):
    """The tensor repeated along each dimension: each extent d with its
    count r becomes [r, d] (a broadcast between two reshapes), then r d."""
    x = ex.val(call.args["input"])
    counts = ex.const(call.args.get("sizes", call.args.get("dims")))
    if len(counts) == 1 and isinstance(counts[0], (tuple, list)):
        counts = counts[0]
    counts = tuple(counts)
    if len(counts) < x.rank:  # tile's leading ones
        counts = (1,) * (x.rank - len(counts)) + counts
    shape = (1,) * (len(counts) - x.rank) + x.shape
    spread, repeated = [], []
    for size, count in zip(shape, counts):
        spread += [1, size]
        repeated += [count, size]
    y = ex.emit.broadcast_to(ex.emit.reshape(x, tuple(spread)),
                             tuple(repeated))
    return ex.emit.reshape(y, ex.out_shape(call))


def _triangle(lower):
    """tril / triu: the input with the elements above (below) the
    `diagonal`-th diagonal of its last two dimensions set to 0, a
    masked_fill by a constant mask (the gradient is masked alike)."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        if x.rank < 2:
            ex.fail("expected a tensor of rank 2 or more, got %s" % x.type)
        diagonal = ex.const(call.args.get("diagonal", 0), "diagonal")
        rows, cols = x.shape[-2:]
        offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
        dropped = offset > diagonal if lower else offset < diagonal
        mask = ex.emit.constant(dropped, "i1")
        return ex.emit.masked_fill(x, ex.emit.broadcast_to(mask, x.shape),
                                   0.0)
    return handler


register("input, diagonal=0", _triangle(True), functions=[torch.tril],
         methods=["tril"])
register("input, diagonal=0", _triangle(False), functions=[torch.triu],
         methods=["triu"])


@handles("input", functions=[torch.trace], methods=["trace"])
def _trace(ex, call):
    """The sum of a matrix's diagonal: the matrix with the rest masked to 0,
    summed."""
    x = float_input(ex, call.args["input"])
    if x.rank != 2:
        ex.fail("expected a matrix, got %s" % x.type)
    off = ~np.eye(*x.shape, dtype=bool)
    masked = ex.emit.masked_fill(x, ex.emit.constant(off, "i1"), 0.0)
    return ex.emit.reduce("reduce_sum", masked, [0, 1])


@handles("input", functions=[torch.ravel], methods=["ravel"])
def _ravel(ex, call):
    x = ex.val(call.args["input"])
    return ex.emit.reshape(x, (int(np.prod(x.shape)),))


@handles("input, n=1, dim=-1, prepend=None, append=None",
         functions=[torch.diff], methods=["diff"])
def _diff(ex, call):
    """n-th forward differences along ``dim`` after concatenating prepend
    and append: each order a slice from 1 minus a slice to -1."""
    x = float_input(ex, call.args["input"])
    if x.rank == 0:
        ex.fail("expected a tensor of rank 1 or more")
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    n = ex.const(call.args["n"], "n")
    if n == 0:  # PyTorch returns the input, without prepend and append
        return x
    pieces = []
    for name in ("prepend", "append"):
        if call.args[name] is None:
            continue
        v = float_input(ex, call.args[name])
        if v.rank == 0:
            shape = list(x.shape)
            shape[dim] = 1
            v = ex.emit.broadcast_to(v, tuple(shape))
        pieces.append((name, v))
    parts = [v for name, v in pieces if name == "prepend"] + [x] + \
        [v for name, v in pieces if name == "append"]
    if len(parts) > 1:
        x = ex.emit.concat(parts, dim)
    if n >= x.shape[dim]:
        ex.fail("n=%d differences of %d elements leave none"
                % (n, x.shape[dim]))
    for _ in range(n):
        size = x.shape[dim]
        starts, limits = [0] * x.rank, list(x.shape)
        starts[dim] = 1
        later = ex.emit.slice(x, starts, limits, [1] * x.rank)
        starts[dim], limits[dim] = 0, size - 1
        earlier = ex.emit.slice(x, starts, limits, [1] * x.rank)
        x = ex.emit.binary("sub", later, earlier)
    return x


@returns_tuple
@handles("*tensors", functions=[torch.broadcast_tensors])
def _broadcast_tensors(ex, call):
    shape = tuple(call.out[0].shape)
    return tuple(ex.emit.broadcast_to(float_input(ex, t), shape)
                 for t in call.args["tensors"])


@handles("input, *size", methods=["sum_to_size"])
def _sum_to_size(ex, call):
    """The sum over the dimensions that broadcasting to the input's shape
    would expand (the leading ones, and those of size 1 in ``size``)."""
    x = float_input(ex, call.args["input"])
    out = ex.out_shape(call)
    lead = x.rank - len(out)
    dims = list(range(lead)) + [lead + i for i, n in enumerate(out)
                                if n == 1 and x.shape[lead + i] != 1]
    if dims:
        x = ex.emit.reduce("reduce_sum", x, dims)
    return ex.emit.reshape(x, out)
