"""Shared fixtures: a vault factory and a small deterministic embedder for unit tests.

Integration tests (marked `integration`) use the real bundled model and a real Chroma store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from compiler.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_VAULT = ROOT / "vault-example"


class FakeEmbedder:
    """Bag of hashed words in 64 dimensions: texts sharing words get similar vectors."""

    identity = "fake-hash-64"
    dimension = 64

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in re.findall(r"\w+", text.lower()):
                row[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norm = np.linalg.norm(row)
            row /= norm if norm else 1.0
        return rows


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def make_vault(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """Returns a factory writing {relative path: text or bytes} into a fresh vault folder."""

    def make(files: dict[str, str | bytes]) -> Path:
        vault = tmp_path / "vault"
        vault.mkdir(exist_ok=True)
        for relative, content in files.items():
            path = vault / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return vault

    return make


@pytest.fixture
def settings() -> Settings:
    return Settings()
