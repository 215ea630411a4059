"""Memory events: every change to a memory is one event with its own id, appended to the journal.

The journal (`.engram/journal.jsonl`) holds one JSON object per line and is fsync'd before a
command answers. State is a fold of all events (see `memory_model.fold`), so events carry what
was decided at write time (the action, the similarity, the links) and replay needs no model.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from compiler.core.clock import TimeRangeError, parse_time
from compiler.core.errors import BuildWarning, full_disk_guard
from compiler.core.json_input import load_json
from compiler.core.local_state import ensure_gitignore

JOURNAL = "journal.jsonl"

# save: a new memory · reinforce: a duplicate write · merge / replace: the resolve actions ·
# update: an explicit edit · recall: returned by a recall · delete: forgotten (tombstone) ·
# restore: back from the archive or from a delete · consolidate: maintenance folded others into it.
OPS = ("save", "reinforce", "merge", "replace", "update", "recall", "delete", "restore", "consolidate")


@dataclass(frozen=True)
class MemoryEvent:
    id: str
    op: str
    memory: str  # the sync_id of the memory it changes
    at: str  # "YYYY-MM-DD HH:MM:SS" UTC
    data: dict[str, Any] = field(default_factory=dict)
    seq: int = field(default_factory=lambda: next_seq())  # orders events written within one second

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "op": self.op, "memory": self.memory, "at": self.at, "seq": self.seq, "data": self.data}

    def order(self) -> tuple[str, int, str]:
        """The replay order: time, then write sequence, then id — total, whatever the arrival order."""
        return (self.at, self.seq, self.id)

    @classmethod
    def from_dict(cls, raw: Any) -> MemoryEvent:
        """Returns the event, or raises ValueError naming what is wrong."""
        if not isinstance(raw, dict):
            raise ValueError(f"not an object but {type(raw).__name__}")
        missing = [k for k in ("id", "op", "memory", "at") if not isinstance(raw.get(k), str) or not raw.get(k)]
        if missing:
            raise ValueError(f"missing or empty field(s): {', '.join(missing)}")
        if raw["op"] not in OPS:
            raise ValueError(f"unknown op {raw['op']!r}")
        try:
            parse_time(raw["at"])
        except ValueError as error:
            raise ValueError(f"`at` {error}" if isinstance(error, TimeRangeError) else f"`at` is not a timestamp: "
                             f"{raw['at'][:40]!r}") from None
        data = raw.get("data", {})
        if not isinstance(data, dict):
            raise ValueError("`data` is not an object")
        seq = raw.get("seq", 0)
        if not isinstance(seq, int):
            raise ValueError("`seq` is not an integer")
        return cls(raw["id"], raw["op"], raw["memory"], raw["at"], data, seq)


_last_seq = 0


def next_seq() -> int:
    """Returns a strictly increasing number (nanoseconds since the epoch, bumped on ties)."""
    global _last_seq
    _last_seq = max(time.time_ns(), _last_seq + 1)
    return _last_seq


def new_id(prefix: str = "") -> str:
    return prefix + uuid.uuid4().hex[:16]


def append_events(engram_dir: Path, events: Iterable[MemoryEvent]) -> None:
    """Appends events to the journal and fsyncs before returning: an answered write survives a crash.

    A write that fails (a full disk) is cut off again, so the journal holds all of it or none;
    a full disk raises StorageFullError."""
    lines = "".join(json.dumps(e.to_dict(), ensure_ascii=False, sort_keys=True) + "\n" for e in events)
    if not lines:
        return
    path = engram_dir / JOURNAL
    with full_disk_guard(path, "the journal", needed=len(lines.encode("utf-8")),
                         after="nothing of this write was kept, and nothing before it was lost"):
        engram_dir.mkdir(parents=True, exist_ok=True)
        ensure_gitignore(engram_dir)
        with open(path, "a+b") as handle:
            size = handle.tell()
            if size > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    lines = "\n" + lines  # a line torn by a crash stays one bad line; ours start clean
            try:
                handle.write(lines.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            except OSError:
                handle.truncate(size)  # no torn line left for every later read to warn about
                raise


@dataclass(frozen=True)
class JournalMark:
    """Where a read of the journal stopped: `offset` bytes in (a line end), after `lines` lines, and
    a digest of the bytes just before it, which tells the same journal from a rewritten one."""

    offset: int = 0
    lines: int = 0
    tail: str = ""  # `_tail_digest` at `offset`


@dataclass(frozen=True)
class JournalRead:
    """The events of the journal after a mark (all of them after the empty mark), their warnings,
    and the mark where this read stopped."""

    events: Sequence[MemoryEvent]
    warnings: list[BuildWarning]
    end: JournalMark


@dataclass
class _JournalCache:
    inode: int = -1
    offset: int = 0  # bytes parsed so far (always at a line end)
    lines: int = 0
    events: list[MemoryEvent] = field(default_factory=list)
    warnings: list[BuildWarning] = field(default_factory=list)


_CACHES: dict[tuple[str, int], _JournalCache] = {}  # by (path, the offset parsing started at)
TAIL_BYTES = 4096  # how much before a mark is compared: the last lines, with the last event's id


def read_journal(engram_dir: Path) -> tuple[list[MemoryEvent], list[BuildWarning]]:
    """Returns the journal's events and a warning for each line that cannot be used (never dropped silently).

    The journal is append-only: a process that reads it again parses only the lines added since
    (a replaced or truncated file is read whole again).
    """
    events, warnings = journal_view(engram_dir)
    return list(events), warnings


def journal_view(engram_dir: Path) -> tuple[Sequence[MemoryEvent], list[BuildWarning]]:
    """`read_journal` without the copy: the events as a read-only view of what was parsed so far
    (copying 50,000 events on every memory read was O(store) per write)."""
    read = journal_since(engram_dir, JournalMark())
    assert read is not None  # the empty mark starts every journal
    return read.events, read.warnings


def journal_since(engram_dir: Path, mark: JournalMark) -> JournalRead | None:
    """Returns the journal's events after `mark` (an `end` of an earlier read), or None when the
    journal does not continue it: shorter than the mark, or other bytes before it (rewritten)."""
    path = engram_dir / JOURNAL
    if not path.is_file():
        return JournalRead((), [], JournalMark()) if mark.offset == 0 else None
    key = (str(path.resolve()), mark.offset)
    stat = path.stat()
    cache = _CACHES.get(key)
    if cache is None or cache.inode != stat.st_ino or stat.st_size < cache.offset:
        if stat.st_size < mark.offset or _tail_digest(path, mark.offset) != mark.tail:
            _CACHES.pop(key, None)
            return None
        for stale in [k for k in _CACHES if k[0] == key[0] and k[1] not in (0, mark.offset)]:
            del _CACHES[stale]  # a read after an older checkpoint's mark: not asked for again
        cache = _CACHES[key] = _JournalCache(inode=stat.st_ino, offset=mark.offset, lines=mark.lines)
    if stat.st_size > cache.offset:
        _read_more(path, cache)
    end = JournalMark(cache.offset, cache.lines, _tail_digest(path, cache.offset))
    return JournalRead(Prefix(cache.events, len(cache.events)), list(cache.warnings), end)


def _tail_digest(path: Path, offset: int) -> str:
    """Returns a digest of the (up to TAIL_BYTES) bytes before `offset`; "" at 0."""
    if offset == 0:
        return ""
    with open(path, "rb") as handle:
        handle.seek(max(0, offset - TAIL_BYTES))
        return hashlib.blake2b(handle.read(min(offset, TAIL_BYTES)), digest_size=12).hexdigest()


class Prefix(Sequence[MemoryEvent]):
    """The first `length` items of a list that is only ever appended to: it never changes."""

    def __init__(self, items: list[MemoryEvent], length: int) -> None:
        self._items, self._length = items, length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            return self._items[start:stop:step]
        if not -self._length <= index < self._length:
            raise IndexError(index)
        return self._items[index % self._length]

    def __iter__(self) -> Iterator[MemoryEvent]:
        return islice(self._items, self._length)


def _read_more(path: Path, cache: _JournalCache) -> None:
    shown = f".engram/{JOURNAL}"
    with open(path, "rb") as handle:
        handle.seek(cache.offset)
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a line still being written (or torn by a crash): read it once it is complete
            cache.offset += len(raw)
            cache.lines += 1
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            try:
                cache.events.append(MemoryEvent.from_dict(load_json(line)))
            except ValueError as error:  # bad JSON, too deep, a bad field, a time out of range
                cache.warnings.append(BuildWarning(shown, cache.lines, f"journal line skipped: {error}", "journal"))
