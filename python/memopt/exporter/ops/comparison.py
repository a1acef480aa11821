"""Comparisons and the masks they compute: torch.eq, ne, lt, le, gt, ge and
their operators, isnan, isinf, isposinf, isneginf, isfinite, and the logical
ops on masks; and the NaN-aware ops written with them: fmax, fmin,
nan_to_num, nansum, nanmean.

A mask is an i1 Value (``memopt.compare``); it has no gradient, and the
``where`` that selects with it routes the gradient of each element to the
operand it took, exactly as PyTorch's masked gradients do. In arithmetic a
mask is 1 and 0 of the other operand's float type (walker.val).
"""

import operator

import numpy as np
import torch

from ..dtypes import dtype_name
from ..emit import FLOAT_TYPES, INDEX_TYPES
from ..registry import handles, register
from . import arithmetic
from .common import as_number, float_input, full, mask_as_float
from .reductions import in_dtype, reduced_dims


def _operand(ex, arg, dtype, shape):
    """A comparison operand of ``dtype``, broadcast to ``shape``."""
    number = as_number(ex, arg)
    if number is not None and not isinstance(ex.concrete(arg), torch.Tensor):
        if dtype in INDEX_TYPES:  # PyTorch promotes to float otherwise
            return ex.emit.constant(np.full(shape, int(number), np.int64),
                                    dtype)
        return full(ex, shape, number, dtype)
    return ex.emit.broadcast_to(ex.val(arg, dtype), shape)


def _compare(predicate):
    """torch.<predicate>(input, other) with PyTorch's broadcasting and type
    promotion: floats (or two masks, as 1 and 0) or indices."""
    def handler(ex, call):
        lhs, rhs = call.args["input"], call.args["other"]
        shape = ex.out_shape(call)
        promoted = torch.result_type(ex.concrete(lhs), ex.concrete(rhs))
        dtype = dtype_name(promoted, "the compared operands")
        if dtype == "i1":
            dtype = "f32"
        if dtype not in FLOAT_TYPES + INDEX_TYPES:
            ex.fail("comparisons of %s tensors are not supported" % dtype)
        return ex.emit.compare(predicate, _operand(ex, lhs, dtype, shape),
                               _operand(ex, rhs, dtype, shape))
    return handler


for _predicate, _functions, _aliases in (
        ("eq", [operator.eq, torch.eq], []),
        ("ne", [operator.ne, torch.ne, torch.not_equal], ["not_equal"]),
        ("lt", [operator.lt, torch.lt, torch.less], ["less"]),
        ("le", [operator.le, torch.le, torch.less_equal], ["less_equal"]),
        ("gt", [operator.gt, torch.gt, torch.greater], ["greater"]),
        ("ge", [operator.ge, torch.ge, torch.greater_equal],
         ["greater_equal"])):
    register("input, other", _compare(_predicate), functions=_functions,
             methods=[_predicate] + _aliases)


def is_nan(ex, x):
    """The mask of x's NaNs: the one value that differs from itself."""
    return ex.emit.compare("ne", x, x)


@handles("input", functions=[torch.isnan], methods=["isnan"])
def _isnan(ex, call):
    return is_nan(ex, ex.val(call.args["input"]))


def _infinity_test(predicate, value, magnitude):
    """compare(x (or |x|), value): isposinf, isneginf, isinf, isfinite."""
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        if magnitude:
            x = ex.emit.unary("abs", x)
        return ex.emit.compare(predicate, x,
                               full(ex, x.shape, value, x.dtype))
    return handler


for _function, _test in (
        (torch.isposinf, _infinity_test("eq", np.inf, False)),
        (torch.isneginf, _infinity_test("eq", -np.inf, False)),
        (torch.isinf, _infinity_test("eq", np.inf, True)),
        (torch.isfinite, _infinity_test("lt", np.inf, True))):
    register("input", _test, functions=[_function],
             methods=[_function.__name__])


def _truth(ex, arg, shape):
    """A logical operand as 1 and 0 in f32: a mask, or x != 0."""
    x = ex.val(arg)
    if x.dtype != "i1":
        if x.dtype not in FLOAT_TYPES + INDEX_TYPES:
            ex.fail("logical ops on %s tensors are not supported" % x.dtype)
        x = ex.emit.compare("ne", x, _operand(ex, 0, x.dtype, x.shape))
        return ex.emit.broadcast_to(mask_as_float(ex, x, "f32"), shape)
    return ex.emit.broadcast_to(ex.val(arg, "f32"), shape)


