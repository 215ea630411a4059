"""A single query's products run BLAS on one thread; the process's setting comes back after."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from compiler.index import blas
from compiler.index.blas import one_thread


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_restored_after() -> None:
    # The controller is found once per process; an earlier test may have found it before another
    # BLAS was loaded (SciPy's, through sentence-transformers, when tests/embed runs first), which
    # it then leaves alone: NumPy's products never run on that one. Find it afresh, as a new process would.
    blas._controller.cache_clear()
    before = blas_threads()
    assert before  # NumPy's OpenBLAS is loaded
    with one_thread():
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before


def _run(code: str, env_extra: dict[str, str] | None = None) -> str:
    """Runs `code` in a new Python process (numpy not yet imported there) and returns its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | (env_extra or {})
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


ONE_THREAD_PROCESS = """
from compiler.index import blas
blas.one_thread_process()
import numpy
from threadpoolctl import threadpool_info
print([lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"], blas._one_thread_process)
with blas.one_thread():
    print(blas._controller.cache_info().currsize)
"""


def test_a_one_thread_process_starts_blas_on_one_thread_and_looks_up_nothing() -> None:
    assert _run(ONE_THREAD_PROCESS).splitlines() == ["[1] True", "0"]


def test_a_thread_count_the_environment_sets_is_kept_and_still_limited() -> None:
    lines = _run(ONE_THREAD_PROCESS, {"OPENBLAS_NUM_THREADS": "2"}).splitlines()
    assert lines == ["[2] False", "1"]


def test_after_numpy_is_imported_nothing_changes() -> None:
    code = "import numpy\n" + ONE_THREAD_PROCESS
    lines = _run(code).splitlines()
    assert lines[0].endswith("False") and lines[1] == "1"
