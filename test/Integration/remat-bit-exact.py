# Trains the GPT-style decoder (with dropout, so that recomputed dropout masks
# are exercised) and the CNN with every --remat strategy and checks that each
# gives the same losses and the same final parameters, batch-norm statistics
# and optimizer state as --remat=none, byte for byte: recomputation must be
# bit-exact. The budget strategies get the memory blocks plans (its arguments
# plus its arena: --memory-budget is the step's, docs/Budget.md), which
# forces them to recompute.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s gpt %t/gpt %memopt_src_root | FileCheck %s --check-prefix=GPT
# RUN: %python %s cnn %t/cnn %memopt_src_root | FileCheck %s --check-prefix=CNN
#
# GPT: gpt: blocks: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# GPT: gpt: sqrt: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# GPT: gpt: revolve: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# GPT: gpt: revolve-1: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# GPT: gpt: selective: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# GPT: gpt: budget: {{.*}} 3 losses and {{[0-9]+}} bytes identical
# GPT: gpt: auto: {{.*}} 3 losses and {{[0-9]+}} bytes identical
# CNN: cnn: blocks: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# CNN: cnn: revolve-1: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# CNN: cnn: selective: recompute_flops > 0, 3 losses and {{[0-9]+}} bytes identical
# CNN: cnn: budget: {{.*}} 3 losses and {{[0-9]+}} bytes identical

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import compile_model, train  # noqa: E402

STEPS = 3


def compile_and_train(workdir, mlir, tag, flags):
    out = os.path.join(workdir, tag)
    report = compile_model(mlir, out, *flags)
    final = os.path.join(workdir, tag + ".safetensors")
    stdout = train(out, workdir, STEPS, save=final)
    with open(final, "rb") as f:
        return stdout, f.read(), report


def find_flops(report):
    """recompute_flops, wherever the report nests it."""
    if isinstance(report, dict):
        for key, value in report.items():
            if key == "recompute_flops":
                return value
            found = find_flops(value)
            if found is not None:
                return found
    return None


def main():
    name, workdir, src = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import memopt
    import models

    os.makedirs(workdir, exist_ok=True)
    if name == "gpt":
        import torch
        torch.manual_seed(0)
        model = models.GPT(dropout=0.1)
        batch = model.example_batch(torch.Generator().manual_seed(1))
    else:
        model, batch = models.build(name)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))

    reference = compile_and_train(workdir, mlir, "none", [])
    blocks = compile_and_train(workdir, mlir, "blocks", ["--remat=blocks"])
    # --memory-budget is the step's memory: the arguments plus the arena.
    def planned(report):
        return report["arena_bytes"] + sum(
            report["pools"][p] for p in ("params", "master_params",
                                         "optimizer", "state", "data"))
    budget = str(planned(blocks[2]))
    runs = {"blocks": blocks}
    strategies = {
        "sqrt": ["--remat=sqrt"],
        "revolve": ["--remat=revolve"],
        "revolve-1": ["--remat=revolve", "--remat-snapshots=1"],
        "selective": ["--remat=selective"],
        "budget": ["--remat=budget", "--memory-budget=" + budget],
        "auto": ["--remat=auto", "--memory-budget=" + budget],
    }
    if name == "cnn":
        del strategies["sqrt"], strategies["revolve"], strategies["auto"]
    for tag, flags in strategies.items():
        runs[tag] = compile_and_train(workdir, mlir, tag, flags)

    status = 0
    for tag, (stdout, saved, report) in runs.items():
        problems = []
        if stdout != reference[0]:
            problems.append(f"losses {stdout!r} != {reference[0]!r}")
        if saved != reference[1]:
            problems.append("saved tensors differ")
        if tag.startswith("budget") or tag == "auto":
            if planned(report) > int(budget):
                problems.append(f"planned peak {planned(report)} > {budget}")
            flops = "arena within the budget,"
        else:
            recompute = find_flops(report)
            if not recompute:
                problems.append(f"recompute_flops is {recompute!r}")
            flops = "recompute_flops > 0,"
        if problems:
            status = 1
            print(f"{name}: {tag}: MISMATCH " + "; ".join(problems))
        else:
            print(f"{name}: {tag}: {flops} {STEPS} losses and "
                  f"{len(saved)} bytes identical")
    return status


if __name__ == "__main__":
    sys.exit(main())
