"""The chunks of a vault: every `.engram/chunks/*.jsonl.gz`, read once per process, checked against the manifest.

`read_chunk_events` is what `memory.snapshot.read_events` adds to the journal. A chunk file is
immutable and named by its content, so a parsed chunk is cached in memory by (path, size,
mtime). Every problem becomes a warning naming the chunk (kind "chunk"): the bad record or
chunk is quarantined, the rest imports. A chunk listed in the manifest but missing, or present
but not listed, is reported, never fatal; an unlisted chunk still imports (its events are real).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from compiler.core.errors import BuildWarning, CorruptDataError
from compiler.events.chunks import (
    CHUNKS_DIR,
    MAX_UNCOMPRESSED,
    SUFFIX,
    is_chunk_name,
    read_chunk_file,
)
from compiler.events.journal import MemoryEvent
from compiler.events.manifest import MANIFEST, read_manifest
from compiler.events.replay import ChunkEvents, chunk_events


@dataclass(frozen=True)
class ChunkRead:
    id: str
    path: str  # vault-relative, for messages
    ok: bool  # False: the whole chunk is quarantined
    replay: ChunkEvents = ChunkEvents()
    error: str = ""

    def warnings(self) -> list[BuildWarning]:
        if not self.ok:
            return [BuildWarning(self.path, 0, f"chunk {self.id} quarantined: {self.error}", "chunk")]
        return [BuildWarning(self.path, _line(where), f"chunk {self.id}: {where} quarantined: {why}", "chunk")
                for where, why in self.replay.quarantined]


@dataclass
class VaultChunks:
    """Every chunk file of a vault, read, and how the files and the manifest agree."""

    chunks: list[ChunkRead] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)  # manifest ids, in manifest order
    missing: list[str] = field(default_factory=list)  # listed, no file
    unlisted: list[str] = field(default_factory=list)  # file, not listed
    warnings: list[BuildWarning] = field(default_factory=list)

    def events(self) -> list[MemoryEvent]:
        return [e for c in self.chunks if c.ok for e in c.replay.events]

    def stated(self) -> set[str]:
        """The sync_ids some chunk already holds an observation record of."""
        return {i for c in self.chunks if c.ok for i in c.replay.stated}

    def event_ids(self) -> set[str]:
        return {e.id for e in self.events()}

    def readable(self) -> list[str]:
        return [c.id for c in self.chunks if c.ok]


_CACHE: dict[str, tuple[tuple[int, int], ChunkRead]] = {}


def read_chunk(path: Path, cap: int = MAX_UNCOMPRESSED) -> ChunkRead:
    """Returns a chunk file's events and quarantined records (cached while the file is unchanged)."""
    cid = path.name[: -len(SUFFIX)]
    shown = f".engram/{CHUNKS_DIR}/{path.name}"
    try:
        stat = path.lstat()
    except OSError as error:
        return ChunkRead(cid, shown, False, error=f"cannot read: {error.strerror}")
    key = (stat.st_size, stat.st_mtime_ns)
    cached = _CACHE.get(str(path))
    if cached and cached[0] == key:
        return cached[1]
    try:
        content_id, content = read_chunk_file(path, cap)
        if content_id != cid:
            raise CorruptDataError(f"its content hashes to {content_id}, not to the id in its name")
        result = ChunkRead(cid, shown, True, chunk_events(content))
    except CorruptDataError as error:
        result = ChunkRead(cid, shown, False, error=str(error))
    except OSError as error:
        return ChunkRead(cid, shown, False, error=f"cannot read: {error.strerror}")
    _CACHE[str(path)] = (key, result)
    return result


