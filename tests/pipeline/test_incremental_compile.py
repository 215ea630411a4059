"""A compile after edits does only the edited notes' work (pages, vectors, related notes), and
what it leaves is what a compile from scratch makes: every page, byte for byte, and the graph store's rows."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from compiler.core.settings import Settings
from compiler.notes.graph_store import read_graph
from compiler.pipeline.spine import compile_vault
from compiler.pipeline.state import load_state
from tests.conftest import FakeEmbedder

WORDS = "alpha beta gamma delta payments gateway fraud refunds pipeline events nightly owners".split()


def note_text(rng: random.Random, names: list[str]) -> str:
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 9)))
    link = f" See [[{rng.choice(names)}]]." if rng.random() < 0.6 else ""
    return f"# {rng.choice(WORDS).title()} {rng.randrange(100)}\n\n{body}.{link}\n\n## More\n\n{rng.choice(WORDS)}\n"


def outputs(vault: Path) -> dict[str, bytes]:
    found = {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted((vault / "_engram").rglob("*.md"))}
    return {**found, "graph": read_graph(vault / ".engram/cache/graph.sqlite")}


def test_incremental_compiles_equal_a_rebuild_from_scratch(make_vault):
    rng = random.Random(5)
    names = [f"N{i}" for i in range(30)]
    vault = make_vault({f"{'sub/' if i % 3 else ''}{name}.md": note_text(rng, names) for i, name in enumerate(names)})
    settings = Settings(related_min_cosine=0.2, related_max=3)
    compile_vault(vault, settings, embedder=FakeEmbedder())
    files = sorted(vault.rglob("N*.md"))
    for round_ in range(4):
        for path in rng.sample(files, 3):
            path.write_text(path.read_text() + f"\n{rng.choice(WORDS)} {rng.choice(WORDS)} [[{rng.choice(names)}]]\n")
        if round_ == 1:
            files[0].unlink()
            files = files[1:]
        if round_ == 2:
            (vault / "Fresh.md").write_text(note_text(rng, names))
        report = compile_vault(vault, settings, embedder=FakeEmbedder())
        assert not report.rebuild_reason and report.embedded <= 9
        incremental = outputs(vault)
        fresh = vault.parent / f"fresh{round_}"
        shutil.copytree(vault, fresh)
        shutil.rmtree(fresh / ".engram" / "cache")
        assert compile_vault(fresh, settings, embedder=FakeEmbedder()).rebuild_reason == "no previous build"
        assert outputs(fresh) == incremental


def test_only_pages_whose_inputs_changed_are_rendered(make_vault, monkeypatch):
    vault = make_vault({"A.md": "# A\n\nSee [[B]].\n", "B.md": "# B\n\nBee.\n", "C.md": "# C\n\nSea.\n"})
    settings = Settings(related_max=0)  # no related notes: which pages show what is plain
    compile_vault(vault, settings, embedder=FakeEmbedder())
    records = load_state(vault / ".engram/cache/state.sqlite")[0].note_renders
    assert set(records) == {"catalog.md", "health.md", "backlinks/A.links.md", "backlinks/B.links.md",
                            "backlinks/C.links.md"}
    rendered: list[str] = []
    import jinja2
    original = jinja2.Template.render
    monkeypatch.setattr(jinja2.Template, "render", lambda self, *a, **k: rendered.append(self.name) or original(self, *a, **k))
    (vault / "C.md").write_text("# C\n\nSea.\n\nMore sea, and [[B]].\n")  # the catalog shows the first line only
    compile_vault(vault, settings, embedder=FakeEmbedder())
    assert sorted(rendered) == ["backlinks.md.j2", "backlinks.md.j2", "health.md.j2"]  # B's and C's; C is no orphan
    assert "[[_engram/backlinks/C.links|C]]" in (vault / "_engram/backlinks/B.links.md").read_text()
    (vault / "_engram/backlinks/A.links.md").write_text("---\ngenerated_by: engram\n---\nedited by hand\n")
    (vault / "C.md").write_text("# C\n\nSea.\n")
    compile_vault(vault, settings, embedder=FakeEmbedder())
    assert "Backlinks: A" in (vault / "_engram/backlinks/A.links.md").read_text()  # a page changed on disk is made again


def test_a_damaged_or_stale_related_cache_is_computed_again(make_vault):
    rng = random.Random(9)
    names = [f"N{i}" for i in range(12)]
    vault = make_vault({f"{name}.md": note_text(rng, names) for name in names})
    settings = Settings(related_min_cosine=0.1, related_max=2)
    compile_vault(vault, settings, embedder=FakeEmbedder())
    cache = vault / ".engram/cache/related.sqlite"
    stale = cache.read_bytes()  # the store of an earlier build: its key names other notes
    for damage in (b"not a database", cache.read_bytes()[:100], cache.read_bytes()[:5000], stale):
        (vault / "N1.md").write_text(note_text(rng, names))
        cache.write_bytes(damage)
        compile_vault(vault, settings, embedder=FakeEmbedder())
        fresh = vault.parent / f"fresh-{len(damage)}"
        shutil.copytree(vault, fresh)
        shutil.rmtree(fresh / ".engram" / "cache")
        compile_vault(fresh, settings, embedder=FakeEmbedder())
        assert outputs(fresh) == outputs(vault)


def index_rows(vault: Path) -> tuple[list[tuple], list[tuple]]:
    """The keyword index's section rows and the flat vector store's ids with their texts, sorted."""
    from compiler.index.flat import FlatStore
    from compiler.index.keywords import KeywordIndex

    keyword = KeywordIndex(vault / ".engram/cache/fts.sqlite")
    rows = sorted(keyword._db.execute("SELECT path, ordinal, body FROM sections").fetchall())
    keyword.close()
    store = FlatStore(vault / ".engram/cache", "sections")
    ids = sorted(store.ids())
    found = store.records(ids)
    store.close()
    return rows, [(i, found[i][1]) for i in ids]


def test_an_edit_that_adds_a_heading_rewrites_only_that_note_in_the_indexes(make_vault, monkeypatch):
    # The vault's section count moves with such an edit; it once read as "index out of step" and
    # rebuilt both indexes and Chroma's mirror whole after any new or deleted heading.
    from compiler.index.keywords import KeywordIndex

    vault = make_vault({"A.md": "# A\n\nSee [[B]].\n", "B.md": "# B\n\nBee.\n", "C.md": "# C\n\nSea.\n"})
    compile_vault(vault, Settings(), embedder=FakeEmbedder())
    resets: list[str] = []
    monkeypatch.setattr(KeywordIndex, "reset", lambda self: resets.append("keyword"))
    (vault / "B.md").write_text("# B\n\nBee.\n\n## Hive\n\nHoney and wax.\n")
    report = compile_vault(vault, Settings(), embedder=FakeEmbedder())
    assert (report.changed, report.sections, resets) == (["B.md"], 4, [])
    monkeypatch.undo()
    fresh = vault.parent / "fresh"
    shutil.copytree(vault, fresh)
    shutil.rmtree(fresh / ".engram" / "cache")
    compile_vault(fresh, Settings(), embedder=FakeEmbedder())
    assert index_rows(vault) == index_rows(fresh)
    assert any("Honey" in body for _, _, body in index_rows(vault)[0])


def test_an_edit_takes_the_pages_stats_from_the_no_op_check_and_records_what_the_disk_holds(make_vault, monkeypatch):
    import compiler.core.files as files
    import compiler.pipeline.memory_pages as memory_pages

    rng = random.Random(3)
    names = [f"N{i}" for i in range(20)]
    vault = make_vault({f"{'sub/' if i % 2 else ''}{name}.md": note_text(rng, names) for i, name in enumerate(names)})
    settings = Settings(related_min_cosine=0.2, related_max=3)
    compile_vault(vault, settings, embedder=FakeEmbedder())
    (vault / "_engram/backlinks/N0.links.md").write_text("---\ngenerated_by: engram\n---\nedited by hand\n")
    (vault / "_engram/stale.md").write_text("---\ngenerated_by: engram\n---\nno note makes this page\n")
    stamped: list[str] = []
    original = memory_pages.page_stamp
    monkeypatch.setattr(memory_pages, "page_stamp", lambda path: stamped.append(str(path)) or original(path))
    monkeypatch.setattr(files, "_generated_candidates", lambda root: pytest.fail("the output folder walked again"))
    (vault / "sub/N1.md").write_text(note_text(rng, names) + "\nAn edit. [[N2]]\n")
    report = compile_vault(vault, settings, embedder=FakeEmbedder())
    assert "_engram/backlinks/N0.links.md" in report.written and report.deleted == ["_engram/stale.md"]
    assert len(stamped) == len(report.written)  # the pages written, for the record; no other page stat'ed
    again = compile_vault(vault, settings, embedder=FakeEmbedder())  # the record holds the pages as written
    assert again.written == [] and again.changed == [] and again.memories["maintenance"].get("unchanged")
    monkeypatch.undo()  # a compile without a record walks the output folder
    fresh = vault.parent / "fresh-listing"
    shutil.copytree(vault, fresh)
    shutil.rmtree(fresh / ".engram" / "cache")
    compile_vault(fresh, settings, embedder=FakeEmbedder())
    assert outputs(fresh) == outputs(vault)


def test_the_output_listing_after_writes_is_a_fresh_listing(tmp_path):
    from compiler.pipeline.inputs import OutputListing, _tree_stats

    rng = random.Random(1)
    for name in [f"{rng.choice(['a', 'b', 'a/c', 'z'])}/p{i}.md" for i in range(60)] + ["top.md", "a.md", "a b.md"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    for trial in range(10):
        listing = OutputListing(tuple(_tree_stats(tmp_path, caches=True)), frozenset())
        existing = [p for p, *_ in listing.rows]
        deleted = rng.sample(existing, 3)
        for page in deleted:
            (tmp_path / page).unlink()
        written = rng.sample([p for p in existing if p not in deleted], 3) + [f"new{trial}/x.md", f"a/new{trial}.md"]
        for page in written:
            (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / page).write_text("changed" * trial)
        assert listing.after_writes(tmp_path, written, deleted) == _tree_stats(tmp_path, caches=True), trial
