#!/usr/bin/env bash
# The GPU figures README asks for, on a machine with a real GPU, in one short run (a device
# machine's budget is about 15 minutes, start included): what the machine offers wgpu, then
# `lab bench --backend gpu` in two bounded parts, matmul first (it is what tunes the tilings), the
# step sizes after it. Build `lab` here first and carry it there:
#   cargo build --release -p engine --bin lab
#   (device) bash bench/gpu_device.sh "$OUT"          # LAB=path to use another binary
# Then GPT-2 small's sizes (random weights made by engine/tests/gpt2/fixture.py, which needs python3
# with numpy there) read on the GPU beside the CPU: `lab bench --model --backend gpu`.
# Writes machine.txt, matmul.txt, steps.txt and gpt2.txt into the folder given, and prints them.
set -uo pipefail
out=${1:-/tmp/spherewalk-gpu-bench}
lab=${LAB:-target/release/lab}
mkdir -p "$out"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi"
  echo "Vulkan ICDs:"; ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1
  echo "loaders:"; ldconfig -p | grep -E 'libvulkan|libEGL' || echo "no Vulkan or EGL loader"
} > "$out/machine.txt"

# The matmul at every side in both tilings, and the tiny step (seconds on a GPU).
timeout 200 "$lab" bench --backend gpu --sizes tiny --optimizers adam --matmul 256,512,1024,2048,4096 \
  --iters 5 > "$out/matmul.txt" 2>&1
echo "exit $?" >> "$out/matmul.txt"
# The step sizes against the CPU (the CPU's medium and large rows take the time here).
timeout 330 "$lab" bench --backend gpu --sizes small,medium,large --optimizers adam,cgfac --matmul 2048 \
  --iters 5 > "$out/steps.txt" 2>&1
echo "exit $?" >> "$out/steps.txt"

# GPT-2 small: its forward of 64 and 256 tokens on the GPU beside the CPU's, and writing.
if python3 engine/tests/gpt2/fixture.py /tmp/gpt2-small --size gpt2 > "$out/gpt2.txt" 2>&1; then
  timeout 150 "$lab" bench --model /tmp/gpt2-small --backend gpu --iters 5 >> "$out/gpt2.txt" 2>&1
  echo "exit $?" >> "$out/gpt2.txt"
else
  echo "no GPT-2 rows: fixture.py needs python3 with numpy" >> "$out/gpt2.txt"
fi

for f in machine matmul steps gpt2; do
  echo "== $f"
  cat "$out/$f.txt"
done
