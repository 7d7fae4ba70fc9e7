"""One BLAS thread for numpy in the evaluator.

OpenBLAS splits a matrix product over its threads and sums the partial
products in an order that depends on their number, so the model's logits,
and every KL divergence and perplexity computed from them, moved in the last
digits with the thread count. kvq-eval's results are reproducible only with
the count fixed: `pin()` limits every BLAS library numpy has loaded to one
thread (threadpoolctl works after the library is loaded, which an
environment variable set after `import numpy` does not), and sets the
variables for processes started later.
"""

from __future__ import annotations

import os

# The thread count of the tables in docs/Evaluation.md.
BLAS_THREADS = 1

_ENVIRONMENT = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pin(threads: int = BLAS_THREADS) -> None:
    """Limits numpy's BLAS to `threads` threads from now on."""
    from threadpoolctl import threadpool_limits

    for name in _ENVIRONMENT:
        os.environ[name] = str(threads)
    threadpool_limits(limits=threads, user_api="blas")


def current() -> list[int]:
    """The thread count of every BLAS library loaded (for tests)."""
    from threadpoolctl import threadpool_info

    return [info["num_threads"] for info in threadpool_info()
            if info.get("user_api") == "blas"]
