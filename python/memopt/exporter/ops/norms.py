"""Vector and matrix norms and what is written with them: torch.norm,
torch.linalg.vector_norm / matrix_norm / norm, torch.dist, torch.cdist,
F.pdist, F.pairwise_distance, F.normalize and torch.renorm.

A p-norm is a reduction of elementwise ops, so its gradient is the
composition's; two details make it PyTorch's everywhere: the root is taken
of s + z minus z, z = 1 where the sum s is 0, so that a zero vector has the
gradient 0 (not 0 times sqrt's infinite slope), and the max-norms' ties
split the gradient evenly, as reduce_max's. Under mixed precision they run
in f32, as autocast's."""

import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F

from ..registry import handles
from .common import float_input, in_f32, norm_dim, select, step
from .indexing import rows_along
from .reductions import in_dtype, reduced_dims


def vector_norm(ex, x, p, dims):
    """The p-norm of ``x`` over ``dims`` (which the result drops): p = 0
    is the count of nonzeros (no gradient), +-inf the largest or smallest
    magnitude; for p below 1 the gradient at a zero element is NaN, as
    PyTorch's."""
    emit = ex.emit
    if x.rank == 0:
        x, dims = emit.reshape(x, (1,)), [0]
    magnitude = emit.unary("abs", x)
    if all(x.shape[d] == 1 for d in dims) and p != 0:
        # Every p-norm of one element is its magnitude, exactly.
        return emit.reshape(magnitude, tuple(
            s for d, s in enumerate(x.shape) if d not in dims))
    if p == math.inf:
        return emit.reduce("reduce_max", magnitude, dims)
    if p == -math.inf:
        return emit.unary("neg", emit.reduce(
            "reduce_max", emit.unary("neg", magnitude), dims))
    if p == 0:
        return emit.reduce("reduce_sum", emit.unary("sign", magnitude), dims)
    if p == 1:
        return emit.reduce("reduce_sum", magnitude, dims)
    powered = emit.binary("mul", x, x) if p == 2 else \
        emit.scalar("pow_scalar", magnitude, float(p))
    total = emit.reduce("reduce_sum", powered, dims)
    empty = emit.scalar("add_scalar", emit.unary(
        "neg", emit.unary("sign", total)), 1.0)
    shifted = emit.binary("add", total, empty)
    root = emit.unary("sqrt", shifted) if p == 2 else \
        emit.scalar("pow_scalar", shifted, 1.0 / p)
    return emit.binary("sub", root, empty)


def _matrix_norm(ex, x, order, dims):
    """The 'fro' norm, or the max (1, inf) or min (-1, -inf) absolute
    column (1) or row (inf) sum, over the two ``dims``."""
    if order == "fro":
        return vector_norm(ex, x, 2, sorted(dims))
    if order not in (1, -1, math.inf, -math.inf):
        ex.fail("the matrix norm ord=%r is not supported (it needs singular "
                "values): only 'fro', 1, -1, inf and -inf" % (order,))
    rows, cols = dims
    summed, kept = (rows, cols) if abs(order) == 1 else (cols, rows)
    sums = ex.emit.reduce("reduce_sum", ex.emit.unary("abs", x), [summed])
    kept -= kept > summed
    if order > 0:
        return ex.emit.reduce("reduce_max", sums, [kept])
    return ex.emit.unary("neg", ex.emit.reduce(
        "reduce_max", ex.emit.unary("neg", sums), [kept]))


def _order(ex, call, name):
    order = ex.const(call.args[name], name)
    return float(order) if isinstance(order, (int, float)) else order


def _matrix_dims(ex, dim, rank):
    if rank < 2:
        ex.fail("a matrix norm needs a tensor of rank 2 or more")
    dims = [norm_dim(ex, d, rank) for d in dim]
    if len(dims) != 2 or dims[0] == dims[1]:
        ex.fail("a matrix norm takes two distinct dimensions, got %s"
                % (list(dim),))
    return dims


def _finish(ex, call, y):
    return ex.emit.reshape(y, ex.out_shape(call))


@handles("input, ord=2, dim=None, keepdim=False, dtype=None",
         functions=[torch.linalg.vector_norm])
