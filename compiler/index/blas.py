"""One BLAS thread for the small matrix products of a single query.

NumPy's OpenBLAS splits a product over every core once it passes a few thousand multiply-adds,
and its threads hand the halves back and forth. For one query's products (its few word pieces
against a recall's candidates, one vector against the store) the hand-off costs more than the
arithmetic, and on a busy 2-core machine a waiting thread lost its core: the late-interaction
product of a recall took 68 ms on two threads and 3 ms on one (load average 14). Compile's
block products (hundreds of rows at once) keep every thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any


@contextmanager
def one_thread() -> Iterator[None]:
    """Runs the block with NumPy's BLAS on one thread (the setting is the process's: not for threads)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


@cache
def _controller() -> Any:
    # Found once per process: looking up the loaded BLAS libraries costs ~2 ms, a limit 0.03 ms.
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
