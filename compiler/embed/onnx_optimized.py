"""The exported model as ONNX Runtime optimizes it, saved once with its weights in a file of their own.

Creating a session from the exported `model.onnx` (its 90 MB of weights inside the protobuf) cost
~0.3 s CPU of every cold query: parsing the protobuf, copying every weight out of it, then the
graph optimizations. So the first process that loads the model saves ONNX Runtime's own optimized
graph, its weights in `weights.bin` beside it (`session.optimized_model_external_initializers_*`),
and later processes load that with ORT_DISABLE_ALL: ONNX Runtime maps the weights file instead of
copying it, ~0.07 s CPU and ~80 MB less peak RSS (measured on this model, benchmarks/cold.py). The
weights are also saved as the CPU kernels repack them (`session.save_external_prepacked_constant_initializers`),
so a session maps its packed MatMul weights too instead of packing them again (~0.03 s CPU less).

The saved graph is optimized at ORT_ENABLE_EXTENDED (the fusions), not ORT_ENABLE_ALL: the layout
changes ALL adds are specific to the CPU that made them, and ONNX Runtime warns against saving
them. Before the files are trusted, their vectors are checked against a session of `model.onnx`
as it was loaded before (ORT_ENABLE_ALL) on probe texts: the same numbers to MAX_DIFFERENCE (0.0
measured), so an index built by either stays valid. A build that fails that check is recorded as
unusable (record.json) and the exported file is used, without rebuilding on every start.

Where: next to `model.onnx`, a folder per ONNX Runtime version (`optimized-ort1.32.0-packed/`) with
`model.onnx`, `weights.bin` and `record.json`: the source's SHA-256 (from onnx_export's record),
the CPU it was made on (packed weights follow the CPU's kernels), and each file's SHA-256, size and mtime. As in onnx_export, a file with its recorded size and mtime
is trusted (hashing 90 MB costs more than the load it saves); a changed stamp is hashed again; a
mismatch, a missing file or another source rebuilds the folder: made in a temporary folder, renamed
into place under the export lock, so a reader never sees half a folder and two processes never race.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from compiler.core.space import free_bytes, is_disk_full, size_text
from compiler.embed.onnx_export import (
    INPUTS,
    PROBES,
    file_sha256,
    restamped,
    write_record,
)

RECIPE = "ort-extended-external-prepacked-v1"  # a new name when the recipe changes: folders of the old one are rebuilt
GRAPH, WEIGHTS, RECORD = "model.onnx", "weights.bin", "record.json"
MAX_DIFFERENCE = 1e-6  # largest absolute difference in any hidden-state value the saved graph may give
LOCK = "export.lock"  # the lock onnx_export takes: one process at a time writes into a model's folder

log = logging.getLogger("engram.model")


def optimized_folder(onnx_file: Path) -> Path:
    """Returns the folder of `onnx_file`'s optimized copy for the installed ONNX Runtime."""
    import onnxruntime

    # The recipe's folder of its own: an engram of another recipe on the same cache (an older
    # checkout, another install) keeps its copy instead of rebuilding it after every run of this one.
    return onnx_file.parent / f"optimized-ort{onnxruntime.__version__}-packed"


def optimized_model(onnx_file: Path, source_sha256: str) -> Path | None:
    """Returns the optimized graph of `onnx_file` (whose SHA-256 is `source_sha256`), making it
    first when it is missing or does not match its record; None when it cannot be made or failed
    its check: the caller then loads `onnx_file` itself, as before."""
    found = _cached(onnx_file, source_sha256)
    if found is not None:
        return found or None
    import filelock  # here, not at the top: a process that finds the copy never needs it

    try:
        with filelock.FileLock(str(onnx_file.parent / LOCK), timeout=900):
            found = _cached(onnx_file, source_sha256)  # another process may have made it while we waited
            if found is not None:
                return found or None
            return _build(onnx_file, source_sha256)
    except Exception as error:  # a read-only cache, a busy builder, a full disk: the exported file still works
        if isinstance(error, (OSError, filelock.Timeout)) and not is_disk_full(error):
            log.debug("engram: no optimized ONNX model next to %s: %s", onnx_file, error)
        else:  # ONNX Runtime's own errors (it reports a full disk only as a failed write) and ENOSPC
            log.warning("engram: cannot save the optimized ONNX model next to %s (%s); loading the exported "
                        "file (slower to start)", onnx_file, _reason(error, onnx_file))
        return None


