"""kvq: quantized KV caches compiled from a declaration.

Compile a spec (the MLIR `kvq.cache` of specs/) into an artifact, restate it
for another model, account its bits, and run a cache on it:

    import kvq, numpy as np
    spec = kvq.set_model(kvq.spec_path("kivi-2bit"),
                         layers=30, heads=9, kv_heads=3, head_dim=64)
    artifact = kvq.compile(spec)
    cache = kvq.Cache(artifact, max_sequences=4, pages=64)
    seq = cache.add_sequence()
    cache.append(0, [(seq, k, v)])          # [n, kv_heads, head_dim] each
    out = cache.attend(0, [seq], q)          # q: [1, heads, head_dim]

Every error raises kvq.Error (kvq.SpecError for specs, carrying MLIR's
located diagnostics); a failed cache call leaves the cache unchanged. A path
argument holding a NUL byte is a kvq.Error before anything is opened. A
Cache may be shared by threads: its calls run one at a time, while calls on
different caches run in parallel (docs/Reliability.md).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from . import _kvq

# The one version of the package (pyproject.toml reads it from here).
__version__ = "0.1.0"

Error = _kvq.Error
SpecError = _kvq.SpecError

__all__ = [
    "__version__",
    "Artifact",
    "Cache",
    "Error",
    "SpecError",
    "compile",
    "report_bits",
    "set_model",
    "spec_path",
]


def spec_path(name: str) -> str:
    """The path of a shipped spec (`specs/<name>.mlir`): in $KVQ_SOURCE_DIR's
    specs/ if set, else in the installed package (`pip install .` ships
    them in kvq/specs), else in the source tree the build tree came from."""
    if "KVQ_SOURCE_DIR" in os.environ:
        roots = [os.path.join(os.environ["KVQ_SOURCE_DIR"], "specs")]
    else:
        roots = [os.path.join(os.path.dirname(__file__), "specs"),
                 os.path.join(_SOURCE_DIR, "specs")]
    for root in roots:
        path = os.path.join(root, name + ".mlir")
        if os.path.exists(path):
            return path
    raise Error(f"no shipped spec named {name!r} (looked in {', '.join(roots)})")


# The checkout of a build tree's package (build/python/kvq -> the checkout).
_SOURCE_DIR = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", "..")
)


def _read_spec(spec: str) -> tuple[str, str]:
    """(text, name for diagnostics) of a spec given as text or as a path.

    A one-line string without `{` that ends in `.mlir` or contains `/` is a
    path (spec text always has a `{`): if no such file exists, that is the
    error, rather than a parse error of the path as MLIR."""
    if not isinstance(spec, str):
        raise Error(f"spec must be MLIR text or a path (str), got {type(spec).__name__}")
    if "\n" not in spec and "\0" in spec:
        at = spec.index("\0")
        raise Error(f"spec: the path contains a NUL byte at offset {at}")
    if "\n" not in spec and "{" not in spec and (spec.endswith(".mlir") or "/" in spec):
        if not os.path.isfile(spec):
            raise Error(f"spec: no such file {spec!r} (a spec is MLIR text or the "
                        "path of a .mlir file; kvq.spec_path(name) finds a shipped one)")
        with open(spec, encoding="utf-8") as f:
            return f.read(), spec
    return spec, "<spec>"


@dataclass(frozen=True)
class Artifact:
    """A compiled artifact directory (docs/KernelABI.md). One that
    kvq.compile made in a temporary directory owns it: the directory is
    removed once neither the artifact nor a Cache on it is left."""

    dir: str
    _temporary: tempfile.TemporaryDirectory | None = field(
        default=None, repr=False, compare=False)

    @property
    def manifest_path(self) -> str:
        return os.path.join(self.dir, "manifest.json")


def compile(
    spec: str,
    out_dir: str | None = None,
    host_cpu: str = "native",
    *,
    dot_factor_bits: int = 16,
    quantized_attend_programs: bool = False,
) -> Artifact:
    """Compiles `spec` (text or a .mlir path) as `kvq-opt --kvq-compile`
    does, into `out_dir` (if None, a temporary directory the artifact
    owns). `dot_factor_bits` (16 or 8) and `quantized_attend_programs` are
    kvq-opt's --kvq-dot-factor-bits and --kvq-quantized-attend-programs:
    8-bit factors round the attend programs' integer dots coarser
    (docs/Numerics.md, "Attention on integer dots")."""
    text, name = _read_spec(spec)
    temporary = None
    if out_dir is None:
        temporary = tempfile.TemporaryDirectory(prefix="kvq-artifact-")
        out_dir = temporary.name
    try:
        _kvq.compile(text, out_dir, host_cpu, name, dot_factor_bits,
                     quantized_attend_programs)
    except BaseException:
        if temporary is not None:
            temporary.cleanup()
        raise
    return Artifact(out_dir, temporary)


def set_model(
    spec: str,
    layers: int = 0,
    heads: int = 0,
    kv_heads: int = 0,
    head_dim: int = 0,
    dtype: str = "",
    clamp_groups: bool = False,
) -> str:
    """The spec restated for another model shape (kvq-set-model; the rules
    are in docs/Rationale.md). Arguments left at 0 / "" keep their value."""
    text, name = _read_spec(spec)
    return _kvq.set_model(
        text, layers, heads, kv_heads, head_dim, dtype, clamp_groups, name
    )


def report_bits(spec: str, tokens: int = 4096) -> list[dict]:
    """Bit accounting of every cache of `spec` (docs/BitAccounting.md):
    code and storage bits per element, and the exact bytes of one sequence
    of `tokens` tokens."""
    text, name = _read_spec(spec)
    return _kvq.report_bits(text, tokens, name)


def _bf16_dtype():
    """numpy's bfloat16 (ml_dtypes'), or None without ml_dtypes."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


