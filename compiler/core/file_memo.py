"""What a file's bytes parse to, remembered while the file is unchanged: a long-running process
(`engram serve`, a batch of wiki writes) need not parse every page again on every write.

A file counts as unchanged while its (device, inode, size, mtime in ns) is: git's own test for a
dirty working tree. Every engram write replaces a file atomically (a new inode), so only an edit
in place of the same size within one clock tick could slip by, as it would for git.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class FileMemo(Generic[T]):
    """Remembers `parse(path, data)` per file (at most `limit` files, the oldest forgotten first)."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._seen: dict[tuple[str, str], tuple[tuple[int, int, int, int], T]] = {}

    def get(self, path: str | Path, parse: Callable[[bytes], T], scope: str = "") -> T:
        """Returns what `parse` makes of the file's bytes: remembered unless the file changed.
        `scope` keeps apart parses that depend on more than the bytes (a layout's folder names)."""
        stat = os.stat(path)
        key, seen = (scope, str(path)), (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        known = self._seen.get(key)
        if known and known[0] == seen:
            return known[1]
        with open(path, "rb") as handle:
            value = parse(handle.read())
        if os.stat(path).st_mtime_ns == seen[3]:  # not rewritten while being read
            if len(self._seen) >= self.limit:
                del self._seen[next(iter(self._seen))]
            self._seen[key] = (seen, value)
        return value
