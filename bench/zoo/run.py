"""The torchvision model zoo through memopt, stage by stage.

    /usr/bin/python3 bench/zoo/run.py [--models a,b,c] [--precision bf16]
                                      [--work DIR] [--build BUILD]

For the smallest member of every torchvision 0.14 classification family
(and a language model from nn.TransformerEncoder), with 10 classes, batch 2
and a small input the model accepts, wrapped so that forward(x, y) returns
F.cross_entropy(model(x), y), it runs the stages

  export    memopt.export (python/memopt/exporter/)
  compile   memopt-compile for the host with AdamW (lr 1e-3, weight decay
            0.01, as the parity tests)
  train     OUT/train for 3 steps (--stats: the step time)
  parity    the parity oracle (memopt.testing, docs/Reliability.md) against
            PyTorch: every loss, every final parameter and the first step's
            gradients (for a model with convolutions, on both of the host's
            convolution paths: oneDNN, and im2col + GEMM with
            MEMOPT_HOST_ONEDNN=0); the first step's gradients only for a
            chaotic training (the oracle's docstring): a net with batch
            norm, on batches of 2, or one whose float64 loss grows over the
            steps (it diverges at this learning rate and batch). Where
            memopt is outside the oracle, PyTorch's own step on its native
            CPU kernels (oneDNN off) is added to the oracle's runs and the
            comparison repeated: on batches of 2 some gradients are
            ill-conditioned enough that two correct f32 kernels differ by
            more than the oracle's sample orders (which all run oneDNN) do.
            A model that passes only so says so.

and stops a model at its first failing stage, recording the stage and the
first line of the error, then goes on with the next model. It prints one
line per model as it finishes and, at the end, a Markdown table with the
stage reached, memopt's and PyTorch's step time (minimum over steps 2-3,
host, same threads), memopt's planned peak (arguments + arena,
memory_report.json), the activations saved for the backward (PyTorch 1.13
eager, measured with bench/saved/run.py's saved-tensor hooks; memopt's
`by_scope`) and the first failure.

Dropout and stochastic depth probabilities are set to 0: memopt's dropout
masks are PyTorch's only in distribution, so the oracle could not compare
a step that draws them. The weights are torchvision's random initialisation
(seed 0).

--precision bf16 compiles with --mixed-precision=bf16 and compares with
PyTorch under torch.autocast (bf16), the losses and gradients only, as
test/Integration/mixed-precision-vs-pytorch.py does.
"""

import argparse
import copy
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "Inputs"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
import torchvision.models as tvm  # noqa: E402

import memopt  # noqa: E402
from memopt.testing import Oracle, autocast, run_pytorch  # noqa: E402
import memopt_run  # noqa: E402

STEPS = 3
BATCH = 2
CLASSES = 10
STAGES = ("export", "compile", "train", "parity")


