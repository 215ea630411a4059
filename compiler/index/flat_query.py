"""Scoring a flat store's rows (compiler.index.flat): queries as unit rows, a Chroma-style `where`
as the rows it matches (a `Group`, kept per snapshot with their vectors as one matrix), and the n
best of a row of scores."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.errors import InputError


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Returns `vectors` scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def query_rows(vectors: np.ndarray, dim: int, path: Path) -> np.ndarray:
    """Returns the queries as float32 unit rows, checked against the store's width `dim`."""
    queries = unit_rows(np.asarray(vectors, dtype=np.float32))
    if queries.shape[1] != dim:
        raise InputError(f"the store holds {dim}-dimensional vectors, the query is "
                         f"{queries.shape[1]}-dimensional (a new model: run `engram compile`)", path=str(path))
    return queries


def best_of(scores: np.ndarray, n: int) -> np.ndarray:
    """Returns the indexes of the `n` highest scores, best first (ties by index)."""
    n = min(n, len(scores))
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
    return top[np.lexsort((top, -scores[top]))]


def where_clauses(where: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """Returns a where as (metadata key, accepted values) pairs, all of which must hold."""
    if set(where) == {"$and"}:  # Chroma's spelling of several conditions: the same as one dict of them
        where = {k: v for part in where["$and"] for k, v in part.items()}
    clauses = []
    for key, wanted in sorted(where.items()):
        if not re.fullmatch(r"\w+", key):
            raise ValueError(f"unsupported where key: {key!r}")
        if isinstance(wanted, dict):
            (op, value), = wanted.items()
            values = list(value) if op == "$in" else [value] if op == "$eq" else None
            if values is None:
                raise ValueError(f"unsupported where operator: {op}")
        else:
            values = [wanted]
        clauses.append((key, values))
    return clauses


GROUP_CACHE_BYTES = 1 << 30  # the matrices of `Group`s a process keeps per store, at most (~700,000 384-d rows)
GROUP_COMPACT_MIN = 1024  # dead rows a group keeps whatever its live count


@dataclass(eq=False)  # compared by identity
class Group:
    """The rows a `where` matches: every row that matched it since the snapshot was read (a row
    that died since stays until the group is compacted), ascending, and once a query scored them,
    their vectors as one matrix kept beside them.

    Why the matrix: a project's rows lie one in twenty in the row file (as they were written), and
    gathering them into one matrix for every query was most of a write's resolve and of a recall's
    vector search at scale (25,000 rows of a 500,000-row store: 20–35 ms, the product over the
    gathered rows 4–5 ms). Kept, the gather is paid once per process and snapshot, and this
    process's own writes extend it (`FlatStore.add` → `advance_snapshot`). Exact: the same rows,
    the same floats, scored the same way."""

    clauses: list[tuple[str, list[Any]]]
    rows: np.ndarray  # int64, ascending
    matrix: np.ndarray | None = None  # float32, one row per entry of `rows`; None until a query needs it
    used: int = 0  # when a query last scored it (`Snapshot.clock`): the least recently used matrix is dropped first

    def live(self, alive: np.ndarray) -> np.ndarray:
        """Returns which of the group's rows are alive, compacting the group first when its dead
        rows pass a quarter of its live ones (and GROUP_COMPACT_MIN): every query scores the dead
        rows too, so they are kept few; the copy is O(group), amortised over the deaths."""
        keep = alive[self.rows]
        dead = len(keep) - int(np.count_nonzero(keep))
        if dead > max((len(keep) - dead) // 4, GROUP_COMPACT_MIN):
            self.rows = self.rows[keep]
            if self.matrix is not None:
                self.matrix = self.matrix[keep]
            keep = np.ones(len(self.rows), dtype=bool)
        return keep

    def extend(self, first: int, vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        """Adds the rows appended from `first` on (their `vectors` and `metadatas`) that match."""
        new = [k for k, m in enumerate(metadatas) if all(m.get(key) in values for key, values in self.clauses)]
        if new:
            self.rows = grown(self.rows, np.arange(first, first + len(metadatas), dtype=np.int64)[new])
            if self.matrix is not None:
                self.matrix = grown(self.matrix, np.asarray(vectors, dtype=np.float32)[new])

    @property
    def nbytes(self) -> int:
        return 0 if self.matrix is None else len(self.matrix) * self.matrix.shape[1] * 4


def matching(db: sqlite3.Connection | None, groups: dict[str, Group], where: dict[str, Any]) -> Group:
    """Returns the rows matching a Chroma-style `where`: {key: value}, {key: {"$eq"|"$in": …}},
    {"$and": [...]}. A where on text values is kept in `groups` (the snapshot's) and extended by
    this process's own writes (selecting a project's 2,500 rows again took 4 ms per write at 50k)."""
    clauses = where_clauses(where)
    key = repr(clauses)
    if key in groups:
        return groups[key]
    assert db is not None
    sql = " AND ".join(f"json_extract(metadata, '$.{k}') IN ({','.join('?' * len(v))})" for k, v in clauses)
    found = np.sort(np.fromiter((r for (r,) in db.execute(f"SELECT row FROM items WHERE {sql}",
                                                          [x for _, v in clauses for x in v])), dtype=np.int64))
    group = Group(clauses, found)
    if all(isinstance(x, str) for _, v in clauses for x in v):  # json_extract and Python agree on text
        groups[key] = group
    return group


def grown(kept: np.ndarray, more: np.ndarray) -> np.ndarray:
    """Returns `kept` with `more` after it, in a buffer with room to spare (amortised O(more) per
    append): a view, so older views of `kept` keep seeing exactly their own rows."""
    base = kept.base if kept.base is not None and kept.base.ndim == kept.ndim and kept.base.dtype == kept.dtype else kept
    end = len(kept) + len(more)
    if base is kept or len(base) < end or base.shape[1:] != more.shape[1:] or base.dtype != more.dtype:
        bigger = np.empty((max(end + end // 4, 256), *more.shape[1:]), dtype=more.dtype)
        bigger[:len(kept)] = kept
        base = bigger
    base[len(kept):end] = more
    return base[:end]
