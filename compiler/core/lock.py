"""One writer at a time: compile, sync and the memory server take this lock before writing.

An OS-level lock (flock through `filelock`): a killed process releases it, so a stale lock
file never blocks the next run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from compiler.core.errors import BusyError
from compiler.core.files import contained
from compiler.core.generation import lock_taken, note_own_writes
from compiler.core.local_state import ensure_gitignore

_LOCKS: dict[str, filelock.FileLock] = {}


@contextmanager
def writer_lock(engram_dir: Path, timeout: float = 600.0) -> Iterator[None]:
    """Holds `.engram/lock` for the duration of the block; raises BusyError after `timeout` s.

    Raises UsageError when `.engram` is a symlink out of the vault: every writer takes this lock,
    so none of them writes the journal, the caches or the chunks outside.
    """
    contained(engram_dir.parent, engram_dir)
    engram_dir.mkdir(parents=True, exist_ok=True)
    ensure_gitignore(engram_dir)  # the first writer keeps the local state out of git
    path = str((engram_dir / "lock").resolve())
    # One FileLock object per path: filelock counts nested acquisitions of the same object, so a
    # library call that takes the lock inside another never deadlocks on its own process.
    lock = _LOCKS.setdefault(path, filelock.FileLock(path, thread_local=False))
    try:
        with lock.acquire(timeout=timeout):
            outermost = lock.lock_counter == 1
            seen = lock_taken(engram_dir / "cache") if outermost else ("", None)
            try:
                yield
            finally:
                if outermost:  # our own Chroma writes do not make our client stale (see index_generation)
                    note_own_writes(engram_dir / "cache", seen)
    except filelock.Timeout as error:
        raise BusyError(f"{engram_dir / 'lock'}: another engram process is writing to this vault") from error
