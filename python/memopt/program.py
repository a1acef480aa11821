"""Compile a PyTorch model with memopt and train it from Python.

    program = memopt.compile(model, (x, y), micro_batches=2,
                             mixed_precision="bf16")
    for x, y in loader:                  # the caller's own data and loop
        loss = program.step(x, y)
    program.evaluate(x_val, y_val)
    model.load_state_dict(program.state_dict(), strict=False)
    program.save("run.safetensors")      # OUT/train's checkpoint format

:func:`compile` exports the model (:func:`memopt.export`), runs
``memopt-compile`` with the options given, and loads the compiled steps into
this process through the C API of ``OUT/libmemopt_program.so``
(runtime/driver/Program.h); :func:`load` opens a compiled program again
from a checkpoint. docs/Python.md has the lifetime rules.
"""

import ctypes
import json
import math
import os
import shutil
import subprocess
import tempfile
import weakref

import numpy as np

from . import safetensors
from .exporter import export

__all__ = ["compile", "load", "Program", "CompileError", "ProgramError"]

_LIBRARY = "libmemopt_program.so"
# The metadata key of a checkpoint that names its compiled program.
_PROGRAM_KEY = "memopt.program"

# Model description dtypes -> numpy dtypes (bf16 has none: its tensors are
# read as uint16 bits and widened to f32 by state_dict).
_NUMPY = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"),
          "bf16": np.dtype("<u2"), "i64": np.dtype("<i8"),
          "i32": np.dtype("<i4"), "i1": np.dtype("?")}
_TORCH_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
                "i64": "int64", "i32": "int32", "i1": "bool"}
# The roles state_dict holds: the model's own tensors.
_MODEL_ROLES = ("param", "frozen", "state")


def _is_model_tensor(argument):
    """Whether state_dict holds the argument: a parameter, a buffer, or a
    frozen weight but one stored in NF4 (its bytes are not the model's
    tensor; the checkpoint keeps the tensor it was quantized from)."""
    return argument["role"] in _MODEL_ROLES and "nf4_of" not in argument


class CompileError(RuntimeError):
    """memopt-compile refused the model or its options; the message is its
    diagnostic."""


class ProgramError(RuntimeError):
    """The compiled program failed (a runtime error, an unreadable or
    mismatched checkpoint)."""


class _StepResult(ctypes.Structure):
    _fields_ = [("step", ctypes.c_uint64), ("loss", ctypes.c_float),
                ("skipped", ctypes.c_int32), ("loss_scale", ctypes.c_float),
                ("lr", ctypes.c_double), ("grad_norm", ctypes.c_float),
                ("seconds", ctypes.c_double)]


