"""A generated graph's loss and gradients in float64 PyTorch.

`evaluate(mlir, params, inputs)` runs the forward + loss module that
randgraph.py prints (its op subset of the memopt dialect, docs/Dialect.md)
with PyTorch autograd in float64, an oracle independent of memopt. With
`precision="bf16"` or `"f16"` it also rounds where `--mixed-precision` makes
memopt round (docs/MixedPrecision.md): the results of matmul and conv2d,
every op that runs in the compute type, each cast down, and in the backward
the gradient of each low-precision value. It thus measures how much the
rounding of that precision alone moves a graph's loss and gradients: what
`run.py` expects of memopt's mixed precision on a graph that amplifies
rounding (`rounding_error`).

The rounding emulation (`rounding_error`) evaluates the module as memopt
compiles it: after `memopt-opt --memopt-fuse-kernels`, so that a fused
attention rounds only its operands and its output, as the runtime's kernel
does (docs/Fusion.md).

Dropout draws the runtime's mask (runtime.h: Philox4x32-10 of seed, stream,
step and element index) for the first step of a run from fresh parameters,
so the whole batch in one step, as OUT/train's first step computes it.

    python3 reference.py SEED [--conv]   # loss and gradient norms of SEED
"""

import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["evaluate", "rounding_error", "philox4x32_10", "dropout_mask"]

# The ops --mixed-precision runs in f32 whatever their operands, and those
# that run in the compute type (MixedPrecision.cpp's policy); every other op
# takes its widest operand's type, parameters not promoting.
F32_OPS = {"exp", "log", "pow_scalar", "rsqrt", "softmax", "log_softmax",
           "layer_norm", "rms_norm", "cross_entropy", "mse_loss",
           "reduce_sum", "reduce_mean", "embedding"}
LOW_OPS = {"matmul", "conv2d", "attention"}
VIEW_OPS = {"broadcast", "reshape", "transpose", "slice"}
LOW_TYPES = {"bf16": torch.bfloat16, "f16": torch.float16}

_LINE = re.compile(r"^\s*(%[\w.$\-, %]+?) = memopt\.(\w+) (.*?)"
                   r"(?: \{memopt\.scope = \"[^\"]*\"\})? : (.*)$")
_SCALAR = r"-?[\d.]+(?:e[+-]\d+)?"
_SSA = r"%[\w.$\-]+"  # MLIR's value names (exported ones hold dots)
_OPERANDS = re.compile(rf"({_SSA}|{_SCALAR})(, ({_SSA}|{_SCALAR}))*")
# An argument: its SSA name and its attributes (memopt.role, memopt.name).
_ARG = re.compile(r"%([\w.$\-]+): tensor<[^>]*> \{([^}]*)\}")


def _ints(text, key):
    match = re.search(key + r" \[([-\d, ]*)\]", text)
    return [int(v) for v in match.group(1).split(",")] if match else None


def _shape(type_text):
    dims = re.match(r"tensor<([\dx]*?)x?[a-z]+\d*>", type_text).group(1)
    return [int(d) for d in dims.split("x") if d]


def parse(mlir):
    """(arguments as [(SSA name, memopt.name, role)], ops as [(results, op,
    operands, attrs, result type)], returned value)."""
    args = []
    for ssa, attrs in _ARG.findall(mlir):
        role = re.search(r'memopt\.role = "(\w+)"', attrs)
        name = re.search(r'memopt\.name = "([^"]+)"', attrs)
        if role:
            args.append((ssa, name.group(1) if name else ssa, role.group(1)))
    ops, returned = [], None
    for line in mlir.splitlines():
        if line.strip().startswith("return "):
            returned = line.split()[1]
            continue
        match = _LINE.match(line)
        if not match:
            continue
        results, op, rest, types = match.groups()
        operands = _OPERANDS.match(rest).group(0)
        attrs = rest[len(operands):].strip()
        mask = re.match(r"mask (%\w+)", attrs)
        if op == "attention" and mask:
            operands += ", " + mask.group(1)
        result_type = types.split(" to ")[-1].split(" -> ")[-1]
        ops.append(([r.strip() for r in results.split(",")], op,
                    [o.strip() for o in operands.split(",")], attrs,
                    result_type.split(", ")[0]))
    return args, ops, returned


