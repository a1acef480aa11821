"""Attention and transformer layers.

nn.MultiheadAttention, nn.TransformerEncoder(Layer),
nn.TransformerDecoder(Layer) and nn.Transformer are decomposed into the ops
of the other families as PyTorch 1.13 computes them in training mode
(F.multi_head_attention_forward, TransformerEncoderLayer.forward,
TransformerDecoderLayer.forward), each op in the scope of the submodule
that computes it. The attention itself is
the chain that --memopt-fuse-kernels turns into memopt.attention
(FuseKernels.cpp): matmul(q, k) transpose_rhs, mul_scalar 1/sqrt(head_dim),
masked_fill, softmax over the last dimension, dropout, matmul(p, v), on
[batch, heads, length, head_dim] operands, each value used once. PyTorch
scales q before the product and adds a 0/-inf float mask; both are the
same function.
"""

import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..registry import handles, returns_tuple
from .common import float_input, only_first_result_read
from .dropout import dropout_value
from .linalg import linear_module, linear_values
from .normalization import layer_norm_module


@contextlib.contextmanager
def _scope(ex, path):
    """Emit the ops of the block in the scope of the module at ``path``."""
    saved = ex.emit.scope
    ex.emit.scope = path
    try:
        yield
    finally:
        ex.emit.scope = saved


def _child(path, name):
    return "%s.%s" % (path, name) if path else name


def _attention_mask(ex, arg, what):
    """The mask ``arg`` (named ``what`` in errors) as an i1 Value, as a bool
    tensor when it is known at export time, or None; True masks a score. A
    float mask is one PyTorch adds to the scores: only a constant of 0 and
    -inf, which is a bool mask, is supported."""
    if arg is None:
        return None
    if ex.is_symbolic(arg):
        mask = ex.val(arg)
        if mask.dtype != "i1":
            ex.fail("the %s is an %s tensor computed from the inputs: "
                    "memopt takes a float mask only as a constant of 0 and "
                    "-inf; pass a bool mask (True = masked)"
                    % (what, mask.dtype))
        return mask
    mask = ex.concrete(arg)
    if not isinstance(mask, torch.Tensor):
        ex.fail("the %s must be a tensor, got %s" % (what,
                                                     type(mask).__name__))
    if mask.is_meta:
        ex.fail("the %s is computed from tensors on the meta device and has "
                "no value: keep the model's buffers on the CPU" % what)
    mask = mask.detach().cpu()
    if mask.dtype == torch.uint8:  # PyTorch's deprecated byte masks
        return mask.bool()
    if mask.is_floating_point():
        masked = mask == float("-inf")
        if not bool((masked | (mask == 0)).all()):
            ex.fail("the float %s holds values other than 0 and -inf: memopt "
                    "supports a float mask only as a constant of 0 (attend) "
                    "and -inf (masked), which it turns into a bool mask; an "
                    "additive bias is not supported" % what)
        return masked
    if mask.dtype != torch.bool:
        ex.fail("the %s has dtype %s: only bool and float masks are "
                "supported" % (what, mask.dtype))
    return mask


def _score_masks(ex, attn_mask, key_padding_mask, shape):
    """The i1 masks of the scores ``shape`` = [N, H, L, S], each broadcast
    from the mask with unit dimensions where it has none: ``attn_mask`` is
    [L, S] or [N * H, L, S], ``key_padding_mask`` [N, S]. Masks known at
    export time are one constant, their union; a mask computed from the
    inputs is a mask of its own (and the chain then has two masked_fills,
    which the fusion does not take)."""
    n, h, l, s = shape
    masks = []
    if attn_mask is not None:
        masks.append((attn_mask, (1, 1, l, s) if len(attn_mask.shape) == 2
                      else shape))
    if key_padding_mask is not None:
        masks.append((key_padding_mask, (n, 1, 1, s)))
    known = [m.reshape(unit) for m, unit in masks
             if isinstance(m, torch.Tensor)]
    masks = [(m, unit) for m, unit in masks if not isinstance(m, torch.Tensor)]
    if known:
        union = known[0]
        for mask in known[1:]:
            union = union | mask
        if bool(union.any()):
            masks.insert(0, (union, tuple(union.shape)))
    values = []
    for mask, unit in masks:
        if isinstance(mask, torch.Tensor):
            mask = ex.emit.constant(mask.numpy(), "i1")
        else:
            mask = ex.emit.reshape(mask, unit)
        values.append(ex.emit.broadcast_to(mask, shape))
    return values


