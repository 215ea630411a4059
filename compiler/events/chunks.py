"""Chunks: the engram CLI's git-sync files, written the way its Go encoder writes them, and read back.

A chunk is `.engram/chunks/<id>.jsonl.gz`: gzip of ONE compact JSON object
`{"sessions":[...],"observations":[...],"prompts":[...]}` (plus `"mutations"` when there are
any), and its id is the first 8 hex digits of the sha256 of the uncompressed JSON.

What the Go CLI does (internal/sync in the engram repository) and we copy:
- `json.Marshal` of its structs: keys in struct order, not sorted; empty lists are `null`;
  `<`, `>`, `&`, U+2028 and U+2029 escaped as `\\u003c`...; optional fields left out when unset.
- `gzip.NewWriter`: header with mtime 0, no file name, OS byte 255, level 6.
  The deflate bytes themselves come from zlib here and from Go's compress/flate there, so the
  `.gz` files differ even where the JSON (and so the id) is identical.

Our own events ride in one extra top-level key, `engram_vault` (the Go reader ignores unknown
keys), so our chunks replay exactly while the engram CLI reads the observations.

Reading accepts that object (with `null` lists) and the older variant with one observation
per line. Nothing here trusts its input: the uncompressed size is capped (gzip bombs), a
truncated gzip or non-JSON chunk is a `CorruptDataError`, and a bad record is a `problem`, not a crash.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.core.errors import CorruptDataError
from compiler.core.files import atomic_write, contained
from compiler.core.json_input import load_json

CHUNKS_DIR = "chunks"
SUFFIX = ".jsonl.gz"
EXTENSION = "engram_vault"  # our extra top-level key; the Go reader ignores it
EXTENSION_VERSION = 1
MAX_UNCOMPRESSED = 64 * 1024 * 1024  # a chunk inflating past this is treated as a gzip bomb
CHUNK_KEYS = ("sessions", "observations", "prompts", "mutations")
# magic, deflate, no flags, mtime 0, no extra flags, OS 255: the header Go's gzip.NewWriter writes
GZIP_HEADER = bytes((0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF))
_NAME = re.compile(r"^[0-9a-f]{8}$")
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPED = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def go_json(value: Any, indent: int | None = None) -> str:
    """Returns `value` as Go's encoding/json writes it (compact, or MarshalIndent with `indent` spaces).

    Key order is the dict's order: build dicts in the Go struct's field order.
    """
    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(value, ensure_ascii=False, separators=separators, indent=indent, allow_nan=False)
    # Go escapes HTML-significant characters and line separators; invalid UTF-16 becomes U+FFFD.
    return _GO_ESCAPED.sub(lambda m: _GO_ESCAPES.get(m.group(), "\\ufffd"), text)


def chunk_id(data: bytes) -> str:
    """Returns the chunk id: the first 8 hex digits of the sha256 of the uncompressed JSON."""
    return hashlib.sha256(data).hexdigest()[:8]


def is_chunk_name(name: str) -> bool:
    """True for `<8 lower-case hex>.jsonl.gz`."""
    return name.endswith(SUFFIX) and bool(_NAME.match(name[: -len(SUFFIX)]))


def chunk_path(engram_dir: Path, cid: str) -> Path:
    if not _NAME.match(cid):
        raise ValueError(f"not a chunk id: {cid!r}")
    return engram_dir / CHUNKS_DIR / f"{cid}{SUFFIX}"


def encode_chunk(sessions: Sequence[Mapping[str, Any]], observations: Sequence[Mapping[str, Any]],
                 events: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """Returns the uncompressed chunk JSON: Go's ChunkData encoding, then our `engram_vault` key."""
    document: dict[str, Any] = {"sessions": list(sessions) or None, "observations": list(observations) or None,
                                "prompts": None}
    if events:
        # Our own key, after Go's fields; its inner keys are sorted (it is ours, not Go's).
        document[EXTENSION] = {"events": [_finite(e) for e in events], "version": EXTENSION_VERSION}
    return go_json(document).encode("utf-8")


