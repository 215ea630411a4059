"""Late interaction: how well a memory answers a query, word piece by word piece.

MaxSim (as in ColBERT) on the embedding model's contextual token vectors: each word piece of the
query takes its best cosine among the memory's word pieces, and the memory's match is the mean
over the query's pieces. One sentence vector blurs a turn into its topic; token vectors keep
"sunset" and "painted" apart, and they still match "kids" to "children" where keywords cannot.
A memory's conversational neighbours lend their pieces at a discount (NEAR, FAR): a turn that
names its subject only in the turn before it still matches. Punctuation is dropped on both sides,
stopwords on the query side.

The token vectors of every memory text are computed when the text is embedded and kept in the
embedding cache (float16, about 23 KB for a 30-piece turn). On LoCoMo's development set the
match alone ranks better than BM25, cosine, or their hybrid (benchmarks/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from compiler.embed import Embedder, EmbeddingCache, text_hash
from compiler.fts import STOPWORDS

NEAR, FAR = 0.8, 0.7  # how much a neighbour one / two places away counts against the memory itself
BATCH = 128

_WORDISH = re.compile(r"^(##)?\w", re.UNICODE)


def supports(embedder: Embedder) -> bool:
    """Whether the model exposes token vectors (the bundled one does; a C engine may not)."""
    return callable(getattr(embedder, "embed_tokens", None))


def word_vectors(pieces: Sequence[str], vectors: np.ndarray, *, query: bool = False) -> np.ndarray:
    """Returns the rows of `vectors` that belong to words (and, for a query, not to stopwords)."""
    words = [k for k, piece in enumerate(pieces) if _WORDISH.match(piece)]
    if query:
        words = [k for k in words if pieces[k] not in STOPWORDS] or words
    return vectors[words]


def query_matrix(embedder: Embedder, query: str) -> np.ndarray:
    pieces, vectors, _ = embedder.embed_tokens([query])[0]
    return word_vectors(pieces, vectors, query=True)


def cache_token_vectors(texts: Iterable[str], tokens: EmbeddingCache, vectors: EmbeddingCache,
                        embedder: Callable[[], Embedder], identity: str) -> int:
    """Computes and caches the token vectors of the `texts` not cached yet, and their sentence
    vectors from the same forward pass; returns how many texts that was (0 if the model has no
    token vectors). The model is only loaded (through `embedder`) when some text is missing."""
    by_hash = {text_hash(t): t for t in texts}
    # Similar lengths batch together (less padding); the hash breaks ties.
    missing = sorted(set(by_hash) - tokens.known(identity, list(by_hash)), key=lambda h: (len(by_hash[h]), h))
    if not missing or not supports(model := embedder()):
        return 0
    for start in range(0, len(missing), BATCH):
        batch = missing[start:start + BATCH]
        embedded = model.embed_tokens([by_hash[h] for h in batch])
        tokens.put_many(identity, {h: word_vectors(p, t) for h, (p, t, _) in zip(batch, embedded)})
        vectors.put_many(identity, {h: v for h, (_, _, v) in zip(batch, embedded)})
    return len(missing)


def token_matrices(texts: Mapping[str, str], tokens: EmbeddingCache, vectors: EmbeddingCache,
                   embedder: Callable[[], Embedder], identity: str, dimension: int) -> dict[str, np.ndarray]:
    """Returns {key: word-vector matrix (float32, `dimension` columns)} for {key: text}, computing
    the missing ones first."""
    cache_token_vectors(texts.values(), tokens, vectors, embedder, identity)
    hashes = {key: text_hash(text) for key, text in texts.items()}
    found = tokens.get_many(identity, list(hashes.values()))
    return {key: found[h].reshape(-1, dimension).astype(np.float32) for key, h in hashes.items() if h in found}


def match(query: np.ndarray, own: np.ndarray, near: Sequence[np.ndarray] = (),
          far: Sequence[np.ndarray] = ()) -> float:
    """Returns the mean, over the query's word vectors, of the best cosine in the memory (or, at
    NEAR / FAR weight, in its neighbours)."""
    best = _best(query, own)
    for weight, group in ((NEAR, near), (FAR, far)):
        for matrix in group:
            best = np.maximum(best, weight * _best(query, matrix))
    return float(best.mean()) if len(best) else 0.0


def _best(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    if not len(matrix):
        return np.zeros(len(query), dtype=np.float32)
    return (query @ matrix.T).max(axis=1)