def _attention(ex, m, q, k, v, attn_mask, key_padding_mask):
    """The attention of nn.MultiheadAttention ``m`` on q [N, H, L, D],
    k [N, H, S, D] and v [N, H, S, D]."""
    scores = ex.emit.matmul(q, k, transpose_rhs=True)
    scores = ex.emit.scalar("mul_scalar", scores, 1.0 / math.sqrt(q.shape[-1]))
    for mask in _score_masks(ex, attn_mask, key_padding_mask, scores.shape):
        scores = ex.emit.masked_fill(scores, mask, float("-inf"))
    probs = ex.emit.softmax("softmax", scores, scores.rank - 1)
    probs = dropout_value(ex, probs, m.dropout, m.training)
    return ex.emit.matmul(probs, v)


def _rows(ex, x, start, stop):
    """Rows [start, stop) of the parameter ``x`` (dimension 0)."""
    if x is None or (start, stop) == (0, x.shape[0]):
        return x
    return ex.emit.slice(x, [start] + [0] * (x.rank - 1),
                         [stop] + list(x.shape[1:]), [1] * x.rank)


def _in_projection(ex, m, query, key, value, same_qk, same_kv):
    """q, k and v of nn.MultiheadAttention ``m``, each [..., E]. Inputs that
    are one tensor share one product with the packed weight, as in
    PyTorch's _in_projection_packed."""
    e = m.embed_dim
    bias = ex.param(m.in_proj_bias, "in_proj_bias") \
        if m.in_proj_bias is not None else None
    if not m._qkv_same_embed_dim:
        weights = [ex.param(getattr(m, name), name) for name in (
            "q_proj_weight", "k_proj_weight", "v_proj_weight")]
        return [linear_values(ex, x, w, _rows(ex, bias, i * e, (i + 1) * e))
                for i, (x, w) in enumerate(zip((query, key, value), weights))]
    weight = ex.param(m.in_proj_weight, "in_proj_weight")
    if same_qk and same_kv:
        groups = [(query, 0, 3)]
    elif same_kv:
        groups = [(query, 0, 1), (key, 1, 3)]
    else:
        groups = [(query, 0, 1), (key, 1, 2), (value, 2, 3)]
    projected = []
    for x, first, last in groups:
        y = linear_values(ex, x, _rows(ex, weight, first * e, last * e),
                          _rows(ex, bias, first * e, last * e))
        for i in range(last - first):
            if last - first > 1:
                lead = list(y.shape[:-1])
                projected.append(ex.emit.slice(
                    y, [0] * len(lead) + [i * e], lead + [(i + 1) * e],
                    [1] * y.rank))
            else:
                projected.append(y)
    return projected


def _multihead_attention_values(ex, m, path, query, key, value, same_qk,
                                same_kv, attn_mask, key_padding_mask):
    """nn.MultiheadAttention ``m`` at ``path`` on Values in its layout
    ([L, N, E], [N, L, E] with batch_first, or unbatched [L, E]); returns
    the attention output."""
    if m.bias_k is not None:
        ex.fail("add_bias_kv=True is not supported")
    if m.add_zero_attn:
        ex.fail("add_zero_attn=True is not supported")
    seq_first = not m.batch_first
    unbatched = query.rank == 2
    with _scope(ex, path):
        if unbatched:
            query, key, value = (
                ex.emit.reshape(x, (x.shape[0], 1, x.shape[1]) if seq_first
                                else (1,) + x.shape)
                for x in (query, key, value))
            if isinstance(key_padding_mask, torch.Tensor):
                key_padding_mask = key_padding_mask.reshape(1, -1)
            elif key_padding_mask is not None:
                key_padding_mask = ex.emit.reshape(
                    key_padding_mask, (1,) + key_padding_mask.shape)
        heads, head_dim = m.num_heads, m.head_dim
        to_heads = [1, 2, 0, 3] if seq_first else [0, 2, 1, 3]
        q, k, v = (ex.emit.transpose(ex.emit.reshape(
            x, x.shape[:2] + (heads, head_dim)), to_heads)
            for x in _in_projection(ex, m, query, key, value, same_qk,
                                    same_kv))
        out = _attention(ex, m, q, k, v, attn_mask, key_padding_mask)
        out = ex.emit.transpose(out, [2, 0, 1, 3] if seq_first
                                else [0, 2, 1, 3])
        out = ex.emit.reshape(out, out.shape[:2] + (m.embed_dim,))
    with _scope(ex, _child(path, "out_proj")):
        out = linear_module(ex, m.out_proj, out)
    if unbatched:
        with _scope(ex, path):
            out = ex.emit.reshape(out, (out.shape[0] * out.shape[1],
                                        out.shape[2]))
    return out


@returns_tuple
@handles("query, key, value, key_padding_mask=None, need_weights=True, "
         "attn_mask=None, average_attn_weights=True",
         modules=[nn.MultiheadAttention])
