#!/usr/bin/env bash
#===- run.sh - the budget search on the large bundled configurations ------===#
#
# Times `memopt-compile --explore --mixed-precision=auto` (every combination
# of precision x remat x K compiled up to the
# planned arena) on examples/gpt2-small.mlir and examples/llama-7b.mlir for
# every device profile, and prints one Markdown table row per run: wall
# time, combinations, the chosen one, its planned peak and estimated step
# time, next to the target (< 60 s per --explore on 2 cores). Then checks
# the cost model's FLOP count of each model against the closed form
# (6 N T for the weight GEMMs plus attention, Kaplan et al. 2020). Last,
# LLaMA-7B full fine-tuning (AdamW, --clip-grad-norm=1, 1 x 2048) on one
# device of each kind with the search held to one device and 32-bit moments:
# the search offloads the optimizer (--offload=optimizer, docs/Offload.md);
# the compiled plan's device peak, host memory, bytes copied each step over
# the host link and estimated step time.
#
#   ninja -C build memopt-compile
#   bench/budget/run.sh                 # about 2 minutes
#   MEMOPT_COMPILE=<binary> bench/budget/run.sh
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

echo "| model | device | --explore wall time (target < 60 s) | combinations | chosen | planned peak | budget | est. step | tokens/s |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|"
for model in gpt2-small llama-7b; do
  for device in a100-40gb a100-80gb h100-80gb h200-141gb gh200-96gb rtx4090-24gb; do
    json="$tmp/$model-$device.json"
    start=$(date +%s.%N)
    "$tool" "$repo/examples/$model.mlir" --explore --report=json --mixed-precision=auto \
      --device="$device" > "$json" 2>/dev/null || true
    end=$(date +%s.%N)
    /usr/bin/python3 - "$json" "$model" "$device" "$start" "$end" <<'PY'
import json, sys
path, model, device, start, end = sys.argv[1:]
r = json.load(open(path))
rows = r["combinations"]
gib = lambda b: "%.2f GiB" % (b / 2**30)
c = rows[r["chosen"]] if r["chosen"] is not None else None
chosen = ("%s/%s/K=%d" % (c["precision"], c["remat"], c["micro_batches"])
          if c else "none fits (smallest %s)" % gib(r["infeasible"]["smallest_peak_bytes"]))
print("| %s | %s | %.2f s | %d | %s | %s | %s | %s | %s |" % (
    model, device, float(end) - float(start), len(rows), chosen,
    gib(c["planned_peak_bytes"]) if c else "-", gib(r["budget_bytes"]),
    "%.3f s" % c["step_seconds"] if c else "-",
    "%.0f" % c["tokens_per_second"] if c else "-"))
PY
  done
done

echo
echo "| model | counted FLOPs (none/none/K=1) | closed form 6NT + 12 L b s^2 h | ratio |"
echo "|---|---:|---:|---:|"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
# (parameters in GEMMs incl. the LM head, layers, batch, sequence, width)
models = {
    "gpt2-small": (12 * (12 * 768 * 768) + 50257 * 768, 12, 8, 1024, 768),
    "llama-7b": (32 * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096,
                 32, 1, 2048, 4096),
}
for name, (n, layers, b, s, h) in models.items():
    r = json.load(open("%s/%s-h100-80gb.json" % (tmp, name)))
    row = next(c for c in r["combinations"] if c["precision"] == "none"
               and c["remat"] == "none" and c["micro_batches"] == 1)
    # Forward + backward: 6 FLOPs per GEMM parameter per token, and the two
    # attention GEMMs (QK^T, PV: 4 b s^2 h per layer forward) three times.
    closed = 6 * n * b * s + 12 * layers * b * s * s * h
    print("| %s | %.4g | %.4g | %.3f |" % (name, row["flops"], closed,
                                          row["flops"] / closed))
PY

echo
echo "| device | chosen | on the device (budget) | smallest without offload | host memory | copied per step | over | transfer | not hidden | est. step |"
echo "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"
for device in rtx4090-24gb a100-40gb h100-80gb; do
  json="$tmp/offload-$device.json"
  "$tool" "$repo/examples/llama-7b.mlir" --explore --report=json \
    --mixed-precision=bf16 --frozen-weights=bf16 --clip-grad-norm=1 \
    --data-parallel=1 --optimizer-state=32bit --device="$device" \
    > "$json" 2>/dev/null || true
  /usr/bin/python3 - "$json" "$device" <<'PY'
import json, sys
path, device = sys.argv[1:]
r = json.load(open(path))
gib = lambda b: "%.2f GiB" % (b / 2**30)
rows = [c for c in r["combinations"] if "planned_peak_bytes" in c]
resident = min((c["planned_peak_bytes"] for c in rows
                if c["offload"] == "none"), default=None)
if r["chosen"] is None:
    print("| %s | none fits (smallest %s) | | | | | | | | |" % (
        device, gib(r["infeasible"]["smallest_peak_bytes"])))
    sys.exit(0)
c = r["combinations"][r["chosen"]]
link = r["device"]
copied = c["transfer_bytes"]
print("| %s | %s/%s/K=%d/%s | %s (%s) | %s | %s | %s | %s | %.0f ms | %.0f ms | %.2f s |" % (
    device, c["precision"], c["remat"], c["micro_batches"], c["offload"],
    gib(c["planned_peak_bytes"]), gib(r["budget_bytes"]),
    gib(resident) if resident else "-", gib(c["host_bytes"]), gib(copied),
    link["host_link"], c["transfer_seconds"] * 1e3,
    c["exposed_transfer_seconds"] * 1e3, c["step_seconds"]))
PY
done
