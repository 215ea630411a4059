"""Hybrid note search's second pass: late interaction joins the scoring of the first ranking's best notes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from compiler.pipeline.spine import compile_vault
from compiler.core.settings import Settings
from compiler.index import late_interaction
from compiler.index import token_cache
from compiler.index.cache import EmbeddingCache
from compiler.index.token_cache import TokenVectorCache
from compiler.notes import search
from compiler.notes.search import hybrid_search
from tests.conftest import FakeEmbedder
from tests.memory.test_late_interaction import FakeTokenEmbedder

# "Keys" says "rotate" and "keys" over and over but never "signing": its sentence vector (a bag of
# words) is the query's nearest. "Signing" holds all three words among many others: a worse
# cosine, but every word of the query matches one of its pieces.
FILES = {
    "Keys.md": "# Chores\n\nRotate keys, rotate keys: keys.\n",
    "Signing.md": "# Signing\n\nTo rotate the signing keys, open the console and wait for the job.\n",
    **{f"Filler {k}.md": f"# Filler {k}\n\nSigning happens in the pipeline, step {k}.\n" for k in range(6)},
}
QUERY = "rotate signing keys"


@pytest.fixture
def vault(make_vault):  # type: ignore[no-untyped-def]
    root = make_vault(FILES)
    compile_vault(root, Settings(), embedder=FakeTokenEmbedder())  # its sentence vectors are FakeEmbedder's
    return root


def test_match_stored_is_the_share_of_query_pieces_found(tmp_path: Path) -> None:
    embedder = FakeTokenEmbedder()
    texts = ["Rotate keys, keys.", "rotate the signing keys", "?"]
    writer = TokenVectorCache(tmp_path / "e.sqlite")
    late_interaction.cache_token_vectors(texts, writer, EmbeddingCache(tmp_path / "e.sqlite"), lambda: embedder,
                                         embedder.identity)
    _, query = late_interaction.embed_query(embedder, QUERY)
    calls = embedder.token_calls
    reader = TokenVectorCache(tmp_path / "e.sqlite", readonly=True)
    scores = late_interaction.match_stored(reader, embedder.identity, query, [*texts, "never compiled"])
    assert scores[:3] == pytest.approx([2 / 3, 1.0, 0.0])  # punctuation alone: no pieces, 0 and no error
    assert scores[3] is None and embedder.token_calls == calls  # stored vectors only: the model is not run


def test_compile_stores_token_vectors_only_for_models_with_them(make_vault) -> None:  # type: ignore[no-untyped-def]
    root = make_vault(FILES)
    cache = root / ".engram" / "cache" / "embeddings.sqlite"
    compile_vault(root, Settings(), embedder=FakeEmbedder())
    assert _token_rows(cache) == 0
    report = compile_vault(root, Settings(), embedder=FakeTokenEmbedder())  # another model: a full build
    assert report.embedded == report.sections == len(FILES) == _token_rows(cache)  # one forward pass each
    assert compile_vault(root, Settings(), embedder=FakeTokenEmbedder()).embedded == 0


def _token_rows(cache: Path) -> int:
    with sqlite3.connect(cache) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (token_cache.ROWS,)).fetchone():
            return 0
        return int(db.execute(f"SELECT count(*) FROM {token_cache.ROWS}").fetchone()[0])


def test_without_token_vectors_the_cosine_ranks(vault) -> None:  # type: ignore[no-untyped-def]
    assert [h["file"] for h in hybrid_search(vault, QUERY, 2, embedder=FakeEmbedder())] == ["Keys.md", "Signing.md"]


def test_late_interaction_counts_for_the_best_notes(vault) -> None:  # type: ignore[no-untyped-def]
    # One signal of three (with BM25 and the cosine, each min-max scaled over the notes): "Signing"
    # matches every piece of the query and climbs towards "Keys", which keywords and the
    # sentence vector prefer.
    def gap(embedder: FakeEmbedder) -> float:
        scores = {h["file"]: h["score"] for h in hybrid_search(vault, QUERY, 2, embedder=embedder)}
        return scores["Keys.md"] - scores["Signing.md"]

    assert gap(FakeEmbedder()) > gap(FakeTokenEmbedder()) > 0
    hits = hybrid_search(vault, QUERY, 2, embedder=FakeTokenEmbedder())
    assert "**signing**" in hits[1]["snippet"]


def test_min_max_scales_each_signal_to_its_spread() -> None:
    assert search._min_max([3.0, 1.0, 2.0]) == [1.0, 0.0, 0.5]
    assert search._min_max([0.4, 0.4]) == [0.0, 0.0] and search._min_max([]) == []


def test_only_the_first_notes_are_reranked(vault, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(search, "RERANK", 1)  # only "Keys" is re-scored: its late match is no help to "Signing"
    embedder = FakeTokenEmbedder()
    assert hybrid_search(vault, QUERY, 2, embedder=embedder)[0]["file"] == "Keys.md"
    assert embedder.token_calls == 1  # the query: the sections' token vectors are the stored ones


def test_query_vector_is_the_sentence_vector() -> None:
    embedder = FakeTokenEmbedder()
    sentence, pieces = search._embed(embedder, QUERY)
    assert np.allclose(sentence, FakeEmbedder().embed([QUERY])[0]) and pieces.shape == (3, embedder.dimension)
    assert search._embed(FakeEmbedder(), QUERY)[1].size == 0
