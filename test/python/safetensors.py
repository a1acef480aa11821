# The parameters and state written next to the IR: every parameter (tied
# ones once) and batch-norm running statistic, bit for bit, in argument
# order, in the safetensors layout; memopt.safetensors reads them back.
#
# REQUIRES: torch
# RUN: rm -f %t.mlir %t.safetensors
# RUN: %python %s %t | FileCheck %s
# RUN: memopt-opt %t.mlir -o /dev/null

import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt
from memopt import safetensors


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx, image):
        h = self.emb(idx)                                   # [2, 6]
        c = self.bn(self.conv(image)).mean(dim=(2, 3))      # [2, 3]
        h = h + torch.cat([c, c], dim=1)
        return self.head(h).sum()


torch.manual_seed(0)
model = Model()
with torch.no_grad():  # running statistics that are not the defaults
    model.bn.running_mean.uniform_()
    model.bn.running_var.uniform_(1, 2)
path = sys.argv[1]
memopt.export(model, (torch.tensor([1, 7]), torch.randn(2, 1, 4, 4)),
              path + ".mlir")

loaded = safetensors.load(path + ".safetensors")
expected = ["emb.weight", "conv.weight", "conv.bias", "bn.weight", "bn.bias",
            "bn.running_mean", "bn.running_var"]
assert list(loaded) == expected, list(loaded)
state = model.state_dict()
for name, array in loaded.items():
    assert array.dtype == np.float32, (name, array.dtype)
    assert np.array_equal(array, state[name].numpy()), name
print("round trip:", ", ".join(loaded))
# CHECK: round trip: emb.weight, conv.weight, conv.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var

# The raw layout: u64 header length (a multiple of 8), JSON, then the data.
with open(path + ".safetensors", "rb") as f:
    blob = f.read()
(length,) = struct.unpack("<Q", blob[:8])
assert length % 8 == 0
header = json.loads(blob[8:8 + length])
begin, end = header["emb.weight"]["data_offsets"]
assert header["emb.weight"]["dtype"] == "F32"
assert header["emb.weight"]["shape"] == [11, 6]
raw = np.frombuffer(blob[8 + length + begin:8 + length + end], "<f4")
assert np.array_equal(raw.reshape(11, 6), state["emb.weight"].numpy())
assert 8 + length + max(h["data_offsets"][1] for h in header.values()) \
    == len(blob)
print("layout ok")
# CHECK: layout ok

# Other dtypes and 0-d tensors survive a round trip too.
tensors = {"i": np.arange(6, dtype=np.int64).reshape(2, 3),
           "h": np.array([1.5, -2.0], np.float16),
           "b": np.array([True, False]), "s": np.float32(3.25)}
safetensors.save(tensors, path + ".other.safetensors")
back = safetensors.load(path + ".other.safetensors")
for name, array in tensors.items():
    assert back[name].dtype == np.asarray(array).dtype, name
    assert np.array_equal(back[name], array), name
print("dtypes ok")
# CHECK: dtypes ok

# A truncated file is refused with a message, not read past its end.
with open(path + ".bad.safetensors", "wb") as f:
    f.write(blob[:len(blob) - 4])
try:
    safetensors.load(path + ".bad.safetensors")
except ValueError as e:
    print("error:", e)
# CHECK: error: {{.*}}.bad.safetensors: tensor 'bn.running_var' has data offsets


# A failed export leaves the files of an earlier export untouched and no
# temporary file behind.
class Unsupported(nn.Module):
    def forward(self, x):
        return torch.logcumsumexp(x, 0).sum()


before = open(path + ".mlir").read()
try:
    memopt.export(Unsupported(), (torch.randn(3),), path + ".mlir")
except memopt.ExportError as e:
    print("export failed:", e)
# CHECK: export failed: unsupported op 'torch.logcumsumexp' at the top level
assert open(path + ".mlir").read() == before
assert np.array_equal(safetensors.load(path + ".safetensors")["emb.weight"],
                      state["emb.weight"].numpy())
leftovers = [n for n in os.listdir(os.path.dirname(os.path.abspath(path)))
             if n.startswith(".tmp-")]
assert not leftovers, leftovers
print("failure leaves no trace")
# CHECK: failure leaves no trace

# The files get a plain open's permissions (0666 less the umask), not the
# temporary file's private 0600.
umask = os.umask(0o022)
os.umask(umask)
for suffix in (".mlir", ".safetensors"):
    mode = os.stat(path + suffix).st_mode & 0o777
    print("mode of", suffix, oct(mode), "expected", oct(0o666 & ~umask))
# CHECK: mode of .mlir [[MODE:0o[0-7]+]] expected [[MODE]]
# CHECK: mode of .safetensors [[MODE]] expected [[MODE]]
