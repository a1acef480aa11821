# Mixed precision on the host runtime (docs/MixedPrecision.md), against
# PyTorch 1.13 on the CPU and against closed forms:
#
# bf16 <model> (mlp, gpt, cnn, llama): 10 AdamW steps of memopt --mixed-precision=bf16,
#   checked with the parity oracle (memopt.testing, docs/Reliability.md):
#   the 10 losses, and every first-step gradient, within 4x the error of
#   torch.autocast("cpu", dtype=torch.bfloat16) against PyTorch float64.
#   Autocast runs the same policy on these models (their layer norms see
#   the f32 residual stream; batch norm runs in its input's dtype). Final
#   parameters are not compared: after 10 bf16 steps Adam has turned the
#   rounding of near-zero gradients into lr-sized steps of either sign in a
#   few elements, on both sides (docs/Reliability.md has the measurement),
#   so a tensor's error is noise there. The bf16 losses must differ from memopt
#   FP32's, so a pass that did nothing fails. The memory report must show
#   the f32 master weights in master_params, their bf16 copies in params,
#   and the activations saved for the backward at most 0.7 of FP32's.
# fp16-overflow: an initial scale of 2^24 overflows f16: the first steps are
#   skipped (the step counter stays, parameters and moments do not move),
#   the scale halves each time until a step succeeds, and the parameters
#   then match, to f16 tolerance, those of a run that starts at that scale.
# fp16-growth: with a growth interval of 2 the scale sequence equals
#   GradScaler's, computed here in closed form from the skip flags, also
#   across a save and a resume (the scale and its tracker are optimizer
#   state); losses stay within 3e-2 of PyTorch FP32's (PyTorch 1.13 has no
#   f16 autocast on the CPU to serve as the oracle's reference here).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s bf16 mlp %t/mlp %memopt_src_root | FileCheck %s --check-prefix=MLP
# RUN: %python %s bf16 gpt %t/gpt %memopt_src_root | FileCheck %s --check-prefix=GPT
# RUN: %python %s bf16 cnn %t/cnn %memopt_src_root | FileCheck %s --check-prefix=CNN
# RUN: %python %s bf16 llama %t/llama %memopt_src_root | FileCheck %s --check-prefix=LLAMA
# RUN: %python %s fp16-overflow mlp %t/overflow %memopt_src_root | FileCheck %s --check-prefix=OVERFLOW
# RUN: %python %s fp16-growth mlp %t/growth %memopt_src_root | FileCheck %s --check-prefix=GROWTH
#
# MLP: mlp bf16: 10 losses within the oracle
# MLP: mlp bf16: gradients: 4 tensors within the oracle
# MLP: mlp bf16: memory report ok
# GPT: gpt bf16: 10 losses within the oracle
# GPT: gpt bf16: gradients: 26 tensors within the oracle
# GPT: gpt bf16: memory report ok
# CNN: cnn bf16: 10 losses within the oracle
# CNN: cnn bf16: gradients: 14 tensors within the oracle
# CNN: cnn bf16: memory report ok
# LLAMA: llama bf16: 10 losses within the oracle
# LLAMA: llama bf16: gradients: 21 tensors within the oracle
# LLAMA: llama bf16: memory report ok
# OVERFLOW: mlp fp16-overflow: {{[1-9][0-9]*}} steps skipped, scale halved each time, parameters match
# GROWTH: mlp fp16-growth: scale sequence matches GradScaler

import copy
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEP_LINE = re.compile(
    r"^step (\d+) loss (\S+)( skipped)?(?: scale (\S+))?$", re.M)


def compile_model(mlir, out, *flags):
    return memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                                    *flags)


def train(workdir, out, steps, save=None, params="model.safetensors"):
    """(loss, skipped, scale) of each step."""
    stdout = memopt_run.train(out, workdir, steps, save, params)
    lines = [(float(m.group(2)), bool(m.group(3)),
              float(m.group(4)) if m.group(4) else None)
             for m in STEP_LINE.finditer(stdout)]
    if len(lines) != steps:
        raise SystemExit(f"expected {steps} step lines, got {stdout!r}")
    return lines


