"""Spatial rearrangements written with reshapes, broadcasts, transposes and
slices: nearest-neighbour interpolation by integer factors, pixel shuffle
and unshuffle."""

import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles
from .common import float_input


@handles("input, size=None, scale_factor=None, mode='nearest', "
         "align_corners=None, recompute_scale_factor=None, antialias=False",
         functions=[F.interpolate, F.upsample])
@handles("input", modules=[nn.Upsample, nn.UpsamplingNearest2d])
def _interpolate(ex, call):
    """Nearest-neighbour interpolation whose output extents are whole
    multiples or whole divisors of the input's: each input element
    repeated k times along a dimension (a broadcast between two reshapes,
    whose backward sums the k copies), or every k-th element kept (a
    strided slice)."""
    mode = call.module.mode if call.module is not None else \
        ex.const(call.args["mode"], "mode")
    if mode != "nearest":
        ex.fail("mode='%s' is not supported (only 'nearest', by whole "
                "factors)" % mode)
    x = float_input(ex, call.args["input"])
    out = ex.out_shape(call)
    if x.rank < 3 or out[:2] != x.shape[:2]:
        ex.fail("expected a batch of [N, C, ...] inputs, got %s" % x.type)
    up, down = [], []
    for size, result in zip(x.shape[2:], out[2:]):
        if result >= size and result % size == 0:
            up.append(result // size)
            down.append(1)
        elif result < size and size % result == 0:
            up.append(1)
            down.append(size // result)
        else:
            ex.fail("the output extent %d is not a whole multiple or "
                    "divisor of the input's %d (only whole factors are "
                    "supported)" % (result, size))
    if any(k > 1 for k in down):
        limits = list(x.shape)
        x = ex.emit.slice(x, [0] * x.rank, limits, [1, 1] + down)
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
