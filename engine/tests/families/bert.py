#!/usr/bin/env python3
"""A small random-weight BERT (BertForMaskedLM) in Hugging Face's exact file layout, with a
WordPiece tokenizer.json, and the outputs of an independent forward pass (numpy, float64, written
from transformers' modeling_bert: Post-LN blocks, attention both ways, the masked-LM head; not from
the lab's engine). No download.

    bert.py OUT [--gamma] [--base] [--reference IDS]

writes OUT/config.json, OUT/model.safetensors (F32, under `bert.` and `cls.`, with the pooler, the
next-sentence head and the `position_ids` buffer a BertForPreTraining checkpoint holds; --gamma
names the norms' gain and bias `gamma` and `beta`, as checkpoints converted from TensorFlow do)
and OUT/tokenizer.json ([CLS] text [SEP], lower-cased WordPiece); --base writes a BertModel
(no masked-LM head, names without `bert.`). With --reference 1,2,3 it also
writes OUT/reference.safetensors for those ids: hidden.{i} (T, C) transformers' hidden states
(i = 0 the embedding after its LayerNorm, i the output of block i), attn.{l} (NH, T, T), logits (T, V).
"""
import argparse
import json
import math
import os

import numpy as np

from fixture import layer_norm, write_reference, write_safetensors

CONFIG = {
    "architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_act": "gelu",
    "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4, "num_hidden_layers": 3,
    "max_position_embeddings": 128, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
    "position_embedding_type": "absolute", "pad_token_id": 0, "vocab_size": 0,
}

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "tea", "heat", "stars", "and", "in", "walk",
         "sphere", "token", "is", ".", ",", "!", "##s", "##ed", "##ing", "brown", "##ian", "motion"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
VOCAB = list(dict.fromkeys(SPECIAL + WORDS + LETTERS + ["##" + x for x in LETTERS]))
CONFIG["vocab_size"] = len(VOCAB)


def weights(gamma, seed=2026):
    """BertForPreTraining's tensors under transformers' names (Linear weights (out, in))."""
    c, f, v, t = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"], CONFIG["max_position_embeddings"]
    rng = np.random.default_rng(seed)
    n = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(np.float32)
    g, b = ("gamma", "beta") if gamma else ("weight", "bias")
    w = {}

    def norm(at):
        w[f"{at}.{g}"] = 1.0 + n(c, s=0.2)
        w[f"{at}.{b}"] = n(c, s=0.1)

    w["bert.embeddings.word_embeddings.weight"] = n(v, c, s=0.5)
    w["bert.embeddings.position_embeddings.weight"] = n(t, c, s=0.3)
    w["bert.embeddings.token_type_embeddings.weight"] = n(CONFIG["type_vocab_size"], c, s=0.3)
    norm("bert.embeddings.LayerNorm")
    for i in range(CONFIG["num_hidden_layers"]):
        h = f"bert.encoder.layer.{i}."
        for name, din, dout, s in [("attention.self.query", c, c, 0.2), ("attention.self.key", c, c, 0.2),
                                   ("attention.self.value", c, c, 0.2), ("attention.output.dense", c, c, 0.1),
                                   ("intermediate.dense", c, f, 0.15), ("output.dense", f, c, 0.07)]:
            w[h + name + ".weight"] = n(dout, din, s=s)
            w[h + name + ".bias"] = n(dout, s=0.05)
        norm(h + "attention.output.LayerNorm")
        norm(h + "output.LayerNorm")
    w["bert.pooler.dense.weight"] = n(c, c, s=0.1)
    w["bert.pooler.dense.bias"] = n(c, s=0.1)
    w["cls.predictions.transform.dense.weight"] = n(c, c, s=0.2)
    w["cls.predictions.transform.dense.bias"] = n(c, s=0.1)
    norm("cls.predictions.transform.LayerNorm")
    w["cls.predictions.bias"] = n(v, s=0.1)
    w["cls.seq_relationship.weight"] = n(2, c, s=0.1)
    w["cls.seq_relationship.bias"] = n(2, s=0.1)
    return w


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))


def forward(w, ids, gamma):
    """BertForMaskedLM, float64, one segment (token type 0), no padding: hidden states,
    attentions, logits."""
    c, nh, t, eps = CONFIG["hidden_size"], CONFIG["num_attention_heads"], len(ids), CONFIG["layer_norm_eps"]
    hs = c // nh
    p = {k: a.astype(np.float64) for k, a in w.items()}
    gb = ("gamma", "beta") if gamma else ("weight", "bias")
    ln = lambda x, at: layer_norm(x, p[f"{at}.{gb[0]}"], p[f"{at}.{gb[1]}"], eps)
    lin = lambda x, at: x @ p[at + ".weight"].T + p[at + ".bias"]
    heads = lambda a: a.reshape(t, nh, hs).transpose(1, 0, 2)
    x = (p["bert.embeddings.word_embeddings.weight"][ids] + p["bert.embeddings.position_embeddings.weight"][:t]
         + p["bert.embeddings.token_type_embeddings.weight"][0])
    x = ln(x, "bert.embeddings.LayerNorm")
    hidden, attns = [x], []
    for i in range(CONFIG["num_hidden_layers"]):
        h = f"bert.encoder.layer.{i}."
        q, k, v = (heads(lin(x, h + f"attention.self.{n}")) for n in ["query", "key", "value"])
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hs)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        attns.append(a)
        y = (a @ v).transpose(1, 0, 2).reshape(t, c)
        x = ln(x + lin(y, h + "attention.output.dense"), h + "attention.output.LayerNorm")
        m = lin(gelu(lin(x, h + "intermediate.dense")), h + "output.dense")
        x = ln(x + m, h + "output.LayerNorm")
        hidden.append(x)
    z = ln(gelu(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    logits = z @ p["bert.embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]
    return hidden, attns, logits


def tokenizer():
    """bert-base-uncased's kind of tokenizer.json over a small vocabulary."""
    vocab = {tok: i for i, tok in enumerate(VOCAB)}
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    special = lambda tok: {"SpecialToken": {"id": tok, "type_id": 0}}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for s in SPECIAL],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]"), {"Sequence": {"id": "A", "type_id": 0}}, special("[SEP]")],
            "pair": [special("[CLS]"), {"Sequence": {"id": "A", "type_id": 0}}, special("[SEP]"),
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]}},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gamma", action="store_true", help="TensorFlow's names for the norms (gamma, beta)")
    ap.add_argument("--base", action="store_true", help="a BertModel: no heads, no `bert.` prefix")
    ap.add_argument("--reference", help="comma-separated token ids")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    w = weights(args.gamma)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer(), f, ensure_ascii=False)
    on_disk = dict(w)
    if args.base:
        on_disk = {k[len("bert."):]: a for k, a in w.items() if k.startswith("bert.")}
        CONFIG["architectures"] = ["BertModel"]
        with open(os.path.join(args.out, "config.json"), "w") as f:
            json.dump(CONFIG, f, indent=2)
    on_disk[("" if args.base else "bert.") + "embeddings.position_ids"] = np.arange(CONFIG["max_position_embeddings"], dtype=np.int64)[None]
    write_safetensors(os.path.join(args.out, "model.safetensors"), on_disk)
    if args.reference:
        ids = [int(i) for i in args.reference.split(",")]
        write_reference(args.out, *forward(w, ids, args.gamma))


if __name__ == "__main__":
    main()
