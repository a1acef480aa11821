"""Convolution and pooling: conv1d, conv2d and their transposes, max and
average pooling in 1-D and 2-D (ceil mode, count_include_pad,
divisor_override), adaptive average and max pooling in 1-D, 2-D and 3-D."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles, register, returns_tuple
from .common import float_input, values_shape
from .indexing import rows_along
from .spatial import adaptive_windows, along, interpolation_matrix


def _widened(value, fill, spatial):
    """A 1-D or 2-D kernel option as the pair of the 2-D op: a 1-D value
    becomes (fill, value), the unit height's."""
    if spatial == 2:
        return _pair(value)
    value = value if isinstance(value, (tuple, list)) else [value]
    return (fill, int(value[0]))


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
    return _conv(ex, call, 2)


@handles("input, weight, bias=None, stride=1, padding=0, dilation=1, "
         "groups=1", functions=[F.conv1d, torch.conv1d])
@handles("input", modules=[nn.Conv1d])
def _conv1d(ex, call):
    """A 1-D convolution is a 2-D one of a unit height with a unit-height
    filter."""
    return _conv(ex, call, 1)


@handles("input, weight, bias=None, stride=1, padding=0, output_padding=0, "
         "groups=1, dilation=1", functions=[F.conv_transpose2d,
                                            torch.conv_transpose2d])
@handles("input, output_size=None", modules=[nn.ConvTranspose2d])
def _conv_transpose2d(ex, call):
    """A transposed convolution is the input gradient of the convolution
    it transposes (memopt.conv2d_grad_input), its weight that
    convolution's filter; output_padding picks the larger result PyTorch
    computes."""
    return _conv(ex, call, 2, "conv2d_grad_input")


@handles("input, weight, bias=None, stride=1, padding=0, output_padding=0, "
         "groups=1, dilation=1", functions=[F.conv_transpose1d,
                                            torch.conv_transpose1d])
@handles("input, output_size=None", modules=[nn.ConvTranspose1d])
def _conv_transpose1d(ex, call):
    return _conv(ex, call, 1, "conv2d_grad_input")


