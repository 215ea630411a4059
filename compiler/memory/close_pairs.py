"""The close pairs consolidation starts from, kept in the memory index and brought up to date
for only the memories that changed since they were last found.

A full run asks the vector index, for every memory of a consolidated kind, its NEIGHBOURS nearest
rows and keeps those at ≥ `consolidate_min`: at 50,000 memories that is 50,000 queries (39 s of
CPU) after one memory was added. The answer of one query depends only on the rows at ≥ that
cosine from the memory asked about, so after a change only these memories can have another one:

- a memory whose own vector, group or liveness changed (its signature),
- a memory that listed a changed one among its close neighbours (it may have lost it),
- a memory at ≥ `consolidate_min` from a changed one's new vector (it may gain it, and it may
  push out a listed one, which was at least as close).

Those are asked again; every other memory's list stands. What the lists reflect is recorded with
them, in one transaction: the settings they were found with, every indexed memory's signature
and the event set they were found at. A compile after journal writes looks only at the memories
the new events name; any other change of the event set (a chunk imported, an older vault without
these tables, other settings) compares every signature, or starts over with a full run.

Bringing them up to date is two steps, so that it can be done a slice at a time (an MCP server
answers tool calls between slices: compiler.memory.maintenance.prepare_maintenance): planning
puts the memories to ask into a to-do table and records the event set (one transaction), asking
takes them from it a batch at a time (one transaction a batch). A change that lands between two
batches is planned by the next call, as any change is; a memory on the to-do list is asked with
the vectors and groups of the moment it is asked.
"""

from __future__ import annotations

import bisect
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.derived_sqlite import connect_derived
from compiler.core.errors import DERIVED, full_disk_guard
from compiler.index.cache import text_hash
from compiler.memory.index import memory_text
from compiler.memory.model import Observation
from compiler.memory.snapshot import EventSet, event_mark, named_since

CONSOLIDATED_KINDS = ("memory", "failure")
NEIGHBOURS = 10
POOL = 2 * NEIGHBOURS  # asked of the index, then ranked exactly (`_nearest`)
SLACK = 1e-5  # a·b and b·a, computed in other orders, may differ in the last bits: ask a little wider
VERSION = "2"  # of what the tables hold: another value starts over
BATCH = 256  # memories asked in one transaction at most: the flat store scores 256 queries a pass
PLAN_BATCH = 4096  # memories whose signatures a slice of a full run's plan records (~40 ms at 50,000)
PROBE = 4  # a slice's first batch, timed to size the next ones to what is left of its budget

Pair = tuple[str, str]
# per pair tables' file: (the full run being planned, the ids it plans in order); see `_plan_order`
_PLAN_ORDER: dict[str, tuple[tuple[str, ...], list[str]]] = {}


def is_candidate(obs: Observation) -> bool:
    """True for a memory consolidation may fold (progress records and handoffs never are)."""
    return obs.kind in CONSOLIDATED_KINDS


def signature(obs: Observation) -> str:
    """What a memory's place among the pairs depends on: the text of its vector, and its group."""
    return text_hash(f"{obs.kind}\x00{obs.project}\x00{obs.category}\x00{memory_text(obs)}")[:16]


