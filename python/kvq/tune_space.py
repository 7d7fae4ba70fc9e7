"""The search space of kvq-tune: per-layer key and value schemes inside a
frame, assembled into readable specs and priced by kvq's own accounting.

A *frame* is everything of a spec that is not a per-layer scheme: the model
shape, the page size and the key and value windows (sink, recent, flush). It
comes from the base spec (--base), restated for the model. Windows are per
tensor, not per layer, in the dialect, so the frame fixes them and the search
chooses one scheme per *slot*, a (tensor, layer) pair, from a menu of
options. A base's cross-layer sharing clause is dropped: it ties layer pairs
to one scheme, which a per-slot search does not keep.

Every price is the compiler's exact byte count (`kvq.report_bits`, i.e.
`computeSequenceBytes`: codes, parameters, full-precision windows at
capacity, block tables and key norms) for one sequence of a stated number of
tokens. Nothing here estimates bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import kvq

KEYS, VALUES = "keys", "values"
TENSORS = (KEYS, VALUES)
FULL_PRECISION = "#kvq.full_precision"


@dataclass(frozen=True)
class Option:
    """One per-layer scheme a slot may take: a short label for reports and
    the `kvq.layers` attribute it stands for."""

    label: str
    attr: str


def _quant(bits, mode, span, group=32, extra=""):
    extra = f", {extra}" if extra else ""
    return (f"#kvq.quant<bits = {bits}, mode = {mode}, span = {span}, "
            f"group = {group}{extra}>")


def short_label(attr: str) -> str:
    """A compact name of a scheme for tables: bits, mode, span and group,
    then calibration flags ("2b asym tok32", "3b sym ch32 kn", "f16")."""
    if attr == FULL_PRECISION:
        return "f16"
    fields = dict(re.findall(r"(\w+)\s*=\s*([^,>]+)", attr))
    span = {"tokens": "tok", "channels": "ch"}.get(fields.get("span"), "")
    label = f"{fields.get('bits')}b {fields.get('mode')} {span}{fields.get('group')}"
    flags = [name for name in ("key_norm", "eta", "clip", "params", "rotate")
             if re.search(rf"\b{name}\b", attr)]
    return " ".join([label] + [f.replace("key_norm", "kn") for f in flags])


def _options(*attrs):
    return tuple(Option(short_label(a), a) for a in attrs)


# The menus name the published building blocks: KIVI's asym groups (keys
# across tokens, values across channels), InnerQ's sym groups with key
# normalisation and its hybrid values, XQuant's eta-calibrated 1-bit values,
# wider groups and full precision. Options the frame's windows do not admit
# (span = tokens needs a flush that is a multiple of the group) are dropped
# by the verifier, see `valid_options`.
KEY_OPTIONS = _options(
    _quant(1, "asym", "tokens"),
    _quant(2, "asym", "tokens"),
    _quant(3, "asym", "tokens"),
    _quant(4, "asym", "tokens"),
    _quant(2, "sym", "channels", extra="key_norm = true"),
    _quant(2, "sym", "channels", 64, "key_norm = true"),
    _quant(3, "sym", "channels", extra="key_norm = true"),
    _quant(4, "sym", "channels", extra="key_norm = true"),
    _quant(2, "asym", "tokens", extra="rotate = hadamard, rotate_seed = 1"),
    _quant(3, "sym", "channels", extra="rotate = hadamard, rotate_seed = 1"),
    _quant(4, "asym", "channels", extra="rotate = hadamard, rotate_seed = 1"),
    FULL_PRECISION,
)
VALUE_OPTIONS = _options(
    _quant(1, "asym", "channels", extra="eta = 1/6"),
    _quant(2, "asym", "channels"),
    _quant(2, "hybrid", "tokens"),
    _quant(3, "sym", "tokens"),
    _quant(4, "asym", "channels"),
    _quant(2, "asym", "channels", extra="rotate = hadamard, rotate_seed = 1"),
    _quant(3, "asym", "channels", extra="rotate = hadamard, rotate_seed = 1"),
    _quant(4, "asym", "channels", extra="rotate = hadamard, rotate_seed = 1"),
    FULL_PRECISION,
)
DEFAULT_MENU = {KEYS: KEY_OPTIONS, VALUES: VALUE_OPTIONS}

_HEADER = re.compile(r"(kvq\.cache\s+@\w+\s+model\s*<[^>]*>\s*page\s+\d+)")
_TENSOR = re.compile(r"kvq\.(keys|values)(\s[^{]*)\{([^}]*)\}", re.S)
_LAYERS = re.compile(r"kvq\.layers\s+(\d+)\s+to\s+(\d+)\s*:\s*(#kvq\.[^\n]*?)\s*$",
                     re.M)
_MODEL = re.compile(r"layers\s*=\s*(\d+),\s*heads\s*=\s*(\d+),\s*kv_heads\s*=\s*"
                    r"(\d+),\s*head_dim\s*=\s*(\d+)")


@dataclass(frozen=True)
class Frame:
    """The per-tensor part of a spec (see the module docstring), and the
    base spec's own per-layer schemes, which join the menus so that the base
    is always a point of the search space."""

    header: str  # kvq.cache @name model <...> page N
    clauses: dict  # tensor -> " window <...> "
    base: dict  # tensor -> [attr per layer]
    layers: int
    kv_heads: int
    head_dim: int

    @property
    def elements_per_token(self) -> int:
        """Cached elements per token: keys and values of every layer and
        kv-head."""
        return 2 * self.layers * self.kv_heads * self.head_dim


def parse_frame(spec_text: str, name: str = "tuned") -> Frame:
    """The frame of a (restated) spec with one kvq.cache, renamed @name."""
    header = _HEADER.search(spec_text)
    if not header:
        raise kvq.Error("kvq-tune: the base spec has no kvq.cache header")
    shape = _MODEL.search(header.group(1))
    layers, _, kv_heads, head_dim = (int(x) for x in shape.groups())
    clauses, base = {}, {}
    for tensor, clause, body in _TENSOR.findall(spec_text):
        # Sharing ties layer pairs to one scheme; the search chooses each
        # layer freely, so the frame drops it (see docs/Evaluation.md).
        clause = re.sub(r"share\s*<[^>]*>", "", clause)
        clauses[tensor] = " " + " ".join(clause.split()) + " "
        schemes = [None] * layers
        for begin, end, attr in _LAYERS.findall(body):
            for layer in range(int(begin), int(end)):
                schemes[layer] = attr
        if None in schemes:
            raise kvq.Error(f"kvq-tune: the base spec's {tensor} schedule is "
                            "not in kvq.layers ranges (expanded specs are not "
                            "supported as a base)")
        base[tensor] = schemes
    text = re.sub(r"@\w+", "@" + name, header.group(1), count=1)
    return Frame(text, clauses, base, layers, kv_heads, head_dim)


def merged_ranges(schemes: list[str]) -> list[tuple[int, int, str]]:
    """Runs of equal consecutive schemes as (begin, end, attr): the readable
    `kvq.layers b to e` form."""
    runs = []
    for layer, attr in enumerate(schemes):
        if runs and runs[-1][2] == attr:
            runs[-1] = (runs[-1][0], layer + 1, attr)
        else:
            runs.append((layer, layer + 1, attr))
    return runs


def assemble(frame: Frame, keys: list[str], values: list[str]) -> str:
    """The spec text of `frame` with one attribute per layer for keys and
    values, consecutive equal layers merged into one `kvq.layers` range."""
    lines = [frame.header + " {"]
    for tensor, schemes in ((KEYS, keys), (VALUES, values)):
        lines.append(f"  kvq.{tensor}{frame.clauses[tensor]}{{")
        for begin, end, attr in merged_ranges(schemes):
            lines.append(f"    kvq.layers {begin} to {end} : {attr}")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def uniform(frame: Frame, keys: str, values: str) -> str:
    """A spec with the same key scheme and the same value scheme in every
    layer."""
    return assemble(frame, [keys] * frame.layers, [values] * frame.layers)


def sequence_bytes(spec: str, tokens: int) -> int:
    """Exact bytes of one sequence of `tokens` tokens (kvq's accounting)."""
    return int(kvq.report_bits(spec, tokens=tokens)[0]["bytes"])


def bits_per_element(frame: Frame, nbytes: int, tokens: int) -> float:
    return nbytes * 8 / (tokens * frame.elements_per_token)


def budget_bytes(frame: Frame, budget: str, tokens: int) -> int:
    """The byte limit of a budget written as bits per cached element
    ("4.63", "4.63bits") or bytes per token ("6671B", "6671bytes"), for one
    sequence of `tokens` tokens. A bits budget is rounded down to whole
    bytes, so a mix within the limit is within the budget."""
    text = budget.strip().lower()
    match = re.fullmatch(r"([0-9.]+)\s*(bits?|b|bytes?)?", text)
    if not match:
        raise ValueError(f"budget {budget!r}: a number of bits per element "
                         "or '<n>B' bytes per token")
    value, unit = float(match.group(1)), match.group(2) or "bits"
    if unit in ("b", "byte", "bytes"):
        return math.floor(value * tokens)
    return math.floor(value * tokens * frame.elements_per_token / 8)


def valid_options(frame: Frame, menu: dict) -> dict:
    """The menu restricted to options the verifier accepts in this frame,
    with the base's own schemes added (deduplicated by attribute)."""
    out = {}
    for tensor in TENSORS:
        other = VALUES if tensor == KEYS else KEYS
        options, seen = [], set()
        candidates = list(menu[tensor]) + list(_options(
            *dict.fromkeys(frame.base[tensor])))
        for option in candidates:
            if option.attr in seen:
                continue
            per_tensor = {tensor: option.attr, other: FULL_PRECISION}
            try:
                sequence_bytes(uniform(frame, per_tensor[KEYS], per_tensor[VALUES]), 1)
            except kvq.SpecError:
                continue
            seen.add(option.attr)
            options.append(option)
        out[tensor] = options
    return out


