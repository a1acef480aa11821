"""Convolution and pooling: conv2d, max and average pooling (ceil mode,
count_include_pad, divisor_override), adaptive average pooling."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles, register
from .common import float_input


def _pair(value):
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return (int(value[0]),) * 2
        return tuple(int(v) for v in value)
    return (int(value),) * 2


@handles("input, weight, bias=None, stride=1, padding=0, dilation=1, "
         "groups=1", functions=[F.conv2d, torch.conv2d])
@handles("input", modules=[nn.Conv2d])
def _conv2d(ex, call):
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        m = call.module
        if m.padding_mode != "zeros":
            ex.fail("padding_mode='%s' is not supported" % m.padding_mode)
        weight = ex.param(m.weight, "weight")
        bias = ex.param(m.bias, "bias") if m.bias is not None else None
        stride, padding, dilation, groups = (m.stride, m.padding, m.dilation,
                                             m.groups)
    else:
        weight = float_input(ex, call.args["weight"])
        bias = float_input(ex, call.args["bias"]) \
            if call.args["bias"] is not None else None
        stride, padding, dilation, groups = (
            ex.const(call.args[k]) for k in ("stride", "padding", "dilation",
                                             "groups"))
    if x.rank != 4:
        ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
    dilation = _pair(dilation)
    if padding == "valid":
        padding = (0, 0)
    elif padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
        if any(t % 2 for t in total):
            ex.fail("padding='same' with an even kernel pads unevenly, which "
                    "is not supported")
        padding = tuple(t // 2 for t in total)
    y = ex.emit.conv2d(x, weight, ex.out_shape(call), _pair(stride),
                       _pair(padding), dilation, int(groups))
    if bias is not None:
        y = ex.emit.binary("add", y, ex.emit.broadcast(bias, [1], y.shape))
    return y


def _pool(kind):
    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        if call.module is not None:
            m = call.module
            options = {k: getattr(m, k) for k in (
                "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                "return_indices", "count_include_pad", "divisor_override")
                if hasattr(m, k)}
        else:
            options = {k: ex.const(v) for k, v in call.args.items()
                       if k != "input"}
        if x.rank != 4:
            ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
        kernel = _pair(options["kernel_size"])
        stride = options.get("stride")
        stride = kernel if stride is None or stride == [] or stride == () \
            else _pair(stride)
        padding = _pair(options.get("padding", 0))
        if options.get("return_indices"):
            ex.fail("return_indices=True is not supported")
        if _pair(options.get("dilation", 1)) != (1, 1):
            ex.fail("dilation is not supported")
        shape = ex.out_shape(call)
        divisor = options.get("divisor_override")
        include_pad = options.get("count_include_pad", True)
        if kind == "avg_pool2d" and (
                options.get("ceil_mode") or divisor is not None or
                (not include_pad and padding != (0, 0))):
            return _windowed_average(ex, x, shape, kernel, stride, padding,
                                     include_pad, divisor)
        if options.get("ceil_mode"):
            x = _ceil_mode_rows(ex, x, shape, kernel, stride, padding)
        return ex.emit.pool(kind, x, shape, kernel, stride, padding)
    return handler


register("input, kernel_size, stride=None, padding=0, dilation=1, "
         "ceil_mode=False, return_indices=False", _pool("max_pool2d"),
         functions=[F.max_pool2d, torch.max_pool2d])
register("input", _pool("max_pool2d"), modules=[nn.MaxPool2d])
register("input, kernel_size, stride=None, padding=0, ceil_mode=False, "
         "count_include_pad=True, divisor_override=None", _pool("avg_pool2d"),
         functions=[F.avg_pool2d])
register("input", _pool("avg_pool2d"), modules=[nn.AvgPool2d])


def _windowed_average(ex, x, shape, kernel, stride, padding, include_pad,
                      divisor):
    """Average pooling with the windows and divisors of PyTorch's
    avg_pool2d in every mode (ceil mode, count_include_pad, divisor_override)
    as two averaging matmuls: window i of a dimension of n covers [start,
    end) with start = i * stride - padding and end = min(start + kernel,
    n + padding), clamped to [0, n); the divisor is the window's size before
    clamping (count_include_pad) or after, per dimension, and their product
    is the 2-D window's, or `divisor` for all."""
    def averaging(n, m, i):
        a = np.zeros((m, n), dtype=np.float32)
        for row in range(m):
            start = row * stride[i] - padding[i]
            end = min(start + kernel[i], n + padding[i])
            count = end - start
            start, end = max(start, 0), min(end, n)
            if start >= end:
                continue
            if divisor is not None:
                count = divisor if i == 0 else 1
            elif not include_pad:
                count = end - start
            a[row, start:end] = 1.0 / count
        return a
    return _separable_average(ex, x, averaging(x.shape[2], shape[2], 0),
                              averaging(x.shape[3], shape[3], 1))


def _separable_average(ex, x, rows, columns):
    """``rows`` x X x ``columns``^T over the last two dimensions of ``x``
    (N C H W), the two averaging matrices given as numpy arrays."""
    y = ex.emit.matmul(x, ex.emit.constant(columns, "f32"),
                       transpose_rhs=True)                      # N C H ow
    y = ex.emit.transpose(y, [0, 1, 3, 2])                      # N C ow H
    y = ex.emit.matmul(y, ex.emit.constant(rows, "f32"),
                       transpose_rhs=True)                      # N C ow oh
    return ex.emit.transpose(y, [0, 1, 3, 2])


def _ceil_mode_rows(ex, x, shape, kernel, stride, padding):
    """Max pooling in ceil mode as max pooling in floor mode of ``x`` with
    its last row (column) repeated to the length the last window needs.
    PyTorch starts every window inside the input or its left padding, so a
    window that reaches past the input holds its last row, and the copies
    change no maximum; they come after the row they copy, so the first
    maximum of every window, which the backward routes to, is the
    original's."""
    for dim in (2, 3):
        i = dim - 2
        extra = (shape[dim] - 1) * stride[i] + kernel[i] - \
            (x.shape[dim] + 2 * padding[i])
        if extra <= 0:
            continue
        starts = [0] * x.rank
        starts[dim] = x.shape[dim] - 1
        last = ex.emit.slice(x, starts, list(x.shape), [1] * x.rank)
        x = ex.emit.concat([x] + [last] * extra, dim)
    return x


@handles("input, output_size", functions=[F.adaptive_avg_pool2d])
@handles("input", modules=[nn.AdaptiveAvgPool2d])
def _adaptive_avg_pool(ex, call):
    x = float_input(ex, call.args["input"])
    if x.rank != 4:
        ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
    shape = ex.out_shape(call)
    (h, w), (oh, ow) = x.shape[2:], shape[2:]
    if h % oh == 0 and w % ow == 0:
        kernel = (h // oh, w // ow)
        return ex.emit.pool("avg_pool2d", x, shape, kernel, kernel, (0, 0))
    # Windows of unequal size or overlapping: out = A_h x A_w^T, with
    # A[i, j] = 1 / |window i| for j in window i = [floor(i n / m),
    # ceil((i + 1) n / m)), as PyTorch's adaptive pooling.
    def averaging(n, m):
        a = np.zeros((m, n), dtype=np.float32)
        for i in range(m):
            lo, hi = (i * n) // m, -(-((i + 1) * n) // m)
            a[i, lo:hi] = 1.0 / (hi - lo)
        return a
    return _separable_average(ex, x, averaging(h, oh), averaging(w, ow))