def _finite(value: Any) -> Any:
    """Returns `value` with NaN and infinities replaced by null (JSON has no spelling for them); keys sorted."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def compress(data: bytes) -> bytes:
    """Returns the gzip bytes of a chunk: mtime 0, level 6 (Go's default), no file name, OS 255.

    Built by hand: Python's gzip module (through zlib) writes OS 3 where Go writes 255 (unknown).
    """
    deflater = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return GZIP_HEADER + body + trailer


def write_chunk(engram_dir: Path, data: bytes) -> str:
    """Writes the chunk for uncompressed `data` (atomically, unless it already exists); returns its id."""
    cid = chunk_id(data)
    path = chunk_path(engram_dir, cid)
    contained(engram_dir.parent, path)  # a committed `.engram/chunks` symlink must not take the export out
    if not path.is_file():
        atomic_write(path, compress(data))
    return cid


def gunzip_capped(raw: bytes, cap: int = MAX_UNCOMPRESSED) -> bytes:
    """Returns the uncompressed bytes of a gzip stream (several members allowed, as Go reads them).

    Raises CorruptDataError when it is not gzip, is truncated or corrupt, or inflates past `cap` bytes.
    """
    if raw[:2] != b"\x1f\x8b":
        raise CorruptDataError("not a gzip file")
    out = bytearray()
    rest = raw
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, cap + 1 - len(out))
        except zlib.error as error:
            raise CorruptDataError(f"corrupt gzip: {error}") from None
        if len(out) > cap or inflater.unconsumed_tail:
            raise CorruptDataError(f"inflates past {cap // (1024 * 1024)} MB (gzip bomb?)")
        if not inflater.eof:
            raise CorruptDataError("truncated gzip (the file ends mid-stream)")
        rest = inflater.unused_data.lstrip(b"\x00")
    return bytes(out)


@dataclass
class ChunkContent:
    """What a chunk holds, as raw records to check one by one. `where` names a record for messages."""

    sessions: list[tuple[str, Any]] = field(default_factory=list)
    observations: list[tuple[str, Any]] = field(default_factory=list)
    mutations: list[tuple[str, Any]] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)
    prompts: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)  # (where, what is wrong)
    variant: str = "object"  # or "lines": one record per line


def parse_chunk(data: bytes) -> ChunkContent:
    """Returns the records of an uncompressed chunk, either variant. Raises CorruptDataError if it is not JSON at all."""
    # Go's decoder replaces invalid UTF-8 with U+FFFD; so do we.
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    try:
        whole = load_json(text)
    except ValueError:
        whole = None  # maybe the one-record-per-line variant; a bad line is that line's problem
    if isinstance(whole, dict) and any(key in whole for key in (*CHUNK_KEYS, EXTENSION)):
        content = ChunkContent()
        _take_object(whole, content, "")
        return content
    if whole is not None and not isinstance(whole, dict):
        raise CorruptDataError(f"the chunk is JSON but a {type(whole).__name__}, not an object")
    return _parse_lines(text)


def _take_object(document: dict[str, Any], content: ChunkContent, prefix: str) -> None:
    for key in CHUNK_KEYS:
        value = document.get(key)
        if value is None:
            continue  # `null` lists: Go writes them for empty slices
        if not isinstance(value, list):
            content.problems.append((f"{prefix}{key}", f"is a {type(value).__name__}, not a list"))
            continue
        if key == "prompts":
            content.prompts += len(value)  # prompts are not memories: counted, not imported
            continue
        target = {"sessions": content.sessions, "observations": content.observations,
                  "mutations": content.mutations}[key]
        target.extend((f"{prefix}{key}[{i}]", item) for i, item in enumerate(value))
    extension = document.get(EXTENSION)
    if extension is None:
        return
    events = extension.get("events") if isinstance(extension, dict) else None
    if not isinstance(events, list):
        content.problems.append((f"{prefix}{EXTENSION}", "has no list of events"))
        return
    content.events.extend((f"{prefix}{EXTENSION}.events[{i}]", e) for i, e in enumerate(events))


def _parse_lines(text: str) -> ChunkContent:
    """The older variant: one JSON record per line (observations, and possibly sessions)."""
    content = ChunkContent(variant="lines")
    parsed = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = load_json(line)
        except ValueError as error:
            content.problems.append((where, f"not JSON ({getattr(error, 'msg', error)})"))
            continue
        parsed += 1
        if not isinstance(record, dict):
            content.problems.append((where, f"is a {type(record).__name__}, not an object"))
        elif any(key in record for key in (*CHUNK_KEYS, EXTENSION)):
            _take_object(record, content, f"{where}: ")
        elif "sync_id" in record or ("title" in record and "content" in record):
            content.observations.append((where, record))
        elif "id" in record and ("directory" in record or "started_at" in record):
            content.sessions.append((where, record))
        else:
            content.problems.append((where, "neither an observation nor a session"))
    if not parsed:
        if not text.strip():
            raise CorruptDataError("empty chunk")
        # name the reason when it is one: "not JSON (nested deeper than 100 levels)" says what a peer sent
        reasons = {why for _, why in content.problems}
        raise CorruptDataError(reasons.pop() if len(reasons) == 1 else "not JSON: no line parses")
    return content


def read_chunk_file(path: Path, cap: int = MAX_UNCOMPRESSED) -> tuple[str, ChunkContent]:
    """Returns (id of the content, records) of a chunk file; raises CorruptDataError or OSError."""
    if path.is_symlink():
        raise CorruptDataError("is a symbolic link: chunks must be plain files")
    if path.stat().st_size > cap:
        raise CorruptDataError(f"the compressed file is over {cap // (1024 * 1024)} MB")
    data = gunzip_capped(path.read_bytes(), cap)
    return chunk_id(data), parse_chunk(data)
