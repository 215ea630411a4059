"""The ONNX file of the bundled model: exported once from its weights, cached, checked by a hash.

A process that finds the file never imports torch (compiler.embed.onnx_minilm runs it on ONNX
Runtime). The first process that needs it exports it with `torch.onnx.export` (the TorchScript
exporter, opset 17, eager attention, dynamic batch and sequence axes, output `last_hidden_state`),
fuses it with ONNX Runtime's BERT optimizer (onnxruntime.transformers), checks the fused graph
against torch on a few probe texts, and moves it into place atomically under a lock, so two
processes never race and a killed export leaves no half file.

Where: `$ENGRAM_MODEL_CACHE`, else `$XDG_CACHE_HOME/engram/models`, else `~/.cache/engram/models`,
one folder per model identity and export recipe. Next to `model.onnx`, `model.json` records its
SHA-256, size and mtime: a load whose file still has that size and mtime trusts it (hashing 90 MB
costs more than the rest of a cold query); a file that changed is hashed again, and re-exported
when the hash differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from compiler.core.errors import ModelLoadError, StorageFullError
from compiler.core.space import free_bytes, is_disk_full

RECIPE = "onnx-opset17-eager-bert-fused-v2"  # a new name when the export changes: files of the old recipe are never read
OPSET = 17
NEEDED = 100 * 2**20  # about what an export writes (the bundled model's file is 90 MB)
TRACE = ("Kids painted a sunset by the lake.",) * 2  # the trace's example inputs: no padding (see _export)
PROBES = ("a", "The payments service deploys from main after review; roll back with the previous tag.",
          "Ünïcödé café", "Kids painted a sunset.")  # other shapes the export must reproduce before it is trusted
MIN_COSINE = 0.9999
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_root() -> Path:
    """Returns the folder that holds exported models (see the module docstring)."""
    if os.environ.get("ENGRAM_MODEL_CACHE"):
        return Path(os.environ["ENGRAM_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "engram" / "models"


def model_folder(identity: str) -> Path:
    """Returns the folder of one model identity's export (a name safe on every filesystem)."""
    return cache_root() / re.sub(r"[^A-Za-z0-9._@-]+", "-", f"{identity}-{RECIPE}")


def cached_onnx(identity: str) -> Path | None:
    """Returns the exported file of `identity` when it is present and sound, else None. Never imports torch."""
    folder = model_folder(identity)
    onnx, record = folder / "model.onnx", folder / "model.json"
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    checked = restamped(onnx, recorded)
    if checked is None:
        return None
    if checked is not recorded:
        write_record(record, checked)
    return onnx


