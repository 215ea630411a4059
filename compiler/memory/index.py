"""The index of live memories: a vector collection and an FTS5 table (BM25).

The vectors are the flat store's `memories` collection (`compiler.index.vector_index`: no Chroma
on a write or a recall; compile mirrors it into Chroma), or a Chroma server's.

Derived from the event fold and rebuildable from it: `sync_index` brings it in step with the
live memories, re-embedding only texts the embedding cache has not seen.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.derived_sqlite import connect_derived
from compiler.core.errors import DERIVED, full_disk_guard
from compiler.embed.embedder import Embedder
from compiler.index import late_interaction
from compiler.index.cache import EmbeddingCache, embed_with_cache, text_hash
from compiler.index.keywords import TOKENIZER, match_expression
from compiler.index.token_cache import TokenVectorCache
from compiler.index.vector_index import open_vectors
from compiler.memory.model import Observation

COLLECTION = "memories"
KEYWORDS_FILE = "memories.sqlite"  # in the cache folder: the keyword index, and maintenance's close pairs


def memory_text(obs: Observation) -> str:
    """Returns what is embedded and keyword-indexed for a memory: its title gives the content context."""
    title = obs.title.strip()
    return obs.content if not title or obs.content.startswith(title) else f"{title}\n{obs.content}"


_FAR = "\x1f"  # separates the near context (±1) from the far one (±2) in one string


def conversation_neighbours(live: Mapping[str, Observation], only: Iterable[str] | None = None,
                            followers: Mapping[str, Sequence[str]] | None = None
                            ) -> dict[str, tuple[list[str], list[str]]]:
    """Returns, per memory (of `only`, when given), the ids written one place (near) and two places
    (far) before and after it in one batch — its neighbours in a conversation. With `followers`
    (memory → the memories that follow it, in save order: `Lookups.followers`) only the
    neighbours of `only` are looked at, so a write's few rows cost the same at any store size."""
    if only is not None and followers is not None:
        def before(i: str) -> str:
            obs = live.get(i)
            return obs.follows if obs is not None and obs.follows in live else ""

        def after(i: str) -> str:
            return next((f for f in followers.get(i, ()) if f in live), "") if i in live else ""
    else:
        first_after: dict[str, str] = {}
        follows: dict[str, str] = {}
        for memory_id, obs in live.items():
            if obs.follows and obs.follows in live:  # most memories follow nothing: skip the lookups
                first_after.setdefault(obs.follows, memory_id)
                follows[memory_id] = obs.follows

        def before(i: str) -> str:
            return follows.get(i, "")

        def after(i: str) -> str:
            return first_after.get(i, "")
    neighbours = {}
    for i in live if only is None else [i for i in dict.fromkeys(only) if i in live]:
        near = [n for n in (before(i), after(i)) if n]
        far = [n for n in (before(before(i)), after(after(i))) if n]
        if near:
            neighbours[i] = (near, far)
    return neighbours


