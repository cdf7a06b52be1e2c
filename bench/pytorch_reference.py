#!/usr/bin/env python3
"""The lab's benchmark model in PyTorch (CPU eager), step for step beside `lab bench`.

Same Pre-LN GELU causal transformer, vocab 64, separate Q/K/V/O projections with biases, AdamW,
the three sizes of `lab bench`, random tokens. Prints PyTorch's ms/step, ours, and the ratio.
Usage: python3 bench/pytorch_reference.py [--threads N] [--lab target/release/lab]
Not part of CI (PyTorch is a large download).
"""
import argparse
import json
import math
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
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, c))
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--lab", default="target/release/lab")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ours = json.loads(subprocess.run([a.lab, "bench", "--json", "--iters", str(a.iters)], check=True,
                                     capture_output=True, text=True).stdout)
    ours = {r["size"]: r["ms_per_step"] for r in ours["steps"] if r["optimizer"] == "adam"}
    print(f"{'size':<8} {'pytorch ms':>11} {'ours ms':>9} {'ours/pytorch':>13}   (torch threads {a.threads})")
    for name, s in SIZES:
        pt = step_ms(s, a.iters)
        print(f"{name:<8} {pt:>11.2f} {ours[name]:>9.2f} {ours[name] / pt:>13.2f}")


if __name__ == "__main__":
    main()
