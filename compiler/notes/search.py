"""Search over a compiled vault: keyword (BM25), vector, and hybrid, one hit per note.

Every function returns plain dicts with the same keys (qmd's): docid, score (0..1), file,
line, title, snippet. `keyword_search` touches only SQLite: no torch, no Chroma; the vector
searches read the flat store (`compiler.index.vector_index`): no Chroma, no networkx.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.core.errors import NotFoundError
from compiler.embed.embedder import embed_query
from compiler.index.keywords import KeywordIndex, NoteRow
from compiler.notes.graph_store import ties

BM25_WEIGHT, VECTOR_WEIGHT = 0.4, 0.6  # within a note: which section's line and snippet a hit shows
STRONG_HITS = 3  # graph bonus goes to neighbours of this many best hits
POOL = 5  # sections fetched per wanted hit, before grouping by note and filtering
RERANK = 20  # notes of the hybrid's first ranking that late interaction scores again
ORDINALS = 16  # section ids asked for at once per note when reading a reranked note's vectors (most have fewer)


@dataclass(frozen=True)
class Filters:
    path: str = ""  # glob or folder prefix, vault-relative
    tag: str = ""  # a tag; also matches nested tags below it
    min_score: float = 0.0
    # The wiki's layers by folder (("raw", "raw"), ("wiki", "wiki")): a hit says which it is from,
    # "notes" for the person's own; `layer` keeps only hits from one.
    layers: tuple[tuple[str, str], ...] = ()
    layer: str = ""

    def accepts(self, note: NoteRow) -> bool:
        if self.path and not _path_matches(note.path, self.path):
            return False
        if self.layer and self.layer_of(note.path) != self.layer:
            return False
        wanted = self.tag.lower().lstrip("#")
        return not wanted or any(t == wanted or t.startswith(wanted + "/") for t in note.tags.split())


    def layer_of(self, path: str) -> str:
        return next((name for folder, name in self.layers if path.startswith(folder + "/")), "notes")


def _path_matches(path: str, pattern: str) -> bool:
    prefix = pattern.strip("/")
    return fnmatch.fnmatchcase(path, pattern) or path.startswith(prefix + "/") or path == prefix


def open_keyword_index(vault: Path) -> KeywordIndex:
    path = vault / ".engram" / "cache" / "fts.sqlite"
    if not path.is_file():
        raise NotFoundError(f"{vault}: not compiled yet (run `engram compile {vault}`)")
    return KeywordIndex(path, readonly=True)


def bm25_score(raw: float) -> float:
    """Maps a raw BM25 value (0..∞) to 0..1, the same way for every query: x / (1 + x)."""
    return raw / (1.0 + raw) if raw > 0 else 0.0


def keyword_search(vault: Path, query: str, n: int = 5, filters: Filters = Filters()) -> list[dict[str, Any]]:
    """Returns up to `n` notes ranked by BM25, best first."""
    index = open_keyword_index(vault)
    try:
        hits = index.search(query, limit=max(n, 1) * POOL * 4)
        rows = index.notes(h.path for h in hits)
    finally:
        index.close()
    best: dict[str, dict[str, Any]] = {}
    for hit in hits:
        row = rows.get(hit.path)
        if row and filters.accepts(row) and hit.path not in best:
            best[hit.path] = _hit(row, hit.line, bm25_score(hit.bm25), hit.snippet)
    return _finish(list(best.values()), n, filters)


def vector_search(vault: Path, query: str, n: int = 5, filters: Filters = Filters(), *,
                  embedder: Any, chroma_url: str = "") -> list[dict[str, Any]]:
    """Returns up to `n` notes ranked by the cosine of their best section, best first."""
    store = _open_vectors(vault, chroma_url)
    query_vector = embed_query(embedder, query)
    hits = store.query(query_vector, max(n, 1) * POOL * 4)
    index = open_keyword_index(vault)
    try:
        rows = index.notes(h.metadata.get("path", "") for h in hits)
    finally:
        index.close()
    best: dict[str, dict[str, Any]] = {}
    for hit in hits:
        row = rows.get(hit.metadata.get("path", ""))
        if row and filters.accepts(row) and row.path not in best:
            best[row.path] = _hit(row, int(hit.metadata.get("line", 1)), max(0.0, hit.cosine), _excerpt(hit.document))
    return _finish(list(best.values()), n, filters)


def hybrid_search(vault: Path, query: str, n: int = 5, filters: Filters = Filters(), *, embedder: Any,
                  chroma_url: str = "", graph_bonus: float = 0.03) -> list[dict[str, Any]]:
    """Returns up to `n` notes ranked by keywords, sentence vectors and late interaction together,
    plus a bonus for graph neighbours of strong hits.

    Each signal is a note's best section by it: BM25, the cosine of sentence vectors, and (for the
    first ranking's RERANK best notes, when the model has token vectors) late interaction
    (`_late`). Each is min-max scaled over the notes it ranks, so each spans 0..1 and none
    outweighs the others by its spread: BM25 relative to the best match gave that match the full
    keyword weight even when it held one incidental word of the question, while the meaning
    scores of the candidates lay within a few tenths (benchmarks/README.md, the held-out notes
    questions). First ranking: (c × BM25 + cosine) / (c + 1); the best RERANK notes then by
    (c × BM25 + c × whole + late) / (2c + 1): whole is the cosine of the note as a whole (the mean
    of its sections' vectors, `_whole_cosines`) in place of its best section's, and c is the share
    of the query's keyword weight the vault holds at all (`KeywordIndex.coverage`): a question in
    words the notes never use (another
    language) is ranked by late interaction, whose word pieces still match across languages where
    an English model's sentence vector does poorly. BM25-only candidates are scored with their
    real cosine (read from the vector store), so a keyword hit is never penalised for missing
    the vector pool.

    The fused value orders the hits; the score shown is it on the scale of the best meaning found
    (the best late match, else cosine, among the reranked notes' sections): reranked notes in the
    upper half of that scale, the first ranking's others below them in their first-round order,
    so a query with nothing close scores low.
    """
    pool = max(n, 1) * POOL * 4
    store = _open_vectors(vault, chroma_url)
    query_vector, query_pieces = _embed(embedder, query)
    vector_hits = {h.id: h for h in store.query(query_vector, pool)}
    index = open_keyword_index(vault)
    try:
        keyword_hits = {f"{h.path}#{h.ordinal}": h for h in index.search(query, pool)}
        best_bm25 = max((h.bm25 for h in keyword_hits.values()), default=0.0)
        coverage = index.coverage(query)
        keyword_scale = coverage / best_bm25 if best_bm25 > 0 else 0.0
        missing = [i for i in keyword_hits if i not in vector_hits]
        cosines = {i: h.cosine for i, h in vector_hits.items()}
        cosines.update({i: float(v @ query_vector) for i, v in store.vectors(missing).items()})
        rows = index.notes(i.rsplit("#", 1)[0] for i in set(vector_hits) | set(keyword_hits))
    finally:
        index.close()
    sections: dict[str, list[_Section]] = {}  # note path → its candidate sections
    for section_id in sorted(set(vector_hits) | set(keyword_hits)):
        row = rows.get(section_id.rsplit("#", 1)[0])
        if not row or not filters.accepts(row):
            continue
        keyword, vector = keyword_hits.get(section_id), vector_hits.get(section_id)
        sections.setdefault(row.path, []).append(_Section(
            bm25=keyword.bm25 if keyword else 0.0,
            keyword=BM25_WEIGHT * keyword_scale * (keyword.bm25 if keyword else 0.0),
            cosine=max(0.0, cosines.get(section_id, 0.0)),
            line=keyword.line if keyword else int(vector.metadata.get("line", 1)),  # type: ignore[union-attr]
            snippet=keyword.snippet if keyword else _excerpt(vector.document),  # type: ignore[union-attr]
            text=keyword.body if keyword else vector.document))  # type: ignore[union-attr]
    paths = sorted(sections)
    top_bm25 = {p: max(s.bm25 for s in sections[p]) for p in paths}  # a note by its best section
    top_cosine = {p: max(s.cosine for s in sections[p]) for p in paths}
    bm25, cosine = _min_max([top_bm25[p] for p in paths]), _min_max([top_cosine[p] for p in paths])
    first = {p: (coverage * b + c) / (coverage + 1) for p, b, c in zip(paths, bm25, cosine)}
    ranked = sorted(paths, key=lambda p: (-first[p], p))
    head, rest = ranked[:RERANK], ranked[RERANK:]
    if len(query_pieces):
        _late(vault, head, sections, rows, embedder, query_pieces)
    meanings = [max(s.meaning for s in sections[p]) for p in head]
    wholes = _whole_cosines(store, head, query_vector)
    fused = {p: (coverage * b + coverage * c + m) / (2 * coverage + 1) for p, b, c, m in zip(
        head, _min_max([top_bm25[p] for p in head]), _min_max([wholes.get(p, top_cosine[p]) for p in head]),
        _min_max(meanings))}
    head.sort(key=lambda p: (-fused[p], p))
    hits = [_hit(rows[p], (best := _shown(sections[p])).line, fused[p], best.snippet) for p in head]
    _add_graph_bonus(hits, vault / ".engram" / "cache" / "graph.sqlite", graph_bonus)
    scale = min(1.0, max(meanings, default=0.0)) or 1.0  # no meaning at all: the fused order on 0..1
    for hit in hits:
        hit["score"] = scale * (1.0 + hit["score"]) / 2
    hits += [_hit(rows[p], (best := _shown(sections[p])).line, scale * first[p] / 2, best.snippet) for p in rest]
    return _finish(hits, n, filters)


def _whole_cosines(store: Any, paths: list[str], query_vector: Any) -> dict[str, float]:
    """Returns the cosine between the query and each note of `paths` as a whole: the mean of all
    its sections' vectors (the vector related notes compare, `compiler.pipeline.graph.note_mean`).

    A note's best section is the max of as many draws as it has sections: a long page that touches
    everything has one section near almost any question, while its mean is as near as the page is
    as a whole (benchmarks/README.md, issue 27, round ten). Sections are `path#0` … `path#n-1`
    (`compiler.pipeline.index`), read in batches (ORDINALS, then four times the last) until a
    note's run ends.
    """
    import numpy as np  # here, not at the top: keyword search (`engram search`) never loads numpy

    found: dict[str, list[Any]] = {p: [] for p in paths}
    todo, start, size = list(paths), 0, ORDINALS
    while todo:
        asked = [(p, f"{p}#{i}") for p in todo for i in range(start, start + size)]
        vectors = store.vectors([i for _, i in asked])
        for path, section in asked:
            if (vector := vectors.get(section)) is not None:
                found[path].append(vector)
        start, size = start + size, 4 * size  # a long note (200 sections) in three reads
        todo = [p for p in todo if len(found[p]) == start]  # a full batch: the note may have more
    notes = [p for p in paths if found[p]]
    if not notes:
        return {}
    rows = np.asarray([v for p in notes for v in found[p]], dtype=np.float32)
    sums = np.add.reduceat(rows, np.cumsum([0] + [len(found[p]) for p in notes[:-1]]), axis=0)
    norms = np.linalg.norm(sums, axis=1)
    cosines = (sums @ query_vector) / np.where(norms > 0, norms, 1.0)  # the mean's cosine: the sum's
    return {p: max(0.0, float(c)) for p, c in zip(notes, cosines)}


def _min_max(values: list[float]) -> list[float]:
    """Returns `values` scaled to 0..1 (the least 0, the greatest 1); all 0 when they are equal."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    return [(v - low) / (high - low) if high > low else 0.0 for v in values]


def _shown(candidates: list[_Section]) -> _Section:
    """The section a note's hit points at: the best by BM25_WEIGHT × relative BM25 × coverage +
    VECTOR_WEIGHT × its meaning."""
    return max(candidates, key=lambda s: s.score(s.meaning))


@dataclass
class _Section:
    """A candidate section of hybrid search: its keyword match and its meaning."""

    bm25: float  # raw BM25, 0 when only the vectors found the section
    keyword: float  # BM25_WEIGHT × relative BM25 × coverage: for choosing the section a hit shows
    cosine: float
    line: int
    snippet: str
    text: str  # as stored: the note's title is not in front
    late: float | None = None  # late-interaction match, for the sections of reranked notes

    @property
    def meaning(self) -> float:
        return self.cosine if self.late is None else self.late

    def score(self, meaning: float) -> float:
        return self.keyword + VECTOR_WEIGHT * meaning


def _open_vectors(vault: Path, chroma_url: str) -> Any:
    """Opens the notes' vector store; imported here, not at the top: `engram search` never loads numpy."""
    from compiler.index.vector_index import open_for_search
    from compiler.index.vectors import COLLECTION

    return open_for_search(vault / ".engram" / "cache", chroma_url, COLLECTION)


def _embed(embedder: Any, query: str) -> tuple[Any, Any]:
    """Returns the query's sentence vector and its word-piece vectors (empty when the model has none)."""
    import numpy as np  # here, not at the top: keyword search (`engram search`) never loads numpy

    from compiler.index import late_interaction

    if late_interaction.supports(embedder) and not hasattr(embedder, "embed_query"):
        return late_interaction.embed_query(embedder, query)
    return embed_query(embedder, query), np.zeros((0, 0), dtype=np.float32)


def _late(vault: Path, head: list[str], sections: dict[str, list[_Section]], rows: dict[str, NoteRow],
          embedder: Any, query_pieces: Any) -> None:
    """Sets the late-interaction match of every candidate section of the notes in `head`.

    A sentence vector blurs a section into its topic; matching word piece by word piece (MaxSim,
    compiler.index.late_interaction) keeps the question's own words apart and still matches across
    languages, where BM25 finds nothing (benchmarks/README.md). The token vectors are the ones the
    compile stored (int8): reading a few hundred candidates' costs little, scoring every
    section would not. A section without them keeps its cosine (`_Section.meaning`).
    """
    from compiler.index import late_interaction
    from compiler.index.token_cache import TokenVectorCache

    cache_file = vault / ".engram" / "cache" / "embeddings.sqlite"
    todo = [s for p in head for s in sections[p]]
    if not todo or not cache_file.is_file():
        return
    texts = [s.text if s.text.startswith(rows[p].title) else f"{rows[p].title}\n{s.text}"
             for p in head for s in sections[p]]  # what the compile embedded (its section_text)
    tokens = TokenVectorCache(cache_file, readonly=True)
    try:
        matches = late_interaction.match_stored(tokens, embedder.identity, query_pieces, texts)
    finally:
        tokens.close()
    for section, late in zip(todo, matches):
        section.late = late


def _add_graph_bonus(hits: list[dict[str, Any]], graph: Path, bonus: float) -> None:
    """Raises hits linked to (or semantically related to) one of the strongest hits."""
    strong = [h["file"] for h in hits[:STRONG_HITS]]
    found = ties(graph, strong, [h["file"] for h in hits[STRONG_HITS:]])
    for hit in hits[STRONG_HITS:]:
        weights = [found[(s, hit["file"])] for s in strong if (s, hit["file"]) in found]
        if weights:
            hit["score"] = min(1.0, hit["score"] + bonus * max(weights))


def _hit(row: NoteRow, line: int, score: float, snippet: str) -> dict[str, Any]:
    return {"docid": "#" + row.sha256[:6], "score": score, "file": row.path, "line": line, "title": row.title,
            "snippet": unmark_links(snippet)}


# A wikilink in a snippet, or the end of one that the snippet's start cut off.
_SNIPPET_LINK_RE = re.compile(r"\[\[[^\[\]\n]*(?:\]\]|$)|^[^\[\]\n]*\]\]")


def unmark_links(snippet: str) -> str:
    """Returns an FTS snippet without its `**` match marks inside wikilinks: `[[**Canvas**|**canvas**]]`
    would link to a note called "**Canvas**"."""
    return _SNIPPET_LINK_RE.sub(lambda m: m.group(0).replace("**", ""), snippet) if "[[" in snippet or "]]" in snippet else snippet


def _finish(hits: list[dict[str, Any]], n: int, filters: Filters) -> list[dict[str, Any]]:
    for hit in hits:
        hit["score"] = round(hit["score"], 4)
        hit["layer"] = filters.layer_of(hit["file"])
    hits = [h for h in hits if h["score"] >= filters.min_score]
    return sorted(hits, key=lambda h: (-h["score"], h["file"]))[:n]


def _excerpt(text: str, limit: int = 200) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + "…"

