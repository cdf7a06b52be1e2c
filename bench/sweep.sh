#!/usr/bin/env bash
# The learning-rate / damping sweep behind each optimizer's default (README, "The optimizer race").
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
# Every optimizer by the same method: five log-spaced learning rates, its own default times
# 1/10, 1/3, 1, 3 and 10, with the same step budget; the second-order ones at three dampings each,
# and with the sampled Fisher beside the empirical one.
rates() { python3 -c "import sys; d = float(sys.argv[1]); print(' '.join('%.3g' % (d * f) for f in (0.1, 1/3, 1, 3, 10)))" "$1"; }
for opt in adam:1e-2 sgd:1.0 muon:2e-2 soap:1e-2 kfac:0.3 cgfac:0.03; do
  name=${opt%%:*}
  for lr in $(rates "${opt#*:}"); do
    case $name in
      kfac | cgfac)
        for damping in 1e-3 1e-2 1e-1; do row "$name" --lr "$lr" --damping "$damping"; done
        row "$name" --lr "$lr" --damping 1e-2 --fisher sampled
        ;;
      *) row "$name" --lr "$lr" ;;
    esac
  done
done
