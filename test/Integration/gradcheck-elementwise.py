# Gradients of elementwise ops against central finite differences.
#
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
# CHECK: gradcheck: [[N:[0-9]+]] of [[N]] ops match finite differences

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from gradcheck import Case, main  # noqa: E402

rng = np.random.default_rng(0)
S = (2, 3)
T = "tensor<2x3xf32>"


def normal():
    return rng.standard_normal(S).astype(np.float32)


def positive():
    return rng.uniform(0.5, 2.0, S).astype(np.float32)


def away_from_zero():
    x = normal()
    return np.where(np.abs(x) < 0.2, 0.5, x).astype(np.float32)


def away_from(*kinks):
    """Normal values at least 0.1 from each kink (STEP is 1e-2)."""
    def init():
        x = rng.uniform(-4.0, 4.0, S).astype(np.float32)
        for kink in kinks:
            x = np.where(np.abs(x - kink) < 0.1, kink + 0.5, x)
        return x.astype(np.float32)
    return init


def with_zero():
    """Normal values and one exact 0 (where sinc's slope is 0)."""
    x = normal()
    x[0, 0] = 0.0
    return x


def inside_unit():
    return rng.uniform(-0.8, 0.8, S).astype(np.float32)


def unary(op, init=normal, attrs=""):
    return Case(op + attrs.replace(" ", "_").replace("<", "_").replace(">", ""),
                f"  %y = memopt.{op} %a{attrs} : {T}", {"a": init()}, out=S)


CASES = [
    unary("neg"), unary("exp"), unary("log", positive),
    unary("sqrt", positive), unary("rsqrt", positive), unary("tanh"),
    unary("sigmoid"), unary("relu", away_from_zero), unary("silu"),
    unary("gelu"), unary("gelu", attrs=" approximate<tanh>"),
    unary("hardswish", away_from(-3.0, 3.0)),
    unary("hardsigmoid", away_from(-3.0, 3.0)), unary("mish"),
    unary("abs", away_from_zero), unary("sin"), unary("cos"), unary("erf"),
    unary("expm1"), unary("log1p", positive), unary("softplus"),
    unary("tan", inside_unit), unary("asin", inside_unit),
    unary("acos", inside_unit), unary("atan"),
    unary("floor", away_from(-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)),
    unary("ceil", away_from(-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)),
    unary("round", away_from(-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5)),
    unary("trunc", away_from(-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)),
    unary("sinc", with_zero),
    unary("clamp", away_from(-0.5, 1.0), " min -0.5 max 1.0"),
    unary("clamp", away_from(0.0, 6.0), " min 0.0 max 6.0 inclusive = false"),
    unary("clamp", away_from(0.25), " max 0.25"),
    Case("add", f"  %y = memopt.add %a, %b : {T}",
         {"a": normal(), "b": normal()}, out=S),
    Case("sub", f"  %y = memopt.sub %a, %b : {T}",
         {"a": normal(), "b": normal()}, out=S),
    Case("mul", f"  %y = memopt.mul %a, %b : {T}",
         {"a": normal(), "b": normal()}, out=S),
    Case("maximum", f"  %y = memopt.maximum %a, %b : {T}",
         {"a": normal(), "b": normal()}, out=S),
    Case("reduce_max", "  %y = memopt.reduce_max %a dims [1] : "
         f"{T} to tensor<2xf32>", {"a": normal()}, out=(2,)),
    Case("div", f"  %y = memopt.div %a, %b : {T}",
         {"a": normal(), "b": positive()}, out=S),
    Case("add_scalar", f"  %y = memopt.add_scalar %a, 2.5 : {T}",
         {"a": normal()}, out=S),
    Case("mul_scalar", f"  %y = memopt.mul_scalar %a, -1.5 : {T}",
         {"a": normal()}, out=S),
    Case("pow_scalar", f"  %y = memopt.pow_scalar %a, 3.0 : {T}",
         {"a": positive()}, out=S),
    Case("where", f"  %y = memopt.where %c, %a, %b : tensor<2x3xi1>, {T}",
         {"a": normal(), "b": normal()},
         {"c": np.array([[1, 0, 1], [0, 0, 1]], dtype=np.bool_)}, out=S),
    Case("masked_fill",
         f"  %y = memopt.masked_fill %a, %m, -3.0 : {T}, tensor<2x3xi1>",
         {"a": normal()},
         {"m": np.array([[0, 1, 0], [1, 0, 0]], dtype=np.bool_)}, out=S),
]

if __name__ == "__main__":
    sys.exit(main(CASES, sys.argv))
