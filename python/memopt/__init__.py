"""memopt's Python side: export PyTorch models to the memopt dialect, and
compile and train them in this process.

    import memopt
    memopt.export(model, (x, y), "model.mlir")  # + model.safetensors
    program = memopt.compile(model, (x, y), precision="bf16")
    loss = program.step(x, y)

See docs/Exporter.md for what the exporter supports and docs/Python.md for
memopt.compile.
"""

from . import safetensors
from .exporter import ExportError, export
from .program import CompileError, Program, ProgramError, compile, load

__all__ = ["export", "ExportError", "compile", "load", "Program",
           "CompileError", "ProgramError", "safetensors"]
