"""Late interaction: how well a memory or a note section answers a query, word piece by word piece.

MaxSim (as in ColBERT) on the embedding model's contextual token vectors: each word piece of the
query takes its best cosine among the memory's word pieces, and the memory's match is the power
mean (POWER) over the query's pieces. One sentence vector blurs a turn into its topic; token
vectors keep "sunset" and "painted" apart, and they still match "kids" to "children" where
keywords cannot. A memory's conversational neighbours lend their pieces at a discount (NEAR,
FAR; ASKED for the question a turn answers): a turn that names its subject only in the turn
before it still matches. Punctuation and stopwords are dropped on both sides: a stopword's vector
carries its neighbours' meaning, which theirs carry better, and dropping them leaves fewer vectors
(benchmarks/README.md has the figures).

The token vectors of every memory text are computed when the text is embedded and kept in the
token-vector cache (compiler.index.token_cache) as int8 (x × 127: components of a unit vector lie in [−1, 1]; no ranking
changed against float32), 384 bytes a word piece: about 11 KB for a LoCoMo turn. On LoCoMo's
development set the match alone ranks better than BM25, cosine, or their hybrid
(benchmarks/README.md). The compile keeps note sections' token vectors the same way, for hybrid
note search to rescore its best candidates (`match_stored`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from compiler.embed.embedder import Embedder, batch_order
from compiler.index.blas import one_thread
from compiler.index.cache import EmbeddingCache, text_hash
from compiler.index.keywords import STOPWORDS
from compiler.index.token_cache import TokenVectorCache

NEAR, FAR = 0.8, 0.7  # how much a neighbour one / two places away counts against the memory itself
# A turn that follows a question answers it ("Got any paintings to show?" — "Here's one I did last
# week"): the question's pieces say what the answer is about, so they count more than a plain
# neighbour's. The weight is the best of a sweep on LoCoMo dev (benchmarks/README.md, round eight).
ASKED = 0.875
# The pieces' best cosines are pooled by a power mean below 1, a soft AND: a memory that matches
# every query piece fairly beats one that matches some exactly and misses the rest, at the same
# plain mean. The power is the best of a sweep on LoCoMo dev (benchmarks/README.md, round three).
POWER = 0.8
BATCH = 128
SCALE = 127.0  # int8 steps per unit

_WORDISH = re.compile(r"^(##)?\w", re.UNICODE)


def supports(embedder: Embedder) -> bool:
    """Whether the model exposes token vectors (the bundled one does; a C engine may not)."""
    return callable(getattr(embedder, "embed_tokens", None))


def word_vectors(pieces: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """Returns the rows of `vectors` that belong to words other than stopwords (all words when
    there is nothing else, so "It is!" still has vectors)."""
    words = [k for k, piece in enumerate(pieces) if _WORDISH.match(piece)]
    return vectors[[k for k in words if pieces[k] not in STOPWORDS] or words]


def embed_query(embedder: Embedder, query: str) -> tuple[np.ndarray, np.ndarray]:
    """Returns the query's sentence vector and its word-vector matrix, from one forward pass."""
    pieces, vectors, sentence = embedder.embed_tokens([query])[0]
    return sentence, word_vectors(pieces, vectors)


def cache_token_vectors(texts: Iterable[str], tokens: TokenVectorCache, vectors: EmbeddingCache,
                        embedder: Callable[[], Embedder], identity: str,
                        progress: Callable[[int], None] = lambda n: None) -> int:
    """Computes and caches the token vectors of the `texts` not cached yet, and their sentence
    vectors from the same forward pass; returns how many texts that was (0 if the model has no
    token vectors). The model is only loaded (through `embedder`) when some text is missing."""
    by_hash = {text_hash(t): t for t in texts}
    unknown = set(by_hash) - tokens.known(identity, list(by_hash))
    if not unknown or not supports(model := embedder()):
        return 0
    missing = batch_order(model, {h: by_hash[h] for h in unknown})  # similar lengths together: less padding
    for start in range(0, len(missing), BATCH):
        batch = missing[start:start + BATCH]
        embedded = model.embed_tokens([by_hash[h] for h in batch])
        tokens.put_many(identity, {h: np.round(word_vectors(p, t) * SCALE) for h, (p, t, _) in zip(batch, embedded)})
        vectors.put_many(identity, {h: v for h, (_, _, v) in zip(batch, embedded)})
        progress(len(batch))
    return len(missing)


