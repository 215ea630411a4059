"""The fold checkpoint: a cold read that continues it gives exactly what reading and folding every
event gives, whatever happened on disk since it was written (compiler.memory.checkpoint)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from compiler.events import journal as journal_module
from compiler.events import store
from compiler.events.chunks import encode_chunk, write_chunk
from compiler.events.journal import JOURNAL, MemoryEvent, append_events
from compiler.events.manifest import ManifestEntry, append_entries
from compiler.memory import checkpoint
from compiler.memory.checkpoint import FILE, load_checkpoint
from compiler.memory.fold import IncrementalFold
from compiler.memory.snapshot import Deferred, Snapshots, event_mark, read_events
from compiler.core.clock import parse_time

NOW = parse_time("2026-12-01 12:00:00")


def new_process() -> None:
    """Forgets what this process parsed, as a new process would not have it."""
    journal_module._CACHES.clear()
    store._VAULTS.clear()
    store._CACHE.clear()


def one_command(engram: Path):
    """What a command does: one handle reads the memories, then closes (saving the checkpoint when due)."""
    snapshots = Snapshots()
    memories = snapshots.read(engram, NOW)
    snapshots.save_if_due(engram)
    return memories


def from_scratch(engram: Path) -> tuple[IncrementalFold, object]:
    new_process()
    events = read_events(engram)
    fold = IncrementalFold()
    fold.update(list(events.events))
    return fold, events


class History:
    """Random events over a few memories: saves, rewrites, recalls, deletes, restores,
    consolidations, at times that mostly move forward and sometimes go back."""

    def __init__(self, rng: random.Random, ordered: bool = False) -> None:
        self.rng, self.count, self.memories = rng, 0, [f"mem-{k:03d}" for k in range(12)]
        self.ordered = ordered  # every event after the one before

    def event(self, earlier: bool = False) -> MemoryEvent:
        self.count += 1
        rng, k = self.rng, self.count
        day = rng.randint(1, 5) if earlier else 10 + k // 4
        at = f"2026-11-{day:02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
        if self.ordered:
            at = f"2026-11-10 {k // 60:02d}:{k % 60:02d}:00"
        memory = rng.choice(self.memories)
        op = rng.choice(["save", "save", "update", "recall", "reinforce", "delete", "restore", "consolidate"])
        data: dict[str, object] = {}
        if op == "save":
            data = {"project": "p", "title": f"t{k}", "content": f"memory {memory} said {k}", "importance": 0.5,
                    "follows": rng.choice(self.memories), "sources": [f"src-{k}"]}
        elif op == "update":
            data = {"content": f"now {k}", "source": f"s{k}"}
        elif op == "reinforce":
            data = {"sources": [f"src-{k}"]}
        elif op == "consolidate":
            data = {"into": rng.choice(self.memories)} if rng.random() < 0.5 else {"sources": [f"c-{k}"]}
        return MemoryEvent(f"ev-{k:05d}-{rng.randrange(1 << 30):x}", op, memory, at, data, seq=k)


def step(engram: Path, history: History, rng: random.Random) -> str:
    """Changes the vault's events (or its checkpoint) at random; returns what it did."""
    action = rng.choice(["append"] * 6 + ["append-earlier", "duplicate", "bad-line", "chunk", "chunk-earlier",
                                          "truncate", "rewrite", "delete-checkpoint", "corrupt-checkpoint",
                                          "old-checkpoint"])
    path, point = engram / JOURNAL, engram / "cache" / FILE
    if action.startswith("append"):
        append_events(engram, [history.event(action == "append-earlier") for _ in range(rng.randint(1, 8))])
    elif action == "duplicate" and path.is_file():
        lines = path.read_bytes().splitlines(keepends=True)
        if lines:
            with open(path, "ab") as handle:
                handle.write(rng.choice(lines))
    elif action == "bad-line":
        with open(path, "ab") as handle:
            handle.write(b'{"id": "broken"\n')
    elif action.startswith("chunk"):
        events = [history.event(action == "chunk-earlier").to_dict() for _ in range(rng.randint(1, 6))]
        cid = write_chunk(engram, encode_chunk([], [], events))
        if rng.random() < 0.7:
            append_entries(engram, [ManifestEntry(cid, "peer", "2026-11-30T00:00:00Z")])
    elif action in ("truncate", "rewrite") and path.is_file():
        lines = path.read_bytes().splitlines(keepends=True)
        if action == "truncate":
            lines = lines[:rng.randint(0, len(lines))]
        elif lines:
            del lines[rng.randrange(len(lines))]
            lines.append(_line(history.event()))
        path.write_bytes(b"".join(lines))  # in place: the same inode
    elif action == "delete-checkpoint":
        point.unlink(missing_ok=True)
    elif action == "corrupt-checkpoint" and point.is_file():
        data = point.read_bytes()
        cut = rng.randint(0, len(data))
        point.write_bytes(data[:cut] + bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))))
    elif action == "old-checkpoint" and point.is_file():
        data = point.read_bytes()
        point.write_bytes(data.replace(f"checkpoint {checkpoint.FORMAT} ".encode(), b"checkpoint 0 ", 1))
    return action


def _line(event: MemoryEvent) -> bytes:
    import json
    return (json.dumps(event.to_dict(), sort_keys=True) + "\n").encode()


