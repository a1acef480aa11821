# An index computed in the step that PyTorch would refuse stops the step
# with the lookup's range error, instead of reading a neighbouring element:
# gather by a label past the class count or below 0 (position -1 is what
# the gather's positions make of an index outside its dimension). An input
# that the step uses itself as a lookup's index (x[index]) is checked
# against the rows by Program.step before the step runs, which leaves the
# program usable.
#
# memopt.compile loads the step into this process, which an instrumented
# (sanitized) build's library cannot join, as python-api.py.
#
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && %python %s %t | FileCheck %s
#
# CHECK: rows [0, 1, 5, 1]: 'z' holds 5 at element 2, outside [0, 4)
# CHECK: valid step: loss {{-?[0-9]}}
# CHECK: gather [0, 3, 2, 1]: runtime error during step 2: memopt_embedding: index -1 at position 1 out of range [0, 12)
# CHECK: gather [0, -1, 2, 1]: runtime error during step 1: memopt_embedding: index -1 at position 1 out of range [0, 12)

import os
import sys

import torch
import torch.nn as nn

import memopt


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3))

    def forward(self, y, z):
        return torch.gather(self.w, 1, y.unsqueeze(1)).sum() + \
            self.w[z].sum()


def compiled(name):
    model = Model()
    return memopt.compile(model, (VALID, VALID),
                          out_dir=os.path.join(sys.argv[1], name),
                          optimizer=torch.optim.SGD(model.parameters(),
                                                    lr=0.1))


def step(program, name, y, z):
    try:
        program.step(torch.tensor(y), torch.tensor(z))
        print("%s: step ran" % name)
    except (memopt.ProgramError, ValueError) as e:
        print("%s %s: %s" % (name, z if name == "rows" else y, e))


VALID = torch.tensor([0, 1, 2, 1])
first = compiled("first")
step(first, "rows", [0, 1, 2, 1], [0, 1, 5, 1])
print("valid step: loss %.6f" % first.step(VALID, VALID))
step(first, "gather", [0, 3, 2, 1], [0, 1, 2, 1])
first.close()
second = compiled("second")
step(second, "gather", [0, -1, 2, 1], [0, 1, 2, 1])
second.close()
