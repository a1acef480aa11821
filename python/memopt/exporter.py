"""Export a PyTorch model's forward pass and loss to the memopt dialect.

The model is traced with ``torch.fx.symbolic_trace`` semantics, by a
tracer that also records, for every node, the path of the module whose
``forward()`` created it, and runs every op on meta tensors as it records
it, so that shapes are numbers while tracing (``n, c, h, w = x.shape``,
``a, b = x.chunk(2)``; see "Tracing" below). The graph is then walked once,
node by node, and each node is both

* evaluated on concrete example values, which gives every shape statically
  (and the value of everything that depends only on constants, buffers and
  shapes: sizes, masks, position indices), and
* if it depends on an input or a parameter, translated by the handler that
  the tables at the end of this file map its target to, which prints memopt
  ops through :class:`memopt._emit.Emitter`.

Each handler's result is checked against the shape and dtype PyTorch
computed, so a translation bug surfaces as an error at export time rather
than as wrong IR.
"""

import ast
import builtins
import contextlib
import copy
import dis
import inspect
import itertools
import math
import operator
import os

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from . import safetensors
from ._emit import FLOAT_TYPES, INDEX_TYPES, Emitter, format_float

__all__ = ["export", "ExportError"]


class ExportError(Exception):
    """The model cannot be exported: the message names the op or function
    and the module path it comes from."""


def export(model, example_args, path, optimizer=None):
    """Trace ``model(*example_args)`` and write it in the memopt dialect.

    ``model.forward`` must return the scalar training loss. Writes ``path``
    (e.g. ``model.mlir``): a module with ``func.func @forward`` whose
    arguments are the ``forward()`` arguments (role ``input``, or ``label``
    for those that only feed a loss's target), every parameter in
    ``named_parameters()`` order (role ``param``, or ``frozen`` for one with
    ``requires_grad=False``) and the batch-norm running
    statistics (role ``state``); and ``path`` with the suffix
    ``.safetensors``: the initial parameters and state, by PyTorch name.

    ``optimizer``, the ``torch.optim.AdamW`` or ``torch.optim.SGD`` the
    model would train with, records its parameter groups: each parameter's
    learning rate, weight decay and betas and eps (AdamW) or momentum (SGD)
    in ``memopt.hparams``, and the optimizer in ``memopt.optimizer`` on the
    function; a parameter no group holds is frozen, as one with
    ``requires_grad=False``. Without it memopt-compile's flags apply to
    every parameter.

    Both files are written to temporary files and renamed, so a failure
    never leaves a half-written file. Returns the MLIR text. Raises
    :class:`ExportError` when the model uses something memopt cannot
    express.

    A model whose parameters are on PyTorch's ``meta`` device (shapes, no
    data: e.g. built with ``device="meta"``) exports the same IR and writes
    no parameter file; memopt can then account for its memory and cost
    (``memopt-compile --report-only``, ``--explore``) but not train it. The
    example arguments may be meta tensors too. Buffers that the model turns
    into constants (causal masks, position indices) need values: keep
    them on the CPU.
    """
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    root, ext = os.path.splitext(path)
    if ext == ".safetensors":
        raise ExportError("the output path '%s' must not end in .safetensors:"
                          " the parameters are written next to it" % path)
    exporter = _Exporter(model, tuple(example_args), optimizer)
    text, tensors = exporter.run()
    params_path = root + ".safetensors"
    target = params_path
    try:
        if not exporter.meta:
            safetensors.save(tensors, params_path)
        target = path
        safetensors.write_atomically(path, [text.encode("utf-8")])
    except OSError as e:
        # Neither file without the other: a failed export leaves nothing.
        if target == path and not exporter.meta and \
                os.path.exists(params_path):
            os.unlink(params_path)
        raise ExportError("cannot write '%s': %s"
                          % (target, e.strerror or e)) from e
    return text


#===----------------------------------------------------------------------===#
# Tracing
#===----------------------------------------------------------------------===#
#
# torch.fx's symbolic tracer, with an example value on every proxy: the
# result of the node's op on meta tensors of the example arguments' shapes,
# computed as the node is recorded. Shapes are static in memopt (one graph
# per batch size), so a shape read while tracing is the shape, not an
# approximation, and the trace can answer what symbolic tracing cannot:
# `n, c, h, w = x.shape`, `x.size(1) // 2`, `len(x)`, iterating over a
# tensor or a tuple result (`a, b = x.chunk(2)`). What depends on a
# tensor's data (`if x.sum() > 0`, `.item()`) stays symbolic, so a branch on
# it still fails rather than baking in one side. Meta tensors cost no memory
# or arithmetic (a LLaMA-7B exported from the meta device traces in
# seconds) and draw no random numbers.

_SCOPE = "memopt_scope"

# A proxy whose example could not be computed (an op without a meta kernel,
# an error that the export reports later with the real arguments): it
# behaves as torch.fx's plain proxy.
_UNKNOWN = object()

# What a tensor's shape and dtype alone answer: attributes, and methods
# whose result is read from the example.
_STATIC_ATTRS = {"shape", "ndim", "dtype"}
_STATIC_METHODS = {"size", "dim", "ndimension", "numel", "nelement",
                   "is_floating_point", "is_complex", "element_size"}


class _Proxy(torch.fx.Proxy):
    """fx's Proxy, answering shape queries and iterating from its example
    (see above); without one, iteration still works where the caller
    unpacks a fixed number of items (`out, _ = self.attn(x, x, x)`: torch
    1.13 looks for the UNPACK_SEQUENCE instruction at index
    ``f_lasti // 2``, which Python 3.11's inline caches made wrong)."""

    def __getattr__(self, name):
        if name in _STATIC_ATTRS or name in _STATIC_METHODS:
            example = self.tracer.example_of(self)
            if isinstance(example, torch.Tensor):
                return getattr(example, name)
        return _Attribute(self, name)

    def __len__(self):
        example = self.tracer.example_of(self)
        if isinstance(example, (torch.Tensor, tuple, list)):
            return len(example)
        return super().__len__()

    def __setitem__(self, key, value):
        # `mask[:h, :w] = 1` on a tensor built from shapes (a constant); the
        # export refuses it on a value computed from the inputs.
        self.tracer.create_proxy("call_function", operator.setitem,
                                 (self, key, value), {})

    def __iter__(self):
        example = self.tracer.example_of(self)
        if isinstance(example, (torch.Tensor, tuple, list)):
            return iter([self[i] for i in range(len(example))])
        frame = inspect.currentframe().f_back
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return (self[i] for i in range(inst.argval))
                break
        return self.tracer.iter(self)


class _Attribute(torch.fx.proxy.Attribute, _Proxy):
    """An attribute of a proxy (`x.T`, or `x.view` before the call), whose
    example is the attribute of its root's."""


def _to_meta(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to("meta")
    return value


class _Tracer(torch.fx.Tracer):
    """``symbolic_trace``'s tracer, plus: every proxy carries an example
    (above); buffers become ``get_attr`` nodes (so ``self.mask[:, :, :T,
    :T]`` traces); and every node records in ``meta`` the path of the
    module whose ``forward()`` created it."""

    proxy_buffer_attributes = True

    def __init__(self, example_args):
        super().__init__()
        self._scopes = [""]
        self._placeholders = [_to_meta(a) for a in example_args]
        self._examples = {}       # fx Node -> example, or _UNKNOWN
        self._meta_modules = {}   # leaf module path -> its meta copy
        self._evaluating = False  # computing an example, not tracing
        # The first node whose example PyTorch could not compute, and why.
        self.failure = None

    # -- Scopes -------------------------------------------------------------

    def call_module(self, m, forward, args, kwargs):
        # fx creates the node of an attribute access (`x.T`) lazily, at its
        # first use: force it now so that it gets the caller's scope.
        torch.fx.node.map_aggregate(
            (args, kwargs),
            lambda a: a.node if isinstance(a, torch.fx.Proxy) else a)
        self._scopes.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self._scopes.pop()

    def proxy(self, node):
        return _Proxy(node, self)

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta[_SCOPE] = self._scopes[-1]
        return node

    def trace(self, root, concrete_args=None):
        # torch's random functions, called by the model, become nodes (the
        # export refuses them) rather than a draw frozen into a constant.
        originals = {name: getattr(torch, name) for name in _RANDOM_FACTORIES}
        for name, original in originals.items():
            setattr(torch, name, self._recorded(original))
        # Functions declared leaves of torch.fx only because symbolic
        # tracing cannot read shapes are traced through.
        wrapped = list(_FX_WRAPPED)
        _FX_WRAPPED[:] = [
            (scope, name) for scope, name in wrapped
            if (scope.get("__name__"), name) not in _TRACED_THROUGH]
        try:
            return super().trace(root, concrete_args)
        finally:
            _FX_WRAPPED[:] = wrapped
            for name, original in originals.items():
                setattr(torch, name, original)

    def _recorded(self, original):
        def call(*args, **kwargs):
            if self._evaluating:
                return original(*args, **kwargs)
            return self.create_proxy("call_function", original, args, kwargs)
        return call

    # -- Examples -----------------------------------------------------------

    def create_proxy(self, kind, target, args, kwargs, name=None,
                     type_expr=None, proxy_factory_fn=None):
        proxy = super().create_proxy(kind, target, args, kwargs, name,
                                     type_expr, proxy_factory_fn)
        self._examples[proxy.node] = self._example(proxy.node, kind, target,
                                                   args, kwargs)
        return proxy

    def example_of(self, proxy):
        """The example of ``proxy``, or _UNKNOWN."""
        if isinstance(proxy, torch.fx.proxy.Attribute):
            root = self.example_of(proxy.root)
            if isinstance(root, torch.Tensor):
                try:
                    return _to_meta(getattr(root, proxy.attr))
                except Exception:
                    pass
            return _UNKNOWN
        return self._examples.get(proxy.node, _UNKNOWN)

    def to_bool(self, obj):
        raise torch.fx.proxy.TraceError(
            "symbolically traced variables cannot be used as inputs to "
            "control flow: a branch on a tensor's value cannot be exported "
            "(memopt compiles one graph for every batch; compute both sides "
            "and select with torch.where)")

    def _example(self, node, kind, target, args, kwargs):
        if kind == "placeholder":
            index = sum(1 for n in self._examples if n.op == "placeholder")
            return self._placeholders[index] \
                if index < len(self._placeholders) else _UNKNOWN
        if kind == "get_attr":
            obj = self.root
            with _untraced_modules():
                for part in target.split("."):
                    obj = getattr(obj, part, None)
            return _to_meta(obj) if isinstance(obj, torch.Tensor) \
                else _UNKNOWN
        if kind not in ("call_function", "call_method", "call_module"):
            return _UNKNOWN

        unknown = []

        def example(a):
            if isinstance(a, torch.fx.Proxy):
                a = self.example_of(a)
                if a is _UNKNOWN:
                    unknown.append(node)
            return _to_meta(a)

        args = torch.fx.node.map_aggregate(args, example)
        kwargs = torch.fx.node.map_aggregate(kwargs, example)
        if unknown:
            return _UNKNOWN
        self._evaluating = True
        try:
            # Examples draw no random numbers from the model's generator.
            with _untraced_modules(), torch.no_grad(), \
                    torch.random.fork_rng(devices=[]):
                if kind == "call_function":
                    return target(*args, **kwargs)
                if kind == "call_method":
                    return getattr(args[0], target)(*args[1:], **kwargs)
                return self._meta_module(target)(*args, **kwargs)
        except Exception as e:
            if self.failure is None:
                self.failure = (node, e)
            return _UNKNOWN
        finally:
            self._evaluating = False

    def _meta_module(self, path):
        """A copy of the leaf module at ``path`` whose parameters and
        buffers are on meta (copied without their data), so that running
        it on meta examples costs nothing and leaves the model's own
        state (batch norm's running statistics) alone."""
        if path not in self._meta_modules:
            module = self.root.get_submodule(path)
            memo = {}
            for t in itertools.chain(module.parameters(), module.buffers()):
                meta = _to_meta(t)
                if isinstance(t, nn.Parameter):
                    meta = nn.Parameter(meta, t.requires_grad)
                memo[id(t)] = meta
            self._meta_modules[path] = copy.deepcopy(module, memo)
        return self._meta_modules[path]


# The functions torch.fx.wrap made leaves of every trace, as (globals, name),
# and those of them that are plain tensor code which torchvision made leaves
# only because torch.fx's symbolic tracing cannot read shapes (Swin's
# padding, relative position bias and shifted-window attention): memopt's
# tracer goes through them, to the ops they call. The others stay leaves
# (torchvision.ops.stochastic_depth draws random numbers: an op of its own).
_FX_WRAPPED = torch.fx._symbolic_trace._wrapped_fns_to_patch
_TRACED_THROUGH = {
    ("torchvision.models.swin_transformer", "_patch_merging_pad"),
    ("torchvision.models.swin_transformer", "_get_relative_position_bias"),
    ("torchvision.models.swin_transformer", "shifted_window_attention"),
}


# nn.Module's own __call__ and __getattr__, which torch.fx replaces while it
# traces (a module call becomes a node, a parameter access a get_attr).
_MODULE_CALL = nn.Module.__call__
_MODULE_GETATTR = nn.Module.__getattr__


@contextlib.contextmanager
def _untraced_modules():
    """Modules called inside the block run as in eager PyTorch: computing
    an example records nothing in the graph."""
    traced = nn.Module.__call__, nn.Module.__getattr__
    nn.Module.__call__, nn.Module.__getattr__ = _MODULE_CALL, _MODULE_GETATTR
    try:
        yield
    finally:
        nn.Module.__call__, nn.Module.__getattr__ = traced


#===----------------------------------------------------------------------===#
# Argument binding
#===----------------------------------------------------------------------===#

_REQUIRED = object()


def _signature(text):
    """Parse ``"input, dim=None, *rest, **"`` into a list of (name,
    default); ``*name`` collects the remaining positional arguments and
    ``**`` accepts (and ignores) any keyword argument."""
    params = []
    for item in (s.strip() for s in text.split(",")):
        name, _, default = item.partition("=")
        name = name.strip()
        params.append((name, ast.literal_eval(default.strip()) if default
                       else _REQUIRED))
    return params


class _Call:
    """One node to translate: its bound arguments (fx Nodes or literals, by
    parameter name), the called module if any, and PyTorch's result."""

    def __init__(self, node, args, module, out):
        self.node = node
        self.args = args
        self.module = module
        self.out = out


def _bind(params, args, kwargs, what):
    bound = {}
    args = list(args)
    for name, default in params:
        if name == "**":
            continue
        if name.startswith("*"):
            bound[name[1:]] = tuple(args)
            args = []
        elif args:
            bound[name] = args.pop(0)
        elif name in kwargs:
            bound[name] = kwargs[name]
        elif default is _REQUIRED:
            raise ExportError("%s: missing argument '%s'" % (what, name))
        else:
            bound[name] = default
    if args:
        raise ExportError("%s: too many arguments" % what)
    if not any(name == "**" for name, _ in params):
        unknown = set(kwargs) - {name for name, _ in params}
        if unknown:
            raise ExportError("%s: unsupported keyword argument(s) %s"
                              % (what, ", ".join(sorted(unknown))))
    return bound


#===----------------------------------------------------------------------===#
# The exporter
#===----------------------------------------------------------------------===#

_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "i1",
}
_NUMPY = {"f32": np.float32, "i64": np.int64, "i32": np.int32, "i1": np.bool_}

