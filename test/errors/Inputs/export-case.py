"""Runs one malformed use of the exporter (memopt.export) for exporter.test.

    export-case.py CASE OUT

Each case raises memopt.ExportError (or, for an unwritable path, OSError);
the uncaught exception's last line is the one-line error exporter.test
checks, and Python exits with code 1.
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.logcumsumexp(self.fc(x), dim=-1).sum()


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 4)

    def forward(self, x):
        return self.rnn(x)[0].sum()


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).sum()


def main(case, out):
    x = torch.randn(3, 4)
    if case == "unsupported-op":
        memopt.export(Unsupported(), (x,), out + ".mlir")
    elif case == "unsupported-module":
        memopt.export(Recurrent(), (x.unsqueeze(0),), out + ".mlir")
    elif case == "not-a-module":
        memopt.export(lambda t: t.sum(), (x,), out + ".mlir")
    elif case == "not-a-tensor":
        memopt.export(Linear(), ([1.0, 2.0],), out + ".mlir")
    elif case == "shape-mismatch":
        memopt.export(Linear(), (torch.randn(3, 5),), out + ".mlir")
    elif case == "double":
        memopt.export(Linear(), (x.double(),), out + ".mlir")
    elif case == "safetensors-path":
        memopt.export(Linear(), (x,), out + ".safetensors")
    elif case == "no-dir":
        memopt.export(Linear(), (x,), out + "/no/such/dir/model.mlir")
    elif case == "mlir-is-dir":
        # OUT/model.mlir is a directory: the parameters are written first,
        # then removed again when the module cannot be.
        memopt.export(Linear(), (x,), out + "/model.mlir")
    else:
        raise SystemExit("unknown case " + case)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
