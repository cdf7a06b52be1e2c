#!/usr/bin/env bash
# JoMA on real English text, a report run (minutes; CI runs only a smoke test of it): character-level
# training on the Debian fortunes databases (installed by `cargo xtask setup`, never downloaded at
# run time) with a GELU, ReLU and identity MLP over several seeds, long enough for the entropy to
# turn. Prints, per run and layer, the attention entropy's initial, lowest (and when) and final value
# and the curve's shape as the engine classifies it (joma::summarize).
# With OUT=FILE, every run's `lab joma --json` report is also written there, one per line (`lab
# report` reads DIR/joma_text.jsonl for its real-text claim).
# Usage: [OUT=FILE] bench/joma_text.sh [steps] [seeds] [lr] [mlps]
set -euo pipefail
steps=${1:-3000}
seeds=${2:-3}
lr=${3:-1e-3}
mlps=${4:-gelu relu identity}
lab=${LAB:-target/release/lab}
out=${OUT:-/dev/null}
: > "$out"
dir=${FORTUNES:-/usr/share/games/fortunes}
[[ -d $dir ]] || { echo "no fortunes in $dir: run cargo xtask setup (apt-get install fortunes)" >&2; exit 1; }
corpus=$(mktemp --suffix=.txt)
trap 'rm -f "$corpus"' EXIT
# Every database (not the .dat indexes or the .u8 links), without the % lines between fortunes.
for f in "$dir"/*; do
  if [[ -f $f && $f != *.dat && $f != *.u8 ]]; then grep -v '^%$' "$f" || true; fi
done > "$corpus"
echo "corpus: $(wc -c < "$corpus") bytes from $dir; $steps Adam steps at lr $lr, seeds 0..$((seeds - 1))"
printf '%-9s %4s %5s %8s %8s %8s %8s  %s\n' mlp seed layer initial min "at step" final shape
for mlp in $mlps; do
  for seed in $(seq 0 $((seeds - 1))); do
    "$lab" joma --data "$corpus" --mlp "$mlp" --seed "$seed" --steps "$steps" --lr "$lr" --eval-every "$steps" --json |
      tail -n 1 | tee -a "$out" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
for l in d["layers"]:
    e = l["entropy"]
    print("%-9s %4s %5d %8.4f %8.4f %8s %8.4f  %s" % (sys.argv[1], sys.argv[2], l["layer"], e["initial"], e["min"], e.get("min_step"), e["final"], e["shape"]))
' "$mlp" "$seed"
  done
done
