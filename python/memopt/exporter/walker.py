"""The walk over the traced graph.

Every node is evaluated by PyTorch on the example arguments, which gives
all shapes; nodes that depend on no input or parameter stay Python values
and are folded. Each other node goes to the handler registered for its
target (registry.py), whose result is checked against PyTorch's shape and
dtype.
"""

import operator

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from . import ops  # noqa: F401 (importing it registers the handlers)
from .dtypes import DTYPES, NUMPY, dtype_name
from .emit import FLOAT_TYPES, INDEX_TYPES, Emitter, format_float
from .errors import ExportError, location, target_name
from .ops.normalization import BATCH_NORMS, INSTANCE_NORMS, STATEFUL_NORMS
from .ops.common import mask_as_float, tuple_element
from .ops.shapes import inplace_fill
from .registry import FUNCTIONS, METHODS, MODULES, TUPLE_HANDLERS, Call, bind
from .roles import is_label, parameter_groups
from .tracing import RANDOM_FACTORIES, SCOPE, Tracer, is_query, to_meta

# Calls that draw random numbers. Folding one into a constant would freeze
# one draw, so a call on values known at export time is refused.
_RANDOM = {getattr(torch, name) for name in RANDOM_FACTORIES} | {
    F.dropout, F.dropout2d}
_RANDOM_METHODS = {"uniform_", "normal_", "bernoulli_", "random_",
                   "exponential_", "bernoulli"}


class Exporter:
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
        self.optimizer, self.hparams = parameter_groups(model, optimizer)
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
            target_name(node, module), location(node.meta.get(SCOPE, "")),
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
            if value.dtype in ("i1",) + INDEX_TYPES and dtype in FLOAT_TYPES:
                return self._as_float(arg, value, dtype)
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
                dtype = DTYPES.get(array.dtype, str(array.dtype))
            if dtype not in NUMPY:
                self.fail("constants of element type %s are not supported"
                          % dtype)
            array = array.numpy().astype(NUMPY[dtype])
        elif isinstance(concrete, (bool, int, float)):
            if dtype is None:
                dtype = "f32" if isinstance(concrete, float) else "i64"
            array = np.asarray(concrete, dtype=NUMPY[dtype])
        else:
            self.fail("expected a tensor, got %s" % type(concrete).__name__)
        value = self.emit.constant(array, dtype)
        if key is not None:
            self.constants[key] = value
        return value

    def _as_float(self, node, value, dtype):
        """A computed mask or index tensor as float ``dtype``, as PyTorch
        promotes it in arithmetic (``mask * x``, ``loss / mask.sum()``,
        ``mask.float()``), once per value and dtype: a mask is 1 and 0, an
        index is rounded to nearest."""
        key = (node, "as", dtype)
        if key not in self.constants:
            self.constants[key] = (
                mask_as_float(self, value, dtype) if value.dtype == "i1"
                else self.emit.cast(value, dtype))
        return self.constants[key]

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
        tracer = Tracer(self.example_args)
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
                                target_name(node, module),
                                location(node.meta.get(SCOPE, "")),
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
                self.emit.scope = node.meta.get(SCOPE, "")
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
            dtype = dtype_name(example.dtype,
                               "forward() argument '%s'" % node.target)
            if dtype in ("f16", "bf16"):
                raise ExportError(
                    "forward() argument '%s' is %s: only float32 inputs are "
                    "supported for now (memopt chooses low precision itself,"
                    " see --mixed-precision)" % (node.target, example.dtype))
            role = "label" if is_label(node, self.modules) else "input"
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
            if not (owner in called and isinstance(module, STATEFUL_NORMS)
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
        if isinstance(module, BATCH_NORMS) and module.training:
            # Do not update the model's running statistics.
            return F.batch_norm(args[0], None, None, module.weight,
                                module.bias, True, 0.0, module.eps)
        if isinstance(module, INSTANCE_NORMS) and module.training:
            return F.instance_norm(args[0], None, None, module.weight,
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
            return inplace_fill(self, node)
        if symbolic and ((node.op == "call_method" and
                          node.target.endswith("_") and
                          not node.target.startswith("__")) or
                         node.target is operator.setitem):
            self.fail("in-place ops are not supported: use the out-of-place "
                      "form")
        if not symbolic:
            if node.target in _RANDOM or (node.op == "call_method" and
                                          node.target in _RANDOM_METHODS):
                self.fail("random numbers outside nn.Dropout/F.dropout are "
                          "not supported")
            if module is not None and (
                    isinstance(module, (nn.Dropout, nn.Dropout2d) +
                               STATEFUL_NORMS) or
                    any(True for _ in module.parameters())):
                symbolic = True

        args, kwargs = self.concrete(node.args), self.concrete(node.kwargs)
        if self.meta and symbolic:
            # A value computed from parameters on meta is a meta tensor;
            # the real buffers it meets (rotary cos/sin caches, masks) go
            # to meta too, for this evaluation only: their values are
            # still the constants the IR holds.
            args, kwargs = torch.fx.node.map_aggregate((args, kwargs),
                                                       to_meta)
        try:
            out = self._evaluate(node, args, kwargs)
        except ExportError:
            raise
        except Exception as e:
            self.fail("PyTorch could not evaluate it on the example "
                      "arguments: %s: %s" % (type(e).__name__, e))
        self.env[node] = out
        if not symbolic or is_query(node):
            return
        element = tuple_element(node)
        if element is not None and \
                isinstance(self.values.get(node.args[0]), tuple):
            # An element (or a slice) of a tuple result: x.chunk(2)[0],
            # nn.MultiheadAttention's output and weights, x.sort().values.
            # An element memopt does not compute is None, and its handler
            # made sure that nothing reads it.
            item = self.values[node.args[0]][self.const(element, "index")]
            if item is not None:
                self.values[node] = item
            return

        if node.op == "call_module":
            entry = MODULES.get(type(module))
        elif node.op == "call_method":
            entry = METHODS.get(node.target)
        else:
            entry = FUNCTIONS.get(node.target)
        if entry is None and module is not None:
            raise ExportError("unsupported module '%s' (module '%s')"
                              % (target_name(node, module), node.target))
        if entry is None:
            raise ExportError("unsupported op '%s' %s" % (
                target_name(node), location(node.meta.get(SCOPE))))
        spec, handler = entry
        bound = bind(spec, node.args, node.kwargs, target_name(node, module))
        if not isinstance(out, torch.Tensor) and \
                not (isinstance(out, tuple) and handler in TUPLE_HANDLERS):
            kind = "tuple" if isinstance(out, tuple) else type(out).__name__
            self.fail("it returns a %s, and only calls that return one tensor "
                      "are supported" % kind)
        value = handler(self, Call(node, bound, module, out))

        # A tuple result (chunk's, nn.MultiheadAttention's) has None where
        # memopt does not compute an element.
        pairs = zip(out, value) if isinstance(out, tuple) else [(out, value)]
        for torch_value, exported in pairs:
            if exported is None:
                continue
            expected = (tuple(torch_value.shape),
                        dtype_name(torch_value.dtype,
                                   "the result of '%s'" % node.name))
            if (exported.shape, exported.dtype) != expected:
                raise ExportError(
                    "internal error: %s exported as %s, but PyTorch computes "
                    "shape %s and dtype %s" % (node.format_node(),
                                               exported.type,
                                               list(expected[0]),
                                               expected[1]))
        self.values[node] = value
