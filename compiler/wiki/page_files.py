"""The wiki's pages as files: load one, list them all, find one by path or title.

What every wiki module reads pages through; writing is compiler.wiki.pages.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.core.errors import InputError, NotFoundError
from compiler.core.file_memo import FileMemo
from compiler.notes.page_text import split_page
from compiler.notes.parse import parse_note
from compiler.wiki.layout import KINDS, WikiLayout


@dataclass(frozen=True)
class WikiPage:
    """One page as it is on disk."""

    path: str  # vault-relative
    title: str
    kind: str
    summary: str
    revision: int
    sha256: str  # of the file's bytes: what changed when the revision did not (a person's edit)
    created: str
    updated: str
    sources: tuple[str, ...]  # vault-relative paths of the raw sources it cites
    memories: tuple[str, ...]
    writer: str
    body: str
    body_line: int  # the file line the body starts on
    links: tuple[Any, ...] = field(default=(), repr=False)  # compiler.notes.records.Link, as parsed

    def listing(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "kind": self.kind, "summary": self.summary,
                "revision": self.revision, "updated": self.updated, "sources": list(self.sources)}

    def to_dict(self) -> dict[str, Any]:
        return {**self.listing(), "sha256": self.sha256, "created": self.created, "memories": list(self.memories),
                "writer": self.writer, "body": self.body}


_PAGES: FileMemo[WikiPage] = FileMemo()


def load_page(layout: WikiLayout, relative: str, data: bytes | None = None) -> WikiPage:
    """Returns the page at `relative` (its bytes read unless given); frontmatter it lacks is defaulted.
    A page read from disk is parsed once while it stays unchanged (a write's navigation reads them all)."""
    if data is not None:
        return _parsed(layout, relative, data)
    return _PAGES.get(f"{layout.root}/{relative}", lambda raw: _parsed(layout, relative, raw),
                      scope=f"{layout.root}|{layout.wiki_name}")


def _parsed(layout: WikiLayout, relative: str, raw: bytes) -> WikiPage:
    note, _ = parse_note(relative, raw, max_bytes=max(len(raw), 1))
    if note is None:
        raise InputError(f"{relative}: a binary file, not a page")
    front = note.frontmatter
    _, body, body_line = split_page(raw.decode("utf-8", "replace"))
    kind = front.get("kind") if front.get("kind") in KINDS else _kind_of_folder(layout, relative)
    return WikiPage(
        path=relative, title=str(front.get("title") or note.title), kind=kind,
        summary=str(front.get("summary") or note.summary), revision=_integer(front.get("revision")),
        sha256=hashlib.sha256(raw).hexdigest(), created=str(front.get("created") or ""),
        updated=str(front.get("updated") or front.get("created") or ""),
        sources=tuple(cited_paths(front.get("sources"))), memories=tuple(str(m) for m in _listed(front.get("memories"))),
        writer=str(front.get("writer") or ""), body=body, body_line=body_line, links=note.links)


def wiki_pages(layout: WikiLayout) -> list[WikiPage]:
    """Returns every page of the wiki, by path (index.md, log.md and the schema are not pages)."""
    return [load_page(layout, relative) for relative in page_paths(layout)]


def page_paths(layout: WikiLayout) -> list[str]:
    if not layout.wiki.is_dir():
        return []
    return [relative for relative in layout.files_under(layout.wiki, ".md")
            if layout.is_page(relative) and not os.path.islink(f"{layout.root}/{relative}")]


def find_page(layout: WikiLayout, ref: str) -> str:
    """Returns the path of the page `ref` names: its vault-relative path (with or without .md) or its
    title (any case). Raises NotFoundError when no page is named so."""
    ref = ref.strip()
    candidates = {ref, ref + ".md", f"{layout.wiki_name}/{ref}", f"{layout.wiki_name}/{ref}.md"}
    paths = page_paths(layout)
    for path in paths:
        if path in candidates:
            return path
    wanted = ref.lower()
    for page in (load_page(layout, p) for p in paths):
        if page.title.lower() == wanted or Path(page.path).stem.lower() == wanted:
            return page.path
    raise NotFoundError(f"no wiki page {ref!r} (list_pages shows them)")


def cited_paths(value: Any) -> Iterator[str]:
    """Yields the vault-relative paths in a `sources:` value (`[[raw/x.md]]` or plain paths)."""
    for item in _listed(value):
        text = str(item).strip().removeprefix("[[").removesuffix("]]").split("|")[0].strip()
        if text:
            yield text if text.endswith((".md", ".html", ".pdf")) else text + ".md"


def _kind_of_folder(layout: WikiLayout, relative: str) -> str:
    folder = relative.removeprefix(layout.wiki_name + "/").split("/")[0]
    return next((kind for kind, name in KINDS.items() if name and name == folder), "note")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value else []


def _integer(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