def _saved_bytes_function():
    """bench/saved/run.py's measurement of PyTorch's saved activations."""
    spec = importlib.util.spec_from_file_location(
        "bench_saved", os.path.join(ROOT, "bench", "saved", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pytorch_saved_bytes


#===----------------------------------------------------------------------===#
# The models
#===----------------------------------------------------------------------===#

class Classifier(nn.Module):
    """forward(x, y) = F.cross_entropy(model(x), y). Of a tuple result
    (GoogLeNet's and Inception v3's in training mode: the logits and the
    auxiliary logits) only the main logits are used."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        logits = self.model(x)
        if isinstance(logits, tuple):
            logits = logits[0]
        return F.cross_entropy(logits, y)


class TransformerLM(nn.Module):
    """A causal language model from PyTorch's own layers."""

    VOCAB, SEQ, WIDTH, HEADS, FF, LAYERS = 512, 32, 64, 4, 128, 2

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(self.VOCAB, self.WIDTH)
        layer = nn.TransformerEncoderLayer(self.WIDTH, self.HEADS, self.FF,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(
            layer, self.LAYERS, norm=nn.LayerNorm(self.WIDTH),
            enable_nested_tensor=False)
        self.head = nn.Linear(self.WIDTH, self.VOCAB)
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(self.SEQ))

    def forward(self, idx, targets):
        x = self.encoder(self.embed(idx), mask=self.causal)
        return F.cross_entropy(self.head(x).view(-1, self.VOCAB),
                               targets.view(-1))


def _images(size):
    def batch(generator):
        return {"x": torch.randn(BATCH, 3, size, size, generator=generator),
                "y": torch.randint(0, CLASSES, (BATCH,),
                                   generator=generator)}
    return batch


def _tokens(generator):
    shape = (BATCH, TransformerLM.SEQ)
    return {"idx": torch.randint(0, TransformerLM.VOCAB, shape,
                                 generator=generator),
            "targets": torch.randint(0, TransformerLM.VOCAB, shape,
                                     generator=generator)}


def _torchvision(name, **kwargs):
    return lambda: Classifier(getattr(tvm, name)(num_classes=CLASSES,
                                                 **kwargs))


def _vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return Classifier(VisionTransformer(
        image_size=32, patch_size=16, num_layers=2, num_heads=2,
        hidden_dim=64, mlp_dim=128, num_classes=CLASSES))


def _maxvit():
    # maxvit_t's partitions (7x7 in every block) need 224x224 images.
    from torchvision.models.maxvit import MaxVit
    return Classifier(MaxVit(
        input_size=(64, 64), stem_channels=16, partition_size=4,
        block_channels=[32, 64], block_layers=[1, 1], head_dim=16,
        stochastic_depth_prob=0.2, num_classes=CLASSES))


# name -> (what it is, constructor, batch, input description)
MODELS = {
    "alexnet": ("alexnet", _torchvision("alexnet"), _images(64), "64x64"),
    "convnext_tiny": ("convnext_tiny", _torchvision("convnext_tiny"),
                      _images(64), "64x64"),
    "densenet121": ("densenet121", _torchvision("densenet121"), _images(64),
                    "64x64"),
    "efficientnet_b0": ("efficientnet_b0", _torchvision("efficientnet_b0"),
                        _images(64), "64x64"),
    "efficientnet_v2_s": ("efficientnet_v2_s",
                          _torchvision("efficientnet_v2_s"), _images(64),
                          "64x64"),
    "googlenet": ("aux logits computed, unused",
                  _torchvision("googlenet", init_weights=True), _images(64),
                  "64x64"),
    # The auxiliary head rejects images below 299x299.
    "inception_v3": ("aux_logits=False",
                     _torchvision("inception_v3", aux_logits=False,
                                  init_weights=True), _images(75), "75x75"),
    "maxvit_t": ("MaxVit, 2 blocks of 1 layer, 16-64 channels, partition 4",
                 _maxvit, _images(64), "64x64"),
    "mnasnet0_5": ("mnasnet0_5", _torchvision("mnasnet0_5"), _images(64),
                   "64x64"),
    "mobilenet_v2": ("mobilenet_v2", _torchvision("mobilenet_v2"),
                     _images(64), "64x64"),
    "mobilenet_v3_small": ("mobilenet_v3_small",
                           _torchvision("mobilenet_v3_small"), _images(64),
                           "64x64"),
    "regnet_y_400mf": ("regnet_y_400mf", _torchvision("regnet_y_400mf"),
                       _images(64), "64x64"),
    "resnet18": ("resnet18", _torchvision("resnet18"), _images(64), "64x64"),
    "resnext50_32x4d": ("resnext50_32x4d", _torchvision("resnext50_32x4d"),
                        _images(64), "64x64"),
    "shufflenet_v2_x0_5": ("shufflenet_v2_x0_5",
                           _torchvision("shufflenet_v2_x0_5"), _images(64),
                           "64x64"),
    "squeezenet1_1": ("squeezenet1_1", _torchvision("squeezenet1_1"),
                      _images(64), "64x64"),
    "swin_t": ("swin_t", _torchvision("swin_t"), _images(64), "64x64"),
    "swin_v2_t": ("swin_v2_t", _torchvision("swin_v2_t"), _images(64),
                  "64x64"),
    "vgg11": ("vgg11", _torchvision("vgg11"), _images(64), "64x64"),
    "vit_b_16": ("VisionTransformer, 2 layers, 2 heads, width 64, patch 16",
                 _vit, _images(32), "32x32"),
    "wide_resnet50_2": ("wide_resnet50_2", _torchvision("wide_resnet50_2"),
                        _images(64), "64x64"),
    "transformer_lm": ("nn.TransformerEncoder, 2 layers, width 64, "
                       "vocabulary 512", TransformerLM, _tokens,
                       "32 tokens"),
}


def _without_dropout(model):
    """Dropout and stochastic depth probabilities set to 0 (see the file
    comment)."""
    for m in model.modules():
        if isinstance(m, (nn.Dropout, torchvision.ops.StochasticDepth)):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0
    return model


def _has_conv(model):
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def _has_batch_norm(model):
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm)
               for m in model.modules())


#===----------------------------------------------------------------------===#
# Stages
#===----------------------------------------------------------------------===#

class StageError(Exception):
    """A stage failed; the message is its error's first line."""


def _first_line(text):
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else "(no message)"


def _run(command, timeout):
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StageError("timed out after %d s" % timeout)
    if result.returncode != 0:
        raise StageError("exit code %d: %s" % (
            result.returncode, _first_line(result.stderr + result.stdout)))
    return result.stdout


