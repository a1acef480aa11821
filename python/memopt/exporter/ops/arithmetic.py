"""Arithmetic with PyTorch's broadcasting: + - * / **, torch.maximum and
minimum, addcmul, addcdiv, lerp, logaddexp, hypot, masked_fill and
torch.where."""

import math
import operator

import numpy as np
import torch

from ..dtypes import dtype_name
from ..emit import FLOAT_TYPES
from ..registry import handles, register
from .common import as_number, float_input, select, step, unit_sign


def binary_handler(kind):
    """``add``, ``sub``, ``mul``, ``div``, ``pow`` and ``maximum`` with
    PyTorch's broadcasting and Python-number operands."""
    def handler(ex, call):
        lhs, rhs = call.args["input"], call.args["other"]
        alpha = call.args.get("alpha", 1)
        rounding = call.args.get("rounding_mode")
        if rounding is not None:
            if rounding != "trunc":
                ex.fail("rounding_mode=%r is not supported (only 'trunc')"
                        % rounding)
            # trunc(a / b), PyTorch's float kernel; no gradient.
            call.args["rounding_mode"] = None
            return ex.emit.unary("trunc", handler(ex, call))
        shape = ex.out_shape(call)
        dtype = dtype_name(call.out.dtype, "the result")
        if dtype not in FLOAT_TYPES:
            ex.fail("arithmetic on %s tensors is not supported" % dtype)
        if alpha != 1:
            if as_number(ex, rhs) is None:
                rhs_value = ex.emit.scalar(
                    "mul_scalar", ex.emit.broadcast_to(
                        ex.val(rhs, dtype), shape), alpha)
                return ex.emit.binary(kind, ex.emit.broadcast_to(
                    ex.val(lhs, dtype), shape), rhs_value)
        a, b = as_number(ex, lhs), as_number(ex, rhs)
        if b is not None:
            x = ex.val(lhs, dtype)
            b *= alpha
            if kind == "add":
                y = ex.emit.scalar("add_scalar", x, b)
            elif kind == "sub":
                y = ex.emit.scalar("add_scalar", x, -b)
            elif kind == "mul":
                y = ex.emit.scalar("mul_scalar", x, b)
            elif kind == "div":
                y = ex.emit.scalar("mul_scalar", x, 1.0 / b)
            elif kind == "pow":
                y = ex.emit.scalar("pow_scalar", x, b)
            else:  # maximum
                y = _maximum_with(ex, x, b)
            return _reshape_to(ex, y, shape)
        if a is not None:
            x = ex.val(rhs, dtype)
            if kind == "add":
                y = ex.emit.scalar("add_scalar", x, a)
            elif kind == "mul":
                y = ex.emit.scalar("mul_scalar", x, a)
            elif kind == "sub":
                y = ex.emit.unary("neg", x)
                if a != 0:
                    y = ex.emit.scalar("add_scalar", y, a)
            elif kind == "div":
                y = ex.emit.scalar("pow_scalar", x, -1.0)
                if a != 1:
                    y = ex.emit.scalar("mul_scalar", y, a)
            elif kind == "pow" and a > 0:
                y = ex.emit.unary("exp", ex.emit.scalar(
                    "mul_scalar", x, math.log(a)))
            elif kind == "maximum":
                y = _maximum_with(ex, x, a)
            else:
                ex.fail("a Python-number left operand is not supported")
            return _reshape_to(ex, y, shape)
        if kind == "pow":
            ex.fail("a tensor exponent is not supported")
        x = ex.emit.broadcast_to(ex.val(lhs, dtype), shape)
        y = ex.emit.broadcast_to(ex.val(rhs, dtype), shape)
        return ex.emit.binary(kind, x, y)
    return handler


def _maximum_with(ex, x, number):
    """maximum(x, number): a constant operand, which takes no gradient (at
    a tie x gets half, as torch.maximum's x)."""
    return ex.emit.binary("maximum", x, ex.emit.constant(
        np.full(x.shape, number, np.float32), x.dtype))