class _Round(torch.autograd.Function):
    """Rounds a value to the compute type, and its gradient."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.to(dtype).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.dtype).to(grad.dtype), None


class _Widen(torch.autograd.Function):
    """A cast up: exact, but the gradient flows back in the compute type."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.dtype).to(grad.dtype), None


_M = (0xD2511F53, 0xCD9E8D57)
_W = (0x9E3779B9, 0xBB67AE85)
_MASK32 = 0xFFFFFFFF


def philox4x32_10(counters, key):
    """Philox4x32-10 of uint64 arrays `counters` [4][n] (32-bit values)
    under the two-word `key`: its four uint32 words, as uint64 arrays."""
    c = [np.asarray(w, np.uint64) for w in counters]
    k = [np.uint64(key[0]), np.uint64(key[1])]
    for round in range(10):
        if round:
            k = [np.uint64((int(k[i]) + _W[i]) & _MASK32) for i in (0, 1)]
        p0 = np.uint64(_M[0]) * c[0]
        p1 = np.uint64(_M[1]) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & np.uint64(_MASK32),
             (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & np.uint64(_MASK32)]
    return c


def dropout_mask(n, p, seed, stream, step=0):
    """The runtime's keep mask of n elements (memopt_dropout)."""
    mixed = (seed ^ (stream * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    low, high = np.uint64(_MASK32), np.uint64(32)
    words = philox4x32_10(
        [blocks & low, blocks >> high, np.full_like(blocks, step & _MASK32),
         np.full_like(blocks, step >> 32)], (mixed & _MASK32, mixed >> 32))
    bits = np.stack(words, 1).reshape(-1)[:n]
    return (bits >> np.uint64(8)) >= np.uint64(int(np.ceil(p * 2.0 ** 24)))


def _dropout(x, attrs):
    """memopt.dropout; with `shared k` one mask bit per index of the
    leading rank - k dimensions."""
    match = re.search(r"p (\S+) seed (\d+) stream (\d+)", attrs)
    p, seed, stream = float(match.group(1)), int(match.group(2)), \
        int(match.group(3))
    shared = re.search(r"shared (\d+)", attrs)
    lead = x.shape[:x.dim() - int(shared.group(1))] if shared else x.shape
    bits = int(np.prod(lead, dtype=np.int64))
    keep = torch.tensor(dropout_mask(bits, p, seed, stream)).reshape(
        tuple(lead) + (1,) * (x.dim() - len(lead))).expand(x.shape)
    return torch.where(keep, x / (1 - p), torch.zeros_like(x))


class _Attention(torch.autograd.Function):
    """memopt.attention's forward and the kernels' backward (runtime.h):
    masked scores pass no gradient, and delta = grad_out . out reads the
    output as stored, rounded to the compute type `low` under mixed
    precision (as the runtime reads it); otherwise this is autograd's."""

    @staticmethod
    def forward(ctx, q, k, v, masked, keep, scale, fill, low):
        scores = scale * torch.matmul(q, k.transpose(-1, -2))
        probs = torch.softmax(torch.where(masked, fill, scores), -1)
        dropped = probs if keep is None else probs * keep
        out = torch.matmul(dropped, v)
        stored = out if low is None else out.to(low).to(out.dtype)
        ctx.save_for_backward(q, k, v, masked, probs, stored)
        ctx.keep, ctx.scale = keep, scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, masked, probs, stored = ctx.saved_tensors
        keep, scale = ctx.keep, ctx.scale
        dropped = probs if keep is None else probs * keep
        dprobs = torch.matmul(grad, v.transpose(-1, -2))
        if keep is not None:
            dprobs = dprobs * keep
        delta = (grad * stored).sum(-1, keepdim=True)
        dscores = torch.where(masked, torch.zeros_like(probs),
                              probs * (dprobs - delta)) * scale
        return (torch.matmul(dscores, k),
                torch.matmul(dscores.transpose(-1, -2), q),
                torch.matmul(dropped.transpose(-1, -2), grad),
                None, None, None, None, None)


def _attention(xs, attrs, low):
    """memopt.attention (runtime.h) on q, k, v and the optional mask."""
    q, k, v = xs[:3]
    number = r"(-?[\d.]+(?:e[+-]\d+)?|0x[0-9A-F]+)"

    def attr(key, default):
        match = re.search(key + " " + number, attrs)
        if not match:
            return default
        text = match.group(1)
        return np.frombuffer(bytes.fromhex(text[2:])[::-1], np.float64)[0] \
            if text.startswith("0x") else float(text)

    shape = q.shape[:-1] + k.shape[-2:-1]
    masked = torch.zeros(shape, dtype=torch.bool)
    if re.search(r"\bcausal\b", attrs):
        masked |= torch.ones(shape[-2:], dtype=torch.bool).triu(1)
    if len(xs) > 3:
        masked |= xs[3].bool()
    fill = torch.full(shape, attr("mask_value", -np.inf), dtype=q.dtype)
    p, keep = attr("dropout", 0.0), None
    if p > 0:
        drawn = torch.tensor(dropout_mask(
            masked.numel(), p, int(attr("seed", 0)),
            int(attr("stream", 0)))).reshape(shape)
        keep = drawn.to(q.dtype) / (1 - p)
    return _Attention.apply(q, k, v, masked, keep, attr("scale", 1.0), fill,
                            low)


def fuse_kernels(mlir):
    """The module after memopt-opt --memopt-fuse-kernels (memopt-opt from
    PATH, as run.py finds memopt-compile)."""
    run = subprocess.run(["memopt-opt", "--memopt-fuse-kernels"], input=mlir,
                         capture_output=True, text=True, check=True)
    return run.stdout


def _apply(op, xs, attrs, shape, low=None):
    """The float64 result(s) of one op on its operands; `low` is the
    compute type under mixed precision."""
    x = xs[0]
    unary = {"exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
             "rsqrt": torch.rsqrt, "sigmoid": torch.sigmoid,
             "tanh": torch.tanh, "relu": torch.relu, "silu": F.silu,
             "neg": torch.neg}
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul,
              "div": torch.div}
    if op in unary:
        return unary[op](x)
    if op in binary:
        return binary[op](x, xs[1])
    if op in ("add_scalar", "mul_scalar", "pow_scalar"):
        s = float(xs[1])
        return x + s if op == "add_scalar" else x * s if op == "mul_scalar" \
            else x ** s
    if op == "dropout":
        return _dropout(x, attrs)
    if op == "gelu":
        return F.gelu(x, approximate="tanh" if "tanh" in attrs else "none")
    if op == "matmul":
        b = xs[1].transpose(-1, -2) if "transpose_rhs" in attrs else xs[1]
        return torch.matmul(x, b)
    if op in ("softmax", "log_softmax"):
        dim = int(re.search(r"dim (\d+)", attrs).group(1))
        return getattr(torch, op)(x, dim)
    if op == "layer_norm":
        eps = float(re.search(r"eps (\S+)", attrs).group(1))
        return F.layer_norm(x, (x.shape[-1],), xs[1], xs[2], eps)
    if op == "rms_norm":
        eps = float(re.search(r"eps (\S+)", attrs).group(1))
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * xs[1]
    if op == "broadcast":
        dims = _ints(attrs, "dims")
        view = [1] * len(shape)
        for i, d in enumerate(dims):
            view[d] = x.shape[i]
        return x.reshape(view).expand(shape)
    if op in ("reduce_sum", "reduce_mean"):
        dims = _ints(attrs, "dims")
        return x.sum(dims) if op == "reduce_sum" else x.mean(dims)
    if op == "reshape":
        return x.reshape(shape)
    if op == "transpose":
        return x.permute(_ints(attrs, "perm"))
    if op == "slice":
        index = tuple(slice(a, b, c) for a, b, c in zip(
            _ints(attrs, "starts"), _ints(attrs, "limits"),
            _ints(attrs, "strides")))
        return x[index]
    if op == "concat":
        return torch.cat(xs, int(re.search(r"dim (\d+)", attrs).group(1)))
    if op == "embedding":
        match = re.search(r"padding_idx (\d+)", attrs)
        return F.embedding(xs[1], x,
                           padding_idx=int(match.group(1)) if match else None)
    if op == "conv2d":
        return F.conv2d(x, xs[1], stride=_ints(attrs, "strides"),
                        padding=_ints(attrs, "padding"))
    if op in ("max_pool2d", "avg_pool2d"):
        return getattr(F, op)(x, _ints(attrs, "kernel"),
                              _ints(attrs, "strides"))
    if op == "cross_entropy":
        match = re.search(r"ignore_index (-?\d+)", attrs)
        ignore = int(match.group(1)) if match else -100
        match = re.search(r"label_smoothing (\S+)", attrs)
        return F.cross_entropy(x.reshape(-1, x.shape[-1]), xs[1].reshape(-1),
                               ignore_index=ignore,
                               label_smoothing=float(match.group(1))
                               if match else 0.0)
    if op == "mse_loss":
        return F.mse_loss(x, xs[1])
    if op == "attention":
        return _attention(xs, attrs, low)
    raise ValueError(f"reference.py: no evaluation for memopt.{op}")


def evaluate(mlir, params, inputs, precision=None, loss_scale=1.0,
             dtype=torch.float64):
    """The loss and {parameter: gradient} of the module, computed in
    `dtype`; with `precision` ("bf16" or "f16") the roundings of
    mixed precision, the loss multiplied by `loss_scale` before the
    backward and the gradients divided by it after."""
    low = LOW_TYPES.get(precision)
    args, ops, returned = parse(mlir)
    leaves = {n: torch.tensor(np.asarray(v), dtype=dtype, requires_grad=True)
              for n, v in params.items()}
    env, kind = {}, {}   # value -> tensor; value -> "f32" | "low" | "param"
    for ssa, name, role in args:
        if role == "param":
            env["%" + ssa], kind["%" + ssa] = leaves[name], "param"
        else:
            data = inputs[name]
            env["%" + ssa] = torch.tensor(data) if data.dtype == np.int64 \
                else torch.tensor(data, dtype=dtype)
            kind["%" + ssa] = "f32"
    for results, op, operands, attrs, result_type in ops:
        xs = [env.get(o, o) for o in operands]
        floats = [o for o in operands if o in env and
                  env[o].is_floating_point()]
        if low is None:
            out_kind = "f32"
        elif op in LOW_OPS:
            out_kind = "low"
        elif op in F32_OPS:
            out_kind = "f32"
        elif op in VIEW_OPS and kind[operands[0]] == "param":
            out_kind = "param"
        else:
            kinds = {kind[o] for o in floats}
            out_kind = "f32" if "f32" in kinds else (
                "low" if "low" in kinds else "param")
        if low is not None:
            for i, o in enumerate(operands):
                if o not in floats:
                    continue
                if out_kind == "low" and kind[o] != "low":
                    xs[i] = _Round.apply(xs[i], low)
                elif out_kind != "low" and kind[o] == "low":
                    xs[i] = _Widen.apply(xs[i], low)
        value = _apply(op, xs, attrs, _shape(result_type), low)
        if out_kind == "low":
            value = _Round.apply(value, low)
        env[results[0]], kind[results[0]] = value, (
            "f32" if out_kind == "param" and op not in VIEW_OPS else out_kind)
    loss = env[returned]
    if loss.requires_grad:  # a graph may have no parameters
        (loss * loss_scale).backward()
    return float(loss), {
        n: (leaf.grad if leaf.grad is not None else torch.zeros_like(leaf))
        .double().numpy() / loss_scale for n, leaf in leaves.items()}


def rounding_error(graph, precision, loss_scale=1.0, exact=None):
    """How far the roundings of `precision` alone move the graph: the
    change of the loss relative to max(1, |loss|), and the largest change
    of each parameter's gradient relative to the gradient's largest
    element (the first SGD step's relative error). `exact` is the graph's
    evaluate() result, if the caller has it already."""
    ref_loss, ref = exact or evaluate(graph.mlir, graph.params, graph.inputs)
    loss, grads = evaluate(fuse_kernels(graph.mlir), graph.params,
                           graph.inputs, precision, loss_scale)
    params = {n: float(np.abs(grads[n] - g).max() /
                       max(float(np.abs(g).max()), 1e-30))
              for n, g in ref.items()}
    return abs(loss - ref_loss) / max(1.0, abs(ref_loss)), params


def main():
    import randgraph
    graph = randgraph.generate(int(sys.argv[1]), "--conv" in sys.argv)
    loss, grads = evaluate(graph.mlir, graph.params, graph.inputs)
    print(f"loss {loss:.9g}")
    for name, grad in grads.items():
        print(f"{name} |grad|max {np.abs(grad).max():.6g}")
    for precision in ("bf16", "f16"):
        dloss, dparams = rounding_error(graph, precision)
        worst = max(dparams, key=dparams.get)
        print(f"{precision}: loss {dloss:.3g}, gradients up to "
              f"{dparams[worst]:.3g} ({worst})")


if __name__ == "__main__":
    main()