def read_vault_chunks(engram_dir: Path, cap: int = MAX_UNCOMPRESSED) -> VaultChunks:
    """Returns every chunk file of the vault, read and cross-checked with the manifest."""
    found = VaultChunks()
    folder = engram_dir / CHUNKS_DIR
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    for name in names:
        if is_chunk_name(name):
            found.chunks.append(read_chunk(folder / name, cap))
        elif not name.startswith("."):  # temp files of an atomic write start with a dot
            found.warnings.append(BuildWarning(f".engram/{CHUNKS_DIR}/{name}", 0,
                                               "not a chunk (chunks are named <8 hex>.jsonl.gz): ignored", "chunk"))
    try:
        found.listed = [e.id for e in read_manifest(engram_dir)]
    except (CorruptDataError, OSError) as error:
        found.warnings.append(BuildWarning(f".engram/{MANIFEST}", 0, f"manifest unreadable: {error}", "chunk"))
    on_disk = {c.id for c in found.chunks}
    found.missing = [i for i in dict.fromkeys(found.listed) if i not in on_disk]
    found.unlisted = [c.id for c in found.chunks if c.id not in set(found.listed)]
    found.warnings += [BuildWarning(f".engram/{MANIFEST}", 0, f"chunk {i} is listed but its file is missing "
                                    "(not pulled yet, or deleted)", "chunk") for i in found.missing]
    found.warnings += [BuildWarning(f".engram/{CHUNKS_DIR}/{i}{SUFFIX}", 0, f"chunk {i} is not listed in "
                                    f"{MANIFEST} (imported anyway; the next export lists it)", "chunk")
                       for i in found.unlisted]
    for chunk in found.chunks:
        found.warnings += chunk.warnings()
    return found


_VAULTS: dict[str, tuple[tuple[int, ...], tuple[MemoryEvent, ...], list[BuildWarning]]] = {}


def read_chunk_events(engram_dir: Path, cap: int = MAX_UNCOMPRESSED
                      ) -> tuple[tuple[MemoryEvent, ...], list[BuildWarning]]:
    """Returns the events of every readable chunk and a warning for everything quarantined or inconsistent.

    Called on every memory read: while the chunks folder and the manifest are unchanged (a chunk
    is only ever added by a rename, which changes the folder), the last answer is reused, itself:
    the events are a tuple (a copy of a synced vault's 50,000 events made every write O(store)).
    """
    folder = engram_dir / CHUNKS_DIR
    names = len(os.listdir(folder)) if folder.is_dir() else -1  # coarse folder mtimes miss a second add
    key = (*_stamp(folder), names, *_stamp(engram_dir / MANIFEST))
    cached = _VAULTS.get(str(engram_dir))
    if cached and cached[0] == key:
        return cached[1], list(cached[2])
    found = read_vault_chunks(engram_dir, cap)
    events = tuple(found.events())
    _VAULTS[str(engram_dir)] = (key, events, found.warnings)
    return events, list(found.warnings)


def chunks_stamp(engram_dir: Path) -> tuple[str, tuple[str, ...]]:
    """Returns a digest of what `read_chunk_events` answers from: every file of the chunks folder
    (name, size, mtime) and the manifest's bytes; and the chunk files' names, in reading order.
    Any chunk added, removed or touched (a pull, a checkout) changes it; reading it costs a stat
    a chunk, never a chunk's content."""
    folder = engram_dir / CHUNKS_DIR
    digest = hashlib.blake2b(digest_size=12)
    names = sorted(os.listdir(folder)) if folder.is_dir() else []
    for name in names:
        size, mtime = _stamp(folder / name)[::-1]
        digest.update(f"{name}\0{size}\0{mtime}\n".encode())
    manifest = engram_dir / MANIFEST
    try:
        digest.update(manifest.read_bytes() if manifest.is_file() else b"\0none")
    except OSError:
        digest.update(b"\0unreadable")
    return digest.hexdigest(), tuple(n for n in names if is_chunk_name(n))


def events_of_chunks(engram_dir: Path, names: Iterable[str]) -> list[MemoryEvent]:
    """Returns the events of the named chunk files (the readable ones), in that order: what
    `read_chunk_events` answered when those were the chunks, whatever was added since."""
    folder = engram_dir / CHUNKS_DIR
    return [e for name in names for chunk in [read_chunk(folder / name)] if chunk.ok for e in chunk.replay.events]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size
    except OSError:
        return -1, -1


def pending_events(journal: Iterable[MemoryEvent], exported: set[str]) -> list[MemoryEvent]:
    """Returns the journal events no chunk holds yet (by event id, never by time), in replay order."""
    unique = {e.id: e for e in journal if e.id not in exported}
    return sorted(unique.values(), key=MemoryEvent.order)


def _line(where: str) -> int:
    """Returns the line number named by `where` ("line 7: ..."), else 0."""
    if where.startswith("line "):
        digits = where[5:].split(":", 1)[0]
        return int(digits) if digits.isdigit() else 0
    return 0
