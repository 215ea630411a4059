"""A page's past: its history, undoing its last write, and moving it under a new title.

`undo_page` restores the text the last write replaced (or removes a page that write created, or
moves a moved page back); the restored page gets the next revision, so a writer holding the undone
revision is refused like after any other write. An undo is a write too: undoing it again redoes.
A page changed by hand since its last engram write is not undone (that edit would be lost).
`move_page` renames a page and rewrites the `[[links]]` other wiki pages have to it, each such
rewrite a journaled edit of its own.
"""

from __future__ import annotations

import re
from typing import Any

from compiler.core.errors import InputError, NotFoundError
from compiler.core.files import atomic_write
from compiler.core.lock import writer_lock
from compiler.notes.page_text import with_fields
from compiler.wiki import history
from compiler.wiki.layout import WikiLayout
from compiler.wiki.navigation import refresh_navigation
from compiler.wiki.page_files import find_page, load_page, wiki_pages


def page_history(layout: WikiLayout, ref: str) -> dict[str, Any]:
    """Returns {"path", "entries"}: the page's writes, oldest first (the replaced texts' sizes, not the texts)."""
    path = _path_or_past(layout, ref)
    entries = history.page_entries(history.read_history(layout.history), path)
    shown = [{**{k: v for k, v in e.to_dict().items() if k != "before"},
              "before_chars": None if e.before is None else len(e.before)} for e in entries]
    return {"path": path, "entries": shown}


def undo_page(layout: WikiLayout, ref: str, *, writer: str = "") -> dict[str, Any]:
    """Undoes the last write of a page; returns {"path", "undone": the entry undone, "revision", "removed"}."""
    with writer_lock(layout.root / ".engram"):
        path = _path_or_past(layout, ref)
        entries = history.page_entries(history.read_history(layout.history), path)
        if not entries:
            raise NotFoundError(f"{path}: no engram write of this page to undo (it was never written through engram)")
        last = entries[-1]
        target = layout.root / last.path
        current = load_page(layout, last.path) if target.is_file() else None
        removed = current is None and not last.sha256  # the last write removed it: undoing brings it back
        if not removed and (current is None or current.sha256 != last.sha256):
            raise InputError(f"{last.path} changed since its last engram write (revision {last.revision}, by hand?): "
                             "undo would lose that change; edit the page instead")
        now = layout.timestamp()
        if last.action == "move":
            return _move_back(layout, last, current, now, writer)
        before = (layout.root / last.path).read_text(encoding="utf-8", errors="replace") if current else None
        if last.before is None:
            layout.writable(last.path).unlink()
            history.append(layout.history, history.Entry(at=now, action="undo", path=last.path, title=current.title,
                                                         writer=writer, before=before, detail="creation undone: page removed"))
            refresh_navigation(layout)
            return {"path": last.path, "undone": _shown(last), "revision": 0, "removed": True}
        revision = (load_page(layout, last.path, last.before.encode()).revision if removed else current.revision) + 1
        data = with_fields(last.before, {"updated": now, "revision": revision}).encode("utf-8")
        atomic_write(layout.writable(last.path), data)
        page = load_page(layout, last.path, data)
        history.append(layout.history, history.Entry(at=now, action="undo", path=last.path, title=page.title,
                                                     writer=writer, revision=page.revision, sha256=page.sha256,
                                                     before=before, detail="removal undone" if removed
                                                     else f"revision {last.revision} undone"))
        refresh_navigation(layout)
        return {"path": last.path, "undone": _shown(last), "revision": page.revision, "removed": False}


