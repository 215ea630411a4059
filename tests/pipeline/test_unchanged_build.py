"""The no-op shortcut: a compile whose inputs did not change does nothing, and any change to an
input (a note, an attachment, a generated page, a template, a setting, a memory event, the clock)
takes the full incremental path again and rebuilds what it must."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from compiler.core.settings import Settings
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import write_memories
from compiler.pipeline import inputs
from compiler.pipeline.spine import compile_vault

NOTES = {
    "Home.md": "# Home\n\nStart at [[Alpha]] and see ![[diagram.png]].\n",
    "Alpha.md": "# Alpha\n\nAlpha builds the payments gateway.\n",
}
PINNED = Settings(now="2026-11-30 12:00:00")


@pytest.fixture
def scans(monkeypatch):
    """Counts the full-build path: how many times `previous_build` (it loads the whole state) ran."""
    import compiler.pipeline.spine as spine

    calls = []
    original = spine.previous_build
    monkeypatch.setattr(spine, "previous_build", lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


def built(vault: Path, fake_embedder, settings: Settings = Settings()):
    return compile_vault(vault, settings, embedder=fake_embedder)


def test_noop_takes_the_shortcut_and_reports_the_last_counts(make_vault, fake_embedder, scans):
    vault = make_vault(NOTES)
    first = built(vault, fake_embedder)
    again = built(vault, fake_embedder)
    assert len(scans) == 1  # the second build never loaded the state
    assert (again.notes, again.sections, again.links, again.written, again.embedded) == \
        (first.notes, first.sections, first.links, [], 0)
    assert [w.to_dict() for w in again.warnings] == [w.to_dict() for w in first.warnings]


def test_touched_but_unchanged_note_is_hashed_once_and_rebuilds_nothing(make_vault, fake_embedder, scans, monkeypatch):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    os.utime(vault / "Alpha.md", ns=(10**18, 10**18))
    hashed = []
    import compiler.notes.scan as scan

    original = scan.file_sha256
    monkeypatch.setattr(scan, "file_sha256", lambda p: hashed.append(p.name) or original(p))
    assert built(vault, fake_embedder).written == []
    assert built(vault, fake_embedder).written == []
    assert hashed == ["Alpha.md"] and len(scans) == 1  # hashed on the first look only, no full build


def test_noop_decides_from_stats_without_reading_the_stamps(make_vault, fake_embedder, scans, monkeypatch):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    monkeypatch.setattr(inputs, "_load_stamps", lambda path: pytest.fail("a no-op read the note stamps"))
    assert built(vault, fake_embedder).written == [] and len(scans) == 1


def test_lost_stamps_cost_a_hash_of_every_note_never_a_build(make_vault, fake_embedder, scans, monkeypatch):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    (vault / ".engram/cache/inputs-stamps.json").unlink()
    os.utime(vault / "Alpha.md", ns=(10**18, 10**18))
    hashed = []
    import compiler.notes.scan as scan

    original = scan.file_sha256
    monkeypatch.setattr(scan, "file_sha256", lambda p: hashed.append(p.name) or original(p))
    assert built(vault, fake_embedder).written == [] and len(scans) == 1
    assert sorted(hashed) == ["Alpha.md", "Home.md"]


def _rewrite_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Overwrites bytes inside the file, as an editor saving in place does: same inode, same size,
    and the folder's mtime does not move (no entry was added or removed)."""
    assert len(old) == len(new)
    data = path.read_bytes()
    folder = path.parent.stat().st_mtime_ns
    with open(path, "r+b") as handle:
        handle.write(data.replace(old, new))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))  # a coarse clock still moves
    assert path.parent.stat().st_mtime_ns == folder


