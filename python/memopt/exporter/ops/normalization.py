"""Normalisation: layer norm, batch norm (training mode, with its running
statistics as state), group and instance norm (written with reductions),
local response norm and cosine similarity."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles
from .common import float_input, norm_dim
from .reductions import variance
from .spatial import along

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d)
INSTANCE_NORMS = (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
# The modules whose running statistics (when they track them) are state.
STATEFUL_NORMS = BATCH_NORMS + INSTANCE_NORMS


@handles("input, normalized_shape, weight=None, bias=None, eps=1e-05",
         functions=[F.layer_norm])
@handles("input", modules=[nn.LayerNorm])
def _layer_norm(ex, call):
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        return layer_norm_module(ex, call.module, x)
    shape = ex.const(call.args["normalized_shape"])
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    eps = ex.const(call.args["eps"])
    weight = ex.val(call.args["weight"], "f32") \
        if call.args["weight"] is not None else None
    bias = ex.val(call.args["bias"], "f32") \
        if call.args["bias"] is not None else None
    return _layer_norm_values(ex, x, shape, weight, bias, eps)


def layer_norm_module(ex, m, x):
    """``nn.LayerNorm`` ``m`` applied to the Value ``x``."""
    weight = ex.param(m.weight, "weight") if m.weight is not None else None
    bias = ex.param(m.bias, "bias") if m.bias is not None else None
    return _layer_norm_values(ex, x, tuple(m.normalized_shape), weight, bias,
                              m.eps)


def _layer_norm_values(ex, x, shape, weight, bias, eps):
    if not 0.0 < eps < 1.0:
        ex.fail("eps=%r is not supported (memopt takes it in (0, 1))" % eps)
    if weight is None:
        weight = ex.emit.constant(np.ones(shape, np.float32), "f32")
    if bias is None:
        bias = ex.emit.constant(np.zeros(shape, np.float32), "f32")
    if x.shape[x.rank - len(shape):] != tuple(shape) or \
            weight.shape != tuple(shape) or bias.shape != tuple(shape):
        ex.fail("normalized_shape %s does not match the input %s"
                % (list(shape), x.type))
    return ex.emit.layer_norm(x, weight, bias, eps)[0]


@handles("input", modules=list(BATCH_NORMS))
def _batch_norm(ex, call):
    m = call.module
    path = call.node.target
    if not m.training:
        ex.fail("the module is in eval mode: export a model in training "
                "mode (model.train())")
    if m.momentum is None:
        ex.fail("momentum=None (a cumulative average) is not supported")
    x = float_input(ex, call.args["input"])
    if x.rank < 2 or x.shape[1] != m.num_features:
        ex.fail("expected an input with %d channels in dimension 1, got %s"
                % (m.num_features, x.type))
    channels = (m.num_features,)
    weight = ex.param(m.weight, "weight") if m.affine else \
        ex.emit.constant(np.ones(channels, np.float32), "f32")
    bias = ex.param(m.bias, "bias") if m.affine else \
        ex.emit.constant(np.zeros(channels, np.float32), "f32")
    if m.track_running_stats:
        mean = ex.state[path + ".running_mean"]
        var = ex.state[path + ".running_var"]
    else:
        mean = ex.emit.constant(np.zeros(channels, np.float32), "f32")
        var = ex.emit.constant(np.ones(channels, np.float32), "f32")
    y, _, _, new_mean, new_var = ex.emit.batch_norm(
        x, weight, bias, mean, var, m.eps, m.momentum)
    if m.track_running_stats:
        ex.state[path + ".running_mean"] = new_mean
        ex.state[path + ".running_var"] = new_var
    return y


@handles("input, num_groups, weight=None, bias=None, eps=1e-05",
         functions=[F.group_norm])
@handles("input", modules=[nn.GroupNorm])
def _group_norm(ex, call):
    """(x - mean) / sqrt(var + eps) over each group of channels and the
    spatial extent (the biased variance), then the per-channel affine map:
    written with reductions, so that its backward is theirs and every
    intermediate is in the memory account."""
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        m = call.module
        groups, eps = m.num_groups, m.eps
        weight = ex.param(m.weight, "weight") if m.affine else None
        bias = ex.param(m.bias, "bias") if m.affine else None
    else:
        groups = ex.const(call.args["num_groups"], "num_groups")
        eps = ex.const(call.args["eps"], "eps")
        weight = ex.val(call.args["weight"]) \
            if call.args["weight"] is not None else None
        bias = ex.val(call.args["bias"]) \
            if call.args["bias"] is not None else None
    return group_norm_values(ex, x, groups, weight, bias, eps)


def group_norm_values(ex, x, groups, weight, bias, eps):
    if x.rank < 2 or groups < 1 or x.shape[1] % groups:
        ex.fail("%d groups do not divide the %s input's channels (dimension "
                "1)" % (groups, x.type))
    batch, channels = x.shape[0], x.shape[1]
    grouped = ex.emit.reshape(
        x, (batch, groups, int(np.prod(x.shape[1:])) // groups))
    var, mean = variance(ex, grouped, [2], 0.0)
    inv = ex.emit.unary("rsqrt", ex.emit.scalar("add_scalar", var, eps))
    inv = ex.emit.reshape(inv, (batch, groups, 1))
    centered = ex.emit.binary("sub", grouped,
                              ex.emit.broadcast_to(mean, grouped.shape))
    y = ex.emit.reshape(ex.emit.binary(
        "mul", centered, ex.emit.broadcast_to(inv, grouped.shape)), x.shape)
    affine_shape = (1, channels) + (1,) * (x.rank - 2)
    for value, kind in ((weight, "mul"), (bias, "add")):
        if value is None:
            continue
        if value.shape != (channels,):
            ex.fail("the affine parameters must have shape (%d,), got %s"
                    % (channels, value.type))
        y = ex.emit.binary(kind, y, ex.emit.broadcast_to(
            ex.emit.reshape(value, affine_shape), x.shape))
    return y


@handles("input, running_mean=None, running_var=None, weight=None, "
         "bias=None, use_input_stats=True, momentum=0.1, eps=1e-05",
         functions=[F.instance_norm])
@handles("input", modules=list(INSTANCE_NORMS))
def _instance_norm(ex, call):
    """Instance norm normalizes each channel of each sample over its
    spatial extent: group norm with one group per channel. A module that
    tracks running statistics updates them as state, as PyTorch does in
    training: by momentum towards the batch's average of each sample's
    mean and unbiased variance. The functional form's running statistics
    are refused: PyTorch updates the caller's tensors in place, which
    memopt cannot."""
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        m = call.module
        if m.track_running_stats and not m.training:
            ex.fail("the module is in eval mode: export a model in training "
                    "mode (model.train())")
        if m.track_running_stats and m.momentum is None:
            ex.fail("momentum=None (a cumulative average) is not supported")
        eps = m.eps
        weight = ex.param(m.weight, "weight") if m.affine else None
        bias = ex.param(m.bias, "bias") if m.affine else None
    else:
        if call.args["running_mean"] is not None or \
                call.args["running_var"] is not None:
            ex.fail("running statistics are not supported")
        if not ex.const(call.args["use_input_stats"], "use_input_stats"):
            ex.fail("use_input_stats=False is not supported")
        eps = ex.const(call.args["eps"], "eps")
        weight, bias = (float_input(ex, call.args[k])
                        if call.args[k] is not None else None
                        for k in ("weight", "bias"))
    if x.rank < 3:
        ex.fail("expected a batch of [N, C, ...] inputs, got %s" % x.type)
    if call.module is not None and call.module.track_running_stats:
        _update_instance_statistics(ex, call.node.target, call.module, x)
    return group_norm_values(ex, x, x.shape[1], weight, bias, eps)


def _update_instance_statistics(ex, path, m, x):
    """running = (1 - momentum) running + momentum * (the batch's average
    of each sample's per-channel mean, or unbiased variance)."""
    batch, channels = x.shape[0], x.shape[1]
    rows = ex.emit.reshape(x, (batch, channels,
                               int(np.prod(x.shape[2:]))))
    var, mean = variance(ex, rows, [2], 1.0)
    for name, value in (("running_mean", ex.emit.reshape(
            mean, (batch, channels))), ("running_var", var)):
        average = ex.emit.reduce("reduce_mean", value, [0])
        key = path + "." + name
        ex.state[key] = ex.emit.binary(
            "add", ex.emit.scalar("mul_scalar", ex.state[key],
                                  1.0 - m.momentum),
            ex.emit.scalar("mul_scalar", average, m.momentum))


@handles("input, size, alpha=0.0001, beta=0.75, k=1.0",
         functions=[F.local_response_norm])
@handles("input", modules=[nn.LocalResponseNorm])
def _local_response_norm(ex, call):
    """x / (k + alpha / size * S)^beta, S the sum of x^2 over a window of
    ``size`` channels (size // 2 before, (size - 1) // 2 after, zeros past
    the edges), as PyTorch: S is one matmul over the channel dimension by a
    constant band of ones."""
    x = float_input(ex, call.args["input"])
    if call.module is not None:
        m = call.module
        size, alpha, beta, k = m.size, m.alpha, m.beta, m.k
    else:
        size, alpha, beta, k = (ex.const(call.args[n], n) for n in
                                ("size", "alpha", "beta", "k"))
    if x.rank < 3:
        ex.fail("expected a batch of [N, C, ...] inputs, got %s" % x.type)
    channels = x.shape[1]
    band = np.zeros((channels, channels), dtype=np.float32)
    for c in range(channels):
        band[c, max(c - size // 2, 0):c + (size - 1) // 2 + 1] = 1.0
    squares = along(ex, ex.emit.binary("mul", x, x), 1, band)
    div = ex.emit.scalar("add_scalar",
                         ex.emit.scalar("mul_scalar", squares, alpha / size),
                         k)
    return ex.emit.binary("div", x, ex.emit.scalar("pow_scalar", div, beta))


@handles("x1, x2, dim=1, eps=1e-08", functions=[F.cosine_similarity,
                                                torch.cosine_similarity])
@handles("x1, x2", modules=[nn.CosineSimilarity])
def _cosine_similarity(ex, call):
    """sum(x1 x2) / sqrt(max(sum(x1^2) sum(x2^2), eps^2)) along ``dim``
    after broadcasting, PyTorch's formula."""
    if call.module is not None:
        dim, eps = call.module.dim, call.module.eps
    else:
        dim, eps = (ex.const(call.args[k], k) for k in ("dim", "eps"))
    a, b = (float_input(ex, call.args[k]) for k in ("x1", "x2"))
    shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    a, b = ex.emit.broadcast_to(a, shape), ex.emit.broadcast_to(b, shape)
    dim = norm_dim(ex, dim, len(shape))

    def dot(u, v):  # a 0-d tensor's dimension 0 is the tensor itself
        product = ex.emit.binary("mul", u, v)
        return ex.emit.reduce("reduce_sum", product, [dim]) if shape \
            else product
    norms = ex.emit.binary("mul", dot(a, a), dot(b, b))
    norms = ex.emit.unary("sqrt", ex.emit.clamp(norms, min=eps * eps))
    return ex.emit.reshape(ex.emit.binary("div", dot(a, b), norms),
                           ex.out_shape(call))
