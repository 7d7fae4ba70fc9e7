"""kvq-calibrate: SKVQ's offline calibration from real activations.

    kvq-calibrate --out SPEC.mlir [--base skvq-k2v2-g128] [--group 32]
                  [--activations FILE.npz | --text PATH --tokens N]
                  [--reorder kmeans|packed|sorted|none] [--kmeans-restarts N]
                  [--clip group|layer|none] [--channel-order interleaved|half]

From sample keys and values (SmolLM2-135M's, captured over a text, or any
`[tokens, kv_heads, head_dim]` arrays in an .npz: `k0, v0, k1, v1, ...` and
optionally the queries `q0, q1, ...`) it computes, per layer and kv-head,
for every tensor of the base spec quantized with span = channels:
  - SKVQ's channel reorder: the channels clustered by their (min, max) over
    the calibration tokens into head_dim / group groups (k-means, or sorted
    by range into equal groups), as a permutation and group sizes;
  - SKVQ's clipping factors: one per group, or one per layer, searched on a
    grid;
and writes the base spec with these tables (`dense_resource` blobs) as a new
spec, its #kvq.model stating the channel order the tables refer to (the
activations', `--channel-order`: SmolLM2's as kvq.model captures them are
interleaved, a Hugging Face model's rotate-half). It reports the
reconstruction and attention errors before and after on held-out tokens. The choices are documented in docs/Evaluation.md
("kvq-calibrate").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys

import numpy as np

import kvq
from kvq import calibrate_quant as quant
from kvq import cli
from kvq import tune_space as space

DEFAULT_TEXT = "/usr/share/common-licenses/MPL-1.1"
TEXT_SOURCE = "Mozilla Public License 1.1 text, Debian package base-files"
# Clipping factors tried, 1.0 first: a smaller factor must do strictly better.
CLIP_GRID = np.round(np.arange(1.0, 0.495, -0.01), 2)
KMEANS_ITERATIONS = 50
# k-means++ seedings tried per kv-head, the best kept (SKVQ's n_init).
KMEANS_RESTARTS = 10


# Activations ---------------------------------------------------------------


def load_npz(path: str) -> dict:
    """{layer: {"k", "v"[, "q"]: float32 [tokens, heads, dim]}} of an .npz
    with arrays k<layer>, v<layer> and optionally q<layer>."""
    arrays = np.load(path)
    layers = {}
    for name in arrays.files:
        match = re.fullmatch(r"([kvq])(\d+)", name)
        if not match:
            raise kvq.Error(f"{path}: array {name!r} is not k<layer>, "
                            "v<layer> or q<layer>")
        array = np.asarray(arrays[name], np.float32)
        if array.ndim != 3 or not np.isfinite(array).all():
            raise kvq.Error(f"{path}: {name} must be a finite "
                            "[tokens, heads, head_dim] array")
        layers.setdefault(int(match.group(2)), {})[match.group(1)] = array
    if sorted(layers) != list(range(len(layers))):
        raise kvq.Error(f"{path}: layers must be numbered 0..n-1")
    for layer, tensors in layers.items():
        if "k" not in tensors or "v" not in tensors:
            raise kvq.Error(f"{path}: layer {layer} needs both k and v")
        if tensors["k"].shape != tensors["v"].shape:
            raise kvq.Error(f"{path}: k{layer} and v{layer} differ in shape")
    return layers


def capture_model(text: str, tokens: int, pre_rope: bool) -> dict:
    """SmolLM2-135M's queries, keys (after RoPE, or before it when the base
    quantizes pre-RoPE keys) and values over the first `tokens` tokens."""
    from kvq import activations
    from kvq import model as kvq_model

    model = kvq_model.Model()
    with open(text, encoding="utf-8") as f:
        ids = model.tokenizer.encode(f.read())[:tokens]
    if len(ids) < tokens:
        raise kvq.Error(f"{text} has only {len(ids)} tokens, {tokens} needed")
    layers = range(model.config.layers)
    captured = activations.capture(model, ids, list(layers))
    return {
        l: {"q": c["q"], "k": c["k_pre_rope"] if pre_rope else c["k"], "v": c["v"]}
        for l, c in captured.items()
    }


# Reorder -------------------------------------------------------------------


def _kmeans_once(features: np.ndarray, clusters: int, rng) -> tuple[np.ndarray, float]:
    """(labels, inertia) of one run of Lloyd's algorithm from a k-means++
    seeding drawn from `rng`; an emptied cluster takes the point farthest
    from its centre, so every cluster keeps a channel. The inertia is the
    sum of squared distances of the rows to the means of their clusters."""
    centres = [features[rng.integers(len(features))]]
    for _ in range(1, clusters):
        distance = np.min([((features - c) ** 2).sum(1) for c in centres], axis=0)
        total = distance.sum()
        pick = rng.choice(len(features), p=distance / total) if total > 0 else \
            rng.integers(len(features))
        centres.append(features[pick])
    centres = np.array(centres)
    labels = np.zeros(len(features), np.int64)
    for _ in range(KMEANS_ITERATIONS):
        distance = ((features[:, None, :] - centres[None]) ** 2).sum(-1)
        labels = distance.argmin(1)
        for c in range(clusters):
            if not (labels == c).any():
                far = distance[np.arange(len(features)), labels].argmax()
                labels[far] = c
        new = np.array([features[labels == c].mean(0) for c in range(clusters)])
        if np.allclose(new, centres):
            break
        centres = new
    means = np.array([features[labels == c].mean(0) for c in range(clusters)])
    return labels, float(((features - means[labels]) ** 2).sum())


def _kmeans(features: np.ndarray, clusters: int, seed: int,
            restarts: int = KMEANS_RESTARTS) -> np.ndarray:
    """Cluster labels of the rows of `features`: of `restarts` k-means++
    seedings drawn in turn from one generator of `seed`, the run of least
    inertia (the earliest on a tie), as SKVQ's calibration keeps the best of
    scikit-learn's 10 initializations. The first run is the single-seeding
    result, so more restarts never raise the inertia."""
    if restarts < 1:
        raise ValueError(f"k-means restarts must be at least 1, not {restarts}")
    rng = np.random.default_rng(seed)
    best_labels, best_inertia = None, np.inf
    for _ in range(restarts):
        labels, inertia = _kmeans_once(features, clusters, rng)
        if inertia < best_inertia:
            best_labels, best_inertia = labels, inertia
    return best_labels


def packed_sizes(x, perm, groups: int, unit: int, cost) -> list[int]:
    """Group sizes, multiples of `unit` channels (one word of codes), that
    split the channels of x [tokens, D] in `perm` order into `groups`
    groups with the least total cost(group columns) (dynamic programming
    over the boundaries)."""
    units = x.shape[1] // unit
    permuted = x[:, perm]
    span = lambda i, j: cost(permuted[:, i * unit:j * unit])
    best = {(0, 0): (0.0, [])}
    for g in range(1, groups + 1):
        for j in range(g, units - (groups - g) + 1):
            options = [(best[(g - 1, i)][0] + span(i, j), best[(g - 1, i)][1] + [j - i])
                       for i in range(g - 1, j) if (g - 1, i) in best]
            best[(g, j)] = min(options, key=lambda o: o[0])
    return [size * unit for size in best[(groups, units)][1]]


def channel_order(x: np.ndarray, groups: int, method: str, unit: int = 1,
                  cost=None, seed: int = 0, restarts: int = KMEANS_RESTARTS):
    """(perm, sizes) of one kv-head's channels from tokens x [tokens, D]:
    perm[i] is the channel placed at position i, groups of sizes[g]
    consecutive positions. `kmeans` is SKVQ's clustering by (min, max),
    the best of `restarts` seedings, groups ordered by their mean range; `sorted` orders channels by range
    into equal groups; `packed` orders them so and chooses sizes of whole
    words of `unit` codes by `cost` (packed_sizes)."""
    dim = x.shape[1]
    if method == "none":
        return np.arange(dim), [dim // groups] * groups
    lo, hi = x.min(0), x.max(0)
    if method in ("sorted", "packed"):
        perm = np.argsort(hi - lo, kind="stable")
        if method == "packed" and dim % unit == 0 and dim // unit >= groups:
            return perm, packed_sizes(x, perm, groups, unit, cost)
        return perm, [dim // groups] * groups
    labels = _kmeans(np.stack([lo, hi], 1).astype(np.float64), groups, seed, restarts)
    ranges = [(hi - lo)[labels == c].mean() for c in range(groups)]
    members = [np.flatnonzero(labels == c) for c in np.argsort(ranges, kind="stable")]
    return np.concatenate(members), [len(m) for m in members]


# Clipping ------------------------------------------------------------------


def _group_errors(x, perm, sizes, levels, params, clip) -> np.ndarray:
    """Squared reconstruction error of every group of x [tokens, D] with
    one clipping factor."""
    permuted = x[:, perm]
    errors, start = [], 0
    for size in sizes:
        part = permuted[:, start:start + size]
        errors.append(((quant.fake_quantize(part, levels, params, clip) - part) ** 2).sum())
        start += size
    return np.array(errors)


def group_clips(x, perm, sizes, levels, params) -> np.ndarray:
    """Per group, the factor of CLIP_GRID with the least squared
    reconstruction error on the calibration tokens."""
    errors = np.array([_group_errors(x, perm, sizes, levels, params, a) for a in CLIP_GRID])
    return CLIP_GRID[errors.argmin(0)]


# Errors --------------------------------------------------------------------


def attention(q, k, v) -> np.ndarray:
    """Causal attention outputs [tokens, heads, D] of queries q [tokens,
    heads, D] against k, v [tokens, kv_heads, D] (GQA), in float64."""
    tokens, heads, dim = q.shape
    ratio = heads // k.shape[1]
    kk = np.repeat(k, ratio, axis=1).astype(np.float64)
    vv = np.repeat(v, ratio, axis=1).astype(np.float64)
    scores = np.einsum("thd,shd->hts", q.astype(np.float64), kk) / np.sqrt(dim)
    scores += np.triu(np.full((tokens, tokens), -np.inf), 1)
    scores -= scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", weights, vv)


def relative_error(approx, exact) -> float:
    return float(np.linalg.norm(approx - exact) / np.linalg.norm(exact))


# The calibration -----------------------------------------------------------


class Scheme:
    """What calibration needs of one tensor's per-layer schemes: the levels,
    parameter dtype and group of a span = channels asym attribute."""

    def __init__(self, attr: str, group: int | None):
        fields = dict(re.findall(r"(\w+)\s*=\s*([^,>]+)", attr))
        if fields.get("span") != "channels" or fields.get("mode") != "asym":
            raise kvq.Error("kvq-calibrate calibrates span = channels asym "
                            f"schemes (SKVQ's), not {attr}")
        if "reorder" in fields or "clip = dense" in attr:
            raise kvq.Error("the base spec is calibrated already: " + attr)
        self.bits = int(fields["bits"])
        self.levels = int(fields.get("levels", 2 ** self.bits))
        self.params = fields.get("params", "f16").strip()
        self.clip = float(fields.get("clip", 1.0))
        self.group = group or int(fields["group"])
        base = re.sub(r",\s*clip\s*=\s*[^,>]+", "", attr)
        self.attr = re.sub(r"group\s*=\s*\d+", f"group = {self.group}", base)


def calibrate_tensor(samples, scheme: Scheme, reorder: str, clip: str,
                     restarts: int = KMEANS_RESTARTS):
    """Per layer and kv-head: perm, sizes and clipping factors from
    samples [layers][tokens, heads, D] (`restarts`: k-means seedings)."""
    tables = {"perm": [], "sizes": [], "clip": []}
    for x in samples:
        dim = x.shape[2]
        groups = dim // scheme.group
        layer = {"perm": [], "sizes": [], "clip": []}
        unit = 32 // scheme.bits if 32 % scheme.bits == 0 else 32
        cost = lambda part: ((quant.fake_quantize(part, scheme.levels, scheme.params,
                                                  scheme.clip) - part) ** 2).sum()
        for head in range(x.shape[1]):
            perm, sizes = channel_order(x[:, head], groups, reorder, unit, cost,
                                        restarts=restarts)
            layer["perm"].append(perm)
            layer["sizes"].append(sizes)
        if clip == "group":
            layer["clip"] = [group_clips(x[:, h], layer["perm"][h], layer["sizes"][h],
                                         scheme.levels, scheme.params)
                             for h in range(x.shape[1])]
        elif clip == "layer":
            totals = [sum(_group_errors(x[:, h], layer["perm"][h], layer["sizes"][h],
                                        scheme.levels, scheme.params, a).sum()
                          for h in range(x.shape[1])) for a in CLIP_GRID]
            best = CLIP_GRID[int(np.argmin(totals))]
            layer["clip"] = [np.full(groups, best) for _ in range(x.shape[1])]
        else:
            layer["clip"] = [np.full(groups, scheme.clip) for _ in range(x.shape[1])]
        for name in tables:
            tables[name].append(layer[name])
    return {name: np.array(value) for name, value in tables.items()}


def reconstruct(x, tables, layer, scheme: Scheme) -> np.ndarray:
    """The reconstruction of x [tokens, heads, D] of `layer` under `tables`."""
    out = np.empty_like(x)
    for head in range(x.shape[1]):
        out[:, head] = quant.reconstruct(
            x[:, head], tables["perm"][layer][head], tables["sizes"][layer][head],
            scheme.levels, scheme.params, tables["clip"][layer][head])
    return out


# The spec ------------------------------------------------------------------


def _dense(array: np.ndarray) -> str:
    """An inline `dense<...>` literal of a small table."""
    return "dense<" + json.dumps(np.asarray(array).tolist()) + ">"


def _resource(array: np.ndarray, dtype) -> str:
    """A builtin dialect resource blob: 4-byte alignment, little-endian data."""
    data = np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<"))
    return "0x04000000" + data.tobytes().hex().upper()


def calibrated_attr(scheme: Scheme, tensor: str, name: str, tables: dict,
                    reorder: bool, clip: str, layer_clip: float) -> str:
    """`scheme.attr` with the calibrated clip and reorder clauses: the
    permutation in a resource blob, the small tables inline."""
    layers, heads, dim = tables["perm"].shape
    groups = dim // scheme.group
    clauses = []
    if clip == "group":
        clauses.append(f"clip = {_dense(tables['clip'])} : "
                       f"tensor<{layers}x{heads}x{groups}xf32>")
    elif layer_clip != 1.0:
        clauses.append(f"clip = {layer_clip:g}")
    if reorder:
        clauses.append(
            f"reorder = #kvq.reorder<perm = dense_resource<{name}_{tensor}_perm> : "
            f"tensor<{layers}x{heads}x{dim}xi32>, sizes = {_dense(tables['sizes'])} : "
            f"tensor<{layers}x{heads}x{groups}xi32>>")
    if not clauses:
        return scheme.attr
    return scheme.attr[:-1] + ", " + ", ".join(clauses) + ">"


def with_channel_order(header: str, order: str) -> str:
    """A `kvq.cache @name model <...> page N` header whose model states
    `channel_order = order` (in place of any it stated)."""
    model = re.search(r"model\s*<([^>]*)>", header)
    fields = re.sub(r",\s*channel_order\s*=\s*\w+", "", model.group(1))
    return (header[:model.start(1)] + f"{fields}, channel_order = {order}"
            + header[model.end(1):])


def write_spec(frame: space.Frame, schemes: dict, tables: dict, options,
               comment: str) -> str:
    """The spec text: the frame with calibrated attributes and the channel
    order they refer to, the tables in a resource section at the end."""
    name = frame.header.split("@")[1].split()[0]
    frame = dataclasses.replace(
        frame, header=with_channel_order(frame.header, options.channel_order))
    attrs, resources = {}, {}
    for tensor in space.TENSORS:
        if tensor not in tables:
            attrs[tensor] = frame.base[tensor]
            continue
        t = tables[tensor]
        reorder = options.reorder != "none"
        attrs[tensor] = [
            calibrated_attr(schemes[tensor], tensor, name, t, reorder, options.clip,
                            float(t["clip"][l][0][0]))
            for l in range(frame.layers)]
        if reorder:
            resources[f"{name}_{tensor}_perm"] = _resource(t["perm"], np.int32)
    text = space.assemble(frame, attrs[space.KEYS], attrs[space.VALUES])
    if resources:
        blobs = ",\n".join(f"      {k}: \"{v}\"" for k, v in resources.items())
        text += ("\n{-#\n  dialect_resources: {\n    builtin: {\n" + blobs +
                 "\n    }\n  }\n#-}\n")
    lines = "".join("// " + line + "\n" if line else "//\n" for line in comment.splitlines())
    return lines + text


# Driver --------------------------------------------------------------------


def make_parser() -> argparse.ArgumentParser:
    parser = cli.parser("kvq-calibrate", __doc__)
    parser.add_argument("--out", required=True, help="the calibrated spec to write")
    parser.add_argument("--base", default="skvq-k2v2-g128",
                        help="a shipped spec name or a .mlir path")
    parser.add_argument("--name", default=None, help="the cache's symbol (by default from --out)")
    parser.add_argument("--group", type=int, default=None,
                        help="the nominal (average) group size (by default the base's)")
    parser.add_argument("--activations", help=".npz of k<l>, v<l>[, q<l>] [tokens, heads, dim] (by default "
                        "SmolLM2-135M's over --text)")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="calibration text for the model")
    parser.add_argument("--tokens", type=int, default=512, help="calibration tokens")
    parser.add_argument("--heldout", type=int, default=256,
                        help="held-out tokens after the calibration ones, for the report")
    parser.add_argument("--tensors", default="keys,values", help="tensors to calibrate")
    parser.add_argument("--reorder", choices=("kmeans", "packed", "sorted", "none"),
                        default="packed", help="how channels are grouped")
    parser.add_argument("--kmeans-restarts", type=int, default=KMEANS_RESTARTS,
                        help="k-means++ seedings per kv-head for --reorder kmeans, "
                        "the least inertia kept (as SKVQ)")
    parser.add_argument("--clip", choices=("group", "layer", "none"), default="group",
                        help="clipping factors per group, per layer, or the base's")
    parser.add_argument("--json", help="write the error report as JSON here")
    parser.add_argument("--channel-order", choices=("interleaved", "half"),
                        default="interleaved",
                        help="how each head's channels pair under RoPE in the "
                        "activations (kvq.model's captures: interleaved; a Hugging "
                        "Face model's: half), stated in the spec's #kvq.model")
    cli.add_common(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    return make_parser().parse_args(argv)


def load_samples(args, pre_rope: bool):
    total = args.tokens + args.heldout
    if args.activations:
        layers = load_npz(args.activations)
        source = args.activations
    else:
        print(f"kvq-calibrate: SmolLM2-135M over {total} tokens of {args.text}",
              file=sys.stderr)
        layers = capture_model(args.text, total, pre_rope)
        source = f"SmolLM2-135M-Instruct over the first {total} tokens of {args.text}"
    available = min(t["k"].shape[0] for t in layers.values())
    if available < total:
        raise kvq.Error(f"{total} tokens needed (--tokens + --heldout), "
                        f"{available} available")
    return [layers[l] for l in range(len(layers))], source


def error_report(samples, tensors, schemes, variants, split, with_attention=True):
    """Per layer, held-out relative errors of every variant's tables
    ({variant: {tensor: tables}}): reconstruction per tensor, and attention
    output with every calibrated tensor reconstructed (not for pre-RoPE
    keys: it would need the kernels' rotation of every reconstructed key)."""
    rows = []
    for l, layer in enumerate(samples):
        held = {n: layer[n][split:] for n in layer}
        row = {"layer": l}
        for variant, tables in variants.items():
            approx = dict(held)
            for tensor in tensors:
                n = "k" if tensor == space.KEYS else "v"
                approx[n] = reconstruct(held[n], tables[tensor], l, schemes[tensor])
                row[f"{tensor}/{variant}"] = relative_error(approx[n], held[n])
            if "q" in held and with_attention:
                exact = attention(held["q"], held["k"], held["v"])
                row[f"attention/{variant}"] = relative_error(
                    attention(held["q"], approx["k"], approx["v"]), exact)
        rows.append(row)
    return rows


def summary_table(rows, variants) -> str:
    """Means over layers, one column per variant."""
    what = list(dict.fromkeys(c.split("/")[0] for c in rows[0] if c != "layer"))
    lines = ["| held-out relative error, mean of layers | " + " | ".join(variants) + " |",
             "|---" * (len(variants) + 1) + "|"]
    for w in what:
        cells = [f"{np.mean([r[f'{w}/{v}'] for r in rows]):.4f}" for v in variants]
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def calibrate_variants(calibration, scheme, args) -> dict:
    """The base grouping, each of reorder and clipping alone, and both."""
    variants = {"base": ("none", "none")}
    if args.clip != "none":
        variants["clip"] = ("none", args.clip)
    if args.reorder != "none":
        variants["reorder"] = (args.reorder, "none")
    variants["calibrated"] = (args.reorder, args.clip)
    return {name: calibrate_tensor(
        cli.progress(calibration, f"kvq-calibrate {name}", not args.no_progress,
                     unit="layer"), scheme, reorder, clip, args.kmeans_restarts)
            for name, (reorder, clip) in variants.items()}


def main(argv=None) -> int:
    args = parse_args(argv)
    cli.pin_blas_threads(args.blas_threads)
    try:
        base_text = kvq._read_spec(kvq.spec_path(args.base) if not args.base.endswith(".mlir")
                                   else args.base)[0]
        pre_rope = "pre_rope" in base_text
        samples, source = load_samples(args, pre_rope)
        heads = samples[0]["q"].shape[1] if "q" in samples[0] else samples[0]["k"].shape[1]
        _, kv_heads, dim = samples[0]["k"].shape
        restated = kvq.set_model(base_text, layers=len(samples), heads=heads,
                                 kv_heads=kv_heads, head_dim=dim, clamp_groups=True)
        # A cache name is an ASCII identifier (the kvq.cache verifier).
        name = args.name or re.sub(r"^(?=[0-9])|[^A-Za-z0-9_]", "_",
                                   args.out.rsplit("/", 1)[-1].removesuffix(".mlir"))
        frame = space.parse_frame(restated, name)
        tensors = [t.strip() for t in args.tensors.split(",") if t.strip()]
        schemes, variants = {}, {}
        for tensor in tensors:
            if tensor not in space.TENSORS:
                raise kvq.Error(f"--tensors: {tensor!r} is neither keys nor values")
            attrs = set(frame.base[tensor])
            if len(attrs) != 1:
                raise kvq.Error(f"the base's {tensor} need one scheme for every layer")
            schemes[tensor] = Scheme(attrs.pop(), args.group)
            if dim % schemes[tensor].group:
                raise kvq.Error(f"group {schemes[tensor].group} does not divide head_dim {dim}")
            n = "k" if tensor == space.KEYS else "v"
            calibration = [layer[n][:args.tokens] for layer in samples]
            for variant, tables in calibrate_variants(calibration, schemes[tensor],
                                                      args).items():
                variants.setdefault(variant, {})[tensor] = tables
        if args.kmeans_restarts < 1:
            raise kvq.Error("--kmeans-restarts must be at least 1")
        rows = error_report(samples, tensors, schemes, variants, args.tokens,
                            with_attention=not pre_rope)
        table = summary_table(rows, variants)
        command = " ".join(["kvq-calibrate"] + [a for a in (argv or sys.argv[1:])])
        comment = (f"Calibrated by `{command}`\n"
                   f"from {args.base}: reorder = {args.reorder}"
                   + (f" (best of {args.kmeans_restarts} k-means seedings), "
                      if args.reorder == "kmeans" else ", ") +
                   f"clip = {args.clip}, group = {schemes[tensors[0]].group} "
                   f"(tensors: {', '.join(tensors)}).\n"
                   f"Activations: {source}; calibration on the first {args.tokens} "
                   f"tokens, errors on the {args.heldout} after them.\n" + table)
        spec = write_spec(frame, schemes, variants["calibrated"], args, comment)
        kvq.report_bits(spec, tokens=1)  # verifies the tables
    except (kvq.Error, OSError, ValueError) as error:
        print(f"kvq-calibrate: {error}", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(spec)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"source": source, "layers": rows}, f, indent=1)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