class ClosePairs:
    """The pair tables, in the memory index's SQLite file: derived, dropping them costs one full run."""

    def __init__(self, path: Path) -> None:
        self._path = path
        with full_disk_guard(path, "the memory index", after=DERIVED):
            self._db = connect_derived(path)
            self._db.executescript(
                "CREATE TABLE IF NOT EXISTS close_meta (key TEXT PRIMARY KEY, value TEXT);"
                "CREATE TABLE IF NOT EXISTS close_rows (id TEXT PRIMARY KEY, sig TEXT);"
                # grouped: b may fold with a (a candidate of a's project, category and kind); the
                # other pairs matter only for knowing whom a change concerns
                "CREATE TABLE IF NOT EXISTS close_pairs (a TEXT, b TEXT, grouped INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID;"
                "CREATE INDEX IF NOT EXISTS close_pairs_b ON close_pairs (b);"
                # the memories planned to be asked again and not yet asked (every candidate, in a full run)
                "CREATE TABLE IF NOT EXISTS close_todo (id TEXT PRIMARY KEY) WITHOUT ROWID;")

    def __enter__(self) -> ClosePairs:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def current(self, vectors: Any, indexed: Mapping[str, Observation], events: EventSet,
                threshold: float, fingerprint: str) -> tuple[list[Pair], int]:
        """Returns every (memory, close neighbour) pair of the `indexed` memories as the index holds
        them now that may fold together (same project, category and kind; both candidates), and
        how many memories were asked for their neighbours to find them."""
        asked, _ = self.advance(vectors, indexed, events, threshold, fingerprint)
        return list(self._db.execute("SELECT a, b FROM close_pairs WHERE grouped ORDER BY a, b")), asked

    def advance(self, vectors: Any, indexed: Mapping[str, Observation], events: EventSet, threshold: float,
                fingerprint: str, budget: float | None = None) -> tuple[int, bool]:
        """Plans what changed since the pairs were last brought up to date, then asks the planned
        memories, every one, or batches until `budget` seconds have passed; returns how many were
        asked and whether none is left to ask."""
        fingerprint = f"{VERSION}:{fingerprint}:{threshold!r}:{NEIGHBOURS}"
        # One transaction: the plan, the signatures it reflects and the event key change together
        # or not at all (a crashed run leaves the last run's state, which the next one brings up to date).
        with full_disk_guard(self._path, "the memory index", after=DERIVED), self._db:
            meta = dict(self._db.execute("SELECT key, value FROM close_meta"))
            if meta.get("fingerprint") != fingerprint:
                meta = self._plan_full(indexed, events, fingerprint, meta, budget is None)
                if meta.get("planning"):
                    return 0, False
            # what changed since the mark: since the last run, or since a full run's plan began
            self._plan_patch(vectors, indexed, self._changed(indexed, named_since(events, meta)), threshold)
            self._write_meta({"fingerprint": fingerprint, **event_mark(events)})
        started, asked, size = time.perf_counter(), 0, BATCH if budget is None else PROBE
        while batch := [i for (i,) in self._db.execute("SELECT id FROM close_todo ORDER BY id LIMIT ?", (size,))]:
            began = time.perf_counter()
            asked += self._ask_again(vectors, indexed, batch, threshold)
            if budget is not None:  # a query's cost grows with the store: the batch follows it
                each, left = (time.perf_counter() - began) / len(batch), budget - (time.perf_counter() - started)
                if left < each:
                    return asked, self._db.execute("SELECT 1 FROM close_todo LIMIT 1").fetchone() is None
                size = max(1, min(BATCH, int(left / each)))
        return asked, True

    def _plan_full(self, indexed: Mapping[str, Observation], events: EventSet, fingerprint: str,
                   meta: dict[str, str], whole: bool) -> dict[str, str]:
        """Plans the full run: every recorded pair goes, every candidate is to be asked. The first
        call marks the events it began at; each call records the signatures of the next PLAN_BATCH
        memories by id (all of them when `whole`); returns the marks, with `planning` while some
        are left. A memory that changes meanwhile is named after the mark: the patch that follows
        the plan asks it again, wherever it was in the order."""
        if meta.get("planning") != fingerprint:
            for table in ("close_pairs", "close_rows", "close_todo"):
                self._db.execute(f"DELETE FROM {table}")
            meta = {"planning": fingerprint, "planned": "", **event_mark(events)}
        order = self._plan_order(indexed, meta)
        take, at = [], bisect.bisect_right(order, meta["planned"])
        while at < len(order) and (whole or len(take) < PLAN_BATCH):
            if order[at] in indexed:  # gone since the order was taken: not planned (as if it never was)
                take.append(order[at])
            at += 1
        self._db.executemany("INSERT OR REPLACE INTO close_rows (id, sig) VALUES (?, ?)",
                             ((i, signature(indexed[i])) for i in take))
        self._db.executemany("INSERT OR IGNORE INTO close_todo (id) VALUES (?)",
                             ((i,) for i in take if is_candidate(indexed[i])))
        if at < len(order):
            meta = {**meta, "planned": take[-1] if take else order[at - 1]}
        else:
            _PLAN_ORDER.pop(str(self._path), None)
            meta = {k: v for k, v in meta.items() if k not in ("planning", "planned")}
        self._write_meta(meta)
        return meta

    def _plan_order(self, indexed: Mapping[str, Observation], meta: dict[str, str]) -> list[str]:
        """Returns the ids a full run plans, sorted: taken once per run and process and kept
        between its slices (sorting every memory's id again in each slice was most of a slice
        past 100,000 memories: 67 ms at 150,000, 280 ms at 500,000, against a 30 ms budget). A
        memory saved after the order was taken is not in it: it is named after the plan's mark,
        so the patch that follows the plan asks it, as it asks any change."""
        plan = (meta["planning"], *(meta.get(k, "") for k in ("chunks", "chunk_last", "count", "last")))
        kept = _PLAN_ORDER.get(str(self._path))
        if kept is None or kept[0] != plan:
            kept = plan, sorted(indexed)
            _PLAN_ORDER[str(self._path)] = kept
        return kept[1]

    def _write_meta(self, meta: dict[str, str]) -> None:
        self._db.execute("DELETE FROM close_meta")
        self._db.executemany("INSERT INTO close_meta (key, value) VALUES (?, ?)", sorted(meta.items()))

    def _changed(self, indexed: Mapping[str, Observation], named: set[str] | None) -> set[str]:
        """Returns the memories whose signature is not the recorded one (a memory gone from the
        index, or new to it, included), among `named` (every memory when None)."""
        if named is None:
            recorded = dict(self._db.execute("SELECT id, sig FROM close_rows"))
            ids: Iterable[str] = set(recorded) | set(indexed)
        else:
            recorded = dict(_select(self._db, "SELECT id, sig FROM close_rows WHERE id IN ({})", sorted(named)))
            ids = named
        return {i for i in ids if recorded.get(i) != (signature(indexed[i]) if i in indexed else None)}

    def _plan_patch(self, vectors: Any, indexed: Mapping[str, Observation], changed: set[str], threshold: float) -> None:
        """Plans to ask again the memories whose pairs `changed` may change (module docstring)."""
        if not changed:
            return
        affected = set(changed)
        affected.update(a for (a,) in _select(self._db, "SELECT a FROM close_pairs WHERE b IN ({})", sorted(changed)))
        present = sorted(i for i in changed if i in indexed)
        affected.update(i for i in _within(vectors, present, threshold - SLACK) if i in indexed)
        self._db.executemany("INSERT OR IGNORE INTO close_todo (id) VALUES (?)", ((i,) for i in sorted(affected)))
        self._db.executemany("DELETE FROM close_rows WHERE id = ?", ((i,) for i in sorted(changed)))
        self._db.executemany("INSERT INTO close_rows (id, sig) VALUES (?, ?)", ((i, signature(indexed[i])) for i in present))

    def _ask_again(self, vectors: Any, indexed: Mapping[str, Observation], batch: list[str], threshold: float) -> int:
        """Asks the `batch` of planned memories (those still indexed candidates) for their pairs,
        in place of their recorded ones; returns how many were asked."""
        sources = [i for i in batch if i in indexed and is_candidate(indexed[i])]
        pairs = _ask(vectors, indexed, sources, threshold)
        with full_disk_guard(self._path, "the memory index", after=DERIVED), self._db:
            self._db.executemany("DELETE FROM close_pairs WHERE a = ?", ((i,) for i in batch))
            self._db.executemany("INSERT INTO close_pairs (a, b, grouped) VALUES (?, ?, ?)", pairs)
            self._db.executemany("DELETE FROM close_todo WHERE id = ?", ((i,) for i in batch))
        return len(sources)