def _multihead_attention(ex, call):
    args = call.args
    if ex.const(args["need_weights"]) and \
            not only_first_result_read(call.node, 2):
        ex.fail("need_weights=True and the attention weights (the second "
                "result) are used: memopt fuses attention and never forms "
                "the weights; pass need_weights=False, or leave them unused")
    query, key, value = (float_input(ex, args[name])
                         for name in ("query", "key", "value"))
    attn_mask = _attention_mask(ex, args["attn_mask"], "attn_mask")
    padding = _attention_mask(ex, args["key_padding_mask"],
                              "key_padding_mask")
    out = _multihead_attention_values(
        ex, call.module, call.node.target, query, key, value,
        args["query"] is args["key"], args["key"] is args["value"],
        attn_mask, padding)
    return out, None


def _dropout_module(ex, m, path, x):
    with _scope(ex, path):
        return dropout_value(ex, x, m.p, m.training)


def _activation(ex, layer, path, x):
    """The activation of the transformer layer ``layer``: relu or gelu, as a
    string, a function or a module."""
    act = layer.activation
    if isinstance(act, str):
        act = {"relu": F.relu, "gelu": F.gelu}.get(act, act)
    if act is F.relu or act is torch.relu:
        return ex.emit.unary("relu", x)
    if act is F.gelu:
        return ex.emit.gelu(x, "none")
    with _scope(ex, _child(path, "activation")):
        if type(act) is nn.ReLU:
            return ex.emit.unary("relu", x)
        if type(act) is nn.GELU and act.approximate in ("none", "tanh"):
            return ex.emit.gelu(x, act.approximate)
    ex.fail("the activation '%s' is not supported: use relu or gelu"
            % getattr(act, "__name__", type(act).__name__))


def _attention_block(ex, layer, path, names, x, memory, attn_mask,
                     key_padding_mask):
    """_sa_block (``memory`` None) or _mha_block of the transformer layer
    ``layer`` at ``path``: its attention ``names[0]`` of ``x`` to itself or
    to ``memory``, then its dropout ``names[1]``."""
    attn, dropout = names
    kv = x if memory is None else memory
    h = _multihead_attention_values(
        ex, getattr(layer, attn), _child(path, attn), x, kv, kv, kv is x,
        True, attn_mask, key_padding_mask)
    return _dropout_module(ex, getattr(layer, dropout), _child(path, dropout),
                           h)


def _feed_forward_block(ex, layer, path, x, dropout):
    """_ff_block of the transformer layer ``layer`` at ``path``:
    linear2(dropout(activation(linear1(x)))), then its dropout ``dropout``
    (dropout2 of an encoder layer, dropout3 of a decoder layer)."""
    with _scope(ex, _child(path, "linear1")):
        x = linear_module(ex, layer.linear1, x)
    with _scope(ex, path):
        x = _activation(ex, layer, path, x)
    x = _dropout_module(ex, layer.dropout, _child(path, "dropout"), x)
    with _scope(ex, _child(path, "linear2")):
        x = linear_module(ex, layer.linear2, x)
    return _dropout_module(ex, getattr(layer, dropout), _child(path, dropout),
                           x)


def _residual_blocks(ex, layer, path, x, blocks):
    """The transformer layer ``layer`` at ``path`` on ``x``: each (norm,
    block) of ``blocks`` in turn is x + block(norm(x)) with norm_first,
    else norm(x + block(x)); the adds in the layer's scope."""
    def norm(name, h):
        with _scope(ex, _child(path, name)):
            return layer_norm_module(ex, getattr(layer, name), h)

    def add(a, b):
        with _scope(ex, path):
            return ex.emit.binary("add", a, b)

    for name, block in blocks:
        if layer.norm_first:
            x = add(x, block(norm(name, x)))
        else:
            x = norm(name, add(x, block(x)))
    return x


def _encoder_layer_values(ex, layer, path, x, attn_mask, key_padding_mask):
    """nn.TransformerEncoderLayer ``layer`` at ``path`` on the Value ``x``."""
    return _residual_blocks(ex, layer, path, x, [
        ("norm1", lambda h: _attention_block(
            ex, layer, path, ("self_attn", "dropout1"), h, None, attn_mask,
            key_padding_mask)),
        ("norm2", lambda h: _feed_forward_block(ex, layer, path, h,
                                                "dropout2"))])


def _decoder_layer_values(ex, layer, path, x, memory, masks):
    """nn.TransformerDecoderLayer ``layer`` at ``path`` on the Values ``x``
    and ``memory``; ``masks`` are those of _decoder_masks."""
    tgt_mask, memory_mask, tgt_padding, memory_padding = masks
    return _residual_blocks(ex, layer, path, x, [
        ("norm1", lambda h: _attention_block(
            ex, layer, path, ("self_attn", "dropout1"), h, None, tgt_mask,
            tgt_padding)),
        ("norm2", lambda h: _attention_block(
            ex, layer, path, ("multihead_attn", "dropout2"), h, memory,
            memory_mask, memory_padding)),
        ("norm3", lambda h: _feed_forward_block(ex, layer, path, h,
                                                "dropout3"))])