# Calls that create a tensor from nothing but draw random numbers: folding
# them into a constant would freeze one draw. The tracer records a call of
# the torch functions as a node even when no argument is traced
# (`torch.randn(x.shape)`), so that the export refuses it.
_RANDOM_FACTORIES = ("rand", "randn", "randint", "rand_like", "randn_like",
                     "randint_like", "bernoulli", "normal", "multinomial",
                     "randperm")
_RANDOM = {getattr(torch, name) for name in _RANDOM_FACTORIES} | {
    F.dropout, F.dropout2d}
_RANDOM_METHODS = {"uniform_", "normal_", "bernoulli_", "random_",
                   "exponential_", "bernoulli"}

# Calls whose result is a shape, a rank, a size, a dtype or a device, or a
# tensor made from nothing but those (`x.new_zeros(h, w)`, a mask the model
# then fills in): known at export time even when their operand is not.
_QUERY_METHODS = {"size", "dim", "ndimension", "numel", "nelement",
                  "get_device", "new_zeros", "new_ones", "new_full"}
_QUERY_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda"}
_QUERY_FUNCTIONS = {builtins.len, torch.zeros_like, torch.ones_like,
                    torch.full_like}


def _is_query(node):
    if node.op == "call_method":
        return node.target in _QUERY_METHODS
    if node.op == "call_function":
        if node.target is builtins.getattr:
            return node.args[1] in _QUERY_ATTRS
        return node.target in _QUERY_FUNCTIONS
    return False


def _dtype_name(dtype, what):
    if dtype not in _DTYPES:
        raise ExportError("%s has dtype %s; memopt supports float32 data and "
                          "int64/int32 indices" % (what, dtype))
    return _DTYPES[dtype]


def _target_name(node, module=None):
    """How an error message names what a node calls: ``torch.cumsum``,
    ``Tensor.cumsum``, ``torch.nn.functional.unfold``, ``nn.LSTM``."""
    if node.op == "call_module":
        cls = type(module)
        if cls.__module__.startswith("torch.nn"):
            return "nn." + cls.__name__
        return "%s.%s" % (cls.__module__, cls.__qualname__)
    if node.op == "call_method":
        return "Tensor." + node.target
    target = node.target
    if target is builtins.getattr:
        return "Tensor." + str(node.args[1])
    name = getattr(target, "__name__", repr(target))
    mod = getattr(target, "__module__", None) or ""
    if mod in ("_operator", "operator"):
        return "operator." + name
    if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
        return "torch.nn.functional." + name
    if mod == "torch" or mod.startswith("torch.") or mod == "":
        return "torch." + name
    return "%s.%s" % (mod, name)


def _where(scope):
    return "in module '%s'" % scope if scope else "at the top level"


