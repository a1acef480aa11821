# Gradients of shape ops and reductions against central finite differences.
#
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
# CHECK: gradcheck: [[N:[0-9]+]] of [[N]] ops match finite differences

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from gradcheck import Case, main  # noqa: E402

rng = np.random.default_rng(1)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = [
    Case("broadcast_new_dim",
         "  %y = memopt.broadcast %a dims [1] : tensor<3xf32> to tensor<2x3xf32>",
         {"a": normal(3)}, out=(2, 3)),
    Case("broadcast_size_one",
         "  %y = memopt.broadcast %a dims [0, 1] : tensor<2x1xf32> to tensor<2x3xf32>",
         {"a": normal(2, 1)}, out=(2, 3)),
    Case("reshape",
         "  %y = memopt.reshape %a : tensor<2x3xf32> to tensor<3x2xf32>",
         {"a": normal(2, 3)}, out=(3, 2)),
    Case("transpose",
         "  %y = memopt.transpose %a perm [2, 0, 1] : tensor<2x3x2xf32> to tensor<2x2x3xf32>",
         {"a": normal(2, 3, 2)}, out=(2, 2, 3)),
    Case("slice",
         "  %y = memopt.slice %a starts [0, 1] limits [3, 5] strides [2, 2] : tensor<3x5xf32> to tensor<2x2xf32>",
         {"a": normal(3, 5)}, out=(2, 2)),
    Case("concat",
         "  %y = memopt.concat %a, %b dim 1 : tensor<2x2xf32>, tensor<2x3xf32> -> tensor<2x5xf32>",
         {"a": normal(2, 2), "b": normal(2, 3)}, out=(2, 5)),
    Case("reduce_sum",
         "  %y = memopt.reduce_sum %a dims [1] : tensor<2x3x2xf32> to tensor<2x2xf32>",
         {"a": normal(2, 3, 2)}, out=(2, 2)),
    Case("reduce_mean",
         "  %y = memopt.reduce_mean %a dims [0, 2] : tensor<2x3x2xf32> to tensor<3xf32>",
         {"a": normal(2, 3, 2)}, out=(3,)),
    Case("softmax",
         "  %y = memopt.softmax %a dim 1 : tensor<2x4xf32>",
         {"a": normal(2, 4)}, out=(2, 4)),
    Case("log_softmax",
         "  %y = memopt.log_softmax %a dim 0 : tensor<3x2xf32>",
         {"a": normal(3, 2)}, out=(3, 2)),
]

if __name__ == "__main__":
    sys.exit(main(CASES, sys.argv))
