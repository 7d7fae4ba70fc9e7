"""What kvq's command-line tools (kvq-eval, kvq-tune, kvq-calibrate) share:
help that shows every option's default, progress bars that can be turned
off, and numpy's BLAS pinned to a stated number of threads."""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, TypeVar

T = TypeVar("T")

BLAS_THREADS_HELP = (
    "threads of numpy's BLAS (OpenBLAS), set with threadpoolctl when the tool "
    "starts. One by default: the model's products are small, spinning BLAS "
    "threads starve the cache's kernels on a shared machine, and results "
    "depend slightly on the thread count (a product's summation order), so a "
    "run is reproducible only at the same count")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                    argparse.RawDescriptionHelpFormatter):
    """Every option's default after its help; the description as written."""


def parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A tool's parser: its module docstring as the description (first
    paragraph) and epilog (the rest)."""
    summary, _, rest = doc.strip().partition("\n\n")
    return argparse.ArgumentParser(prog=prog, description=summary,
                                   epilog=rest or None,
                                   formatter_class=HelpFormatter)


def add_common(parser: argparse.ArgumentParser) -> None:
    """--blas-threads and --no-progress."""
    parser.add_argument("--blas-threads", type=int, default=1, metavar="N",
                        help=BLAS_THREADS_HELP)
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bars on stderr")


def pin_blas_threads(threads: int) -> None:
    """Limits every BLAS library numpy loaded to `threads` threads, for the
    rest of the process (kvq.blas_threads)."""
    from kvq import blas_threads

    blas_threads.pin(threads)


def progress(items: Iterable[T], desc: str, enabled: bool, unit: str = "it",
             total: int | None = None) -> Iterable[T]:
    """`items` with a tqdm bar on stderr when enabled."""
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit=unit, total=total, file=sys.stderr)
