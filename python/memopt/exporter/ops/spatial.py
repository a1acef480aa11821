"""Spatial resampling and rearrangements: interpolation in every mode of
F.interpolate (as reshapes, broadcasts and slices for nearest-neighbour by
whole factors, and as a matrix per spatial dimension otherwise), pixel
shuffle and unshuffle."""

import numpy as np
import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles
from .common import float_input


def along(ex, x, dim, matrix):
    """``x`` with dimension ``dim`` (extent n) mapped by the m x n numpy
    ``matrix``: y[..., i, ...] = sum_j matrix[i, j] x[..., j, ...], one
    matmul by a constant, between transposes that move ``dim`` last and
    back. Its gradient is the transposed map."""
    if x.rank == 1:  # matmul takes matrices: a row
        y = along(ex, ex.emit.reshape(x, (1,) + x.shape), 1, matrix)
        return ex.emit.reshape(y, y.shape[1:])
    last = x.rank - 1
    perm = list(range(x.rank))
    perm[dim], perm[last] = perm[last], perm[dim]
    y = ex.emit.transpose(x, perm)
    y = ex.emit.matmul(y, ex.emit.constant(matrix, "f32"),
                       transpose_rhs=True)
    return ex.emit.transpose(y, perm)


def adaptive_windows(n, m):
    """Adaptive pooling's m windows over n samples, PyTorch's: window i is
    [floor(i n / m), ceil((i + 1) n / m))."""
    return [range((i * n) // m, -(-((i + 1) * n) // m)) for i in range(m)]


_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic",
          "trilinear", "area")


def interpolation_matrix(mode, n, m, scale, align_corners):
    """The m x n matrix of PyTorch's interpolation from n to m samples along
    one dimension, with its source indices and weights computed as its CPU
    kernels compute them in float32: ``scale`` is the given scale factor
    (None when PyTorch derives it from the extents)."""
    f32 = np.float32
    ratio = f32(1.0 / scale) if scale is not None and scale > 0 \
        else f32(n) / f32(m)
    a = np.zeros((m, n), dtype=np.float64)
    rows = np.arange(m)
    if mode in ("nearest", "nearest-exact"):
        offset = f32(0.5) if mode == "nearest-exact" else f32(0)
        source = np.floor((rows.astype(f32) + offset) * ratio)
        a[rows, np.minimum(source.astype(np.int64), n - 1)] = 1.0
        return a.astype(np.float32)
    if mode == "area":  # adaptive average pooling's windows
        for i, window in enumerate(adaptive_windows(n, m)):
            a[i, window] = 1.0 / len(window)
        return a.astype(np.float32)
    if m == n and mode != "bicubic":
        # PyTorch's linear kernels copy an unchanged extent, whatever the
        # scale factor.
        a[rows, rows] = 1.0
        return a.astype(np.float32)
    if align_corners:
        ratio = f32(n - 1) / f32(m - 1) if m > 1 else f32(0)
        source = ratio * rows.astype(f32)
    else:
        source = ratio * (rows.astype(f32) + f32(0.5)) - f32(0.5)
    if mode == "bicubic":
        first = np.floor(source)
        t = (source - first).astype(f32)
        c = f32(-0.75)

        def near(x):  # |x| <= 1
            return ((c + 2) * x - (c + 3)) * x * x + 1

        def far(x):  # 1 < |x| < 2
            return ((c * x - 5 * c) * x + 8 * c) * x - 4 * c
        weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
        for k, w in enumerate(weights):
            index = np.clip(first.astype(np.int64) - 1 + k, 0, n - 1)
            np.add.at(a, (rows, index), w.astype(np.float64))
        return a.astype(np.float32)
    source = np.maximum(source, f32(0))
    low = np.minimum(np.floor(source).astype(np.int64), n - 1)
    high = np.minimum(low + 1, n - 1)
    upper = np.clip(source - low.astype(f32), 0, 1).astype(f32)
    np.add.at(a, (rows, low), (f32(1) - upper).astype(np.float64))
    np.add.at(a, (rows, high), upper.astype(np.float64))
    return a.astype(np.float32)


def _whole_factors(matrices):
    """The per-dimension repeat and step counts of nearest-neighbour
    interpolation matrices that repeat each element k times or keep every
    k-th, or None if one of them does neither (a scale factor given as
    0.6 keeps elements 0 and 1 of 4, not 0 and 2)."""
    up, down = [], []
    for a in matrices:
        m, n = a.shape
        k = m // n if m >= n else n // m
        rows = np.arange(m)
        picks = rows // k if m >= n else rows * k
        if (m % n if m >= n else n % m) or \
                not np.array_equal(a, np.eye(n, dtype=a.dtype)[picks]):
            return None
        up.append(k if m >= n else 1)
        down.append(1 if m >= n else k)
    return up, down


def _repeat_and_step(ex, x, out, up, down):
    """Nearest-neighbour interpolation by whole factors: each input element
    repeated k times along a dimension (a broadcast between two reshapes,
    whose backward sums the k copies), or every k-th element kept (a
    strided slice)."""
    if any(k > 1 for k in down):
        x = ex.emit.slice(x, [0] * x.rank, list(x.shape), [1, 1] + down)
    if any(k > 1 for k in up):
        spread = list(x.shape[:2])
        for size in x.shape[2:]:
            spread += [size, 1]
        repeated = list(x.shape[:2])
        for size, k in zip(x.shape[2:], up):
            repeated += [size, k]
        x = ex.emit.broadcast_to(ex.emit.reshape(x, tuple(spread)),
                                 tuple(repeated))
        x = ex.emit.reshape(x, out)
    return x


@handles("input, size=None, scale_factor=None, mode='nearest', "
         "align_corners=None, recompute_scale_factor=None, antialias=False",
         functions=[F.interpolate, F.upsample])
@handles("input", modules=[nn.Upsample, nn.UpsamplingNearest2d,
                           nn.UpsamplingBilinear2d])
def _interpolate(ex, call):
    """F.interpolate and nn.Upsample in every mode but antialiasing, over
    1, 2 or 3 spatial dimensions. Nearest-neighbour interpolation by whole
    factors is a broadcast or a strided slice; every other case is linear
    in each spatial dimension, so it is one constant matrix per dimension
    (its rows PyTorch's weights), applied by a matmul. That costs n m
    multiply-adds per output row of a dimension where PyTorch's kernel
    does 1, 2 or 4."""
    if call.module is not None:
        m = call.module
        args = {"mode": m.mode, "scale_factor": m.scale_factor,
                "align_corners": m.align_corners,
                "recompute_scale_factor": getattr(
                    m, "recompute_scale_factor", None)}
    else:
        args = {k: ex.const(call.args[k], k) for k in (
            "mode", "scale_factor", "align_corners",
            "recompute_scale_factor", "antialias")}
    mode = args["mode"]
    if mode not in _MODES:
        ex.fail("mode='%s' is not supported" % mode)
    if args.get("antialias"):
        ex.fail("antialias=True is not supported")
    x = float_input(ex, call.args["input"])
    out = ex.out_shape(call)
    if x.rank < 3 or out[:2] != x.shape[:2]:
        ex.fail("expected a batch of [N, C, ...] inputs, got %s" % x.type)
    spatial = x.rank - 2
    scales = args["scale_factor"]
    if scales is None or args["recompute_scale_factor"] or mode == "area":
        scales = [None] * spatial
    elif not isinstance(scales, (tuple, list)):
        scales = [scales] * spatial
    matrices = [interpolation_matrix(mode, x.shape[2 + d], out[2 + d],
                                      scales[d], args["align_corners"])
                for d in range(spatial)]
    factors = _whole_factors(matrices) if mode == "nearest" else None
    if factors is not None:
        return _repeat_and_step(ex, x, out, *factors)
    for d, matrix in enumerate(matrices):
        n = x.shape[2 + d]
        if matrix.shape != (n, n) or not np.array_equal(matrix, np.eye(n)):
            x = along(ex, x, 2 + d, matrix)
    return x


@handles("input, upscale_factor", functions=[F.pixel_shuffle])
@handles("input", modules=[nn.PixelShuffle])
def _pixel_shuffle(ex, call):
    """[N, C r^2, H, W] to [N, C, H r, W r]: channel c r^2 + i r + j goes
    to row h r + i, column w r + j of channel c."""
    r = call.module.upscale_factor if call.module is not None else \
        ex.const(call.args["upscale_factor"], "upscale_factor")
    x = float_input(ex, call.args["input"])
    if x.rank != 4 or x.shape[1] % (r * r):
        ex.fail("expected [N, C * %d, H, W], got %s" % (r * r, x.type))
    n, c, h, w = x.shape
    c //= r * r
    x = ex.emit.reshape(x, (n, c, r, r, h, w))
    x = ex.emit.transpose(x, [0, 1, 4, 2, 5, 3])
    return ex.emit.reshape(x, (n, c, h * r, w * r))


@handles("input, downscale_factor", functions=[F.pixel_unshuffle])
@handles("input", modules=[nn.PixelUnshuffle])
def _pixel_unshuffle(ex, call):
    """The inverse of pixel_shuffle: [N, C, H r, W r] to [N, C r^2, H, W]."""
    r = call.module.downscale_factor if call.module is not None else \
        ex.const(call.args["downscale_factor"], "downscale_factor")
    x = float_input(ex, call.args["input"])
    if x.rank != 4 or x.shape[2] % r or x.shape[3] % r:
        ex.fail("expected [N, C, H * %d, W * %d], got %s" % (r, r, x.type))
    n, c, h, w = x.shape
    h, w = h // r, w // r
    x = ex.emit.reshape(x, (n, c, h, r, w, r))
    x = ex.emit.transpose(x, [0, 1, 3, 5, 2, 4])
    return ex.emit.reshape(x, (n, c * r * r, h, w))
