"""One BLAS thread for the small matrix products of a single query.

NumPy's OpenBLAS splits a product over every core once it passes a few thousand multiply-adds,
and its threads hand the halves back and forth. For one query's products (its few word pieces
against a recall's candidates, one vector against the store) the hand-off costs more than the
arithmetic, and on a busy 2-core machine a waiting thread lost its core: the late-interaction
product of a recall took 68 ms on two threads and 3 ms on one (load average 14). Compile's
block products (hundreds of rows at once) keep every thread.

A command that runs one query and exits (`engram query`, `vsearch`, `recall`, `memory add`) starts
OpenBLAS with one thread instead (`one_thread_process`): it never runs a block product, and the
worker OpenBLAS starts per core at import spins on the other core for a while before it sleeps,
which is the core the model's session is created on (compiler.embed.onnx_minilm).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"  # read once, when OpenBLAS loads (numpy's import)
_one_thread_process = False  # set when this process's OpenBLAS was started with one thread


def one_thread_process() -> None:
    """Starts NumPy's BLAS on one thread for the whole process, when numpy is not imported yet (and
    the environment does not set it otherwise): for a command that embeds one query and exits."""
    global _one_thread_process
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS_ENV, "1")
        _one_thread_process = os.environ[BLAS_THREADS_ENV] == "1"


@contextmanager
def one_thread() -> Iterator[None]:
    """Runs the block with NumPy's BLAS on one thread (the setting is the process's: not for threads)."""
    if _one_thread_process:  # nothing to limit, and no library lookup (threadpoolctl, ~5 ms CPU)
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield


@cache
def _controller() -> Any:
    # Found once per process: looking up the loaded BLAS libraries costs ~2 ms, a limit 0.03 ms.
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
