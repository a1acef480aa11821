"""The roles of the function's arguments that are not plain inputs: which
``forward()`` arguments are labels, and the optimizer's parameter groups
(docs/Exporter.md, "Arguments, names and scopes" and "Frozen parameters
and parameter groups")."""

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import ExportError
from .tracing import is_query

# Ops through which a label may pass on its way to a loss's target.
_LABEL_METHODS = {"view", "reshape", "flatten", "contiguous", "squeeze",
                  "unsqueeze", "long", "int", "to", "type", "float"}
_LABEL_FUNCTIONS = {operator.getitem, torch.flatten, torch.reshape,
                    torch.squeeze, torch.unsqueeze}


def parameter_groups(model, optimizer):
    """The optimizer's kind ("adamw", "sgd"; None without one) and, by
    parameter id, the (name, value) pairs of its group's hyperparameters in
    memopt's names (docs/Exporter.md, "Parameter groups")."""
    if optimizer is None:
        return None, {}
    import torch.optim
    kinds = {torch.optim.AdamW: "adamw", torch.optim.SGD: "sgd"}
    kind = kinds.get(type(optimizer))
    if kind is None and isinstance(optimizer, torch.optim.Adam) and all(
            g["weight_decay"] == 0 for g in optimizer.param_groups):
        kind = "adamw"  # Adam without weight decay is AdamW without it
    if kind is None:
        raise ExportError(
            "optimizer %s is not supported: memopt trains with "
            "torch.optim.AdamW or torch.optim.SGD (torch.optim.Adam only "
            "without weight decay, where it equals AdamW)"
            % type(optimizer).__name__)
    refused = {"amsgrad": True, "maximize": True, "nesterov": True,
               "dampening": None, "differentiable": True}
    owners = {id(p): name for name, p in model.named_parameters()}
    hparams = {}
    for index, group in enumerate(optimizer.param_groups):
        for option, bad in refused.items():
            value = group.get(option)
            if value is not None and (value != 0 if bad is None else
                                      value == bad):
                raise ExportError("parameter group %d of the optimizer sets "
                                  "%s=%r, which memopt does not implement"
                                  % (index, option, value))
        if kind == "adamw":
            beta1, beta2 = group["betas"]
            values = [("lr", group["lr"]), ("weight_decay",
                                            group["weight_decay"]),
                      ("beta1", beta1), ("beta2", beta2),
                      ("eps", group["eps"])]
        else:
            values = [("lr", group["lr"]), ("weight_decay",
                                            group["weight_decay"]),
                      ("momentum", group["momentum"])]
        for p in group["params"]:
            if id(p) not in owners:
                raise ExportError("parameter group %d of the optimizer holds "
                                  "a tensor that is not a parameter of the "
                                  "model" % index)
            if id(p) in hparams:
                raise ExportError("parameter '%s' is in two parameter groups "
                                  "of the optimizer" % owners[id(p)])
            hparams[id(p)] = [(k, float(v)) for k, v in values]
    return kind, hparams


def is_label(placeholder, modules):
    """Whether the argument reaches nothing but the target operand of
    losses (possibly reshaped or sliced on the way)."""
    reaches_loss = False
    pending = [placeholder]
    while pending:
        node = pending.pop()
        for user in node.users:
            if is_query(user):
                continue
            first = user.args[0] if user.args else None
            if first is node and (
                    (user.op == "call_method" and
                     user.target in _LABEL_METHODS) or
                    (user.op == "call_function" and
                     user.target in _LABEL_FUNCTIONS)):
                pending.append(user)
                continue
            if _loss_target(user, modules) is node and first is not node:
                reaches_loss = True
                continue
            return False
    return reaches_loss


def _loss_target(node, modules):
    if node.op == "call_function" and node.target in (F.cross_entropy,
                                                      F.mse_loss):
        pass
    elif node.op == "call_module" and isinstance(
            modules.get(node.target), (nn.CrossEntropyLoss, nn.MSELoss)):
        pass
    else:
        return None
    if len(node.args) > 1:
        return node.args[1]
    return node.kwargs.get("target")
