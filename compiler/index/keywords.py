"""Stage 6b, index keywords: SQLite FTS5 with BM25 ranking. Standard library only.

Keyword search opens only this file, so a cold `engram search` never imports torch or Chroma.
"""

from __future__ import annotations

import math
import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from compiler.core.derived_sqlite import connect_readonly
from compiler.core.errors import DERIVED, full_disk_guard

# remove_diacritics folds "diseño"/"diseno" and "reunión"/"reunion" together (Spanish notes);
# porter stems English inflections ("deploys" finds "deployment").
TOKENIZER = "porter unicode61 remove_diacritics 2"
# bm25() weights, in column order: path, ordinal, line (unindexed), title, heading, body, tags, cjk.
WEIGHTS = (0.0, 0.0, 0.0, 4.0, 2.0, 1.0, 2.0, 1.0)
# The matches of an expression (?1), best first by the rank function ?2 (bm25 with WEIGHTS).
RANKED_SECTIONS = ("SELECT path, ordinal, line, title, rank, snippet(sections, 5, '**', '**', '…', 16), body "
                   "FROM sections WHERE sections MATCH ? AND rank MATCH ? ORDER BY rank")
_WORD = re.compile(r"\w+", re.UNICODE)
# Chinese, Japanese and Korean write words without spaces between them (Korean glues particles
# on), so unicode61 makes a whole run one token and "语义图谱" never matches "构建语义图谱的方法".
# Each run is also indexed as overlapping character pairs (bigrams, as CJK search engines do) in
# the `cjk` column, and a query's runs become their pairs: any two-character word matches, where
# FTS5's trigram tokenizer needs three. Other scripts never reach the column, so their ranking
# is unchanged (the notes bench gives the same figures with and without it).
_CJK = re.compile("[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
                  "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]+")


@dataclass(frozen=True)
class NoteRow:
    path: str
    sha256: str
    title: str
    tags: str  # space-separated


@dataclass(frozen=True)
class SectionRow:
    path: str
    ordinal: int
    line: int
    title: str
    heading: str
    body: str
    tags: str  # space-separated


@dataclass(frozen=True)
class KeywordHit:
    path: str
    ordinal: int
    line: int
    title: str
    bm25: float  # positive; larger is better
    snippet: str
    body: str = ""  # the section's text: what hybrid search re-reads for late interaction