def move_page(layout: WikiLayout, ref: str, new_title: str, expected_revision: int, *, kind: str = "",
              writer: str = "") -> dict[str, Any]:
    """Renames a page (its title, file and folder by kind) and relinks the wiki pages that linked it;
    returns {"path", "moved_from", "revision", "relinked": [paths]}."""
    with writer_lock(layout.root / ".engram"):
        current = load_page(layout, find_page(layout, ref))
        if expected_revision != current.revision:
            raise InputError(f"{current.path} is at revision {current.revision}, not {expected_revision}: read it again "
                             "(nothing was moved)")
        kind = kind or current.kind
        new_path = layout.page_path(new_title, kind)
        if new_path != current.path and (layout.root / new_path).exists():
            raise InputError(f"{new_path}: a page is already there; pick another title")
        now = layout.timestamp()
        before = (layout.root / current.path).read_text(encoding="utf-8", errors="replace")
        data = with_fields(before, {"title": new_title, "kind": kind, "updated": now,
                                    "revision": current.revision + 1}).encode("utf-8")
        atomic_write(layout.writable(new_path), data)
        if new_path != current.path:
            layout.writable(current.path).unlink()
        page = load_page(layout, new_path, data)
        history.append(layout.history, history.Entry(at=now, action="move", path=new_path, title=new_title, writer=writer,
                                                     revision=page.revision, sha256=page.sha256, before=before,
                                                     moved_from=current.path, detail=f"was “{current.title}”"))
        relinked = _relink(layout, current, new_path, now, writer)
        refresh_navigation(layout)
        return {"path": new_path, "moved_from": current.path, "revision": page.revision, "relinked": relinked}


def _relink(layout: WikiLayout, old: Any, new_path: str, now: str, writer: str) -> list[str]:
    """Rewrites `[[Old title…]]` and `[[wiki/…/Old title…]]` in the other pages to the new page."""
    names = {old.title, old.path[:-3], old.path.rsplit("/", 1)[-1][:-3]}
    pattern = re.compile(r"(!?\[\[)(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) +
                         r")(?:\.md)?(?=[\]|#])", re.IGNORECASE)
    target = new_path[:-3]
    relinked = []
    for page in wiki_pages(layout):
        if page.path == new_path:
            continue
        text = (layout.root / page.path).read_text(encoding="utf-8", errors="replace")
        changed = pattern.sub(lambda m: m.group(1) + target, text)
        if changed == text:
            continue
        # `updated` stays: a link that follows a move is not a new look at the sources (lint's staleness)
        data = with_fields(changed, {"revision": page.revision + 1}).encode("utf-8")
        atomic_write(layout.writable(page.path), data)
        done = load_page(layout, page.path, data)
        history.append(layout.history, history.Entry(at=now, action="edit", path=page.path, title=done.title,
                                                     writer=writer, revision=done.revision, sha256=done.sha256,
                                                     before=text, detail=f"links to “{old.title}” follow its move"))
        relinked.append(page.path)
    return relinked


def _move_back(layout: WikiLayout, last: history.Entry, current: Any, now: str, writer: str) -> dict[str, Any]:
    if (layout.root / last.moved_from).exists():
        raise InputError(f"{last.moved_from}: a page is there again; move it away first")
    text = (layout.root / last.path).read_text(encoding="utf-8", errors="replace")
    data = with_fields(last.before or text, {"updated": now, "revision": current.revision + 1}).encode("utf-8")
    atomic_write(layout.writable(last.moved_from), data)
    layout.writable(last.path).unlink()
    page = load_page(layout, last.moved_from, data)
    history.append(layout.history, history.Entry(at=now, action="undo", path=last.moved_from, title=page.title,
                                                 writer=writer, revision=page.revision, sha256=page.sha256, before=text,
                                                 moved_from=last.path, detail="move undone"))
    _relink(layout, current, last.moved_from, now, writer)  # the links the move rewrote follow it back
    refresh_navigation(layout)
    return {"path": last.moved_from, "undone": _shown(last), "revision": page.revision, "removed": False}


def _path_or_past(layout: WikiLayout, ref: str) -> str:
    """Returns the page `ref` names, or the path of a removed page the history knows."""
    try:
        return find_page(layout, ref)
    except NotFoundError:
        wanted = {ref, ref + ".md"}
        known = [e.path for e in history.read_history(layout.history) if e.path in wanted or e.title.lower() == ref.lower()]
        if known:
            return known[-1]
        raise


def _shown(entry: history.Entry) -> dict[str, Any]:
    return {k: v for k, v in entry.to_dict().items() if k != "before"}
