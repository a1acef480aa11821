"""Tracing: torch.fx's symbolic tracer, with an example value on every proxy.

The example is the result of the node's op on meta tensors of the example
arguments' shapes, computed as the node is recorded. Shapes are static in
memopt (one graph per batch size), so a shape read while tracing is the
shape, not an approximation, and the trace can answer what symbolic tracing
cannot: `n, c, h, w = x.shape`, `x.size(1) // 2`, `len(x)`, iterating over a
tensor or a tuple result (`a, b = x.chunk(2)`). What depends on a tensor's
data (`if x.sum() > 0`, `.item()`) stays symbolic, so a branch on it still
fails rather than baking in one side. Meta tensors cost no memory or
arithmetic (a LLaMA-7B exported from the meta device traces in seconds) and
draw no random numbers.
"""

import builtins
import contextlib
import copy
import dis
import inspect
import itertools
import operator

import torch
import torch.fx
import torch.nn as nn

# The key of a node's meta that holds the path of the module whose
# forward() created it: the op's memopt.scope.
SCOPE = "memopt_scope"

# A proxy whose example could not be computed (an op without a meta kernel,
# an error that the export reports later with the real arguments): it
# behaves as torch.fx's plain proxy.
_UNKNOWN = object()

# What a tensor's shape and dtype alone answer: attributes, and methods
# whose result is read from the example.
_STATIC_ATTRS = {"shape", "ndim", "dtype"}
_STATIC_METHODS = {"size", "dim", "ndimension", "numel", "nelement",
                   "is_floating_point", "is_complex", "element_size"}

# Calls that create a tensor from nothing but draw random numbers: folding
# them into a constant would freeze one draw. The tracer records a call of
# the torch functions as a node even when no argument is traced
# (`torch.randn(x.shape)`), so that the export refuses it.
RANDOM_FACTORIES = ("rand", "randn", "randint", "rand_like", "randn_like",
                    "randint_like", "bernoulli", "normal", "multinomial",
                    "randperm")

# Calls whose result is a shape, a rank, a size, a dtype or a device, or a
# tensor made from nothing but those (`x.new_zeros(h, w)`, a mask the model
# then fills in): known at export time even when their operand is not.
_QUERY_METHODS = {"size", "dim", "ndimension", "numel", "nelement",
                  "get_device", "new_zeros", "new_ones", "new_full"}
_QUERY_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda"}
_QUERY_FUNCTIONS = {builtins.len, torch.zeros_like, torch.ones_like,
                    torch.full_like}


def is_query(node):
    if node.op == "call_method":
        return node.target in _QUERY_METHODS
    if node.op == "call_function":
        if node.target is builtins.getattr:
            return node.args[1] in _QUERY_ATTRS
        return node.target in _QUERY_FUNCTIONS
    return False


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


def to_meta(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to("meta")
    return value


class Tracer(torch.fx.Tracer):
    """``symbolic_trace``'s tracer, plus: every proxy carries an example
    (above); buffers become ``get_attr`` nodes (so ``self.mask[:, :, :T,
    :T]`` traces); and every node records in ``meta`` the path of the
    module whose ``forward()`` created it."""

    proxy_buffer_attributes = True

    def __init__(self, example_args):
        super().__init__()
        self._scopes = [""]
        self._placeholders = [to_meta(a) for a in example_args]
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
        node.meta[SCOPE] = self._scopes[-1]
        return node

    def trace(self, root, concrete_args=None):
        # torch's random functions, called by the model, become nodes (the
        # export refuses them) rather than a draw frozen into a constant.
        originals = {name: getattr(torch, name) for name in RANDOM_FACTORIES}
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
                    return to_meta(getattr(root, proxy.attr))
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
            return to_meta(obj) if isinstance(obj, torch.Tensor) \
                else _UNKNOWN
        if kind not in ("call_function", "call_method", "call_module"):
            return _UNKNOWN

        unknown = []

        def example(a):
            if isinstance(a, torch.fx.Proxy):
                a = self.example_of(a)
                if a is _UNKNOWN:
                    unknown.append(node)
            return to_meta(a)

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
                meta = to_meta(t)
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