class KeywordIndex:
    """The FTS5 table of sections, one row per section."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        if readonly:
            self._db = connect_readonly(path)
            return
        self._path = path
        with self._guard():
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path)
            if self._columns() and "cjk" not in self._columns():  # written by an engram without CJK pairs
                self._db.execute("DROP TABLE sections")  # an empty index: the compile refills it
            self._db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS sections USING fts5(path UNINDEXED, ordinal UNINDEXED, "
                f"line UNINDEXED, title, heading, body, tags, cjk, tokenize='{TOKENIZER}')")
            # One row per note: what filters and hit ids need without reading the build state.
            self._db.execute("CREATE TABLE IF NOT EXISTS notes (path TEXT PRIMARY KEY, sha256 TEXT, title TEXT, tags TEXT)")

    def _columns(self) -> list[str]:
        return [row[1] for row in self._db.execute("PRAGMA table_info(sections)")]

    def _guard(self, needed: int = 0) -> AbstractContextManager[None]:
        """Returns the context that turns a full disk under this index into one StorageFullError."""
        return full_disk_guard(self._path, "the keyword index", needed=needed, after=DERIVED)

    def reset(self) -> None:
        with self._guard(), self._db:
            self._db.execute("DELETE FROM sections")
            self._db.execute("DELETE FROM notes")

    def count(self) -> int:
        return self._db.execute("SELECT count(*) FROM sections").fetchone()[0]

    def replace_paths(self, deleted: Sequence[str], notes: Iterable[NoteRow], rows: Iterable[SectionRow]) -> None:
        """Deletes every row of `deleted` paths, then inserts `notes` and `rows`, in one transaction."""
        rows = list(rows)
        with self._guard(sum(len(r.body) + len(r.heading) + len(r.title) for r in rows)), self._db:
            self._db.executemany("DELETE FROM sections WHERE path = ?", [(p,) for p in deleted])
            self._db.executemany("DELETE FROM notes WHERE path = ?", [(p,) for p in deleted])
            self._db.executemany("INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?)",
                                 [(n.path, n.sha256, n.title, n.tags) for n in notes])
            self._db.executemany("INSERT INTO sections VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 [(r.path, r.ordinal, r.line, r.title, r.heading, r.body, r.tags,
                                   cjk_pairs(f"{r.title} {r.heading} {r.body}")) for r in rows])

    def notes(self, paths: Iterable[str]) -> dict[str, NoteRow]:
        """Returns the note rows of `paths` that are indexed."""
        found: dict[str, NoteRow] = {}
        for path in set(paths):
            row = self._db.execute("SELECT path, sha256, title, tags FROM notes WHERE path = ?", (path,)).fetchone()
            if row:
                found[path] = NoteRow(*row)
        return found

    def notes_with_hash_prefix(self, prefix: str) -> list[NoteRow]:
        """Returns the note rows whose sha256 starts with `prefix` (lowercase hex): what a docid names."""
        rows = self._db.execute("SELECT path, sha256, title, tags FROM notes WHERE substr(sha256, 1, ?) = ? "
                                "ORDER BY path", (len(prefix), prefix))
        return [NoteRow(*row) for row in rows]

    def search(self, query: str, limit: int) -> list[KeywordHit]:
        """Returns up to `limit` sections matching any word of `query`, best BM25 first."""
        expression = match_expression(query)
        if not expression or limit < 1:
            return []
        weights = ", ".join(str(w) for w in WEIGHTS[:len(self._columns())])  # an index not rebuilt yet has no cjk
        # `ORDER BY rank` on FTS5's own rank column, weighted by `rank MATCH`: FTS5 scores and sorts
        # the matches itself and reads a row's columns and snippet only when the row is fetched.
        # Sorted by an expression (bm25(...), path) SQLite read the body and made the snippet of
        # every match first: 11,000 sections for a six-word query at 10,000 notes, 2.5× the CPU.
        rows = self._db.execute(RANKED_SECTIONS, (expression, f"bm25({weights})"))
        hits: list[KeywordHit] = []
        for p, o, l, t, r, s, b in rows:
            if len(hits) >= limit and -float(r) != hits[limit - 1].bm25:  # past the last tie of the limit-th
                break
            hits.append(KeywordHit(p, int(o), int(l), t, -float(r), s, b))
        hits.sort(key=lambda h: (-h.bm25, h.path, h.ordinal))  # ties by path, as before
        return hits[:limit]

    def coverage(self, query: str) -> float:
        """Returns the share of the query's keyword weight (IDF of each content word) that the index holds.

        1.0 when every word occurs somewhere; near 0 when the words are foreign to the vault (a
        Spanish question over English notes), where the best BM25 match is noise and hybrid
        search should lean on meaning instead.
        """
        words = match_words(query)
        if not words:
            return 0.0
        total = self.count()
        found = weight = 0.0
        for word in words:
            matches = self._db.execute("SELECT count(*) FROM sections WHERE sections MATCH ?",
                                       (f'"{word}"',)).fetchone()[0]
            idf = math.log((total - matches + 0.5) / (matches + 0.5) + 1.0)  # BM25's IDF
            weight += idf
            found += idf if matches else 0.0
        return found / weight if weight else 0.0

    def close(self) -> None:
        self._db.close()


# Function words of English and Spanish. Dropped from OR-queries: "what did she do in May?"
# should rank by "May", not by every note holding "did". (LoCoMo Hit@5 +1.7 points.)
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves
al algo como con cual cuando de del desde donde el ella ellas ellos en entre era es esa ese eso esta este esto fue
ha han hay la las le les lo los mas me mi muy no nos o para pero por que se ser si sin sobre su sus te tu un una uno
unos y ya yo
""".split())


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def match_expression(query: str) -> str:
    """Returns an FTS5 MATCH expression: every content word quoted (no syntax injection), OR-ed.

    OR, not AND: BM25 still ranks notes holding all words first, and a natural-language
    question ("how do we deploy?") should not need every word to appear. Stopwords are
    dropped unless the query has nothing else.
    """
    return " OR ".join(f'"{w}"' for w in match_words(query))


def match_words(query: str) -> list[str]:
    """Returns the query's distinct words, lower-cased, without stopwords unless nothing else is
    left; a run of CJK characters also brings its character pairs (`cjk_pairs`)."""
    # The run itself too: it matches a run written alone (a memory's keywords have no pair column).
    spread = _CJK.sub(lambda m: f" {m.group()} {cjk_pairs(m.group())} ", query)
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(spread)))
    return [w for w in words if _fold(w) not in STOPWORDS] or words


def cjk_pairs(text: str) -> str:
    """Returns every run of CJK characters in `text` as its overlapping pairs, space-separated
    ("语义图谱" → "语义 义图 图谱"; a lone character stays itself); "" for text without CJK."""
    return " ".join(" ".join(run[k:k + 2] for k in range(max(1, len(run) - 1))) for run in _CJK.findall(text))
