# The PyTorch reference of differential testing (bench/differential/
# reference.py): its Philox4x32-10 reproduces the known answers the runtimes
# are tested against (so its dropout masks are the runtime's), and its
# emulation of mixed-precision rounding tells the ill-conditioned graph of
# seed 154 (a layer norm of nearly constant rows, a fused attention whose
# backward reads its rounded output) from a well-conditioned
# one, in the figures docs/Reliability.md quotes.
#
# REQUIRES: torch
# RUN: %python %s | FileCheck %s
#
# CHECK: philox 6627e8d5 e169c58d bc57ac4c 9b00dbd8
# CHECK: philox 408f276d 41c83b0e a20bc7c6 6d5451fd
# CHECK: philox d16cfe09 94fdcceb 5001e420 24126ea1
# CHECK: mask kept 0.9{{[0-9]+}} of 100000 at p 0.1
# CHECK: seed 154 bf16 ill-conditioned: p7 2.6
# CHECK: seed 154 f16 ill-conditioned: p7 0.4
# CHECK: seed 1 bf16 well-conditioned

import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench", "differential"))
import randgraph  # noqa: E402
import reference  # noqa: E402

# Random123's kat_vectors for Philox4x32-10 (also in
# unittests/Runtime/PhiloxKnownAnswers.h).
VECTORS = [((0, 0, 0, 0), (0, 0)),
           ((0xffffffff,) * 4, (0xffffffff, 0xffffffff)),
           ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
            (0xa4093822, 0x299f31d0))]
for counter, key in VECTORS:
    words = reference.philox4x32_10([[c] for c in counter], key)
    print("philox " + " ".join(f"{int(w[0]):08x}" for w in words))

mask = reference.dropout_mask(100000, 0.1, seed=3, stream=1)
print(f"mask kept {mask.mean():.4f} of {mask.size} at p 0.1")

for seed, precision in ((154, "bf16"), (154, "f16"), (1, "bf16")):
    graph = randgraph.generate(seed)
    loss, params = reference.rounding_error(graph, precision)
    worst = max(params, key=params.get)
    # The bf16 parameter tolerance of bench/differential/run.py (fp16's is
    # tighter).
    if params[worst] > 0.2:
        print(f"seed {seed} {precision} ill-conditioned: {worst} "
              f"{params[worst]:.3g}")
    else:
        print(f"seed {seed} {precision} well-conditioned")
    assert np.isfinite(loss)
