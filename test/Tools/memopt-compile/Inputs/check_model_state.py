"""Checks the model state of every combination in an --explore JSON against
REFERENCE.md's bytes per parameter (AdamW) times the exact parameter count,
computed here in closed form from the model's configuration.

    check_model_state.py EXPLORE.json {gpt2-small,llama-7b}

AdamW also keeps one i64 step counter: 8 bytes on top of the optimizer
state. Prints one line per checked combination; exits 1 on a mismatch.
"""

import json
import sys

# Bytes per parameter (weights, master weights, grads, optimizer) by
# precision regime: REFERENCE.md, "Memory accounting".
REGIMES = {"none": (4, 0, 4, 8)}
STEP_COUNTER = 8


def gpt2_small():
    V, T, C, L = 50257, 1024, 768, 12
    # Per layer: two layer norms (4C), c_attn without bias (3C^2), c_proj
    # (C^2 + C), c_fc (4C^2 + 4C), mlp c_proj (4C^2 + C); tied LM head.
    return V * C + T * C + L * (12 * C * C + 10 * C) + 2 * C


def llama_7b():
    V, C, F, L = 32000, 4096, 11008, 32
    # Per layer: wq, wk, wv, wo (4C^2), w1, w2, w3 (3CF), two RMSNorms (2C);
    # untied embedding and output, final norm.
    return 2 * V * C + L * (4 * C * C + 3 * C * F + 2 * C) + C


def main(path, model):
    n = {"gpt2-small": gpt2_small, "llama-7b": llama_7b}[model]()
    report = json.load(open(path))
    ok = True
    for row in report["combinations"]:
        if "error" in row:
            continue
        weights, master, grads, optimizer = REGIMES[row["precision"]]
        expected = {"params": weights * n, "master_params": master * n,
                    "grads": grads * n,
                    "optimizer": optimizer * n + STEP_COUNTER}
        expected["total"] = sum(expected.values())
        got = {k: row["model_state"][k] for k in expected}
        name = "%s/%s/K=%d" % (row["precision"], row["remat"],
                               row["micro_batches"])
        if got != expected:
            ok = False
            print("MISMATCH %s: %s, expected %s" % (name, got, expected))
        else:
            per = (weights + master + grads + optimizer)
            print("%s %s: %d parameters x %d B + %d B = %d B" % (
                model, name, n, per, STEP_COUNTER, expected["total"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
