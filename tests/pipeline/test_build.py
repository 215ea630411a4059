"""The compile spine: incremental work, determinism, and safety of what it writes; then its stages one by one."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from compiler.core.settings import Settings
from compiler.notes.graph_store import read_graph
from compiler.notes.scan import scan_vault
from compiler.index.flat import FlatStore
from compiler.index.vectors import COLLECTION
from compiler.notes.search import keyword_search, vector_search
from compiler.pipeline.index import choose_model, embed_sections, update_indexes
from compiler.pipeline.notes import parse_notes
from compiler.pipeline.spine import compile_vault
from compiler.pipeline.state import BuildState, load_state
from compiler.pipeline.vault_paths import VaultPaths
from tests.conftest import FakeEmbedder

NOTES = {
    "Home.md": "# Home\n\nStart at [[Projects/Alpha]] and [[Beta|the beta project]].\n\n#index\n",
    "Projects/Alpha.md": "---\ntags: [project, payments]\naliases: [A]\n---\n# Alpha\n\nAlpha builds the "
                         "payments gateway.\n\n## Risks\n\nCard fraud and refunds. See [[Beta#Plan]].\n",
    "Projects/Beta.md": "# Beta\n\nBeta is the data pipeline.\n\n## Plan\n\nIngest events nightly. ![[Alpha]]\n",
    "Analyses/cost.qmd": "---\ntitle: Cost analysis\n---\n\nCosts of [[Beta]] per month.\n\n```{python}\n"
                         "import pandas as pd\n```\n",
    "Lonely.md": "# Lonely\n\nNobody links here, and it links nowhere.\n",
}


def snapshot(vault: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under the vault with its mtime and bytes."""
    return {p.relative_to(vault).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(vault.rglob("*")) if p.is_file()}


def pages(vault: Path, out: str = "_engram") -> dict[str, bytes]:
    return {p.relative_to(vault / out).as_posix(): p.read_bytes() for p in sorted((vault / out).rglob("*.md"))}