def _binary_pow(handler):
    """torch.pow names its second operand ``exponent``."""
    def adapted(ex, call):
        call.args["other"] = call.args.pop("exponent")
        return handler(ex, call)
    return adapted


for _kind, _operators, _function in (
        ("add", [operator.add, operator.iadd], torch.add),
        ("sub", [operator.sub, operator.isub], torch.sub),
        ("mul", [operator.mul, operator.imul], torch.mul),
        ("div", [operator.truediv, operator.itruediv], torch.div),
        ("pow", [operator.pow, operator.ipow], torch.pow),
        ("maximum", [], torch.maximum)):
    _handler = binary_handler(_kind)
    register("input, other", _handler, functions=_operators)
    _signature = {"add": "input, other, alpha=1",
                  "sub": "input, other, alpha=1",
                  "div": "input, other, rounding_mode=None",
                  "pow": "input, exponent"}.get(_kind, "input, other")
    if _kind == "pow":
        _handler = _binary_pow(_handler)
    register(_signature, _handler, functions=[_function],
             methods=[_function.__name__])
register("input, other, alpha=1", binary_handler("sub"),
         functions=[torch.subtract])


def _reversed(handler):
    """``other op input``: torch.rsub (other - alpha input) and the
    reflected operators (``2 ** x`` calls ``x.__rpow__(2)``)."""
    def adapted(ex, call):
        call.args["input"], call.args["other"] = \
            call.args["other"], call.args["input"]
        return handler(ex, call)
    return adapted


register("input, other, alpha=1", _reversed(binary_handler("sub")),
         functions=[torch.rsub], methods=["__rsub__"])
register("input, other", _reversed(binary_handler("div")),
         methods=["__rtruediv__", "__rdiv__"])
register("input, other", _reversed(binary_handler("pow")),
         methods=["__rpow__"])
register("input, other", binary_handler("mul"), functions=[torch.multiply])
register("input, other", binary_handler("div"),
         functions=[torch.true_divide], methods=["true_divide"])


def _reshape_to(ex, value, shape):
    """A scalar op's result, given the shape PyTorch broadcast it to (a
    one-element tensor operand may add leading dimensions)."""
    if value.shape == tuple(shape):
        return value
    if int(np.prod(value.shape)) == int(np.prod(shape)):
        return ex.emit.reshape(value, shape)
    return ex.emit.broadcast_to(value, shape)


@handles("input, mask, value", functions=[torch.masked_fill],
         methods=["masked_fill"])
def _masked_fill(ex, call):
    x = float_input(ex, call.args["input"])
    if tuple(call.out.shape) != x.shape:
        ex.fail("the mask may not broadcast the input")
    mask = ex.val(call.args["mask"])
    if mask.dtype != "i1":
        ex.fail("the mask must be a bool tensor, got %s" % mask.dtype)
    value = as_number(ex, call.args["value"])
    if value is None:
        ex.fail("the fill value must be a number known at export time")
    return ex.emit.masked_fill(x, ex.emit.broadcast_to(mask, x.shape), value)


@handles("condition, input, other", functions=[torch.where])
def _where_handler(ex, call):
    shape = ex.out_shape(call)
    dtype = dtype_name(call.out.dtype, "the result")
    if dtype not in FLOAT_TYPES:
        ex.fail("only float results are supported")
    condition = ex.val(call.args["condition"])
    if condition.dtype != "i1":
        ex.fail("the condition must be a bool tensor")

    def operand(arg):
        number = as_number(ex, arg)
        if number is not None and not isinstance(ex.concrete(arg),
                                                  torch.Tensor):
            return ex.emit.constant(np.full(shape, number, np.float32), dtype)
        return ex.emit.broadcast_to(ex.val(arg, dtype), shape)

    return ex.emit.where(ex.emit.broadcast_to(condition, shape),
                         operand(call.args["input"]),
                         operand(call.args["other"]))


