"""The PyTorch element types memopt takes, and their names in the IR."""

import numpy as np
import torch

from .errors import ExportError

DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "i1",
}
NUMPY = {"f32": np.float32, "i64": np.int64, "i32": np.int32, "i1": np.bool_}


def dtype_name(dtype, what):
    if dtype not in DTYPES:
        raise ExportError("%s has dtype %s; memopt supports float32 data and "
                          "int64/int32 indices" % (what, dtype))
    return DTYPES[dtype]
