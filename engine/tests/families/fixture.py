#!/usr/bin/env python3
"""Small random-weight models of the GPT-NeoX (Pythia), Llama (SmolLM2-like) and Qwen2 families in
Hugging Face's exact file layout, with a tokenizer.json of the family's kind, and the outputs of
an independent forward pass for each (numpy, float64, written from transformers' definitions:
modeling_gpt_neox, modeling_llama, modeling_qwen2; not from the lab's engine). No download.

    fixture.py OUT --family gpt_neox|llama|qwen2 [--size tiny|pythia-14m|pythia-160m|smollm2-135m] [--seed N] [--reference IDS]

writes OUT/config.json, OUT/model.safetensors (GPT-NeoX in F16 with its BOOL causal-mask buffers
and inv_freq, as Pythia's files hold them; Llama in F32; Qwen2 in BF16) and OUT/tokenizer.json
(byte-level BPE for GPT-NeoX and Qwen2, Metaspace BPE with byte fallback for Llama). With
--reference 1,2,3 it also writes OUT/reference.safetensors for those ids: hidden.{i} (T, C) the
residual stream entering block i (i = layers: after the last block, before the final norm),
attn.{l} (NH, T, T) the attention probabilities, logits (T, V). --size makes a model of a real
one's sizes (pythia-14m or pythia-160m with --family gpt_neox, smollm2-135m with --family llama)
for benchmarks; --seed makes other weights (another checkpoint of a training history).
"""
import argparse
import json
import math
import os
import struct

import numpy as np

CONFIGS = {
    "gpt_neox": {
        "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_act": "gelu",
        "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4, "num_hidden_layers": 3,
        "max_position_embeddings": 128, "rotary_pct": 0.25, "rotary_emb_base": 10000,
        "layer_norm_eps": 1e-5, "use_parallel_residual": True, "tie_word_embeddings": False,
        "vocab_size": 320, "rope_scaling": None, "attention_bias": True,
    },
    "llama": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 3, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0, "rope_scaling": None, "tie_word_embeddings": True, "vocab_size": 320,
        "attention_bias": False, "mlp_bias": False, "head_dim": 16,
    },
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 112, "num_attention_heads": 4, "num_key_value_heads": 1,
        "num_hidden_layers": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": False,
        "use_sliding_window": False, "sliding_window": 4096, "vocab_size": 320,
    },
}


SIZES = {
    "pythia-14m": {"hidden_size": 128, "intermediate_size": 512, "num_attention_heads": 4,
                   "num_hidden_layers": 6, "max_position_embeddings": 2048, "vocab_size": 50304},
    "pythia-160m": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                    "num_hidden_layers": 12, "max_position_embeddings": 2048, "vocab_size": 50304},
    "smollm2-135m": {"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9,
                     "num_key_value_heads": 3, "num_hidden_layers": 30, "max_position_embeddings": 8192,
                     "vocab_size": 49152, "head_dim": 64},
}


