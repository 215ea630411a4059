"""Recall: the memories that answer a query, best first — and recalling them makes them stronger.

Candidates: the memories nearest the query's vector, the best keyword (BM25) matches, and the
association-graph neighbours of the best hits. Each is scored

    score = relevance × strength + graph bonus        (+ 0.4 × BM25 without token vectors)

where relevance is the late-interaction match of the query's word pieces against the memory's
and its conversational neighbours' (compiler.index.late_interaction) — or, for a model without token
vectors, 0.6 × the cosine of sentence vectors with BM25 relative to the best keyword match. The
graph bonus spreads from the best hits along association links, breadth-first to depth 2 (bonus ×
link weight at depth 1, half that at depth 2).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.core.clock import format_time
from compiler.core.lock import writer_lock
from compiler.events.journal import MemoryEvent, append_events, new_id
from compiler.index import late_interaction
from compiler.index.embedder import embed_query
from compiler.memory.index import memory_text
from compiler.memory.model import Observation
from compiler.memory.service import MemoryService

POOL = 30  # candidates: this many × 2 nearest vectors, and as many best keyword matches
SEEDS = 3  # the graph bonus spreads from this many best hits


@dataclass(frozen=True)
class Weights:
    bm25: float
    relevance: float
    graph_bonus: float


# Late interaction already matches words, so BM25 on top of it only counts them twice (LoCoMo dev
# Hit@5: 81.5% with BM25 weight 0, 79.4% at 0.4): keyword hits are candidates, not a score. Its
# scores crowd into 0.5–0.8, so the graph bonus is scaled down with them. Sentence cosine alone
# (a model without token vectors) needs BM25's exactness: the simple-hybrid weights.
LATE_INTERACTION = Weights(bm25=0.0, relevance=1.0, graph_bonus=0.03)
COSINE = Weights(bm25=0.4, relevance=0.6, graph_bonus=0.1)


def recall(service: MemoryService, query: str, n: int = 5, *, project: str = "", category: str = "",
           reinforce: bool = True, memory_type: str = "") -> list[dict[str, Any]]:
    """Returns up to `n` memories for `query` as dicts (id, title, content, score, strength, ...).

    With `reinforce`, each returned memory gets a recall event (recall_count + 1, decay restarts).
    """
    with writer_lock(service.engram):
        service.sync_index()  # events from another process (a compile, a sync import) become searchable
    live = service.live()
    if not live or not query.strip():
        return []

    def allowed(memory_id: str) -> bool:  # checked per candidate: filtering every memory is O(n)
        obs = live.get(memory_id)
        return obs is not None and (not project or obs.project == project) and \
            (not category or obs.category == category) and (not memory_type or obs.type == memory_type)

    now = service.now()
    relevance = _Relevance(service, query, live)
    query_vector = relevance.query_vector
    index = service.index()
    where = {"project": project} if project else None
    cosines = {i: c for i, c in index.nearest(query_vector, POOL * 2, where) if allowed(i)}
    keyword = _normalised(h for h in index.keywords.search(query, POOL * 2, project) if allowed(h.id))
    relevance.cosines.update(cosines)
    strength = {i: live[i].strength(now) for i in set(cosines) | set(keyword)}
    matches = relevance.of(strength)
    weights = relevance.weights
    scores = {i: weights.bm25 * keyword.get(i, 0.0) + weights.relevance * max(0.0, matches[i]) * strength[i]
              for i in strength}
    _spread_graph_bonus(scores, service.associations(), allowed, live, relevance, now)
    ranked = sorted((i for i in scores if scores[i] > 0), key=lambda i: (-scores[i], i))[:n]  # no match, no hit
    if reinforce and ranked:
        with writer_lock(service.engram):
            before = service.events_key()
            append_events(service.engram, [MemoryEvent(new_id("ev-"), "recall", i, format_time(now)) for i in ranked])
            service.mark_synced(before)
    return [_hit(live[i], scores[i], relevance.cosines.get(i, 0.0), relevance.matches[i], keyword.get(i, 0.0),
                 live[i].strength(now)) for i in ranked]


def _normalised(hits: Any) -> dict[str, float]:
    """Returns BM25 scores divided by the best one: 1.0 for the strongest keyword match.

    Relative, not x / (1 + x): memories are short, so raw BM25 values are small and crowd
    near 0 where an absolute mapping cannot tell them apart. (LoCoMo Hit@5 +3 points.)
    """
    raw = {h.id: h.bm25 for h in hits}
    top = max(raw.values(), default=0.0)
    return {i: b / top for i, b in raw.items()} if top > 0 else {}


class _Relevance:
    """How well memories match the query: late interaction on token vectors when the model has
    them (compiler.index.late_interaction, with the memory's conversational neighbours), otherwise the
    cosine of sentence vectors. Both are kept for the hit's report."""

    def __init__(self, service: MemoryService, query: str, live: Mapping[str, Observation]) -> None:
        self._service, self._live = service, live
        embedder = service.embedder()
        self._query = np.zeros((0, 0), dtype=np.float32)
        if late_interaction.supports(embedder):
            self.query_vector, self._query = late_interaction.embed_query(embedder, query)
        else:
            self.query_vector = embed_query(embedder, query)
        self.weights = LATE_INTERACTION if len(self._query) else COSINE
        self.cosines: dict[str, float] = {}
        self.matches: dict[str, float] = {}

    def of(self, ids: Iterable[str]) -> dict[str, float]:
        """Returns {id: relevance} for `ids` (computed once per id)."""
        todo = [i for i in ids if i not in self.matches]
        vectors = self._service.index().vectors.vectors([i for i in todo if i not in self.cosines])
        self.cosines.update((i, float(v @ self.query_vector)) for i, v in vectors.items())
        if self.weights is COSINE:
            self.matches.update((i, self.cosines.get(i, 0.0)) for i in todo)
        else:
            self._match(todo)
        return {i: self.matches[i] for i in ids}

    def _match(self, ids: list[str]) -> None:
        neighbours = self._service.neighbours()
        wanted = set(ids)
        for i in ids:
            near, far = neighbours.get(i, ((), ()))
            wanted.update(n for n in (*near, *far) if n in self._live)
        texts = {i: memory_text(self._live[i]) for i in wanted}
        service = self._service
        best = service.index().best_per_piece(self._query, texts, service.embedder, service.identity)
        for i in ids:
            near, far = neighbours.get(i, ((), ()))
            self.matches[i] = late_interaction.match(best[i], [best[n] for n in near if n in best],
                                                     [best[n] for n in far if n in best])


def _spread_graph_bonus(scores: dict[str, float], graph: Mapping[str, Mapping[str, float]],
                        allowed: Callable[[str], bool], live: Mapping[str, Observation], relevance: _Relevance,
                        now: Any) -> None:
    """Adds the graph bonus breadth-first from the best hits; allowed neighbours become candidates."""
    seeds = sorted(scores, key=lambda i: (-scores[i], i))[:SEEDS]
    bonus: dict[str, float] = {}
    queue = deque((seed, 0) for seed in seeds)
    seen = set(seeds)
    while queue:
        node, depth = queue.popleft()
        if depth == 2:
            continue
        for other, weight in graph.get(node, {}).items():
            if not allowed(other):
                continue
            gain = relevance.weights.graph_bonus * weight * (1.0 if depth == 0 else 0.5)
            bonus[other] = max(bonus.get(other, 0.0), gain)
            if other not in seen:
                seen.add(other)
                queue.append((other, depth + 1))
    newcomers = [i for i in bonus if i not in scores]
    for memory_id, match in relevance.of(newcomers).items():
        scores[memory_id] = relevance.weights.relevance * max(0.0, match) * live[memory_id].strength(now)
    for memory_id, gain in bonus.items():
        if memory_id not in seeds:
            scores[memory_id] += gain


def _hit(obs: Observation, score: float, cosine: float, match: float, bm25: float, strength: float) -> dict[str, Any]:
    return {"id": obs.id, "title": obs.title, "content": obs.content, "project": obs.project,
            "category": obs.category, "kind": obs.kind, "type": obs.type, "score": round(score, 4),
            "cosine": round(cosine, 4), "match": round(match, 4), "bm25": round(bm25, 4), "strength": round(strength, 4),
            "recall_count": obs.recall_count, "created_at": obs.created_at, "sources": list(obs.sources),
            "fields": obs.fields}
