"""A single query's products run BLAS on one thread; the process's setting comes back after."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from compiler.index.blas import one_thread


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_restored_after() -> None:
    before = blas_threads()
    assert before  # NumPy's OpenBLAS is loaded
    with one_thread():
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before