def weights(family, seed=2026):
    """The family's tensors under transformers' names (Linear weights (out, in))."""
    cfg = CONFIGS[family]
    rng = np.random.default_rng(seed)
    c, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    hs = c // nh
    n = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(np.float32)
    w = {}
    if family == "gpt_neox":
        w["gpt_neox.embed_in.weight"] = n(v, c, s=0.5)
        for i in range(cfg["num_hidden_layers"]):
            h = f"gpt_neox.layers.{i}."
            for norm in ["input_layernorm", "post_attention_layernorm"]:
                w[h + norm + ".weight"] = 1.0 + n(c, s=0.2)
                w[h + norm + ".bias"] = n(c, s=0.1)
            w[h + "attention.query_key_value.weight"] = n(3 * c, c, s=0.2)
            w[h + "attention.query_key_value.bias"] = n(3 * c, s=0.1)
            w[h + "attention.dense.weight"] = n(c, c, s=0.1)
            w[h + "attention.dense.bias"] = n(c, s=0.05)
            w[h + "mlp.dense_h_to_4h.weight"] = n(f, c, s=0.15)
            w[h + "mlp.dense_h_to_4h.bias"] = n(f, s=0.1)
            w[h + "mlp.dense_4h_to_h.weight"] = n(c, f, s=0.07)
            w[h + "mlp.dense_4h_to_h.bias"] = n(c, s=0.05)
        w["gpt_neox.final_layer_norm.weight"] = 1.0 + n(c, s=0.2)
        w["gpt_neox.final_layer_norm.bias"] = n(c, s=0.1)
        w["embed_out.weight"] = n(v, c, s=0.3)
    else:
        kvd = cfg["num_key_value_heads"] * hs
        w["model.embed_tokens.weight"] = n(v, c, s=0.5)
        for i in range(cfg["num_hidden_layers"]):
            h = f"model.layers.{i}."
            w[h + "input_layernorm.weight"] = 1.0 + n(c, s=0.2)
            w[h + "post_attention_layernorm.weight"] = 1.0 + n(c, s=0.2)
            for proj, dout in [("q_proj", c), ("k_proj", kvd), ("v_proj", kvd), ("o_proj", c)]:
                w[h + f"self_attn.{proj}.weight"] = n(dout, c, s=0.2 if proj != "o_proj" else 0.1)
                if family == "qwen2" and proj != "o_proj":
                    w[h + f"self_attn.{proj}.bias"] = n(dout, s=0.1)
            w[h + "mlp.gate_proj.weight"] = n(f, c, s=0.15)
            w[h + "mlp.up_proj.weight"] = n(f, c, s=0.15)
            w[h + "mlp.down_proj.weight"] = n(c, f, s=0.1)
        w["model.norm.weight"] = 1.0 + n(c, s=0.2)
        if not cfg["tie_word_embeddings"]:
            w["lm_head.weight"] = n(v, c, s=0.3)
    return w


def stored(family, w, bf16=False):
    """The weights as the file stores them: F16 (GPT-NeoX), BF16 (Qwen2, or any with `bf16`, as the
    hub's SmolLM2 and TinyLlama are) or F32 (Llama), and what the reference computes with: the
    stored values, widened."""
    if family == "gpt_neox":
        return {k: a.astype(np.float16) for k, a in w.items()}
    if family == "qwen2" or bf16:
        # bfloat16: the top 16 bits of the float32, rounded to nearest even.
        out = {}
        for k, a in w.items():
            bits = a.view(np.uint32).astype(np.uint64)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            out[k] = ("BF16", bits.astype(np.uint16))
        return out
    return w


def widened(a):
    if isinstance(a, tuple):
        return (a[1].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def write_safetensors(path, tensors):
    """An 8-byte little-endian header length, a JSON header of dtype, shape and byte offsets per
    tensor, then the raw little-endian data."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        if isinstance(a, tuple):
            dtype, a = a
        else:
            dtype = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("bool"): "BOOL",
                     np.dtype("int64"): "I64"}[a.dtype]
        a = np.ascontiguousarray(a)
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            out.write(b)


def write_reference(out, hidden, attns, logits):
    """OUT/reference.safetensors: hidden.{i}, attn.{l} and logits as float32."""
    ref = {f"hidden.{i}": h.astype(np.float32) for i, h in enumerate(hidden)}
    ref.update({f"attn.{l}": a.astype(np.float32) for l, a in enumerate(attns)})
    ref["logits"] = logits.astype(np.float32)
    write_safetensors(os.path.join(out, "reference.safetensors"), ref)


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * g


erf = np.vectorize(math.erf)


def scaled(inv, scaling):
    """transformers' _compute_linear_scaling_rope_parameters and _compute_llama3_parameters."""
    if not scaling:
        return inv
    if scaling["rope_type"] == "linear":
        return inv / scaling["factor"]
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, out)


