"""SQLite for derived data (the embedding cache, the memory keyword index): fast commits, never corrupt.

What these databases hold is rebuilt from the notes and the journal, and every reader checks it
against them (text hashes, `memory.index.sync_index`), so a commit need not reach the disk before
the write answers: write-ahead logging with `synchronous=NORMAL` commits without an fsync (the
log is synced at checkpoints) and stays consistent through a crash, losing at most the last
commits. The default rollback journal fsynced two files per commit: 13–28 ms, four times per
memory written. The journal, the truth, still fsyncs every write (`events.journal.append_events`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def connect_derived(path: Path) -> sqlite3.Connection:
    """Opens (creating) the SQLite database at `path` for derived data."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")  # persistent in the file; other processes' connections follow it
    db.execute("PRAGMA synchronous=NORMAL")  # per connection
    return db


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Opens the SQLite database at `path` for reading only: a search writes not a byte, not an mtime.

    `mode=ro` is not enough for a WAL database: its readers create and write the `-shm` file.
    With no `-wal` beside it, no writer has it open and the last one checkpointed everything into
    the file, which is then all there is: it is opened `immutable` (no locks, no `-shm`). While a
    writer works, the reader takes part in its log as readers must.
    """
    uri = path.resolve().as_uri()  # escapes what a vault path may hold: spaces, `?`, `#`
    live = Path(f"{path}-wal").exists()
    return sqlite3.connect(f"{uri}?mode=ro" if live else f"{uri}?mode=ro&immutable=1", uri=True)
