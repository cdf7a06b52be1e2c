#!/usr/bin/env python3
"""Writes the PyTorch files `tests/torch_bin.rs` reads, with torch.save itself (run once, by hand,
in a throwaway venv with torch and numpy; the files are committed, so the tests need no torch):

    make.py OUT_DIR

- `gpt_neox.bin`: the GPT-NeoX fixture's state dict (`tests/families/fixture.py`, seed 2026: its
  F16 weights, BOOL mask buffers and inv_freq) as `pytorch_model.bin`, so the lab reading it must
  equal the lab reading the fixture's model.safetensors.
- `views.bin`: tensors torch stores as views (a transpose, a slice at an offset, two names on one
  storage) in F32, F16, BF16, BOOL and I64, with `views.json`: each one's values as torch lists them.
- `evil.bin`: a pickle that would run `os.system` when unpickled (what the reader must refuse).
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "families"))
import fixture  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)

    cfg = fixture.CONFIGS["gpt_neox"]
    w = fixture.stored("gpt_neox", fixture.weights("gpt_neox"))
    sd = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in w.items()}
    p = cfg["max_position_embeddings"]
    for i in range(cfg["num_hidden_layers"]):
        h = f"gpt_neox.layers.{i}.attention."
        sd[h + "bias"] = torch.tril(torch.ones(p, p, dtype=torch.bool)).reshape(1, 1, p, p)
        sd[h + "masked_bias"] = torch.tensor(-1e9)
        sd[h + "rotary_emb.inv_freq"] = 1.0 / 10000 ** (torch.arange(0, 4, 2).float() / 4)
    torch.save(sd, os.path.join(out, "gpt_neox.bin"))

    base = torch.randn(4, 6)
    views = {
        "transposed": base.t(),
        "sliced": base[1:3, 2:5],
        "shared.a": base,
        "half": torch.randn(3, 5).half()[:, 1:4],
        "bf16": torch.randn(2, 3).bfloat16().t(),
        "mask": torch.tril(torch.ones(3, 3, dtype=torch.bool)),
        "long": torch.arange(10)[3:8],
    }
    torch.save(views, os.path.join(out, "views.bin"))
    listed = {k: {"shape": list(v.shape), "values": v.float().flatten().tolist()} for k, v in views.items()}
    with open(os.path.join(out, "views.json"), "w") as f:
        json.dump(listed, f)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo this pickle ran a command",))

    torch.save({"weight": Evil()}, os.path.join(out, "evil.bin"))


if __name__ == "__main__":
    main()
