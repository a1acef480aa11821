"""Checks the model state of every combination in an --explore JSON against
REFERENCE.md's bytes per parameter (AdamW) times the exact parameter counts,
computed here in closed form from the model's configuration.

    check_model_state.py EXPLORE.json {gpt2-small,llama-7b}

AdamW also keeps one i64 step counter: 8 bytes on top of the optimizer
state. Prints one line per checked combination; exits 1 on a mismatch.
"""

import json
import sys

# Bytes per parameter (weights, master weights, grads, optimizer) of the
# regimes of REFERENCE.md, "Memory accounting". Under mixed precision the
# parameters of nn.Linear layers (weights and biases: autocast runs linear in
# the low precision) are read through a 16-bit copy of an FP32 master weight
# and their gradient reaches AdamW in FP32: the "bf16 compute, FP32 master
# grads" row, 18 B. Embedding and normalisation parameters are used in FP32
# as they are: the FP32 row, 16 B; so is the LM head, which the fused linear
# cross-entropy (memopt-compile's default) reads as its FP32 master weight,
# rounding a chunk at a time.
FP32 = (4, 0, 4, 8)
MIXED = (2, 4, 4, 8)
REGIMES = {"none": (FP32, FP32), "bf16": (MIXED, FP32), "fp16": (MIXED, FP32)}
STEP_COUNTER = 8


def gpt2_small():
    """(parameters of Linear layers, all parameters)"""
    V, T, C, L = 50257, 1024, 768, 12
    # Per layer: c_attn without bias (3C^2), c_proj (C^2 + C), c_fc
    # (4C^2 + 4C), mlp c_proj (4C^2 + C), two layer norms (4C); the LM head
    # is the token embedding (tied).
    linear = L * (12 * C * C + 6 * C)
    return linear, linear + V * C + T * C + L * 4 * C + 2 * C


def llama_7b():
    V, C, F, L = 32000, 4096, 11008, 32
    # Per layer: wq, wk, wv, wo (4C^2), w1, w2, w3 (3CF), no biases, two
    # RMSNorms (2C); the output projection (VC, the LM head); the embedding
    # (VC) and the final norm (C).
    linear = L * (4 * C * C + 3 * C * F)
    return linear, linear + 2 * V * C + L * 2 * C + C


def main(path, model):
    linear, n = {"gpt2-small": gpt2_small, "llama-7b": llama_7b}[model]()
    other = n - linear
    report = json.load(open(path))
    ok = True
    for row in report["combinations"]:
        if "error" in row:
            continue
        lin, oth = REGIMES[row["precision"]]
        keys = ("weights", "master_weights", "grads", "optimizer")
        expected = {k: lin[i] * linear + oth[i] * other
                    for i, k in enumerate(keys)}
        expected["optimizer"] += STEP_COUNTER
        expected["total"] = sum(expected.values())
        got = {k: row["model_state"][k] for k in expected}
        name = "%s/%s/K=%d" % (row["precision"], row["remat"],
                               row["micro_batches"])
        if got != expected:
            ok = False
            print("MISMATCH %s: %s, expected %s" % (name, got, expected))
        else:
            print("%s %s: %d parameters x %d B + %d x %d B + %d B = %d B" % (
                model, name, linear, sum(lin), other, sum(oth), STEP_COUNTER,
                expected["total"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
