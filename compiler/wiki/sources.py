"""`engram ingest`: a source copied into raw/ byte for byte, described by a sidecar, never changed after.

A source is three things in raw/: the original bytes (`<slug>.md`, `.html` or `.pdf`; text is kept
as `.md`), the Markdown an agent reads and search indexes (the same file for Markdown and text, a
converted `<slug>.md` beside an HTML or PDF original), and `<slug>.source.json`: title, origin,
date, sha256, size, media, and which earlier source it replaces. The same bytes twice are one
source; new bytes from the same origin (or, without one, under the same title) are a new version
that `replaces` the old one, which stays: pages citing the old one are then stale (lint).
A file someone put in raw/ by hand, without a sidecar, is a source too (adopted as it is).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from compiler.core.errors import InputError
from compiler.core.files import atomic_write, contained
from compiler.core.lock import writer_lock
from compiler.wiki import history
from compiler.wiki.convert import (
    decoded,
    html_to_markdown,
    markdown_title,
    media_of,
    pdf_to_markdown,
)
from compiler.wiki.layout import WikiLayout, slug
from compiler.wiki.navigation import refresh_navigation
from compiler.wiki.source_files import SIDECAR, Source, read_sources

_SUFFIX = {"markdown": ".md", "text": ".md", "html": ".html", "pdf": ".pdf"}


def ingest_source(layout: WikiLayout, data: bytes, name: str, *, title: str = "", origin: str = "",
                  writer: str = "") -> dict[str, Any]:
    """Copies one source into raw/; returns {"source": its record, "duplicate": bool, "replaces": path or ""}.

    `name` is the file name it came as ("-" for stdin): it tells the format where the bytes don't.
    Raises InputError for an empty, binary, undecodable or too large input (naming the limit).
    """
    if not data.strip():
        raise InputError(f"{name}: the source is empty")
    if len(data) > layout.max_source_bytes:
        raise InputError(f"{name}: {len(data):,} bytes is over the {layout.max_source_bytes:,}-byte limit for one source "
                         "(`max_source_bytes` in engram.toml)")
    media = media_of(name, data)
    found_title, text = _readable(name, data, media, origin)
    fallback = "" if name == "-" else Path(name).stem
    title = " ".join((title or found_title or fallback).split())
    if not title:
        raise InputError(f"{name}: no title found in the source: pass one (--title)")
    sha = hashlib.sha256(data).hexdigest()
    with writer_lock(layout.root / ".engram"):
        known = read_sources(layout)
        same = next((s for s in known.values() if s.sha256 == sha), None)
        if same:
            return {"source": same.to_dict(), "duplicate": True, "replaces": same.replaces}
        older = _earlier_version(known, origin, title)
        stem = _free_stem(layout, slug(title))
        source = Source(text=f"{layout.raw_name}/{stem}.md", file=f"{layout.raw_name}/{stem}{_SUFFIX[media]}",
                        title=title, sha256=sha, bytes=len(data), media=media, ingested=layout.timestamp(),
                        origin=origin, replaces=older.text if older else "", writer=writer)
        _write_new(layout, source.file, data)
        if source.text != source.file:
            _write_new(layout, source.text, text.encode("utf-8"))
        sidecar = {k: v for k, v in source.to_dict().items() if k != "sidecar"}
        _write_new(layout, f"{layout.raw_name}/{stem}{SIDECAR}",
                   (json.dumps(sidecar, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        history.append(layout.history, history.Entry(
            at=source.ingested, action="ingest", path=source.text, title=title, writer=writer, sha256=sha,
            detail=f"replaces [[{older.text}]]" if older else f"{media}, {len(data):,} bytes"))
        refresh_navigation(layout)
    return {"source": source.to_dict(), "duplicate": False, "replaces": source.replaces}


def _readable(name: str, data: bytes, media: str, origin: str) -> tuple[str, str]:
    """Returns (a title found in the source, its Markdown)."""
    if media == "html":
        return html_to_markdown(name, data, origin)
    if media == "pdf":
        return pdf_to_markdown(name, data)
    text = decoded(name, data)
    return markdown_title(text), text


def _earlier_version(known: dict[str, Source], origin: str, title: str) -> Source | None:
    """Returns the newest source this one is a new version of: the same origin, else (with no origin) the same title."""
    replaced = {s.replaces for s in known.values()}
    same = [s for s in known.values() if s.text not in replaced and
            ((origin and s.origin == origin) or (not origin and not s.origin and s.title.lower() == title.lower()))]
    return max(same, key=lambda s: (s.ingested, s.text)) if same else None


def _free_stem(layout: WikiLayout, stem: str) -> str:
    """Returns `stem`, or `stem-2`, `stem-3`… : the first with no file of that name in raw/."""
    taken = {name.split(".", 1)[0] for name in os.listdir(layout.raw)} if layout.raw.is_dir() else set()
    n, candidate = 1, stem
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


def _write_new(layout: WikiLayout, relative: str, data: bytes) -> None:
    """Writes a new file in raw/ (atomically, durably); a file already there is never replaced."""
    target = contained(layout.root, layout.root / relative)
    if target.exists():
        raise InputError(f"{relative}: already exists; sources in {layout.raw_name}/ are never overwritten")
    atomic_write(target, data)
