"""The bundled model (all-MiniLM-L6-v2) on ONNX Runtime: the default inference path, without torch.

The same vectors as sentence-transformers (compiler.embed.minilm) gives — the same tokenizer
files, the same 256-piece truncation, mean pooling over the real pieces, L2 — within cosine
0.9999 (tests/embed/test_onnx_minilm.py), and the same model identity, so an index built by
either path stays valid. A process that embeds imports onnxruntime, tokenizers and numpy: about a
quarter of a second against several for torch. The ONNX file comes from compiler.embed.onnx_export;
the session loads the optimized copy compiler.embed.onnx_optimized saves next to it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.errors import ModelLoadError
from compiler.embed.onnx_export import INPUTS, cached_onnx, ensure_onnx, recorded_sha256
from compiler.embed.onnx_optimized import optimized_model

BATCH_SIZE = 32
# A batch ends where the next text is this much longer than the batch's first: every text is padded
# to its batch's longest, so cutting where the length jumps pads far less than fixed batches of
# BATCH_SIZE (benchmarks/README.md has the figures). A text's vectors do not depend on its batch,
# bit for bit (its padding is masked out).
PAD_SLACK = 0.05

log = logging.getLogger("engram.model")


class OnnxEmbedder:
    """Sentence vectors (`embed`) and token vectors (`embed_tokens`) of the bundled model."""

    dimension = 384

    def __init__(self, onnx_file: Path, model_dir: Path, identity: str) -> None:
        try:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            # Idle threads sleep instead of spinning: on a busy 2-core machine spinning workers took
            # the cores from the work (the reason compiler.embed.minilm runs short queries on one thread).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            # The session is made on a thread of its own while this one reads the tokenizer: ONNX
            # Runtime lets go of the GIL while it creates a session (~0.07 s), the tokenizer's
            # loading (~0.04 s) does not, so the two overlap and a cold model command answers sooner.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-session") as pool:
                session = pool.submit(_session, onnxruntime, onnx_file, options)
                self._tokenizer = bert_tokenizer(model_dir)
                self._session = session.result()
        except Exception as error:  # ImportError, onnxruntime's own errors, a corrupt tokenizer file
            raise ModelLoadError(f"cannot load the ONNX model {onnx_file}: {error}") from error
        max_length = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"]
        # tokenizer.json pads and truncates to 128; sentence-transformers truncates at the model's
        # max_seq_length (256) and pads to the longest text of a batch: _batches pads, after sorting.
        self._tokenizer.enable_truncation(int(max_length))
        self._tokenizer.no_padding()
        self._pad = self._tokenizer.token_to_id("[PAD]")
        self.identity = identity

    @classmethod
    def load(cls, model: str) -> OnnxEmbedder:
        """Returns the embedder of the bundled `model`, exporting its ONNX file on first use."""
        from compiler.embed.minilm import bundled_model_dir, minilm_identity

        identity, model_dir = minilm_identity(model), bundled_model_dir()
        onnx_file = cached_onnx(identity) or ensure_onnx(model_dir, identity)
        return cls(onnx_file, model_dir, identity)

    def pieces(self, texts: Sequence[str]) -> list[int]:
        """Returns each text's number of word pieces, [CLS] and [SEP] included (after truncation):
        the length compiler.embed.embedder.batch_order sorts a compile's texts by."""
        return [len(e.ids) for e in self._tokenizer.encode_batch([text.strip() for text in texts])]

    def _batches(self, texts: Sequence[str]) -> Iterator[tuple[list[int], list[Any], np.ndarray, np.ndarray]]:
        """Yields the texts' positions, encodings, attention mask and last hidden state, batch by batch.

        All texts are tokenized in one call, then batched by their number of pieces and padded to
        the longest of each batch. sentence-transformers sorts by characters, which puts a short
        text of long words beside a long one: on the 500 paragraphs of benchmarks/cold.py, batches
        of 32 held 54,816 pieces sorted by characters against 46,144 by pieces (42,496 real).
        A text's vector does not depend on its batch (its padding is masked out)."""
        # sentence-transformers strips each text before tokenizing; so do we (same pieces, same vectors)
        encodings = self._tokenizer.encode_batch([text.strip() for text in texts])
        order = sorted(range(len(texts)), key=lambda k: len(encodings[k].ids))
        for batch in _batched(order, [len(encodings[k].ids) for k in order]):
            width = len(encodings[batch[-1]].ids)
            ids = np.full((len(batch), width), self._pad, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, k in enumerate(batch):
                ids[row, :len(encodings[k].ids)] = encodings[k].ids
                mask[row, :len(encodings[k].ids)] = 1
            inputs = dict(zip(INPUTS, (ids, mask, np.zeros_like(ids))))  # one segment: type 0
            hidden = self._session.run(["last_hidden_state"], inputs)[0]
            yield batch, [encodings[k] for k in batch], mask, hidden

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for batch, _, mask, hidden in self._batches(texts):
            vectors[batch] = _mean_pool(hidden, mask)
        return vectors

    def embed_tokens(self, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
        """Returns, per text, from one forward pass: its word pieces, their contextual vectors
        (L2-normalised; no [CLS]/[SEP] markers) and its sentence vector (the one `embed` returns).
        The input of late interaction (compiler.index.late_interaction)."""
        result: list[Any] = [None] * len(texts)
        for batch, encodings, mask, hidden in self._batches(texts):
            sentences = _mean_pool(hidden, mask)
            for row, k in enumerate(batch):
                real = int(mask[row].sum())
                tokens = hidden[row, 1:real - 1]
                tokens = tokens / np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)
                result[k] = (encodings[row].tokens[1:real - 1], tokens.astype(np.float32), sentences[row])
        return result


def _batched(order: list[int], lengths: list[int]) -> Iterator[list[int]]:
    """Cuts `order` (texts sorted by their `lengths`) into batches of at most BATCH_SIZE texts,
    each ending where the next text is more than PAD_SLACK longer than the batch's first."""
    start = 0
    for end in range(1, len(order) + 1):
        if end == len(order) or end - start == BATCH_SIZE or lengths[end] > lengths[start] * (1 + PAD_SLACK):
            yield order[start:end]
            start = end


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # tokenizer.json's added tokens, all special


def bert_tokenizer(model_dir: Path) -> Any:
    """Returns the bundled model's tokenizer, built from its `vocab.txt` with the parts its
    `tokenizer.json` names (BERT's normalizer, lowercasing, pre-tokenizer, WordPiece, [CLS] $A [SEP]).

    The same pieces as `Tokenizer.from_file("tokenizer.json")` (tests/embed/test_onnx_minilm.py
    checks the file's parts and the pieces of ~600 texts) for ~15 ms less CPU: the tokenizers
    library reads that JSON through a generic value tree. It is on a cold model command's path:
    the session is made on another thread meanwhile and is ready first."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    tokenizer = Tokenizer(models.WordPiece.from_file(str(model_dir / "vocab.txt"), unk_token="[UNK]",
                                                     max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=None, lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    tokenizer.add_special_tokens([AddedToken(token, normalized=False, special=True) for token in SPECIAL_TOKENS])
    return tokenizer


def _session(onnxruntime: Any, onnx_file: Path, options: Any) -> Any:
    """Returns a session of the optimized copy with its weights mapped from their own file
    (compiler.embed.onnx_optimized: ~0.07 s CPU to create against ~0.3 s), else of `onnx_file`."""
    try:
        graph = optimized_model(onnx_file, recorded_sha256(onnx_file))
    except (OSError, ValueError, KeyError):  # no record next to the file: nothing to key a copy on
        graph = None
    if graph is not None:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL  # optimized already
        try:
            return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # damaged in a way its stamps do not show: the exported file still works
            log.warning("engram: cannot load %s (%s); loading %s", graph, error, onnx_file)
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the real pieces' vectors, L2-normalised: sentence-transformers' Pooling + Normalize."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)
