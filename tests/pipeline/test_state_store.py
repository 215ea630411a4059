"""The build state's rows: a compile after one change writes a few rows, and what it leaves reads
back as the state a compile from nothing saves; a damaged file is a full rebuild, never a traceback."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from compiler.core.settings import Settings
from compiler.pipeline import state_store
from compiler.pipeline.spine import VaultPaths, compile_vault
from compiler.pipeline.state import load_state

NOTES = {f"N{i}.md": f"# N{i}\n\nNote {i} links [[N{(i + 1) % 8}]].\n\n## Part\n\nMore of {i}.\n" for i in range(8)}


def saved(vault: Path) -> dict:
    state, reason = load_state(VaultPaths(vault.resolve()).state)
    assert not reason
    return {**state.meta(), **state.parts()}


def test_one_edit_writes_a_few_rows_and_leaves_the_state_a_fresh_compile_saves(make_vault, fake_embedder, monkeypatch):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    counts: list[int] = []
    write = state_store.write_state
    monkeypatch.setattr(state_store, "write_state", lambda *a: counts.append(write(*a)) or counts[-1])
    monkeypatch.setattr("compiler.pipeline.state.write_state", state_store.write_state)
    (vault / "N3.md").write_text(NOTES["N3.md"] + "\n## New\n\nA heading more.\n")
    compile_vault(vault, Settings(), embedder=fake_embedder)
    rows = len([k for part in saved(vault).values() if isinstance(part, dict) for k in part])
    # N3's stamp, parse and head, and the page and record of the three backlinks pages that show it: 9 of 44
    assert counts == [9] and rows == 44
    (vault / "N5.md").unlink()
    compile_vault(vault, Settings(), embedder=fake_embedder)
    fresh = vault.parent / "fresh"
    shutil.copytree(vault, fresh, ignore=shutil.ignore_patterns("cache"))
    compile_vault(fresh, Settings(), embedder=fake_embedder)
    mine, theirs = saved(vault), saved(fresh)
    for part in ("files", "memory_renders", "note_renders"):  # stats and inodes differ between two copies
        assert mine.pop(part).keys() == theirs.pop(part).keys()
    assert mine == theirs


@pytest.mark.parametrize("damage", [b"", b"SQLite format 3\x00" + b"\x07" * 300, b"{\"version\": 1}"])
def test_a_damaged_state_file_is_a_full_rebuild_that_saves_it_again(make_vault, fake_embedder, damage):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    paths = VaultPaths(vault.resolve())
    paths.state.write_bytes(damage)
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert report.rebuild_reason.startswith("build state unreadable")
    assert not compile_vault(vault, Settings(), embedder=fake_embedder).rebuild_reason
    assert saved(vault)["notes"].keys() == {p for p in NOTES}


def test_a_state_of_another_version_is_a_full_rebuild(make_vault, fake_embedder):
    import sqlite3

    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    db = sqlite3.connect(VaultPaths(vault.resolve()).state)
    with db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'version'")
    db.close()
    assert compile_vault(vault, Settings(), embedder=fake_embedder).rebuild_reason == "build state from another version"


def test_a_stored_note_is_its_note_and_decodes_its_row_only_when_a_field_beyond_its_head_is_read(tmp_path):
    from compiler.notes.parse import parse_note
    from compiler.pipeline.state_store import StoredNote, read_state, write_state

    note = parse_note("A/b.md", b"---\naliases: [Bee]\ntags: [ops]\n---\n# B\n\nFirst [[C]].\n\n## Two\n\nSecond.\n")[0]
    path = tmp_path / "state.sqlite"
    write_state(path, {}, {"notes": {note.path: note}, "heads": {note.path: note}}, None)
    stored = read_state(path)["notes"][note.path]
    assert isinstance(stored, StoredNote) and "_rows" in vars(stored) and "_row" not in vars(stored)  # not even fetched
    assert (stored.path, stored.sha256, stored.title, stored.aliases, stored.tags, stored.section_count) == \
        (note.path, note.sha256, note.title, note.aliases, note.tags, 2)
    from compiler.index.cache import text_hash
    from compiler.pipeline.index import section_hashes
    from compiler.pipeline.section_text import note_hashes, section_text

    assert note_hashes(stored) == [text_hash(section_text(note, i)) for i in range(2)]  # what the caches key them by
    assert list(section_hashes({stored.path: stored})) == note_hashes(note)  # the compaction's question
    assert stored.summary == note.summary and "_rows" in vars(stored)  # the head answered: nothing decoded
    assert stored.frontmatter_valid and "_rows" not in vars(stored)  # a default-valued field decodes it
    assert stored == note and note == stored and stored.to_dict() == note.to_dict()
    again = read_state(path)["notes"][note.path]
    assert again.to_dict() == note.to_dict() and again.links == note.links and again.section_count == 2
    assert note_hashes(again) == note_hashes(note)  # decoded, the same


def test_a_state_saved_without_heads_is_read_whole_and_saved_whole(make_vault, fake_embedder):
    import sqlite3

    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    path = vault / ".engram/cache/state.sqlite"
    with sqlite3.connect(path) as db:  # what an engram before heads saved, or one with shorter heads
        db.execute("DELETE FROM entries WHERE part = 'heads' AND key != 'N1.md'")
        db.execute("UPDATE entries SET value = '[\"x\", \"N1\", [], [], 1]' WHERE part = 'heads'")
    previous, reason = load_state(path)
    assert not reason and not previous.stored and all(type(n).__name__ == "Note" for n in previous.notes.values())
    (vault / "N3.md").write_text(NOTES["N3.md"] + "\nMore.\n")
    assert not compile_vault(vault, Settings(), embedder=fake_embedder).rebuild_reason
    state, _ = load_state(path)
    assert state.stored and all(type(n).__name__ == "StoredNote" for n in state.notes.values())


def test_a_stored_note_decodes_as_it_was_read_after_a_save_changed_or_dropped_its_row(make_vault, fake_embedder):
    from compiler.notes.records import Note
    from compiler.pipeline.state import save_state

    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    path = vault / ".engram/cache/state.sqlite"
    for whole in (False, True):
        base = load_state(path)[0]
        first, second = sorted(base.notes)[:2]
        kept = {p: n for p, n in base.notes.items() if p != first}
        kept[second] = Note.from_dict({**kept[second].to_dict(), "title": "Another title", "links": []})  # rewritten
        old_first, old_second = base.notes[first], base.notes[second]
        save_state(path, replace(base, notes=kept), base=replace(base, stored=False) if whole else base)
        assert old_first.links and old_second.title != "Another title" and old_second.links  # decoded now, as read
        assert load_state(path)[0].notes[second].title == "Another title" and first not in load_state(path)[0].notes
        shutil.rmtree(vault / ".engram/cache")  # the state back to the vault's
        compile_vault(vault, Settings(), embedder=fake_embedder)
