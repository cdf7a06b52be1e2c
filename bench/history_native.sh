#!/usr/bin/env bash
# The training history natively at pythia-14m's sizes: 16 checkpoints (random weights of
# pythia-14m's shape, one seed each, in the hub's revision layout, 53 MB each as Pythia's F16
# files with their causal-mask buffers), read by `lab history` on one text. Prints the time of
# the whole run and per checkpoint (reading the folder, the weights to f32, the forward and every
# lens, the depth fits included).
#
# Usage: bench/history_native.sh [LAB] [DIR]    (defaults: target/release/lab, target/bench-models)
set -euo pipefail
cd "$(dirname "$0")/.."
lab=${1:-target/release/lab}
dir=${2:-target/bench-models}/pythia-14m-history
steps=(0 1 2 4 8 16 32 64 128 256 512 1000 4000 16000 64000 143000)
args=()
for i in "${!steps[@]}"; do
  out="$dir/resolve/step${steps[$i]}"
  [ -f "$out/model.safetensors" ] || /usr/bin/python3 engine/tests/families/fixture.py "$out" \
    --family gpt_neox --size pythia-14m --seed "$((100 + i))"
  args+=(--model "$out")
done
text="The Brownian motion in the transformer model: tokens walk on the sphere."
start=$(date +%s.%N)
"$lab" --threads 2 history "${args[@]}" --text "$text" --json > "$dir/history.json"
end=$(date +%s.%N)
python3 - "$start" "$end" "$dir/history.json" <<'PY'
import json, sys
start, end, path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
h = json.load(open(path))
n = len(h["steps"])
print(f"| checkpoints | layers | total (s) | per checkpoint (s) |")
print(f"|---|---|---|---|")
print(f"| {n} | {h['layers']} | {end - start:.1f} | {(end - start) / n:.2f} |")
PY