def conversation_context(live: Mapping[str, Observation], only: Iterable[str] | None = None,
                         followers: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """Returns, per memory (of `only`, when given), the text of its conversational neighbours as "near␟far".

    A turn of a conversation ("Yes, it was amazing!") often names its subject only in its
    neighbours; indexing them (at lower BM25 weights) lets keyword search find it. A write needs
    the context of the few rows it rewrites (`only`), not of every memory: building every
    memory's context string made each write O(store).
    """
    return {i: "\n".join(live[n].content for n in near) + _FAR + "\n".join(live[n].content for n in far)
            for i, (near, far) in conversation_neighbours(live, only, followers).items()}


class LiveView(Mapping[str, Observation]):
    """The live memories of a state, filtered on lookup: a write reads a few of them, and
    building the whole dict made every write O(store). Iterating it is O(store)."""

    def __init__(self, state: Mapping[str, Observation]) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Observation:
        obs = self._state[key]
        if not obs.live:
            raise KeyError(key)
        return obs

    def __iter__(self) -> Iterator[str]:
        return (i for i, o in self._state.items() if o.live)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class MemoryKeywordHit:
    id: str
    bm25: float  # positive; larger is better


TABLE = "memories_v5"  # a new name when the layout changes (an older table is moved over: `_migrate`)
WEIGHTS = "0, 0, 0, 1.0, 1.0, 0.5, 0.4"  # id, project, text_sha (unindexed), title, content, near, far context
# A row's rowid is its project's number << PROJECT_SHIFT plus its place in the project, so one
# project's rows are one rowid range, which FTS5 walks alone: filtering every match of a query's
# words on its project walked 20,000 matches of 50,000 memories for the 1,000 of one project.
PROJECT_SHIFT = 32
_OLD = "memories_v4"  # rows numbered in write order, the project checked per match


class MemoryKeywordIndex:
    """FTS5 over memory titles, contents and conversational context, plus the hash each row was built from."""

    def __init__(self, path: Path) -> None:
        self._path = path
        with full_disk_guard(path, "the memory keyword index", after=DERIVED):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = connect_derived(path)
            self._db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(id UNINDEXED, "
                             "project UNINDEXED, text_sha UNINDEXED, title, content, context, context2, "
                             f"tokenize='{TOKENIZER}')")
            # FTS5 cannot index a column for lookups: this table maps a memory id to its FTS rowid
            # (the same rowid), so replacing one row is a key lookup, not a scan of every memory.
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE}_rows (id TEXT PRIMARY KEY, text_sha TEXT)")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE}_projects (project TEXT PRIMARY KEY)")  # rowid: its number
            # The events the rows are in step with (`snapshot.event_mark`, with the embedding
            # identity): a fresh process checks only the memories named since (`sync_named`).
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE}_mark (key TEXT PRIMARY KEY, value TEXT)")
            if _exists(self._db, _OLD):
                _migrate(self._db)

    def hashes(self) -> dict[str, str]:
        return dict(self._db.execute(f"SELECT id, text_sha FROM {TABLE}_rows"))

    def count(self) -> int:
        return self._db.execute(f"SELECT count(*) FROM {TABLE}_rows").fetchone()[0]

    def mark(self) -> dict[str, str]:
        """Returns the recorded mark of the events the index is in step with ({} when none)."""
        return dict(self._db.execute(f"SELECT key, value FROM {TABLE}_mark"))

    def set_mark(self, mark: Mapping[str, str]) -> None:
        """Records `mark`. Only ever after the rows and vectors of the events it names are written:
        a crash before it leaves the older mark, which still tells the truth (the memories named
        since it are checked again, and found current)."""
        with full_disk_guard(self._path, "the memory keyword index", after=DERIVED), self._db:
            self._db.execute(f"DELETE FROM {TABLE}_mark")
            self._db.executemany(f"INSERT INTO {TABLE}_mark (key, value) VALUES (?, ?)", sorted(mark.items()))

    def hashes_of(self, ids: Sequence[str]) -> dict[str, str]:
        """Returns {id: the hash its row was built from} for the indexed ones of `ids`."""
        found: dict[str, str] = {}
        for start in range(0, len(ids), 500):  # SQLite caps the variables of one statement
            batch = list(ids[start:start + 500])
            found.update(self._db.execute(f"SELECT id, text_sha FROM {TABLE}_rows WHERE id IN "
                                          f"({','.join('?' * len(batch))})", batch))
        return found

    def replace(self, deleted: Iterable[str], rows: Iterable[tuple[str, ...]]) -> None:
        """Deletes `deleted` ids, then inserts (id, project, text_sha, title, content, context, context2) rows."""
        rows = list(rows)
        needed = sum(len(field) for row in rows for field in row)
        with full_disk_guard(self._path, "the memory keyword index", needed=needed, after=DERIVED), self._db:
            gone = [(i,) for i in deleted]
            self._db.executemany(f"DELETE FROM {TABLE} WHERE rowid = (SELECT rowid FROM {TABLE}_rows WHERE id = ?)", gone)
            self._db.executemany(f"DELETE FROM {TABLE}_rows WHERE id = ?", gone)
            for row in rows:
                rowid = self._next_rowid(row[1])
                self._db.execute(f"INSERT INTO {TABLE}_rows (rowid, id, text_sha) VALUES (?, ?, ?)", (rowid, row[0], row[2]))
                self._db.execute(f"INSERT INTO {TABLE} (rowid, id, project, text_sha, title, content, context, "
                                 "context2) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (rowid, *row))

    def _next_rowid(self, project: str) -> int:
        """Returns the rowid after the last one of `project`'s range, numbering a new project first."""
        first, last = self._range(project)
        if first is None:
            cursor = self._db.execute(f"INSERT INTO {TABLE}_projects (project) VALUES (?)", (project,))
            first, last = _bounds(cursor.lastrowid)
        # 2^32 places: a row moves to a new place only when its text or context changes.
        top = self._db.execute(f"SELECT max(rowid) FROM {TABLE}_rows WHERE rowid BETWEEN ? AND ?", (first, last)).fetchone()[0]
        return first if top is None else top + 1

    def _range(self, project: str) -> tuple[int | None, int]:
        """Returns the first and last rowid of `project`'s range ((None, 0) for a project never indexed)."""
        found = self._db.execute(f"SELECT rowid FROM {TABLE}_projects WHERE project = ?", (project,)).fetchone()
        return (None, 0) if found is None else _bounds(found[0])

    def search(self, query: str, limit: int, project: str = "") -> list[MemoryKeywordHit]:
        """Returns up to `limit` memories (of `project`, when given) matching any word of `query`,
        best BM25 first (over the whole table's statistics, so a project changes no score)."""
        expression = match_expression(query)
        first, last = self._range(project) if project else (0, 0)
        if not expression or first is None or limit <= 0:
            return []
        where, args = ("AND rowid BETWEEN ? AND ?", [first, last]) if project else ("", [])  # FTS5 seeks to the range
        # `ORDER BY rank, id LIMIT ?` without reading each match's id (~40% of a search over many
        # matches): only the matches up to the limit-th score, ties included, are looked up by rowid.
        found = self._db.execute(f"SELECT rowid, bm25({TABLE}, {WEIGHTS}) FROM {TABLE} WHERE {TABLE} MATCH ? {where}",
                                 [expression, *args]).fetchall()
        if len(found) > limit:
            cut = heapq.nsmallest(limit, (rank for _, rank in found))[-1]
            found = [(rowid, rank) for rowid, rank in found if rank <= cut]
        ids: dict[int, str] = {}
        for start in range(0, len(found), 500):  # SQLite caps the variables of one statement
            batch = [rowid for rowid, _ in found[start:start + 500]]
            ids.update(self._db.execute(f"SELECT rowid, id FROM {TABLE} WHERE rowid IN ({','.join('?' * len(batch))})", batch))
        ranked = sorted((rank, ids[rowid]) for rowid, rank in found if rowid in ids)[:limit]
        return [MemoryKeywordHit(i, -float(r)) for r, i in ranked]

    def close(self) -> None:
        self._db.close()


def _bounds(number: int) -> tuple[int, int]:
    """Returns the first and last rowid of the project numbered `number`."""
    return number << PROJECT_SHIFT, ((number + 1) << PROJECT_SHIFT) - 1


def _exists(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def _migrate(db: sqlite3.Connection) -> None:
    """Moves the rows of the table an older engram wrote (numbered in write order) into the current
    one, renumbered by project, and drops it: the same texts and hashes, so sync_index finds
    nothing to re-index (a rebuild would re-read every vector). In one write transaction, checked
    again inside it, so two processes opening the old cache at once move it once. An old table
    beside a filled current one (an older engram wrote after the move) is only dropped: what it
    added is in the journal, and sync_index indexes it."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if _exists(db, _OLD) and not db.execute(f"SELECT 1 FROM {TABLE}_rows LIMIT 1").fetchone():
            db.execute(f"INSERT OR IGNORE INTO {TABLE}_projects (project) SELECT DISTINCT project FROM {_OLD} ORDER BY project")
            db.execute("CREATE TEMP TABLE moved (old INTEGER PRIMARY KEY, new INTEGER)")
            db.execute(f"INSERT INTO moved SELECT old.rowid, (p.rowid << {PROJECT_SHIFT}) + "
                       "row_number() OVER (PARTITION BY old.project ORDER BY old.rowid) - 1 AS new "
                       f"FROM {_OLD} AS old JOIN {TABLE}_projects AS p ON p.project = old.project")
            db.execute(f"INSERT INTO {TABLE}_rows (rowid, id, text_sha) SELECT moved.new, r.id, r.text_sha "
                       f"FROM moved JOIN {_OLD}_rows AS r ON r.rowid = moved.old")
            db.execute(f"INSERT INTO {TABLE} (rowid, id, project, text_sha, title, content, context, context2) "
                       "SELECT moved.new, f.id, f.project, f.text_sha, f.title, f.content, f.context, f.context2 "
                       f"FROM moved JOIN {_OLD} AS f ON f.rowid = moved.old")
            db.execute("DROP TABLE moved")
        db.execute(f"DROP TABLE IF EXISTS {_OLD}")
        db.execute(f"DROP TABLE IF EXISTS {_OLD}_rows")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class MemoryIndex:
    """Vectors and keywords of live memories, opened together."""

    def __init__(self, cache_dir: Path, chroma_url: str = "") -> None:
        self.vectors = open_vectors(cache_dir, chroma_url, COLLECTION)  # the flat store unless a Chroma server
        self.keywords = MemoryKeywordIndex(cache_dir / KEYWORDS_FILE)
        self.embeddings = EmbeddingCache(cache_dir / "embeddings.sqlite")
        self.tokens = TokenVectorCache(cache_dir / "embeddings.sqlite")

    def close(self) -> None:
        self.vectors.close()
        self.keywords.close()
        self.embeddings.close()
        self.tokens.close()

    def embed(self, texts: Sequence[str], embedder: Callable[[], Embedder], identity: str) -> tuple[np.ndarray, int]:
        """Returns (vectors, how many were newly embedded), through the shared embedding cache.

        Their token vectors (late interaction) are cached in the same forward pass, so recall
        never waits for them.
        """
        fresh = late_interaction.cache_token_vectors(texts, self.tokens, self.embeddings, embedder, identity)
        vectors, embedded = embed_with_cache(texts, embedder, identity, self.embeddings)
        return vectors, fresh + embedded

    def best_per_piece(self, query: np.ndarray, texts: Mapping[str, str], embedder: Callable[[], Embedder],
                       identity: str) -> dict[str, np.ndarray]:
        """See `late_interaction.best_per_piece`: per text, each query piece's best cosine."""
        return late_interaction.best_per_piece(query, texts, self.tokens, self.embeddings, embedder, identity)

    def put(self, memories: Sequence[Observation], vectors: np.ndarray, context: Mapping[str, str]) -> None:
        """Indexes (or re-indexes) `memories` with their vectors and conversational context."""
        if not memories:
            return
        ids = [m.id for m in memories]
        self.keywords.replace(ids, [keyword_row(m, context.get(m.id, "")) for m in memories])
        self.vectors.add(ids, vectors, [memory_text(m) for m in memories], [_metadata(m) for m in memories])

    def put_keywords(self, memories: Sequence[Observation], context: Mapping[str, str]) -> None:
        """Re-indexes only the keyword rows (the context changed, the vector did not)."""
        self.keywords.replace([m.id for m in memories], [keyword_row(m, context.get(m.id, "")) for m in memories])

    def drop(self, ids: Sequence[str]) -> None:
        if ids:
            self.keywords.replace(ids, [])
            self.vectors.delete_ids(ids)

    def nearest(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Returns up to `n` (id, cosine) of the closest live memories, best first."""
        return [(h.id, h.cosine) for h in self.vectors.query(vector, n, where)]


def keyword_row(obs: Observation, context: str) -> tuple[str, str, str, str, str, str, str]:
    """Returns the FTS row of a memory. A title that merely repeats the content's start is not
    indexed again, so it does not count twice."""
    title = "" if obs.content.startswith(obs.title.rstrip("…")) else obs.title
    near, _, far = context.partition(_FAR)
    return (obs.id, obs.project, row_hash(obs, context), title, obs.content, near, far)


def row_hash(obs: Observation, context: str) -> str:
    return text_hash(f"{memory_text(obs)}\x00{context}")


def _metadata(obs: Observation) -> dict[str, Any]:
    return {"project": obs.project, "category": obs.category, "kind": obs.kind}


def sync_index(index: MemoryIndex, live: Mapping[str, Observation], embedder: Callable[[], Embedder],
               identity: str) -> int:
    """Brings the index in step with the `live` memories; returns how many texts were embedded.
    Checks every memory's row: O(store)."""
    indexed = index.keywords.hashes()
    context = conversation_context(live)
    stale = sorted(i for i, m in live.items() if indexed.get(i) != row_hash(m, context.get(i, "")))
    gone = sorted(set(indexed) - set(live))
    return _rewrite(index, live, stale, gone, context, embedder, identity)


def sync_named(index: MemoryIndex, state: Mapping[str, Observation], named: Iterable[str],
               followers: Mapping[str, Sequence[str]], embedder: Callable[[], Embedder], identity: str) -> int:
    """Does what `sync_index` does for the live memories of `state`, when the index was in step
    with an earlier state and only the memories `named` changed since: only their rows and those
    whose conversational context holds them (`context_reach`) are checked. The same rows as a
    full check, at the cost of the change; when vectors and rows disagree (vectors lost), a full
    check. `followers`: `Lookups.followers` of `state`."""
    live = LiveView(state)
    if index.vectors.count() != index.keywords.count():
        return sync_index(index, {i: o for i, o in state.items() if o.live}, embedder, identity)
    reach = sorted(context_reach(state, named, followers))
    indexed = index.keywords.hashes_of(reach)
    present = [i for i in reach if i in live]
    context = conversation_context(live, present, followers)
    stale = [i for i in present if indexed.get(i) != row_hash(live[i], context.get(i, ""))]
    gone = [i for i in reach if i in indexed and i not in live]
    return _rewrite(index, live, stale, gone, context, embedder, identity)


def context_reach(state: Mapping[str, Observation], named: Iterable[str],
                  followers: Mapping[str, Sequence[str]]) -> set[str]:
    """Returns `named` and every memory whose keyword row may change with them: a row's context
    is two places before and after it in a conversation (`conversation_neighbours`), so a change
    to a memory (its text, or whether it is live) reaches the memories up to two places before
    and after it — followed through every memory, live or not, as liveness may just have changed."""
    reach = set(named)
    frontier = set(reach)
    for _ in range(2):
        step: set[str] = set()
        for memory_id in frontier:
            obs = state.get(memory_id)
            if obs is not None and obs.follows:
                step.add(obs.follows)
            step.update(followers.get(memory_id, ()))
        frontier = step - reach
        reach |= step
    return reach


def _rewrite(index: MemoryIndex, live: Mapping[str, Observation], stale: Sequence[str], gone: Sequence[str],
             context: Mapping[str, str], embedder: Callable[[], Embedder], identity: str) -> int:
    """Drops the `gone` rows and re-embeds and puts the `stale` ones: every live one when the
    vectors were lost (a crash, a deleted folder)."""
    index.drop(gone)
    if index.vectors.count() != index.keywords.count():  # vectors lost: redo all
        index.vectors.reset()
        live = dict(live.items())
        context = conversation_context(live)
        stale = sorted(live)
    memories = [live[i] for i in stale]
    vectors, embedded = index.embed([memory_text(m) for m in memories], embedder, identity)
    index.put(memories, vectors, context)
    return embedded
