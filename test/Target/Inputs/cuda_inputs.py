"""Writes random parameters and a random batch for a compiled model.

    cuda_inputs.py OUT/model.json PARAMS BATCH [--int-high N] [--seed S]

Reads the model description that memopt-compile writes and draws, with a
fixed seed: parameters and float inputs from N(0, 0.02) (N(0, 1) for
inputs; 1-D parameters whose name ends in "weight" are ones, as PyTorch
initialises norm layers), state "*running_var" ones and other state zeros,
and integer inputs and labels uniformly in [0, N). Optimizer state is left
out, so the driver starts it at zero. numpy only: no torch needed.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "python"))
import memopt.safetensors  # noqa: E402

DTYPES = {"f32": np.float32, "i64": np.int64, "i32": np.int32, "i1": np.bool_}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("params")
    parser.add_argument("batch")
    parser.add_argument("--int-high", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.model) as f:
        model = json.load(f)
    rng = np.random.default_rng(args.seed)
    params, batch = {}, {}
    for arg in model["arguments"]:
        role, name, shape = arg["role"], arg["name"], tuple(arg["shape"])
        if role in ("loss", "optim"):
            continue
        dtype = DTYPES.get(arg["dtype"])
        if dtype is None:
            sys.exit(f"cuda_inputs.py: dtype {arg['dtype']} of '{name}' is "
                     "not supported")
        if dtype in (np.int64, np.int32):
            value = rng.integers(0, args.int_high, size=shape).astype(dtype)
        elif dtype == np.bool_:
            value = rng.integers(0, 2, size=shape).astype(dtype)
        elif role == "state":
            value = (np.ones if name.endswith("running_var") else np.zeros)(
                shape, dtype)
        elif role == "param" and len(shape) == 1 and name.endswith("weight"):
            value = np.ones(shape, dtype)
        elif role == "param":
            value = (rng.standard_normal(shape) * 0.02).astype(dtype)
        else:
            value = rng.standard_normal(shape).astype(dtype)
        (params if role in ("param", "state") else batch)[name] = value
    memopt.safetensors.save(params, args.params)
    memopt.safetensors.save(batch, args.batch)


if __name__ == "__main__":
    main()
