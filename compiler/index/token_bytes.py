"""The token-vector file's bytes (compiler.index.token_cache): appends and copies, durable
before any row names them, and what share of the file texts still in use take."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compiler.core.derived_sqlite import connect_readonly

if TYPE_CHECKING:  # `engram check` reads the usage without importing numpy
    import numpy as np

FILE = "token_file_i8"  # the tables beside the rows (compiler.index.token_cache)
USAGE = "token_usage_i8"
COPY_BYTES = 16 << 20  # bytes copied per write of a compaction: bounded memory


@dataclass(frozen=True)
class Usage:
    """How much of the token file texts still in use take (what compile found, `compact`'s answer)."""

    file_bytes: int
    live_bytes: int
    compacted: bool = False  # the file was rewritten
    bytes_after: int = 0  # its size after (file_bytes when not compacted)
    seconds: float = 0.0  # the compaction's wall time

    @property
    def dead_share(self) -> float:
        return 1 - self.live_bytes / self.file_bytes if self.file_bytes else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"file_bytes": self.file_bytes, "live_bytes": self.live_bytes, "dead_share": round(self.dead_share, 4),
                "compacted": self.compacted, "bytes_after": self.bytes_after, "seconds": round(self.seconds, 3)}


def usage_found(path: Path) -> Usage | None:
    """Returns what the last compile found of the token file beside embeddings cache `path` (the
    bytes appended since count as live), read-only; None when no compile measured it."""
    if not path.is_file():
        return None
    db = connect_readonly(path)
    try:
        if not (_tables(db) >= {USAGE, FILE}):
            return None
        found = db.execute(f"SELECT name, end, live FROM {USAGE}").fetchone()
        current = db.execute(f"SELECT name, end FROM {FILE}").fetchone()
    except sqlite3.DatabaseError:
        return None
    finally:
        db.close()
    if found is None or current is None or found[0] != current[0]:
        return None
    name, end, live = found
    return Usage(current[1], live + current[1] - end, bytes_after=current[1])


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def copy_pieces(data: np.ndarray, pieces: Sequence[tuple[int, int]], path: Path) -> int:
    """Writes the (offset, length) pieces of `data`, in order, back to back to a new file `path`
    and fsyncs it; returns its length. Contiguous pieces go in one write; on failure the file is
    removed."""
    runs: list[list[int]] = []  # [start, stop) of contiguous bytes
    for start, size in pieces:
        if runs and runs[-1][1] == start:
            runs[-1][1] += size
        else:
            runs.append([start, start + size])
    try:
        with open(path, "wb") as handle:
            for start, stop in runs:
                for first in range(start, stop, COPY_BYTES):
                    handle.write(data[first:min(stop, first + COPY_BYTES)])
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return sum(size for _, size in pieces)
