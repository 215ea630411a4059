"""The vault graph on disk: `graph.sqlite`, a row per note and per edge, rewritten note by note.

It was node-link JSON (`graph.json`): at 100,000 notes 180 MB written whole after every edit
(5 s of a compile that changed one note), and read whole by every `engram query` for the few
edges between its hits (6.4 s and 900 MB). Every edge starts at a note (its tags, links and
related notes), so a note's edges are replaced with the note: an edit rewrites its own rows and
those of the notes whose related list moved. `compiler.notes.graph.load_graph` turns the file
into the NetworkX graph `build_graph` makes (`tests/notes/test_graph_store.py` checks they agree).

The store is derived data (compiler.core.derived_sqlite): the `key` it records names what it was
built from, a writer that finds another key (a crash between this and the build state, a
rebuild) writes it whole, and a file SQLite cannot read is made again.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from compiler.core.derived_sqlite import connect_derived, connect_readonly
from compiler.core.errors import full_disk_guard
from compiler.core.space import is_disk_full

if TYPE_CHECKING:  # a search imports this module: the note records stay out of it (tests/commands/test_read_only.py)
    from compiler.notes.records import Note, ResolvedLink

SCHEMA = ("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
          "CREATE TABLE IF NOT EXISTS notes (path TEXT PRIMARY KEY, title TEXT NOT NULL) WITHOUT ROWID",
          # kind is NetworkX's edge key: "tag", "link", "embed" or "related"; a search asks by source.
          "CREATE TABLE IF NOT EXISTS edges (source TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL, "
          "weight REAL NOT NULL, PRIMARY KEY (source, target, kind)) WITHOUT ROWID",
          # every link as resolved, broken ones too: the next build reuses those of the notes it did not parse
          "CREATE TABLE IF NOT EXISTS links (source TEXT NOT NULL, number INTEGER NOT NULL, target TEXT NOT NULL, "
          "status TEXT NOT NULL, candidates TEXT NOT NULL, written TEXT NOT NULL, line INTEGER NOT NULL, "
          "kind TEXT NOT NULL, heading TEXT NOT NULL, block TEXT NOT NULL, alias TEXT NOT NULL, "
          "PRIMARY KEY (source, number)) WITHOUT ROWID")
LAYOUT = "2"  # recorded with the key: a store of another layout is written whole
_BATCH = 500  # paths per `IN (…)`: under SQLite's limit of bound values

Edge = tuple[str, str, str, float]  # source, target, kind, weight
Neighbours = Mapping[str, Sequence[tuple[str, float]]]


def note_edges(note: Note, links: Iterable[ResolvedLink], near: Sequence[tuple[str, float]]) -> list[Edge]:
    """Returns the edges that start at `note`: its tags, its links (`links`: those whose source it
    is) and its related notes, as `build_graph` adds them (a second link of one kind to one target
    is the same edge; broken links and links to itself are none)."""
    edges = {(f"#{tag}", "tag"): 1.0 for tag in note.tags}
    for link in links:
        if link.status != "broken" and link.target != note.path:
            edges[(link.target, "embed" if link.link.kind == "embed" else "link")] = 1.0
    edges.update(((other, "related"), cosine) for other, cosine in near)
    return [(note.path, target, kind, weight) for (target, kind), weight in edges.items()]


def save_graph(path: Path, notes: Mapping[str, Note], links: Sequence[ResolvedLink], neighbours: Neighbours,
               key: str, *, last_key: str, changed: Collection[str] | None) -> int:
    """Brings the store at `path` to the graph of `notes`, `links` and `neighbours`; returns how
    many notes it wrote. Only the notes in `changed` (and those gone) are written again when the
    store holds `last_key` (the graph of the last build) and `changed` is not None; else all of
    them. Records `key` for the next build."""
    with full_disk_guard(path, "the note graph", after="the next compile writes it again"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name("graph.json").unlink(missing_ok=True)  # what this store replaces: 180 MB at 100,000 notes
        try:
            return _save(path, notes, links, neighbours, key, last_key, changed)
        except sqlite3.DatabaseError as error:
            if is_disk_full(error, path):  # not a damaged file: full_disk_guard says so
                raise
            for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):  # unreadable: made again
                stale.unlink(missing_ok=True)
            return _save(path, notes, links, neighbours, key, last_key, None)


def _save(path: Path, notes: Mapping[str, Note], links: Sequence[ResolvedLink], neighbours: Neighbours,
          key: str, last_key: str, changed: Collection[str] | None) -> int:
    with closing(connect_derived(path)) as db, db:
        for statement in SCHEMA:
            db.execute(statement)
        found = db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()
        if changed is None or found is None or found[0] != f"{LAYOUT} {last_key}":
            for table in ("notes", "edges", "links"):
                db.execute(f"DELETE FROM {table}")
            written = sorted(notes)
        else:
            written = sorted(p for p in changed if p in notes)
            for batch in _batches(sorted(set(changed))):
                marks = ",".join("?" * len(batch))
                db.execute(f"DELETE FROM notes WHERE path IN ({marks})", batch)
                db.execute(f"DELETE FROM edges WHERE source IN ({marks})", batch)
                db.execute(f"DELETE FROM links WHERE source IN ({marks})", batch)
        wanted = set(written)
        by_source: dict[str, list[ResolvedLink]] = {}
        for link in links:
            if link.source in wanted:
                by_source.setdefault(link.source, []).append(link)
        db.executemany("INSERT INTO notes VALUES (?, ?)", ((p, notes[p].title) for p in written))
        db.executemany("INSERT INTO edges VALUES (?, ?, ?, ?)",
                       (edge for p in written for edge in note_edges(notes[p], by_source.get(p, ()), neighbours.get(p, ()))))
        db.executemany("INSERT INTO links VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       ((r.source, number, r.target, r.status, json.dumps(r.candidates) if r.candidates else "",
                         r.link.target, r.link.line, r.link.kind, r.link.heading, r.link.block, r.link.alias)
                        for p in written for number, r in enumerate(by_source.get(p, ()))))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('key', ?)", (f"{LAYOUT} {key}",))
    return len(written)


def stored_links(path: Path, key: str, skip: Collection[str]) -> list[ResolvedLink] | None:
    """Returns the resolved links the store holds, but those of the notes in `skip`, when it holds
    the graph named `key`; else None. While a vault holds the same note and attachment paths, a
    note that was not edited has the links it had, resolved as they were: at 100,000 notes
    resolving its 212,000 links again cost 3.8 s of a compile after one edit."""
    from compiler.notes.records import Link, ResolvedLink  # here: a search imports this module, not the records

    if not path.is_file():
        return None
    skip = set(skip)
    try:
        with closing(connect_readonly(path)) as db:
            found = db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()
            if found is None or found[0] != f"{LAYOUT} {key}":
                return None
            return [ResolvedLink(source, target, Link(written, line, kind, heading, block, alias), status,
                                 tuple(json.loads(candidates)) if candidates else ())
                    for source, target, status, candidates, written, line, kind, heading, block, alias in db.execute(
                        "SELECT source, target, status, candidates, written, line, kind, heading, block, alias "
                        "FROM links ORDER BY source, number")
                    if source not in skip]
    except (sqlite3.Error, ValueError):
        return None


def _batches(paths: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(paths), _BATCH):
        yield paths[start:start + _BATCH]


def read_graph(path: Path) -> tuple[list[tuple[str, str]], list[Edge]]:
    """Returns every (note, title) and every edge the store holds, sorted; nothing when there is no store."""
    if not path.is_file():
        return [], []
    with closing(connect_readonly(path)) as db:
        return (db.execute("SELECT path, title FROM notes ORDER BY path").fetchall(),
                db.execute("SELECT source, target, kind, weight FROM edges ORDER BY source, target, kind").fetchall())


def ties(path: Path, ends: Collection[str], others: Collection[str]) -> dict[tuple[str, str], float]:
    """Returns {(a, b): the heaviest edge between them, either way, that is not a tag} for a in
    `ends` and b in `others`: what a search's graph bonus asks. Nothing when there is no store or
    it cannot be read (a search without its bonus, never a failure)."""
    if not path.is_file() or not ends or not others:
        return {}
    found: dict[tuple[str, str], float] = {}
    try:
        with closing(connect_readonly(path)) as db:
            for a_side, b_side, flip in ((list(ends), list(others), False), (list(others), list(ends), True)):
                query = (f"SELECT source, target, max(weight) FROM edges WHERE kind != 'tag' AND source IN "
                         f"({','.join('?' * len(a_side))}) AND target IN ({','.join('?' * len(b_side))}) "
                         "GROUP BY source, target")
                for source, target, weight in db.execute(query, [*a_side, *b_side]):
                    pair = (target, source) if flip else (source, target)
                    found[pair] = max(weight, found.get(pair, weight))
    except sqlite3.Error:
        return {}
    return found
