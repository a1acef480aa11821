"""Random, valid memopt training graphs for differential testing.

`generate(seed)` returns a `Graph`: the text of a forward + loss module in
the memopt dialect (docs/Dialect.md) together with its parameters and one
batch as numpy arrays, ready for memopt-compile and OUT/train. The same seed
always gives the same graph.

A graph is a random DAG of the dialect's differentiable ops over values of
consistent shapes. It is built in blocks (the ops of block i carry the scope
`block.<i>`, so rematerialization finds stages) whose ops draw their
operands mostly from the values of their own block and sometimes from
earlier blocks (skip connections, so that not every block boundary is a cut
point). Every value has the batch as dimension 0 and no op mixes examples,
so the step can be split into micro-batches. Values stay of order one (exp,
log, sqrt, rsqrt, pow and div only see bounded or positive operands), so
that gradients are well conditioned and finite differences meaningful.
Values that would not reach the loss are folded into it, so that every op
is trained; the loss is cross-entropy (with some ignored labels) or mean
squared error.

    python3 randgraph.py SEED        # prints the module of graph SEED
"""

import sys

import numpy as np

__all__ = ["Graph", "generate"]


def _type(shape, dtype="f32"):
    if not shape:
        return f"tensor<{dtype}>"
    return f"tensor<{'x'.join(str(d) for d in shape)}x{dtype}>"


def _float(x):
    return f"{x:.6e}"


