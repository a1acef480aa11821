"""The handlers that translate PyTorch calls into memopt ops, one module
per op family. A handler takes the walker (``ex``: its Values, constants
and Emitter) and the bound call (registry.Call) and returns the Value of
PyTorch's result. Each module registers its handlers as it is imported
(registry.handles / registry.register); importing this package imports
them all.
"""

from . import (activations, arithmetic, attention, comparison, convolution,
               dropout, indexing, linalg, losses, normalization, norms,
               reductions, shapes, sorting, spatial)

__all__ = ["activations", "arithmetic", "attention", "comparison",
           "convolution", "dropout", "indexing", "linalg", "losses",
           "normalization", "norms", "reductions", "shapes", "sorting",
           "spatial"]
