"""Losses: cross entropy (with class indices, or class probabilities as
the target) and nll_loss of a log_softmax, which is one; mean squared
error; and those written with elementwise ops: L1, smooth L1, Huber, binary
cross entropy with and without logits, KL divergence."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..emit import INDEX_TYPES
from ..registry import handles
from . import arithmetic
from .common import float_input, full, in_f32, norm_dim


def _loss_options(ex, call, names, unreduced=False, extra=()):
    """The loss's options; reduction='none' only where ``unreduced`` (a loss
    written with elementwise ops, whose per-element values the model may
    reduce itself), and the loss's ``extra`` reductions."""
    if call.module is not None:
        options = {k: getattr(call.module, k, None) for k in names}
    else:
        options = {k: ex.const(call.args[k]) for k in names}
    for legacy in ("size_average", "reduce"):
        if legacy in names and options[legacy] is not None:
            ex.fail("the deprecated %s argument is not supported: use "
                    "reduction" % legacy)
    if options["reduction"] not in ("mean", "sum") + tuple(extra) + \
            (("none",) if unreduced else ()):
        ex.fail("reduction='%s' is not supported: the loss must be a scalar"
                % options["reduction"])
    return options


@handles("input, target, weight=None, size_average=None, "
         "ignore_index=-100, reduce=None, reduction='mean', "
         "label_smoothing=0.0", functions=[F.cross_entropy])
@handles("input, target", modules=[nn.CrossEntropyLoss])
def _cross_entropy(ex, call):
    options = _loss_options(ex, call, (
        "weight", "size_average", "ignore_index", "reduce", "reduction",
        "label_smoothing"), unreduced=True)
    probabilities = ex.val(call.args["target"]).dtype not in INDEX_TYPES
    label_smoothing = float(options["label_smoothing"] or 0.0)
    if not 0.0 <= label_smoothing < 1.0:
        ex.fail("label_smoothing=%r is not supported: memopt takes it in "
                "[0, 1)" % label_smoothing)
    logits = float_input(ex, call.args["input"])
    if probabilities:
        return _soft_cross_entropy(ex, call, logits, options,
                                   label_smoothing)
    if options["weight"] is not None or options["reduction"] == "none":
        dim = 0 if logits.rank == 1 else 1
        return _picked_loss(ex, call, ex.emit.softmax("log_softmax", logits,
                                                      dim),
                            options, label_smoothing)
    return _class_loss(ex, call, logits, options, label_smoothing)


def _class_weight(ex, call, options, classes):
    """The class weights (an f32 Value of ``classes`` elements), or None."""
    if options["weight"] is None:
        return None
    weight = ex.val(call.module.get_buffer("weight")
                    if call.module is not None else call.args["weight"], "f32")
    if weight.shape != (classes,):
        ex.fail("the class weights %s must hold one weight per class (%d)"
                % (weight.type, classes))
    return weight


def _soft_cross_entropy(ex, call, logits, options, label_smoothing):
    """The cross entropy with class probabilities as the target (mixup,
    distillation): -sum_c w_c t_c log_softmax(x)_c over the class dimension
    (1, or 0 for one sample), t smoothed to t (1 - s) + s / C; the mean
    divides by the number of samples, as PyTorch's."""
    target = float_input(ex, call.args["target"])
    if target.shape != logits.shape or target.dtype != logits.dtype:
        ex.fail("the target probabilities %s must have the input's shape "
                "and type %s" % (target.type, logits.type))
    dim = 0 if logits.rank == 1 else 1
    classes = logits.shape[dim]
    emit = ex.emit
    if label_smoothing:
        target = emit.scalar("add_scalar", emit.scalar(
            "mul_scalar", target, 1.0 - label_smoothing),
            label_smoothing / classes)
    terms = emit.binary("mul", target, emit.softmax("log_softmax", logits,
                                                    dim))
    weight = _class_weight(ex, call, options, classes)
    if weight is not None:
        terms = emit.binary("mul", terms, emit.broadcast(weight, [dim],
                                                         logits.shape))
    losses = emit.unary("neg", emit.reduce("reduce_sum", terms, [dim]))
    return _reduced(ex, losses, options["reduction"])


