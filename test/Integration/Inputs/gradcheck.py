"""Finite-difference check of memopt's gradients, end to end.

Each case is a loss function around one op, whose parameters are the op's
differentiable operands:

    loss = sum(op(params, inputs) * r)        (r: a fixed random input)

or the op's own loss. memopt-compile builds it with SGD (lr 1, no momentum,
no weight decay), so one step of OUT/train turns each parameter p into
p - dloss/dp: the analytic gradient is the difference of the parameters
before and after. The oracle is the central difference (L(p + h) - L(p - h))
/ 2h of the loss that OUT/train prints for perturbed parameters.

The kernels compute in f32, so the difference is checked with a stated
tolerance: max |fd - analytic| <= RTOL * max(|analytic|max, 1e-2).
"""

import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "python"))
import memopt.safetensors as st  # noqa: E402

RTOL = 2e-2
STEP = 1e-2


def _type(shape, dtype="f32"):
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims}x{dtype}>" if shape else f"tensor<{dtype}>"


class Case:
    """A loss function around `body`.

    params/inputs: {name: numpy array}; `body` is MLIR that uses %<name> and
    defines %y of shape `out` (or, with `is_loss`, the loss %l itself).
    """

    def __init__(self, name, body, params, inputs=None, out=None,
                 is_loss=False, state=None):
        self.name, self.body = name, body
        self.params, self.inputs = params, dict(inputs or {})
        # Non-trained state: `body` defines %<name>_new for each.
        self.state = dict(state or {})
        self.out, self.is_loss = out, is_loss
        if not is_loss:
            rng = np.random.default_rng(len(name))
            self.inputs["r"] = rng.standard_normal(out).astype(np.float32)

    def mlir(self):
        args = []
        for name, value in self.inputs.items():
            dtype = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64",
                     np.dtype(np.bool_): "i1"}[value.dtype]
            args.append(f"%{name}: {_type(value.shape, dtype)} "
                        f'{{memopt.role = "input", memopt.name = "{name}"}}')
        for role, tensors in (("param", self.params), ("state", self.state)):
            for name, value in tensors.items():
                args.append(f"%{name}: {_type(value.shape)} "
                            f'{{memopt.role = "{role}", memopt.name = "{name}"}}')
        results = ["tensor<f32>"] + [_type(v.shape) for v in self.state.values()]
        lines = [f"func.func @forward({', '.join(args)}) -> "
                 f"({', '.join(results)}) attributes {{memopt.loss}} {{",
                 self.body]
        if not self.is_loss:
            y = _type(self.out)
            dims = ", ".join(str(d) for d in range(len(self.out)))
            lines += [f"  %weighted = memopt.mul %y, %r : {y}",
                      f"  %l = memopt.reduce_sum %weighted dims [{dims}] : "
                      f"{y} to tensor<f32>"]
        values = ["%l"] + [f"%{name}_new" for name in self.state]
        lines += [f"  return {', '.join(values)} : {', '.join(results)}", "}"]
        return "\n".join(lines) + "\n"


def _loss(train, params_path, batch_path):
    run = subprocess.run([train, "--params", params_path, "--batch",
                          batch_path, "--steps", "1"],
                         check=True, capture_output=True, text=True)
    return float(re.search(r"^step 1 loss (\S+)$", run.stdout, re.M).group(1))


def check(case, workdir):
    """Returns a list of failure messages for `case` (empty when it passes)."""
    work = os.path.join(workdir, case.name)
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.mlir")
    with open(model, "w") as f:
        f.write(case.mlir())
    out = os.path.join(work, "out")
    compiled = subprocess.run(
        ["memopt-compile", model, "-o", out, "--optimizer=sgd", "--lr=1",
         "--momentum=0", "--weight-decay=0"], capture_output=True, text=True)
    if compiled.returncode != 0:
        return [f"memopt-compile failed: {compiled.stderr.strip()}"]
    train = os.path.join(out, "train")
    batch = os.path.join(work, "batch.safetensors")
    st.save(case.inputs, batch)
    params = os.path.join(work, "params.safetensors")
    st.save({**case.params, **case.state}, params)
    saved = os.path.join(work, "saved.safetensors")
    subprocess.run([train, "--params", params, "--batch", batch, "--steps",
                    "1", "--save", saved], check=True, capture_output=True)
    after = st.load(saved)

    failures = []
    probe = os.path.join(work, "probe.safetensors")
    for name, value in case.params.items():
        analytic = value.astype(np.float64) - after[name].astype(np.float64)
        numeric = np.zeros_like(analytic)
        for index in np.ndindex(value.shape):
            losses = []
            for sign in (1.0, -1.0):
                moved = {**case.params, **case.state}
                moved[name] = value.copy()
                moved[name][index] += sign * STEP
                st.save(moved, probe)
                losses.append(_loss(train, probe, batch))
            numeric[index] = (losses[0] - losses[1]) / (2 * STEP)
        scale = max(float(np.abs(analytic).max()), 1e-2)
        error = float(np.abs(numeric - analytic).max()) / scale
        if error > RTOL:
            failures.append(f"d/d{name}: relative error {error:.3g}\n"
                            f"  analytic {analytic.ravel()[:8]}\n"
                            f"  numeric  {numeric.ravel()[:8]}")
    return failures


def main(cases, argv):
    """Checks `cases` (all, or those named in argv[2:]) in workdir argv[1]."""
    workdir = argv[1]
    selected = [c for c in cases if len(argv) < 3 or c.name in argv[2:]]
    failed = 0
    for case in selected:
        failures = check(case, workdir)
        status = "FAIL" if failures else "ok"
        print(f"{case.name}: {status}")
        for failure in failures:
            print("  " + failure)
        failed += bool(failures)
    print(f"gradcheck: {len(selected) - failed} of {len(selected)} ops match "
          "finite differences")
    return 1 if failed else 0
