"""The chunk manifest, `.engram/manifest.json`: the engram CLI's index of chunks.

Format (Go's `json.MarshalIndent(m, "", "  ")`, no trailing newline):

    {"version": 1, "chunks": [{"id", "created_by", "created_at", "sessions", "memories", "prompts"}]}

Append-only: an entry is never changed or dropped by us. It is written atomically (temp file
and rename). Entries are kept sorted by (created_at, id) so that two machines that merged the
same entries write the same bytes. Two machines appending at once conflict in git; `union`
is the three-way merge (git's own `union` driver would produce invalid JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from compiler.core.errors import CorruptDataError
from compiler.core.files import atomic_write, contained
from compiler.core.json_input import load_json
from compiler.events.chunks import go_json

MANIFEST = "manifest.json"
_ID = re.compile(r"^[0-9a-f]{8}$")


@dataclass(frozen=True)
class ManifestEntry:
    id: str
    created_by: str = ""
    created_at: str = ""  # RFC 3339 UTC, as the Go CLI writes it: 2026-11-30T12:00:00Z
    sessions: int = 0
    memories: int = 0
    prompts: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)  # field order = the Go struct's order


def parse_manifest(text: str, source: str = MANIFEST) -> list[ManifestEntry]:
    """Returns the entries of a manifest's text (a `null` chunk list is empty); raises CorruptDataError."""
    try:
        data = load_json(text) if text.strip() else {"version": 1, "chunks": []}
    except ValueError as error:
        raise CorruptDataError(f"{source}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise CorruptDataError(f"{source}: not a JSON object")
    chunks = data.get("chunks") or []
    if not isinstance(chunks, list):
        raise CorruptDataError(f"{source}: `chunks` is not a list")
    entries: list[ManifestEntry] = []
    for index, raw in enumerate(chunks):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not _ID.match(raw["id"]):
            raise CorruptDataError(f"{source}: chunks[{index}] has no valid 8-hex `id`")
        entries.append(ManifestEntry(raw["id"], str(raw.get("created_by") or ""), str(raw.get("created_at") or ""),
                                     *(_count(raw.get(key)) for key in ("sessions", "memories", "prompts"))))
    return entries


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def read_manifest(engram_dir: Path) -> list[ManifestEntry]:
    """Returns the vault's manifest entries ([] when there is none); raises CorruptDataError if unreadable."""
    path = engram_dir / MANIFEST
    if not path.is_file():
        return []
    return parse_manifest(path.read_bytes().decode("utf-8", errors="replace"), f".engram/{MANIFEST}")


def canonical(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """Returns entries without repeated ids (the first kept), sorted by (created_at, id)."""
    unique: dict[str, ManifestEntry] = {}
    for entry in entries:
        unique.setdefault(entry.id, entry)
    return sorted(unique.values(), key=lambda e: (e.created_at, e.id))


def manifest_bytes(entries: Sequence[ManifestEntry]) -> bytes:
    """Returns the manifest file's bytes, as Go's MarshalIndent with two spaces writes them."""
    return go_json({"version": 1, "chunks": [e.to_dict() for e in canonical(entries)]}, indent=2).encode("utf-8")


def write_manifest(engram_dir: Path, entries: Sequence[ManifestEntry]) -> bool:
    """Writes the manifest atomically when its bytes change; returns whether it was written."""
    path = engram_dir / MANIFEST
    contained(engram_dir.parent, path)  # a symlinked manifest (or .engram) is not followed out of the vault
    data = manifest_bytes(entries)
    if path.is_file() and path.read_bytes() == data:
        return False
    atomic_write(path, data)
    return True


def append_entries(engram_dir: Path, new: Sequence[ManifestEntry]) -> list[str]:
    """Adds entries whose id is not listed yet (the caller holds the writer lock); returns the ids added."""
    current = read_manifest(engram_dir)
    listed = {e.id for e in current}
    added = [e for e in new if e.id not in listed]
    if added:
        write_manifest(engram_dir, [*current, *added])
    return [e.id for e in added]


def union(base: Sequence[ManifestEntry], ours: Sequence[ManifestEntry],
          theirs: Sequence[ManifestEntry]) -> list[ManifestEntry]:
    """The three-way merge: every entry of either side, except one that a side removed from `base`.

    Appends on both sides are kept; an entry someone deliberately removed stays removed.
    """
    in_ours, in_theirs = {e.id for e in ours}, {e.id for e in theirs}
    removed = {e.id for e in base if e.id not in in_ours or e.id not in in_theirs}
    return canonical(e for e in (*ours, *theirs) if e.id not in removed)


def merge_files(base: Path, ours: Path, theirs: Path) -> None:
    """The git merge driver (`engram merge-manifest %O %A %B`): writes the union into `ours`.

    Raises CorruptDataError when a side is not a manifest (git then reports a conflict).
    """
    def entries(path: Path, label: str) -> list[ManifestEntry]:
        text = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else ""
        return parse_manifest(text, label)

    merged = union(entries(base, "base"), entries(ours, "ours"), entries(theirs, "theirs"))
    atomic_write(ours, manifest_bytes(merged))
