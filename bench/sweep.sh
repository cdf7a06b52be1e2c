#!/usr/bin/env bash
# The small learning-rate / damping sweep behind each optimizer's default (README, "Sweep").
# Usage: bench/sweep.sh [data] [steps]   (prints one row per setting: final validation loss)
set -euo pipefail
data=${1:-grammar}
steps=${2:-300}
lab=${LAB:-target/release/lab}
row() { # optimizer, extra flags...
  local opt=$1; shift
  local out
  if ! out=$("$lab" train --data "$data" --optimizer "$opt" --steps "$steps" --eval-every "$steps" --json "$@" 2>&1 | tail -n 1); then
    printf '%-8s %-40s %s\n' "$opt" "$*" "stopped: $out"
    return
  fi
  python3 -c "import json,sys; d=json.loads(sys.argv[1]); print('%-8s %-40s val %.4f  %.1f s' % (sys.argv[2], sys.argv[3], d['final_val_loss'], d['wall_s']))" "$out" "$opt" "$*"
}
for lr in 1e-3 3e-3 1e-2 3e-2; do row adam --lr $lr; done
for lr in 0.1 0.3 1.0; do row sgd --lr $lr; done
for lr in 5e-3 1e-2 2e-2 5e-2; do row muon --lr $lr; done
for opt in kfac cgfac; do
  for lr in 0.03 0.1 0.3; do
    for damping in 1e-3 1e-2 1e-1; do row $opt --lr "$lr" --damping "$damping"; done
  done
done