def best_per_piece(query: np.ndarray, texts: Mapping[str, str], tokens: TokenVectorCache, vectors: EmbeddingCache,
                   embedder: Callable[[], Embedder], identity: str) -> dict[str, np.ndarray]:
    """Returns {key: each query piece's best cosine among the pieces of that text} for {key: text},
    computing missing token vectors first. One matrix product for all texts."""
    hashes = {key: text_hash(text) for key, text in texts.items()}
    found = tokens.get_many(identity, list(hashes.values()))
    missing = {texts[key] for key, h in hashes.items() if h not in found}  # an older store, a deleted cache
    if missing and cache_token_vectors(missing, tokens, vectors, embedder, identity):
        found.update(tokens.get_many(identity, [text_hash(text) for text in missing]))
    keys = [key for key, h in hashes.items() if h in found]
    dimension = query.shape[1]
    counts = np.array([len(found[hashes[key]]) // dimension for key in keys], dtype=np.int64)
    best = np.zeros((len(query), len(keys)), dtype=np.float32)
    if counts.sum():
        # Converted in one step into one new array: astype then divide made two of ~15 MB, each
        # page-faulted in afresh (5–8 ms of a 50,000-memory recall under load, 2 ms in one step).
        stacked = np.divide(np.concatenate([found[hashes[key]] for key in keys]).reshape(-1, dimension),
                            np.float32(SCALE), dtype=np.float32)
        with one_thread():  # a few query pieces against a few thousand: one thread is faster (compiler.index.blas)
            similarity = stacked @ query.T  # pieces × query pieces: a third faster than its transpose, same floats
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        filled = counts > 0  # a text without word pieces keeps zeros
        best[:, filled] = np.maximum.reduceat(similarity, starts[filled], axis=0).T
    return {key: best[:, k] for k, key in enumerate(keys)}


def match(own: np.ndarray, near: Sequence[np.ndarray] = (), far: Sequence[np.ndarray] = ()) -> float:
    """Returns the power mean (POWER) over the query's pieces of their best cosine in the memory
    (`own`, from `best_per_piece`) or, at NEAR / FAR weight, in its neighbours; a piece that
    matches nothing (a negative cosine) counts as 0."""
    return float(pool(combine(own, near, far)[np.newaxis])[0])


def with_gist(own: np.ndarray, query: np.ndarray, sentence: np.ndarray | None) -> np.ndarray:
    """Returns each query piece's best cosine in the memory (`own`, from `best_per_piece`) with
    the memory's sentence vector (its gist: the mean of its token vectors, stopwords included)
    counted as one more of its pieces: a query word that no single word of the memory matches may
    still match what the memory is about ("a national park" against a camping trip); measured in
    benchmarks/README.md, round seven."""
    return own if sentence is None else np.maximum(own, query @ sentence)


def combine(own: np.ndarray, near: Sequence[np.ndarray] = (), far: Sequence[np.ndarray] = (),
            asked: Sequence[np.ndarray] = ()) -> np.ndarray:
    """Returns each query piece's best cosine in the memory or, at NEAR / FAR weight, in its
    neighbours — at ASKED weight in the question it answers."""
    best = own
    for weight, group in ((NEAR, near), (FAR, far), (ASKED, asked)):
        for other in group:
            best = np.maximum(best, weight * other)
    return best


_QUESTION = re.compile(r"\?\s*(\[[^\]]*\])?\s*$")


def asks(text: str) -> bool:
    """Whether `text` ends in a question (a trailing "[shares …]"-style bracket aside)."""
    return bool(_QUESTION.search(text))


def pool(best: np.ndarray) -> np.ndarray:
    """Returns, per row of `combine` results (one memory a row), the power mean of its pieces: one
    array operation for every candidate of a recall instead of several per memory."""
    if not best.shape[1]:
        return np.zeros(len(best), dtype=np.float32)
    return np.mean(np.maximum(best, 0.0) ** POWER, axis=1) ** (1.0 / POWER)


def match_stored(tokens: TokenVectorCache, identity: str, query: np.ndarray, texts: Sequence[str]) -> list[float | None]:
    """Returns each text's MaxSim match (no neighbours; the plain mean over the query's pieces, as
    measured on the notes bench, not recall's power mean) against the query's word-vector matrix
    (`embed_query`), from the token vectors the compile stored; None for a text without them (a
    vault compiled before they were kept). Never runs the model."""
    found = tokens.get_many(identity, [text_hash(t) for t in texts])
    scores: list[float | None] = []
    for text in texts:
        stored = found.get(text_hash(text))
        if stored is None:
            scores.append(None)
            continue
        words = stored.reshape(-1, query.shape[1]).astype(np.float32) / SCALE if len(query) else stored[:0]
        scores.append(float((query @ words.T).max(axis=1).mean()) if len(words) else 0.0)
    return scores