def test_first_compile_indexes_notes_and_writes_pages(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert report.notes == 5
    assert report.embedded == report.sections > 5
    assert {"_engram/catalog.md", "_engram/health.md", "_engram/backlinks/Projects/Alpha.links.md",
            "_engram/backlinks/Analyses/cost.qmd.links.md"} <= set(report.written)
    alpha = (vault / "_engram/backlinks/Projects/Alpha.links.md").read_text()
    assert alpha.startswith("---\ngenerated_by: engram\n")
    # linked from Home, embedded by Beta: each row links the other note's backlinks page, not the note
    assert "[[_engram/backlinks/Home.links|Home]]" in alpha and "[[_engram/backlinks/Projects/Beta.links|Beta]]" in alpha
    assert "[[Projects/Alpha|Alpha]]" in alpha and "[[Home]]" not in alpha
    beta = (vault / "_engram/backlinks/Projects/Beta.links.md").read_text()
    assert "[[_engram/backlinks/Analyses/cost.qmd.links|Cost analysis]]" in beta and "Quarto" in beta  # .qmd backlinks become visible
    health = (vault / "_engram/health.md").read_text()
    assert "[[Lonely]]" in health  # the orphan


def test_unchanged_vault_does_no_work_and_writes_nothing(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    before, calls = snapshot(vault), fake_embedder.calls
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert (report.embedded, report.written, report.changed, report.deleted) == (0, [], [], [])
    assert fake_embedder.calls == calls
    assert snapshot(vault) == before  # not a byte, not an mtime, cache included


def test_editing_one_note_reembeds_only_its_new_sections(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    (vault / "Projects/Beta.md").write_text(NOTES["Projects/Beta.md"] + "\n## Owners\n\nAna and Luis.\n")
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert report.changed == ["Projects/Beta.md"]
    assert report.embedded == 1  # the new "Owners" section; the unchanged ones come from the cache
    assert keyword_search(vault, "Luis")[0]["file"] == "Projects/Beta.md"


def test_deleted_note_leaves_index_graph_and_pages(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    (vault / "Lonely.md").unlink()
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert report.removed == ["Lonely.md"]
    assert report.deleted == ["_engram/backlinks/Lonely.links.md"]
    assert not keyword_search(vault, "Nobody links here")
    notes, edges = read_graph(vault / ".engram/cache/graph.sqlite")
    assert notes and "Lonely.md" not in {n for n, _ in notes} | {e[1] for e in edges}
    assert "Lonely" not in (vault / "_engram/catalog.md").read_text()


def test_rename_is_detected_by_hash_and_not_reembedded(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    (vault / "Lonely.md").rename(vault / "Archive.md")
    texts = fake_embedder.texts
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert report.renamed == 1 and report.embedded == 0 and fake_embedder.texts == texts
    assert keyword_search(vault, "Nobody links")[0]["file"] == "Archive.md"


def test_rebuild_from_scratch_gives_identical_pages(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    (vault / "Projects/Beta.md").write_text(NOTES["Projects/Beta.md"] + "\nMore about [[Lonely]].\n")
    compile_vault(vault, Settings(), embedder=fake_embedder)  # an incremental build...
    incremental = pages(vault)
    shutil.rmtree(vault / ".engram" / "cache")
    report = compile_vault(vault, Settings(), embedder=FakeEmbedder())  # ...equals a clean one
    assert report.rebuild_reason == "no previous build"
    assert pages(vault) == incremental


def test_model_change_forces_full_rebuild(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    other = FakeEmbedder()
    other.identity = "another-model"
    report = compile_vault(vault, Settings(), embedder=other)
    assert "embedding model changed" in report.rebuild_reason
    assert report.embedded == report.sections


def test_person_owned_file_in_output_folder_is_never_overwritten(make_vault, fake_embedder):
    vault = make_vault({**NOTES, "_engram/catalog.md": "# My own catalog\n"})
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert (vault / "_engram/catalog.md").read_text() == "# My own catalog\n"
    assert any(w.kind == "collision" and w.file == "_engram/catalog.md" for w in report.warnings)


def test_generated_pages_are_not_read_back_as_notes(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert report.notes == 5


@pytest.mark.parametrize("name, content, kind", [
    ("binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR" + bytes(range(256)), "binary"),
    ("latin1.md", "# Caf\xe9\n\nna\xefve text\n".encode("latin-1"), "encoding"),
    ("broken.md", "---\ntitle: ok\ntags: [unclosed\n---\n# Broken\n\nBody still indexed.\n", "frontmatter"),
    ("huge.md", "# Huge\n\n" + ("lorem ipsum dolor sit amet " * 40 + "\n\n") * 5000, "size"),
])
def test_bad_input_gives_a_warning_naming_the_file(make_vault, fake_embedder, name, content, kind):
    vault = make_vault({**NOTES, name: content})
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert any(w.file == name and w.kind == kind for w in report.warnings), report.warnings


def test_hostile_titles_and_paths_never_write_outside_the_output_folder(make_vault, fake_embedder):
    hostile = {"evil.md": "---\ntitle: ../../../etc/passwd\naliases: ['../../x']\n---\n# ../../x\n\n[[../../x]]\n",
               "dots/..hidden name.md": "# [[weird]] | title ]] \n\ntext\n"}
    vault = make_vault({**NOTES, **hostile})
    outside = lambda: {p for p in snapshot(vault.parent) if not p.startswith(("vault/_engram/", "vault/.engram/"))}
    before = outside()
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert outside() == before
    assert all(p.startswith("_engram/") for p in report.written)
    evil = (vault / "_engram/backlinks/evil.links.md").read_text()
    assert 'title: "../../../etc/passwd"' in evil


# --- the stages, one at a time: each takes what it needs and returns its product ----------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR" + bytes(range(256))
no_tick = lambda n: None  # noqa: E731


def test_report_is_built_once_and_keeps_its_json_shape(make_vault, fake_embedder):
    report = compile_vault(make_vault(NOTES), Settings(), embedder=fake_embedder)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.notes = 0  # type: ignore[misc]
    assert list(report.to_dict()) == ["notes", "sections", "changed", "removed", "renamed", "embedded", "written",
                                      "deleted", "links", "memories", "warnings", "rebuild_reason", "seconds",
                                      "token_file"]


def test_parse_reads_only_edited_notes_and_names_what_left(make_vault):
    vault, settings = make_vault(NOTES), Settings()
    scan = scan_vault(vault, (), {})
    first = parse_notes(vault, scan, BuildState(), settings, no_tick)
    previous = BuildState(files={s.path: s for s in scan.notes}, notes=first.notes, warnings=first.warnings)
    (vault / "Projects/Beta.md").write_bytes(PNG)  # no longer a note: it leaves the index as if removed
    (vault / "Lonely.md").rename(vault / "Archive.md")
    ticks: list[int] = []
    parsed = parse_notes(vault, scan_vault(vault, (), previous.files), previous, settings, ticks.append)
    assert ticks == [1, 1]  # Archive.md and Projects/Beta.md; the rest is carried over
    assert parsed.notes["Home.md"] is previous.notes["Home.md"]
    assert (parsed.changed, parsed.removed, parsed.renamed) == (["Archive.md"], ["Lonely.md", "Projects/Beta.md"], 1)
    assert [w.kind for w in parsed.warnings["Projects/Beta.md"]] == ["binary"]


def test_index_rebuilds_whole_when_told_full(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    paths = VaultPaths(vault.resolve())
    previous, _ = load_state(paths.state)
    (vault / "Lonely.md").write_text("# Lonely\n\nZebras graze here now.\n")  # as many sections as before
    parsed = parse_notes(vault, scan_vault(vault, ("_engram",), previous.files), previous, Settings(), no_tick)
    vectors = embed_sections(paths.embeddings, parsed.notes, choose_model("", fake_embedder), no_tick).vectors
    told_nothing_changed = dataclasses.replace(parsed, changed=[], removed=[])
    update_indexes(paths, "", told_nothing_changed, vectors, full=False)
    assert not keyword_search(vault, "Zebras")  # the counts agree: nothing to do
    update_indexes(paths, "", told_nothing_changed, vectors, full=True)
    assert keyword_search(vault, "Zebras")[0]["file"] == "Lonely.md"


def test_a_move_keeps_its_vectors_and_a_rename_that_changes_the_title_embeds_it_again(make_vault, fake_embedder):
    # No H1 and no frontmatter title: the title (which every embedded section text starts with) is the file name.
    vault = make_vault({**NOTES, "Ideas/rough idea.md": "Sketch of the queue.\n\n## Risks\n\nBackpressure.\n\n"
                                                       "## Plan\n\nShard by tenant.\n"})
    compile_vault(vault, Settings(), embedder=fake_embedder)
    (vault / "Archive").mkdir()
    (vault / "Ideas/rough idea.md").rename(vault / "Archive/rough idea.md")  # another folder, the same title
    texts = fake_embedder.texts
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert (report.renamed, report.embedded, fake_embedder.texts) == (1, 0, texts)
    assert " · 0 changed · 1 moved · 0 sections embedded · " in report.summary()

    (vault / "Archive/rough idea.md").rename(vault / "Archive/polished tenant sharding.md")
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert (report.renamed, report.embedded) == (1, 3)  # each section's text starts with the new title
    assert keyword_search(vault, "Backpressure")[0]["file"] == "Archive/polished tenant sharding.md"
    hits = vector_search(vault, "polished tenant sharding", 3, embedder=fake_embedder)
    assert hits[0]["file"] == "Archive/polished tenant sharding.md"
    stored = FlatStore(vault / ".engram" / "cache", COLLECTION).vectors(["Archive/polished tenant sharding.md#1"])
    expected = fake_embedder.embed(["polished tenant sharding\n## Risks\n\nBackpressure."])[0]
    assert np.allclose(stored["Archive/polished tenant sharding.md#1"], expected)
