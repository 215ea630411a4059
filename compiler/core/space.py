"""Full disks: whether a failed write ran out of space, and how much room its filesystem has.

SQLite says `database or disk is full`, Chroma wraps the same words (or the OS's `No space left
on device`) in its own error, the OS raises ENOSPC: `is_disk_full` recognises all three, so the
modules that write can turn them into one `StorageFullError` (compiler.core.errors).
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

# What the storage engines say when a write found no room; matched lower-cased.
_FULL_WORDS = ("database or disk is full", "no space left on device", "disk quota exceeded", "(os error 28)")
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
# SQLite reports a journal it could not extend as a generic I/O error: with this little room left
# on the filesystem, that error is the full disk too.
_NEARLY_FULL = 1 << 20


def free_bytes(path: Path) -> int | None:
    """Returns the bytes free for writing on the filesystem holding `path` (or its nearest existing
    folder), or None when even that cannot be asked."""
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def size_text(count: int) -> str:
    """Returns `count` bytes as a person reads them: "0 B", "812 B", "40 KB", "1.5 MB", "2.0 GB"."""
    if count < 1024:
        return f"{count} B"
    value, unit = float(count), "B"
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024:
            break
    return f"{value:.0f} {unit}" if unit == "KB" or value >= 100 else f"{value:.1f} {unit}"


def is_disk_full(error: BaseException, path: Path | None = None) -> bool:
    """True when `error` says a write found no room: ENOSPC or EDQUOT from the OS, SQLITE_FULL,
    or a Chroma error carrying either (its Rust core reports them as text only).

    `path` (where the write went) lets an SQLite I/O error count as full when that filesystem
    has almost nothing left."""
    if isinstance(error, OSError):
        return error.errno in _FULL_ERRNOS
    text = str(error).lower()
    if isinstance(error, sqlite3.Error):
        if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "database or disk is full" in text:
            return True
        free = free_bytes(path) if path is not None and "disk i/o error" in text else None
        return free is not None and free < _NEARLY_FULL
    return type(error).__module__.startswith("chromadb") and any(words in text for words in _FULL_WORDS)
