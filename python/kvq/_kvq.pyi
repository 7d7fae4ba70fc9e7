from collections.abc import Sequence
from typing import Annotated

import numpy
from numpy.typing import NDArray


class Error(Exception):
    pass

class SpecError(Error):
    pass

def compile(spec: str, dir: str, host_cpu: str, name: str, dot_factor_bits: int, quantized_attend_programs: bool) -> None:
    """Compiles spec text into artifact directory `dir` (kvq.compile)."""

def set_model(spec: str, layers: int, heads: int, kv_heads: int, head_dim: int, dtype: str, clamp_groups: bool, name: str) -> str:
    """The spec restated for a model shape (kvq.set_model)."""

def report_bits(spec: str, tokens: int, name: str) -> list:
    """Bit accounting of every cache of a spec (kvq.report_bits)."""

class Cache:
    """A runtime cache on an artifact (wrapped by kvq.Cache)"""

    def __init__(self, dir: str, backend: str, max_sequences: int, pages: int, threads: int) -> None: ...

    @property
    def layers(self) -> int: ...

    @property
    def heads(self) -> int: ...

    @property
    def kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def dtype(self) -> str: ...

    @property
    def channel_order(self) -> str: ...

    def add_sequence(self) -> int: ...

    def remove_sequence(self, arg: int, /) -> None: ...

    def fork_sequence(self, source: int) -> int: ...

    def save(self, path: str, sequences: Sequence[int] = []) -> None: ...

    def restore(self, path: str) -> list[int]: ...

    def append(self, layer: int, items: Sequence[tuple[int, Annotated[NDArray, dict(device='cpu', writable=False)], Annotated[NDArray, dict(device='cpu', writable=False)]]], bf16_bits: bool = False) -> None: ...

    def attend(self, layer: int, seqs: Sequence[int], q: Annotated[NDArray, dict(device='cpu', writable=False)], unrotated: bool = False, bf16_bits: bool = False, queries: Sequence[int] | None = None) -> NDArray[numpy.float32]: ...

    def memory_stats(self) -> dict: ...

    def counts(self, arg0: int, arg1: int, /) -> dict: ...

    def read_slice_page(self, arg0: str, arg1: int, arg2: int, arg3: int, arg4: int, /) -> bytes: ...

    def read_window(self, arg0: str, arg1: int, arg2: int, /) -> bytes: ...

    def read_sink(self, arg0: str, arg1: int, arg2: int, /) -> bytes: ...

    def read_key_norms(self, arg0: int, arg1: int, /) -> list[float]: ...

    def saturated_groups(self, arg: str, /) -> list[int]: ...
