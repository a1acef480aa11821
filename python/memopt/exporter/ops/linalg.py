"""Matrix products (matmul, bmm, mm, @, einsum, the addmm family, mv, dot,
inner, outer, tensordot, kron, cross), linear layers and embeddings."""

import operator

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from ..emit import INDEX_TYPES
from ..registry import handles
from .common import as_number, float_input, norm_dim


def _matmul_values(ex, a, b):
    """torch.matmul of two Values: vectors become matrices, batch
    dimensions that memopt.matmul does not share are broadcast, and a
    transpose of the two trailing dimensions folds into the op's flags."""
    if a.rank == 0 or b.rank == 0:
        ex.fail("both operands must have rank 1 or more")
    out_shape = None
    if a.rank == 1 and b.rank == 1:
        out_shape = ()
    elif a.rank == 1:
        out_shape = b.shape[:-2] + b.shape[-1:]
    elif b.rank == 1:
        out_shape = a.shape[:-1]
    if a.rank == 1:
        a = ex.emit.reshape(a, (1,) + a.shape)
    if b.rank == 1:
        b = ex.emit.reshape(b, b.shape + (1,))
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    if batch_a != batch_b and batch_a and batch_b:
        batch = tuple(torch.broadcast_shapes(batch_a, batch_b))
        a = ex.emit.broadcast_to(a, batch + a.shape[-2:])
        b = ex.emit.broadcast_to(b, batch + b.shape[-2:])
    transpose_lhs = a.name in ex.emit.swapped
    transpose_rhs = b.name in ex.emit.swapped
    if transpose_lhs:
        a = ex.emit.swapped[a.name]
    if transpose_rhs:
        b = ex.emit.swapped[b.name]
    y = ex.emit.matmul(a, b, transpose_lhs, transpose_rhs)
    return y if out_shape is None else ex.emit.reshape(y, out_shape)


@handles("input, other", functions=[operator.matmul, torch.matmul],
         methods=["matmul", "__matmul__"])
@handles("input, mat2", functions=[torch.bmm, torch.mm],
         methods=["bmm", "mm"])
def _matmul(ex, call):
    a = float_input(ex, call.args["input"])
    b = float_input(ex, call.args.get("other", call.args.get("mat2")))
    if a.dtype != b.dtype:
        ex.fail("operands of different element types %s and %s"
                % (a.dtype, b.dtype))
    return _matmul_values(ex, a, b)


@handles("input, other", methods=["__rmatmul__"])
def _rmatmul(ex, call):
    """``other @ input``, the reflected operator."""
    call.args["input"], call.args["other"] = \
        call.args["other"], call.args["input"]
    return _matmul(ex, call)


def linear_values(ex, x, weight, bias):
    if weight.rank != 2:
        ex.fail("the weight must be a matrix, got %s" % weight.type)
    lead = x.shape[:-1]
    if x.rank == 1:
        x = ex.emit.reshape(x, (1,) + x.shape)
    if weight.name in ex.emit.swapped:  # F.linear(x, w.t()): x @ w
        y = ex.emit.matmul(x, ex.emit.swapped[weight.name])
    else:
        y = ex.emit.matmul(x, weight, transpose_rhs=True)
    y = ex.emit.reshape(y, lead + weight.shape[:1])
    if bias is not None:
        y = ex.emit.binary("add", y, ex.emit.broadcast_to(bias, y.shape))
    return y


def linear_module(ex, m, x):
    """``nn.Linear`` ``m`` applied to the Value ``x``."""
    weight = ex.param(m.weight, "weight")
    bias = ex.param(m.bias, "bias") if m.bias is not None else None
    return linear_values(ex, x, weight, bias)


@handles("input, weight, bias=None", functions=[F.linear])
@handles("input", modules=[nn.Linear])
def _linear(ex, call):
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        return linear_module(ex, call.module, x)
    weight = float_input(ex, call.args["weight"])
    bias = float_input(ex, call.args["bias"]) \
        if call.args["bias"] is not None else None
    return linear_values(ex, x, weight, bias)


@handles("input, weight, padding_idx=None, max_norm=None, "
         "norm_type=2.0, scale_grad_by_freq=False, sparse=False",
         functions=[F.embedding])