def _class_loss(ex, call, logits, options, label_smoothing):
    """memopt.cross_entropy of ``logits`` (classes in dimension 1, or 0 for
    one sample) and the target's class indices."""
    labels = ex.val(call.args["target"])
    if labels.dtype not in INDEX_TYPES:
        ex.fail("the target must hold class indices (int64 or int32); "
                "class probabilities are not supported")
    if logits.rank == 1:
        logits = ex.emit.reshape(logits, (1,) + logits.shape)
        labels = ex.emit.reshape(labels, (1,))
    elif logits.rank > 2:
        # PyTorch's class dimension is 1; memopt's is the last.
        logits = ex.emit.transpose(
            logits, [0] + list(range(2, logits.rank)) + [1])
    if labels.shape != logits.shape[:-1]:
        ex.fail("the target %s does not match the input %s"
                % (labels.type, logits.type))
    return ex.emit.cross_entropy(logits, labels, int(options["ignore_index"]),
                                 options["reduction"], label_smoothing)


def _picked_loss(ex, call, scores, options, label_smoothing=0.0):
    """nll_loss of the log-probabilities ``scores`` (classes in dimension 1,
    or 0 for one sample) and the target's class indices t, in the forms the
    fused cross-entropy does not take (class weights, reduction='none', any
    input): -w[t] scores[t] per item, picked by a one-hot mask (``compare
    eq`` of t and the class positions) and ``reduce_sum`` over the classes;
    0 where t is ignore_index. The mean divides by the sum of w[t] over the
    items not ignored (their count without weights); label smoothing adds
    s / C times -sum_c w_c scores_c, as PyTorch's. A target outside
    [0, C) that is not ignore_index picks nothing and adds 0, where PyTorch
    raises an error."""
    labels = ex.val(call.args["target"])
    if labels.dtype not in INDEX_TYPES:
        ex.fail("the target must hold class indices (int64 or int32)")
    emit = ex.emit
    dim = 0 if scores.rank == 1 else 1
    shape, classes = scores.shape, scores.shape[dim]
    if labels.shape != shape[:dim] + shape[dim + 1:]:
        ex.fail("the target %s does not match the input %s"
                % (labels.type, scores.type))
    other_dims = [d for d in range(scores.rank) if d != dim]
    positions = np.arange(classes).reshape(
        [classes if d == dim else 1 for d in range(scores.rank)])
    onehot = emit.compare(
        "eq", emit.broadcast(labels, other_dims, shape),
        emit.constant(np.broadcast_to(positions, shape), labels.dtype))
    valid = emit.compare("ne", labels, emit.constant(
        np.full(labels.shape, int(options["ignore_index"])), labels.dtype))

    picked = emit.reduce("reduce_sum", emit.where(
        onehot, scores, full(ex, scores.shape, 0.0, scores.dtype)), [dim])
    item_zeros = full(ex, picked.shape, 0.0, picked.dtype)
    weight = _class_weight(ex, call, options, classes)
    if weight is not None:
        weight = emit.broadcast(weight, [dim], shape)
        if weight.dtype != scores.dtype:
            weight = emit.cast(weight, scores.dtype)
        item_weight = emit.reduce("reduce_sum", emit.where(
            onehot, weight, full(ex, scores.shape, 0.0, scores.dtype)), [dim])
        picked = emit.binary("mul", item_weight, picked)
    else:
        item_weight = full(ex, picked.shape, 1.0, picked.dtype)
    losses = emit.where(valid, emit.unary("neg", picked), item_zeros)
    if label_smoothing:
        spread = scores if weight is None else emit.binary("mul", scores,
                                                           weight)
        spread = emit.where(valid, emit.unary("neg", emit.reduce(
            "reduce_sum", spread, [dim])), item_zeros)
        losses = emit.binary(
            "add", emit.scalar("mul_scalar", losses, 1.0 - label_smoothing),
            emit.scalar("mul_scalar", spread, label_smoothing / classes))
    reduction = options["reduction"]
    if reduction == "none" or not losses.rank:
        total = losses
    else:
        total = emit.reduce("reduce_sum", losses, list(range(losses.rank)))
    if reduction != "mean":
        return total
    counted = emit.where(valid, item_weight, item_zeros)
    if counted.rank:
        counted = emit.reduce("reduce_sum", counted,
                              list(range(counted.rank)))
    return emit.binary("div", total, counted)