class _Exporter:
    def __init__(self, model, example_args, optimizer=None):
        if not isinstance(model, nn.Module):
            raise ExportError("memopt.export expects an nn.Module, got %s"
                              % type(model).__name__)
        for i, a in enumerate(example_args):
            if not isinstance(a, torch.Tensor):
                raise ExportError("example argument %d is a %s: every "
                                  "forward() argument must be a tensor"
                                  % (i, type(a).__name__))
        self.model = model
        self.example_args = example_args
        self.optimizer, self.hparams = _parameter_groups(model, optimizer)
        # Parameters on the meta device: shapes only, no parameter file.
        on_meta = [p.is_meta for p in model.parameters()]
        self.meta = any(on_meta)
        if self.meta and not all(on_meta):
            name = next(n for n, p in model.named_parameters()
                        if not p.is_meta)
            raise ExportError(
                "some parameters are on the meta device and '%s' is not: "
                "put the whole model on one device" % name)
        self.emit = Emitter()
        self.modules = dict(model.named_modules())
        self.env = {}       # fx Node -> concrete value
        self.values = {}    # fx Node -> Value, for nodes that are not constant
        self.params = {}    # id(parameter) -> Value
        self.state = {}     # buffer name -> its current Value
        self.state_args = []  # (buffer name, argument Value), argument order
        self.tensors = {}   # safetensors contents
        self.constants = {}  # (node, dtype) -> materialized constant
        self.dropout_stream = 0
        self.node = None

    # -- Errors -------------------------------------------------------------

    def fail(self, message):
        """Raise an ExportError about the node being exported."""
        node = self.node
        module = self.modules.get(node.target) \
            if node.op == "call_module" else None
        raise ExportError("%s %s: %s" % (
            _target_name(node, module), _where(node.meta.get(_SCOPE, "")),
            message))

    # -- Values -------------------------------------------------------------

    def is_symbolic(self, arg):
        found = []
        torch.fx.node.map_arg(
            arg, lambda n: found.append(n) if n in self.values else None)
        return bool(found)

    def concrete(self, arg):
        return torch.fx.node.map_arg(arg, lambda n: self.env[n])

    def const(self, arg, what="argument"):
        """The value of ``arg`` at export time; an error if it depends on an
        input or a parameter."""
        if self.is_symbolic(arg):
            self.fail("the %s must be known at export time (it may depend "
                      "only on constants, buffers and shapes)" % what)
        return self.concrete(arg)

    def val(self, arg, dtype=None):
        """The Value of ``arg``; a constant (optionally converted to
        ``dtype``) is materialized with ``memopt.constant``."""
        if isinstance(arg, torch.fx.Node) and arg in self.values:
            value = self.values[arg]
            if dtype is not None and value.dtype != dtype:
                self.fail("an operand has element type %s where %s is needed"
                          % (value.dtype, dtype))
            return value
        key = (arg, dtype) if isinstance(arg, torch.fx.Node) else None
        if key in self.constants:
            return self.constants[key]
        concrete = self.concrete(arg)
        if isinstance(concrete, torch.Tensor) and concrete.is_meta:
            self.fail("a constant operand is computed from tensors on the "
                      "meta device and has no value: keep the model's "
                      "buffers on the CPU (only parameters may be on meta)")
        if isinstance(concrete, torch.Tensor):
            array = concrete.detach().cpu()
            if dtype is None:
                dtype = _DTYPES.get(array.dtype, str(array.dtype))
            if dtype not in _NUMPY:
                self.fail("constants of element type %s are not supported"
                          % dtype)
            array = array.numpy().astype(_NUMPY[dtype])
        elif isinstance(concrete, (bool, int, float)):
            if dtype is None:
                dtype = "f32" if isinstance(concrete, float) else "i64"
            array = np.asarray(concrete, dtype=_NUMPY[dtype])
        else:
            self.fail("expected a tensor, got %s" % type(concrete).__name__)
        value = self.emit.constant(array, dtype)
        if key is not None:
            self.constants[key] = value
        return value

    def vals(self, arg, dtype=None):
        """The Values of a sequence of tensors: a list or tuple (``[a, b]``)
        or a node whose result is a tuple (``x.chunk(2)``)."""
        if isinstance(arg, torch.fx.Node) and arg in self.values:
            values = self.values[arg]
            if not isinstance(values, tuple) or None in values:
                self.fail("expected a sequence of tensors")
            for value in values:
                if dtype is not None and value.dtype != dtype:
                    self.fail("an operand has element type %s where %s is "
                              "needed" % (value.dtype, dtype))
            return list(values)
        if isinstance(arg, torch.fx.Node):
            arg = self.concrete(arg)
        if not isinstance(arg, (list, tuple)) or not arg:
            self.fail("expected a non-empty sequence of tensors")
        return [self.val(a, dtype) for a in arg]

    def param(self, tensor, what):
        """The argument Value of a parameter of the model."""
        if id(tensor) not in self.params:
            self.fail("%s is not a parameter of the model" % what)
        return self.params[id(tensor)]

    def out_shape(self, call):
        return tuple(call.out.shape)

    # -- Driver -------------------------------------------------------------

    def run(self):
        # The tracer stores tensors created while tracing as attributes of
        # the model (_tensor_constant0, ...): remove them afterwards.
        before = set(vars(self.model))
        try:
            return self._run()
        finally:
            for name in set(vars(self.model)) - before:
                delattr(self.model, name)

    def _run(self):
        tracer = _Tracer(self.example_args)
        try:
            graph = tracer.trace(self.model)
        except Exception as e:
            message = "torch.fx could not trace %s.forward(): %s: %s" % (
                type(self.model).__name__, type(e).__name__, e)
            if tracer.failure is not None:
                # The likely cause: a shape the trace needed was unknown.
                node, error = tracer.failure
                module = self.modules.get(node.target) \
                    if node.op == "call_module" else None
                message += (" (PyTorch could not evaluate %s %s on tensors "
                            "of the example arguments' shapes, so the shape "
                            "of its result was unknown: %s: %s)" % (
                                _target_name(node, module),
                                _where(node.meta.get(_SCOPE, "")),
                                type(error).__name__,
                                (str(error).splitlines() or [""])[0]))
            raise ExportError(message)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.example_args):
            raise ExportError(
                "%s.forward() takes %d argument(s) (%s) but %d example "
                "argument(s) were given" % (
                    type(self.model).__name__, len(placeholders),
                    ", ".join(n.target for n in placeholders),
                    len(self.example_args)))

        self._add_arguments(graph, placeholders)
        loss = None
        with torch.no_grad():
            for node in graph.nodes:
                self.node = node
                self.emit.scope = node.meta.get(_SCOPE, "")
                self.emit.hint = node.name
                if node.op == "output":
                    loss = self._output(node)
                elif node.op == "get_attr":
                    self._get_attr(node)
                elif node.op != "placeholder":
                    self._call(node)

        results = [loss] + [self.state[name] for name, _ in self.state_args]
        header = "// Exported by memopt.export from %s (torch %s)." % (
            type(self.model).__name__, torch.__version__)
        if self.meta:
            header += ("\n// The parameters were on the meta device: there is"
                       " no parameter file.")
        attributes = [] if self.optimizer is None else \
            [("memopt.optimizer", '"%s"' % self.optimizer)]
        return self.emit.function("forward", results, header,
                                  attributes), self.tensors

    def _add_arguments(self, graph, placeholders):
        batch = None
        for node, example in zip(placeholders, self.example_args):
            if node.target.startswith("*"):
                raise ExportError("forward() may not take *args or **kwargs")
            dtype = _dtype_name(example.dtype,
                                "forward() argument '%s'" % node.target)
            if dtype in ("f16", "bf16"):
                raise ExportError(
                    "forward() argument '%s' is %s: only float32 inputs are "
                    "supported for now (memopt chooses low precision itself,"
                    " see --mixed-precision)" % (node.target, example.dtype))
            role = "label" if _is_label(node, self.modules) else "input"
            attrs = [("memopt.role", '"%s"' % role),
                     ("memopt.name", '"%s"' % node.target)]
            # Dimension 0 indexes the examples, in every argument whose
            # leading size is the first one's: an argument of another size
            # is not split into micro-batches.
            if example.dim() > 0:
                if batch is None:
                    batch = example.shape[0]
                if example.shape[0] == batch:
                    attrs.append(("memopt.batch_dim", "0 : i64"))
            self.values[node] = self.emit.argument(
                node.target, example.shape, dtype, attrs)
            self.env[node] = example.detach().clone()

        for name, p in self.model.named_parameters():
            if p.dtype != torch.float32:
                raise ExportError(
                    "parameter '%s' is %s: only float32 parameters are "
                    "supported for now (memopt keeps FP32 master weights and "
                    "chooses low precision itself, see --mixed-precision)"
                    % (name, p.dtype))
            # requires_grad=False, or in none of the optimizer's groups: a
            # frozen weight (LoRA's base), read by the step, never trained.
            trained = p.requires_grad and (self.optimizer is None or
                                           id(p) in self.hparams)
            attrs = [("memopt.role", '"%s"' % ("param" if trained
                                               else "frozen")),
                     ("memopt.name", '"%s"' % name)]
            if trained and self.optimizer is not None:
                attrs.append(("memopt.hparams", "{%s}" % ", ".join(
                    "%s = %s : f64" % (k, format_float(v))
                    for k, v in self.hparams[id(p)])))
            self.params[id(p)] = self.emit.argument(name, p.shape, "f32",
                                                    attrs)
            if not self.meta:
                self.tensors[name] = p.detach().cpu().numpy().copy()

        # Running statistics of the batch-norm modules the graph calls.
        called = {n.target for n in graph.nodes if n.op == "call_module"}
        for name, buf in self.model.named_buffers():
            owner, _, attr = name.rpartition(".")
            module = self.modules.get(owner)
            if not (owner in called and isinstance(module, _BATCH_NORMS)
                    and attr in ("running_mean", "running_var")):
                continue
            if buf.dtype != torch.float32:
                raise ExportError("buffer '%s' is %s: only float32 is "
                                  "supported" % (name, buf.dtype))
            value = self.emit.argument(
                name, buf.shape, "f32",
                [("memopt.role", '"state"'), ("memopt.name", '"%s"' % name)])
            self.state[name] = value
            self.state_args.append((name, value))
            if not buf.is_meta:
                self.tensors[name] = buf.detach().cpu().numpy().copy()

    def _get_attr(self, node):
        obj = self.model
        for part in node.target.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, torch.Tensor) and id(obj) in self.params:
            self.values[node] = self.params[id(obj)]
            self.env[node] = obj.detach().clone()
        elif isinstance(obj, torch.Tensor):
            # A buffer or a tensor created while tracing: a constant. Cloned
            # so that evaluating the graph never writes into the model.
            self.env[node] = obj.detach().clone()
        else:
            self.env[node] = obj

    def _output(self, node):
        result = node.args[0]
        if not isinstance(result, torch.fx.Node) or result not in self.values:
            raise ExportError(
                "%s.forward() must return the scalar loss as a tensor that "
                "depends on the inputs or parameters; it returns %s"
                % (type(self.model).__name__,
                   type(self.concrete(result)).__name__))
        loss = self.values[result]
        if loss.shape != () or loss.dtype != "f32":
            raise ExportError(
                "%s.forward() must return the scalar float32 loss; it "
                "returns %s" % (type(self.model).__name__, loss.type))
        return loss

    def _evaluate(self, node, args, kwargs):
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        module = self.modules[node.target]
        if isinstance(module, _BATCH_NORMS) and module.training:
            # Do not update the model's running statistics.
            return F.batch_norm(args[0], None, None, module.weight,
                                module.bias, True, 0.0, module.eps)
        return module(*args, **kwargs)

    def _call(self, node):
        module = self.modules.get(node.target) \
            if node.op == "call_module" else None
        symbolic = self.is_symbolic((node.args, node.kwargs))
        if symbolic and node.op == "call_method" and \
                node.target in ("zero_", "fill_"):
            self.env[node] = self._evaluate(node, *self.concrete(
                (node.args, node.kwargs)))
            return _inplace_fill(self, node)
        if symbolic and ((node.op == "call_method" and
                          node.target.endswith("_")) or
                         node.target is operator.setitem):
            self.fail("in-place ops are not supported: use the out-of-place "
                      "form")
        if not symbolic:
            if node.target in _RANDOM or (node.op == "call_method" and
                                          node.target in _RANDOM_METHODS):
                self.fail("random numbers outside nn.Dropout/F.dropout are "
                          "not supported")
            if module is not None and (
                    isinstance(module, (nn.Dropout, nn.Dropout2d,
                                        _BATCH_NORMS)) or
                    any(True for _ in module.parameters())):
                symbolic = True

        args, kwargs = self.concrete(node.args), self.concrete(node.kwargs)
        if self.meta and symbolic:
            # A value computed from parameters on meta is a meta tensor;
            # the real buffers it meets (rotary cos/sin caches, masks) go
            # to meta too, for this evaluation only: their values are
            # still the constants the IR holds.
            args, kwargs = torch.fx.node.map_aggregate((args, kwargs),
                                                       _to_meta)
        try:
            out = self._evaluate(node, args, kwargs)
        except ExportError:
            raise
        except Exception as e:
            self.fail("PyTorch could not evaluate it on the example "
                      "arguments: %s: %s" % (type(e).__name__, e))
        self.env[node] = out
        if not symbolic or _is_query(node):
            return
        if node.target is operator.getitem and \
                isinstance(self.values.get(node.args[0]), tuple):
            # An element (or a slice) of a tuple result: x.chunk(2)[0],
            # nn.MultiheadAttention's output and weights. An element memopt
            # does not compute is None, and its handler made sure that
            # nothing reads it.
            item = self.values[node.args[0]][self.const(node.args[1],
                                                         "index")]
            if item is not None:
                self.values[node] = item
            return

        if node.op == "call_module":
            entry = _MODULES.get(type(module))
        elif node.op == "call_method":
            entry = _METHODS.get(node.target)
        else:
            entry = _FUNCTIONS.get(node.target)
        if entry is None and module is not None:
            raise ExportError("unsupported module '%s' (module '%s')"
                              % (_target_name(node, module), node.target))
        if entry is None:
            raise ExportError("unsupported op '%s' %s" % (
                _target_name(node), _where(node.meta.get(_SCOPE))))
        spec, handler = entry
        bound = _bind(spec, node.args, node.kwargs,
                      _target_name(node, module))
        if not isinstance(out, torch.Tensor) and \
                not (isinstance(out, tuple) and handler in _TUPLE_HANDLERS):
            hint = "; use torch.amax for the maximum along a dimension" \
                if node.target in ("max", torch.max) else ""
            kind = "tuple" if isinstance(out, tuple) else type(out).__name__
            self.fail("it returns a %s, and only calls that return one tensor "
                      "are supported%s" % (kind, hint))
        value = handler(self, _Call(node, bound, module, out))

        # A tuple result (chunk's, nn.MultiheadAttention's) has None where
        # memopt does not compute an element.
        pairs = zip(out, value) if isinstance(out, tuple) else [(out, value)]
        for torch_value, exported in pairs:
            if exported is None:
                continue
            expected = (tuple(torch_value.shape),
                        _dtype_name(torch_value.dtype,
                                    "the result of '%s'" % node.name))
            if (exported.shape, exported.dtype) != expected:
                raise ExportError(
                    "internal error: %s exported as %s, but PyTorch computes "
                    "shape %s and dtype %s" % (node.format_node(),
                                               exported.type,
                                               list(expected[0]),
                                               expected[1]))
        self.values[node] = value