@in_f32
def _vector_norm(ex, call):
    x = in_dtype(ex, call, float_input(ex, call.args["input"]))
    dims = reduced_dims(ex, ex.const(call.args["dim"], "dim"), x.rank)
    return _finish(ex, call, vector_norm(ex, x, _order(ex, call, "ord"),
                                         dims))


@handles("input, ord='fro', dim=None, keepdim=False, dtype=None",
         functions=[torch.linalg.matrix_norm])
@in_f32
def _matrix_norm_handler(ex, call):
    x = in_dtype(ex, call, float_input(ex, call.args["input"]))
    dim = ex.const(call.args["dim"], "dim")
    dims = _matrix_dims(ex, (-2, -1) if dim is None else dim, x.rank)
    return _finish(ex, call, _matrix_norm(ex, x, _order(ex, call, "ord"),
                                          dims))


@handles("input, ord=None, dim=None, keepdim=False, dtype=None",
         functions=[torch.linalg.norm])
@in_f32
def _linalg_norm(ex, call):
    """A vector norm over one dimension (or, without ord, over all); a
    matrix norm over two, or of a matrix when ord is given without dim."""
    x = in_dtype(ex, call, float_input(ex, call.args["input"]))
    order = _order(ex, call, "ord")
    dim = ex.const(call.args["dim"], "dim")
    if isinstance(dim, int):
        dim = (dim,)
    if dim is None and order is not None:
        dim = tuple(range(x.rank))
    if dim is not None and len(dim) == 2 and (order is not None or
                                              x.rank >= 2):
        y = _matrix_norm(ex, x, "fro" if order is None else order,
                         _matrix_dims(ex, dim, x.rank))
    else:
        y = vector_norm(ex, x, 2 if order is None else order,
                        reduced_dims(ex, dim, x.rank))
    return _finish(ex, call, y)


@handles("input, p='fro', dim=None, keepdim=False, out=None, dtype=None",
         functions=[torch.norm], methods=["norm"])
@in_f32
def _norm(ex, call):
    """torch.norm: the vector p-norm over ``dim`` (all by default); 'fro'
    is the 2-norm."""
    x = in_dtype(ex, call, float_input(ex, call.args["input"]))
    if call.args["out"] is not None:
        ex.fail("out= is not supported: use the result")
    p = _order(ex, call, "p")
    if p == "fro":
        p = 2.0
    elif isinstance(p, str):
        ex.fail("p=%r is not supported (it needs singular values)" % p)
    dims = reduced_dims(ex, ex.const(call.args["dim"], "dim"), x.rank)
    return _finish(ex, call, vector_norm(ex, x, p, dims))


@handles("input, other, p=2", functions=[torch.dist], methods=["dist"])
@in_f32
def _dist(ex, call):
    """The p-norm of the broadcast difference."""
    shape = ex.out_shape(call)
    a, b = (float_input(ex, call.args[k]) for k in ("input", "other"))
    full = tuple(torch.broadcast_shapes(a.shape, b.shape))
    diff = ex.emit.binary("sub", ex.emit.broadcast_to(a, full),
                          ex.emit.broadcast_to(b, full))
    y = vector_norm(ex, diff, _order(ex, call, "p"), list(range(len(full))))
    return ex.emit.reshape(y, shape)


@handles("x1, x2, p=2.0, eps=1e-06, keepdim=False",
         functions=[F.pairwise_distance, torch.pairwise_distance])
@in_f32
def _pairwise_distance(ex, call):
    """The p-norm of x1 - x2 + eps over the last dimension, PyTorch's."""
    a, b = (float_input(ex, call.args[k]) for k in ("x1", "x2"))
    full = tuple(torch.broadcast_shapes(a.shape, b.shape))
    diff = ex.emit.scalar("add_scalar", ex.emit.binary(
        "sub", ex.emit.broadcast_to(a, full), ex.emit.broadcast_to(b, full)),
        ex.const(call.args["eps"], "eps"))
    dims = [len(full) - 1] if full else []
    return _finish(ex, call, vector_norm(ex, diff, _order(ex, call, "p"),
                                         dims))