_BF16 = _bf16_dtype()


def _array(x, what: str) -> tuple[object, bool]:
    """`x` as the extension takes it, and whether it holds bfloat16 bits.

    The extension reads any CPU array through DLPack or the buffer protocol
    without a copy. Errors here name what nanobind would only report as
    "incompatible function arguments": a non-array, a non-float numpy
    array, an array on another device. numpy cannot export ml_dtypes'
    bfloat16 through DLPack: such an array goes as its uint16 bits."""
    if isinstance(x, np.ndarray):
        if _BF16 is not None and x.dtype == _BF16:
            return x.view(np.uint16), True
        if x.dtype.kind != "f":
            raise Error(f"{what} is {x.dtype}: the cache takes float32 or its own "
                        "dtype (float16 or bfloat16)")
        return x, False
    if hasattr(x, "__dlpack_device__"):
        device, _ = x.__dlpack_device__()
        if int(device) != 1:  # kDLCPU
            raise Error(f"{what} is on DLPack device type {int(device)}, not the "
                        "CPU: kvq.Cache reads host memory (copy it to the CPU)")
        return x, False
    if hasattr(x, "__dlpack__") or hasattr(x, "__array_interface__"):
        return x, False
    raise Error(f"{what} must be an array (numpy, or any object with __dlpack__ "
                f"such as a torch tensor), got {type(x).__name__}")


