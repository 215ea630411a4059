"""One writer at a time: compile, sync and the memory server take this lock before writing.

An OS-level lock (flock through `filelock`): a killed process releases it, so a stale lock
file never blocks the next run.
"""

from __future__ import annotations

from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

import filelock


class VaultBusyError(RuntimeError):
    """Another engram process holds the writer lock for too long."""


@contextmanager
def writer_lock(engram_dir: Path, timeout: float = 600.0) -> Iterator[None]:
    """Holds `.engram/lock` for the duration of the block; raises VaultBusyError after `timeout` s."""
    engram_dir.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(engram_dir / "lock"), timeout=timeout)
    try:
        with lock:
            yield
    except filelock.Timeout as error:
        raise VaultBusyError(f"{engram_dir / 'lock'}: another engram process is writing to this vault") from error
