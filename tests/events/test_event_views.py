"""A memory read's events are views of what was parsed, not copies: they still read as one
sequence, and an append after a read never shows up in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.events.journal import (
    MemoryEvent,
    append_events,
    journal_view,
    read_journal,
)
from compiler.memory.snapshot import Joined, read_events


def event(k: int) -> MemoryEvent:
    return MemoryEvent(f"ev-{k}", "save", f"mem-{k}", "2026-11-30 12:00:00", {"content": f"memory {k}"})


def test_a_read_keeps_its_events_while_the_journal_grows(tmp_path: Path) -> None:
    append_events(tmp_path, [event(k) for k in range(5)])
    first, _ = journal_view(tmp_path)
    read = read_events(tmp_path)
    append_events(tmp_path, [event(k) for k in range(5, 8)])
    later = read_events(tmp_path)
    assert [e.id for e in first] == [e.id for e in read.events] == [f"ev-{k}" for k in range(5)]
    assert len(read) == 5 and read.key == (5, "ev-4") and later.key == (8, "ev-7")
    assert [e.id for e in later.events[3:]] == ["ev-3", "ev-4", "ev-5", "ev-6", "ev-7"]
    assert [e.id for e in read_journal(tmp_path)[0]] == [f"ev-{k}" for k in range(8)]
    with pytest.raises(IndexError):
        first[5]


def test_joined_reads_as_one_sequence() -> None:
    chunks, journal = [event(k) for k in range(3)], [event(k) for k in range(3, 7)]
    joined, whole = Joined(chunks, journal), chunks + journal
    assert list(joined) == whole and len(joined) == 7
    assert [joined[k] for k in range(-7, 7)] == whole + whole
    for piece in (slice(None), slice(2, 5), slice(3, None), slice(5, 2), slice(-2, None), slice(None, None, 2)):
        assert joined[piece] == whole[piece], piece
    with pytest.raises(IndexError):
        joined[7]