def restamped(path: Path, recorded: dict[str, Any]) -> dict[str, Any] | None:
    """Returns the record (size, mtime_ns, sha256) of `path` when the file is the one it records,
    else None (missing, or other bytes). A matching stat is trusted; a moved one (the file copied
    or touched) is hashed, and a new record with the new stamp comes back for the caller to save."""
    try:
        stat = path.stat()
    except OSError:
        return None
    if (recorded.get("size"), recorded.get("mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
        return recorded
    if recorded.get("size") != stat.st_size or recorded.get("sha256") != file_sha256(path):
        return None
    return {**recorded, "mtime_ns": stat.st_mtime_ns}


def recorded_sha256(onnx: Path) -> str:
    """Returns the SHA-256 that `model.json` records for the exported file `onnx` (after
    `cached_onnx` or `ensure_onnx` returned it, the record matches the file)."""
    return str(json.loads((onnx.with_name("model.json")).read_text(encoding="utf-8"))["sha256"])


def ensure_onnx(model_dir: Path, identity: str) -> Path:
    """Returns the exported ONNX file of the model in `model_dir`, exporting it first when needed.

    Raises ModelLoadError when it cannot be made (no torch or onnx package, a cache folder that
    cannot be written, an export that does not reproduce torch's vectors)."""
    found = cached_onnx(identity)
    if found:
        return found
    import filelock  # here, not at the top: a process that finds the file never needs it (~0.015 s)

    folder = model_folder(identity)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(folder / "export.lock"), timeout=900):
            found = cached_onnx(identity)  # another process may have exported it while we waited
            if found:
                return found
            return _export(model_dir, identity, folder)
    except filelock.Timeout as error:
        raise ModelLoadError(f"{folder}: another process has been exporting the model for 15 minutes") from error
    except StorageFullError:
        raise
    except OSError as error:
        if is_disk_full(error):  # the lock or the folder found no room
            raise StorageFullError(folder, "the ONNX model", needed=NEEDED) from error
        raise ModelLoadError(f"cannot write the ONNX model to {folder}: {error} "
                             "(set ENGRAM_MODEL_CACHE to a writable folder)") from error


def _export(model_dir: Path, identity: str, folder: Path) -> Path:
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as error:
        raise ModelLoadError(f"exporting the model to ONNX needs torch and transformers: {error}") from error

    # Eager attention, not SDPA: its MatMul/Softmax graph is the one ONNX Runtime's BERT fusion
    # recognises (_fuse); SDPA exports an IsNaN/Where mask that no fusion matches.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    class Hidden(torch.nn.Module):  # one tensor out, named below: what ONNX Runtime returns
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    sample = tokenizer(list(TRACE), padding=True, return_tensors="pt")
    probes = tokenizer(list(PROBES), padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in (*INPUTS, "last_hidden_state")}
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".model-", suffix=".onnx")
    os.close(handle)
    try:
        with torch.no_grad():
            # torch's answer first: after a trace, this model in this process answered padded batches wrongly
            expected = Hidden()(*(probes[name] for name in INPUTS)).numpy()
            torch.onnx.export(Hidden(), tuple(sample[name] for name in INPUTS), temporary, dynamo=False,
                              opset_version=OPSET, input_names=list(INPUTS), output_names=["last_hidden_state"],
                              dynamic_axes=axes)
        _fuse(Path(temporary), model.config)
        _check(Path(temporary), {name: probes[name].numpy() for name in INPUTS}, expected)
        onnx = folder / "model.onnx"
        os.chmod(temporary, 0o644)  # mkstemp made it private; it is a derived copy of public weights
        os.replace(temporary, onnx)
    except ModelLoadError:
        raise
    except Exception as error:  # the exporter raises many kinds; all mean "no ONNX file"
        free = free_bytes(folder)
        if is_disk_full(error) or (free is not None and free < NEEDED):  # torch words a full disk its own way
            raise StorageFullError(folder, "the ONNX model", needed=NEEDED,
                                   after="it is exported again on the next command that needs it") from error
        raise ModelLoadError(f"cannot export {identity} to ONNX: {error}") from error
    finally:
        Path(temporary).unlink(missing_ok=True)
    stat = onnx.stat()
    write_record(folder / "model.json", {"identity": identity, "recipe": RECIPE, "opset": OPSET,
                                          "torch": torch.__version__, "sha256": file_sha256(onnx),
                                          "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    return onnx


def _fuse(onnx: Path, config: Any) -> None:
    """Rewrites the exported graph with ONNX Runtime's BERT fusions (onnxruntime.transformers): each
    layer's attention one Attention node (Q, K and V one product), the embeddings and each residual
    + LayerNorm one node, Gelu with its bias: 46 nodes for ~300. ONNX Runtime's own graph levels
    (onnx_optimized) fuse only Gelu and the scaled Q·K product. On cold.py's paragraphs ~5% less CPU
    per batch and far fewer per-node thread wake-ups; the vectors stay torch's (_check follows)."""
    from onnxruntime.transformers import optimizer

    fused = optimizer.optimize_model(str(onnx), model_type="bert", num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size, opt_level=0)
    fused.save_model_to_file(str(onnx))


def _check(onnx: Path, inputs: dict[str, Any], expected: Any) -> None:
    """Raises ModelLoadError unless the exported graph's token vectors match torch's (cosine)."""
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    got = session.run(["last_hidden_state"], inputs)[0]
    real = inputs["attention_mask"].astype(bool)
    a, b = got[real], expected[real]
    cosine = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    if float(cosine.min()) < MIN_COSINE:
        raise ModelLoadError(f"the ONNX export does not reproduce torch (cosine {float(cosine.min()):.6f})")


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Writes a JSON record by renaming a finished file over it (a reader sees the old or the new)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
