"""Losses: cross entropy and mean squared error."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..emit import INDEX_TYPES
from ..registry import handles
from .common import float_input


def _loss_options(ex, call, names):
    if call.module is not None:
        options = {k: getattr(call.module, k, None) for k in names}
    else:
        options = {k: ex.const(call.args[k]) for k in names}
    for legacy in ("size_average", "reduce"):
        if legacy in names and options[legacy] is not None:
            ex.fail("the deprecated %s argument is not supported: use "
                    "reduction" % legacy)
    if options["reduction"] not in ("mean", "sum"):
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
        "label_smoothing"))
    if options["weight"] is not None:
        ex.fail("class weights are not supported")
    label_smoothing = float(options["label_smoothing"] or 0.0)
    if not 0.0 <= label_smoothing < 1.0:
        ex.fail("label_smoothing=%r is not supported: memopt takes it in "
                "[0, 1)" % label_smoothing)
    logits = float_input(ex, call.args["input"])
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


@handles("input, target, size_average=None, reduce=None, "
         "reduction='mean'", functions=[F.mse_loss])
@handles("input, target", modules=[nn.MSELoss])
def _mse_loss(ex, call):
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction"))
    x = float_input(ex, call.args["input"])
    target = float_input(ex, call.args["target"])
    if target.dtype != x.dtype:
        ex.fail("the input and target have different element types")
    shape = tuple(torch.broadcast_shapes(x.shape, target.shape))
    return ex.emit.mse_loss(ex.emit.broadcast_to(x, shape),
                            ex.emit.broadcast_to(target, shape),
                            options["reduction"])