@handles("x1, x2, p=2.0, compute_mode=None", functions=[torch.cdist])
@in_f32
def _cdist(ex, call):
    """The p-norm distance of every row of x1 (..., P, M) to every row of
    x2 (..., R, M): the differences (..., P, R, M) broadcast out, then the
    norm over M. (PyTorch's 2-norm may take a matmul form with more
    rounding; the values agree to it.)"""
    a, b = (float_input(ex, call.args[k]) for k in ("x1", "x2"))
    if a.rank < 2 or b.rank < 2 or a.shape[-1] != b.shape[-1]:
        ex.fail("expected x1 (..., P, M) and x2 (..., R, M), got %s and %s"
                % (a.type, b.type))
    batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    p_rows, r_rows, m = a.shape[-2], b.shape[-2], a.shape[-1]
    full = batch + (p_rows, r_rows, m)
    a = ex.emit.reshape(ex.emit.broadcast_to(a, batch + a.shape[-2:]),
                        batch + (p_rows, 1, m))
    b = ex.emit.reshape(ex.emit.broadcast_to(b, batch + b.shape[-2:]),
                        batch + (1, r_rows, m))
    diff = ex.emit.binary("sub", ex.emit.broadcast_to(a, full),
                          ex.emit.broadcast_to(b, full))
    return _finish(ex, call, vector_norm(ex, diff, _order(ex, call, "p"),
                                         [len(full) - 1]))


@handles("input, p=2", functions=[F.pdist, torch.pdist])
@in_f32
def _pdist(ex, call):
    """The p-norm distance between rows i < j of an N x M input, in
    row-major order of the pairs: two lookups of the rows, a difference and
    the norm."""
    x = float_input(ex, call.args["input"])
    if x.rank != 2 or x.shape[0] < 2:
        ex.fail("expected an N x M input with N >= 2, got %s" % x.type)
    pairs = list(itertools.combinations(range(x.shape[0]), 2))
    first = rows_along(ex, x, 0, [i for i, _ in pairs])
    second = rows_along(ex, x, 0, [j for _, j in pairs])
    return vector_norm(ex, ex.emit.binary("sub", first, second),
                       _order(ex, call, "p"), [1])


@handles("input, p=2.0, dim=1, eps=1e-12, out=None",
         functions=[F.normalize])
@in_f32
def _normalize(ex, call):
    """x / max(||x||_p, eps) along ``dim``: below eps the clamp stops the
    gradient through the norm, as PyTorch's clamp_min."""
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    norm = vector_norm(ex, x, _order(ex, call, "p"), [dim])
    norm = ex.emit.clamp(norm, min=ex.const(call.args["eps"], "eps"))
    keep = tuple(1 if d == dim else s for d, s in enumerate(x.shape))
    return ex.emit.binary("div", x, ex.emit.broadcast_to(
        ex.emit.reshape(norm, keep), x.shape))


@handles("input, p, dim, maxnorm", functions=[torch.renorm],
         methods=["renorm"])
@in_f32
def _renorm(ex, call):
    """Each slice along ``dim`` whose p-norm exceeds maxnorm scaled by
    maxnorm / (norm + 1e-7), PyTorch's factor, chosen by an exact 0/1 step;
    the gradient passes through the norm where it scales."""
    x = float_input(ex, call.args["input"])
    dim = norm_dim(ex, ex.const(call.args["dim"], "dim"), x.rank)
    maxnorm = float(ex.const(call.args["maxnorm"], "maxnorm"))
    others = [d for d in range(x.rank) if d != dim]
    norm = vector_norm(ex, x, _order(ex, call, "p"), others)
    emit = ex.emit
    shrink = emit.binary("div", emit.constant(
        np.full(norm.shape, maxnorm, np.float32), norm.dtype),
        emit.scalar("add_scalar", norm, 1e-7))
    factor = select(ex, emit.constant(np.ones(norm.shape, np.float32),
                                      norm.dtype),
                    shrink, step(ex, norm, maxnorm))
    keep = tuple(s if d == dim else 1 for d, s in enumerate(x.shape))
    return emit.binary("mul", x, emit.broadcast_to(
        emit.reshape(factor, keep), x.shape))
