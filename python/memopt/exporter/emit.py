"""Printing of memopt dialect IR as text.

The exporter builds one function by calling :class:`Emitter`'s op methods,
each of which prints one op in exactly the custom assembly that
``MemoptOps.td`` declares and returns its result :class:`Value` (shape and
element type included, so callers can keep checking against PyTorch). Ops
whose results end up unused are dropped when the function is finished, so
the exporter may emit speculatively (e.g. a transpose later folded into a
matmul's ``transpose_rhs``).
"""

import math
import re
import struct

import numpy as np

# Element types memopt knows, by numpy dtype.
_NUMPY_TYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "i64": np.int64,
    "i32": np.int32,
    "i1": np.bool_,
}
FLOAT_TYPES = ("f32", "f16", "bf16")
INDEX_TYPES = ("i32", "i64")


class Value:
    """An SSA value: its name (without ``%``), static shape and element
    type (``f32``, ``f16``, ``bf16``, ``i32``, ``i64`` or ``i1``)."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    @property
    def type(self):
        return tensor_type(self.shape, self.dtype)

    @property
    def rank(self):
        return len(self.shape)

    def __repr__(self):
        return "%%%s: %s" % (self.name, self.type)


def tensor_type(shape, dtype):
    """``tensor<2x8xf32>``; a 0-d tensor is ``tensor<f32>``."""
    return "tensor<%s>" % "x".join([str(d) for d in shape] + [dtype])


def format_float(value, bits=64):
    """A float literal MLIR's parser accepts: always with a decimal point
    (``1.0e-05``, not Python's ``1e-05``); infinities and NaN as the hex bit
    pattern of a float of ``bits`` bits."""
    value = float(value)
    if not math.isfinite(value):
        if bits == 64:
            return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
        if bits == 32:
            return "0x%08X" % struct.unpack("<I", struct.pack("<f", value))[0]
        return "0x%04X" % struct.unpack("<H", struct.pack("<e", value))[0]
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        return "%se%s" % (mantissa, exponent)
    return text


def format_array(values):
    """``[1, 2]``: a dense i64 array attribute in custom assembly."""
    return "[%s]" % ", ".join(str(int(v)) for v in values)


def quote(text):
    """An MLIR string literal."""
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def _format_element(value, dtype):
    if dtype == "i1":
        return "true" if value else "false"
    if dtype in INDEX_TYPES:
        return str(int(value))
    return format_float(value, 16 if dtype == "f16" else 32)


def format_dense(array, dtype):
    """A ``dense<...>`` literal for ``array`` with element type ``dtype``:
    a splat when all elements are equal, nested lists otherwise, and the
    raw hex form for large non-boolean tensors."""
    array = np.asarray(array)
    flat = array.reshape(-1)
    if flat.size == 0:
        return "dense<>"
    if np.all(flat == flat[0]) and \
            not (dtype in FLOAT_TYPES and np.isnan(flat[0])):
        return "dense<%s>" % _format_element(flat[0], dtype)
    if flat.size > 64 and dtype == "i1":
        # MLIR stores i1 elements as packed bits, least significant first.
        data = np.packbits(flat.astype(np.bool_), bitorder="little")
        return 'dense<"0x%s">' % data.tobytes().hex().upper()
    if flat.size > 64:
        data = np.ascontiguousarray(array, dtype=np.dtype(
            _NUMPY_TYPES[dtype]).newbyteorder("<")).tobytes()
        return 'dense<"0x%s">' % data.hex().upper()

    def nest(a):
        if a.ndim == 0:
            return _format_element(a.item(), dtype)
        return "[%s]" % ", ".join(nest(x) for x in a)

    return "dense<%s>" % nest(array)


class _Op:
    __slots__ = ("results", "operands", "text")

    def __init__(self, results, operands, text):
        self.results = results
        self.operands = operands
        self.text = text


class Emitter:
    """Builds the body of one function, op by op.

    ``scope`` is attached to every op as ``memopt.scope``; ``hint`` names the
    results (the fx node being exported). Set both before emitting a node.
    """

    # Constants whose literal is at least this long are emitted once.
    SHARED_CONSTANT_CHARS = 4096

    def __init__(self):
        self.scope = ""
        # The dtype the ops emitted now run in under mixed precision
        # (memopt.precision), or None for the pass's own choice.
        self.precision = None
        self.hint = "v"
        self._used = set()
        self._ops = []
        self._arguments = []
        # Result name of `memopt.transpose` that swaps the two trailing
        # dimensions -> its operand, for folding into matmul's flags.
        self.swapped = {}
        # Result name of `memopt.reshape` -> its operand, and of
        # `memopt.transpose` -> (its operand, its permutation), so that
        # chains of reshapes or of transposes collapse into one op.
        self._reshaped = {}
        self._transposed = {}
        # Text of a large constant -> its Value.
        self._large_constants = {}

    # -- Names and arguments ------------------------------------------------

    def fresh(self, hint=None):
        """A unique SSA name derived from ``hint``."""
        base = re.sub(r"[^A-Za-z0-9_.$-]", "_", hint or self.hint) or "v"
        if not re.match(r"[A-Za-z_.$-]", base):
            base = "v" + base
        name, i = base, 0
        while name in self._used:
            i += 1
            name = "%s_%d" % (base, i)
        self._used.add(name)
        return name

    def argument(self, hint, shape, dtype, attrs):
        """Add a function argument with the ``(key, printed value)`` pairs
        in ``attrs`` as its attribute dictionary."""
        value = Value(self.fresh(hint), shape, dtype)
        self._arguments.append((value, attrs))
        return value

    # -- Generic op printing ------------------------------------------------

    def _emit(self, mnemonic, operands, results, head, tail):
        """Print ``results = memopt.<mnemonic> <head> {scope} : <tail>``.
        ``results`` are (shape, dtype) pairs; returns their Values."""
        values = [Value(self.fresh(), shape, dtype) for shape, dtype in results]
        attrs = "memopt.scope = %s" % quote(self.scope)
        if self.precision is not None:
            attrs = "memopt.precision = %s, %s" % (quote(self.precision),
                                                   attrs)
        text = "%s = memopt.%s %s {%s}" % (
            ", ".join("%" + v.name for v in values), mnemonic, head, attrs)
        if tail is not None:
            text += " : " + tail
        self._ops.append(_Op(values, list(operands), text))
        return values

    def _one(self, mnemonic, operands, shape, dtype, head, tail):
        return self._emit(mnemonic, operands, [(shape, dtype)], head, tail)[0]

    @staticmethod
    def _refs(*values):
        return ", ".join("%" + v.name for v in values)

    # -- Constants, casts and selection -------------------------------------

    def constant(self, array, dtype):
        """``memopt.constant dense<...>`` of ``array`` with element type
        ``dtype``."""
        array = np.asarray(array)
        type_ = tensor_type(array.shape, dtype)
        head = "%s : %s" % (format_dense(array, dtype), type_)
        # A large constant that every layer recomputes (a causal mask) is
        # written once and shared: the IR stays small for deep models.
        large = len(head) >= self.SHARED_CONSTANT_CHARS
        if large and head in self._large_constants:
            return self._large_constants[head]
        values = self._emit("constant", [], [(array.shape, dtype)], head,
                            None)
        if large:
            self._large_constants[head] = values[0]
        return values[0]

    def cast(self, x, dtype):
        return self._one("cast", [x], x.shape, dtype, self._refs(x),
                         "%s to %s" % (x.type, tensor_type(x.shape, dtype)))

    def where(self, condition, a, b):
        return self._one("where", [condition, a, b], a.shape, a.dtype,
                         self._refs(condition, a, b),
                         "%s, %s" % (condition.type, a.type))

    def compare(self, predicate, a, b):
        """``memopt.compare``: the i1 mask of ``a <predicate> b`` (``eq``,
        ``ne``, ``lt``, ``le``, ``gt``, ``ge``), operands of one type."""
        return self._one("compare", [a, b], a.shape, "i1",
                         "%s, %s" % (predicate, self._refs(a, b)), a.type)

    def masked_fill(self, x, mask, value):
        return self._one("masked_fill", [x, mask], x.shape, x.dtype,
                         "%s, %s" % (self._refs(x, mask),
                                     format_float(value)),
                         "%s, %s" % (x.type, mask.type))

    # -- Elementwise --------------------------------------------------------

    def unary(self, kind, x):
        """``neg``, ``exp``, ``log``, ``sqrt``, ``rsqrt``, ``tanh``,
        ``sigmoid``, ``relu``, ``silu``, ``hardswish``, ``hardsigmoid`` or
        ``mish``."""
        return self._one(kind, [x], x.shape, x.dtype, self._refs(x), x.type)

    def gelu(self, x, approximate):
        head = self._refs(x)
        if approximate != "none":
            head += " approximate<%s>" % approximate
        return self._one("gelu", [x], x.shape, x.dtype, head, x.type)

    def clamp(self, x, min=None, max=None, inclusive=True):
        """``memopt.clamp`` to ``[min, max]`` (either may be None, not
        both); ``inclusive=False`` for hardtanh's gradient at the bounds."""
        head = self._refs(x)
        if min is not None:
            head += " min " + format_float(min)
        if max is not None:
            head += " max " + format_float(max)
        if not inclusive:
            head += " inclusive = false"
        return self._one("clamp", [x], x.shape, x.dtype, head, x.type)

    def binary(self, kind, a, b):
        """``add``, ``sub``, ``mul``, ``div`` or ``maximum`` of two values
        of one type."""
        assert a.type == b.type, (a, b)
        return self._one(kind, [a, b], a.shape, a.dtype, self._refs(a, b),
                         a.type)

    def scalar(self, kind, x, value):
        """``add_scalar``, ``mul_scalar`` or ``pow_scalar``."""
        return self._one(kind, [x], x.shape, x.dtype,
                         "%s, %s" % (self._refs(x), format_float(value)),
                         x.type)

    # -- Shapes -------------------------------------------------------------

    def broadcast(self, x, dims, shape):
        return self._one("broadcast", [x], shape, x.dtype,
                         "%s dims %s" % (self._refs(x), format_array(dims)),
                         "%s to %s" % (x.type, tensor_type(shape, x.dtype)))

    def broadcast_to(self, x, shape):
        """Broadcast ``x`` to ``shape`` with NumPy's rules (trailing
        dimensions aligned); ``x`` itself if it already has that shape."""
        shape = tuple(shape)
        if x.shape == shape:
            return x
        lead = len(shape) - x.rank
        assert lead >= 0 and all(
            d in (1, shape[lead + i]) for i, d in enumerate(x.shape)), \
            (x, shape)
        return self.broadcast(x, range(lead, len(shape)), shape)

    def reshape(self, x, shape):
        """``memopt.reshape``; ``x`` itself if the shape is unchanged."""
        shape = tuple(shape)
        x = self._reshaped.get(x.name, x)
        if x.shape == shape:
            return x
        result = self._one("reshape", [x], shape, x.dtype, self._refs(x),
                           "%s to %s" % (x.type, tensor_type(shape, x.dtype)))
        self._reshaped[result.name] = x
        return result

    def transpose(self, x, perm):
        """``memopt.transpose``; ``x`` itself for the identity. A transpose
        of a transpose becomes one op on the original operand."""
        perm = [int(p) for p in perm]
        if perm == list(range(x.rank)):
            return x
        source, composed = x, perm
        if x.name in self._transposed:
            source, inner = self._transposed[x.name]
            composed = [inner[p] for p in perm]
        if composed == list(range(x.rank)):
            return source
        shape = tuple(source.shape[p] for p in composed)
        result = self._one("transpose", [source], shape, x.dtype,
                           "%s perm %s" % (self._refs(source),
                                           format_array(composed)),
                           "%s to %s" % (source.type,
                                         tensor_type(shape, x.dtype)))
        self._transposed[result.name] = (source, composed)
        r = x.rank
        if r >= 2 and perm == list(range(r - 2)) + [r - 1, r - 2]:
            # For matmul: `result` is `x` with its two trailing dimensions
            # swapped, which the op's transpose flags express for free.
            self.swapped[result.name] = x
        return result

    def slice(self, x, starts, limits, strides):
        shape = tuple(-(-(l - s) // st)
                      for s, l, st in zip(starts, limits, strides))
        return self._one("slice", [x], shape, x.dtype,
                         "%s starts %s limits %s strides %s" % (
                             self._refs(x), format_array(starts),
                             format_array(limits), format_array(strides)),
                         "%s to %s" % (x.type, tensor_type(shape, x.dtype)))

    def pad(self, x, low, shape):
        """Zero padding: ``x`` at offsets ``low`` in zeros of ``shape``
        (``memopt.slice_grad`` with unit strides)."""
        limits = [lo + d for lo, d in zip(low, x.shape)]
        return self._one("slice_grad", [x], tuple(shape), x.dtype,
                         "%s starts %s limits %s strides %s" % (
                             self._refs(x), format_array(low),
                             format_array(limits),
                             format_array([1] * x.rank)),
                         "%s to %s" % (x.type, tensor_type(shape, x.dtype)))

    def concat(self, xs, dim):
        shape = list(xs[0].shape)
        shape[dim] = sum(x.shape[dim] for x in xs)
        return self._one("concat", xs, shape, xs[0].dtype,
                         "%s dim %d" % (self._refs(*xs), dim),
                         "%s -> %s" % (", ".join(x.type for x in xs),
                                       tensor_type(shape, xs[0].dtype)))

    # -- Reductions and normalisation ---------------------------------------

    def reduce(self, kind, x, dims):
        """``reduce_sum``, ``reduce_mean`` or ``reduce_max`` over the
        sorted, unique ``dims``, which the result drops."""
        shape = tuple(d for i, d in enumerate(x.shape) if i not in dims)
        return self._one(kind, [x], shape, x.dtype,
                         "%s dims %s" % (self._refs(x), format_array(dims)),
                         "%s to %s" % (x.type, tensor_type(shape, x.dtype)))

    def softmax(self, kind, x, dim):
        """``softmax`` or ``log_softmax`` along the non-negative ``dim``."""
        return self._one(kind, [x], x.shape, x.dtype,
                         "%s dim %d" % (self._refs(x), dim), x.type)

    def layer_norm(self, x, weight, bias, eps):
        stats = tensor_type(x.shape[:x.rank - weight.rank], "f32")
        return self._emit(
            "layer_norm", [x, weight, bias],
            [(x.shape, x.dtype), (x.shape[:x.rank - weight.rank], "f32"),
             (x.shape[:x.rank - weight.rank], "f32")],
            "%s eps %s" % (self._refs(x, weight, bias), format_float(eps)),
            "%s, %s -> %s" % (x.type, weight.type, stats))

    def batch_norm(self, x, weight, bias, running_mean, running_var, eps,
                   momentum):
        """Returns (result, mean, rstd, new_running_mean, new_running_var)."""
        channel = (weight.shape, "f32")
        return self._emit(
            "batch_norm", [x, weight, bias, running_mean, running_var],
            [(x.shape, x.dtype)] + [channel] * 4,
            "%s eps %s momentum %s" % (
                self._refs(x, weight, bias, running_mean, running_var),
                format_float(eps), format_float(momentum)),
            "%s, %s" % (x.type, weight.type))

    # -- Matrix products, embeddings, convolution and pooling ---------------

    def matmul(self, a, b, transpose_lhs=False, transpose_rhs=False):
        m = a.shape[-1] if transpose_lhs else a.shape[-2]
        n = b.shape[-2] if transpose_rhs else b.shape[-1]
        batch = a.shape[:-2] if a.rank >= b.rank else b.shape[:-2]
        shape = batch + (m, n)
        head = self._refs(a, b)
        if transpose_lhs:
            head += " transpose_lhs"
        if transpose_rhs:
            head += " transpose_rhs"
        return self._one("matmul", [a, b], shape, a.dtype, head,
                         "%s, %s -> %s" % (a.type, b.type,
                                           tensor_type(shape, a.dtype)))

    def embedding(self, weight, indices, padding_idx=None):
        """A lookup whose gradient skips the row ``padding_idx`` (a row of
        the table, or None)."""
        shape = indices.shape + weight.shape[1:]
        head = self._refs(weight, indices)
        if padding_idx is not None:
            head += " padding_idx %d" % padding_idx
        return self._one("embedding", [weight, indices], shape, weight.dtype,
                         head,
                         "%s, %s -> %s" % (weight.type, indices.type,
                                           tensor_type(shape, weight.dtype)))

    def embedding_grad(self, rows, indices, count):
        """A scatter-add of ``rows`` into a zero table of ``count`` rows,
        each at the row its index names."""
        shape = (count,) + rows.shape[indices.rank:]
        return self._one("embedding_grad", [rows, indices], shape, rows.dtype,
                         self._refs(rows, indices),
                         "%s, %s -> %s" % (rows.type, indices.type,
                                           tensor_type(shape, rows.dtype)))

    def conv2d(self, x, filter_, shape, strides, padding, dilations, groups,
               kind="conv2d"):
        """``conv2d``, or with kind ``conv2d_grad_input`` the transposed
        convolution of ``x`` to ``shape``."""
        head = self._refs(x, filter_)
        if tuple(strides) != (1, 1):
            head += " strides " + format_array(strides)
        if tuple(padding) != (0, 0):
            head += " padding " + format_array(padding)
        if tuple(dilations) != (1, 1):
            head += " dilations " + format_array(dilations)
        if groups != 1:
            head += " groups %d" % groups
        return self._one(kind, [x, filter_], shape, x.dtype, head,
                         "%s, %s -> %s" % (x.type, filter_.type,
                                           tensor_type(shape, x.dtype)))

    def pool(self, kind, x, shape, kernel, strides, padding):
        """``max_pool2d`` or ``avg_pool2d``."""
        head = "%s kernel %s strides %s" % (
            self._refs(x), format_array(kernel), format_array(strides))
        if tuple(padding) != (0, 0):
            head += " padding " + format_array(padding)
        return self._one(kind, [x], shape, x.dtype, head,
                         "%s to %s" % (x.type, tensor_type(shape, x.dtype)))

    # -- Randomness and losses ----------------------------------------------

    def dropout(self, x, p, seed, stream, shared=0):
        """Dropout whose mask bit is shared along the last ``shared``
        dimensions."""
        head = "%s p %s seed %d stream %d" % (self._refs(x), format_float(p),
                                              seed, stream)
        if shared:
            head += " shared %d" % shared
        return self._one("dropout", [x], x.shape, x.dtype, head, x.type)

    def cross_entropy(self, logits, labels, ignore_index, reduction,
                      label_smoothing=0.0):
        head = self._refs(logits, labels)
        if ignore_index != -100:
            head += " ignore_index %d" % ignore_index
        if reduction != "mean":
            head += " reduction<%s>" % reduction
        if label_smoothing:
            head += " label_smoothing %s" % format_float(label_smoothing)
        return self._one("cross_entropy", [logits, labels], (), "f32", head,
                         "%s, %s" % (logits.type, labels.type))

    def mse_loss(self, x, target, reduction):
        head = self._refs(x, target)
        if reduction != "mean":
            head += " reduction<%s>" % reduction
        return self._one("mse_loss", [x, target], (), "f32", head, x.type)

    # -- The function -------------------------------------------------------

    def function(self, name, results, header="", attributes=()):
        """The text of a module holding ``func.func @name``, which returns
        ``results`` and carries ``memopt.loss`` and ``attributes`` (pairs of
        name and attribute text). Ops that do not contribute to a result are
        dropped (every memopt op is pure)."""
        live = {v.name for v in results}
        kept = []
        for op in reversed(self._ops):
            if any(v.name in live for v in op.results):
                kept.append(op)
                live.update(v.name for v in op.operands)
        kept.reverse()

        lines = [header] if header else []
        lines.append("module {")
        args = []
        for value, attrs in self._arguments:
            attr_text = ", ".join("%s = %s" % kv for kv in attrs)
            args.append("      %%%s: %s {%s}" % (value.name, value.type,
                                                  attr_text))
        types = [v.type for v in results]
        result_types = types[0] if len(types) == 1 else \
            "(%s)" % ", ".join(types)
        function_attrs = ", ".join(["memopt.loss"] + [
            "%s = %s" % kv for kv in attributes])
        lines.append("  func.func @%s(\n%s)\n      -> %s attributes "
                     "{%s} {" % (name, ",\n".join(args), result_types,
                                 function_attrs))
        lines.extend("    " + op.text for op in kept)
        lines.append("    return %s : %s" % (self._refs(*results),
                                             ", ".join(types)))
        lines.append("  }")
        lines.append("}")
        return "\n".join(lines) + "\n"