def _bind(lib):
    c = ctypes
    signatures = {
        "memopt_program_model_json": (c.c_char_p, []),
        "memopt_program_open": (c.c_void_p, [c.c_char_p, c.c_char_p,
                                             c.c_size_t]),
        "memopt_program_close": (None, [c.c_void_p]),
        "memopt_program_error": (c.c_char_p, [c.c_void_p]),
        "memopt_program_step": (c.c_int, [c.c_void_p, c.c_void_p, c.c_double,
                                          c.POINTER(_StepResult)]),
        "memopt_program_evaluate": (c.c_int, [c.c_void_p, c.c_void_p,
                                              c.POINTER(c.c_float)]),
        "memopt_program_read": (c.c_int, [c.c_void_p, c.c_char_p, c.c_void_p,
                                          c.c_uint64]),
        "memopt_program_write": (c.c_int, [c.c_void_p, c.c_char_p,
                                           c.c_void_p, c.c_uint64]),
        "memopt_program_save": (c.c_int, [c.c_void_p, c.c_char_p,
                                          c.c_char_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def _find_compiler():
    """memopt-compile: $MEMOPT_COMPILE, PATH, or this source tree's build."""
    explicit = os.environ.get("MEMOPT_COMPILE")
    if explicit:
        return explicit
    found = shutil.which("memopt-compile")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.join(here, "..", "..", "build", "bin",
                             "memopt-compile")
    if os.access(candidate, os.X_OK):
        return os.path.normpath(candidate)
    raise CompileError("cannot find memopt-compile: put it on PATH or set "
                       "MEMOPT_COMPILE")


def _flag(name, value):
    """``micro_batches=2`` -> ``--micro-batches=2``; True -> ``--flag``."""
    flag = "--" + name.replace("_", "-")
    if value is True:
        return [flag]
    if value is False or value is None:
        return []
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return ["%s=%s" % (flag, value)]


def compile(model, example_args, out_dir=None, optimizer=None, **options):
    """Export ``model`` (whose ``forward(*example_args)`` returns the loss),
    compile its training step with ``memopt-compile`` and load it.

    ``options`` are memopt-compile's flags with ``_`` for ``-``
    (``mixed_precision="bf16"``, ``micro_batches=2``, ``remat="auto"``,
    ``clip_grad_norm=1.0``, ``lr=3e-4``; True for a flag without a value).
    ``optimizer`` is the ``torch.optim`` optimizer whose parameter groups
    the step follows, as for :func:`memopt.export`. ``out_dir`` keeps the
    compiled program (model.mlir, the report, OUT/train, the library); by
    default a temporary directory removed with the program.

    Raises :class:`memopt.ExportError` for what memopt cannot express and
    :class:`CompileError` for a refused compilation.
    """
    if isinstance(example_args, (list, tuple)):
        example_args = tuple(example_args)
    else:
        example_args = (example_args,)
    temporary = out_dir is None
    if temporary:
        out_dir = tempfile.mkdtemp(prefix="memopt-")
    try:
        os.makedirs(out_dir, exist_ok=True)
        if options.get("data_parallel", 1) not in (1, "1"):
            raise CompileError("memopt.compile runs one process; compile "
                               "--data-parallel programs with memopt-compile "
                               "and run them with mpirun OUT/train")
        mlir = os.path.join(out_dir, "model.mlir")
        export(model, example_args, mlir, optimizer=optimizer)
        command = [_find_compiler(), mlir, "-o", out_dir, "--library"]
        for name, value in options.items():
            command += _flag(name, value)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise CompileError(done.stderr.strip() or done.stdout.strip())
        program = Program(out_dir, os.path.join(out_dir, "model.safetensors"))
    except BaseException:
        if temporary:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    if temporary:
        program._temporary = weakref.finalize(program, shutil.rmtree, out_dir,
                                              True)
    program.compile_output = done.stdout
    return program


def load(path, out_dir=None):
    """The program that wrote the checkpoint ``path`` (:meth:`Program.save`
    or ``OUT/train --save``), resumed from it: its weights, optimizer state
    and step count. ``out_dir`` is the compiled program's directory; by
    default the one the checkpoint names (Program.save records it)."""
    if out_dir is None:
        out_dir = safetensors.read_metadata(path).get(_PROGRAM_KEY)
        if out_dir is None:
            raise ValueError("'%s' does not name its compiled program: pass "
                             "out_dir (the memopt-compile -o directory)"
                             % path)
    return Program(out_dir, path)


def _check_bound(value, argument):
    """An index or class label outside [0, bound) (but the ignore_index) is
    the caller's error, named here rather than by the kernel that reads
    it."""
    array = value.numpy() if hasattr(value, "numpy") else value
    bound = argument["bound"]
    bad = (array < 0) | (array >= bound)
    if "ignore_index" in argument:
        bad &= array != argument["ignore_index"]
    if bad.any():
        at = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError("'%s' holds %d at element %d, outside [0, %d)%s"
                         % (argument["name"], array.ravel()[at], at, bound,
                            " and not the ignore_index %d"
                            % argument["ignore_index"]
                            if "ignore_index" in argument else ""))


class Program:
    """A compiled training step loaded into this process.

    The program owns its weights, state and optimizer state (one arena)
    until it is closed or collected; they are read with :meth:`state_dict`
    and written with :meth:`load_state_dict`. Batches stay the caller's:
    :meth:`step` and :meth:`evaluate` read them during the call only (in
    place on the host runtime), never write them, and keep no reference.
    One thread at a time may use a program.
    """

    def __init__(self, out_dir, params):
        self.out_dir = os.path.abspath(out_dir)
        path = os.path.join(self.out_dir, _LIBRARY)
        if not os.path.exists(path):
            raise ProgramError("'%s' has no %s: compile with memopt-compile "
                               "--library" % (self.out_dir, _LIBRARY))
        self._lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        _bind(self._lib)
        self._description = json.loads(
            self._lib.memopt_program_model_json().decode("utf-8"))
        # (A "param_copy" shares its master's name: the device's copy of a
        # master that --offload=optimizer keeps in host memory.)
        self._arguments = {a["name"]: a
                           for a in self._description["arguments"]
                           if a["role"] != "param_copy"}
        self._batch = [a for a in self._description["arguments"]
                       if a["role"] in ("input", "label")]
        error = ctypes.create_string_buffer(1024)
        self._handle = self._lib.memopt_program_open(
            os.fsencode(params), error, len(error))
        if not self._handle:
            raise ProgramError(error.value.decode("utf-8", "replace"))
        self._finalizer = weakref.finalize(
            self, self._lib.memopt_program_close, self._handle)
        self._temporary = None
        self.compile_output = ""
        self.last_step = None

    # -- running ---------------------------------------------------------

    def step(self, *batch, lr=None):
        """Run one training step on ``batch`` (the model's ``forward``
        arguments, as contiguous CPU torch tensors or numpy arrays of the
        compiled dtypes and shapes) and return its loss. ``lr`` replaces the
        compiled learning rate (and its schedule) for this step. The step's
        other figures are in :attr:`last_step`."""
        pointers, keep = self._pointers(batch)
        result = _StepResult()
        rate = math.nan if lr is None else float(lr)
        self._check(self._lib.memopt_program_step(
            self._live(), pointers, rate, ctypes.byref(result)))
        del keep
        self.last_step = {"step": result.step, "loss": result.loss,
                          "skipped": bool(result.skipped),
                          "loss_scale": result.loss_scale, "lr": result.lr,
                          "grad_norm": result.grad_norm,
                          "seconds": result.seconds}
        return float(result.loss)

    def evaluate(self, *batch):
        """The loss of the evaluation step (dropout off, batch norm on its
        running statistics) on ``batch``; nothing is updated."""
        pointers, keep = self._pointers(batch)
        loss = ctypes.c_float()
        self._check(self._lib.memopt_program_evaluate(
            self._live(), pointers, ctypes.byref(loss)))
        del keep
        return float(loss.value)

    # -- state ----------------------------------------------------------

    def state_dict(self):
        """The model's parameters and buffers (batch-norm statistics) as
        torch tensors under the model's own names, copies that
        ``model.load_state_dict(..., strict=False)`` accepts (buffers the
        model turned into constants are not held)."""
        import torch
        result = {}
        for argument in self._description["arguments"]:
            if not _is_model_tensor(argument):
                continue
            array = self._read(argument["name"])
            tensor = torch.from_numpy(array)
            if argument["dtype"] == "bf16":
                tensor = tensor.view(torch.int16).view(torch.bfloat16)
            result[argument["name"]] = tensor
        return result

    def load_state_dict(self, state_dict):
        """Write the model tensors of ``state_dict`` (every parameter,
        frozen weight and buffer the program holds; extra entries are
        refused) into the program. The optimizer state is kept."""
        import torch
        expected = {a["name"] for a in self._description["arguments"]
                    if _is_model_tensor(a)}
        unknown = sorted(set(state_dict) - expected)
        missing = sorted(expected - set(state_dict))
        if unknown or missing:
            raise ValueError("state_dict does not match the program: "
                             "missing %s, unexpected %s"
                             % (missing or "none", unknown or "none"))
        for name in expected:
            argument = self._arguments[name]
            value = state_dict[name]
            if isinstance(value, torch.Tensor):
                value = value.detach().cpu()
                if argument["dtype"] == "bf16":
                    value = value.to(torch.bfloat16).view(torch.int16)
                else:
                    value = value.to(getattr(torch,
                                             _TORCH_NAMES[argument["dtype"]]))
                value = value.numpy()
            array = np.ascontiguousarray(value, dtype=_NUMPY[argument["dtype"]])
            if list(array.shape) != list(argument["shape"]):
                raise ValueError("'%s' has shape %s, the program's is %s"
                                 % (name, list(array.shape),
                                    argument["shape"]))
            self._check(self._lib.memopt_program_write(
                self._live(), name.encode(), array.ctypes.data,
                array.nbytes))

    def save(self, path):
        """Write a checkpoint in OUT/train's format (weights, state,
        optimizer state, step count), atomically; OUT/train --params and
        :func:`load` resume from it."""
        metadata = "" if self._temporary else \
            "%s=%s\n" % (_PROGRAM_KEY, self.out_dir)
        self._check(self._lib.memopt_program_save(
            self._live(), os.fsencode(path), metadata.encode()))

    @property
    def memory_report(self):
        """The memory account memopt-compile printed, as a dict
        (docs/MemoryReport.md)."""
        with open(os.path.join(self.out_dir, "memory_report.json")) as f:
            return json.load(f)

    @property
    def batch_names(self):
        """The names of the batch tensors, in step's argument order."""
        return [a["name"] for a in self._batch]

    def close(self):
        """Free the program's memory now (else when it is collected)."""
        self._finalizer()
        if self._temporary:
            self._temporary()

    # -- helpers --------------------------------------------------------

    def _live(self):
        if not self._finalizer.alive:
            raise ProgramError("the program is closed")
        return self._handle

    def _check(self, code):
        if code != 0:
            message = self._lib.memopt_program_error(self._handle)
            raise ProgramError(message.decode("utf-8", "replace"))

    def _read(self, name):
        argument = self._arguments[name]
        array = np.empty(argument["shape"], dtype=_NUMPY[argument["dtype"]])
        self._check(self._lib.memopt_program_read(
            self._live(), name.encode(), array.ctypes.data, array.nbytes))
        return array

    def _pointers(self, batch):
        """One pointer per batch tensor, checked; and the objects that must
        outlive the call."""
        if len(batch) != len(self._batch):
            raise ValueError("the step takes %d batch tensors (%s), got %d"
                             % (len(self._batch), ", ".join(self.batch_names),
                                len(batch)))
        pointers = (ctypes.c_void_p * len(batch))()
        keep = []
        for i, (value, argument) in enumerate(zip(batch, self._batch)):
            name = argument["name"]
            expected = _TORCH_NAMES[argument["dtype"]]
            if hasattr(value, "data_ptr"):  # a torch tensor
                if value.device.type != "cpu":
                    raise ValueError("'%s' is on %s; pass a CPU tensor"
                                     % (name, value.device))
                dtype = str(value.dtype).replace("torch.", "")
                contiguous = value.is_contiguous()
                shape = list(value.shape)
                address = value.data_ptr()
            elif isinstance(value, np.ndarray):
                if not value.dtype.isnative:
                    raise ValueError("'%s' is not in the machine's byte "
                                     "order" % name)
                dtype = value.dtype.name
                contiguous = value.flags["C_CONTIGUOUS"]
                shape = list(value.shape)
                address = value.ctypes.data
            else:
                raise ValueError("'%s' must be a torch tensor or a numpy "
                                 "array, not %s" % (name, type(value).__name__))
            if dtype != expected:
                raise ValueError("'%s' has dtype %s, the step was compiled "
                                 "for %s" % (name, dtype, expected))
            if shape != list(argument["shape"]):
                raise ValueError("'%s' has shape %s, the step was compiled "
                                 "for %s" % (name, shape, argument["shape"]))
            if not contiguous:
                raise ValueError("'%s' is not contiguous: pass "
                                 "x.contiguous()" % name)
            if "bound" in argument:
                _check_bound(value, argument)
            pointers[i] = address
            keep.append(value)
        return pointers, keep