class Graph:
    """A forward + loss function: `mlir`, `params`, `inputs` (the batch),
    `ops` (the op names in order) and `has_dropout`."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.batch = int(self.rng.choice([4, 8]))
        self.args = []      # argument declarations
        self.params = {}    # name -> array
        self.inputs = {}    # name -> array (inputs and labels)
        self.lines = []
        self.values = []    # [(ssa name, shape, block)] of f32 values
        self.used = set()   # ssa names some op reads
        self.ops = []
        self.counter = 0
        self.streams = 0
        self.scope = ""
        self.has_dropout = False
        self.mlir = None

    # -- arguments --------------------------------------------------------

    def param(self, shape, kind, fan_in=1):
        name = f"p{len(self.params)}"
        if kind == "weight":
            data = self.rng.standard_normal(shape) / np.sqrt(fan_in)
        elif kind == "scale":
            data = 1.0 + 0.1 * self.rng.standard_normal(shape)
        else:
            data = 0.1 * self.rng.standard_normal(shape)
        self.params[name] = data.astype(np.float32)
        self.args.append(f"%{name}: {_type(shape)} {{memopt.role = \"param\", "
                         f"memopt.name = \"{name}\"}}")
        return f"%{name}"

    def data(self, array, role="input"):
        name = f"{'x' if role == 'input' else 'y'}{len(self.inputs)}"
        self.inputs[name] = array
        dtype = "i64" if array.dtype == np.int64 else "f32"
        self.args.append(f"%{name}: {_type(array.shape, dtype)} {{memopt.role = "
                         f"\"{role}\", memopt.name = \"{name}\", "
                         f"memopt.batch_dim = 0 : i64}}")
        return f"%{name}"

    # -- ops --------------------------------------------------------------

    def op(self, op, operands, types, attrs="", results=1):
        """Emits `memopt.<op> operands attrs : types`; returns the name of
        its (first) result."""
        self.used.update(v for v in operands if v.startswith("%"))
        self.counter += 1
        name = f"%v{self.counter}"
        lhs = name if results == 1 else ", ".join(
            [name] + [f"{name}_{i}" for i in range(1, results)])
        head = f"memopt.{op} {', '.join(operands)}" + (f" {attrs}" if attrs
                                                        else "")
        self.lines.append(f"  {lhs} = {head} {{memopt.scope = "
                          f"\"{self.scope}\"}} : {types}")
        self.ops.append(op)
        return name

    def unary(self, op, x, shape, attrs=""):
        return self.op(op, [x], _type(shape), attrs)

    def scalar(self, op, x, shape, value):
        return self.op(op, [x, _float(value)], _type(shape))

    def binary(self, op, a, b, shape):
        return self.op(op, [a, b], _type(shape))

    def positive(self, x, shape):
        """A value in (0.5, 1.5) computed from x."""
        return self.scalar("add_scalar", self.unary("sigmoid", x, shape),
                           shape, 0.5)

    def broadcast_param(self, shape, kind):
        """A parameter of shape[1:] broadcast over the batch."""
        p = self.param(shape[1:], kind)
        dims = ", ".join(str(d) for d in range(1, len(shape)))
        return self.op("broadcast", [p],
                       f"{_type(shape[1:])} to {_type(shape)}",
                       f"dims [{dims}]")

    def linear(self, x, shape, out):
        w = self.param((out, shape[-1]), "weight", fan_in=shape[-1])
        result = shape[:-1] + (out,)
        y = self.op("matmul", [x, w], f"{_type(shape)}, "
                    f"{_type((out, shape[-1]))} -> {_type(result)}",
                    "transpose_rhs")
        if self.rng.random() < 0.6:
            y = self.binary("add", y, self.broadcast_param(result, "bias"),
                            result)
        return y, result

    def reduce(self, op, x, shape, dims):
        kept = tuple(d for i, d in enumerate(shape) if i not in dims)
        return self.op(op, [x], f"{_type(shape)} to {_type(kept)}",
                       f"dims [{', '.join(map(str, dims))}]"), kept

    # -- the random choice of one op ----------------------------------------

    def pick(self, block):
        """An operand: usually of this block (recent values more likely),
        sometimes any earlier value."""
        own = [v for v in self.values if v[2] == block]
        if own and self.rng.random() < 0.85:
            weights = np.arange(1, len(own) + 1, dtype=float) ** 2
            v = own[self.rng.choice(len(own), p=weights / weights.sum())]
        else:
            v = self.values[self.rng.integers(len(self.values))]
        return v[0], v[1]

    def partner(self, shape, block, exclude):
        """A second operand of `shape`: an existing value or a broadcast
        parameter."""
        same = [v for v in self.values if v[1] == shape and v[0] != exclude]
        if same and self.rng.random() < 0.7:
            near = [v for v in same if v[2] == block] or same
            return near[self.rng.integers(len(near))][0]
        return self.broadcast_param(shape, "bias")

    def step(self, block):
        """Emits one random op (or a short idiom) in `block` and records
        its result."""
        x, shape = self.pick(block)
        rank = len(shape)
        kind = self.rng.choice(
            ["linear", "unary", "binary", "div", "transcendental", "softmax",
             "norm", "dropout", "reshape", "transpose", "slice_concat",
             "reduce", "attention"],
            p=[0.16, 0.16, 0.14, 0.04, 0.08, 0.06, 0.08, 0.04, 0.05, 0.04,
               0.05, 0.05, 0.05])
        if kind == "linear":
            y, shape = self.linear(x, shape, int(self.rng.integers(3, 13)))
        elif kind == "unary":
            op = self.rng.choice(["relu", "gelu", "gelu_tanh", "silu", "tanh",
                                  "sigmoid", "neg", "add_scalar",
                                  "mul_scalar"])
            if op == "gelu_tanh":
                y = self.unary("gelu", x, shape, "approximate<tanh>")
            elif op in ("add_scalar", "mul_scalar"):
                y = self.scalar(op, x, shape,
                                float(self.rng.uniform(-1.5, 1.5)))
            else:
                y = self.unary(op, x, shape)
        elif kind == "binary":
            op = self.rng.choice(["add", "sub", "mul"])
            y = self.binary(op, x, self.partner(shape, block, x), shape)
        elif kind == "div":
            d = self.positive(self.partner(shape, block, x), shape)
            y = self.binary("div", x, d, shape)
        elif kind == "transcendental":
            op = self.rng.choice(["exp", "log", "sqrt", "rsqrt", "pow_scalar"])
            if op == "exp":
                y = self.unary("exp", self.unary("tanh", x, shape), shape)
            elif op == "pow_scalar":
                y = self.scalar("pow_scalar", self.positive(x, shape), shape,
                                float(self.rng.choice([0.5, 2.0, 3.0, -1.0])))
            else:
                y = self.unary(op, self.positive(x, shape), shape)
        elif kind == "softmax" and rank >= 2:
            op = self.rng.choice(["softmax", "log_softmax"])
            y = self.op(op, [x], _type(shape), f"dim {rank - 1}")
        elif kind == "norm" and rank >= 2:
            stats = _type(shape[:-1])
            w = self.param(shape[-1:], "scale")
            if self.rng.random() < 0.5:
                b = self.param(shape[-1:], "bias")
                y = self.op("layer_norm", [x, w, b],
                            f"{_type(shape)}, {_type(shape[-1:])} -> {stats}",
                            "eps 1.0e-05", results=3)
            else:
                y = self.op("rms_norm", [x, w],
                            f"{_type(shape)}, {_type(shape[-1:])} -> {stats}",
                            "eps 1.0e-06", results=2)
        elif kind == "dropout":
            y = self.unary("dropout", x, shape,
                           f"p 1.0e-01 seed {self.seed % 1000} "
                           f"stream {self.streams}")
            self.streams += 1
            self.has_dropout = True
        elif kind == "reshape" and rank == 3:
            new = (shape[0], shape[1] * shape[2])
            y = self.op("reshape", [x], f"{_type(shape)} to {_type(new)}")
            shape = new
        elif kind == "reshape" and rank == 2 and shape[1] % 2 == 0:
            new = (shape[0], 2, shape[1] // 2)
            y = self.op("reshape", [x], f"{_type(shape)} to {_type(new)}")
            shape = new
        elif kind == "transpose" and rank == 3:
            new = (shape[0], shape[2], shape[1])
            y = self.op("transpose", [x], f"{_type(shape)} to {_type(new)}",
                        "perm [0, 2, 1]")
            shape = new
        elif kind == "slice_concat" and rank >= 2 and shape[-1] >= 2:
            cut = int(self.rng.integers(1, shape[-1]))
            parts = []
            for lo, hi in ((0, cut), (cut, shape[-1])):
                part = shape[:-1] + (hi - lo,)
                starts = ", ".join(["0"] * (rank - 1) + [str(lo)])
                limits = ", ".join([str(d) for d in shape[:-1]] + [str(hi)])
                strides = ", ".join(["1"] * rank)
                parts.append((self.op(
                    "slice", [x], f"{_type(shape)} to {_type(part)}",
                    f"starts [{starts}] limits [{limits}] "
                    f"strides [{strides}]"), part))
            # Swap the halves, one of them transformed, and join them again.
            (a, ta), (b, tb) = parts
            b = self.unary(self.rng.choice(["tanh", "silu", "relu"]), b, tb)
            y = self.op("concat", [b, a], f"{_type(tb)}, {_type(ta)} -> "
                        f"{_type(shape)}", f"dim {rank - 1}")
        elif kind == "reduce" and rank >= 2:
            op = self.rng.choice(["reduce_sum", "reduce_mean"])
            y, small = self.reduce(op, x, shape, [rank - 1])
            dims = ", ".join(str(d) for d in range(rank - 1))
            y = self.op("broadcast", [y], f"{_type(small)} to {_type(shape)}",
                        f"dims [{dims}]")
            y = self.binary("sub", x, y, shape)
        elif kind == "attention" and rank == 3:
            # scores = softmax(x x^T / sqrt(d)), then scores @ x.
            scores = shape[:2] + (shape[1],)
            s = self.op("matmul", [x, x], f"{_type(shape)}, {_type(shape)} -> "
                        f"{_type(scores)}", "transpose_rhs")
            s = self.scalar("mul_scalar", s, scores, 1 / np.sqrt(shape[2]))
            s = self.op("softmax", [s], _type(scores), "dim 2")
            y = self.op("matmul", [s, x], f"{_type(scores)}, {_type(shape)} -> "
                        f"{_type(shape)}")
        else:
            y = self.unary(self.rng.choice(["tanh", "gelu", "silu"]), x, shape)
        self.values.append((y, tuple(shape), block))

    # -- the whole graph ---------------------------------------------------

    def convolutions(self):
        """An image input through one to four random convolution, pooling
        and activation ops (scopes `conv.<i>`), flattened to a matrix."""
        rng, b = self.rng, self.batch
        shape = (b, int(rng.integers(1, 5)), int(rng.choice([4, 6, 8])),
                 int(rng.choice([4, 6, 8])))
        x = self.data(rng.standard_normal(shape).astype(np.float32))
        for i in range(int(rng.integers(1, 5))):
            self.scope = f"conv.{i}"
            n, c, h, w = shape
            inp = x
            kind = rng.choice(["conv", "conv", "pool", "act"])
            if kind == "pool" and h >= 4 and w >= 4:
                op = str(rng.choice(["max_pool2d", "avg_pool2d"]))
                out = (n, c, h // 2, w // 2)
                x = self.op(op, [x], f"{_type(shape)} to {_type(out)}",
                            "kernel [2, 2] strides [2, 2]")
            elif kind == "act":
                x = self.unary(str(rng.choice(["relu", "gelu", "tanh"])), x,
                               shape)
                out = shape
            else:
                k = int(rng.choice([1, 3]))
                stride = int(rng.choice([1, 1, 2])) if h >= 4 else 1
                o = int(rng.integers(1, 5))
                pad = (k - 1) // 2
                out = (n, o, (h + 2 * pad - k) // stride + 1,
                       (w + 2 * pad - k) // stride + 1)
                filt = self.param((o, c, k, k), "weight", fan_in=c * k * k)
                x = self.op("conv2d", [x, filt],
                            f"{_type(shape)}, {_type((o, c, k, k))} -> "
                            f"{_type(out)}",
                            f"strides [{stride}, {stride}] "
                            f"padding [{pad}, {pad}]")
                if out == shape and rng.random() < 0.5:
                    x = self.binary("add", x, inp, out)
            shape = out
            self.values.append((x, shape, 0))
        flat = (b, shape[1] * shape[2] * shape[3])
        x = self.op("reshape", [x], f"{_type(shape)} to {_type(flat)}")
        return x, flat

    def build(self, conv=False):
        rng, b = self.rng, self.batch
        if conv:
            x, shape = self.convolutions()
            self.values.append((x, shape, 0))
            return self.blocks(x, shape)
        # Inputs: a matrix, a sequence, or token ids through an embedding.
        form = rng.choice(["matrix", "sequence", "tokens"])
        features = int(rng.integers(3, 13))
        if form == "matrix":
            shape = (b, features)
            x = self.data(rng.standard_normal(shape).astype(np.float32))
        elif form == "sequence":
            shape = (b, int(rng.integers(2, 6)), features)
            x = self.data(rng.standard_normal(shape).astype(np.float32))
        else:
            vocab, length = int(rng.integers(5, 17)), int(rng.integers(2, 6))
            ids = self.data(rng.integers(0, vocab, (b, length)).astype(np.int64))
            table = self.param((vocab, features), "scale")
            shape = (b, length, features)
            self.scope = "embed"
            x = self.op("embedding", [table, ids],
                        f"{_type((vocab, features))}, "
                        f"{_type((b, length), 'i64')} -> {_type(shape)}")
        self.values.append((x, shape, 0))
        if rng.random() < 0.3:
            other = (b, int(rng.integers(3, 13)))
            self.values.append(
                (self.data(rng.standard_normal(other).astype(np.float32)),
                 other, 0))
        return self.blocks(x, shape)

    def blocks(self, x, shape):
        rng = self.rng
        blocks = int(rng.integers(1, 6))
        for block in range(blocks):
            self.scope = f"block.{block}"
            start = self.values[-1]
            if block > 0:
                # The block's input: the last value of the previous block.
                self.values.append((start[0], start[1], block))
            for _ in range(int(rng.integers(2, 6))):
                self.step(block)
            if rng.random() < 0.5:
                # A residual connection around the block.
                last = self.values[-1]
                if last[1] == start[1] and last[0] != start[0]:
                    y = self.binary("add", start[0], last[0], last[1])
                    self.values.append((y, last[1], block))
        self.loss()
        return self

    def loss(self):
        """Folds every unused value into the last one and adds the loss."""
        rng, b = self.rng, self.batch
        self.scope = "head"
        out, shape, _ = self.values[-1]
        for name, vshape, _ in self.values[:-1]:
            if name in self.used or not name.startswith("%v"):
                continue
            v = name
            if len(vshape) > 1:
                v, _ = self.reduce("reduce_mean", v, vshape,
                                   list(range(1, len(vshape))))
            dims = "0"
            v = self.op("broadcast", [v], f"{_type((b,))} to {_type(shape)}",
                        f"dims [{dims}]")
            out = self.binary("add", out, v, shape)
        if len(shape) == 1:
            out = self.op("reshape", [out], f"{_type(shape)} to "
                          f"{_type((b, 1))}")
            shape = (b, 1)
        if rng.random() < 0.6:
            classes = int(rng.integers(2, 9))
            logits, lshape = self.linear(out, shape, classes)
            labels = rng.integers(0, classes, lshape[:-1]).astype(np.int64)
            labels.flat[rng.random(labels.size) < 0.15] = -100
            labels.flat[0] = 0  # at least one label counts
            y = self.data(labels, role="label")
            loss = self.op("cross_entropy", [logits, y],
                           f"{_type(lshape)}, {_type(lshape[:-1], 'i64')}",
                           "ignore_index -100")
        else:
            target = self.data(rng.standard_normal(shape).astype(np.float32),
                               role="label")
            loss = self.op("mse_loss", [out, target], _type(shape))
        header = ("func.func @forward(\n    " + ",\n    ".join(self.args) +
                  ")\n    -> tensor<f32> attributes {memopt.loss} {")
        self.mlir = (f"// randgraph seed {self.seed}\n{header}\n" +
                     "\n".join(self.lines) +
                     f"\n  return {loss} : tensor<f32>\n}}\n")


def generate(seed, conv=False):
    """The random graph of `seed`; with `conv`, it starts with convolutions
    of an image input."""
    return Graph(seed).build(conv)


if __name__ == "__main__":
    print(generate(int(sys.argv[1]), conv="--conv" in sys.argv).mlir, end="")
