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
from .common import as_number, float_input


def binary_handler(kind):
    """``add``, ``sub``, ``mul``, ``div``, ``pow`` and ``maximum`` with
    PyTorch's broadcasting and Python-number operands."""
    def handler(ex, call):
        lhs, rhs = call.args["input"], call.args["other"]
        alpha = call.args.get("alpha", 1)
        if call.args.get("rounding_mode") is not None:
            ex.fail("rounding_mode is not supported")
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


def _rsub(ex, call):
    """torch.rsub: other - alpha input."""
    call.args["input"], call.args["other"] = \
        call.args["other"], call.args["input"]
    return binary_handler("sub")(ex, call)


register("input, other, alpha=1", _rsub, functions=[torch.rsub])
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


def _broadcast_operands(ex, call, names):
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
            for v in _broadcast_operands(ex, call, ("input", "other")))
    return ex.emit.unary("neg", ex.emit.binary("maximum", a, b))


def _addc(kind):
    """input + value * (tensor1 * tensor2) (addcmul) or tensor1 / tensor2
    (addcdiv), broadcast together."""
    def handler(ex, call):
        value = as_number(ex, call.args.get("value", 1))
        if value is None:
            ex.fail("'value' must be a number known at export time")
        x, t1, t2 = _broadcast_operands(ex, call,
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
    start, end = _broadcast_operands(ex, call, ("input", "end"))
    diff = ex.emit.binary("sub", end, start)
    weight = as_number(ex, call.args["weight"])
    if weight is None or isinstance(ex.concrete(call.args["weight"]),
                                    torch.Tensor):
        (w,) = _broadcast_operands(ex, call, ("weight",))
        return ex.emit.binary("add", start, ex.emit.binary("mul", w, diff))
    if weight < 0.5:
        return ex.emit.binary("add", start,
                              ex.emit.scalar("mul_scalar", diff, weight))
    return ex.emit.binary("sub", end,
                          ex.emit.scalar("mul_scalar", diff, 1.0 - weight))


@handles("input, other", functions=[torch.logaddexp], methods=["logaddexp"])
def _logaddexp(ex, call):
    """max(a, b) + log1p(exp(-|a - b|)): PyTorch's stable form; at a tie
    each operand takes half the gradient."""
    a, b = _broadcast_operands(ex, call, ("input", "other"))
    gap = ex.emit.unary("neg", ex.emit.unary("abs", ex.emit.binary(
        "sub", a, b)))
    return ex.emit.binary("add", ex.emit.binary("maximum", a, b),
                          ex.emit.unary("log1p", ex.emit.unary("exp", gap)))


@handles("input, other", functions=[torch.hypot], methods=["hypot"])
def _hypot(ex, call):
    """sqrt(a^2 + b^2), as PyTorch's kernel (no rescaling: the squares of
    f32 values above about 1.8e19 overflow)."""
    a, b = _broadcast_operands(ex, call, ("input", "other"))
    return ex.emit.unary("sqrt", ex.emit.binary(
        "add", ex.emit.binary("mul", a, a), ex.emit.binary("mul", b, b)))
