"""Export a PyTorch model's forward pass and loss to the memopt dialect.

The model is traced with ``torch.fx.symbolic_trace`` semantics, by a
tracer that also records, for every node, the path of the module whose
``forward()`` created it, and runs every op on meta tensors as it records
it, so that shapes are numbers while tracing (``n, c, h, w = x.shape``,
``a, b = x.chunk(2)``; see tracing.py). The graph is then walked once,
node by node, and each node is both

* evaluated on concrete example values, which gives every shape statically
  (and the value of everything that depends only on constants, buffers and
  shapes: sizes, masks, position indices), and
* if it depends on an input or a parameter, translated by the handler
  registered for its target, which prints memopt ops through
  :class:`memopt.exporter.emit.Emitter`.

Each handler's result is checked against the shape and dtype PyTorch
computed, so a translation bug surfaces as an error at export time rather
than as wrong IR.

The modules, in the order a node meets them:

* ``tracing`` -- the torch.fx tracer whose proxies carry meta examples;
* ``walker`` -- the walk over the graph: arguments, constant folding,
  dispatch to the handlers and the check of their results; ``roles`` --
  which arguments are labels, and the optimizer's parameter groups;
* ``registry`` -- the handler tables (fx target -> signature and handler)
  and the binding of a call's arguments to a handler's signature;
* ``ops`` -- the handlers, one module per op family, each registering its
  own handlers next to their code;
* ``emit`` -- the printer of memopt ops in their custom assembly;
* ``errors``, ``dtypes`` -- ExportError and how it names ops, and the
  element types memopt takes from PyTorch.
"""

import os

import torch

from .. import safetensors
from .errors import ExportError
from .walker import Exporter

__all__ = ["export", "ExportError"]


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
    exporter = Exporter(model, tuple(example_args), optimizer)
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
