# Never invalid IR from the exporter, on PyTorch's own operator database:
# every float32 sample of every differentiable op of torch 1.13's op_db,
# wrapped as bench/opinfo/run.py wraps it (a module whose parameter is the
# sample's input and whose loss is the mean square of the op's result), is
# either exported or refused with one ExportError; no other exception. Every
# exported module then goes through the whole training pipeline and the
# EmitC lowering, in FP32 and in BF16, without one diagnostic: what the
# exporter writes, the compiler takes.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: samples: {{[0-9]+}} exported, {{[0-9]+}} refused with an ExportError, 0 other exceptions
# CHECK-NEXT: fp32: {{[0-9]+}} modules compiled, 0 diagnostics
# CHECK-NEXT: bf16: {{[0-9]+}} modules compiled, 0 diagnostics

import collections
import importlib.util
import os
import re
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
SEPARATOR = "// -----"
DIAGNOSTIC = re.compile(r"^[^:\n]*:(\d+):\d+: error: (.*)$", re.M)


def load_runner():
    spec = importlib.util.spec_from_file_location(
        "opinfo_run", os.path.join(ROOT, "bench", "opinfo", "run.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner


def main():
    workdir = sys.argv[1]
    runner = load_runner()
    import torch
    from memopt.exporter import ExportError, Exporter
    warnings.simplefilter("ignore")
    torch.manual_seed(0)

    exported, names = [], []
    counts = collections.Counter()
    others = []
    for op in runner.load_op_db():
        if not runner.is_tried(op):
            continue
        name = runner.variant_name(op)
        try:
            samples = list(op.sample_inputs("cpu", torch.float32,
                                            requires_grad=True))
        except Exception:  # noqa: BLE001 - PyTorch's own sample failed
            continue
        for index, sample in enumerate(samples):
            if not isinstance(sample.input, torch.Tensor) or \
                    sample.input.dtype != torch.float32 or \
                    sample.input.numel() == 0:
                continue
            try:
                model = runner.make_module(op, sample, torch.float32)
            except Exception:  # noqa: BLE001 - not a module PyTorch runs
                continue
            try:
                text, _ = Exporter(model, (), None).run()
            except ExportError:
                counts["refused"] += 1
                continue
            except Exception as e:  # noqa: BLE001 - what the test rejects
                others.append("%s sample %d: %s: %s" % (
                    name, index, type(e).__name__, str(e).splitlines()[0]))
                continue
            exported.append(text)
            names.append("%s sample %d" % (name, index))
    for other in others:
        print("OTHER EXCEPTION: " + other)
    print("samples: %d exported, %d refused with an ExportError, %d other "
          "exceptions" % (len(exported), counts["refused"], len(others)))

    # One file, one module per split; a diagnostic's line names its module.
    path = os.path.join(workdir, "exported.mlir")
    text = ("\n%s\n" % SEPARATOR).join(exported)
    with open(path, "w") as f:
        f.write(text)
    starts = [0] + [i + 1 for i, line in enumerate(text.split("\n"))
                    if line == SEPARATOR]
    for label, options in (("fp32", ""), ("bf16", "mixed-precision=bf16")):
        result = subprocess.run(
            ["memopt-opt", "--split-input-file",
             "--memopt-pipeline=%s" % options, "--convert-memopt-to-emitc",
             path, "-o", os.devnull], capture_output=True, text=True)
        diagnostics = DIAGNOSTIC.findall(result.stderr)
        for line, message in diagnostics:
            module = sum(1 for start in starts if start < int(line)) - 1
            print("%s: DIAGNOSTIC in %s: %s" % (label, names[module],
                                                message))
        if result.returncode and not diagnostics:
            print("%s: FAILED: %s" % (label, result.stderr.strip()[:300]))
        print("%s: %d modules compiled, %d diagnostics" % (
            label, len(exported), len(diagnostics)))


if __name__ == "__main__":
    main()