@handles("input", modules=[nn.Embedding])
def _embedding(ex, call):
    if call.module is not None:
        m = call.module
        weight = ex.param(m.weight, "weight")
        padding_idx = m.padding_idx
        options = {"max_norm": m.max_norm,
                   "scale_grad_by_freq": m.scale_grad_by_freq,
                   "sparse": m.sparse}
    else:
        weight = float_input(ex, call.args["weight"])
        padding_idx = ex.const(call.args["padding_idx"])
        options = {k: ex.const(call.args[k]) for k in
                   ("max_norm", "scale_grad_by_freq", "sparse")}
    for name, value in options.items():
        if value is not None and value is not False:
            ex.fail("%s=%r is not supported" % (name, value))
    if padding_idx is not None:
        # As F.embedding and nn.Embedding: a negative index counts from the
        # end of the table.
        rows = weight.shape[0]
        padding_idx = int(padding_idx)
        if not -rows <= padding_idx < rows:
            ex.fail("padding_idx=%d is not a row of the %d-row table"
                    % (padding_idx, rows))
        padding_idx %= rows
    indices = ex.val(call.args["input"])
    if indices.dtype not in INDEX_TYPES:
        ex.fail("the indices must be int64 or int32, got %s" % indices.dtype)
    return ex.emit.embedding(weight, indices, padding_idx)


@handles("equation, *operands", functions=[torch.einsum])
def _einsum(ex, call):
    """torch.einsum of one or two operands without '...': sums over the
    indices only one operand has, then one (batched) memopt.matmul with the
    indices both have and the output keeps as its batch, those it drops as
    the contraction."""
    equation = ex.const(call.args["equation"], "equation").replace(" ", "")
    operands = call.args["operands"]
    if len(operands) == 1 and not isinstance(operands[0], torch.fx.Node):
        operands = operands[0]
    values = [float_input(ex, v) for v in operands]
    inputs, arrow, output = equation.partition("->")
    inputs = inputs.split(",")
    if "." in equation or len(inputs) != len(values) or len(values) > 2:
        ex.fail("only einsum equations of one or two operands without '...'"
                " are supported")
    if not arrow:
        letters = "".join(inputs)
        output = "".join(sorted(c for c in set(letters)
                                if letters.count(c) == 1))
    sizes = {}
    for spec, v in zip(inputs, values):
        if len(spec) != v.rank or len(set(spec)) != len(spec):
            ex.fail("the operand subscripts '%s' do not name the %d "
                    "dimensions of %s once each" % (spec, v.rank, v.type))
        sizes.update(zip(spec, v.shape))

    def keep_only(spec, v, wanted):
        dims = [i for i, c in enumerate(spec) if c not in wanted]
        if not dims:
            return spec, v
        return ("".join(c for c in spec if c in wanted),
                ex.emit.reduce("reduce_sum", v, dims))

    def arrange(spec, v, order):
        return ex.emit.transpose(v, [spec.index(c) for c in order])

    if len(values) == 1:
        spec, v = keep_only(inputs[0], values[0], output)
        return arrange(spec, v, output)
    (sa, a), (sb, b) = (keep_only(inputs[i], values[i],
                                  output + inputs[1 - i]) for i in (0, 1))
    batch = [c for c in output if c in sa and c in sb]
    left = [c for c in sa if c in output and c not in sb]
    right = [c for c in sb if c in output and c not in sa]
    inner = [c for c in sa if c in sb and c not in output]
    batch_shape = tuple(sizes[c] for c in batch)

    def matrix(spec, v, rows, cols):
        v = arrange(spec, v, batch + rows + cols)
        return ex.emit.reshape(v, batch_shape + (
            int(np.prod([sizes[c] for c in rows])),
            int(np.prod([sizes[c] for c in cols]))))
    lhs = matrix(sa, a, left, inner)
    rhs = ex.emit.transpose(matrix(sb, b, right, inner),
                            list(range(len(batch))) +
                            [len(batch) + 1, len(batch)])
    y = _matmul_values(ex, lhs, rhs)
    y = ex.emit.reshape(y, batch_shape + tuple(sizes[c]
                                               for c in left + right))
    return arrange("".join(batch + left + right), y, output)


def _number(ex, call, name):
    value = as_number(ex, call.args.get(name, 1))
    if value is None:
        ex.fail("'%s' must be a number known at export time" % name)
    return value


