"""memopt's Python side: export PyTorch models to the memopt dialect.

    import memopt
    memopt.export(model, (x, y), "model.mlir")  # + model.safetensors

See docs/Exporter.md for what is supported.
"""

from . import safetensors
from .exporter import ExportError, export

__all__ = ["export", "ExportError", "safetensors"]
