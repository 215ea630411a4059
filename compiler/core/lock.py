"""One writer at a time: compile, sync and the memory server take this lock before writing.

An OS-level lock (`flock` on `.engram/lock`): a killed process releases it, so a stale lock
file never blocks the next run. Taken with the standard library's `fcntl`, not `filelock`:
importing filelock 4 loads 66 modules, 21 of its own (0.02–0.03 s of every cold `engram memory add`)
for what is here one system call, retried until the timeout.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from compiler.core.errors import BusyError
from compiler.core.files import contained
from compiler.core.generation import lock_taken, note_own_writes
from compiler.core.local_state import ensure_gitignore

POLL = 0.05  # seconds between two tries while another process holds the lock


class _ProcessLock:
    """The lock on one file, counted: a library call that takes it inside another (any thread of
    this process) only counts up, never deadlocks on its own process; the file is unlocked and
    closed when the count is back to 0."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self._fd = -1
        self._guard = threading.Lock()  # the count and the descriptor change together

    def acquire(self, timeout: float) -> int:
        """Takes the lock (or counts one more); returns the count, 1 for the outermost, 0 when
        `timeout` s passed first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._guard:
                if self.count:
                    self.count += 1
                    return self.count
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                except BaseException:
                    os.close(fd)
                    raise
                else:
                    self._fd, self.count = fd, 1
                    return 1
            if time.monotonic() >= deadline:
                return 0
            time.sleep(POLL)

    def release(self) -> None:
        with self._guard:
            self.count -= 1
            if not self.count:
                fd, self._fd = self._fd, -1
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


_LOCKS: dict[str, _ProcessLock] = {}


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
    lock = _LOCKS.setdefault(path, _ProcessLock(path))  # one per path: what counts nested acquisitions
    count = lock.acquire(timeout)
    if not count:
        raise BusyError(f"{engram_dir / 'lock'}: another engram process is writing to this vault")
    try:
        outermost = count == 1
        seen = lock_taken(engram_dir / "cache") if outermost else ("", None)
        try:
            yield
        finally:
            if outermost:  # our own Chroma writes do not make our client stale (see index_generation)
                note_own_writes(engram_dir / "cache", seen)
    finally:
        lock.release()