def _reason(error: BaseException, onnx_file: Path) -> str:
    """One line on why the copy could not be saved: the full disk when the filesystem has less
    room than the copy needs (about the exported file's size), else the error's first line."""
    free = free_bytes(onnx_file.parent)
    if is_disk_full(error) or (free is not None and free < onnx_file.stat().st_size):
        return f"the disk is full: {size_text(free or 0)} free on that filesystem"
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def cpu_signature() -> str:
    """Returns what names this machine's CPU for the packed weights: its architecture and, on Linux,
    a hash of its feature flags (the kernels ONNX Runtime picks, and so how they pack, follow them)."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            flags = next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    return f"{os.uname().machine}-{hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def _cached(onnx_file: Path, source_sha256: str) -> Path | bool | None:
    """The optimized graph when its folder matches its record; False when the record says this
    source's build is unusable; None when it must be (re)built."""
    folder = optimized_folder(onnx_file)
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if record.get("recipe") != RECIPE or record.get("source_sha256") != source_sha256 or record.get("cpu") != cpu_signature():
        return None  # another CPU (a cache shared between machines): its packed weights may not fit this one's kernels
    if record.get("unusable"):
        return False
    files = record.get("files", {})
    moved = False
    for name in (GRAPH, WEIGHTS):
        recorded = files.get(name, {})
        checked = restamped(folder / name, recorded)
        if checked is None:
            return None
        if checked is not recorded:  # copied or touched, same bytes
            files[name], moved = checked, True
    if moved:
        try:
            write_record(folder / RECORD, {**record, "files": files})
        except OSError:
            pass  # a read-only copy: hashed again next time, still right
    return folder / GRAPH


def _build(onnx_file: Path, source_sha256: str) -> Path | None:
    """Makes the optimized folder (the caller holds the lock); returns its graph, or None when its
    vectors differ from the exported file's (recorded, so later processes do not try again)."""
    import onnxruntime

    folder = optimized_folder(onnx_file)
    for stale in onnx_file.parent.glob(".optimized-*"):  # left by a killed build: we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    temporary = Path(tempfile.mkdtemp(dir=onnx_file.parent, prefix=".optimized-"))
    try:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(temporary / GRAPH)
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        # The weights also as the CPU kernels repack them (MatMul's blocked layout), saved beside the
        # originals: a session then maps them instead of packing ~60 MB anew (session CPU ~0.085 →
        # ~0.055 s, ~9,000 fewer page faults; the same numbers out, which `_difference` checks).
        options.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
        onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        difference = _difference(onnx_file, temporary / GRAPH)
        record: dict[str, Any] = {"recipe": RECIPE, "onnxruntime": onnxruntime.__version__, "cpu": cpu_signature(),
                                  "source_sha256": source_sha256, "max_difference": difference}
        if difference > MAX_DIFFERENCE:
            log.warning("engram: ONNX Runtime's optimized model differs from %s by %g; loading the exported "
                        "file (slower to start)", onnx_file, difference)
            for name in (GRAPH, WEIGHTS):
                (temporary / name).unlink(missing_ok=True)
            record["unusable"] = True
        else:
            record["files"] = {}
            for name in (GRAPH, WEIGHTS):
                _fsync(temporary / name)
                stat = (temporary / name).stat()
                record["files"][name] = {"sha256": file_sha256(temporary / name), "size": stat.st_size,
                                         "mtime_ns": stat.st_mtime_ns}
        write_record(temporary / RECORD, record)
        os.chmod(temporary, 0o755)  # mkdtemp made it private; it is a derived copy of public weights
        _replace_folder(temporary, folder)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return None if record.get("unusable") else folder / GRAPH


def _difference(onnx_file: Path, graph: Path) -> float:
    """The largest absolute difference between the hidden states of the exported file, loaded as
    before (ORT_ENABLE_ALL), and the saved graph, loaded as it will be (ORT_DISABLE_ALL), on PROBES."""
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    from compiler.embed.minilm import bundled_model_dir

    tokenizer = Tokenizer.from_file(str(bundled_model_dir() / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    encodings = tokenizer.encode_batch(list(PROBES))
    inputs = {name: np.array([getattr(e, field) for e in encodings], dtype=np.int64)
              for name, field in zip(INPUTS, ("ids", "attention_mask", "type_ids"))}
    plain = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    saved = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    a, b = (s.run(["last_hidden_state"], inputs)[0] for s in (plain, saved))
    return float(np.max(np.abs(a - b)))


def _replace_folder(new: Path, folder: Path) -> None:
    """Renames `new` to `folder`, moving an old `folder` aside first (a reader that mapped its
    files keeps them: they are deleted only when it closes them)."""
    if folder.exists():
        old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".optimized-old-"))
        os.replace(folder, old / folder.name)
        os.replace(new, folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, folder)


def _fsync(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())