def _count(n, what: str) -> int:
    """`n` checked as a count: the extension takes unsigned ints, and would
    answer a negative one with "incompatible function arguments"."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise Error(f"{what} must hold ints, got {type(n).__name__}")
    if not 0 <= n < 2 ** 32:
        raise Error(f"{what} holds {n}: counts are 0 to 2^32 - 1")
    return int(n)


class Cache:
    """A KV cache on a compiled artifact (the runtime's kvq::runtime::Cache).

    Arrays are C-contiguous CPU arrays of float32 or the cache's dtype, read
    without a copy: numpy (float16, float32, and bfloat16 as ml_dtypes'
    `ml_dtypes.bfloat16`) or any object with `__dlpack__` (torch, JAX,
    CuPy on the host...). A float32 value beyond the cache dtype's range is
    an error ("overflows f16"), as is a NaN or an infinity.

    Threads may share a Cache: each call releases the GIL and takes the
    cache's own lock, so calls on one cache run one at a time and calls on
    different caches run in parallel.
    """

    def __init__(
        self,
        artifact: Artifact | str,
        backend: str = "cpu",
        max_sequences: int = 8,
        pages: int = 64,
        threads: int = 2,
    ):
        directory = artifact.dir if isinstance(artifact, Artifact) else artifact
        self._cache = _kvq.Cache(directory, backend, max_sequences, pages, threads)
        # The artifact's directory lives as long as the cache (kvq.compile's
        # temporary one is removed with the last reference).
        self._artifact = artifact

    layers = property(lambda self: self._cache.layers,
                      doc="Layers of the artifact's model.")
    heads = property(lambda self: self._cache.heads, doc="Query heads.")
    kv_heads = property(lambda self: self._cache.kv_heads, doc="Key/value heads.")
    head_dim = property(lambda self: self._cache.head_dim, doc="Channels per head.")
    dtype = property(lambda self: self._cache.dtype,
                     doc='The model dtype the cache stores: "f16", "bf16" or "f32".')
    channel_order = property(
        lambda self: self._cache.channel_order,
        doc='How each head\'s channels pair under RoPE in the keys and queries '
            'the cache takes (#kvq.model\'s channel_order): "half" (i with '
            'i + head_dim/2), "interleaved" (2i with 2i + 1), or "any".')

    def add_sequence(self) -> int:
        """A new, empty sequence in a free slot (of `max_sequences`)."""
        return self._cache.add_sequence()

    def remove_sequence(self, seq: int) -> None:
        """Frees `seq`'s slot and its pages (pages shared by a fork stay
        with the other sequences)."""
        self._cache.remove_sequence(seq)

    def fork_sequence(self, source: int) -> int:
        """A new sequence sharing `source`'s pages copy-on-write (prefix
        caching, beam search); windows, sinks and norms are copied."""
        return self._cache.fork_sequence(source)

    def save(self, path: str, sequences: Sequence[int] = ()) -> None:
        """Writes `sequences` (every sequence if empty) to a versioned,
        checksummed cache file (docs/Reliability.md)."""
        self._cache.save(path, list(sequences))

    def restore(self, path: str) -> list[int]:
        """Adds the sequences of a cache file; a corrupt or truncated file
        is an error and changes nothing. Returns their new ids."""
        return self._cache.restore(path)

    def append(self, layer: int, items: Iterable[tuple[int, object, object]]) -> None:
        """Appends `(seq, k, v)` for each sequence (k, v: [n, kv_heads,
        head_dim]) to `layer`, all in one call; on an error nothing is
        appended."""
        arrays, bf16 = [], False
        for seq, k, v in items:
            (k, k_bf16), (v, v_bf16) = _array(k, "k"), _array(v, "v")
            if k_bf16 != v_bf16:
                raise Error("k and v must have one dtype (one is bfloat16)")
            bf16 |= k_bf16
            arrays.append((seq, k, v))
        self._cache.append(self._layer(layer), arrays, bf16)

    def attend(self, layer: int, seqs: Sequence[int], q,
               unrotated: bool = False,
               queries: Sequence[int] | None = None) -> np.ndarray:
        """Decode attention of one query per sequence (q: [len(seqs), heads,
        head_dim]) over its cached past; returns float32 [len(seqs), heads,
        head_dim]. q is rotated at the new token's position, as the model
        computes it; `unrotated=True` passes it before RoPE instead, and the
        kernel rotates it (layers with pre-RoPE keys only).

        `queries` attends several queries per sequence in one launch
        (chunked prefill, speculative verification): sequence i, holding T
        tokens of `layer`, has queries[i] (1 to T) consecutive rows of q,
        those of its last queries[i] tokens, and its j-th attends its first
        T - queries[i] + 1 + j tokens as the cache holds them now. q and the
        result have sum(queries) rows.

        A sequence with no cached token in `layer` attends to zeros (the
        empty weighted sum), as FlashAttention does for an empty key range,
        so a batch may hold a sequence not yet appended; an engine appends
        the new token before it attends, so a decode step never sees one."""
        q, bf16 = _array(q, "q")
        counts = None
        if queries is not None:
            counts = [_count(n, "queries") for n in queries]
        return self._cache.attend(self._layer(layer), list(seqs), q, unrotated, bf16,
                                  counts)

    def _layer(self, layer: int) -> int:
        """`layer` checked: the extension takes an unsigned int, and would
        answer a negative one with "incompatible function arguments"."""
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise Error(f"layer must be an int, got {type(layer).__name__}")
        if not 0 <= layer < self.layers:
            raise Error(f"layer {layer} out of range (the model has {self.layers})")
        return int(layer)

    def memory_stats(self) -> dict:
        """Pages in use, bytes by kind (pages, windows, sinks, norms, block
        tables, pools), bytes used and allocated, cached elements and the
        measured bits per cached element."""
        return self._cache.memory_stats()

    def counts(self, seq: int, layer: int) -> dict:
        """Tokens per region (sink, quantized, window) of keys and values."""
        return self._cache.counts(seq, self._layer(layer))

    def read_window(self, tensor: str, seq: int, layer: int) -> np.ndarray:
        """The recent-window tokens of `tensor` ("keys" or "values"),
        [n, kv_heads, head_dim] in the cache's dtype, oldest first."""
        return self._tokens(self._cache.read_window(tensor, seq, self._layer(layer)))

    def read_sink(self, tensor: str, seq: int, layer: int) -> np.ndarray:
        """The sink tokens of `tensor` kept at full precision, [n, kv_heads,
        head_dim] in the cache's dtype."""
        return self._tokens(self._cache.read_sink(tensor, seq, self._layer(layer)))

    def read_slice_page(
        self, tensor: str, seq: int, layer: int, kv_head: int, page: int
    ) -> bytes:
        """The raw bytes (codes, scales, zero-points) of one page slice."""
        return self._cache.read_slice_page(tensor, seq, self._layer(layer), kv_head, page)

    def read_key_norms(self, seq: int, layer: int) -> np.ndarray:
        """The key norms of (seq, layer), [kv_heads * head_dim] float32
        (empty before the first append or without `key_norm`)."""
        return np.asarray(self._cache.read_key_norms(seq, self._layer(layer)), np.float32)

    def saturated_groups(self, tensor: str) -> list[int]:
        """Per layer of `tensor`: the groups quantized since the cache was
        created whose parameters saturated at the parameter dtype's largest
        finite value (docs/Numerics.md)."""
        return self._cache.saturated_groups(tensor)

    def _tokens(self, raw: bytes) -> np.ndarray:
        if self.dtype == "f32":
            values = np.frombuffer(raw, np.float32)
        elif self.dtype == "f16":
            values = np.frombuffer(raw, np.float16)
        else:  # bf16: widen the raw bits to float32.
            bits = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
            values = bits.view(np.float32)
        return values.reshape(-1, self.kv_heads, self.head_dim)
