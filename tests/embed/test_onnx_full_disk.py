"""A full disk while the optimized model copy is saved (compiler.embed.onnx_optimized): the model
still answers from the exported file, one warning says why it starts slower, no half-made folder
is left behind, and the copy is made on the first load after space is freed.

The probe mounts a real tmpfs just big enough for the exported model (skipped where mounting is
not allowed), so the full disk is the kernel's own ENOSPC, raised wherever ONNX Runtime writes.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from compiler.core.errors import StorageFullError
from compiler.core.settings import BUNDLED_MODEL
from compiler.embed import embedder as embedder_module
from compiler.embed.minilm import bundled_model_dir, minilm_identity
from compiler.embed.onnx_export import cached_onnx, ensure_onnx
from compiler.embed.onnx_minilm import OnnxEmbedder
from compiler.embed.onnx_optimized import GRAPH, optimized_folder
from tests.embed.test_onnx_minilm import TEXTS

pytestmark = pytest.mark.integration

ROOM_MB = 4  # left free beside the exported file: the optimized copy needs ~90 MB more


@pytest.fixture
def exported_on_small_disk(tmp_path: Path) -> Iterator[Path]:
    """The exported model and its record on a tmpfs with ROOM_MB to spare."""
    source = OnnxEmbedder.load(BUNDLED_MODEL) and cached_onnx(minilm_identity(BUNDLED_MODEL))
    assert source is not None
    if shutil.which("mount") is None:
        pytest.skip("no `mount` command here to make a small tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    size_mb = source.stat().st_size // 2**20 + ROOM_MB
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(disk)],
                             check=False, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.decode().strip()}")
    try:
        folder = disk / "model"
        folder.mkdir()
        for name in ("model.onnx", "model.json"):
            shutil.copy2(source.with_name(name), folder / name)
        yield folder / "model.onnx"
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_falls_back_to_the_exported_file_and_the_copy_is_made_once_space_is_freed(
        exported_on_small_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    exported = exported_on_small_disk
    expected = OnnxEmbedder.load(BUNDLED_MODEL).embed(TEXTS)

    with caplog.at_level(logging.WARNING, logger="engram.model"):
        full = OnnxEmbedder(exported, bundled_model_dir(), "test")
        vectors = full.embed(TEXTS)

    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert not optimized_folder(exported).exists()
    assert list(exported.parent.glob(".optimized-*")) == [], "a half-made copy was left on the full disk"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(exported.parent) in warnings[0], warnings
    assert "the disk is full" in warnings[0] and "free on that filesystem" in warnings[0], warnings
    assert "\n" not in warnings[0], "ONNX Runtime's multi-line error reached the user"


    disk = exported.parent.parent
    subprocess.run(["mount", "-o", "remount,size=400m", str(disk)], check=True)
    OnnxEmbedder(exported, bundled_model_dir(), "test").embed(TEXTS[:1])
    assert (optimized_folder(exported) / GRAPH).is_file()


def test_a_full_disk_during_the_export_is_one_storage_full_error_naming_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    if shutil.which("mount") is None:
        pytest.skip("no `mount` command here to make a small tmpfs")
    disk = tmp_path / "cache"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)],
                             check=False, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.decode().strip()}")
    expected = OnnxEmbedder.load(BUNDLED_MODEL).embed(TEXTS[:2])  # from the real cache, before it moves
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(disk))
    try:
        with pytest.raises(StorageFullError) as raised:
            ensure_onnx(bundled_model_dir(), minilm_identity(BUNDLED_MODEL))
        message = str(raised.value)
        assert "the disk is full" in message and str(disk) in message and "\n" not in message, message
        assert list(disk.rglob("*.onnx")) == [], "a half-written model was left in the cache"

        monkeypatch.setattr(embedder_module, "_LOADED", {})
        with caplog.at_level(logging.WARNING, logger="engram"):
            fallback = embedder_module.load_embedder(BUNDLED_MODEL)
        assert type(fallback).__name__ == "SentenceTransformerEmbedder"  # the command still answers
        np.testing.assert_allclose(fallback.embed(TEXTS[:2]), expected, atol=1e-4)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("the disk is full" in w and "sentence-transformers instead" in w for w in warnings), warnings
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
