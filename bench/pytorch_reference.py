#!/usr/bin/env python3
"""The lab's benchmark model in PyTorch (CPU eager), step for step beside `lab bench`.

Same Pre-LN GELU causal transformer, vocab 64, separate Q/K/V/O projections with biases, AdamW,
the three sizes of `lab bench`, random tokens, attention through `F.scaled_dot_product_attention`
(causal). Times PyTorch on 1 and on `--threads` threads and reads ours from `lab bench` (Adam on one
thread and on every core), taking turns size by size in one run, and prints our best over PyTorch's best.
Usage: python3 bench/pytorch_reference.py [--threads N] [--rounds R] [--sizes tiny,small,medium]
       [--lab target/release/lab]
Not part of CI (PyTorch is a large download).
"""
import argparse
import json
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = [
    ("tiny", dict(d=32, layers=1, heads=2, t=32, b=8)),
    ("small", dict(d=64, layers=2, heads=4, t=64, b=16)),
    ("medium", dict(d=128, layers=4, heads=4, t=128, b=16)),
]
VOCAB = 64


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        h = self.ln1(x)
        q, k, v = (m(h).view(b, t, self.heads, c // self.heads).transpose(1, 2) for m in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self, d, layers, heads, t):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(t, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def step_ms(s, iters):
    torch.manual_seed(0)
    model = Model(s["d"], s["layers"], s["heads"], s["t"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, VOCAB, (s["b"], s["t"]))
    tgt = torch.randint(0, VOCAB, (s["b"], s["t"]))
    times = []
    for i in range(iters + 2):
        start = time.perf_counter()
        loss = F.cross_entropy(model(idx).view(-1, VOCAB), tgt.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def ours_ms(lab, name, iters):
    """Our Adam step at one size on one thread and on every core: `lab bench` limited to that row."""
    out = subprocess.run([lab, "bench", "--json", "--iters", str(iters), "--sizes", name, "--optimizers", "adam"],
                         check=True, capture_output=True, text=True).stdout
    return {r["threads"]: r["ms_per_step"] for r in json.loads(out)["steps"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2, help="PyTorch's second thread count (the first is 1)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of PyTorch and ours per size")
    ap.add_argument("--sizes", default="tiny,small,medium")
    ap.add_argument("--lab", default="target/release/lab")
    a = ap.parse_args()
    counts = [1] + ([a.threads] if a.threads > 1 else [])
    head = "".join(f"{f'pytorch {n}t':>12}" for n in counts)
    print(f"{'size':<8}{head} {'ours 1t':>9} {'ours all':>9} {'ours/pytorch (best of each)':>28}")
    for name, s in (x for x in SIZES if x[0] in a.sizes.split(",")):
        # PyTorch and ours take turns, so a slow minute of the shared machine hits both; each
        # figure is the best of its rounds (a median over --iters steps within a round).
        pt, mine = [float("inf")] * len(counts), {}
        for _ in range(a.rounds):
            for i, n in enumerate(counts):
                torch.set_num_threads(n)
                pt[i] = min(pt[i], step_ms(s, a.iters))
            for threads, ms in ours_ms(a.lab, name, a.iters).items():
                mine[threads] = min(mine.get(threads, float("inf")), ms)
        cells = "".join(f"{ms:>12.2f}" for ms in pt)
        best = min(mine.values())
        print(f"{name:<8}{cells} {mine[1]:>9.2f} {max(mine.items())[1]:>9.2f} {best / min(pt):>28.2f}", flush=True)


if __name__ == "__main__":
    main()
