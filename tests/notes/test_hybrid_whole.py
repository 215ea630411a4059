"""Hybrid note search's rerank compares each note as a whole (the mean of its sections' vectors), not only its best section."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.core.settings import Settings
from compiler.notes import search
from compiler.notes.search import hybrid_search
from compiler.pipeline.spine import compile_vault
from tests.conftest import FakeEmbedder

QUERY = "rotate signing keys"
# "Handbook" is long and about everything: one of its sections says the query's words exactly,
# so its best section wins BM25 and the cosine. "Rotation" is about the query as a whole.
OFF_TOPIC = ["lunch soup bread cheese", "parking garage level badge", "holiday calendar request form",
             "printer toner paper jam", "coffee machine descaling weekly", "office plants watering rota",
             "travel expenses receipts approval", "meeting rooms booking screen"]
FILES = {
    "Handbook.md": "# Handbook\n\n## Keys\n\nRotate signing keys.\n\n"
                   + "".join(f"## Part {k}\n\n{text.capitalize()}.\n\n" for k, text in enumerate(OFF_TOPIC)),
    "Rotation.md": "# Rotation\n\nRotate signing keys every month: the release job signs with them.\n",
    **{f"Filler {k}.md": f"# Filler {k}\n\nThe keys of step {k} are in the pipeline.\n" for k in range(4)},
}


@pytest.fixture
def vault(make_vault):  # type: ignore[no-untyped-def]
    root = make_vault(FILES)
    compile_vault(root, Settings(), embedder=FakeEmbedder())
    return root


def test_the_rerank_prefers_the_note_about_the_query_as_a_whole(vault, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    files = [h["file"] for h in hybrid_search(vault, QUERY, 3, embedder=FakeEmbedder())]
    assert files[:2] == ["Rotation.md", "Handbook.md"]
    monkeypatch.setattr(search, "_whole_cosines", lambda store, paths, vector: {})  # each note by its best section
    assert [h["file"] for h in hybrid_search(vault, QUERY, 3, embedder=FakeEmbedder())][0] == "Handbook.md"


def test_whole_cosines_read_every_section_of_a_note(vault, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(search, "ORDINALS", 2)  # Handbook's 10 sections take six batches (ORDINALS 2)
    store = search._open_vectors(vault, "")
    query = FakeEmbedder().embed([QUERY])[0]
    wholes = search._whole_cosines(store, ["Handbook.md", "Rotation.md", "Missing.md"], query)
    sections = store.vectors([f"Handbook.md#{i}" for i in range(20)])
    assert len(sections) == 2 + len(OFF_TOPIC)  # its title's heading, Keys and the parts
    mean = np.mean(list(sections.values()), axis=0)
    assert wholes["Handbook.md"] == pytest.approx(float(mean @ query) / float(np.linalg.norm(mean)), abs=1e-6)
    assert wholes["Rotation.md"] == pytest.approx(float(store.vectors(["Rotation.md#0"])["Rotation.md#0"] @ query), abs=1e-6)
    assert "Missing.md" not in wholes  # a note without vectors keeps its best section's cosine