def _ask(vectors: Any, indexed: Mapping[str, Observation], sources: Sequence[str],
         threshold: float) -> list[tuple[str, str, bool]]:
    """Returns (source, other, grouped) for each of the NEIGHBOURS nearest rows of each source at ≥ threshold."""
    stored = vectors.vectors(sources)
    asked = [i for i in sources if i in stored]
    if not asked:
        return []
    found = vectors.query_many(np.vstack([stored[i] for i in asked]), POOL)
    pool = vectors.vectors(sorted({other for hits in found for other, _ in hits}))
    return [(i, other, other in indexed and _foldable(indexed[i], indexed[other]))
            for i, hits in zip(asked, found) for other in _nearest(stored[i], [o for o, _ in hits if o != i], pool, threshold)]


def _nearest(source: np.ndarray, others: Sequence[str], pool: Mapping[str, np.ndarray], threshold: float) -> list[str]:
    """The NEIGHBOURS nearest of `others` at ≥ threshold, scored again pair by pair in float64 and
    ties broken by id. The index's batched product rounds a cosine differently with the batch's
    shape, so two equally close memories came out in either order: an incremental run (a few
    queries) and a full run (all of them) disagreed on which of them was the tenth."""
    if not others:
        return []
    # an elementwise product summed row by row: each row's sum is made the same way wherever it sits
    cosines = (np.vstack([pool[o] for o in others]).astype(np.float64) * source.astype(np.float64)).sum(axis=1)
    scored = sorted(zip((-cosines).tolist(), others))
    return [o for minus, o in scored[:NEIGHBOURS] if -minus >= threshold]


def _foldable(a: Observation, b: Observation) -> bool:
    """True when consolidation may fold `b` with `a`: a candidate of the same project, category and kind."""
    return is_candidate(b) and (a.project, a.category, a.kind) == (b.project, b.category, b.kind)


def _within(vectors: Any, ids: Sequence[str], threshold: float) -> set[str]:
    """Returns every row at ≥ threshold from any of `ids`: a top-n query, widened until it ends below."""
    stored = vectors.vectors(ids)
    pending, found, n = [i for i in ids if i in stored], set(), 4 * NEIGHBOURS
    total = vectors.count()
    while pending:
        hits = vectors.query_many(np.vstack([stored[i] for i in pending]), n)
        found.update(other for row in hits for other, cosine in row if cosine >= threshold)
        pending = [i for i, row in zip(pending, hits) if len(row) == n < total and row[-1][1] >= threshold]
        n *= 4
    return found


def _select(db: sqlite3.Connection, sql: str, ids: Sequence[str]) -> Iterable[tuple[str, ...]]:
    """Runs `sql` with `IN ({})` filled in, in batches (SQLite bounds the parameters of one statement)."""
    for start in range(0, len(ids), 500):
        batch = ids[start:start + 500]
        yield from db.execute(sql.format(",".join("?" * len(batch))), batch)