def relative(got, want):
    return max(abs(g - w) / abs(w) for g, w in zip(got, want))


def bf16(name, model, batch, workdir, mlir):
    from memopt.testing import Oracle
    steps = 10
    oracle = Oracle(model, batch, steps, memopt_run.adamw, precision="bf16")
    report32 = compile_model(mlir, os.path.join(workdir, "fp32"))
    report16 = compile_model(mlir, os.path.join(workdir, "bf16"),
                             "--mixed-precision=bf16")
    fp32 = [l for l, _, _ in train(workdir, os.path.join(workdir, "fp32"),
                                   steps)]
    lines = train(workdir, os.path.join(workdir, "bf16"), steps)
    failures = []
    if any(skipped or scale is not None for _, skipped, scale in lines):
        failures.append("bf16 without loss scaling printed a scale or a skip")
    mixed = [l for l, _, _ in lines]
    verdict = oracle.check(mixed)
    gradients = oracle.check_gradients(*memopt_run.first_step_gradients(
        mlir, workdir, os.path.join(workdir, "bf16-sgd"),
        "--mixed-precision=bf16"))
    failures += verdict.failures + gradients.failures
    if relative(mixed, fp32) < 1e-6:
        failures.append("bf16 losses equal FP32's: nothing ran in bf16")
    for failure in failures:
        print(f"{name} bf16: MISMATCH {failure}")
    if not failures:
        print(f"{name} bf16: {verdict.summary()}")
        print(f"{name} bf16: gradients: {gradients.summary()}")

    # Memory: f32 masters of the parameters read through a bf16 copy (all
    # but the f32 layer-norm and embedding ones), 2 + 4 bytes for those,
    # and the saved activations at most 0.7 of FP32's (the bf16 copies of
    # f32 inputs and the f32 residual stream of autocast's policy keep
    # them above one half).
    params32 = report32["pools"]["params"]
    pools = report16["pools"]
    state = report16["model_state"]
    saved32 = sum(report32["by_scope"].values())
    saved16 = sum(report16["by_scope"].values())
    memory = []
    if not 0.9 * params32 <= pools["master_params"] <= params32:
        memory.append(f"master_params {pools['master_params']} B, expected "
                      f"most of the f32 parameters' {params32} B")
    if pools["params"] + pools["master_params"] < params32:
        memory.append("params + master_params below the f32 parameters")
    copies = state["weights"] - (params32 - state["master_weights"])
    if copies * 2 != state["master_weights"]:
        memory.append(f"bf16 copies {copies} B for f32 masters of "
                      f"{state['master_weights']} B")
    if saved16 > 0.7 * saved32:
        memory.append(f"saved activations {saved16} B vs FP32 {saved32} B")
    for failure in memory:
        print(f"{name} bf16: MISMATCH {failure}")
    if not memory:
        print(f"{name} bf16: memory report ok (saved activations "
              f"{saved16} B vs FP32 {saved32} B, {saved16 / saved32:.2f})")
    return 1 if failures or memory else 0


