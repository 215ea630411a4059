"""Late interaction (compiler.index.late_interaction): word-piece matching, its cache, and recall with it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from compiler.core.settings import BUNDLED_MODEL, Settings
from compiler.index import late_interaction
from compiler.index.cache import EmbeddingCache, text_hash
from compiler.index.token_cache import TokenVectorCache
from compiler.embed.embedder import load_embedder
from compiler.memory.input import MemoryInput
from compiler.memory.recall import recall
from compiler.memory.vault import VaultMemory
from compiler.memory.write import write_memories
from tests.conftest import FakeEmbedder


class FakeTokenEmbedder(FakeEmbedder):
    """Each word is its own one-hot piece (punctuation kept as pieces, as a tokenizer would)."""

    identity = "fake-tokens-64"

    def __init__(self) -> None:
        super().__init__()
        self.token_calls = 0

    def embed_tokens(self, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
        self.token_calls += 1
        result = []
        for text, sentence in zip(texts, self.embed(texts)):
            pieces = re.findall(r"\w+|[^\w\s]", text.lower())
            vectors = np.zeros((len(pieces), self.dimension), dtype=np.float32)
            for row, piece in zip(vectors, pieces):
                row[int(hashlib.md5(piece.encode()).hexdigest(), 16) % self.dimension] = 1.0
            result.append((pieces, vectors, sentence))
        return result


def test_word_vectors_drop_punctuation_and_stopwords() -> None:
    pieces = ["what", "did", "caroline", "paint", "##ed", "?"]
    vectors = np.arange(len(pieces) * 2, dtype=np.float32).reshape(-1, 2)
    assert late_interaction.word_vectors(pieces, vectors).tolist() == vectors[2:5].tolist()
    only_stopwords = late_interaction.word_vectors(["it", "is", "!"], vectors[:3])
    assert only_stopwords.tolist() == vectors[:2].tolist()  # its words rather than nothing
    assert len(late_interaction.word_vectors(["?", "!"], vectors[:2])) == 0


def test_match_prefers_every_piece_matched_fairly_to_some_matched_exactly() -> None:
    # The same plain mean (0.6): the memory that answers both query pieces ranks first; one
    # that matches a piece exactly and misses the other (a name shared by every turn) second.
    both = np.array([0.6, 0.6], dtype=np.float32)
    one = np.array([1.0, 0.2], dtype=np.float32)
    assert late_interaction.match(both) > late_interaction.match(one)
    assert late_interaction.match(both) == pytest.approx(0.6)  # equal pieces: the mean itself
    # A piece with a negative best cosine counts as no match, not as a penalty below zero.
    assert late_interaction.match(np.array([0.5, -0.3], dtype=np.float32)) == \
        pytest.approx(late_interaction.match(np.array([0.5, 0.0], dtype=np.float32)))
    assert late_interaction.match(np.zeros(0, dtype=np.float32)) == 0.0
    # Recall pools all its candidates at once: the same figure per row as one memory at a time.
    rows = late_interaction.pool(np.stack([both, one]))
    assert rows.tolist() == pytest.approx([late_interaction.match(both), late_interaction.match(one)])


def test_match_takes_each_piece_best_with_neighbours_discounted() -> None:
    own = np.array([0.9, 0.1, 0.2], dtype=np.float32)
    near = np.array([0.1, 1.0, 0.1], dtype=np.float32)
    far = np.array([0.1, 0.1, 1.0], dtype=np.float32)
    power = late_interaction.POWER
    assert late_interaction.match(own) == pytest.approx(((0.9 ** power + 0.1 ** power + 0.2 ** power) / 3) ** (1 / power))
    best = [0.9, late_interaction.NEAR * 1.0, late_interaction.FAR * 1.0]
    expected = (sum(b ** power for b in best) / 3) ** (1 / power)
    assert late_interaction.match(own, [near], [far]) == pytest.approx(expected)
    # A neighbour never lowers a piece the memory itself matches better.
    assert late_interaction.match(own, [np.zeros(3, dtype=np.float32)]) == pytest.approx(late_interaction.match(own))


def test_the_memory_gist_counts_as_one_more_of_its_pieces() -> None:
    # Query piece 0 matches a word of the memory; piece 1 matches no word but the memory's
    # sentence vector (its gist): the gist lifts piece 1 and never lowers piece 0.
    query = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    own = np.array([0.9, 0.1], dtype=np.float32)
    gist = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    assert late_interaction.with_gist(own, query, gist).tolist() == pytest.approx([0.9, 0.8])
    assert late_interaction.with_gist(own, query, None) is own  # no stored sentence vector: the words alone


def test_best_per_piece_caches_token_vectors_once(tmp_path: Path) -> None:
    embedder = FakeTokenEmbedder()
    tokens = TokenVectorCache(tmp_path / "e.sqlite")
    vectors = EmbeddingCache(tmp_path / "e.sqlite")
    _, query = late_interaction.embed_query(embedder, "sunset painting")
    texts = {"a": "We painted a sunset.", "b": "A painting of a horse!", "c": "...", "d": "We painted a sunset."}

    best = late_interaction.best_per_piece(query, texts, tokens, vectors, lambda: embedder, embedder.identity)

    assert best["a"].tolist() == [1.0, 0.0]  # "sunset" found, "painting" is not "painted" to a hash
    assert best["b"].tolist() == [0.0, 1.0]
    assert best["c"].tolist() == [0.0, 0.0]  # no word pieces at all: zeros, not an error
    assert best["d"].tolist() == best["a"].tolist()
    calls = embedder.token_calls
    # The same texts again: read from the cache (int8), the model is not asked.
    again = late_interaction.best_per_piece(query, texts, tokens, vectors, lambda: embedder, embedder.identity)
    assert embedder.token_calls == calls
    assert {k: v.tolist() for k, v in again.items()} == {k: v.tolist() for k, v in best.items()}
    # The sentence vectors came from the same pass: they are cached for the vector index too.
    assert len(vectors.known(embedder.identity, [text_hash(t) for t in texts.values()])) == 3


def test_recall_uses_the_neighbours_words(tmp_path: Path) -> None:
    """A reply that names its subject only in the turn before it is found by that subject."""
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    embedder = FakeTokenEmbedder()
    turns = ["Did you finish the pottery class?", "Yes! It was wonderful.",
             "The weather is nice today.", "We went to the beach with the kids.",
             "Work has been busy lately.", "I started reading a new novel."]
    with VaultMemory(vault, Settings(), embedder=embedder) as memory:
        write_memories(memory, [MemoryInput(content=t, project="chat", source_id=f"t{k}") for k, t in enumerate(turns)])
        hits = recall(memory, "How was the pottery class?", n=4, reinforce=False)
    # Own words (1.0), then the reply to the question that has them (ASKED), then the turn two after (FAR).
    assert [h["content"] for h in hits][:3] == turns[:3]
    assert [h["match"] for h in hits][:3] == pytest.approx([1.0, late_interaction.ASKED, late_interaction.FAR], abs=1e-3)


def test_a_reply_to_a_statement_borrows_its_words_at_the_plain_neighbour_weight(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    turns = ["I finished the pottery class.", "Wonderful news.", "The weather is nice today."]
    with VaultMemory(vault, Settings(), embedder=FakeTokenEmbedder()) as memory:
        write_memories(memory, [MemoryInput(content=t, project="chat", source_id=f"t{k}") for k, t in enumerate(turns)])
        hits = recall(memory, "pottery class", n=3, reinforce=False)
    assert [h["content"] for h in hits][:2] == turns[:2]
    assert hits[1]["match"] == pytest.approx(late_interaction.NEAR, abs=1e-3)
    assert late_interaction.NEAR < late_interaction.ASKED < 1.0


@pytest.mark.parametrize(("text", "question"), [
    ("Did you finish the pottery class?", True),
    ("Wow! Is this your own painting? [shares a photo of a lake]", True),
    ("[8 May, 2023] Caroline: Got any paintings to show?  ", True),
    ("I asked whether it works? No, it did not.", False),
    ("Yes! It was wonderful.", False),
    ("", False),
])
def test_asks_is_a_text_that_ends_in_a_question(text: str, question: bool) -> None:
    assert late_interaction.asks(text) is question


@pytest.mark.integration
def test_real_model_token_vectors_agree_with_sentence_vectors() -> None:
    embedder = load_embedder(BUNDLED_MODEL)
    texts = ["short one", "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday!"] * 3
    together = embedder.embed_tokens(texts)
    plain = embedder.embed(texts)
    for (pieces, tokens, sentence), vector in zip(together, plain):
        assert np.allclose(sentence, vector, atol=1e-5)
        assert len(pieces) == len(tokens) and "[CLS]" not in pieces and "[SEP]" not in pieces
        assert np.allclose(np.linalg.norm(tokens, axis=1), 1.0, atol=1e-4)
    assert together[1][0][:3] == ["[", "1", ":"]


@pytest.mark.integration
def test_real_model_recall_finds_an_answer_named_only_by_the_question_turn(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    turns = ["Melanie: What instrument have you been learning this year?",
             "Caroline: The violin! I practise every evening after work.",
             "Melanie: My kids loved the dinosaur exhibit at the museum.",
             "Caroline: I'm researching adoption agencies for my family plans.",
             "Melanie: We roasted marshmallows when we went camping last weekend.",
             "Caroline: My counseling workshop was really inspiring."]
    with VaultMemory(vault, Settings()) as memory:
        write_memories(memory, [MemoryInput(content=t, project="chat", source_id=f"t{k}") for k, t in enumerate(turns)])
        hits = recall(memory, "Which instrument does Caroline practise?", n=2, reinforce=False)
    assert turns[1] in [h["content"] for h in hits]
    assert hits[0]["match"] > 0


def test_recall_survives_queries_without_words_and_huge_ones(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    with VaultMemory(vault, Settings(), embedder=FakeTokenEmbedder()) as memory:
        write_memories(memory, [MemoryInput(content=t, project="p", source_id=t)
                                for t in ("alpha beta", "gamma delta")])
        assert recall(memory, "???", reinforce=False) == []  # nothing matches a query without words
        hits = recall(memory, "gamma " * 200_000, reinforce=False)
        assert hits[0]["content"] == "gamma delta"
        assert recall(memory, "gamma", project="elsewhere", reinforce=False) == []