@pytest.mark.parametrize("seed", range(16))
def test_a_checkpointed_read_is_the_fold_of_every_event(tmp_path: Path, monkeypatch, seed: int) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(checkpoint, "MIN_NEW", rng.choice([0, 1, 3, 10]))
    monkeypatch.setattr(checkpoint, "NEW_SHARE", rng.choice([1, 2, 8]))
    engram = tmp_path / "vault" / ".engram"
    engram.mkdir(parents=True)
    history, done, continued = History(rng), [], 0
    append_events(engram, [history.event() for _ in range(10)])
    for _ in range(30):
        done.append(step(engram, history, rng))
        new_process()
        cold = one_command(engram)
        fold, events = from_scratch(engram)
        assert repr(sorted(cold.state.items())) == repr(sorted(fold.state.items())), done
        assert dict(cold.lookups.holders) == fold.lookups.holders and dict(cold.lookups.followers) == fold.lookups.followers
        assert cold.events.key == events.key and event_mark(cold.events) == event_mark(events), done
        assert cold.events.warnings == events.warnings, done
        continued += isinstance(cold.events.events, Deferred)
        assert [e.to_dict() for e in cold.events] == [e.to_dict() for e in events.events], done
    assert continued >= 3  # the checkpoint was used, not just thrown away


def test_a_cold_read_parses_only_the_journal_after_the_checkpoint(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 1)
    engram = tmp_path / ".engram"
    history = History(random.Random(1), ordered=True)
    cid = write_chunk(engram, encode_chunk([], [], [history.event().to_dict() for _ in range(5)]))
    append_entries(engram, [ManifestEntry(cid, "peer", "2026-11-30T00:00:00Z")])
    append_events(engram, [history.event() for _ in range(40)])
    one_command(engram)  # folds all 45 and saves them
    assert load_checkpoint(engram) is not None
    append_events(engram, [history.event() for _ in range(3)])
    new_process()
    parsed: list[object] = []
    real = MemoryEvent.from_dict
    monkeypatch.setattr(MemoryEvent, "from_dict", classmethod(lambda cls, raw: parsed.append(raw) or real(raw)))
    monkeypatch.setattr(store, "read_vault_chunks", lambda *a: pytest.fail("a chunk was read"))
    memories = one_command(engram)
    assert len(parsed) == 3 and isinstance(memories.events.events, Deferred)
    assert memories.events.key == (48, memories.events.events[47].id) and memories.events.chunks == 5
    assert event_mark(memories.events)["chunk_last"] and len(parsed) == 3  # the marks read no earlier event


def test_a_checkpoint_is_written_when_many_events_were_folded_past_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 20)
    engram = tmp_path / ".engram"
    history = History(random.Random(2))
    append_events(engram, [history.event() for _ in range(10)])
    one_command(engram)
    assert load_checkpoint(engram) is None  # 10 events: not worth a file
    append_events(engram, [history.event() for _ in range(15)])
    one_command(engram)
    saved = load_checkpoint(engram)
    assert saved is not None and saved[0].count == 25
    append_events(engram, [history.event() for _ in range(5)])
    one_command(engram)  # 5 past it: the old one stays
    assert load_checkpoint(engram)[0].count == 25


def test_a_checkpoint_of_other_code_is_not_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 1)
    engram = tmp_path / ".engram"
    append_events(engram, [History(random.Random(3)).event() for _ in range(5)])
    one_command(engram)
    assert load_checkpoint(engram) is not None
    monkeypatch.setattr(checkpoint, "_CODE", ["another-fold"])
    assert load_checkpoint(engram) is None


def test_a_read_keeps_its_events_when_a_chunk_lands_before_they_are_asked_for(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 1)
    engram = tmp_path / ".engram"
    history = History(random.Random(4), ordered=True)
    write_chunk(engram, encode_chunk([], [], [history.event().to_dict() for _ in range(4)]))
    append_events(engram, [history.event() for _ in range(6)])
    one_command(engram)
    new_process()
    read = one_command(engram).events
    before = [e.id for e in from_scratch(engram)[1].events]
    write_chunk(engram, encode_chunk([], [], [history.event().to_dict() for _ in range(3)]))  # a pull, meanwhile
    assert isinstance(read.events, Deferred) and [e.id for e in read] == before


def test_a_long_lived_handle_saves_at_close_not_inside_a_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 20)
    engram = tmp_path / ".engram"
    history = History(random.Random(7), ordered=True)
    snapshots = Snapshots()  # the MCP server's: one for every call
    for _ in range(3):
        append_events(engram, [history.event() for _ in range(15)])
        snapshots.read(engram, NOW)
        assert load_checkpoint(engram) is None  # 45 folded, and no call waited for a save
    snapshots.save_if_due(engram)
    assert load_checkpoint(engram)[0].count == 45
    append_events(engram, [history.event() for _ in range(5)])
    snapshots.read(engram, NOW)
    snapshots.save_if_due(engram)  # 5 past the one it saved: not worth another
    assert load_checkpoint(engram)[0].count == 45


def test_save_writes_what_the_last_read_folded_past_the_checkpoint(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 20)
    engram = tmp_path / ".engram"
    history = History(random.Random(5), ordered=True)
    append_events(engram, [history.event() for _ in range(10)])
    snapshots = Snapshots()
    snapshots.read(engram, NOW)
    assert load_checkpoint(engram) is None
    snapshots.save(engram)  # what compile does at its end
    assert load_checkpoint(engram)[0].count == 10
    (engram / "cache" / FILE).unlink()
    snapshots.read(engram, NOW)
    snapshots.save(engram)  # nothing folded past the one it saved: not written again
    assert load_checkpoint(engram) is None


def test_a_checkpoint_signed_by_someone_else_is_never_unpickled(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_NEW", 1)
    engram = tmp_path / ".engram"
    append_events(engram, [History(random.Random(6)).event() for _ in range(5)])
    one_command(engram)
    assert load_checkpoint(engram) is not None
    monkeypatch.setattr(checkpoint, "_SECRET", [b"k" * 32])  # another user's, or another machine's
    monkeypatch.setattr(checkpoint.pickle, "loads", lambda *a: pytest.fail("unpickled"))
    assert load_checkpoint(engram) is None
