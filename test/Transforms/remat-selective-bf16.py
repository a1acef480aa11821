# --remat=selective under BF16 keeps no attention-score-sized tensor
# (issue: score casts were not candidates, so score-sized bf16 and f32
# copies stayed). On GPT-2 small (examples/gpt2-small.mlir, sequence 1024),
# the forward values the backward reads are listed from the rewritten step;
# none may have a 1024 x 1024 (sequence x sequence) shape. Without the
# minimal saved set (cheap-recompute off) 24 of them do, which shows the
# check can fail.
#
# RUN: memopt-opt --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-remat="strategy=selective cheap-recompute" %examples/gpt2-small.mlir -o %t.mlir
# RUN: %python %s %t.mlir | FileCheck %s
# RUN: memopt-opt --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-remat="strategy=selective" %examples/gpt2-small.mlir -o %t.off.mlir
# RUN: %python %s %t.off.mlir | FileCheck %s --check-prefix=OFF
#
# CHECK: {{[1-9][0-9]*}} forward values read by the backward, 0 of sequence x sequence shape
# OFF: {{[1-9][0-9]*}} forward values read by the backward, 24 of sequence x sequence shape

import re
import sys

DEF = re.compile(r"^\s*(%[\w]+)(?::\d+)?(?:, %[\w]+)* = (memopt\.\w+)")
SEQ_BY_SEQ = re.compile(r"x1024x1024x")


def main():
    lines = open(sys.argv[1]).read().splitlines()
    start = next(i for i, line in enumerate(lines) if "memopt.train_step" in line)
    defined, first_backward = {}, None
    for i, line in enumerate(lines[start:], start):
        match = DEF.match(line)
        if not match:
            continue
        for name in re.findall(r"%[\w]+", line.split("=")[0]):
            defined[name] = (i, line)
        op = match.group(2)
        if first_backward is None and (op.endswith("_grad") or
                                       op == "memopt.scale_loss"):
            first_backward = i
    read = {}
    for i, line in enumerate(lines[first_backward:], first_backward):
        if "=" not in line:
            continue
        for name in re.findall(r"%[\w]+", line.split("=", 1)[1]):
            if name in defined and defined[name][0] < first_backward:
                read[name] = defined[name][1]
    big = [name for name, line in read.items()
           if SEQ_BY_SEQ.search(line.split(":")[-1])]
    print(f"{len(read)} forward values read by the backward, {len(big)} of "
          f"sequence x sequence shape")


if __name__ == "__main__":
    main()