def test_same_size_edits_in_place_of_a_note_or_a_page_are_noticed(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    _rewrite_in_place(vault / "Alpha.md", b"payments", b"Payments")
    assert built(vault, fake_embedder).changed == ["Alpha.md"]
    page = vault / "_engram/backlinks/Alpha.links.md"
    text = page.read_text()
    _rewrite_in_place(page, b"Home", b"Hone")
    assert built(vault, fake_embedder).written == ["_engram/backlinks/Alpha.links.md"]
    assert page.read_text() == text


def test_edited_note_rebuilds(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    (vault / "Alpha.md").write_text("# Alpha\n\nAlpha now builds the refunds ledger too.\n")
    report = built(vault, fake_embedder)
    assert report.changed == ["Alpha.md"] and report.embedded == 1


def test_moved_and_deleted_notes_rebuild(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    (vault / "Archive").mkdir()
    (vault / "Alpha.md").rename(vault / "Archive/Alpha.md")
    moved = built(vault, fake_embedder)
    assert moved.changed == ["Archive/Alpha.md"] and moved.removed == ["Alpha.md"]
    (vault / "Archive/Alpha.md").unlink()
    assert built(vault, fake_embedder).removed == ["Archive/Alpha.md"]


def test_new_attachment_resolves_a_broken_embed(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    assert built(vault, fake_embedder).links["broken"] == 1  # ![[diagram.png]] is missing
    (vault / "diagram.png").write_bytes(b"\x89PNG")
    assert built(vault, fake_embedder).links["broken"] == 0


def test_deleted_or_edited_generated_page_is_written_again(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    page = vault / "_engram/backlinks/Alpha.links.md"
    text = page.read_text()
    page.unlink()
    assert built(vault, fake_embedder).written == ["_engram/backlinks/Alpha.links.md"]
    page.write_text(text.replace("Home", "Someone else"))
    assert built(vault, fake_embedder).written == ["_engram/backlinks/Alpha.links.md"]
    assert page.read_text() == text


def test_changed_template_or_setting_renders_again(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    templates = vault / ".engram/templates"
    templates.mkdir(parents=True)
    (templates / "catalog.md.j2").write_text("---\ngenerated_by: engram\n---\n# My catalog\n")
    assert "_engram/catalog.md" in built(vault, fake_embedder).written
    assert (vault / "_engram/catalog.md").read_text().endswith("# My catalog\n")
    moved_out = built(vault, fake_embedder, dataclasses.replace(Settings(), out="_generated"))
    assert "_generated/catalog.md" in moved_out.written


def test_changed_code_builds_again(make_vault, fake_embedder, scans, monkeypatch):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    monkeypatch.setattr(inputs, "_code_stats", lambda: [("render/notes.py", 1, 2, 3)])
    built(vault, fake_embedder)
    assert len(scans) == 2


def test_memory_event_rebuilds_and_pinned_clock_allows_the_shortcut(make_vault, fake_embedder, scans):
    vault = make_vault(NOTES)
    built(vault, fake_embedder, PINNED)
    with VaultMemory(vault, PINNED, embedder=fake_embedder) as memory:
        write_memories(memory, [MemoryInput(content="The payments API runs on PostgreSQL 16.", project="pay")])
    report = built(vault, fake_embedder, PINNED)
    assert report.memories["live"] == 1 and any(p.startswith("_engram/memory/") for p in report.written)
    assert len(scans) == 2
    assert built(vault, fake_embedder, PINNED).memories["live"] == 1
    assert len(scans) == 2  # same events, same pinned instant: nothing to do


def test_unpinned_clock_with_memories_builds_once_maintenance_is_due(make_vault, fake_embedder, scans, monkeypatch):
    from datetime import datetime, timedelta, timezone

    from compiler.core import clock

    start = datetime(2026, 11, 30, 0, 30, tzinfo=timezone.utc)
    monkeypatch.setattr(clock, "utc_now", lambda: start)
    vault = make_vault(NOTES)
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memory:
        write_memories(memory, [MemoryInput(content="The payments API runs on PostgreSQL 16.", project="pay",
                                            created_at="2026-11-28 12:00:00")])
    built(vault, fake_embedder)
    monkeypatch.setattr(clock, "utc_now", lambda: start + timedelta(hours=11))
    assert built(vault, fake_embedder).written == []
    assert len(scans) == 1  # the same day, maintenance not due: the pages show the same strengths
    monkeypatch.setattr(clock, "utc_now", lambda: start + timedelta(hours=12, minutes=1))
    built(vault, fake_embedder)
    assert len(scans) == 2  # maintenance_hours (12) after the last maintenance: the build runs it


def test_deleted_state_or_index_builds_again(make_vault, fake_embedder, scans):
    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    (vault / ".engram/cache/fts.sqlite").unlink()
    report = built(vault, fake_embedder)
    assert report.rebuild_reason == "keyword index missing" and len(scans) == 2


def test_a_keyword_search_in_between_keeps_the_shortcut(make_vault, fake_embedder, scans):
    from compiler.notes.search import keyword_search

    vault = make_vault(NOTES)
    built(vault, fake_embedder)
    assert keyword_search(vault, "payments")
    built(vault, fake_embedder)
    assert len(scans) == 1  # reading the index changes none of the inputs