def _scaled_sum(ex, call, product):
    """``beta input + alpha product`` of the addmm family, ``input``
    broadcast to the product's shape; with beta = 0 ``input`` is ignored,
    NaN and inf included, as PyTorch ignores it."""
    beta, alpha = _number(ex, call, "beta"), _number(ex, call, "alpha")
    if alpha != 1:
        product = ex.emit.scalar("mul_scalar", product, alpha)
    if beta == 0:
        return product
    x = ex.emit.broadcast_to(float_input(ex, call.args["input"]),
                             product.shape)
    if beta != 1:
        x = ex.emit.scalar("mul_scalar", x, beta)
    return ex.emit.binary("add", x, product)


def _expect_rank(ex, value, rank, what):
    if value.rank != rank:
        ex.fail("%s must have rank %d, got %s" % (what, rank, value.type))
    return value


def _outer_values(ex, a, b):
    """The outer product of two vectors: a [n, 1] by [1, m] product."""
    _expect_rank(ex, a, 1, "the first vector")
    _expect_rank(ex, b, 1, "the second vector")
    return ex.emit.matmul(ex.emit.reshape(a, a.shape + (1,)),
                          ex.emit.reshape(b, (1,) + b.shape))


@handles("input, mat1, mat2, beta=1, alpha=1", functions=[torch.addmm],
         methods=["addmm"])
def _addmm(ex, call):
    a = _expect_rank(ex, float_input(ex, call.args["mat1"]), 2, "mat1")
    b = _expect_rank(ex, float_input(ex, call.args["mat2"]), 2, "mat2")
    return _scaled_sum(ex, call, _matmul_values(ex, a, b))


@handles("input, mat, vec, beta=1, alpha=1", functions=[torch.addmv],
         methods=["addmv"])
def _addmv(ex, call):
    a = _expect_rank(ex, float_input(ex, call.args["mat"]), 2, "mat")
    v = _expect_rank(ex, float_input(ex, call.args["vec"]), 1, "vec")
    return _scaled_sum(ex, call, _matmul_values(ex, a, v))


@handles("input, batch1, batch2, beta=1, alpha=1",
         functions=[torch.baddbmm, torch.addbmm],
         methods=["baddbmm", "addbmm"])
def _addbmm(ex, call):
    a = _expect_rank(ex, float_input(ex, call.args["batch1"]), 3, "batch1")
    b = _expect_rank(ex, float_input(ex, call.args["batch2"]), 3, "batch2")
    product = _matmul_values(ex, a, b)
    if call.node.target in (torch.addbmm, "addbmm"):
        product = ex.emit.reduce("reduce_sum", product, [0])
    return _scaled_sum(ex, call, product)


@handles("input, vec1, vec2, beta=1, alpha=1", functions=[torch.addr],
         methods=["addr"])
def _addr(ex, call):
    return _scaled_sum(ex, call, _outer_values(
        ex, float_input(ex, call.args["vec1"]),
        float_input(ex, call.args["vec2"])))


@handles("input, vec2", functions=[torch.outer, torch.ger],
         methods=["outer", "ger"])
def _outer(ex, call):
    return _outer_values(ex, float_input(ex, call.args["input"]),
                         float_input(ex, call.args["vec2"]))


@handles("input, vec", functions=[torch.mv], methods=["mv"])
def _mv(ex, call):
    a = _expect_rank(ex, float_input(ex, call.args["input"]), 2, "the matrix")
    v = _expect_rank(ex, float_input(ex, call.args["vec"]), 1, "the vector")
    return _matmul_values(ex, a, v)


@handles("input, other", functions=[torch.dot, torch.vdot, torch.inner],
         methods=["dot", "vdot", "inner"])
def _inner(ex, call):
    """dot and vdot (real) of two vectors, and inner: the sum over the last
    dimension of each pair of rows, a [A, k] by [B, k]^T product (with a
    scalar, the product)."""
    a = float_input(ex, call.args["input"])
    b = float_input(ex, call.args["other"])
    if call.node.target in (torch.dot, torch.vdot, "dot", "vdot"):
        _expect_rank(ex, a, 1, "the first vector")
        _expect_rank(ex, b, 1, "the second vector")
    if a.rank == 0 or b.rank == 0:  # a scalar's inner is its product
        shape = ex.out_shape(call)
        return ex.emit.binary("mul", ex.emit.broadcast_to(a, shape),
                              ex.emit.broadcast_to(b, shape))
    if a.shape[-1] != b.shape[-1]:
        ex.fail("the last dimensions differ: %s and %s" % (a.type, b.type))
    k = a.shape[-1]
    rows_a, rows_b = a.shape[:-1], b.shape[:-1]
    y = ex.emit.matmul(
        ex.emit.reshape(a, (int(np.prod(rows_a)), k)),
        ex.emit.reshape(b, (int(np.prod(rows_b)), k)), transpose_rhs=True)
    return ex.emit.reshape(y, rows_a + rows_b)