#===----------------------------------------------------------------------===#
# Roles
#===----------------------------------------------------------------------===#

# Ops through which a label may pass on its way to a loss's target.
_LABEL_METHODS = {"view", "reshape", "flatten", "contiguous", "squeeze",
                  "unsqueeze", "long", "int", "to", "type", "float"}
_LABEL_FUNCTIONS = {operator.getitem, torch.flatten, torch.reshape,
                    torch.squeeze, torch.unsqueeze}


def _parameter_groups(model, optimizer):
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


def _is_label(placeholder, modules):
    """Whether the argument reaches nothing but the target operand of
    losses (possibly reshaped or sliced on the way)."""
    reaches_loss = False
    pending = [placeholder]
    while pending:
        node = pending.pop()
        for user in node.users:
            if _is_query(user):
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


#===----------------------------------------------------------------------===#
# Handlers
#===----------------------------------------------------------------------===#

def _norm_dim(ex, dim, rank):
    dim = operator.index(dim)
    if not -max(rank, 1) <= dim < max(rank, 1):
        ex.fail("dimension %d is out of range for rank %d" % (dim, rank))
    return dim % rank if rank else 0


def _pair(value):
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return (int(value[0]),) * 2
        return tuple(int(v) for v in value)
    return (int(value),) * 2


def _float_input(ex, arg):
    x = ex.val(arg)
    if x.dtype not in FLOAT_TYPES:
        ex.fail("expected a float tensor, got element type %s" % x.dtype)
    return x


# -- Elementwise ----------------------------------------------------------

def _unary(kind):
    def handler(ex, call):
        return ex.emit.unary(kind, _float_input(ex, call.args["input"]))
    return handler


def _gelu(ex, call):
    approximate = call.args.get("approximate")
    if call.module is not None:
        approximate = getattr(call.module, "approximate", "none")
    if approximate not in ("none", "tanh"):
        ex.fail("unknown approximation '%s'" % approximate)
    return ex.emit.gelu(_float_input(ex, call.args["input"]), approximate)


def _scalar(ex, arg):
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


def _binary(kind):
    """``add``, ``sub``, ``mul``, ``div``, ``pow`` and ``maximum`` with
    PyTorch's broadcasting and Python-number operands."""
    def handler(ex, call):
        lhs, rhs = call.args["input"], call.args["other"]
        alpha = call.args.get("alpha", 1)
        if call.args.get("rounding_mode") is not None:
            ex.fail("rounding_mode is not supported")
        shape = ex.out_shape(call)
        dtype = _dtype_name(call.out.dtype, "the result")
        if dtype not in FLOAT_TYPES:
            ex.fail("arithmetic on %s tensors is not supported" % dtype)
        if alpha != 1:
            if _scalar(ex, rhs) is None:
                rhs_value = ex.emit.scalar(
                    "mul_scalar", ex.emit.broadcast_to(
                        ex.val(rhs, dtype), shape), alpha)
                return ex.emit.binary(kind, ex.emit.broadcast_to(
                    ex.val(lhs, dtype), shape), rhs_value)
        a, b = _scalar(ex, lhs), _scalar(ex, rhs)
        if b is not None:
            x = ex.val(lhs, dtype)
            b *= alpha
            if kind == "add":
                y = ex.emit.scalar("add_scalar", x, b)
            elif kind == "sub":
                y = ex.emit.scalar("add_scalar", x, -b)
            elif kind == "mul":
                y = ex.emit.scalar("mul_scalar", x, b)
            elif kind == "div":
                y = ex.emit.scalar("mul_scalar", x, 1.0 / b)
            elif kind == "pow":
                y = ex.emit.scalar("pow_scalar", x, b)
            else:
                ex.fail("a Python-number operand is not supported")
            return _reshape_to(ex, y, shape)
        if a is not None:
            x = ex.val(rhs, dtype)
            if kind == "add":
                y = ex.emit.scalar("add_scalar", x, a)
            elif kind == "mul":
                y = ex.emit.scalar("mul_scalar", x, a)
            elif kind == "sub":
                y = ex.emit.unary("neg", x)
                if a != 0:
                    y = ex.emit.scalar("add_scalar", y, a)
            elif kind == "div":
                y = ex.emit.scalar("pow_scalar", x, -1.0)
                if a != 1:
                    y = ex.emit.scalar("mul_scalar", y, a)
            elif kind == "pow" and a > 0:
                y = ex.emit.unary("exp", ex.emit.scalar(
                    "mul_scalar", x, math.log(a)))
            else:
                ex.fail("a Python-number left operand is not supported")
            return _reshape_to(ex, y, shape)
        if kind == "pow":
            ex.fail("a tensor exponent is not supported")
        x = ex.emit.broadcast_to(ex.val(lhs, dtype), shape)
        y = ex.emit.broadcast_to(ex.val(rhs, dtype), shape)
        return ex.emit.binary(kind, x, y)
    return handler


def _reshape_to(ex, value, shape):
    """A scalar op's result, given the shape PyTorch broadcast it to (a
    one-element tensor operand may add leading dimensions)."""
    if value.shape == tuple(shape):
        return value
    if int(np.prod(value.shape)) == int(np.prod(shape)):
        return ex.emit.reshape(value, shape)
    return ex.emit.broadcast_to(value, shape)


def _masked_fill(ex, call):
    x = _float_input(ex, call.args["input"])
    if tuple(call.out.shape) != x.shape:
        ex.fail("the mask may not broadcast the input")
    mask = ex.val(call.args["mask"])
    if mask.dtype != "i1":
        ex.fail("the mask must be a bool tensor, got %s" % mask.dtype)
    value = _scalar(ex, call.args["value"])
    if value is None:
        ex.fail("the fill value must be a number known at export time")
    return ex.emit.masked_fill(x, ex.emit.broadcast_to(mask, x.shape), value)


def _where_handler(ex, call):
    shape = ex.out_shape(call)
    dtype = _dtype_name(call.out.dtype, "the result")
    if dtype not in FLOAT_TYPES:
        ex.fail("only float results are supported")
    condition = ex.val(call.args["condition"])
    if condition.dtype != "i1":
        ex.fail("the condition must be a bool tensor")

    def operand(arg):
        number = _scalar(ex, arg)
        if number is not None and not isinstance(ex.concrete(arg),
                                                  torch.Tensor):
            return ex.emit.constant(np.full(shape, number, np.float32), dtype)
        return ex.emit.broadcast_to(ex.val(arg, dtype), shape)

    return ex.emit.where(ex.emit.broadcast_to(condition, shape),
                         operand(call.args["input"]),
                         operand(call.args["other"]))


# -- Shapes ---------------------------------------------------------------

def _reshape(ex, call):
    """view, reshape, flatten, squeeze, unsqueeze, expand-free shape
    changes: the result shape is PyTorch's."""
    return ex.emit.reshape(ex.val(call.args["input"]), ex.out_shape(call))


def _identity(ex, call):
    return ex.val(call.args["input"])


def _convert(ex, call):
    """Tensor.to / float / type_as ...: a no-op, or a float-to-float cast."""
    x = ex.val(call.args["input"])
    dtype = _dtype_name(call.out.dtype, "the result")
    if dtype == x.dtype:
        return x
    if x.dtype in FLOAT_TYPES and dtype in FLOAT_TYPES:
        return ex.emit.cast(x, dtype)
    ex.fail("conversion from %s to %s is not supported" % (x.dtype, dtype))


def _expand(ex, call):
    return ex.emit.broadcast_to(ex.val(call.args["input"]),
                                ex.out_shape(call))


def _transpose(ex, call):
    x = ex.val(call.args["input"])
    perm = list(range(x.rank))
    if "dim0" in call.args:
        d0 = _norm_dim(ex, ex.const(call.args["dim0"]), x.rank)
        d1 = _norm_dim(ex, ex.const(call.args["dim1"]), x.rank)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    elif x.rank == 2:  # .t(), .T
        perm = [1, 0]
    elif x.rank > 2:
        ex.fail(".t() / .T expects a tensor of rank 2 at most")
    return ex.emit.transpose(x, perm)


def _swap_last(ex, call):
    x = ex.val(call.args["input"])
    if x.rank < 2:
        ex.fail("expects a tensor of rank 2 or more")
    return ex.emit.transpose(x, list(range(x.rank - 2)) +
                             [x.rank - 1, x.rank - 2])


def _permute(ex, call):
    x = ex.val(call.args["input"])
    dims = ex.const(call.args["dims"])
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return ex.emit.transpose(x, [_norm_dim(ex, d, x.rank) for d in dims])


def _getattr(ex, call):
    name = ex.const(call.args["name"])
    if name == "T":  # reverses every dimension
        x = ex.val(call.args["input"])
        return ex.emit.transpose(x, list(reversed(range(x.rank))))
    if name == "mT":
        return _swap_last(ex, call)
    ex.fail("attribute '%s' is not supported" % name)


