"""The optimized copy of the exported model (compiler.embed.onnx_optimized): the exported file's
vectors to the bit, made once, checked by its record, rebuilt when a file is damaged or missing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from compiler.core.settings import BUNDLED_MODEL
from compiler.embed import onnx_optimized
from compiler.embed.minilm import bundled_model_dir, minilm_identity
from compiler.embed.onnx_export import cached_onnx, file_sha256, recorded_sha256
from compiler.embed.onnx_minilm import OnnxEmbedder
from compiler.embed.onnx_optimized import (
    GRAPH,
    RECORD,
    WEIGHTS,
    optimized_folder,
    optimized_model,
)
from tests.embed.test_onnx_minilm import TEXTS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the exported model and its record (same mtime: trusted without a hash)."""
    source = OnnxEmbedder.load(BUNDLED_MODEL) and cached_onnx(minilm_identity(BUNDLED_MODEL))
    assert source is not None
    folder = tmp_path_factory.mktemp("models") / "model"
    folder.mkdir()
    for name in ("model.onnx", "model.json"):
        shutil.copy2(source.with_name(name), folder / name)
    return folder / "model.onnx"


def flip_byte(path: Path, offset: int) -> None:
    """One byte changed, same size, the old mtime put back: damage the stamps cannot see."""
    stat = path.stat()
    with path.open("r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_the_optimized_copy_gives_the_exported_files_vectors_to_the_bit(exported: Path) -> None:
    embedder = OnnxEmbedder(exported, bundled_model_dir(), "test")  # makes the copy on first use
    folder = optimized_folder(exported)
    record = json.loads((folder / RECORD).read_text())
    assert record["max_difference"] == 0.0 and record["source_sha256"] == recorded_sha256(exported)
    assert {name: file_sha256(folder / name) for name in (GRAPH, WEIGHTS)} == \
        {name: record["files"][name]["sha256"] for name in (GRAPH, WEIGHTS)}
    assert (folder / GRAPH).stat().st_size < 1_000_000  # the weights live in weights.bin, mapped, not parsed
    plain = OnnxEmbedder(exported, bundled_model_dir(), "test")
    plain._session = onnxruntime.InferenceSession(str(exported), providers=["CPUExecutionProvider"])  # as before
    assert np.array_equal(embedder.embed(TEXTS), plain.embed(TEXTS))
    for (pieces, tokens, sentence), (their_pieces, their_tokens, their_sentence) in zip(
            embedder.embed_tokens(TEXTS), plain.embed_tokens(TEXTS)):
        assert pieces == their_pieces and np.array_equal(tokens, their_tokens)
        assert np.array_equal(sentence, their_sentence)


def test_the_copy_keeps_the_packed_weights_and_is_made_again_for_another_cpu(exported: Path) -> None:
    sha = recorded_sha256(exported)
    graph = optimized_model(exported, sha)
    assert graph is not None
    weights = graph.with_name(WEIGHTS)
    # The MatMul weights as the CPU kernels pack them, beside the originals: more bytes than the export holds.
    assert weights.stat().st_size > exported.stat().st_size
    record_file = graph.with_name(RECORD)
    record = json.loads(record_file.read_text())
    assert record["cpu"] == onnx_optimized.cpu_signature()
    inode = weights.stat().st_ino
    record_file.write_text(json.dumps({**record, "cpu": "another-machine"}))  # a cache shared with another CPU
    assert optimized_model(exported, sha) == graph
    assert weights.stat().st_ino != inode  # made again, on this CPU, and checked against the export again
    assert json.loads(record_file.read_text())["cpu"] == onnx_optimized.cpu_signature()


def test_a_copy_with_new_mtimes_is_hashed_and_kept(exported: Path) -> None:
    sha = recorded_sha256(exported)
    graph = optimized_model(exported, sha)
    assert graph is not None
    weights = graph.with_name(WEIGHTS)
    inode = weights.stat().st_ino
    os.utime(weights, ns=(1, 1))  # as `cp -r` leaves it: same bytes, another mtime
    assert optimized_model(exported, sha) == graph
    assert weights.stat().st_ino == inode  # not rebuilt
    assert json.loads(graph.with_name(RECORD).read_text())["files"][WEIGHTS]["mtime_ns"] == 1


@pytest.mark.parametrize("damage", ["flipped", "truncated", "missing", "no record"])
def test_a_damaged_weights_file_is_rebuilt(exported: Path, damage: str) -> None:
    sha = recorded_sha256(exported)
    graph = optimized_model(exported, sha)
    assert graph is not None
    weights, good = graph.with_name(WEIGHTS), file_sha256(graph.with_name(WEIGHTS))
    if damage == "flipped":
        flip_byte(weights, 5000)
        os.utime(weights, ns=(2, 2))  # a changed stamp: hashed again, the hash differs
    elif damage == "truncated":
        with weights.open("r+b") as handle:
            handle.truncate(1000)
    elif damage == "missing":
        weights.unlink()
    else:
        graph.with_name(RECORD).unlink()
    assert optimized_model(exported, sha) == graph
    assert file_sha256(weights) == good
    assert not list(exported.parent.glob(".optimized-*"))  # no temporary folder left behind


def test_a_copy_of_another_source_is_rebuilt(exported: Path) -> None:
    graph = optimized_model(exported, recorded_sha256(exported))
    assert graph is not None
    record = json.loads(graph.with_name(RECORD).read_text())
    graph.with_name(RECORD).write_text(json.dumps({**record, "source_sha256": "0" * 64}))
    assert optimized_model(exported, recorded_sha256(exported)) == graph
    assert json.loads(graph.with_name(RECORD).read_text())["source_sha256"] == recorded_sha256(exported)


def test_a_graph_damaged_behind_its_stamps_falls_back_to_the_exported_file(exported: Path) -> None:
    graph = optimized_model(exported, recorded_sha256(exported))
    assert graph is not None
    expected = OnnxEmbedder(exported, bundled_model_dir(), "test").embed(TEXTS[:3])
    stat = graph.stat()
    graph.write_bytes(b"\0" * stat.st_size)  # not a graph any more; size and mtime as recorded
    os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert optimized_model(exported, recorded_sha256(exported)) == graph  # the stamps still match
    assert np.array_equal(OnnxEmbedder(exported, bundled_model_dir(), "test").embed(TEXTS[:3]), expected)
    graph.with_name(RECORD).unlink()  # the next tests start from a sound copy
    assert optimized_model(exported, recorded_sha256(exported)) == graph


def test_a_copy_that_differs_is_recorded_unusable_and_not_rebuilt(exported: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = optimized_folder(exported)
    shutil.rmtree(folder)
    monkeypatch.setattr(onnx_optimized, "MAX_DIFFERENCE", -1.0)  # any difference, even none, is too much
    assert optimized_model(exported, recorded_sha256(exported)) is None
    record = json.loads((folder / RECORD).read_text())
    assert record["unusable"] and not (folder / WEIGHTS).exists()
    monkeypatch.setattr(onnx_optimized, "_build", lambda *a: pytest.fail("rebuilt on every start"))
    assert optimized_model(exported, recorded_sha256(exported)) is None
    embedder = OnnxEmbedder(exported, bundled_model_dir(), "test")  # the exported file, as before
    assert embedder.embed(["a"]).shape == (1, 384)
