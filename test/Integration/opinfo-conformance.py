# The CI subset of the op conformance runner (bench/opinfo/run.py, whose
# whole run over torch 1.13's op_db is in bench/README.md): for one op of
# each family memopt supports, its first two float32 samples are exported,
# compiled with memopt.compile and stepped once with SGD, and the loss and
# the gradient are within the parity oracle's one-step bound of PyTorch
# float64 (4 times PyTorch float32's own error). Each op must pass.
# memopt.compile loads the step into this process, which an instrumented
# (sanitized) build's library cannot join, as python-api.py.
#
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK-NOT: FAILED
# CHECK: 88 ops: 88 pass

import importlib.util
import os
import sys
import warnings

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SAMPLES = 2
OPS = [
    # Elementwise and activations.
    "abs", "sin", "expm1", "rsqrt", "sinh", "cosh", "minimum", "addcdiv",
    "lerp", "log2", "logit", "nn.functional.gelu", "nn.functional.elu",
    "nn.functional.mish", "nn.functional.logsigmoid",
    "nn.functional.softshrink", "nn.functional.prelu", "nn.functional.glu",
    "rsub", "tan", "acos", "round.decimals_3", "hypot", "clamp",
    "nn.functional.threshold",
    # Products.
    "matmul", "addmm", "baddbmm", "addr", "mv", "inner",
    # Reductions and normalization.
    "sum", "var", "var_mean", "amin", "min.binary", "logsumexp", "logaddexp",
    "softmax", "nn.functional.group_norm",
    # Losses.
    "nn.functional.binary_cross_entropy_with_logits",
    # Shapes and spatial.
    "permute", "tile", "tril", "trace", "narrow", "chunk",
    "nn.functional.pad.constant", "nn.functional.avg_pool2d",
    # Indexing and resampling by constant indices and matrices.
    "flip", "gather", "take_along_dim", "index_select", "diagonal",
    "max.reduction_with_dim", "tensor_split", "nn.functional.pad.reflect",
    "nn.functional.pad.replicate", "nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.bicubic", "nn.functional.adaptive_max_pool2d",
    "nn.functional.max_pool1d", "scatter_add", "nn.functional.conv_transpose2d",
    "nn.functional.interpolate.nearest", "index_add", "diag_embed",
    "slice_scatter", "unfold",
    # Written with other elementwise ops and scans.
    "atan2", "asinh", "xlogy", "cumprod", "cumulative_trapezoid",
    # Norms and distances.
    "linalg.vector_norm", "cdist", "renorm",
    # Sorting networks.
    "sort", "topk", "quantile",
    "nn.functional.softplus", "repeat_interleave", "prod",
    "nn.functional.kl_div",
    # NaN-aware ops written with comparisons.
    "fmax", "nan_to_num", "nanmean", "nn.functional.nll_loss",
]


def main():
    spec = importlib.util.spec_from_file_location(
        "opinfo_run", os.path.join(ROOT, "bench", "opinfo", "run.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    import torch
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    by_name = {runner.variant_name(op): op for op in runner.load_op_db()}
    passed = 0
    for name in OPS:
        op = by_name[name]
        assert runner.is_tried(op), name
        outcome, detail = runner.evaluate(op, SAMPLES, sys.argv[1])
        if outcome == "pass":
            passed += 1
        else:
            print("FAILED %s: %s %s" % (name, outcome, detail))
    print("%d ops: %d pass" % (len(OPS), passed))


if __name__ == "__main__":
    main()
