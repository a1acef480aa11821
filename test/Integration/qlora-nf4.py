# NF4 frozen weights (QLoRA): the LoRA fine-tune of frozen-lora.py compiled
# with --frozen-weights=nf4. The frozen weights of its linear layers are
# stored as their NF4 bytes (the embedding and the norms keep theirs), the
# account counts those bytes, the checkpoint keeps the f32 tensors they were
# quantized from,
# and training matches PyTorch through the parity oracle when PyTorch's
# model holds the NF4 values (nf4_reference.py, NF4 written from its
# definition): in FP32 (5 AdamW steps and the first-step gradients), with 2
# micro-batches, and under BF16 against autocast. The unquantized weights
# do not match: the quantization is real. (qlora-nf4-python.py: the same
# from Python.)
#
# With the fused LM-head loss (--lm-loss-chunk=8: 4 chunks of the 32
# classes) the frozen head is NF4 as well, read by
# memopt.nf4_linear_cross_entropy, and training matches the same oracles in
# FP32 and BF16.
#
# Rematerialization recomputes from the NF4 bytes: --remat=sqrt is byte for
# byte the step without it. Clipping (--clip-grad-norm, between the
# smallest and the largest norm) matches the oracle's
# torch.nn.utils.clip_grad_norm_, norms and trajectory.
#
# Under data parallelism with ZeRO-2 (2 ranks, one BLAS thread) the run is
# byte for byte that of one process with 2 micro-batches.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: nf4: 7 frozen weights in NF4, 1376 B for 2560 weights (4.30 bits per weight)
# CHECK: nf4: report: 3280 frozen in 19 tensors (4.16 KiB with 1.34 KiB in NF4, no gradient or optimizer state)
# CHECK: fp32: trajectory: 5 losses and 23 tensors within the oracle
# CHECK: fp32: gradients: 4 tensors within the oracle
# CHECK: nf4: frozen weights saved unchanged: 19 of 19
# CHECK: unquantized weights: losses differ by {{[0-9.e+-]+}}, beyond the oracle's bound
# CHECK: K=2: trajectory: 5 losses and 23 tensors within the oracle
# CHECK: K=2: gradients: 4 tensors within the oracle
# CHECK: bf16: 5 losses within the oracle
# CHECK: bf16: gradients: 4 tensors within the oracle
# CHECK: fused: the LM head in NF4 under memopt.nf4_linear_cross_entropy, 1376 B
# CHECK: fused: trajectory: 5 losses and 23 tensors within the oracle
# CHECK: fused: gradients: 4 tensors within the oracle
# CHECK: fused-bf16: 5 losses within the oracle
# CHECK: fused-bf16: gradients: 4 tensors within the oracle
# CHECK: remat: --remat=sqrt is byte for byte the step without it
# CHECK: clip: norms: 5 within the oracle
# CHECK-NEXT: clip: trajectory: 5 losses and 23 tensors within the oracle
# CHECK-NEXT: clip: clipped on 2 of 5 steps
# CHECK: ZeRO-2 x 2 ranks vs K=2: 5 losses bit-identical, state byte-identical

import copy
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "Inputs"))
import memopt_run  # noqa: E402
import nf4_reference  # noqa: E402

frozen_lora = memopt_run.load_test("frozen-lora.py")

STEPS = 5
NF4 = ("--frozen-weights=nf4",)


