"""Recall: the memories that answer a query, best first — and recalling them makes them stronger.

score = 0.4 × BM25 (x / (1 + x)) + 0.6 × (cosine × strength) + graph bonus, where the graph
bonus spreads from the best hits along association links, breadth-first to depth 2
(GRAPH_BONUS × weight at depth 1, half that at depth 2). Keyword-only hits are candidates too,
scored with their real cosine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from compiler.embed import embed_query
from compiler.memories import MemoryService
from compiler.memory_events import MemoryEvent, append_events, format_time, new_id
from compiler.memory_model import Observation, association_graph
from compiler.lock import writer_lock

BM25_WEIGHT, VECTOR_WEIGHT = 0.4, 0.6
POOL = 30
SEEDS = 3  # the graph bonus spreads from this many best hits
GRAPH_BONUS = 0.1


def recall(service: MemoryService, query: str, n: int = 5, *, project: str = "", category: str = "",
           reinforce: bool = True, memory_type: str = "") -> list[dict[str, Any]]:
    """Returns up to `n` memories for `query` as dicts (id, title, content, score, strength, ...).

    With `reinforce`, each returned memory gets a recall event (recall_count + 1, decay restarts).
    """
    with writer_lock(service.engram):
        service.sync_index()  # events from another process (a compile, a sync import) become searchable
    live = service.live()
    allowed = {i: o for i, o in live.items()
               if (not project or o.project == project) and (not category or o.category == category)
               and (not memory_type or o.type == memory_type)}
    if not allowed or not query.strip():
        return []
    now = service.now()
    query_vector = embed_query(service.embedder(), query)
    index = service.index()
    where = {"project": project} if project else None
    cosines = {i: c for i, c in index.nearest(query_vector, POOL * 2, where) if i in allowed}
    keyword = _normalised(h for h in index.keywords.search(query, POOL * 2, project) if h.id in allowed)
    _fill_cosines(service, query_vector, cosines, keyword.keys())
    strength = {i: allowed[i].strength(now) for i in set(cosines) | set(keyword)}
    scores = {i: BM25_WEIGHT * keyword.get(i, 0.0) + VECTOR_WEIGHT * max(0.0, cosines.get(i, 0.0)) * strength[i]
              for i in strength}
    _spread_graph_bonus(scores, allowed, service, query_vector, cosines, now)
    ranked = sorted(scores, key=lambda i: (-scores[i], i))[:n]
    if reinforce and ranked:
        with writer_lock(service.engram):
            before = service.events_key()
            append_events(service.engram, [MemoryEvent(new_id("ev-"), "recall", i, format_time(now)) for i in ranked])
            service.mark_synced(before)
    return [_hit(allowed[i], scores[i], cosines.get(i, 0.0), keyword.get(i, 0.0), allowed[i].strength(now))
            for i in ranked]


def _normalised(hits: Any) -> dict[str, float]:
    """Returns BM25 scores divided by the best one: 1.0 for the strongest keyword match.

    Relative, not x / (1 + x): memories are short, so raw BM25 values are small and crowd
    near 0 where an absolute mapping cannot tell them apart. (LoCoMo Hit@5 +3 points.)
    """
    raw = {h.id: h.bm25 for h in hits}
    top = max(raw.values(), default=0.0)
    return {i: b / top for i, b in raw.items()} if top > 0 else {}


def _fill_cosines(service: MemoryService, query_vector: np.ndarray, cosines: dict[str, float], ids: Any) -> None:
    missing = [i for i in ids if i not in cosines]
    for memory_id, vector in service.index().vectors.vectors(missing).items():
        cosines[memory_id] = float(vector @ query_vector)


def _spread_graph_bonus(scores: dict[str, float], allowed: Mapping[str, Observation], service: MemoryService,
                        query_vector: np.ndarray, cosines: dict[str, float], now: Any) -> None:
    """Adds the graph bonus breadth-first from the best hits; neighbours become candidates."""
    graph = association_graph(allowed)
    seeds = sorted(scores, key=lambda i: (-scores[i], i))[:SEEDS]
    bonus: dict[str, float] = {}
    queue = deque((seed, 0) for seed in seeds)
    seen = set(seeds)
    while queue:
        node, depth = queue.popleft()
        if depth == 2:
            continue
        for other, weight in graph.get(node, {}).items():
            gain = GRAPH_BONUS * weight * (1.0 if depth == 0 else 0.5)
            bonus[other] = max(bonus.get(other, 0.0), gain)
            if other not in seen:
                seen.add(other)
                queue.append((other, depth + 1))
    newcomers = [i for i in bonus if i not in scores]
    _fill_cosines(service, query_vector, cosines, newcomers)
    for memory_id in newcomers:
        strength = allowed[memory_id].strength(now)
        scores[memory_id] = VECTOR_WEIGHT * max(0.0, cosines.get(memory_id, 0.0)) * strength
    for memory_id, gain in bonus.items():
        if memory_id not in seeds:
            scores[memory_id] += gain


def _hit(obs: Observation, score: float, cosine: float, bm25: float, strength: float) -> dict[str, Any]:
    return {"id": obs.id, "title": obs.title, "content": obs.content, "project": obs.project,
            "category": obs.category, "kind": obs.kind, "type": obs.type, "score": round(score, 4),
            "cosine": round(cosine, 4), "bm25": round(bm25, 4), "strength": round(strength, 4),
            "recall_count": obs.recall_count, "created_at": obs.created_at, "sources": list(obs.sources),
            "fields": obs.fields}