def _getitem(ex, call):
    """Static indexing: ints, slices with a positive step, None and
    Ellipsis, as one memopt.slice and a reshape."""
    x = ex.val(call.args["input"])
    index = ex.const(call.args["index"], "index")
    if isinstance(index, torch.Tensor):
        return _gather_rows(ex, call, x, index)
    if not isinstance(index, tuple):
        index = (index,)
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    items = []
    for item in index:
        if item is Ellipsis:
            items.extend([slice(None)] * (x.rank - consumed))
        else:
            items.append(item)
    starts, limits, strides = [], [], []
    dim = 0
    for item in items:
        if item is None:
            continue
        if dim >= x.rank:
            ex.fail("too many indices for a tensor of rank %d" % x.rank)
        size = x.shape[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            count = len(range(start, stop, step))
            if count == 0:
                ex.fail("the slice %s of dimension %d is empty" % (item, dim))
            starts.append(start)
            limits.append(start + (count - 1) * step + 1)
            strides.append(step)
        elif isinstance(item, int) and not isinstance(item, bool):
            i = item + size if item < 0 else item
            starts.append(i)
            limits.append(i + 1)
            strides.append(1)
        else:
            ex.fail("indexing with %s is not supported (only ints, slices, "
                    "None and ...)" % type(item).__name__)
        dim += 1
    starts += [0] * (x.rank - dim)
    limits += list(x.shape[dim:])
    strides += [1] * (x.rank - dim)
    y = x
    if tuple(starts) != (0,) * x.rank or tuple(limits) != x.shape or \
            tuple(strides) != (1,) * x.rank:
        y = ex.emit.slice(x, starts, limits, strides)
    return ex.emit.reshape(y, ex.out_shape(call))


def _gather_rows(ex, call, x, index):
    """x[index] with a constant integer tensor: rows of ``x`` (dimension 0)
    gathered by memopt.embedding, whose backward scatter-adds."""
    if index.dtype not in (torch.int64, torch.int32) or index.dim() == 0:
        ex.fail("indexing with a %s tensor of shape %s is not supported (only "
                "an integer tensor of rank 1 or more, which gathers rows)"
                % (index.dtype, list(index.shape)))
    if x.dtype not in FLOAT_TYPES or x.rank == 0:
        ex.fail("only rows of a floating-point tensor can be gathered")
    rows = x.shape[0]
    if index.numel() and not bool(((index >= -rows) & (index < rows)).all()):
        ex.fail("an index is out of range for a dimension of size %d" % rows)
    flat = (index.reshape(-1) % rows).to(torch.int64).numpy()
    table = ex.emit.reshape(x, (rows, int(np.prod(x.shape[1:]))))
    gathered = ex.emit.embedding(table, ex.emit.constant(flat, "i64"))
    return ex.emit.reshape(gathered, ex.out_shape(call))


def _cat(ex, call):
    dtype = _dtype_name(call.out.dtype, "the result")
    values = ex.vals(call.args["tensors"], dtype)
    dim = _norm_dim(ex, ex.const(call.args["dim"]), values[0].rank)
    if len(values) == 1:
        return values[0]
    return ex.emit.concat(values, dim)


def _stack(ex, call):
    """torch.stack: each operand with a unit dimension at ``dim``, then one
    concat."""
    dtype = _dtype_name(call.out.dtype, "the result")
    values = ex.vals(call.args["tensors"], dtype)
    rank = values[0].rank + 1
    dim = _norm_dim(ex, ex.const(call.args["dim"]), rank)
    values = [ex.emit.reshape(v, v.shape[:dim] + (1,) + v.shape[dim:])
              for v in values]
    if len(values) == 1:
        return values[0]
    return ex.emit.concat(values, dim)


def _split(ex, call):
    """chunk, split and unbind: a tuple of slices along ``dim``, their sizes
    those of PyTorch's pieces (an unbind's without the dimension)."""
    x = ex.val(call.args["input"])
    dim = _norm_dim(ex, ex.const(call.args["dim"]), x.rank)
    unbind = call.node.target in ("unbind", torch.unbind)
    pieces, start = [], 0
    for piece in call.out:
        size = 1 if unbind else piece.shape[dim]
        starts = [0] * x.rank
        limits = list(x.shape)
        starts[dim], limits[dim] = start, start + size
        y = x
        if size != x.shape[dim]:
            y = ex.emit.slice(x, starts, limits, [1] * x.rank)
        pieces.append(ex.emit.reshape(y, tuple(piece.shape)))
        start += size
    return tuple(pieces)


def _pad(ex, call):
    """F.pad in constant mode: negative amounts crop (a slice), positive ones
    pad with zeros (memopt.slice_grad, whose backward is the slice), and a
    value other than 0 is added where the padding is (a constant over the
    padded dimensions, broadcast over the others)."""
    x = _float_input(ex, call.args["input"])
    amounts = list(ex.const(call.args["pad"], "padding"))
    mode, value = ex.const(call.args["mode"]), ex.const(call.args["value"])
    if mode != "constant":
        ex.fail("mode='%s' is not supported (only 'constant')" % mode)
    if not isinstance(value, (int, float, type(None))) or (
            value is not None and not math.isfinite(value)):
        ex.fail("padding with value=%r is not supported (a finite number)"
                % (value,))
    if len(amounts) % 2 or len(amounts) // 2 > x.rank:
        ex.fail("the padding %s does not pair up with the dimensions of %s"
                % (amounts, x.type))
    low, high = [0] * x.rank, [0] * x.rank
    for i in range(len(amounts) // 2):
        low[x.rank - 1 - i] = amounts[2 * i]
        high[x.rank - 1 - i] = amounts[2 * i + 1]
    if any(lo < 0 or hi < 0 for lo, hi in zip(low, high)):
        starts = [max(-lo, 0) for lo in low]
        limits = [d - max(-hi, 0) for d, hi in zip(x.shape, high)]
        x = ex.emit.slice(x, starts, limits, [1] * x.rank)
        low, high = [max(lo, 0) for lo in low], [max(hi, 0) for hi in high]
    if not any(low) and not any(high):
        return x
    shape = [lo + d + hi for lo, d, hi in zip(low, x.shape, high)]
    y = ex.emit.pad(x, low, shape)
    if not value:
        return y
    padded = len(amounts) // 2
    fill = np.full(shape[-padded:], value, dtype=np.float32)
    fill[tuple(slice(lo, lo + d) for lo, d in
               zip(low[-padded:], x.shape[-padded:]))] = 0
    fill = ex.emit.constant(fill, "f32")
    if padded < x.rank:
        fill = ex.emit.broadcast(fill, list(range(x.rank - padded, x.rank)),
                                 shape)
    return ex.emit.binary("add", y, fill)


def _roll(ex, call):
    """torch.roll along given dimensions: two slices and a concat each."""
    x = ex.val(call.args["input"])
    shifts, dims = ex.const(call.args["shifts"]), ex.const(call.args["dims"])
    if dims is None or dims == ():
        ex.fail("torch.roll without dims (of the flattened tensor) is not "
                "supported")
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        ex.fail("shifts and dims differ in length")
    for shift, dim in zip(shifts, dims):
        dim = _norm_dim(ex, dim, x.rank)
        size = x.shape[dim]
        shift %= size
        if shift == 0:
            continue
        def part(start, stop):
            starts, limits = [0] * x.rank, list(x.shape)
            starts[dim], limits[dim] = start, stop
            return ex.emit.slice(x, starts, limits, [1] * x.rank)
        x = ex.emit.concat([part(size - shift, size), part(0, size - shift)],
                           dim)
    return x


def _einsum(ex, call):
    """torch.einsum of one or two operands without '...': sums over the
    indices only one operand has, then one (batched) memopt.matmul with the
    indices both have and the output keeps as its batch, those it drops as
    the contraction."""
    equation = ex.const(call.args["equation"], "equation").replace(" ", "")
    operands = call.args["operands"]
    if len(operands) == 1 and not isinstance(operands[0], torch.fx.Node):
        operands = operands[0]
    values = [_float_input(ex, v) for v in operands]
    inputs, arrow, output = equation.partition("->")
    inputs = inputs.split(",")
    if "." in equation or len(inputs) != len(values) or len(values) > 2:
        ex.fail("only einsum equations of one or two operands without '...'"
                " are supported")
    if not arrow:
        letters = "".join(inputs)
        output = "".join(sorted(c for c in set(letters)
                                if letters.count(c) == 1))
    sizes = {}
    for spec, v in zip(inputs, values):
        if len(spec) != v.rank or len(set(spec)) != len(spec):
            ex.fail("the operand subscripts '%s' do not name the %d "
                    "dimensions of %s once each" % (spec, v.rank, v.type))
        sizes.update(zip(spec, v.shape))

    def keep_only(spec, v, wanted):
        dims = [i for i, c in enumerate(spec) if c not in wanted]
        if not dims:
            return spec, v
        return ("".join(c for c in spec if c in wanted),
                ex.emit.reduce("reduce_sum", v, dims))

    def arrange(spec, v, order):
        return ex.emit.transpose(v, [spec.index(c) for c in order])

    if len(values) == 1:
        spec, v = keep_only(inputs[0], values[0], output)
        return arrange(spec, v, output)
    (sa, a), (sb, b) = (keep_only(inputs[i], values[i],
                                  output + inputs[1 - i]) for i in (0, 1))
    batch = [c for c in output if c in sa and c in sb]
    left = [c for c in sa if c in output and c not in sb]
    right = [c for c in sb if c in output and c not in sa]
    inner = [c for c in sa if c in sb and c not in output]
    batch_shape = tuple(sizes[c] for c in batch)

    def matrix(spec, v, rows, cols):
        v = arrange(spec, v, batch + rows + cols)
        return ex.emit.reshape(v, batch_shape + (
            int(np.prod([sizes[c] for c in rows])),
            int(np.prod([sizes[c] for c in cols]))))
    lhs = matrix(sa, a, left, inner)
    rhs = ex.emit.transpose(matrix(sb, b, right, inner),
                            list(range(len(batch))) +
                            [len(batch) + 1, len(batch)])
    y = _matmul_values(ex, lhs, rhs)
    y = ex.emit.reshape(y, batch_shape + tuple(sizes[c]
                                               for c in left + right))
    return arrange("".join(batch + left + right), y, output)


def _normalize(ex, call):
    """F.normalize with p=2: x / max(||x||, eps) along ``dim``, the norm
    computed as sqrt(max(sum x^2, eps^2)), the same function whose
    gradient is PyTorch's also at x = 0 (a zero row, which Swin V2's
    padding makes): the clamp stops the gradient before sqrt's infinite
    slope at 0."""
    x = _float_input(ex, call.args["input"])
    p, eps = ex.const(call.args["p"]), ex.const(call.args["eps"])
    if p != 2:
        ex.fail("p=%r is not supported (only the Euclidean norm)" % p)
    dim = _norm_dim(ex, ex.const(call.args["dim"]), x.rank)
    keep = x.shape[:dim] + (1,) + x.shape[dim + 1:]
    squares = ex.emit.reduce("reduce_sum", ex.emit.binary("mul", x, x), [dim])
    norm = ex.emit.unary("sqrt", ex.emit.clamp(squares, min=eps * eps))
    norm = ex.emit.reshape(norm, keep)
    return ex.emit.binary("div", x, ex.emit.broadcast_to(norm, x.shape))


def _inplace_fill(ex, node):
    """``t.zero_()`` / ``t.fill_(v)`` where ``t`` is a tensor the model
    computed (a clone of a parameter, say) or a static view ``t = base[i]``
    of one: every later use of ``base`` reads a masked_fill of its old
    value, the positions of the view taken from PyTorch itself."""
    target = node.args[0]
    value = 0.0 if node.target == "zero_" else _scalar(ex, node.args[1])
    if value is None:
        ex.fail("filling with a tensor is not supported")
    base, index = target, None
    if target.op == "call_function" and target.target is operator.getitem:
        base, index = target.args[0], ex.const(target.args[1], "index")
    later = [u for u in list(node.users) + list(target.users)
             if u is not node and u is not target]
    if base is not target and later:
        ex.fail("the view it fills is read afterwards: fill the tensor the "
                "view is taken from, or use masked_fill")
    old = ex.val(base)
    if old.dtype not in FLOAT_TYPES or base.op in ("get_attr",
                                                   "placeholder"):
        ex.fail("only a floating-point tensor computed by the model can be "
                "filled in place (clone a parameter first)")
    mask = torch.zeros(old.shape, dtype=torch.bool)
    if index is None:
        mask[...] = True
    else:
        mask[index] = True
    ex.values[base] = ex.emit.masked_fill(
        old, ex.emit.constant(mask.numpy(), "i1"), value)
    if base is target:
        ex.values[node] = ex.values[base]


# -- Reductions and normalisation -----------------------------------------

def _in_dtype(ex, call, x):
    """``x`` converted to the ``dtype`` argument of a reduction or a softmax
    (``F.softmax(s, -1, dtype=torch.float32)``): PyTorch converts the input
    before the op, so the result has that dtype."""
    dtype = ex.const(call.args.get("dtype"), "dtype")
    if dtype is None:
        return x
    name = _DTYPES.get(dtype)
    if name not in FLOAT_TYPES:
        ex.fail("dtype=%s is not supported (only floating-point dtypes)"
                % dtype)
    return x if name == x.dtype else ex.emit.cast(x, name)


def _reduce(kind):
    def handler(ex, call):
        x = _in_dtype(ex, call, _float_input(ex, call.args["input"]))
        dim = ex.const(call.args.get("dim"))
        if dim is None or (isinstance(dim, (tuple, list)) and not dim):
            dims = list(range(x.rank))
        elif isinstance(dim, (tuple, list)):
            dims = [_norm_dim(ex, d, x.rank) for d in dim]
        else:
            dims = [_norm_dim(ex, dim, x.rank)]
        dims = sorted(set(dims))
        return ex.emit.reshape(ex.emit.reduce(kind, x, dims),
                               ex.out_shape(call))
    return handler


def _max(ex, call):
    if call.args.get("dim") is not None:
        ex.fail("max along a dimension also returns indices: use "
                "torch.amax")
    x = _float_input(ex, call.args["input"])
    return ex.emit.reduce("reduce_max", x, list(range(x.rank)))


def _softmax(kind):
    def handler(ex, call):
        x = _float_input(ex, call.args["input"])
        if call.module is not None:
            dim = call.module.dim
        else:
            dim = ex.const(call.args.get("dim"))
            x = _in_dtype(ex, call, x)
        if dim is None:
            ex.fail("the dimension must be given explicitly")
        return ex.emit.softmax(kind, x, _norm_dim(ex, dim, x.rank))
    return handler


def _layer_norm(ex, call):
    x = _float_input(ex, call.args["input"])
    if call.module is not None:
        return _layer_norm_module(ex, call.module, x)
    shape = ex.const(call.args["normalized_shape"])
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    eps = ex.const(call.args["eps"])
    weight = ex.val(call.args["weight"], "f32") \
        if call.args["weight"] is not None else None
    bias = ex.val(call.args["bias"], "f32") \
        if call.args["bias"] is not None else None
    return _layer_norm_values(ex, x, shape, weight, bias, eps)


def _layer_norm_module(ex, m, x):
    """``nn.LayerNorm`` ``m`` applied to the Value ``x``."""
    weight = ex.param(m.weight, "weight") if m.weight is not None else None
    bias = ex.param(m.bias, "bias") if m.bias is not None else None
    return _layer_norm_values(ex, x, tuple(m.normalized_shape), weight, bias,
                              m.eps)


def _layer_norm_values(ex, x, shape, weight, bias, eps):
    if weight is None:
        weight = ex.emit.constant(np.ones(shape, np.float32), "f32")
    if bias is None:
        bias = ex.emit.constant(np.zeros(shape, np.float32), "f32")
    if x.shape[x.rank - len(shape):] != tuple(shape) or \
            weight.shape != tuple(shape) or bias.shape != tuple(shape):
        ex.fail("normalized_shape %s does not match the input %s"
                % (list(shape), x.type))
    return ex.emit.layer_norm(x, weight, bias, eps)[0]


def _batch_norm(ex, call):
    m = call.module
    path = call.node.target
    if not m.training:
        ex.fail("the module is in eval mode: export a model in training "
                "mode (model.train())")
    if m.momentum is None:
        ex.fail("momentum=None (a cumulative average) is not supported")
    x = _float_input(ex, call.args["input"])
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


# -- Matrix products, embeddings, convolution and pooling -----------------

def _matmul_values(ex, a, b):
    """torch.matmul of two Values: vectors become matrices, batch
    dimensions that memopt.matmul does not share are broadcast, and a
    transpose of the two trailing dimensions folds into the op's flags."""
    if a.rank == 0 or b.rank == 0:
        ex.fail("both operands must have rank 1 or more")
    out_shape = None
    if a.rank == 1 and b.rank == 1:
        out_shape = ()
    elif a.rank == 1:
        out_shape = b.shape[:-2] + b.shape[-1:]
    elif b.rank == 1:
        out_shape = a.shape[:-1]
    if a.rank == 1:
        a = ex.emit.reshape(a, (1,) + a.shape)
    if b.rank == 1:
        b = ex.emit.reshape(b, b.shape + (1,))
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    if batch_a != batch_b and batch_a and batch_b:
        batch = tuple(torch.broadcast_shapes(batch_a, batch_b))
        a = ex.emit.broadcast_to(a, batch + a.shape[-2:])
        b = ex.emit.broadcast_to(b, batch + b.shape[-2:])
    transpose_lhs = a.name in ex.emit.swapped
    transpose_rhs = b.name in ex.emit.swapped
    if transpose_lhs:
        a = ex.emit.swapped[a.name]
    if transpose_rhs:
        b = ex.emit.swapped[b.name]
    y = ex.emit.matmul(a, b, transpose_lhs, transpose_rhs)
    return y if out_shape is None else ex.emit.reshape(y, out_shape)


def _matmul(ex, call):
    a = _float_input(ex, call.args["input"])
    b = _float_input(ex, call.args.get("other", call.args.get("mat2")))
    if a.dtype != b.dtype:
        ex.fail("operands of different element types %s and %s"
                % (a.dtype, b.dtype))
    return _matmul_values(ex, a, b)


def _linear_values(ex, x, weight, bias):
    if weight.rank != 2:
        ex.fail("the weight must be a matrix, got %s" % weight.type)
    lead = x.shape[:-1]
    if x.rank == 1:
        x = ex.emit.reshape(x, (1,) + x.shape)
    if weight.name in ex.emit.swapped:  # F.linear(x, w.t()): x @ w
        y = ex.emit.matmul(x, ex.emit.swapped[weight.name])
    else:
        y = ex.emit.matmul(x, weight, transpose_rhs=True)
    y = ex.emit.reshape(y, lead + weight.shape[:1])
    if bias is not None:
        y = ex.emit.binary("add", y, ex.emit.broadcast_to(bias, y.shape))
    return y


def _linear_module(ex, m, x):
    """``nn.Linear`` ``m`` applied to the Value ``x``."""
    weight = ex.param(m.weight, "weight")
    bias = ex.param(m.bias, "bias") if m.bias is not None else None
    return _linear_values(ex, x, weight, bias)


def _linear(ex, call):
    x = _float_input(ex, call.args["input"])
    if call.module is not None:
        return _linear_module(ex, call.module, x)
    weight = _float_input(ex, call.args["weight"])
    bias = _float_input(ex, call.args["bias"]) \
        if call.args["bias"] is not None else None
    return _linear_values(ex, x, weight, bias)


def _embedding(ex, call):
    if call.module is not None:
        m = call.module
        weight = ex.param(m.weight, "weight")
        padding_idx = m.padding_idx
        options = {"max_norm": m.max_norm,
                   "scale_grad_by_freq": m.scale_grad_by_freq,
                   "sparse": m.sparse}
    else:
        weight = _float_input(ex, call.args["weight"])
        padding_idx = ex.const(call.args["padding_idx"])
        options = {k: ex.const(call.args[k]) for k in
                   ("max_norm", "scale_grad_by_freq", "sparse")}
    for name, value in options.items():
        if value is not None and value is not False:
            ex.fail("%s=%r is not supported" % (name, value))
    if padding_idx is not None:
        # As F.embedding and nn.Embedding: a negative index counts from the
        # end of the table.
        rows = weight.shape[0]
        padding_idx = int(padding_idx)
        if not -rows <= padding_idx < rows:
            ex.fail("padding_idx=%d is not a row of the %d-row table"
                    % (padding_idx, rows))
        padding_idx %= rows
    indices = ex.val(call.args["input"])
    if indices.dtype not in INDEX_TYPES:
        ex.fail("the indices must be int64 or int32, got %s" % indices.dtype)
    return ex.emit.embedding(weight, indices, padding_idx)


def _conv2d(ex, call):
    x = _float_input(ex, call.args["input"])
    if call.module is not None:
        m = call.module
        if m.padding_mode != "zeros":
            ex.fail("padding_mode='%s' is not supported" % m.padding_mode)
        weight = ex.param(m.weight, "weight")
        bias = ex.param(m.bias, "bias") if m.bias is not None else None
        stride, padding, dilation, groups = (m.stride, m.padding, m.dilation,
                                             m.groups)
    else:
        weight = _float_input(ex, call.args["weight"])
        bias = _float_input(ex, call.args["bias"]) \
            if call.args["bias"] is not None else None
        stride, padding, dilation, groups = (
            ex.const(call.args[k]) for k in ("stride", "padding", "dilation",
                                             "groups"))
    if x.rank != 4:
        ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
    dilation = _pair(dilation)
    if padding == "valid":
        padding = (0, 0)
    elif padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
        if any(t % 2 for t in total):
            ex.fail("padding='same' with an even kernel pads unevenly, which "
                    "is not supported")
        padding = tuple(t // 2 for t in total)
    y = ex.emit.conv2d(x, weight, ex.out_shape(call), _pair(stride),
                       _pair(padding), dilation, int(groups))
    if bias is not None:
        y = ex.emit.binary("add", y, ex.emit.broadcast(bias, [1], y.shape))
    return y


def _pool(kind):
    def handler(ex, call):
        x = _float_input(ex, call.args["input"])
        if call.module is not None:
            m = call.module
            options = {k: getattr(m, k) for k in (
                "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                "return_indices", "count_include_pad", "divisor_override")
                if hasattr(m, k)}
        else:
            options = {k: ex.const(v) for k, v in call.args.items()
                       if k != "input"}
        if x.rank != 4:
            ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
        kernel = _pair(options["kernel_size"])
        stride = options.get("stride")
        stride = kernel if stride is None or stride == [] or stride == () \
            else _pair(stride)
        padding = _pair(options.get("padding", 0))
        if options.get("return_indices"):
            ex.fail("return_indices=True is not supported")
        if _pair(options.get("dilation", 1)) != (1, 1):
            ex.fail("dilation is not supported")
        shape = ex.out_shape(call)
        divisor = options.get("divisor_override")
        include_pad = options.get("count_include_pad", True)
        if kind == "avg_pool2d" and (
                options.get("ceil_mode") or divisor is not None or
                (not include_pad and padding != (0, 0))):
            return _windowed_average(ex, x, shape, kernel, stride, padding,
                                     include_pad, divisor)
        if options.get("ceil_mode"):
            x = _ceil_mode_rows(ex, x, shape, kernel, stride, padding)
        return ex.emit.pool(kind, x, shape, kernel, stride, padding)
    return handler


def _windowed_average(ex, x, shape, kernel, stride, padding, include_pad,
                      divisor):
    """Average pooling with the windows and divisors of PyTorch's
    avg_pool2d in every mode (ceil mode, count_include_pad, divisor_override)
    as two averaging matmuls: window i of a dimension of n covers [start,
    end) with start = i * stride - padding and end = min(start + kernel,
    n + padding), clamped to [0, n); the divisor is the window's size before
    clamping (count_include_pad) or after, per dimension, and their product
    is the 2-D window's, or `divisor` for all."""
    def averaging(n, m, i):
        a = np.zeros((m, n), dtype=np.float32)
        for row in range(m):
            start = row * stride[i] - padding[i]
            end = min(start + kernel[i], n + padding[i])
            count = end - start
            start, end = max(start, 0), min(end, n)
            if start >= end:
                continue
            if divisor is not None:
                count = divisor if i == 0 else 1
            elif not include_pad:
                count = end - start
            a[row, start:end] = 1.0 / count
        return a
    return _separable_average(ex, x, averaging(x.shape[2], shape[2], 0),
                              averaging(x.shape[3], shape[3], 1))


def _separable_average(ex, x, rows, columns):
    """``rows`` x X x ``columns``^T over the last two dimensions of ``x``
    (N C H W), the two averaging matrices given as numpy arrays."""
    y = ex.emit.matmul(x, ex.emit.constant(columns, "f32"),
                       transpose_rhs=True)                      # N C H ow
    y = ex.emit.transpose(y, [0, 1, 3, 2])                      # N C ow H
    y = ex.emit.matmul(y, ex.emit.constant(rows, "f32"),
                       transpose_rhs=True)                      # N C ow oh
    return ex.emit.transpose(y, [0, 1, 3, 2])


def _ceil_mode_rows(ex, x, shape, kernel, stride, padding):
    """Max pooling in ceil mode as max pooling in floor mode of ``x`` with
    its last row (column) repeated to the length the last window needs.
    PyTorch starts every window inside the input or its left padding, so a
    window that reaches past the input holds its last row, and the copies
    change no maximum; they come after the row they copy, so the first
    maximum of every window, which the backward routes to, is the
    original's."""
    for dim in (2, 3):
        i = dim - 2
        extra = (shape[dim] - 1) * stride[i] + kernel[i] - \
            (x.shape[dim] + 2 * padding[i])
        if extra <= 0:
            continue
        starts = [0] * x.rank
        starts[dim] = x.shape[dim] - 1
        last = ex.emit.slice(x, starts, list(x.shape), [1] * x.rank)
        x = ex.emit.concat([x] + [last] * extra, dim)
    return x


def _adaptive_avg_pool(ex, call):
    x = _float_input(ex, call.args["input"])
    if x.rank != 4:
        ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
    shape = ex.out_shape(call)
    (h, w), (oh, ow) = x.shape[2:], shape[2:]
    if h % oh == 0 and w % ow == 0:
        kernel = (h // oh, w // ow)
        return ex.emit.pool("avg_pool2d", x, shape, kernel, kernel, (0, 0))
    # Windows of unequal size or overlapping: out = A_h x A_w^T, with
    # A[i, j] = 1 / |window i| for j in window i = [floor(i n / m),
    # ceil((i + 1) n / m)), as PyTorch's adaptive pooling.
    def averaging(n, m):
        a = np.zeros((m, n), dtype=np.float32)
        for i in range(m):
            lo, hi = (i * n) // m, -(-((i + 1) * n) // m)
            a[i, lo:hi] = 1.0 / (hi - lo)
        return a
    return _separable_average(ex, x, averaging(h, oh), averaging(w, ow))


# -- Attention and transformer layers -------------------------------------
#
# nn.MultiheadAttention, nn.TransformerEncoder(Layer),
# nn.TransformerDecoder(Layer) and nn.Transformer are decomposed into the ops
# above as PyTorch 1.13 computes them in training mode
# (F.multi_head_attention_forward, TransformerEncoderLayer.forward,
# TransformerDecoderLayer.forward), each op in the scope of the submodule
# that computes it. The attention itself is
# the chain that --memopt-fuse-kernels turns into memopt.attention
# (FuseKernels.cpp): matmul(q, k) transpose_rhs, mul_scalar 1/sqrt(head_dim),
# masked_fill, softmax over the last dimension, dropout, matmul(p, v), on
# [batch, heads, length, head_dim] operands, each value used once. PyTorch
# scales q before the product and adds a 0/-inf float mask; both are the
# same function.

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
    probs = _dropout_value(ex, probs, m.dropout, m.training)
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
        return [_linear_values(ex, x, w, _rows(ex, bias, i * e, (i + 1) * e))
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
        y = _linear_values(ex, x, _rows(ex, weight, first * e, last * e),
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
        out = _linear_module(ex, m.out_proj, out)
    if unbatched:
        with _scope(ex, path):
            out = ex.emit.reshape(out, (out.shape[0] * out.shape[1],
                                        out.shape[2]))
    return out


def _attention_weights_unused(node):
    """Whether nothing reads the attention weights, the second result of
    the nn.MultiheadAttention call ``node``."""
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem:
            return False
        index = user.args[1]
        if index in (0, -2):
            continue
        if index in (1, -1) and not user.users:
            continue
        return False
    return True


def _multihead_attention(ex, call):
    args = call.args
    if ex.const(args["need_weights"]) and \
            not _attention_weights_unused(call.node):
        ex.fail("need_weights=True and the attention weights (the second "
                "result) are used: memopt fuses attention and never forms "
                "the weights; pass need_weights=False, or leave them unused")
    query, key, value = (_float_input(ex, args[name])
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
        return _dropout_value(ex, x, m.p, m.training)


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
        x = _linear_module(ex, layer.linear1, x)
    with _scope(ex, path):
        x = _activation(ex, layer, path, x)
    x = _dropout_module(ex, layer.dropout, _child(path, "dropout"), x)
    with _scope(ex, _child(path, "linear2")):
        x = _linear_module(ex, layer.linear2, x)
    return _dropout_module(ex, getattr(layer, dropout), _child(path, dropout),
                           x)


def _residual_blocks(ex, layer, path, x, blocks):
    """The transformer layer ``layer`` at ``path`` on ``x``: each (norm,
    block) of ``blocks`` in turn is x + block(norm(x)) with norm_first,
    else norm(x + block(x)); the adds in the layer's scope."""
    def norm(name, h):
        with _scope(ex, _child(path, name)):
            return _layer_norm_module(ex, getattr(layer, name), h)

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
            x = _layer_norm_module(ex, m.norm, x)
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


def _transformer_encoder_layer(ex, call):
    return _encoder_layer_values(
        ex, call.module, call.node.target, _float_input(ex, call.args["src"]),
        _attention_mask(ex, call.args["src_mask"], "src_mask"),
        _attention_mask(ex, call.args["src_key_padding_mask"],
                        "src_key_padding_mask"))


def _transformer_encoder(ex, call):
    return _encoder_values(
        ex, call.module, call.node.target, _float_input(ex, call.args["src"]),
        _attention_mask(ex, call.args["mask"], "mask"),
        _attention_mask(ex, call.args["src_key_padding_mask"],
                        "src_key_padding_mask"))


def _transformer_decoder_layer(ex, call):
    return _decoder_layer_values(
        ex, call.module, call.node.target, _float_input(ex, call.args["tgt"]),
        _float_input(ex, call.args["memory"]), _decoder_masks(ex, call.args))


def _transformer_decoder(ex, call):
    return _decoder_values(
        ex, call.module, call.node.target, _float_input(ex, call.args["tgt"]),
        _float_input(ex, call.args["memory"]), _decoder_masks(ex, call.args))


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
        _float_input(ex, args["src"]),
        _attention_mask(ex, args["src_mask"], "src_mask"),
        _attention_mask(ex, args["src_key_padding_mask"],
                        "src_key_padding_mask"))
    return _decoder_values(ex, m.decoder, _child(path, "decoder"),
                           _float_input(ex, args["tgt"]), memory,
                           _decoder_masks(ex, args))


# -- Randomness and losses ------------------------------------------------

def _dropout(ex, call):
    x = _float_input(ex, call.args["input"])
    if call.module is not None:
        p, training = call.module.p, call.module.training
    else:
        p, training = ex.const(call.args["p"]), ex.const(call.args["training"])
    return _dropout_value(ex, x, p, training)


def _dropout_value(ex, x, p, training, shared=0):
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


def _dropout2d(ex, call):
    """nn.Dropout2d / F.dropout2d on [N, C, H, W]: one bit per channel."""
    x = _float_input(ex, call.args["input"])
    if call.module is not None:
        p, training = call.module.p, call.module.training
    else:
        p, training = ex.const(call.args["p"]), ex.const(call.args["training"])
    if x.rank != 4:
        ex.fail("expected a 4-D [N, C, H, W] input, got %s" % x.type)
    return _dropout_value(ex, x, p, training, shared=2)


def _stochastic_depth(ex, call):
    """torchvision.ops.stochastic_depth: row mode shares one bit per example
    (dimension 0), batch mode one for the whole batch."""
    x = _float_input(ex, call.args["input"])
    p, mode = ex.const(call.args["p"]), ex.const(call.args["mode"])
    training = ex.const(call.args["training"])
    if mode not in ("row", "batch"):
        ex.fail("unknown mode '%s'" % mode)
    shared = x.rank - 1 if mode == "row" else x.rank
    return _dropout_value(ex, x, p, training, shared)


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
    logits = _float_input(ex, call.args["input"])
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


def _mse_loss(ex, call):
    options = _loss_options(ex, call, ("size_average", "reduce",
                                       "reduction"))
    x = _float_input(ex, call.args["input"])
    target = _float_input(ex, call.args["target"])
    if target.dtype != x.dtype:
        ex.fail("the input and target have different element types")
    shape = tuple(torch.broadcast_shapes(x.shape, target.shape))
    return ex.emit.mse_loss(ex.emit.broadcast_to(x, shape),
                            ex.emit.broadcast_to(target, shape),
                            options["reduction"])


# -- Clamps ---------------------------------------------------------------

def _clamp_bound(ex, arg, name):
    """The bound ``arg`` of a clamp as a float, None if absent: a Python
    number (a tensor bound, even a constant one, is refused)."""
    if arg is None:
        return None
    value = None if ex.is_symbolic(arg) else ex.concrete(arg)
    if not isinstance(value, (bool, int, float)):
        ex.fail("the bound '%s' must be a Python number; tensor bounds are "
                "not supported" % name)
    if math.isnan(value):
        ex.fail("the bound '%s' is NaN" % name)
    return float(value)


def _emit_clamp(ex, call, low, high, inclusive):
    if low is not None and high is not None and low > high:
        ex.fail("min %r is above max %r" % (low, high))
    return ex.emit.clamp(_float_input(ex, call.args["input"]), low, high,
                         inclusive)


def _clamp(ex, call):
    """torch.clamp, torch.clip, clamp_min, clamp_max (function and method
    forms): the gradient passes at the bounds."""
    low = _clamp_bound(ex, call.args.get("min"), "min")
    high = _clamp_bound(ex, call.args.get("max"), "max")
    if low is None and high is None:
        ex.fail("at least one of 'min' and 'max' must be given")
    return _emit_clamp(ex, call, low, high, inclusive=True)


def _hardtanh(ex, call):
    """nn.Hardtanh, F.hardtanh, nn.ReLU6 and F.relu6: a clamp whose
    gradient stops at the bounds themselves (PyTorch's hardtanh_backward)."""
    if call.module is not None:
        low, high = call.module.min_val, call.module.max_val
    else:
        low = call.args.get("min_val", 0.0)
        high = call.args.get("max_val", 6.0)
    return _emit_clamp(ex, call, _clamp_bound(ex, low, "min_val"),
                       _clamp_bound(ex, high, "max_val"), inclusive=False)


#===----------------------------------------------------------------------===#
# Tables: fx targets -> (signature, handler)
#===----------------------------------------------------------------------===#

_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d)

_UNARY = ("relu", "silu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt",
          "neg")

_FUNCTIONS = {}
_METHODS = {}
_MODULES = {}

# Handlers whose result is a tuple of Values, one per element of PyTorch's.
_TUPLE_HANDLERS = {_split, _multihead_attention}


def _register(table, targets, signature, handler):
    params = _signature(signature)
    for target in targets:
        table[target] = (params, handler)


def _build_tables():
    fn, method, module = _FUNCTIONS, _METHODS, _MODULES

    for kind in _UNARY:
        h = _unary(kind)
        if hasattr(torch, kind):
            _register(fn, [getattr(torch, kind)], "input, **", h)
        _register(method, [kind], "input", h)
    _register(fn, [F.relu], "input, inplace=False", _unary("relu"))
    _register(fn, [F.silu], "input, inplace=False", _unary("silu"))
    _register(fn, [operator.neg], "input", _unary("neg"))
    _register(fn, [F.gelu], "input, approximate='none'", _gelu)
    _register(module, [nn.ReLU], "input", _unary("relu"))
    _register(module, [nn.SiLU], "input", _unary("silu"))
    _register(module, [nn.Tanh], "input", _unary("tanh"))
    _register(module, [nn.Sigmoid], "input", _unary("sigmoid"))
    _register(module, [nn.GELU], "input", _gelu)
    for kind, function, module_class in (
            ("hardswish", F.hardswish, nn.Hardswish),
            ("hardsigmoid", F.hardsigmoid, nn.Hardsigmoid),
            ("mish", F.mish, nn.Mish)):
        _register(fn, [function], "input, inplace=False", _unary(kind))
        _register(module, [module_class], "input", _unary(kind))
    _register(fn, [F.hardtanh],
              "input, min_val=-1.0, max_val=1.0, inplace=False", _hardtanh)
    _register(fn, [F.relu6], "input, inplace=False", _hardtanh)
    _register(module, [nn.Hardtanh, nn.ReLU6], "input", _hardtanh)
    for name, spec in (("clamp", "input, min=None, max=None"),
                       ("clip", "input, min=None, max=None"),
                       ("clamp_min", "input, min"),
                       ("clamp_max", "input, max")):
        _register(fn, [getattr(torch, name)], spec, _clamp)
        _register(method, [name], spec, _clamp)

    for kind, ops, torch_fn in (
            ("add", [operator.add, operator.iadd], torch.add),
            ("sub", [operator.sub, operator.isub], torch.sub),
            ("mul", [operator.mul, operator.imul], torch.mul),
            ("div", [operator.truediv, operator.itruediv], torch.div),
            ("pow", [operator.pow, operator.ipow], torch.pow),
            ("maximum", [], torch.maximum)):
        h = _binary(kind)
        _register(fn, ops, "input, other", h)
        spec = {"add": "input, other, alpha=1", "sub": "input, other, alpha=1",
                "div": "input, other, rounding_mode=None",
                "pow": "input, exponent"}.get(kind, "input, other")
        if kind == "pow":
            h = _binary_pow(h)
        _register(fn, [torch_fn], spec, h)
        _register(method, [torch_fn.__name__], spec, h)
    _register(fn, [torch.subtract], "input, other, alpha=1", _binary("sub"))
    _register(fn, [torch.multiply], "input, other", _binary("mul"))
    _register(fn, [torch.true_divide], "input, other", _binary("div"))
    _register(method, ["true_divide"], "input, other", _binary("div"))

    _register(fn, [torch.masked_fill], "input, mask, value", _masked_fill)
    _register(method, ["masked_fill"], "input, mask, value", _masked_fill)
    _register(fn, [torch.where], "condition, input, other", _where_handler)

    # Shapes.
    _register(method, ["view", "reshape", "flatten", "squeeze", "unsqueeze",
                       "view_as", "reshape_as"], "input, *rest, **", _reshape)
    _register(fn, [torch.reshape, torch.flatten, torch.squeeze,
                   torch.unsqueeze], "input, *rest, **", _reshape)
    _register(module, [nn.Flatten, nn.Unflatten], "input", _reshape)
    _register(method, ["contiguous"], "input, *rest, **", _identity)
    _register(module, [nn.Identity], "input", _identity)
    _register(method, ["to", "type", "type_as", "float", "cpu", "cuda"],
              "input, *rest, **", _convert)
    _register(method, ["expand", "expand_as"], "input, *rest, **", _expand)
    _register(fn, [torch.broadcast_to], "input, *rest", _expand)
    _register(method, ["transpose"], "input, dim0, dim1", _transpose)
    _register(fn, [torch.transpose], "input, dim0, dim1", _transpose)
    _register(method, ["t"], "input", _transpose)
    _register(fn, [torch.t], "input", _transpose)
    _register(method, ["permute"], "input, *dims", _permute)
    _register(fn, [torch.permute], "input, dims", _permute)
    _register(fn, [builtins.getattr], "input, name", _getattr)
    _register(fn, [operator.getitem], "input, index", _getitem)
    _register(method, ["swapaxes", "swapdims"], "input, dim0, dim1",
              _transpose)
    _register(fn, [torch.swapaxes, torch.swapdims], "input, dim0, dim1",
              _transpose)
    _register(method, ["clone"], "input, memory_format=None", _identity)
    _register(fn, [torch.clone], "input, memory_format=None", _identity)
    _register(fn, [F.pad], "input, pad, mode='constant', value=None", _pad)
    _register(fn, [torch.roll], "input, shifts, dims=None", _roll)
    _register(method, ["roll"], "input, shifts, dims=None", _roll)
    _register(fn, [torch.einsum], "equation, *operands", _einsum)
    _register(fn, [F.normalize], "input, p=2.0, dim=1, eps=1e-12, out=None",
              _normalize)
    _register(fn, [torch.cat, torch.concat], "tensors, dim=0", _cat)
    _register(fn, [torch.stack], "tensors, dim=0", _stack)
    _register(method, ["chunk"], "input, chunks, dim=0", _split)
    _register(fn, [torch.chunk], "input, chunks, dim=0", _split)
    _register(method, ["split"], "input, split_size=None, dim=0", _split)
    _register(fn, [torch.split],
              "input, split_size_or_sections=None, dim=0", _split)
    _register(method, ["unbind"], "input, dim=0", _split)
    _register(fn, [torch.unbind], "input, dim=0", _split)

    # Reductions and normalisation.
    for name, kind in (("sum", "reduce_sum"), ("mean", "reduce_mean")):
        _register(fn, [getattr(torch, name)],
                  "input, dim=None, keepdim=False, dtype=None", _reduce(kind))
        _register(method, [name],
                  "input, dim=None, keepdim=False, dtype=None", _reduce(kind))
    _register(fn, [torch.amax], "input, dim=(), keepdim=False",
              _reduce("reduce_max"))
    _register(method, ["amax"], "input, dim=(), keepdim=False",
              _reduce("reduce_max"))
    _register(fn, [torch.max], "input, dim=None, keepdim=False", _max)
    _register(method, ["max"], "input, dim=None, keepdim=False", _max)
    for name in ("softmax", "log_softmax"):
        h = _softmax(name)
        _register(fn, [getattr(F, name)],
                  "input, dim=None, _stacklevel=3, dtype=None", h)
        _register(fn, [getattr(torch, name)], "input, dim, dtype=None", h)
        _register(method, [name], "input, dim, dtype=None", h)
    _register(module, [nn.Softmax], "input", _softmax("softmax"))
    _register(module, [nn.LogSoftmax], "input", _softmax("log_softmax"))
    _register(fn, [F.layer_norm],
              "input, normalized_shape, weight=None, bias=None, eps=1e-05",
              _layer_norm)
    _register(module, [nn.LayerNorm], "input", _layer_norm)
    _register(module, list(_BATCH_NORMS), "input", _batch_norm)

    # Matrix products, embeddings, convolution and pooling.
    _register(fn, [operator.matmul, torch.matmul], "input, other", _matmul)
    _register(method, ["matmul", "__matmul__"], "input, other", _matmul)
    _register(fn, [torch.bmm, torch.mm], "input, mat2", _matmul)
    _register(method, ["bmm", "mm"], "input, mat2", _matmul)
    _register(fn, [F.linear], "input, weight, bias=None", _linear)
    _register(module, [nn.Linear], "input", _linear)
    _register(fn, [F.embedding],
              "input, weight, padding_idx=None, max_norm=None, "
              "norm_type=2.0, scale_grad_by_freq=False, sparse=False",
              _embedding)
    _register(module, [nn.Embedding], "input", _embedding)
    _register(fn, [F.conv2d, torch.conv2d],
              "input, weight, bias=None, stride=1, padding=0, dilation=1, "
              "groups=1", _conv2d)
    _register(module, [nn.Conv2d], "input", _conv2d)
    _register(fn, [F.max_pool2d, torch.max_pool2d],
              "input, kernel_size, stride=None, padding=0, dilation=1, "
              "ceil_mode=False, return_indices=False", _pool("max_pool2d"))
    _register(module, [nn.MaxPool2d], "input", _pool("max_pool2d"))
    _register(fn, [F.avg_pool2d],
              "input, kernel_size, stride=None, padding=0, ceil_mode=False, "
              "count_include_pad=True, divisor_override=None",
              _pool("avg_pool2d"))
    _register(module, [nn.AvgPool2d], "input", _pool("avg_pool2d"))
    _register(fn, [F.adaptive_avg_pool2d], "input, output_size",
              _adaptive_avg_pool)
    _register(module, [nn.AdaptiveAvgPool2d], "input", _adaptive_avg_pool)

    # Attention and transformer layers.
    _register(module, [nn.MultiheadAttention],
              "query, key, value, key_padding_mask=None, need_weights=True, "
              "attn_mask=None, average_attn_weights=True",
              _multihead_attention)
    _register(module, [nn.TransformerEncoderLayer],
              "src, src_mask=None, src_key_padding_mask=None",
              _transformer_encoder_layer)
    _register(module, [nn.TransformerEncoder],
              "src, mask=None, src_key_padding_mask=None",
              _transformer_encoder)
    decoder_masks = ("tgt_mask=None, memory_mask=None, "
                     "tgt_key_padding_mask=None, "
                     "memory_key_padding_mask=None")
    _register(module, [nn.TransformerDecoderLayer],
              "tgt, memory, " + decoder_masks, _transformer_decoder_layer)
    _register(module, [nn.TransformerDecoder],
              "tgt, memory, " + decoder_masks, _transformer_decoder)
    _register(module, [nn.Transformer],
              "src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, "
              "src_key_padding_mask=None, tgt_key_padding_mask=None, "
              "memory_key_padding_mask=None", _transformer)

    # Randomness and losses.
    _register(fn, [F.dropout], "input, p=0.5, training=True, inplace=False",
              _dropout)
    _register(module, [nn.Dropout], "input", _dropout)
    _register(fn, [F.dropout2d], "input, p=0.5, training=True, inplace=False",
              _dropout2d)
    _register(module, [nn.Dropout2d], "input", _dropout2d)
    try:
        from torchvision.ops import stochastic_depth
        _register(fn, [stochastic_depth], "input, p, mode, training=True",
                  _stochastic_depth)
    except ImportError:  # torchvision is optional
        pass
    _register(fn, [F.cross_entropy],
              "input, target, weight=None, size_average=None, "
              "ignore_index=-100, reduce=None, reduction='mean', "
              "label_smoothing=0.0", _cross_entropy)
    _register(module, [nn.CrossEntropyLoss], "input, target", _cross_entropy)
    _register(fn, [F.mse_loss],
              "input, target, size_average=None, reduce=None, "
              "reduction='mean'", _mse_loss)
    _register(module, [nn.MSELoss], "input, target", _mse_loss)


def _binary_pow(handler):
    """torch.pow names its second operand ``exponent``."""
    def adapted(ex, call):
        call.args["other"] = call.args.pop("exponent")
        return handler(ex, call)
    return adapted


_build_tables()
