"""The pages agents own: read, list, write and edit them, each write checked, atomic and journaled.

A page is a Markdown file in the wiki folder whose frontmatter carries its provenance: `title`,
`kind`, `summary`, `sources` (links to raw/), `memories` (sync ids), `created`, `updated`,
`revision` (1 for a new page, one more per write) and `writer`. A write names the revision it
read (`expected_revision`): when the page moved on since, the write is refused and nothing is
lost. Every write holds the vault's writer lock, replaces the file atomically, appends to the
history (with the text it replaced, for undo) and regenerates index.md and log.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from compiler.core.errors import InputError, NotFoundError
from compiler.core.files import atomic_write
from compiler.core.lock import writer_lock
from compiler.notes.page_text import join_page
from compiler.wiki import history
from compiler.wiki.layout import WikiLayout, check_kind
from compiler.wiki.navigation import refresh_navigation
from compiler.wiki.page_files import WikiPage, find_page, load_page, wiki_pages
from compiler.wiki.source_files import Source, read_sources

MAX_PAGE_CHARS = 200_000
_WIKILINK = re.compile(r"\[\[([^\[\]|#]+)")


def read_page(layout: WikiLayout, ref: str) -> dict[str, Any]:
    """Returns the page `ref` names: its provenance, revision, sha256 and body (edit_page's input)."""
    return load_page(layout, find_page(layout, ref)).to_dict()


def list_pages(layout: WikiLayout, kind: str = "") -> dict[str, Any]:
    """Returns {"pages": [...], "sources": [...]}: every page (of `kind`, when given) and every source."""
    if kind:
        check_kind(kind)
    pages = [p.listing() for p in wiki_pages(layout) if not kind or p.kind == kind]
    sources = [s.to_dict() for s in sorted(read_sources(layout).values(), key=lambda s: s.text)]
    return {"pages": pages, "sources": sources}


def write_page(layout: WikiLayout, title: str, body: str, *, kind: str = "note", summary: str = "",
               sources: Sequence[str] = (), links: Sequence[str] = (), memories: Sequence[str] = (),
               writer: str = "", expected_revision: int | None = None) -> dict[str, Any]:
    """Creates the page `title` (or replaces it whole, given the revision it read); returns
    {"path", "title", "revision", "sha256", "created": bool}.

    `sources` are raw/ paths (or the start of a source's sha256); `links` are page titles the
    page should link to (added under "Related" when the body does not link them already).
    """
    layout.page_path(title, kind)  # a hostile title or kind is refused before anything is touched
    _check_body(body)
    with writer_lock(layout.root / ".engram"):
        try:
            path = find_page(layout, title)
        except NotFoundError:
            path = ""
        if path:
            current = load_page(layout, path)
            _check_revision(current, expected_revision, "write_page")
        else:
            path = layout.page_path(title, kind)
            current = None
        cited = resolve_sources(layout, sources)
        text = _page_text(layout, title, kind, summary, cited, memories, writer, _with_links(body, links), current)
        return _commit(layout, path, text, current, "write", writer,
                       "created" if current is None else f"rewritten ({len(cited)} sources)")


def edit_page(layout: WikiLayout, ref: str, expected_revision: int, *, body: str | None = None,
              section: str = "", section_body: str | None = None, find: str = "", replace: str | None = None,
              summary: str | None = None, sources: Sequence[str] | None = None, writer: str = "") -> dict[str, Any]:
    """Revises a page: its whole body, one section (`section` heading → `section_body`; a new one is
    appended), or one exact passage (`find` → `replace`, which must occur once), plus its summary or
    sources. Refused when `expected_revision` is not the page's revision. Returns as write_page."""
    with writer_lock(layout.root / ".engram"):
        current = load_page(layout, find_page(layout, ref))
        _check_revision(current, expected_revision, "edit_page")
        new_body, what = _revised_body(current, body, section, section_body, find, replace)
        _check_body(new_body)
        cited = resolve_sources(layout, sources) if sources is not None else list(current.sources)
        text = _page_text(layout, current.title, current.kind, current.summary if summary is None else summary,
                          cited, current.memories, writer or current.writer, new_body, current)
        return _commit(layout, current.path, text, current, "edit", writer, what)


def resolve_sources(layout: WikiLayout, refs: Sequence[str]) -> list[str]:
    """Returns the `text` paths of the sources `refs` name (a path, a [[link]], or 8+ hex of its sha256)."""
    known = read_sources(layout)
    found = []
    for ref in refs:
        clean = ref.strip().removeprefix("[[").removesuffix("]]").split("|")[0].strip()
        source = _source_named(known, clean, layout)
        if source is None:
            raise InputError(f"no source {ref!r} in {layout.raw_name}/: ingest it first (engram ingest / ingest_source)")
        if source.text not in found:
            found.append(source.text)
    return found


def _source_named(known: dict[str, Source], ref: str, layout: WikiLayout) -> Source | None:
    for candidate in (ref, ref + ".md", f"{layout.raw_name}/{ref}", f"{layout.raw_name}/{ref}.md"):
        if candidate in known:
            return known[candidate]
        by_file = next((s for s in known.values() if s.file == candidate), None)
        if by_file:
            return by_file
    if re.fullmatch(r"[0-9a-f]{8,64}", ref):
        return next((s for s in known.values() if s.sha256.startswith(ref)), None)
    return None


def _page_text(layout: WikiLayout, title: str, kind: str, summary: str, sources: Sequence[str],
               memories: Sequence[str], writer: str, body: str, current: WikiPage | None) -> str:
    now = layout.timestamp()
    front: dict[str, Any] = {"title": title, "kind": kind}
    if summary:
        front["summary"] = " ".join(summary.split())
    if sources:
        front["sources"] = [f"[[{s}]]" for s in sources]
    if memories:
        front["memories"] = list(memories)
    front.update(created=current.created or now if current else now, updated=now,
                 revision=(current.revision if current else 0) + 1)
    if writer:
        front["writer"] = writer
    return join_page(front, body)


def _commit(layout: WikiLayout, path: str, text: str, current: WikiPage | None, action: str, writer: str,
            detail: str) -> dict[str, Any]:
    """Writes the page, journals it, refreshes the navigation; returns what the write tools answer."""
    target = layout.writable(path)
    if current is None and target.exists():
        raise InputError(f"{path}: a file is already there (a page with another title?): pick another title")
    data = text.encode("utf-8")
    before = (layout.root / current.path).read_text(encoding="utf-8", errors="replace") if current else None
    atomic_write(target, data)
    page = load_page(layout, path, data)
    history.append(layout.history, history.Entry(at=page.updated, action=action, path=path, title=page.title,
                                                 writer=writer, revision=page.revision, sha256=page.sha256,
                                                 before=before, detail=detail))
    refresh_navigation(layout)
    return {"path": path, "title": page.title, "kind": page.kind, "revision": page.revision, "sha256": page.sha256,
            "created": current is None}


def _check_revision(current: WikiPage, expected: int | None, tool: str) -> None:
    if expected is None:
        raise InputError(f"{current.path} exists at revision {current.revision}: read it, then pass "
                         f"expected_revision={current.revision} to {tool} (or use edit_page)")
    if expected != current.revision:
        raise InputError(f"{current.path} is at revision {current.revision}, not {expected}: someone changed it "
                         "since you read it; read it again and apply your change to that text (nothing was written)")


def _check_body(body: str) -> None:
    if len(body) > MAX_PAGE_CHARS:
        raise InputError(f"a page body is at most {MAX_PAGE_CHARS:,} characters (this one has {len(body):,}): split it")
    if body.lstrip().startswith("---"):
        raise InputError("the body starts with '---': pass the frontmatter fields as arguments, not in the body")


def _revised_body(current: WikiPage, body: str | None, section: str, section_body: str | None, find: str,
                  replace: str | None) -> tuple[str, str]:
    """Returns the revised body and a one-line account of the change."""
    if body is not None:
        return body, "body rewritten"
    if section:
        if section_body is None:
            raise InputError("section needs section_body: the new text under that heading")
        return replace_section(current.body, section, section_body), f"section “{section}” replaced"
    if find:
        count = current.body.count(find)
        if count != 1:
            raise InputError(f"find text occurs {count} times in {current.path}: it must occur exactly once "
                             "(quote more of the passage)")
        return current.body.replace(find, replace or ""), "passage replaced"
    raise InputError("nothing to change: pass body, section + section_body, or find + replace")


def replace_section(body: str, heading: str, text: str) -> str:
    """Returns `body` with the section under `heading` (any level, up to the next heading of that
    level or higher) replaced by `text`; a missing section is appended as `## heading`."""
    lines = body.split("\n")
    wanted = heading.strip().lstrip("#").strip().lower()
    for i, line in enumerate(lines):
        found = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if found and found.group(2).strip().lower() == wanted:
            level = len(found.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (m := re.match(r"^(#{1,6})\s", lines[j])) and len(m.group(1)) <= level), len(lines))
            return "\n".join([*lines[:i + 1], text.strip("\n"), "", *lines[end:]]).rstrip() + "\n"
    return f"{body.rstrip()}\n\n## {heading.strip().lstrip('#').strip()}\n{text.strip()}\n"


def _with_links(body: str, titles: Sequence[str]) -> str:
    linked = {m.group(1).strip().lower() for m in _WIKILINK.finditer(body)}
    missing = [t for t in dict.fromkeys(t.strip() for t in titles) if t and t.lower() not in linked]
    return f"{body.rstrip()}\n\nRelated: {', '.join(f'[[{t}]]' for t in missing)}\n" if missing else body


