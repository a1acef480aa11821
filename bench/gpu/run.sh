#!/usr/bin/env bash
#===- run.sh - GPT training step on the GPU: memopt vs PyTorch eager -------===#
#
# Generates the GPT of bench/gpu/gen_gpt.py (default GPT-2 small, batch 8 x
# 1024 tokens), compiles it with memopt-compile --target=cuda in four
# configurations (fp32/bf16 x remat none/blocks), trains each for STEPS
# steps and prints one Markdown table: mean step time (first step excluded)
# and the runtime's device memory high-water mark (arena + workspace) next
# to the planned total, and the same for PyTorch eager with the same
# technique (torch_gpt.py) when torch with CUDA is installed. A
# configuration memopt-compile rejects (a flag not built yet) reads "n/a".
#
#   bench/gpu/run.sh [BUILD_DIR]      # default: build
#   env: STEPS (5), WORK (/tmp/memopt-bench-gpu), GPT_ARGS (gen_gpt.py
#        flags, e.g. "--layers 2 --seq 256"), PYTHON (/usr/bin/python3)
#
#===------------------------------------------------------------------------===#
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
steps=${STEPS:-5}
work=${WORK:-/tmp/memopt-bench-gpu}
python=${PYTHON:-/usr/bin/python3}
gpt_args=${GPT_ARGS:-}
compile="$build/bin/memopt-compile"
mkdir -p "$work"

# shellcheck disable=SC2086
"$python" "$here/gen_gpt.py" "$work/gpt.mlir" $gpt_args || exit 1
gib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1073741824 }'; }

rows=()
for precision in fp32 bf16; do
  for remat in none blocks; do
    name="$precision/$remat"
    out="$work/$precision-$remat"
    flags=(--target=cuda)
    [ "$precision" = bf16 ] && flags+=(--mixed-precision=bf16)
    [ "$remat" = blocks ] && flags+=(--remat=blocks)
    rm -rf "$out"
    memopt="n/a | n/a | n/a"
    if "$compile" "$work/gpt.mlir" -o "$out" "${flags[@]}" \
        >"$out.compile.log" 2>&1; then
      planned=$("$python" -c "import json,sys; print(sum(json.load(open(sys.argv[1]))['pools'].values()))" "$out/memory_report.json")
      vocab=$("$python" -c "import json,sys; print([a['shape'][0] for a in json.load(open(sys.argv[1]))['arguments'] if a['name'] == 'transformer.wte.weight'][0])" "$out/model.json")
      "$python" "$root/test/Target/Inputs/cuda_inputs.py" "$out/model.json" \
        "$out/params.safetensors" "$out/batch.safetensors" \
        --int-high "$vocab" >/dev/null
      if "$out/train" --params "$out/params.safetensors" \
          --batch "$out/batch.safetensors" --steps "$((steps + 1))" --stats \
          >"$out.run.log" 2>&1; then
        stats=$(grep '^stats ' "$out.run.log")
        ms=$(sed -n 's/.*step_ms_mean=\([^ ]*\).*/\1/p' <<<"$stats")
        peak=$(sed -n 's/.*peak_bytes=\([^ ]*\).*/\1/p' <<<"$stats")
        loss=$(grep '^step ' "$out.run.log" | tail -1 | awk '{print $4}')
        memopt="$ms | $(gib "$peak") | $(gib "$planned") (loss $loss)"
      else
        memopt="failed: $(tail -1 "$out.run.log") | | $(gib "$planned")"
      fi
    else
      memopt="n/a ($(grep -m1 'memopt-compile' "$out.compile.log" | cut -c1-80)) | n/a | n/a"
    fi
    # shellcheck disable=SC2086
    torch=$("$python" "$here/torch_gpt.py" --precision "$precision" \
      --remat "$remat" --steps "$steps" $gpt_args 2>&1 | tail -1)
    if [[ "$torch" == torch\ step_ms=* ]]; then
      tms=$(sed -n 's/.*step_ms=\([^ ]*\).*/\1/p' <<<"$torch")
      tpeak=$(sed -n 's/.*peak_bytes=\([^ ]*\).*/\1/p' <<<"$torch")
      torch="$tms | $(gib "$tpeak")"
    else
      torch="${torch#torch } | n/a"
    fi
    rows+=("| $name | $memopt | $torch |")
  done
done

echo
echo "GPT ($(head -1 "$work/gpt.mlir" | sed 's|^// ||; s| Generated.*||')), $steps steps"
echo "| config | memopt step (ms) | memopt peak (GiB) | memopt planned (GiB) | torch step (ms) | torch peak (GiB) |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
