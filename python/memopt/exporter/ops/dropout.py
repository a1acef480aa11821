"""Randomness: dropout, dropout2d and torchvision's stochastic depth, each
a memopt.dropout with the next Philox stream."""

import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles, register
from .common import float_input


@handles("input, p=0.5, training=True, inplace=False",
         functions=[F.dropout])
@handles("input", modules=[nn.Dropout])
def _dropout(ex, call):
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        p, training = call.module.p, call.module.training
    else:
        p, training = ex.const(call.args["p"]), ex.const(call.args["training"])
    return dropout_value(ex, x, p, training)


def dropout_value(ex, x, p, training, shared=0):
    """Dropout of the Value ``x``, with the next Philox stream, one mask bit
    shared along the last ``shared`` dimensions; ``x`` itself when there is
    nothing to drop, zeros (x * 0, as PyTorch) when everything is."""
    if not training or p == 0:
        return x
    if p == 1:
        return ex.emit.scalar("mul_scalar", x, 0.0)
    if not 0 < p < 1:
        ex.fail("p=%r is not supported" % p)
    stream = ex.dropout_stream
    ex.dropout_stream += 1
    return ex.emit.dropout(x, p, 0, stream, shared)


@handles("input, p=0.5, training=True, inplace=False",
         functions=[F.dropout2d])
@handles("input", modules=[nn.Dropout2d])
def _dropout2d(ex, call):
    """nn.Dropout2d / F.dropout2d on [N, C, H, W]: one bit per channel."""
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        p, training = call.module.p, call.module.training
    else:
        p, training = ex.const(call.args["p"]), ex.const(call.args["training"])
    if x.rank != 4:
        ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
    return dropout_value(ex, x, p, training, shared=2)


def _stochastic_depth(ex, call):
    """torchvision.ops.stochastic_depth: row mode shares one bit per example
    (dimension 0), batch mode one for the whole batch."""
    x = float_input(ex, call.args["input"])
    p, mode = ex.const(call.args["p"]), ex.const(call.args["mode"])
    training = ex.const(call.args["training"])
    if mode not in ("row", "batch"):
        ex.fail("unknown mode '%s'" % mode)
    shared = x.rank - 1 if mode == "row" else x.rank
    return dropout_value(ex, x, p, training, shared)


try:
    from torchvision.ops import stochastic_depth
    register("input, p, mode, training=True", _stochastic_depth,
             functions=[stochastic_depth])
except ImportError:  # torchvision is optional
    pass
