"""The sources in raw/ as files: their sidecars read back, and a person's clippings adopted.

A source is its original bytes, the Markdown an agent reads (the same file for Markdown and text)
and `<slug>.source.json` describing it (compiler.wiki.sources writes them). A Markdown file someone
put in raw/ by hand, without a sidecar, is a source too, described from the file itself.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time
from compiler.core.errors import InputError
from compiler.core.file_memo import FileMemo
from compiler.core.files import contained
from compiler.wiki.convert import markdown_title
from compiler.wiki.layout import WikiLayout

SIDECAR = ".source.json"


@dataclass(frozen=True)
class Source:
    """One source in raw/, as its sidecar describes it (or as found, for a file without one)."""

    text: str  # vault-relative path of its Markdown: what pages cite
    file: str  # the original bytes (== text for Markdown and text)
    title: str
    sha256: str  # of the original bytes, at ingest
    bytes: int
    media: str
    ingested: str  # YYYY-MM-DD HH:MM:SS UTC
    origin: str = ""  # a URL or the path it was ingested from
    replaces: str = ""  # the `text` of the version this one replaces
    writer: str = ""
    sidecar: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_sources(layout: WikiLayout) -> dict[str, Source]:
    """Returns every source in raw/ by its `text` path: from the sidecars, then the Markdown files
    without one (a person's clippings), described from the file itself."""
    found: dict[str, Source] = {}
    if not layout.raw.is_dir():
        return found
    for sidecar in (f"{layout.root}/{p}" for p in layout.files_under(layout.raw, SIDECAR)):
        try:
            source = _SIDECARS.get(sidecar, lambda data: _sidecar_source(layout, data), scope=layout.raw_name)
        except (ValueError, TypeError, KeyError, OSError):
            continue  # lint reports it (`broken_sidecars`); a peer's bad file stops nothing
        found[source.text] = source
    described = {s.file for s in found.values()} | set(found)
    for relative in layout.files_under(layout.raw, ".md"):
        if relative in described:
            continue
        path = layout.root / relative
        found[relative] = _CLIPPINGS.get(path, lambda data: _clipping(relative, data, path), scope=str(layout.root))
    return found


def _clipping(relative: str, data: bytes, path: Path) -> Source:
    """Describes a Markdown file in raw/ that has no sidecar (a person's clipping) from the file itself."""
    mtime = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
    return Source(text=relative, file=relative, title=markdown_title(data.decode("utf-8", "replace")) or path.stem,
                  sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), media="markdown",
                  ingested=format_time(mtime), sidecar=False)


def broken_sidecars(layout: WikiLayout) -> list[str]:
    """Returns the vault-relative sidecars that cannot be read as one."""
    bad = []
    for relative in layout.files_under(layout.raw, SIDECAR):
        try:
            _SIDECARS.get(f"{layout.root}/{relative}", lambda data: _sidecar_source(layout, data), scope=layout.raw_name)
        except (ValueError, TypeError, KeyError, OSError):
            bad.append(relative)
    return bad


_SIDECARS: FileMemo[Source] = FileMemo()  # read once while unchanged: every wiki write lists the sources
_CLIPPINGS: FileMemo[Source] = FileMemo()


def _sidecar_source(layout: WikiLayout, raw: bytes) -> Source:
    """Returns the source a sidecar's bytes describe; raises ValueError or TypeError for anything else,
    paths outside raw/ included (read_source would otherwise read `.engram/` or a person's note)."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("a sidecar is a JSON object")
    source = Source(**{k: data[k] for k in Source.__dataclass_fields__ if k in data and k != "sidecar"})
    # A peer's sidecar is git-tracked input: a number where a path or date belongs would break
    # index.md and lint far from here, so the types are checked where it is read.
    for name in Source.__dataclass_fields__:
        value, wanted = getattr(source, name), bool if name == "sidecar" else int if name == "bytes" else str
        if type(value) is not wanted:  # type(), not isinstance: True is an int to isinstance
            raise TypeError(f"{name} is not {wanted.__name__}")
    for path in (source.text, source.file):
        inside = path.removeprefix(layout.raw_name + "/")
        if inside == path or any(p in ("", "..") or p.startswith(".") for p in inside.split("/")):
            raise ValueError(f"{path}: not a path inside {layout.raw_name}/")
    return source


def read_source(layout: WikiLayout, path: str, max_bytes: int) -> dict[str, Any]:
    """Returns {"source", "content", "truncated"}: a source's record and its Markdown (by `text` or `file` path)."""
    sources = read_sources(layout)
    source = sources.get(path) or next((s for s in sources.values() if s.file == path), None)
    if source is None:
        raise InputError(f"no source {path!r} in {layout.raw_name}/ (list_pages shows the sources)")
    target = contained(layout.root, layout.root / source.text)
    data = target.read_bytes()
    return {"source": source.to_dict(), "content": data[:max_bytes].decode("utf-8", "replace"),
            "truncated": len(data) > max_bytes}
