"""The handler tables, and the binding of a call's arguments.

Each op family in ``ops/`` registers its handlers as it is imported:
``@handles(signature, functions=..., methods=..., modules=...)`` on a
handler, or ``register(signature, handler, ...)`` for one a factory makes
(``_unary("relu")``). The walker looks a node up by its target: the
function for ``call_function``, the method's name for ``call_method``, the
module's class for ``call_module``. A signature is written as Python's
(``"input, dim=None, *rest, **"``), and the call's arguments are bound to
it before the handler runs.
"""

import ast

from .errors import ExportError

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


class Call:
    """One node to translate: its bound arguments (fx Nodes or literals, by
    parameter name), the called module if any, and PyTorch's result."""

    def __init__(self, node, args, module, out):
        self.node = node
        self.args = args
        self.module = module
        self.out = out


def bind(params, args, kwargs, what):
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


# fx target -> (signature, handler), by the kind of node that calls it.
FUNCTIONS = {}
METHODS = {}
MODULES = {}

# Handlers whose result is a tuple of Values, one per element of PyTorch's
# (None for an element memopt does not compute).
TUPLE_HANDLERS = set()


def register(signature, handler, functions=(), methods=(), modules=()):
    """Make ``handler`` translate calls of each of ``functions``, of the
    tensor methods named ``methods`` and of the module classes ``modules``,
    their arguments bound to ``signature``."""
    params = _signature(signature)
    for table, targets in ((FUNCTIONS, functions), (METHODS, methods),
                           (MODULES, modules)):
        for target in targets:
            table[target] = (params, handler)
    return handler


def handles(signature, functions=(), methods=(), modules=()):
    """The decorator form of :func:`register`."""
    return lambda handler: register(signature, handler, functions, methods,
                                    modules)


def returns_tuple(handler):
    """Mark ``handler`` as one whose result is a tuple (TUPLE_HANDLERS)."""
    TUPLE_HANDLERS.add(handler)
    return handler
