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