def nf4_bytes(n):
    """runtime.h's memopt_nf4_packed_bytes."""
    blocks = -(-n // 64)
    return ((n + 1) // 2 + blocks + 3) // 4 * 4 + 4 * -(-blocks // 256) + 4


def quantized_copy(model, names):
    """`model` with the weights `names` replaced by their NF4 values."""
    import torch
    model = copy.deepcopy(model)
    for name in names:
        weight = model.get_parameter(name)
        with torch.no_grad():
            weight.copy_(torch.from_numpy(
                nf4_reference.dequantized(weight.detach().numpy())))
    return model


def check(label, oracle, mlir, workdir, quantized, original, *flags,
          compare_state=True):
    """check_parity's comparison, with the frozen NF4 weights compared as
    what the step computes with; returns the losses and the checkpoint."""
    import memopt
    out = os.path.join(workdir, "out-" + label)
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS, *NF4,
                             *flags)
    final = os.path.join(workdir, label + ".safetensors")
    stdout = memopt_run.train(out, workdir, STEPS, save=final)
    saved = memopt.safetensors.load(final)
    state = dict(saved)
    for name in quantized:
        state[name] = nf4_reference.dequantized(saved[name])
    losses = memopt_run.losses(stdout)
    trajectory = oracle.check(losses, state if compare_state else None)
    gradients = oracle.check_gradients(*memopt_run.first_step_gradients(
        mlir, workdir, out + "-sgd", *NF4, *flags))
    for what, verdict in (("trajectory" if compare_state else "",
                           trajectory), ("gradients", gradients)):
        for failure in verdict.failures:
            print(f"{label}: MISMATCH {what}: {failure}")
        if verdict.ok:
            print(f"{label}: {what + ': ' if what else ''}{verdict.summary()}")
    return losses, saved


def main():
    import memopt
    from memopt.testing import Oracle

    workdir = sys.argv[1]
    model, batch = frozen_lora.build()
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    original = memopt.safetensors.load(os.path.join(workdir,
                                                    "model.safetensors"))

    # The frozen weights of the linear layers, the head's included.
    quantized = [n for n, p in model.named_parameters()
                 if not p.requires_grad and p.dim() == 2 and
                 not n.startswith("embed.")]
    out = os.path.join(workdir, "out")
    report = memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                                      *NF4)
    numel = {n: model.get_parameter(n).numel() for n in quantized}
    expected = sum(nf4_bytes(k) for k in numel.values())
    assert report["nf4_frozen_bytes"] == expected, report["nf4_frozen_bytes"]
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    rest = sum(4 * model.get_parameter(n).numel() for n in frozen
               if n not in quantized)
    assert report["model_state"]["frozen_weights"] == expected + rest, \
        report["model_state"]
    print("nf4: %d frozen weights in NF4, %d B for %d weights (%.2f bits per "
          "weight)" % (len(quantized), expected, sum(numel.values()),
                       8.0 * expected / sum(numel.values())))
    text = subprocess.run(
        ["memopt-compile", mlir, "--report-only", *NF4], check=True,
        capture_output=True, text=True).stdout
    line = next(l for l in text.splitlines() if "frozen in" in l)
    print("nf4: report: " + line[line.index("; ") + 2:])

    qmodel = quantized_copy(model, quantized)
    oracle = Oracle(qmodel, batch, STEPS, memopt_run.adamw)
    losses, saved = check("fp32", oracle, mlir, workdir, quantized, original)
    print("nf4: frozen weights saved unchanged: %d of %d" % (
        sum(saved[n].tobytes() == original[n].tobytes() for n in frozen),
        len(frozen)))

    # The same step on the unquantized weights is another trajectory.
    plain = Oracle(model, batch, STEPS, memopt_run.adamw)
    verdict = plain.check(losses)
    assert not verdict.ok, "NF4 losses match the unquantized model"
    print("unquantized weights: losses differ by %.3g, beyond the oracle's "
          "bound" % float(np.max(np.abs(np.array(losses) -
                                         np.array(plain.exact.losses)))))

    check("K=2", Oracle(qmodel, batch, STEPS, memopt_run.adamw,
                        micro_batches=2),
          mlir, workdir, quantized, original, "--micro-batches=2")
    check("bf16", Oracle(qmodel, batch, STEPS, memopt_run.adamw,
                         precision="bf16"),
          mlir, workdir, quantized, original, "--mixed-precision=bf16",
          compare_state=False)

    fused = ("--lm-loss-chunk=8",)
    report = memopt_run.compile_model(mlir, os.path.join(workdir, "fused"),
                                      *memopt_run.ADAMW_FLAGS, *NF4, *fused)
    assert report["fused_kernels"]["linear_cross_entropy"] == 1, \
        report["fused_kernels"]
    assert report["nf4_frozen_bytes"] == expected, report["nf4_frozen_bytes"]
    with open(os.path.join(workdir, "fused", "train_step.cpp")) as f:
        assert "memopt_nf4_linear_cross_entropy_grad(" in f.read()
    print("fused: the LM head in NF4 under memopt.nf4_linear_cross_entropy, "
          "%d B" % report["nf4_frozen_bytes"])
    check("fused", oracle, mlir, workdir, quantized, original, *fused)
    check("fused-bf16", Oracle(qmodel, batch, STEPS, memopt_run.adamw,
                               precision="bf16"),
          mlir, workdir, quantized, original, "--mixed-precision=bf16",
          *fused, compare_state=False)

    # Rematerialization: the same bytes.
    final, recompute = {}, {}
    for label, flags in (("plain", ()), ("sqrt", ("--remat=sqrt",))):
        out = os.path.join(workdir, "remat-" + label)
        recompute[label] = memopt_run.compile_model(
            mlir, out, *memopt_run.ADAMW_FLAGS, *NF4,
            *flags)["recompute_flops"]
        save = os.path.join(workdir, "remat-%s.safetensors" % label)
        final[label] = (memopt_run.train(out, workdir, STEPS, save=save),
                        open(save, "rb").read())
    assert recompute["sqrt"] > recompute["plain"], recompute
    assert final["plain"] == final["sqrt"], "--remat=sqrt changed the step"
    print("remat: --remat=sqrt is byte for byte the step without it")

    # Clipping, against clip-grad-norm.py's clipped AdamW.
    import torch
    clip_test = memopt_run.load_test("clip-grad-norm.py")
    max_norm = 0.38
    clipped = clip_test.Clipped(torch, max_norm)
    clip_oracle = Oracle(qmodel, batch, STEPS, clipped)
    out = os.path.join(workdir, "clip")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS, *NF4,
                             "--clip-grad-norm=%r" % max_norm)
    save = os.path.join(workdir, "clip.safetensors")
    stdout = memopt_run.train(out, workdir, STEPS, save=save)
    norms = clip_test.norms(stdout)
    clipped.check("clip", norms)
    state = dict(memopt.safetensors.load(save))
    for name in quantized:
        state[name] = nf4_reference.dequantized(state[name])
    verdict = clip_oracle.check(memopt_run.losses(stdout), state)
    for failure in verdict.failures:
        print("clip: MISMATCH trajectory: %s" % failure)
    if verdict.ok:
        print("clip: trajectory: %s" % verdict.summary())
    print("clip: clipped on %d of %d steps" % (
        sum(n > max_norm for n in norms), len(norms)))

    print(memopt_run.zero_vs_k2(mlir, workdir, STEPS, *NF4))


if __name__ == "__main__":
    main()
