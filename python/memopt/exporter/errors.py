"""ExportError, and how its messages name an op and where it is."""

import builtins


class ExportError(Exception):
    """The model cannot be exported: the message names the op or function
    and the module path it comes from."""

    # Its public home, which tracebacks print and pickle looks up.
    __module__ = "memopt.exporter"


def target_name(node, module=None):
    """How an error message names what a node calls: ``torch.logcumsumexp``,
    ``Tensor.logcumsumexp``, ``torch.nn.functional.unfold``, ``nn.LSTM``."""
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


def location(scope):
    return "in module '%s'" % scope if scope else "at the top level"