def pytorch_step_ms(model, batch, low):
    """PyTorch's training step (forward, backward, AdamW), the minimum over
    steps 2 to STEPS, in ms."""
    model = copy.deepcopy(model)
    optimizer = memopt_run.adamw(model.parameters())
    times = []
    for _ in range(STEPS):
        start = time.perf_counter()
        optimizer.zero_grad()
        with autocast(low):
            loss = model(**batch)
        loss.float().backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times[1:])


def measure_pytorch(row, model, batch, low, saved_bytes):
    row["params"] = sum(p.numel() for p in model.parameters())
    row["torch_ms"] = pytorch_step_ms(model, batch, low)
    with autocast(low):
        row["torch_saved"] = saved_bytes(copy.deepcopy(model), batch)


def stage_export(row, model, batch, workdir):
    mlir = os.path.join(workdir, "model.mlir")
    try:
        memopt.export(copy.deepcopy(model), tuple(batch.values()), mlir)
    except memopt.ExportError as e:
        raise StageError(_first_line(e))
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    return mlir


def stage_compile(row, mlir, workdir, flags, timeout):
    out = os.path.join(workdir, "out")
    _run(["memopt-compile", mlir, "-o", out, "--report=json",
          *memopt_run.ADAMW_FLAGS, *flags], timeout)
    with open(os.path.join(out, "memory_report.json")) as f:
        report = json.load(f)
    row["peak"] = sum(report["pools"].values())
    row["memopt_saved"] = sum(report["by_scope"].values())


def stage_train(row, workdir, timeout):
    out = os.path.join(workdir, "out")
    stdout = _run([os.path.join(out, "train"),
                   "--params", os.path.join(workdir, "model.safetensors"),
                   "--batch", os.path.join(workdir, "batch.safetensors"),
                   "--steps", str(STEPS), "--stats"], timeout)
    losses = memopt_run.losses(stdout)
    if len(losses) != STEPS or not all(math.isfinite(v) for v in losses):
        raise StageError("losses %s" % losses)
    stats = dict(item.split("=", 1) for item in
                 stdout.split("stats ", 1)[1].split())
    row["memopt_ms"] = float(stats["step_ms_min"])


def stage_parity(row, model, batch, mlir, workdir, flags, precision):
    oracle = Oracle(model, batch, STEPS, memopt_run.adamw,
                    precision=precision)
    sgd = os.path.join(workdir, "out-sgd")
    gradients = [memopt_run.first_step_gradients(mlir, workdir, sgd, *flags)]
    if _has_conv(model):
        # The host's other convolution path, on the same compiled step.
        gradients.append(memopt_run.sgd_step_gradients(
            sgd, workdir, dict(os.environ, MEMOPT_HOST_ONEDNN="0")))
    trajectory = None
    exact = oracle.exact.losses
    if _has_batch_norm(model) or exact[-1] > exact[0]:
        # Chaotic trajectories amplify rounding without bound: batch norm on
        # 2 samples, and a training whose float64 loss grows (it diverges
        # at this learning rate and batch). The first step's gradients.
        row["parity_kind"] = "gradients"
    else:
        row["parity_kind"] = "trajectory + gradients"
        final = os.path.join(workdir, "final.safetensors")
        stdout = memopt_run.train(os.path.join(workdir, "out"), workdir,
                                  STEPS, save=final)
        # Under bf16 the losses only, as the parity tests compare them.
        trajectory = (memopt_run.losses(stdout),
                      memopt.safetensors.load(final)
                      if precision == "f32" else None)
    if len(gradients) > 1:
        row["parity_kind"] += " on both convolution paths"

    def failures():
        found = [failure for read in gradients
                 for failure in oracle.check_gradients(*read).failures]
        if trajectory:
            found += oracle.check(*trajectory).failures
        return found

    found = failures()
    if found and precision == "f32":
        # On batches of 2 some quantities are ill-conditioned enough that
        # two correct f32 kernels differ by more than the oracle's sample
        # orders do (all of which run oneDNN's kernels): PyTorch's step on
        # its native kernels counts as one more of its own runs.
        with torch.backends.mkldnn.flags(enabled=False):
            oracle.add_run(run_pytorch(model, batch, STEPS,
                                       memopt_run.adamw))
        strict, found = len(found), failures()
        if not found:
            row["parity_note"] = (
                "%d tensor(s) outside the oracle's sample orders, none "
                "outside PyTorch's native-kernel run" % strict)
    if found:
        raise StageError("%d mismatch(es); first: %s"
                         % (len(found), found[0]))