def _conv(ex, call, spatial, kind="conv2d"):
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
    out = ex.out_shape(call)
    transposed = kind != "conv2d"
    if transposed and call.module is not None and \
            call.args["output_size"] is not None:
        ex.fail("output_size is not supported: set output_padding")
    if x.rank == spatial + 1:  # unbatched
        x = ex.emit.reshape(x, (1,) + x.shape)
    if x.rank != spatial + 2:
        ex.fail("expected a %d-D [N, C, ...] or %d-D [C, ...] input, got %s"
                % (spatial + 2, spatial + 1, x.type))
    if weight.rank != spatial + 2:
        ex.fail("expected a %d-D filter, got %s" % (spatial + 2, weight.type))

    def widen(value, fill):
        return _widened(value, fill, spatial)
    if spatial == 1:
        x = ex.emit.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
        weight = ex.emit.reshape(weight, weight.shape[:2] + (1,) +
                                 weight.shape[2:])
    dilation = widen(dilation, 1)
    if padding == "valid":
        padding = (0, 0)
    elif padding == "same" and not transposed:
        # PyTorch puts an odd total's extra zero after the input (bottom,
        # right): one explicit row or column of zeros, the rest symmetric.
        total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
        if any(t % 2 for t in total):
            extra = [0, 0] + [t % 2 for t in total]
            x = ex.emit.pad(x, [0] * 4, tuple(
                n + e for n, e in zip(x.shape, extra)))
        padding = tuple(t // 2 for t in total)
    else:
        padding = widen(padding, 0)
    channels = weight.shape[1] * int(groups) if transposed else \
        weight.shape[0]
    shape = x.shape[:1] + (channels,) + ((1,) if spatial == 1 else ()) + \
        out[-spatial:]
    stride = widen(stride, 1)
    if transposed and _reaches_past(x, weight, shape, stride, padding,
                                    dilation):
        y = _uncropped_transpose(ex, x, weight, shape, stride, padding,
                                 dilation, int(groups))
    else:
        y = ex.emit.conv2d(x, weight, shape, stride, padding, dilation,
                           int(groups), kind)
    if bias is not None:
        y = ex.emit.binary("add", y, ex.emit.broadcast(bias, [1], y.shape))
    return ex.emit.reshape(y, out)


def _convolved(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _reaches_past(x, weight, shape, stride, padding, dilation):
    """Whether a transposed convolution's output_padding is one stride or
    more (PyTorch allows it up to the dilation), so that the convolution of
    the result would not give back the input's extent."""
    return any(_convolved(shape[2 + d], weight.shape[2 + d], stride[d],
                          padding[d], dilation[d]) != x.shape[2 + d]
               for d in range(2))


def _uncropped_transpose(ex, x, weight, shape, stride, padding, dilation,
                         groups):
    """The transposed convolution without padding, over its whole extent
    ((n - 1) stride + dilation (k - 1) + 1), then the rows and columns
    PyTorch keeps: from the padding on, and zeros past the extent."""
    full = [(x.shape[2 + d] - 1) * stride[d] +
            dilation[d] * (weight.shape[2 + d] - 1) + 1 for d in range(2)]
    y = ex.emit.conv2d(x, weight, shape[:2] + tuple(full), stride, (0, 0),
                       dilation, groups, "conv2d_grad_input")
    limits = [min(padding[d] + shape[2 + d], full[d]) for d in range(2)]
    y = ex.emit.slice(y, [0, 0] + list(padding), list(shape[:2]) + limits,
                      [1] * 4)
    if y.shape != shape:
        y = ex.emit.pad(y, [0] * 4, shape)
    return y


def _pool_options(ex, call):
    """The pooling options of a module or a functional call."""
    if call.module is not None:
        return {k: getattr(call.module, k) for k in (
            "kernel_size", "stride", "padding", "dilation", "ceil_mode",
            "return_indices", "count_include_pad", "divisor_override")
            if hasattr(call.module, k)}
    return {k: ex.const(v) for k, v in call.args.items() if k != "input"}


def _as_4d(ex, x, spatial):
    """``x``, [N, C, *S] or unbatched [C, *S] with ``spatial`` dimensions in
    S (1 or 2), as [N, C, H, W] with a unit N and a unit H where missing."""
    if x.rank not in (spatial + 1, spatial + 2):
        ex.fail("expected a %d-D [N, C, ...] or a %d-D [C, ...] input, got "
                "%s" % (spatial + 2, spatial + 1, x.type))
    shape = x.shape if x.rank == spatial + 2 else (1,) + x.shape
    if spatial == 1:
        shape = shape[:2] + (1,) + shape[2:]
    return ex.emit.reshape(x, shape)


def _pool(kind, spatial=2, name=None):
    """max_pool / avg_pool over 1 or 2 spatial dimensions; 1-D pooling is
    2-D pooling of a unit height."""
    def widen(value, fill):
        return _widened(value, fill, spatial)

    def handler(ex, call):
        x = _as_4d(ex, float_input(ex, call.args["input"]), spatial)
        options = _pool_options(ex, call)
        out = values_shape(ex, call, name or kind)
        kernel = widen(options["kernel_size"], 1)
        stride = options.get("stride")
        stride = kernel if stride is None or stride == [] or stride == () \
            else widen(stride, 1)
        padding = widen(options.get("padding", 0), 0)
        if options.get("return_indices") and not isinstance(call.out, tuple):
            ex.fail("return_indices=True is not supported")
        if widen(options.get("dilation", 1), 1) != (1, 1):
            ex.fail("dilation is not supported")
        shape = x.shape[:2] + out[-2:] if spatial == 2 else \
            x.shape[:2] + (1,) + out[-1:]
        divisor = options.get("divisor_override")
        include_pad = options.get("count_include_pad", True)
        if kind == "avg_pool2d" and (
                options.get("ceil_mode") or divisor is not None or
                (not include_pad and padding != (0, 0))):
            y = _windowed_average(ex, x, shape, kernel, stride, padding,
                                  include_pad, divisor)
        else:
            if options.get("ceil_mode"):
                x = _ceil_mode_rows(ex, x, shape, kernel, stride, padding)
            y = ex.emit.pool(kind, x, shape, kernel, stride, padding)
        y = ex.emit.reshape(y, out)
        return (y, None) if isinstance(call.out, tuple) else y
    return returns_tuple(handler)


_MAX_POOL = "input, kernel_size, stride=None, padding=0, dilation=1, " \
    "ceil_mode=False, return_indices=False"
_AVG_POOL = "input, kernel_size, stride=None, padding=0, ceil_mode=False, " \
    "count_include_pad=True"
register(_MAX_POOL, _pool("max_pool2d"),
         functions=[F.max_pool2d, torch.max_pool2d,
                    F.max_pool2d_with_indices])
register("input", _pool("max_pool2d"), modules=[nn.MaxPool2d])
register(_AVG_POOL + ", divisor_override=None", _pool("avg_pool2d"),
         functions=[F.avg_pool2d])
register("input", _pool("avg_pool2d"), modules=[nn.AvgPool2d])
register(_MAX_POOL, _pool("max_pool2d", 1, "max_pool1d"),
         functions=[F.max_pool1d, torch.max_pool1d,
                    F.max_pool1d_with_indices])
register("input", _pool("max_pool2d", 1, "max_pool1d"),
         modules=[nn.MaxPool1d])
register(_AVG_POOL, _pool("avg_pool2d", 1, "avg_pool1d"),
         functions=[F.avg_pool1d, torch.avg_pool1d])
register("input", _pool("avg_pool2d", 1, "avg_pool1d"),
         modules=[nn.AvgPool1d])


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
    x = along(ex, x, 2, averaging(x.shape[2], shape[2], 0))
    return along(ex, x, 3, averaging(x.shape[3], shape[3], 1))


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


def _adaptive_pool(kind, spatial):
    """Adaptive pooling over the last ``spatial`` dimensions (1, 2 or 3) of
    a batched or unbatched input. Window i of m over n samples is [floor(i
    n / m), ceil((i + 1) n / m)). Where every extent divides evenly, the
    windows are a plain pooling's (kernel = stride = n / m); otherwise
    average pooling is area interpolation (a matrix per dimension), and max
    pooling takes the maxima of the windows one dimension at a time."""
    name = "adaptive_%s_pool%dd" % (kind, spatial)

    def handler(ex, call):
        x = float_input(ex, call.args["input"])
        if x.rank not in (spatial + 1, spatial + 2):
            ex.fail("expected a %d-D or %d-D input, got %s"
                    % (spatial + 1, spatial + 2, x.type))
        out = values_shape(ex, call, name)
        sizes, results = x.shape[-spatial:], out[-spatial:]
        if all(n % m == 0 for n, m in zip(sizes, results)) and spatial < 3:
            y = _as_4d(ex, x, spatial)
            kernel = (1,) * (2 - spatial) + tuple(
                n // m for n, m in zip(sizes, results))
            shape = y.shape[:2] + tuple(
                n // k for n, k in zip(y.shape[2:], kernel))
            y = ex.emit.pool(kind + "_pool2d", y, shape, kernel, kernel,
                             (0, 0))
        else:
            y = x
            for d, (n, m) in enumerate(zip(sizes, results)):
                dim = x.rank - spatial + d
                if kind == "avg":
                    y = along(ex, y, dim,
                              interpolation_matrix("area", n, m, None, None))
                else:
                    y = _window_max(ex, y, dim, m)
        y = ex.emit.reshape(y, out)
        return (y, None) if isinstance(call.out, tuple) else y
    return returns_tuple(handler)


def _window_max(ex, x, dim, m):
    """The maxima of adaptive pooling's m windows along ``dim``: each
    window's elements looked up (indexing.rows_along), the shorter windows
    padded with copies of their last element, then the largest of each.
    A copy changes no maximum, and the lookup's gradient adds the copies'
    shares back to the one element."""
    windows = adaptive_windows(x.shape[dim], m)
    width = max(len(w) for w in windows)
    rows = [w[min(k, len(w) - 1)] for w in windows for k in range(width)]
    y = rows_along(ex, x, dim, rows)
    y = ex.emit.reshape(y, x.shape[:dim] + (m, width) + x.shape[dim + 1:])
    return ex.emit.reduce("reduce_max", y, [dim + 1])


for _spatial in (1, 2, 3):
    for _kind, _module in (("avg", "AdaptiveAvgPool"),
                           ("max", "AdaptiveMaxPool")):
        _name = "adaptive_%s_pool%dd" % (_kind, _spatial)
        _functions = [getattr(F, _name)]
        if _kind == "max":
            _functions.append(getattr(F, _name + "_with_indices"))
        elif _spatial == 1:
            _functions.append(torch.adaptive_avg_pool1d)
        register("input, output_size, return_indices=False",
                 _adaptive_pool(_kind, _spatial), functions=_functions)
        register("input", _adaptive_pool(_kind, _spatial),
                 modules=[getattr(nn, "%s%dd" % (_module, _spatial))])
