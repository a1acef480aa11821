# The interpolation matrices the exporter writes for F.interpolate are
# PyTorch's own maps: for every mode, both align_corners settings, sizes
# and scale factors (including those where PyTorch's kernels take their
# own paths: an unchanged extent copies in the linear modes whatever the
# scale, and nearest uses the given scale, not the sizes' ratio), the
# matrix applied per spatial dimension to a float64 input equals
# PyTorch's float32 interpolate of it within float32 rounding: PyTorch sums
# k = taps^dims products whose weights total at most 1.5 per dimension in
# magnitude, so its error is below 2 k 1.5^dims u max|x| (u = 2^-24), where
# a wrong index or weight is off by a sizable fraction of max|x|.
#
# REQUIRES: torch
# RUN: %python %s | FileCheck %s
#
# CHECK: nearest: {{[0-9]+}} cases, 0 mismatches
# CHECK: nearest-exact: {{[0-9]+}} cases, 0 mismatches
# CHECK: linear: {{[0-9]+}} cases, 0 mismatches
# CHECK: bilinear: {{[0-9]+}} cases, 0 mismatches
# CHECK: bicubic: {{[0-9]+}} cases, 0 mismatches
# CHECK: trilinear: {{[0-9]+}} cases, 0 mismatches
# CHECK: area: {{[0-9]+}} cases, 0 mismatches

import numpy as np
import torch
import torch.nn.functional as F

from memopt.exporter.ops.spatial import interpolation_matrix

MODES = {"nearest": 1, "nearest-exact": 1, "linear": 1, "bilinear": 2,
         "bicubic": 2, "trilinear": 3, "area": 2}
TAPS = {"nearest": 1, "nearest-exact": 1, "linear": 2, "bilinear": 2,
        "bicubic": 4, "trilinear": 2}
SCALES = [0.5, 0.6, 0.99, 1.0, 1.02, 1.5, 2.0, 2.1, 3.3]


def apply(matrix, z, dims):
    letters = "ijk"[:dims]
    spec = ",".join("%s%s" % (o, i) for o, i in zip("abc", letters))
    return np.einsum("%s,%s->%s" % (spec, letters, "abc"[:dims]),
                     *[matrix] * dims, z)


def main():
    torch.manual_seed(0)
    for mode, dims in MODES.items():
        corners = [False, True] if mode in ("linear", "bilinear", "bicubic",
                                            "trilinear") else [None]
        cases = mismatches = 0
        for align_corners in corners:
            for n in range(1, 7):
                calls = [dict(size=(m,) * dims) for m in range(1, 13)]
                if mode != "area":
                    calls += [dict(scale_factor=s) for s in SCALES]
                for call in calls:
                    x = torch.randn((1, 1) + (n,) * dims,
                                    dtype=torch.float64)
                    try:
                        y = F.interpolate(x.float(), mode=mode,
                                          align_corners=align_corners,
                                          **call)
                    except RuntimeError:  # an empty result
                        continue
                    m = y.shape[-1]
                    matrix = interpolation_matrix(
                        mode, n, m, call.get("scale_factor"), align_corners)
                    z = x[0, 0].numpy()
                    error = np.abs(apply(matrix.astype(np.float64), z, dims)
                                   - y[0, 0].double().numpy()).max()
                    cases += 1
                    taps = TAPS.get(mode, -(-n // m) + 1)  # area: a window
                    bound = 2 * taps ** dims * 1.5 ** dims * 2.0 ** -24 * \
                        np.abs(z).max()
                    if not error <= bound:
                        mismatches += 1
                        print("%s: n=%d %s align_corners=%s: error %.3g"
                              % (mode, n, call, align_corners, error))
        print("%s: %d cases, %d mismatches" % (mode, cases, mismatches))


if __name__ == "__main__":
    main()