def fp16_overflow(name, workdir, mlir):
    import memopt
    steps, init = 12, 2.0 ** 24
    compile_model(mlir, os.path.join(workdir, "huge"),
                  "--mixed-precision=fp16", f"--loss-scale-init={init!r}")
    final = os.path.join(workdir, "huge.safetensors")
    lines = train(workdir, os.path.join(workdir, "huge"), steps, final)
    failures = []
    skipped = 0
    while skipped < steps and lines[skipped][1]:
        skipped += 1
    if skipped == 0 or skipped == steps:
        failures.append(f"expected some, not all, steps skipped: {lines}")
    if any(s for _, s, _ in lines[skipped:]):
        failures.append(f"a step after the first success was skipped: {lines}")
    for i, (_, _, scale) in enumerate(lines):
        want = init * 0.5 ** min(i, skipped)
        if scale != np.float32(want):
            failures.append(f"step {i + 1}: scale {scale}, expected {want}")
    start = init * 0.5 ** skipped
    compile_model(mlir, os.path.join(workdir, "start"),
                  "--mixed-precision=fp16", f"--loss-scale-init={start!r}")
    expected = os.path.join(workdir, "start.safetensors")
    train(workdir, os.path.join(workdir, "start"), steps - skipped, expected)
    got, want = memopt.safetensors.load(final), memopt.safetensors.load(
        expected)
    if int(got["optimizer.step"]) != steps - skipped:
        failures.append(f"optimizer.step {int(got['optimizer.step'])}, "
                        f"expected {steps - skipped}")
    for key, tensor in want.items():
        # The scale and the run's position differ by construction.
        if key in ("optimizer.loss_scale", "optimizer.growth_tracker",
                   "driver.steps"):
            continue
        scale = max(float(np.abs(tensor).max()), 1e-30)
        error = float(np.abs(got[key] - tensor).max()) / scale
        if error > 1e-3:
            failures.append(f"{key}: relative error {error:.3g}")
    for failure in failures:
        print(f"{name} fp16-overflow: MISMATCH {failure}")
    if failures:
        return 1
    print(f"{name} fp16-overflow: {skipped} steps skipped, scale halved each "
          f"time, parameters match")
    return 0


def fp16_growth(name, model, batch, workdir, mlir):
    steps, init, interval = 7, 1024.0, 2
    compile_model(mlir, os.path.join(workdir, "grow"),
                  "--mixed-precision=fp16", f"--loss-scale-init={init!r}",
                  f"--loss-scale-growth-interval={interval}")
    lines = train(workdir, os.path.join(workdir, "grow"), steps)
    # GradScaler.update in closed form, from the skip flags.
    scale, good, expected = init, 0, []
    for _, skipped, _ in lines:
        expected.append(scale)
        if skipped:
            scale, good = scale * 0.5, 0
        else:
            good += 1
            if good == interval:
                scale, good = scale * 2.0, 0
    failures = []
    got = [s for _, _, s in lines]
    if got != expected:
        failures.append(f"scales {got}, GradScaler gives {expected}")
    if any(s for _, s, _ in lines):
        failures.append(f"unexpected skipped step: {lines}")
    # The scale state is optimizer state: saved after 4 steps and resumed,
    # the sequence goes on.
    out = os.path.join(workdir, "grow")
    checkpoint = os.path.join(workdir, "checkpoint.safetensors")
    train(workdir, out, 4, save=checkpoint)
    resumed = [s for _, _, s in train(workdir, out, steps - 4,
                                      params=checkpoint)]
    if resumed != expected[4:]:
        failures.append(f"resumed scales {resumed}, expected {expected[4:]}")
    from memopt.testing import run_pytorch
    reference = run_pytorch(model, batch, steps, memopt_run.adamw).losses
    error = relative([l for l, _, _ in lines], reference)
    if error > 3e-2:
        failures.append(f"relative error {error:.3g} against PyTorch FP32")
    for failure in failures:
        print(f"{name} fp16-growth: MISMATCH {failure}")
    if failures:
        return 1
    print(f"{name} fp16-growth: scale sequence matches GradScaler "
          f"({got[0]:g} to {got[-1]:g})")
    return 0


def main():
    mode, name, workdir, src = sys.argv[1:5]
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import memopt
    import models

    os.makedirs(workdir, exist_ok=True)
    model, batch = models.build(name)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(copy.deepcopy(model), tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    if mode == "bf16":
        return bf16(name, model, batch, workdir, mlir)
    if mode == "fp16-overflow":
        return fp16_overflow(name, workdir, mlir)
    return fp16_growth(name, model, batch, workdir, mlir)


if __name__ == "__main__":
    sys.exit(main())
