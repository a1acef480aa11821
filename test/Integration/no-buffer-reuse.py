# --no-buffer-reuse compiles the unoptimised baseline: every buffer its own
# bytes, no in-place results, no reshape views. Trains the MLP and the GPT
# (with dropout) from examples/ for 3 steps both ways, alone and combined
# with --remat, --micro-batches and --mixed-precision, and checks that the
# printed losses and the --save'd parameters and optimizer state are
# byte-identical (planning must not change a single bit), that the
# no-reuse plan gives every alloc distinct, aligned, non-overlapping bytes
# with the arena the sum of their aligned sizes, and that the no-reuse
# arena is larger than the default one.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %examples | FileCheck %s
#
# CHECK: mlp: default: 3 losses and {{[0-9]+}} bytes identical, arena {{[0-9]+}} -> {{[0-9]+}} B
# CHECK: mlp: micro-batches=4: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt: default: 3 losses and {{[0-9]+}} bytes identical, arena {{[0-9]+}} -> {{[0-9]+}} B
# CHECK: gpt: remat=selective: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt: remat=sqrt: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt: micro-batches=2: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt: mixed-precision=bf16: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt: all: 3 losses and {{[0-9]+}} bytes identical
# CHECK-NOT: MISMATCH

import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import compile_model, train  # noqa: E402

STEPS = 3
ALIGNMENT = 256
# Exclusive upper bounds of the integer inputs (classes, vocabulary).
INT_BOUNDS = {"y": 10, "idx": 128, "targets": 128}
ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4,
                 "i8": 1, "i1": 1}

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))


def write_inputs(workdir, model_json):
    """Deterministic parameters and one batch for the arguments of
    model.json (optimizer state starts at zero in the driver)."""
    from memopt import safetensors
    rng = np.random.default_rng(0)
    params, batch = {}, {}
    for arg in model_json["arguments"]:
        name, role, shape = arg["name"], arg["role"], arg["shape"]
        if role == "param":
            params[name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        elif role in ("input", "label"):
            if arg["dtype"] == "i64":
                batch[name] = rng.integers(0, INT_BOUNDS[name], shape,
                                           dtype=np.int64)
            else:
                batch[name] = rng.standard_normal(shape).astype(np.float32)
    safetensors.save(params, os.path.join(workdir, "params.safetensors"))
    safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))


def compile_and_train(workdir, mlir, tag, flags):
    out = os.path.join(workdir, tag)
    compile_model(mlir, out, *flags)
    with open(os.path.join(out, "model.json")) as f:
        model_json = json.load(f)
    if not os.path.exists(os.path.join(workdir, "params.safetensors")):
        write_inputs(workdir, model_json)
    final = os.path.join(workdir, tag + ".safetensors")
    stdout = train(out, workdir, STEPS, save=final,
                   params="params.safetensors")
    with open(final, "rb") as f:
        saved = f.read()
    with open(os.path.join(out, "plan.mlir")) as f:
        plan = f.read()
    return stdout, saved, model_json["arena_bytes"], plan


def memref_bytes(type_text):
    *dims, element = type_text.split("x")
    count = 1
    for dim in dims:
        count *= int(dim)
    return count * ELEMENT_BYTES[element]


def check_no_reuse_plan(plan, arena):
    """Every alloc its own aligned bytes, back to back in program order."""
    problems = []
    allocs = re.findall(
        r"memref\.alloc\(\) \{memopt\.offset = (\d+) : i64\} : "
        r"memref<([^>,]*)>", plan)
    if len(allocs) != plan.count("memref.alloc()"):
        problems.append("an alloc without an offset or with a layout")
    end = 0
    for offset, type_text in allocs:
        offset = int(offset)
        if offset != end or offset % ALIGNMENT:
            problems.append(f"alloc {type_text} at {offset}, expected {end}")
        size = memref_bytes(type_text)
        end = offset + (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    if end != arena:
        problems.append(f"arena {arena} != sum of aligned sizes {end}")
    # Views only of arguments (the micro-batch slices), never of a buffer.
    for source in re.findall(r"memref\.reinterpret_cast (%[\w]+)", plan):
        if not source.startswith("%arg"):
            problems.append(f"a view of {source}")
    return problems


def both_ways(modeldir, mlir, tag, flags):
    """Compiles and trains with and without --no-buffer-reuse: the two
    results and the list of their differences (none expected)."""
    reuse = compile_and_train(modeldir, mlir, tag, flags)
    alone = compile_and_train(modeldir, mlir, tag + "-no-reuse",
                              flags + ["--no-buffer-reuse"])
    problems = check_no_reuse_plan(alone[3], alone[2])
    if reuse[0] != alone[0]:
        problems.append(f"losses {alone[0]!r} != {reuse[0]!r}")
    if reuse[0].count("loss") != STEPS:
        problems.append(f"expected {STEPS} losses: {reuse[0]!r}")
    if reuse[1] != alone[1]:
        problems.append("saved tensors differ")
    return reuse, alone, problems


def main():
    workdir, examples = sys.argv[1], sys.argv[2]
    variants = {
        "mlp": {"default": [], "micro-batches=4": ["--micro-batches=4"]},
        "gpt": {
            "default": [],
            "remat=selective": ["--remat=selective"],
            "remat=sqrt": ["--remat=sqrt"],
            "micro-batches=2": ["--micro-batches=2"],
            "mixed-precision=bf16": ["--mixed-precision=bf16"],
            "all": ["--remat=selective", "--micro-batches=2",
                    "--mixed-precision=bf16"],
        },
    }
    status = 0
    for name, runs in variants.items():
        mlir = os.path.join(examples, name + ".mlir")
        modeldir = os.path.join(workdir, name)
        os.makedirs(modeldir, exist_ok=True)
        for tag, flags in runs.items():
            reuse, alone, problems = both_ways(modeldir, mlir, tag, flags)
            if alone[2] <= reuse[2]:
                problems.append(f"no-reuse arena {alone[2]} <= {reuse[2]}")
            if problems:
                status = 1
                print(f"{name}: {tag}: MISMATCH " + "; ".join(problems))
            else:
                print(f"{name}: {tag}: {STEPS} losses and {len(reuse[1])} "
                      f"bytes identical, arena {reuse[2]} -> {alone[2]} B")
    return status


if __name__ == "__main__":
    sys.exit(main())
