"""Operand helpers the op families share."""

import operator

import torch

from ..emit import FLOAT_TYPES


def norm_dim(ex, dim, rank):
    dim = operator.index(dim)
    if not -max(rank, 1) <= dim < max(rank, 1):
        ex.fail("dimension %d is out of range for rank %d" % (dim, rank))
    return dim % rank if rank else 0


def float_input(ex, arg):
    x = ex.val(arg)
    if x.dtype not in FLOAT_TYPES:
        ex.fail("expected a float tensor, got element type %s" % x.dtype)
    return x


def as_number(ex, arg):
    """The Python number ``arg`` stands for, or None if it is a tensor of
    more than one element or not known at export time."""
    if ex.is_symbolic(arg):
        return None
    value = ex.concrete(arg)
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return float(value)
    ex.fail("unsupported operand of type %s" % type(value).__name__)