def broadcast_operands(ex, call, names):
    """The tensor arguments ``names`` of an elementwise call with a float
    result, broadcast to its shape."""
    shape = ex.out_shape(call)
    dtype = dtype_name(call.out.dtype, "the result")
    if dtype not in FLOAT_TYPES:
        ex.fail("%s tensors are not supported" % dtype)
    return [ex.emit.broadcast_to(ex.val(call.args[n], dtype), shape)
            for n in names]


@handles("input, other", functions=[torch.minimum], methods=["minimum"])
def minimum_handler(ex, call):
    """-maximum(-a, -b): the negations are exact, and ties split the
    gradient evenly, as torch.minimum's."""
    a, b = (ex.emit.unary("neg", v)
            for v in broadcast_operands(ex, call, ("input", "other")))
    return ex.emit.unary("neg", ex.emit.binary("maximum", a, b))


def _addc(kind):
    """input + value * (tensor1 * tensor2) (addcmul) or tensor1 / tensor2
    (addcdiv), broadcast together."""
    def handler(ex, call):
        value = as_number(ex, call.args.get("value", 1))
        if value is None:
            ex.fail("'value' must be a number known at export time")
        x, t1, t2 = broadcast_operands(ex, call,
                                        ("input", "tensor1", "tensor2"))
        y = ex.emit.binary(kind, t1, t2)
        if value != 1:
            y = ex.emit.scalar("mul_scalar", y, value)
        return ex.emit.binary("add", x, y)
    return handler


register("input, tensor1, tensor2, value=1", _addc("mul"),
         functions=[torch.addcmul], methods=["addcmul"])
register("input, tensor1, tensor2, value=1", _addc("div"),
         functions=[torch.addcdiv], methods=["addcdiv"])


@handles("input, end, weight", functions=[torch.lerp], methods=["lerp"])
def _lerp(ex, call):
    """start + weight (end - start), or, for a number weight of at least
    0.5, end - (end - start) (1 - weight): PyTorch's two forms."""
    start, end = broadcast_operands(ex, call, ("input", "end"))
    weight = as_number(ex, call.args["weight"])
    if weight is None or isinstance(ex.concrete(call.args["weight"]),
                                    torch.Tensor):
        (w,) = broadcast_operands(ex, call, ("weight",))
        return ex.emit.binary("add", start, ex.emit.binary(
            "mul", w, ex.emit.binary("sub", end, start)))
    return lerp(ex, start, end, weight)


def lerp(ex, start, end, weight):
    """torch.lerp by a number ``weight``: start + weight (end - start) below
    0.5, end - (end - start)(1 - weight) from it."""
    diff = ex.emit.binary("sub", end, start)
    if weight < 0.5:
        return ex.emit.binary("add", start,
                              ex.emit.scalar("mul_scalar", diff, weight))
    return ex.emit.binary("sub", end,
                          ex.emit.scalar("mul_scalar", diff, 1.0 - weight))


@handles("input, other", functions=[torch.logaddexp], methods=["logaddexp"])
def _logaddexp(ex, call):
    """max(a, b) + log1p(exp(-|a - b|)): PyTorch's stable form; at a tie
    each operand takes half the gradient."""
    a, b = broadcast_operands(ex, call, ("input", "other"))
    gap = ex.emit.unary("neg", ex.emit.unary("abs", ex.emit.binary(
        "sub", a, b)))
    return ex.emit.binary("add", ex.emit.binary("maximum", a, b),
                          ex.emit.unary("log1p", ex.emit.unary("exp", gap)))


@handles("input, other", functions=[torch.hypot], methods=["hypot"])
def _hypot(ex, call):
    """sqrt(a^2 + b^2), as PyTorch's kernel (no rescaling: the squares of
    f32 values above about 1.8e19 overflow)."""
    a, b = broadcast_operands(ex, call, ("input", "other"))
    return ex.emit.unary("sqrt", ex.emit.binary(
        "add", ex.emit.binary("mul", a, a), ex.emit.binary("mul", b, b)))