def _operands(ex, call, *names):
    """Float operands of one element type."""
    values = [float_input(ex, call.args[n]) for n in names]
    if len({v.dtype for v in values}) > 1:
        ex.fail("operands of different element types %s"
                % ", ".join(v.dtype for v in values))
    return values


@handles("a, b, dims=2, out=None", functions=[torch.tensordot])
def _tensordot(ex, call):
    """Sum over the paired dimensions: ``a`` with its contracted dimensions
    last and ``b`` with its first, both flattened to matrices, one
    matmul."""
    if call.args["out"] is not None:
        ex.fail("out= is not supported")
    a, b = _operands(ex, call, "a", "b")
    dims = ex.const(call.args["dims"], "dims")
    if isinstance(dims, torch.Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if not 0 <= dims <= min(a.rank, b.rank):
            ex.fail("dims=%d is out of range" % dims)
        left, right = list(range(a.rank - dims, a.rank)), list(range(dims))
    else:
        left, right = ([d] if isinstance(d, int) else list(d) for d in dims)
        left = [norm_dim(ex, d, a.rank) for d in left]
        right = [norm_dim(ex, d, b.rank) for d in right]
    if [a.shape[d] for d in left] != [b.shape[d] for d in right]:
        ex.fail("the contracted dimensions differ in size")
    free_a = [d for d in range(a.rank) if d not in left]
    free_b = [d for d in range(b.rank) if d not in right]
    k = int(np.prod([a.shape[d] for d in left]))
    a = ex.emit.transpose(a, free_a + left)
    b = ex.emit.transpose(b, right + free_b)
    a = ex.emit.reshape(a, (int(np.prod(a.shape[:len(free_a)])), k))
    b = ex.emit.reshape(b, (k, int(np.prod(b.shape[len(right):]))))
    return ex.emit.reshape(_matmul_values(ex, a, b), ex.out_shape(call))


@handles("input, other", functions=[torch.kron], methods=["kron"])
def _kron(ex, call):
    """The Kronecker product: a's extents interleaved with b's ([a0, 1, a1,
    1, ...] times [1, b0, 1, b1, ...], broadcast), then merged."""
    a, b = _operands(ex, call, "input", "other")
    rank = max(a.rank, b.rank)
    sa = (1,) * (rank - a.rank) + a.shape
    sb = (1,) * (rank - b.rank) + b.shape
    spread_a = tuple(v for d in sa for v in (d, 1))
    spread_b = tuple(v for d in sb for v in (1, d))
    shape = tuple(v for pair in zip(sa, sb) for v in pair)
    y = ex.emit.binary(
        "mul", ex.emit.broadcast_to(ex.emit.reshape(a, spread_a), shape),
        ex.emit.broadcast_to(ex.emit.reshape(b, spread_b), shape))
    return ex.emit.reshape(y, ex.out_shape(call))


@handles("input, other, dim=None", functions=[torch.cross],
         methods=["cross"])
@handles("input, other, dim=-1", functions=[torch.linalg.cross])
def _cross(ex, call):
    """The cross product of 3-vectors along ``dim`` (torch.cross without
    one: the first dimension of size 3), from slices of the components."""
    a, b = _operands(ex, call, "input", "other")
    shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    a, b = ex.emit.broadcast_to(a, shape), ex.emit.broadcast_to(b, shape)
    dim = ex.const(call.args["dim"], "dim")
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            ex.fail("no dimension of size 3")
    dim = norm_dim(ex, dim, len(shape))
    if shape[dim] != 3:
        ex.fail("dimension %d has size %d, not 3" % (dim, shape[dim]))

    def part(v, i):
        starts, limits = [0] * len(shape), list(shape)
        starts[dim], limits[dim] = i, i + 1
        return ex.emit.slice(v, starts, limits, [1] * len(shape))
    a_, b_ = [part(a, i) for i in range(3)], [part(b, i) for i in range(3)]
    parts = [ex.emit.binary("sub",
                            ex.emit.binary("mul", a_[j], b_[k]),
                            ex.emit.binary("mul", a_[k], b_[j]))
             for j, k in ((1, 2), (2, 0), (0, 1))]
    return ex.emit.concat(parts, dim)