def _logical(combine):
    """logical_and / or / xor (and &, |, ^ on masks): ``combine`` of the
    operands' 1 and 0, compared with 0."""
    def handler(ex, call):
        if call.out.dtype != torch.bool:
            ex.fail("bitwise ops on integer tensors are not supported")
        shape = ex.out_shape(call)
        a = _truth(ex, call.args["input"], shape)
        b = _truth(ex, call.args["other"], shape)
        if combine == "xor":
            return ex.emit.compare("ne", a, b)
        return ex.emit.compare("ne", ex.emit.binary(combine, a, b),
                               full(ex, shape, 0.0, "f32"))
    return handler


for _combine, _function, _operator in (
        ("mul", torch.logical_and, operator.and_),
        ("add", torch.logical_or, operator.or_),
        ("xor", torch.logical_xor, operator.xor)):
    register("input, other", _logical(_combine),
             functions=[_function, _operator], methods=[_function.__name__])


@handles("input", functions=[torch.logical_not, operator.invert],
         methods=["logical_not"])
def _logical_not(ex, call):
    if call.out.dtype != torch.bool:
        ex.fail("bitwise ops on integer tensors are not supported")
    shape = ex.out_shape(call)
    return ex.emit.compare("eq", _truth(ex, call.args["input"], shape),
                           full(ex, shape, 0.0, "f32"))


def _nan_ignoring(predicate):
    """torch.fmax (``ge``) / fmin (``le``): the other operand where one is
    NaN, else the larger (smaller); at a tie the first, as PyTorch's
    gradient, which goes to ``input`` at ties and where ``other`` is NaN."""
    def handler(ex, call):
        a, b = arithmetic.broadcast_operands(ex, call, ("input", "other"))
        chosen = ex.emit.where(ex.emit.compare(predicate, a, b), a, b)
        return ex.emit.where(is_nan(ex, b), a, chosen)
    return handler


register("input, other", _nan_ignoring("ge"), functions=[torch.fmax],
         methods=["fmax"])
register("input, other", _nan_ignoring("le"), functions=[torch.fmin],
         methods=["fmin"])


@handles("input, nan=0.0, posinf=None, neginf=None",
         functions=[torch.nan_to_num], methods=["nan_to_num"])
def _nan_to_num(ex, call):
    """NaN, +inf and -inf replaced (by default with 0 and the dtype's
    largest and lowest finite values); the gradient passes where x is
    finite, as PyTorch's."""
    x = float_input(ex, call.args["input"])
    info = torch.finfo(call.out.dtype)
    y = x
    for value, default, test in (
            ("nan", 0.0, None), ("posinf", info.max, np.inf),
            ("neginf", info.min, -np.inf)):
        replacement = ex.const(call.args[value], value)
        replacement = default if replacement is None else float(replacement)
        if test is None:
            mask = is_nan(ex, x)
        elif replacement == test:
            continue
        else:
            mask = ex.emit.compare("eq", x, full(ex, x.shape, test, x.dtype))
        y = ex.emit.where(mask, full(ex, x.shape, replacement, x.dtype), y)
    return y


def _nan_reduce(mean):
    """torch.nansum / nanmean: the NaNs count as 0 (and, in the mean, not
    at all: all-NaN gives 0 / 0 = NaN, as PyTorch)."""
    def handler(ex, call):
        x = in_dtype(ex, call, float_input(ex, call.args["input"]))
        dims = reduced_dims(ex, ex.const(call.args.get("dim")), x.rank)
        nan = is_nan(ex, x)
        zeros = full(ex, x.shape, 0.0, x.dtype)
        total = ex.emit.where(nan, zeros, x)
        count = ex.emit.where(nan, zeros, full(ex, x.shape, 1.0, x.dtype))
        if dims:
            total = ex.emit.reduce("reduce_sum", total, dims)
            count = ex.emit.reduce("reduce_sum", count, dims)
        result = ex.emit.binary("div", total, count) if mean else total
        return ex.emit.reshape(result, ex.out_shape(call))
    return handler


register("input, dim=None, keepdim=False, dtype=None", _nan_reduce(False),
         functions=[torch.nansum], methods=["nansum"])
register("input, dim=None, keepdim=False, dtype=None", _nan_reduce(True),
         functions=[torch.nanmean], methods=["nanmean"])