def run_model(name, args, saved_bytes):
    what, build, make_batch, input_text = MODELS[name]
    row = {"name": name, "what": what, "input": input_text, "reached": None,
           "failed": None, "error": ""}
    workdir = os.path.join(args.work, name)
    os.makedirs(workdir, exist_ok=True)
    precision = args.precision or "f32"
    flags = ["--mixed-precision=bf16"] if args.precision == "bf16" else []

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = _without_dropout(build()).train()
            batch = make_batch(torch.Generator().manual_seed(1))
            measure_pytorch(row, model, batch, args.precision, saved_bytes)
        except Exception as e:
            row["failed"], row["error"] = "pytorch", _first_line(
                "%s: %s" % (type(e).__name__, e))
            return row

    passed = []
    try:
        mlir = stage_export(row, model, batch, workdir)
        passed.append("export")
        stage_compile(row, mlir, workdir, flags, args.timeout)
        passed.append("compile")
        stage_train(row, workdir, args.timeout)
        passed.append("train")
        stage_parity(row, model, batch, mlir, workdir, flags, precision)
        passed.append("parity")
    except StageError as e:
        row["failed"], row["error"] = STAGES[len(passed)], str(e)
    except Exception as e:  # a bug of this script or of a Python stage
        row["failed"], row["error"] = STAGES[len(passed)], _first_line(
            "%s: %s" % (type(e).__name__, e))
        traceback.print_exc()
    row["reached"] = passed[-1] if passed else None
    return row


#===----------------------------------------------------------------------===#
# Output
#===----------------------------------------------------------------------===#

def _mib(n):
    if n is None:
        return "-"
    return "%.*f MiB" % (1 if n >= 2 ** 20 else 2, n / 2.0 ** 20)


def _ms(n):
    if n is None:
        return "-"
    return "%.*f" % (0 if n >= 10 else 1, n)


def _line(row):
    if row["failed"]:
        status = "%s FAILED: %s" % (row["failed"], row["error"])
    else:
        status = "ok (export, compile, train, parity: %s)" % row[
            "parity_kind"]
        if row.get("parity_note"):
            status += "; " + row["parity_note"]
    extra = ""
    if row.get("memopt_ms") is not None:
        extra = "  [memopt %s ms, PyTorch %s ms, peak %s]" % (
            _ms(row["memopt_ms"]), _ms(row.get("torch_ms")),
            _mib(row.get("peak")))
    return "%-20s %s%s" % (row["name"], status, extra)


def _table(rows):
    lines = ["| model | input | params | reaches | memopt ms | PyTorch ms "
             "| planned peak | saved: PyTorch | saved: memopt "
             "| first failure (or note) |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        reached = "all (parity: %s)" % row["parity_kind"] \
            if not row["failed"] else (row["reached"] or "-")
        failure = "%s: %s" % (row["failed"], row["error"]) \
            if row["failed"] else row.get("parity_note", "")
        model = row["name"] if row["what"] == row["name"] else \
            "%s: %s" % (row["name"], row["what"])
        params = "%.1fM" % (row["params"] / 1e6) if "params" in row else "-"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, row["input"], params, reached,
            _ms(row.get("memopt_ms")), _ms(row.get("torch_ms")),
            _mib(row.get("peak")), _mib(row.get("torch_saved")),
            _mib(row.get("memopt_saved")), failure.replace("|", "\\|")))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(
        description="torchvision models through memopt, stage by stage")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated, from: " + ", ".join(MODELS))
    parser.add_argument("--precision", choices=["bf16"], default=None,
                        help="compile with --mixed-precision=bf16")
    parser.add_argument("--work", default=None,
                        help="working directory (default: a temporary one)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="memopt's build directory (memopt-compile in "
                        "BUILD/bin)")
    parser.add_argument("--timeout", type=int, default=1800,
                        help="seconds each memopt-compile or train may take")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error("unknown model(s) %s; known: %s"
                     % (", ".join(unknown), ", ".join(MODELS)))
    os.environ["PATH"] = (os.path.join(args.build, "bin") + os.pathsep +
                          os.environ["PATH"])
    saved_bytes = _saved_bytes_function()

    with tempfile.TemporaryDirectory() as temporary:
        args.work = os.path.abspath(args.work or temporary)
        print("torch %s, torchvision %s, precision %s, work %s" % (
            torch.__version__, torchvision.__version__,
            args.precision or "f32", args.work), flush=True)
        rows = []
        for name in names:
            start = time.time()
            row = run_model(name, args, saved_bytes)
            row["seconds"] = time.time() - start
            rows.append(row)
            print(_line(row) + "  (%.0f s)" % row["seconds"], flush=True)
        print()
        print(_table(rows))
        done = sum(1 for row in rows if not row["failed"])
        print("\n%d of %d models pass every stage" % (done, len(rows)))


if __name__ == "__main__":
    main()
