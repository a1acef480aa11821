# Gradients of matrix products, normalisations, embeddings, convolutions,
# pooling, dropout and losses against central finite differences.
#
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
# CHECK: gradcheck: [[N:[0-9]+]] of [[N]] ops match finite differences

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from gradcheck import Case, main  # noqa: E402

rng = np.random.default_rng(2)


def normal(*shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def distinct(*shape):
    """Values far apart, so that a maximum has no near-ties."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.5).astype(np.float32)


def matmul(name, a, b, flags, out):
    ta = f"tensor<{'x'.join(map(str, a))}xf32>"
    tb = f"tensor<{'x'.join(map(str, b))}xf32>"
    ty = f"tensor<{'x'.join(map(str, out))}xf32>"
    return Case(name, f"  %y = memopt.matmul %a, %b{flags} : {ta}, {tb} -> {ty}",
                {"a": normal(*a), "b": normal(*b)}, out=out)


CASES = [
    matmul("matmul", (2, 3), (3, 4), "", (2, 4)),
    matmul("matmul_transpose_lhs", (3, 2), (3, 4), " transpose_lhs", (2, 4)),
    matmul("matmul_transpose_rhs", (2, 3), (4, 3), " transpose_rhs", (2, 4)),
    matmul("matmul_transpose_both", (3, 2), (4, 3),
           " transpose_lhs transpose_rhs", (2, 4)),
    matmul("matmul_batched", (2, 2, 3), (2, 3, 2), "", (2, 2, 2)),
    matmul("matmul_shared_rhs", (2, 2, 3), (4, 3), " transpose_rhs",
           (2, 2, 4)),
    matmul("matmul_shared_rhs_transpose_lhs", (2, 3, 2), (3, 4),
           " transpose_lhs", (2, 2, 4)),
    matmul("matmul_shared_lhs", (2, 3), (2, 3, 2), "", (2, 2, 2)),
    Case("layer_norm",
         "  %y, %mean, %rstd = memopt.layer_norm %x, %w, %b eps 1.0e-05 : "
         "tensor<2x4xf32>, tensor<4xf32> -> tensor<2xf32>",
         {"x": normal(2, 4), "w": normal(4), "b": normal(4)}, out=(2, 4)),
    Case("rms_norm",
         "  %y, %rstd = memopt.rms_norm %x, %w eps 1.0e-06 : "
         "tensor<2x4xf32>, tensor<4xf32> -> tensor<2xf32>",
         {"x": normal(2, 4), "w": normal(4)}, out=(2, 4)),
    Case("batch_norm",
         "  %y, %mean, %rstd, %rm_new, %rv_new = memopt.batch_norm %x, %w, %b, "
         "%rm, %rv eps 1.0e-05 momentum 0.1 : tensor<3x2x2x2xf32>, "
         "tensor<2xf32>",
         {"x": normal(3, 2, 2, 2), "w": normal(2), "b": normal(2)},
         out=(3, 2, 2, 2),
         state={"rm": np.zeros(2, np.float32), "rv": np.ones(2, np.float32)}),
    Case("embedding",
         "  %y = memopt.embedding %w, %i : tensor<4x3xf32>, tensor<2x3xi64> "
         "-> tensor<2x3x3xf32>",
         {"w": normal(4, 3)}, {"i": np.array([[0, 2, 2], [3, 0, 2]])},
         out=(2, 3, 3)),
    Case("conv2d",
         "  %y = memopt.conv2d %x, %w strides [2, 1] padding [1, 1] : "
         "tensor<1x2x4x3xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x2x3xf32>",
         {"x": normal(1, 2, 4, 3), "w": normal(3, 2, 3, 3, scale=0.5)},
         out=(1, 3, 2, 3)),
    Case("conv2d_groups_dilation",
         "  %y = memopt.conv2d %x, %w dilations [2, 2] groups 2 : "
         "tensor<1x4x5x5xf32>, tensor<2x2x2x2xf32> -> tensor<1x2x3x3xf32>",
         {"x": normal(1, 4, 5, 5), "w": normal(2, 2, 2, 2)},
         out=(1, 2, 3, 3)),
    Case("max_pool2d",
         "  %y = memopt.max_pool2d %x kernel [2, 2] strides [2, 1] : "
         "tensor<1x2x4x3xf32> to tensor<1x2x2x2xf32>",
         {"x": distinct(1, 2, 4, 3)}, out=(1, 2, 2, 2)),
    Case("avg_pool2d",
         "  %y = memopt.avg_pool2d %x kernel [3, 3] strides [2, 2] padding "
         "[1, 1] : tensor<1x1x4x4xf32> to tensor<1x1x2x2xf32>",
         {"x": normal(1, 1, 4, 4)}, out=(1, 1, 2, 2)),
    Case("dropout",
         "  %y = memopt.dropout %x p 5.0e-01 seed 3 stream 1 : tensor<4x4xf32>",
         {"x": normal(4, 4)}, out=(4, 4)),
    Case("cross_entropy_mean",
         "  %l = memopt.cross_entropy %z, %t ignore_index 1 : "
         "tensor<4x3xf32>, tensor<4xi64>",
         {"z": normal(4, 3)}, {"t": np.array([0, 1, 2, 2])}, is_loss=True),
    Case("cross_entropy_sum",
         "  %l = memopt.cross_entropy %z, %t reduction<sum> : "
         "tensor<2x2x3xf32>, tensor<2x2xi64>",
         {"z": normal(2, 2, 3)}, {"t": np.array([[0, 1], [2, 2]])},
         is_loss=True),
    Case("mse_loss",
         "  %l = memopt.mse_loss %a, %b : tensor<2x3xf32>",
         {"a": normal(2, 3), "b": normal(2, 3)}, is_loss=True),
]

if __name__ == "__main__":
    sys.exit(main(CASES, sys.argv))