def _decoder_masks(ex, args):
    """tgt_mask, memory_mask, tgt_key_padding_mask and
    memory_key_padding_mask of a decoder call, as _attention_mask gives
    them."""
    return tuple(_attention_mask(ex, args[name], name) for name in (
        "tgt_mask", "memory_mask", "tgt_key_padding_mask",
        "memory_key_padding_mask"))


def _stack_values(ex, m, path, kind, x, layer_values):
    """The nn.TransformerEncoder or nn.TransformerDecoder ``m`` at ``path``
    on ``x``: layer_values(layer, its path, x) for each of its layers, each
    a ``kind``, then its final norm if it has one."""
    for i, layer in enumerate(m.layers):
        if type(layer) is not kind:
            ex.fail("layer %d is a %s: only nn.%s layers are supported"
                    % (i, type(layer).__name__, kind.__name__))
        x = layer_values(layer, _child(path, "layers.%d" % i), x)
    if m.norm is not None:
        if type(m.norm) is not nn.LayerNorm:
            ex.fail("a final norm of type %s is not supported: use "
                    "nn.LayerNorm" % type(m.norm).__name__)
        with _scope(ex, _child(path, "norm")):
            x = layer_norm_module(ex, m.norm, x)
    return x


def _encoder_values(ex, m, path, x, attn_mask, padding):
    return _stack_values(
        ex, m, path, nn.TransformerEncoderLayer, x,
        lambda layer, at, h: _encoder_layer_values(ex, layer, at, h,
                                                   attn_mask, padding))


def _decoder_values(ex, m, path, x, memory, masks):
    return _stack_values(
        ex, m, path, nn.TransformerDecoderLayer, x,
        lambda layer, at, h: _decoder_layer_values(ex, layer, at, h, memory,
                                                   masks))


@handles("src, src_mask=None, src_key_padding_mask=None",
         modules=[nn.TransformerEncoderLayer])
def _transformer_encoder_layer(ex, call):
    return _encoder_layer_values(
        ex, call.module, call.node.target, float_input(ex, call.args["src"]),
        _attention_mask(ex, call.args["src_mask"], "src_mask"),
        _attention_mask(ex, call.args["src_key_padding_mask"],
                        "src_key_padding_mask"))


@handles("src, mask=None, src_key_padding_mask=None",
         modules=[nn.TransformerEncoder])
def _transformer_encoder(ex, call):
    return _encoder_values(
        ex, call.module, call.node.target, float_input(ex, call.args["src"]),
        _attention_mask(ex, call.args["mask"], "mask"),
        _attention_mask(ex, call.args["src_key_padding_mask"],
                        "src_key_padding_mask"))


_DECODER_MASKS = ("tgt_mask=None, memory_mask=None, "
                  "tgt_key_padding_mask=None, memory_key_padding_mask=None")


@handles("tgt, memory, " + _DECODER_MASKS,
         modules=[nn.TransformerDecoderLayer])
def _transformer_decoder_layer(ex, call):
    return _decoder_layer_values(
        ex, call.module, call.node.target, float_input(ex, call.args["tgt"]),
        float_input(ex, call.args["memory"]), _decoder_masks(ex, call.args))


@handles("tgt, memory, " + _DECODER_MASKS,
         modules=[nn.TransformerDecoder])
def _transformer_decoder(ex, call):
    return _decoder_values(
        ex, call.module, call.node.target, float_input(ex, call.args["tgt"]),
        float_input(ex, call.args["memory"]), _decoder_masks(ex, call.args))


@handles("src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, "
         "src_key_padding_mask=None, tgt_key_padding_mask=None, "
         "memory_key_padding_mask=None", modules=[nn.Transformer])
def _transformer(ex, call):
    """nn.Transformer: its encoder (src, src_mask, src_key_padding_mask),
    then its decoder on tgt and the encoder's output."""
    m, path, args = call.module, call.node.target, call.args
    for name, kind in (("encoder", nn.TransformerEncoder),
                       ("decoder", nn.TransformerDecoder)):
        if type(getattr(m, name)) is not kind:
            ex.fail("a custom_%s of type %s is not supported: only nn.%s"
                    % (name, type(getattr(m, name)).__name__, kind.__name__))
    memory = _encoder_values(
        ex, m.encoder, _child(path, "encoder"),
        float_input(ex, args["src"]),
        _attention_mask(ex, args["src_mask"], "src_mask"),
        _attention_mask(ex, args["src_key_padding_mask"],
                        "src_key_padding_mask"))
    return _decoder_values(ex, m.decoder, _child(path, "decoder"),
                           float_input(ex, args["tgt"]), memory,
                           _decoder_masks(ex, args))