def rope(x, positions, dims, base, scaling=None):
    """transformers' apply_rotary_pos_emb on the first `dims` of each head: rotate_half pairs
    dimension i with i + dims/2. x: (NH, T, hs)."""
    inv = scaled(1.0 / base ** (np.arange(0, dims, 2, dtype=np.float64) / dims), scaling)
    freqs = np.outer(positions, inv)
    emb = np.concatenate([freqs, freqs], -1)
    cos, sin = np.cos(emb), np.sin(emb)
    r, rest = x[..., :dims], x[..., dims:]
    half = dims // 2
    rotated = np.concatenate([-r[..., half:], r[..., :half]], -1)
    return np.concatenate([r * cos + rotated * sin, rest], -1)


def attention(q, k, v, t):
    """Causal softmax(q k^T / sqrt(hs)) v per head; q, k, v (NH, T, hs)."""
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones((t, t), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p, p @ v


def forward(family, w, ids):
    """The family's causal language model, float64: hidden states, attentions, logits."""
    cfg = CONFIGS[family]
    c, nh, t = cfg["hidden_size"], cfg["num_attention_heads"], len(ids)
    hs = c // nh
    g = {k: widened(a) for k, a in w.items()}
    pos = np.arange(t)
    hidden, attns = [], []
    heads = lambda a, n: a.reshape(t, n, hs).transpose(1, 0, 2)
    if family == "gpt_neox":
        eps, dims = cfg["layer_norm_eps"], int(hs * cfg["rotary_pct"])
        x = g["gpt_neox.embed_in.weight"][ids]
        for i in range(cfg["num_hidden_layers"]):
            h = f"gpt_neox.layers.{i}."
            hidden.append(x)
            a = layer_norm(x, g[h + "input_layernorm.weight"], g[h + "input_layernorm.bias"], eps)
            qkv = a @ g[h + "attention.query_key_value.weight"].T + g[h + "attention.query_key_value.bias"]
            qkv = qkv.reshape(t, nh, 3 * hs).transpose(1, 0, 2)
            q, k, v = qkv[..., :hs], qkv[..., hs:2 * hs], qkv[..., 2 * hs:]
            q, k = rope(q, pos, dims, cfg["rotary_emb_base"]), rope(k, pos, dims, cfg["rotary_emb_base"])
            p, y = attention(q, k, v, t)
            attns.append(p)
            attn = y.transpose(1, 0, 2).reshape(t, c) @ g[h + "attention.dense.weight"].T + g[h + "attention.dense.bias"]
            m = layer_norm(x, g[h + "post_attention_layernorm.weight"], g[h + "post_attention_layernorm.bias"], eps)
            m = m @ g[h + "mlp.dense_h_to_4h.weight"].T + g[h + "mlp.dense_h_to_4h.bias"]
            m = 0.5 * m * (1.0 + erf(m / np.sqrt(2.0)))
            m = m @ g[h + "mlp.dense_4h_to_h.weight"].T + g[h + "mlp.dense_4h_to_h.bias"]
            x = x + attn + m
        hidden.append(x)
        out = layer_norm(x, g["gpt_neox.final_layer_norm.weight"], g["gpt_neox.final_layer_norm.bias"], eps)
        return hidden, attns, out @ g["embed_out.weight"].T
    eps, nkv = cfg["rms_norm_eps"], cfg["num_key_value_heads"]
    base = cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"]
    x = g["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        h = f"model.layers.{i}."
        hidden.append(x)
        a = rms_norm(x, g[h + "input_layernorm.weight"], eps)
        proj = lambda name: a @ g[h + f"self_attn.{name}.weight"].T + g.get(h + f"self_attn.{name}.bias", 0.0)
        q, k, v = heads(proj("q_proj"), nh), heads(proj("k_proj"), nkv), heads(proj("v_proj"), nkv)
        scaling = cfg.get("rope_scaling")
        q, k = rope(q, pos, hs, base, scaling), rope(k, pos, hs, base, scaling)
        # repeat_kv: query head j reads key/value head j // (nh / nkv).
        k, v = np.repeat(k, nh // nkv, axis=0), np.repeat(v, nh // nkv, axis=0)
        p, y = attention(q, k, v, t)
        attns.append(p)
        x = x + y.transpose(1, 0, 2).reshape(t, c) @ g[h + "self_attn.o_proj.weight"].T
        m = rms_norm(x, g[h + "post_attention_layernorm.weight"], eps)
        gate = m @ g[h + "mlp.gate_proj.weight"].T
        up = m @ g[h + "mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ g[h + "mlp.down_proj.weight"].T
    hidden.append(x)
    out = rms_norm(x, g["model.norm.weight"], eps)
    head = g["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else g["lm_head.weight"]
    return hidden, attns, out @ head.T


def bytes_to_unicode():
    """GPT-2's map of bytes to printable characters, which byte-level BPE vocabularies are written in."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer(family):
    """A small tokenizer.json of the family's kind: every byte, a few merges, its special tokens."""
    if family == "llama":
        vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
        for b in range(256):
            vocab[f"<0x{b:02X}>"] = len(vocab)
        pieces = ["▁", "e", "t", "h", "a", "o", "n", "i", "r", "s", "▁t", "he", "▁the", "in", "▁a", "an", "er"]
        merges = ["▁ t", "h e", "▁t he", "i n", "▁ a", "a n", "e r"]
        for p in pieces:
            vocab[p] = len(vocab)
        return {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for s, i in [("<unk>", 0), ("<s>", 1), ("</s>", 2)]],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
            "pre_tokenizer": None, "post_processor": None,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": vocab, "merges": merges},
        }
    chars = bytes_to_unicode()
    vocab = {chars[b]: i for i, b in enumerate(sorted(chars))}
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "a n", "e r", "o n", "Ġ s"]
    for m in merges:
        vocab["".join(m.split(" "))] = len(vocab)
    eot = "<|endoftext|>"
    vocab[eot] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[eot], "content": eot, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--family", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--reference", help="comma-separated token ids")
    ap.add_argument("--size", choices=["tiny"] + sorted(SIZES), default="tiny")
    ap.add_argument("--seed", type=int, default=2026, help="the weights' seed (another checkpoint)")
    ap.add_argument("--bf16", action="store_true", help="every tensor in BF16 (as the hub's SmolLM2 stores them)")
    ap.add_argument("--rope-scaling", choices=["linear", "llama3"],
                    help="stretched rotary angles (Llama's and Qwen2's), with a short original length so "
                         "that a short text reaches all three of llama3's regimes")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cfg = CONFIGS[args.family]
    cfg.update(SIZES.get(args.size, {}))
    if args.rope_scaling == "linear":
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": 3.0}
    elif args.rope_scaling == "llama3":
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    w = stored(args.family, weights(args.family, args.seed), args.bf16)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer(args.family), f, ensure_ascii=False)
    on_disk = dict(w)
    if args.family == "gpt_neox":
        p, hs = cfg["max_position_embeddings"], cfg["hidden_size"] // cfg["num_attention_heads"]
        for i in range(cfg["num_hidden_layers"]):
            h = f"gpt_neox.layers.{i}.attention."
            on_disk[h + "bias"] = np.tril(np.ones((p, p), dtype=bool)).reshape(1, 1, p, p)
            on_disk[h + "masked_bias"] = np.array(-1e9, np.float32)
            on_disk[h + "rotary_emb.inv_freq"] = (1.0 / 10000 ** (np.arange(0, 4, 2) / 4)).astype(np.float32)
    write_safetensors(os.path.join(args.out, "model.safetensors"), on_disk)
    if args.reference:
        ids = [int(i) for i in args.reference.split(",")]
        write_reference(args.out, *forward(args.family, w, ids))


if __name__ == "__main__":
    main()