@handles("input, other", functions=[torch.atan2, torch.arctan2],
         methods=["atan2", "arctan2"])
def _atan2(ex, call):
    """atan2(y, x) from atan of the smaller of |x| and |y| over the larger
    (at most 1), reflected into the right octant and quadrant by exact 0/1
    selectors; with the signs of zeros as libm's (atan2(0, -1) = pi,
    atan2(-0, -1) = -pi) and no division by zero (0 at the origin). |x| and
    |y| are written x sx and y sy, so that the gradient is -y / r^2 and
    x / r^2 on the axes too."""
    emit = ex.emit
    y, x = broadcast_operands(ex, call, ("input", "other"))
    sy, sx = unit_sign(ex, y), unit_sign(ex, x)
    a, b = emit.binary("mul", x, sx), emit.binary("mul", y, sy)
    steep = step(ex, emit.binary("sub", b, a))  # |y| > |x|
    small, large = select(ex, b, a, steep), select(ex, a, b, steep)
    origin = emit.scalar("add_scalar", emit.unary(
        "neg", emit.unary("sign", large)), 1.0)
    angle = emit.unary("atan", emit.binary(
        "div", small, emit.binary("add", large, origin)))
    angle = select(ex, angle, emit.scalar("add_scalar", emit.unary(
        "neg", angle), math.pi / 2), steep)
    left = emit.unary("relu", emit.unary("neg", sx))  # x < 0 or x = -0
    angle = select(ex, angle, emit.scalar("add_scalar", emit.unary(
        "neg", angle), math.pi), left)
    return emit.binary("mul", sy, angle)


@handles("input, other", functions=[torch.copysign], methods=["copysign"])
def _copysign(ex, call):
    """|a| copysign(1, b): the gradient sign(a) copysign(1, b) for a (0 at
    a = 0) and none for b, as PyTorch's."""
    a, b = broadcast_operands(ex, call, ("input", "other"))
    return ex.emit.binary("mul", ex.emit.unary("abs", a), unit_sign(ex, b))


@handles("input, other", functions=[torch.logaddexp2],
         methods=["logaddexp2"])
def _logaddexp2(ex, call):
    """max(a, b) + log1p(2^-|a - b|) / ln 2, PyTorch's form."""
    a, b = broadcast_operands(ex, call, ("input", "other"))
    gap = ex.emit.scalar("mul_scalar", ex.emit.unary("abs", ex.emit.binary(
        "sub", a, b)), -math.log(2.0))
    return ex.emit.binary("add", ex.emit.binary("maximum", a, b),
                          ex.emit.scalar("mul_scalar", ex.emit.unary(
                              "log1p", ex.emit.unary("exp", gap)),
                              1.0 / math.log(2.0)))


@handles("input, other", functions=[torch.xlogy, torch.special.xlogy],
         methods=["xlogy"])
def _xlogy(ex, call):
    """x log(y), 0 where x = 0 (unless y is NaN): log reads 1 in place of a
    y <= 0 where x = 0, so that the result there is 0 with x's gradient 0,
    and log(y) elsewhere, as PyTorch's. (At x = 0 and y = +inf the result
    is NaN where PyTorch's is 0.)"""
    return xlogy(ex, *broadcast_operands(ex, call, ("input", "other")))


def xlogy(ex, x, y):
    """x log(y) for ``x`` and ``y`` of one shape, as torch.xlogy."""
    emit = ex.emit
    zero_x = emit.scalar("add_scalar", emit.unary("neg", emit.unary(
        "abs", emit.unary("sign", x))), 1.0)
    low_y = emit.scalar("add_scalar", emit.unary("neg", step(ex, y)), 1.0)
    safe = select(ex, y, emit.constant(np.ones(y.shape, np.float32),
                                       y.dtype),
                  emit.binary("mul", zero_x, low_y))
    return emit.binary("mul", x, emit.unary("log", safe))