def _pair(ex, call):
    """The input and the target, broadcast to one shape and float type."""
    x = float_input(ex, call.args["input"])
    target = float_input(ex, call.args["target"])
    if target.dtype != x.dtype:
        ex.fail("the input and target have different element types")
    shape = tuple(torch.broadcast_shapes(x.shape, target.shape))
    return ex.emit.broadcast_to(x, shape), ex.emit.broadcast_to(target, shape)


@handles("input, target, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.mse_loss])
@handles("input, target", modules=[nn.MSELoss])
def _mse_loss(ex, call):
    """memopt.mse_loss; with reduction='none', the squared differences."""
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction"), unreduced=True)
    x, target = _pair(ex, call)
    if options["reduction"] == "none":
        difference = ex.emit.binary("sub", x, target)
        return ex.emit.binary("mul", difference, difference)
    return ex.emit.mse_loss(x, target, options["reduction"])


def _reduced(ex, losses, reduction, weight=None):
    """The mean or the sum of the elementwise ``losses`` (themselves for
    reduction='none'), each times its ``weight`` if one is given."""
    if weight is not None:
        losses = ex.emit.binary("mul", losses, weight)
    if reduction == "none":
        return losses
    kind = "reduce_mean" if reduction == "mean" else "reduce_sum"
    return ex.emit.reduce(kind, losses, list(range(losses.rank)))


@handles("input, target, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.l1_loss])
@handles("input, target", modules=[nn.L1Loss])
def _l1_loss(ex, call):
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction"), unreduced=True)
    x, target = _pair(ex, call)
    return _reduced(ex, ex.emit.unary("abs", ex.emit.binary("sub", x, target)),
                    options["reduction"])


def _smooth_l1_values(ex, call, beta):
    """0.5 c^2 / beta + (|d| - c) with c = min(|d|, beta), d = x - target:
    0.5 d^2 / beta below beta and |d| - beta / 2 from it on, with
    PyTorch's gradient on both sides (d / beta, sign(d)); beta 0 is L1."""
    x, target = _pair(ex, call)
    distance = ex.emit.unary("abs", ex.emit.binary("sub", x, target))
    if beta == 0:
        return distance
    clipped = ex.emit.clamp(distance, max=beta)
    quadratic = ex.emit.scalar("mul_scalar",
                               ex.emit.binary("mul", clipped, clipped),
                               0.5 / beta)
    return ex.emit.binary("add", quadratic,
                          ex.emit.binary("sub", distance, clipped))


@handles("input, target, size_average=None, reduce=None, "
         "reduction='mean', beta=1.0", functions=[F.smooth_l1_loss])
@handles("input, target", modules=[nn.SmoothL1Loss])
def _smooth_l1_loss(ex, call):
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction", "beta"), unreduced=True)
    beta = float(options["beta"])
    if beta < 0:
        ex.fail("beta=%r is not supported (it must not be negative)" % beta)
    return _reduced(ex, _smooth_l1_values(ex, call, beta),
                    options["reduction"])


@handles("input, target, reduction='mean', delta=1.0",
         functions=[F.huber_loss])
@handles("input, target", modules=[nn.HuberLoss])
def _huber_loss(ex, call):
    """delta times the smooth L1 loss of beta delta."""
    options = _loss_options(ex, call, ("reduction", "delta"), unreduced=True)
    delta = float(options["delta"])
    if not delta > 0:
        ex.fail("delta=%r is not supported (it must be positive)" % delta)
    losses = ex.emit.scalar("mul_scalar",
                            _smooth_l1_values(ex, call, delta), delta)
    return _reduced(ex, losses, options["reduction"])


def _loss_weight(ex, call, options, name, shape):
    """The optional tensor argument ``name`` (a weight) broadcast to
    ``shape``, or None."""
    if options[name] is None:
        return None
    weight = ex.val(call.module.get_buffer(name) if call.module is not None
                    else call.args[name], "f32")
    try:
        torch.broadcast_shapes(weight.shape, shape)
    except RuntimeError:
        ex.fail("%s %s does not broadcast to the input %s"
                % (name, weight.type, shape))
    return ex.emit.broadcast_to(weight, shape)


@handles("input, target, weight=None, size_average=None, reduce=None, "
         "reduction='mean', pos_weight=None",
         functions=[F.binary_cross_entropy_with_logits])
@handles("input, target", modules=[nn.BCEWithLogitsLoss])
def _bce_with_logits(ex, call):
    """(1 - y) x + (1 + (p - 1) y) softplus(-x), times the weight: PyTorch's
    stable form (softplus(-x) = max(-x, 0) + log1p(e^-|x|)), p the
    pos_weight (1 without one)."""
    options = _loss_options(ex, call, ("weight", "size_average", "reduce",
                                       "reduction", "pos_weight"),
                            unreduced=True)
    x, y = _pair(ex, call)
    softplus = ex.emit.unary("softplus", ex.emit.unary("neg", x))
    pos_weight = _loss_weight(ex, call, options, "pos_weight", x.shape)
    if pos_weight is not None:
        factor = ex.emit.scalar("add_scalar", ex.emit.binary(
            "mul", ex.emit.scalar("add_scalar", pos_weight, -1.0), y), 1.0)
        softplus = ex.emit.binary("mul", factor, softplus)
    losses = ex.emit.binary("add", ex.emit.binary(
        "sub", x, ex.emit.binary("mul", y, x)), softplus)
    return _reduced(ex, losses, options["reduction"],
                    _loss_weight(ex, call, options, "weight", x.shape))


@handles("input, target, weight=None, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.binary_cross_entropy])
@handles("input, target", modules=[nn.BCELoss])
def _bce(ex, call):
    """-(y log p + (1 - y) log(1 - p)), each log clamped at -100 as
    PyTorch clamps it, times the weight."""
    options = _loss_options(ex, call, ("weight", "size_average", "reduce",
                                       "reduction"), unreduced=True)
    p, y = _pair(ex, call)
    log_p = ex.emit.clamp(ex.emit.unary("log", p), min=-100.0)
    one_minus = ex.emit.scalar("add_scalar", ex.emit.unary("neg", p), 1.0)
    log_q = ex.emit.clamp(ex.emit.unary("log", one_minus), min=-100.0)
    # y log p + (1 - y) log q = y (log p - log q) + log q.
    likelihood = ex.emit.binary("add", ex.emit.binary(
        "mul", y, ex.emit.binary("sub", log_p, log_q)), log_q)
    losses = ex.emit.unary("neg", likelihood)
    return _reduced(ex, losses, options["reduction"],
                    _loss_weight(ex, call, options, "weight", p.shape))


def _log_softmax_input(ex, node):
    """The input and dimension of the log_softmax that computed fx node
    ``node``, or None when another op did."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_module":
        module = ex.modules.get(node.target)
        if isinstance(module, nn.LogSoftmax):
            return node.args[0], module.dim
        return None
    if (node.op == "call_function" and node.target in (
            F.log_softmax, torch.log_softmax)) or (
            node.op == "call_method" and node.target == "log_softmax"):
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1
                              else None)
        return node.args[0], dim
    return None


@handles("input, target, weight=None, size_average=None, "
         "ignore_index=-100, reduce=None, reduction='mean'",
         functions=[F.nll_loss])
@handles("input, target", modules=[nn.NLLLoss])
def _nll_loss(ex, call):
    """nll_loss(log_softmax(x, dim=1), t): the cross entropy of x, the one
    op that never holds the log-probabilities (docs/Exporter.md); with
    class weights, reduction='none' or any other input, the picked form."""
    options = _loss_options(ex, call, (
        "weight", "size_average", "ignore_index", "reduce", "reduction"),
        unreduced=True)
    source = _log_softmax_input(ex, call.args["input"])
    if source is not None and source[1] is not None and \
            options["weight"] is None and options["reduction"] != "none":
        logits = float_input(ex, source[0])
        class_dim = 1 if logits.rank > 1 else 0
        if norm_dim(ex, ex.const(source[1]), logits.rank) == class_dim:
            return _class_loss(ex, call, logits, options, 0.0)
    return _picked_loss(ex, call, float_input(ex, call.args["input"]),
                        options)


@handles("input, target, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.soft_margin_loss])
@handles("input, target", modules=[nn.SoftMarginLoss])
def _soft_margin_loss(ex, call):
    """log(1 + e^(-y x)) = softplus(-y x)."""
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction"), unreduced=True)
    x, y = _pair(ex, call)
    margins = ex.emit.unary("neg", ex.emit.binary("mul", y, x))
    return _reduced(ex, ex.emit.unary("softplus", margins),
                    options["reduction"])


@handles("input1, input2, target, margin=0, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.margin_ranking_loss])
@handles("input1, input2, target", modules=[nn.MarginRankingLoss])
def _margin_ranking_loss(ex, call):
    """max(0, -y (x1 - x2) + margin), broadcast; the gradient passes where
    the hinge is exactly 0, as PyTorch's clamp_min."""
    options = _loss_options(ex, call, ("margin", "size_average", "reduce",
                                       "reduction"), unreduced=True)
    values = [float_input(ex, call.args[k])
              for k in ("input1", "input2", "target")]
    shape = tuple(torch.broadcast_shapes(*(v.shape for v in values)))
    x1, x2, y = (ex.emit.broadcast_to(v, shape) for v in values)
    hinge = ex.emit.unary("neg", ex.emit.binary(
        "mul", y, ex.emit.binary("sub", x1, x2)))
    hinge = ex.emit.clamp(ex.emit.scalar(
        "add_scalar", hinge, float(options["margin"] or 0)), min=0.0)
    return _reduced(ex, hinge, options["reduction"])


@handles("input, target, weight=None, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.multilabel_soft_margin_loss])
@handles("input, target", modules=[nn.MultiLabelSoftMarginLoss])
def _multilabel_soft_margin_loss(ex, call):
    """-(y logsigmoid(x) + (1 - y) logsigmoid(-x)) times the weight,
    averaged over the classes (the last dimension), then reduced over the
    samples: y softplus(-x) + (1 - y) softplus(x)."""
    options = _loss_options(ex, call, ("weight", "size_average", "reduce",
                                       "reduction"), unreduced=True)
    x, y = _pair(ex, call)
    if x.rank not in (1, 2):
        ex.fail("expected [N, C] or [C] inputs, got %s" % x.type)
    below = ex.emit.unary("softplus", ex.emit.unary("neg", x))
    above = ex.emit.unary("softplus", x)
    # y below + (1 - y) above = y (below - above) + above.
    losses = ex.emit.binary("add", ex.emit.binary(
        "mul", y, ex.emit.binary("sub", below, above)), above)
    weight = _loss_weight(ex, call, options, "weight", x.shape)
    if weight is not None:
        losses = ex.emit.binary("mul", losses, weight)
    per_sample = ex.emit.reduce("reduce_mean", losses, [x.rank - 1])
    if per_sample.rank == 0:
        return per_sample
    return _reduced(ex, per_sample, options["reduction"])


@handles("input, target, size_average=None, reduce=None, reduction='mean', "
         "log_target=False", functions=[F.kl_div])
@handles("input, target", modules=[nn.KLDivLoss])
@in_f32
def _kl_div(ex, call):
    """t (log t - x) with 0 where t = 0 (xlogy(t, t) - t x), or, for a log
    target, e^t (t - x); 'batchmean' divides the sum by the first
    dimension's extent. In f32 under mixed precision, as autocast's."""
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction"), unreduced=True,
                            extra=("batchmean",))
    log_target = call.module.log_target if call.module is not None else \
        ex.const(call.args["log_target"], "log_target")
    x, target = _pair(ex, call)
    emit = ex.emit
    if log_target:
        losses = emit.binary("mul", emit.unary("exp", target),
                             emit.binary("sub", target, x))
    else:
        losses = emit.binary("sub", arithmetic.xlogy(ex, target, target),
                             emit.binary("mul", target, x))
    if options["reduction"] != "batchmean":
        return _reduced(ex, losses, options["reduction"])
    total = emit.reduce("reduce_sum", losses, list(range(losses.rank)))
    batch = losses.shape[0] if losses.rank else 1
    return total if batch == 1 else emit.scalar("mul_scalar", total,
                                                1.0 / batch)
