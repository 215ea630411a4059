"""The wiki's history: one JSON line per ingest, page write, move, undo and lint, appended and fsync'd.

It is what `log.md` is generated from and what `engram wiki history / undo` read. A page write
keeps the page's previous text (`before`), so any revision can be undone. The file is git-tracked:
two machines appending at once union cleanly (`.gitattributes`: `merge=union`, one record a line).
A line a crash cut short, or a peer's garbage, is skipped with a warning, never fatal.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.core.errors import BuildWarning, full_disk_guard
from compiler.core.files import fsync_folder

ACTIONS = ("ingest", "write", "edit", "move", "undo", "lint")


@dataclass(frozen=True)
class Entry:
    """One thing that happened to the wiki."""

    at: str  # YYYY-MM-DD HH:MM:SS UTC
    action: str  # one of ACTIONS
    path: str  # the page or source it happened to (vault-relative)
    title: str = ""
    writer: str = ""  # who: the MCP client's name, `cli`, a user-given --writer
    revision: int = 0  # the page's revision after this write
    sha256: str = ""  # of the file's bytes after this write
    before: str | None = None  # the page's whole text before this write (None: it did not exist)
    moved_from: str = ""
    detail: str = ""  # one line for the log: what changed

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", 0) or k in ("at", "action", "path")}


def append(history: Path, entry: Entry) -> None:
    """Appends `entry` and fsyncs: durable before the write it records is answered."""
    line = (json.dumps(entry.to_dict(), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    with full_disk_guard(history, "the wiki history", needed=len(line), after="the page was not changed"):
        history.parent.mkdir(parents=True, exist_ok=True)
        fresh = not history.exists()
        with open(history, "ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if fresh:
            fsync_folder(history.parent)


def read_history(history: Path, warnings: list[BuildWarning] | None = None) -> list[Entry]:
    """Returns every entry in file order; a line that is not an entry is skipped (and warned of).

    The lines read before are kept (per file, while its inode is the same and the bytes up to where
    the last read stopped still end the same way), so a long run of writes parses only what each
    appended: the history holds every page's earlier texts, and each write regenerates log.md."""
    if warnings is None:
        warnings = []
    if not history.is_file():
        return []
    with open(history, "rb") as handle:
        stat = os.fstat(handle.fileno())
        known = _READ.get(str(history))
        if known is None or known.inode != (stat.st_dev, stat.st_ino) or stat.st_size < known.offset or \
                not _same_tail(handle, known):
            known = _Read((stat.st_dev, stat.st_ino))
        handle.seek(known.offset)
        tail = handle.read()
    complete = tail[:tail.rfind(b"\n") + 1]  # a line still being written (or cut short) is read again next time
    first = known.lines + 1
    for number, raw in enumerate(complete.splitlines(keepends=True), first):
        _parse_line(raw, number, known.entries, known.bad)
    known.offset += len(complete)
    known.lines += complete.count(b"\n")
    known.tail = (known.tail + complete)[-64:]
    _READ[str(history)] = known
    entries, bad = list(known.entries), list(known.bad)
    if len(complete) < len(tail):
        _parse_line(tail[len(complete):], known.lines + 1, entries, bad)
    warnings.extend(BuildWarning(".engram/wiki/history.jsonl", number, "not a wiki history record: skipped",
                                 "wiki-history") for number in bad)
    return entries


@dataclass
class _Read:
    """How far one history file was read, and what it held up to there."""

    inode: tuple[int, int]
    offset: int = 0
    lines: int = 0
    tail: bytes = b""  # the last bytes read: a file rewritten in place ends otherwise
    entries: list[Entry] = field(default_factory=list)
    bad: list[int] = field(default_factory=list)  # line numbers that are not entries


_READ: dict[str, _Read] = {}


def _same_tail(handle: Any, known: _Read) -> bool:
    handle.seek(known.offset - len(known.tail))
    return handle.read(len(known.tail)) == known.tail


def _parse_line(raw: bytes, number: int, entries: list[Entry], bad: list[int]) -> None:
    try:
        data = json.loads(raw)
        entry = Entry(**{k: v for k, v in data.items() if k in Entry.__dataclass_fields__})
        if entry.action not in ACTIONS or not isinstance(entry.path, str):
            raise ValueError(entry.action)
    except (ValueError, TypeError, UnicodeDecodeError, AttributeError):
        bad.append(number)
        return
    entries.append(entry)


def page_entries(entries: list[Entry], path: str) -> list[Entry]:
    """Returns the page writes of `path` (following its moves back), oldest first."""
    names = {path}
    for entry in reversed(entries):
        if entry.action == "move" and entry.path in names and entry.moved_from:
            names.add(entry.moved_from)
    return [e for e in entries if e.path in names and e.action in ("write", "edit", "move", "undo")]
