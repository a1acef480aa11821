#!/usr/bin/env bash
#===- run.sh - ZeRO-3 with optimizer offload on a Llama 2 70B shape -------===#
#
# Exports Llama 2 70B's shape from PyTorch's meta device (80 layers, 8192
# wide, 64 query heads over 8 key/value heads, SwiGLU of 28672, vocab 32000;
# examples/pytorch/models.py) at batch 1 x 4096, and plans full fine-tuning
# (AdamW with 32-bit moments, --clip-grad-norm=1, bf16, per-block remat) on
# 8 x h100-80gb, each rank training its own batch (--rank-batch): ZeRO-3
# alone, then ZeRO-3 with the optimizer offloaded, then with the weight
# shards offloaded too (--offload=params), then with the blocks' inputs
# that remat keeps as well (--offload=params,activations; docs/Offload.md).
# Prints
# one Markdown row per plan: the rank's planned device peak and its pools,
# the host memory of a rank and of the 8-GPU node, the bytes each step
# copies over the host link and the estimated step, next to the anchor,
# torchtune's 13.9 GiB per GPU measured for Llama-3.1-70B with FSDP CPU
# offload (which also offloads the parameters and the gradients).
#
#   ninja -C build memopt-compile
#   bench/offload/run.sh           # about 3 minutes; needs torch
#   OFFLOADS=params,activations bench/offload/run.sh   # one row
#
#===------------------------------------------------------------------------===#
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tool="${MEMOPT_COMPILE:-$repo/build/bin/memopt-compile}"
if [[ ! -x "$tool" ]]; then
  echo "run.sh: memopt-compile not found at '$tool' (build it or set MEMOPT_COMPILE)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$repo/examples/pytorch/export_large.py" llama2-70b "$tmp/llama2-70b.mlir" >&2

echo "| plan (8 x h100-80gb) | device per GPU (budget 75 GiB) | weights | grads | activations | host per GPU | host per node | copied per step | est. step | torchtune FSDP + CPU offload |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for offload in ${OFFLOADS:-none optimizer params params,activations}; do
  "$tool" "$tmp/llama2-70b.mlir" --report-only --device=h100-80gb \
    --data-parallel=8 --zero-stage=3 --rank-batch --mixed-precision=bf16 \
    --remat=blocks --clip-grad-norm=1 --optimizer-state=32bit \
    --offload=$offload > "$tmp/${offload/,/-}.txt" 2>&1 || true
  "$tool" "$tmp/llama2-70b.mlir" --report-only --report=json --device=h100-80gb \
    --data-parallel=8 --zero-stage=3 --rank-batch --mixed-precision=bf16 \
    --remat=blocks --clip-grad-norm=1 --optimizer-state=32bit \
    --offload=$offload > "$tmp/${offload/,/-}.json" 2>/dev/null || true
  /usr/bin/python3 - "$tmp/${offload/,/-}.txt" "$tmp/${offload/,/-}.json" "$offload" <<'PY'
import json, re, sys
text, path, offload = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
LABEL = {"none": "", "optimizer": " + offload",
         "params": " + offload + params",
         "params,activations": " + offload + params + activations"}
gib = lambda b: "%.2f GiB" % (b / 2**30)
if "cannot be met" in text:
    peak = re.search(r"smallest planned peak is [^(]+\((\d+) B\)", text)
    print("| ZeRO-3%s | does not fit (%s) | | | | | | | | 13.9 GiB |" % (
        LABEL[offload], gib(int(peak.group(1))) if peak else "?"))
    sys.exit(0)
r = json.load(open(path))
pools = r["pools"]
total = sum(pools.values())
host = r.get("host", {})
step = re.search(r"estimated step ([0-9.]+ \w+)", text)
print("| ZeRO-3%s | %s | %s | %s | %s | %s | %s | %s | %s | 13.9 GiB |" % (
    LABEL[offload], gib(total),
    gib(pools["params"] + pools["master_params"]), gib(pools["grads"]),
    gib(pools["activations"]), gib(host.get("total_bytes", 0)),
    gib(8 * host.get("total_bytes", 0)),
    gib(host.get("to_host_bytes", 0) + host.get("to_device_bytes", 0)),
    step.group(1) if step else "-"))
PY
done
