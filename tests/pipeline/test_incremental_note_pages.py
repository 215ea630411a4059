"""A compile that digests only the backlinks pages an edit can change (compiler.pipeline.note_pages)
writes the pages a compile from scratch writes, byte for byte, over random edit histories: titles,
aliases and links edited, notes added, removed and renamed, a generated page edited by hand."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

import compiler.pipeline.note_pages as note_pages
from compiler.core.settings import Settings
from compiler.notes.graph_store import read_graph
from compiler.pipeline.spine import compile_vault

NAMES = ["Alpha", "Beta", "Gamma", "Delta", "Echo", "Team/Foxtrot", "Team/Golf", "Team/Alpha", "Hotel", "India",
         "Juliett", "Kilo", "Lima", "Team/Mike", "November", "Oscar"]
WORDS = [f"{stem}{n}" for stem in ("pay", "ledger", "queue", "deploy", "budget", "schema") for n in range(10)]
OUT = "_engram"
# Short related lists: an edit moves a few pages. A catalog split above 15 notes: adds and removes cross it.
SETTINGS = Settings(related_max=2, related_min_cosine=0.3, catalog_split=15)


def note_text(rng: random.Random, names: list[str]) -> str:
    """A note with a random title, aliases, words and links (to notes, a heading, a missing note)."""
    front = []
    if rng.random() < 0.5:
        front.append(f"title: {rng.choice(WORDS).title()} {rng.randrange(3)}")
    if rng.random() < 0.3:
        front.append(f"aliases: [{rng.choice(WORDS)}]")
    lines = [f"---\n{chr(10).join(front)}\n---\n"] if front else []
    for _ in range(rng.randrange(1, 4)):
        words = rng.sample(WORDS, 5)
        links = [rng.choice((f"[[{name.split('/')[-1]}]]", f"[[{name}|shown]]", f"[[{name}#Intro]]", "[[Nowhere]]"))
                 for name in rng.sample(names, min(len(names), rng.choice((0, 0, 1, 2))))]
        lines.append(" ".join(words + links) + "\n")
    return "\n".join(lines)


def generated(vault: Path) -> dict[str, bytes]:
    """Every generated page and the graph store's rows (rewritten note by note too)."""
    pages = {str(p.relative_to(vault)): p.read_bytes() for p in sorted((vault / OUT).rglob("*")) if p.is_file()}
    return {**pages, "graph": repr(read_graph(vault / ".engram/cache/graph.sqlite")).encode()}


def from_scratch(vault: Path, fresh: Path, embedder) -> dict[str, bytes]:
    """Copies the notes of `vault` (not its generated pages or cache) and compiles the copy once."""
    shutil.rmtree(fresh, ignore_errors=True)
    for note in vault.rglob("*.md"):
        relative = note.relative_to(vault)
        if relative.parts[0] not in (OUT, ".engram"):
            (fresh / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(note, fresh / relative)
    compile_vault(fresh, SETTINGS, embedder=embedder)
    return generated(fresh)


def step(rng: random.Random, vault: Path, names: list[str]) -> None:
    """One change to the vault, mostly edits of one or two notes."""
    action = rng.choices(("edit", "add", "remove", "rename", "page"), (8, 1, 1, 1, 1))[0]
    if action == "add" or len(names) < 3:
        name = f"New{rng.randrange(100)}"
        names.append(name) if name not in names else None
        (vault / f"{name}.md").write_text(note_text(rng, names))
    elif action == "remove":
        name = names.pop(rng.randrange(len(names)))
        (vault / f"{name}.md").unlink()
    elif action == "rename":
        # Into another folder, same file name: a move that changes the title keeps the vectors it
        # was embedded with (no re-embedding), which a rebuild would not, so its cosines differ.
        old = names.pop(rng.randrange(len(names)))
        new = f"{rng.choice(('Archive', 'Team', 'Old/Team'))}/{old.split('/')[-1]}"
        if new not in names:
            (vault / new).parent.mkdir(parents=True, exist_ok=True)
            (vault / f"{old}.md").rename(vault / f"{new}.md")
            names.append(new)
        else:
            names.append(old)
    elif action == "page":
        pages = sorted((vault / OUT / "backlinks").rglob("*.md"))
        page = rng.choice(pages)
        page.write_text(page.read_text() + "edited by hand\n")
    else:
        for name in rng.sample(names, rng.randrange(1, 3)):
            (vault / f"{name}.md").write_text(note_text(rng, names))


@pytest.mark.parametrize("seed", range(8))
def test_random_edit_histories_give_the_pages_of_a_full_rebuild(seed, tmp_path, fake_embedder, monkeypatch):
    rng = random.Random(seed)
    vault, names = tmp_path / "vault", list(NAMES)
    for name in names:
        (vault / name).parent.mkdir(parents=True, exist_ok=True)
        (vault / f"{name}.md").write_text(note_text(rng, names))
    partial = []  # each build's answer: None (every page digested) or the notes whose pages were
    original = note_pages.notes_to_digest
    monkeypatch.setattr(note_pages, "notes_to_digest", lambda *a: partial.append(original(*a)) or partial[-1])
    compile_vault(vault, SETTINGS, embedder=fake_embedder)
    for number in range(8):
        step(rng, vault, names)
        compile_vault(vault, SETTINGS, embedder=fake_embedder)
        assert generated(vault) == from_scratch(vault, tmp_path / f"fresh{number}", fake_embedder), number
    assert any(found is not None and len(found) < len(names) for found in partial)  # the shortcut was taken
