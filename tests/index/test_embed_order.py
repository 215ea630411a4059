"""A compile embeds its texts in batches of similar length, by the model's own count of pieces
when it gives one (compiler.embed.embedder.batch_order): fewer padded pieces per batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from compiler.index import cache as cache_module
from compiler.index.cache import EmbeddingCache, embed_with_cache
from tests.conftest import FakeEmbedder

# By characters: tiny words first. By pieces (one a word here): the long words first.
TEXTS = ["a b c d e f", "g h i j k l", "extraordinarily", "incomprehensibilities"]


class CountingEmbedder(FakeEmbedder):
    """The fake embedder, counting a word as one piece and noting each batch it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def pieces(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return super().embed(texts)


def test_a_compile_batches_texts_by_their_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "WRITE_BATCH", 2)
    embedder = CountingEmbedder()
    vectors, embedded = embed_with_cache(TEXTS, lambda: embedder, embedder.identity, EmbeddingCache(tmp_path / "c.db"))
    assert embedded == 4 and vectors.shape == (4, 64)
    assert [sorted(batch) for batch in embedder.batches] == [["extraordinarily", "incomprehensibilities"],
                                                             ["a b c d e f", "g h i j k l"]]


def test_without_a_count_of_pieces_characters_order_the_batches(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "WRITE_BATCH", 2)
    embedder = CountingEmbedder()
    monkeypatch.setattr(CountingEmbedder, "pieces", None)  # a model that does not count its pieces
    embed_with_cache(TEXTS, lambda: embedder, embedder.identity, EmbeddingCache(tmp_path / "c.db"))
    assert [sorted(batch) for batch in embedder.batches] == [["a b c d e f", "g h i j k l"],
                                                             ["extraordinarily", "incomprehensibilities"]]
