"""Recall: the memories that answer a query, best first — and recalling them makes them stronger.

Candidates: the memories nearest the query's vector, the best keyword (BM25) matches, and the
association-graph neighbours of the best hits. Each is scored

    score = relevance × weight + graph bonus        (+ 0.4 × BM25 without token vectors)
    weight = strength ** 0.02 (a tie-break), or for a memory dated in the span the query names
             (compiler.memory.when: "two weeks ago", "last Saturday", "in March")
             1.2 × its strength when it was written;
             × 1.1 when the query asks when and the memory says when ("yesterday", "last year")

where relevance is the late-interaction match (a power mean over the query's word pieces of
their best cosine) against the memory's pieces and its sentence vector, and its conversational
neighbours' pieces (compiler.index.late_interaction) — or, for a model without token
vectors, 0.6 × the cosine of sentence vectors with BM25 relative to the best keyword match. A
late-interaction match of a memory over 80 words is discounted by its length. The
graph bonus spreads from the best hits along association links, breadth-first to depth 2 (bonus ×
link weight at depth 1, half that at depth 2).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from compiler.core.clock import format_time, parse_time
from compiler.core.lock import writer_lock
from compiler.embed.embedder import embed_query
from compiler.events.journal import MemoryEvent, append_events, new_id
from compiler.index import late_interaction
from compiler.memory.index import MemoryKeywordHit, memory_text
from compiler.memory.model import Observation
from compiler.memory.snapshot import Memories
from compiler.memory.vault import VaultMemory, read_memories, sync_index
from compiler.memory.when import Span, asks_when, query_span, says_when

POOL = 30  # candidates: this many × 2 nearest vectors, and as many best keyword matches
SEEDS = 3  # the graph bonus spreads from this many best hits
# A long memory has more word pieces for each query piece to find a near match in, so MaxSim
# favours it whatever it says (LongMemEval: 3,000-character assistant replies outranked the
# user's one-line statement). The match of a memory over LENGTH_WORDS words is multiplied by
# (LENGTH_WORDS / words) ** LENGTH_EXPONENT: 0.93 at 160 words, 0.85 at 400. LoCoMo turns are
# shorter; a lower threshold (30 words) cost LoCoMo 5 points.
LENGTH_WORDS = 80
LENGTH_EXPONENT = 0.1
# Strength (decay, recalls) enters as strength ** STRENGTH_EXPONENT, to break near-ties: the matches
# of a question's candidates crowd within a few tenths, so any larger factor outranks meaning. A
# memory 60 days old (importance 1, a fact) has strength 0.15 and weighs 0.96; at the 4th root it
# weighed 0.62, and a conversation stored with its dates (LoCoMo, 6–12 months) recalled only its
# last sessions. The curve (LongMemEval and dated LoCoMo) is in benchmarks/README.md.
STRENGTH_EXPONENT = 0.02
DATE_BOOST = 0.2  # a memory dated in the span of days the query names (compiler.memory.when) counts 1.2×
# For a question that asks when, a memory that says when counts 1.1× (compiler.memory.when.says_when):
# of the turns that mention an event, the one that dates it. The curve is in benchmarks/README.md.
TOLD_BOOST = 0.1


@dataclass(frozen=True)
class Weights:
    bm25: float
    relevance: float
    graph_bonus: float


# Late interaction already matches words, so BM25 on top of it only counts them twice (it ranked
# worse with a BM25 weight: benchmarks/README.md): keyword hits are candidates, not a score. Its
# scores crowd into 0.5–0.8, so the graph bonus is scaled down with them. Sentence cosine alone
# (a model without token vectors) needs BM25's exactness: the simple-hybrid weights.
LATE_INTERACTION = Weights(bm25=0.0, relevance=1.0, graph_bonus=0.03)
COSINE = Weights(bm25=0.4, relevance=0.6, graph_bonus=0.1)


def recall(vault: VaultMemory, query: str, n: int = 5, *, project: str = "", category: str = "",
           reinforce: bool = True, memory_type: str = "") -> list[dict[str, Any]]:
    """Returns up to `n` memories for `query` as dicts (id, title, content, score, strength, ...).

    With `reinforce`, each returned memory gets a recall event (recall_count + 1, decay restarts).
    Raises ModelLoadError when the embedding model cannot load (there is no silent keyword fallback).
    """
    if not query.strip():
        return []
    # The model first, even when there is nothing to rank: a model that cannot load raises
    # ModelLoadError naming the cause here, rather than an empty vault answering [] as if all were well.
    vault.embedder()
    memories = searchable_memories(vault)
    if next(iter(memories.recallable), None) is None:  # stops at the first memory not forgotten
        return []
    now = vault.now()
    scope = Scope(memories.recallable, project, category, memory_type)
    relevance = Relevance(vault, memories, query)
    cosines, keyword = candidates(vault, relevance, query, scope)
    weigh = Weigh(now, query_span(query, now), asks_when(query))
    scores = score(cosines, keyword, relevance, scope.memories, weigh)
    scores = add_graph_bonus(scores, memories.associations, scope, relevance, weigh)
    ranked = rank(scores, n)
    if reinforce:
        record_recalls(vault, ranked, now)
    return [_hit(scope.memories[i], scores[i], relevance, keyword.get(i, 0.0), now, i not in memories.live) for i in ranked]


def searchable_memories(vault: VaultMemory) -> Memories:
    """Returns the vault's memories with the index in step with them: events from another process
    (a compile, a sync import) become searchable."""
    with writer_lock(vault.engram):
        memories = read_memories(vault)
        sync_index(vault, memories)
    return memories


@dataclass(frozen=True)
class Scope:
    """Which memories a recall may return (`Memories.recallable`, archived ones too): of a project,
    a category, a type (empty: any)."""

    memories: Mapping[str, Observation]
    project: str = ""
    category: str = ""
    memory_type: str = ""

    def __call__(self, memory_id: str) -> bool:  # checked per candidate: filtering every memory is O(n)
        obs = self.memories.get(memory_id)
        return obs is not None and (not self.project or obs.project == self.project) and \
            (not self.category or obs.category == self.category) and \
            (not self.memory_type or obs.type == self.memory_type)


@dataclass(frozen=True)
class Weigh:
    """How much a memory counts besides its match: its strength now (to STRENGTH_EXPONENT) — or,
    for a memory dated in the span of days the query names (compiler.memory.when), its strength as
    it was then (no decay) × (1 + DATE_BOOST): "what did I buy two weeks ago?" is not answered
    by what is merely recent. When the query asks when, a memory that says when also counts
    (1 + TOLD_BOOST)×."""

    now: datetime
    span: Span | None = None
    asks_when: bool = False

    def dated(self, obs: Observation) -> bool:
        return self.span is not None and parse_time(obs.created_at) in self.span

    def __call__(self, obs: Observation) -> float:
        told = 1 + TOLD_BOOST if self.asks_when and says_when(obs.content) else 1.0
        if self.dated(obs):
            return obs.strength(parse_time(obs.created_at)) ** STRENGTH_EXPONENT * (1 + DATE_BOOST) * told
        return obs.strength(self.now) ** STRENGTH_EXPONENT * told


def candidates(vault: VaultMemory, relevance: Relevance, query: str,
               scope: Scope) -> tuple[dict[str, float], dict[str, float]]:
    """Returns the candidates in `scope`: {id: cosine} of the nearest vectors and {id: relative
    BM25} of the best keyword matches. The cosines are kept in `relevance` for the hits' report."""
    index = vault.index()
    where = {"project": scope.project} if scope.project else None
    cosines = {i: c for i, c in index.nearest(relevance.query_vector, POOL * 2, where) if scope(i)}
    keyword = _normalised(h for h in index.keywords.search(query, POOL * 2, scope.project) if scope(h.id))
    relevance.cosines.update(cosines)
    return cosines, keyword


def score(cosines: Mapping[str, float], keyword: Mapping[str, float], relevance: Relevance,
          live: Mapping[str, Observation], weigh: Weigh) -> dict[str, float]:
    """Returns {id: bm25 weight × BM25 + relevance weight × relevance × strength} per candidate."""
    strength = {i: weigh(live[i]) for i in set(cosines) | set(keyword)}
    matches = relevance.of(strength)
    weights = relevance.weights
    return {i: weights.bm25 * keyword.get(i, 0.0) + weights.relevance * max(0.0, matches[i]) * strength[i]
            for i in strength}


def rank(scores: Mapping[str, float], n: int) -> list[str]:
    """Returns the ids of the `n` best scores, best first (ties by id); a memory that matches
    nothing (score 0) is no hit."""
    return sorted((i for i in scores if scores[i] > 0), key=lambda i: (-scores[i], i))[:n]


def record_recalls(vault: VaultMemory, ranked: Iterable[str], now: datetime) -> None:
    """Appends a recall event per returned memory (they change no indexed text: the index stays in step)."""
    events = [MemoryEvent(new_id("ev-"), "recall", i, format_time(now)) for i in ranked]
    if events:
        with writer_lock(vault.engram):
            append_events(vault.engram, events)


def _normalised(hits: Iterable[MemoryKeywordHit]) -> dict[str, float]:
    """Returns BM25 scores divided by the best one: 1.0 for the strongest keyword match.

    Relative, not x / (1 + x): memories are short, so raw BM25 values are small and crowd
    near 0 where an absolute mapping cannot tell them apart. (LoCoMo Hit@5 +3 points.)
    """
    raw = {h.id: h.bm25 for h in hits}
    top = max(raw.values(), default=0.0)
    return {i: b / top for i, b in raw.items()} if top > 0 else {}


class Relevance:
    """How well memories match the query: late interaction on token vectors when the model has
    them (compiler.index.late_interaction, with the memory's conversational neighbours), otherwise the
    cosine of sentence vectors. Both are kept for the hit's report."""

    def __init__(self, vault: VaultMemory, memories: Memories, query: str) -> None:
        self._vault, self._memories, self._recallable = vault, memories, memories.recallable
        embedder = vault.embedder()
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
        # The cosine needs the vectors not fetched yet; the match needs every one (the memory's gist).
        fetch = [i for i in todo if i not in self.cosines] if self.weights is COSINE else todo
        vectors = self._vault.index().vectors.vectors(fetch)
        self.cosines.update((i, float(v @ self.query_vector)) for i, v in vectors.items() if i not in self.cosines)
        if self.weights is COSINE:
            self.matches.update((i, self.cosines.get(i, 0.0)) for i in todo)
        else:
            self._match(todo, vectors)
        return {i: self.matches[i] for i in ids}

    def _match(self, ids: list[str], sentences: Mapping[str, np.ndarray]) -> None:
        neighbours = self._memories.neighbours_of(ids)
        wanted = set(ids)
        for i in ids:
            near, far = neighbours.get(i, ((), ()))
            wanted.update(n for n in (*near, *far) if n in self._recallable)
        texts = {i: memory_text(self._recallable[i]) for i in wanted}
        vault = self._vault
        best = vault.index().best_per_piece(self._query, texts, vault.embedder, vault.identity)
        combined = []
        for i in ids:
            near, far = neighbours.get(i, ((), ()))
            before = self._recallable[i].follows  # the question this turn answers, when it is one
            asked = [before] if before in near and before in best and late_interaction.asks(texts[before]) else []
            own = late_interaction.with_gist(best[i], self._query, sentences.get(i))
            combined.append(late_interaction.combine(own, [best[n] for n in near if n in best and n not in asked],
                                                     [best[n] for n in far if n in best], [best[n] for n in asked]))
        pooled = late_interaction.pool(np.stack(combined)) if combined else []
        for i, match in zip(ids, pooled):
            self.matches[i] = float(match)
            words = len(texts[i].split())
            if words > LENGTH_WORDS:
                self.matches[i] *= (LENGTH_WORDS / words) ** LENGTH_EXPONENT


def add_graph_bonus(scores: Mapping[str, float], graph: Mapping[str, Mapping[str, float]], scope: Scope,
                    relevance: Relevance, weigh: Weigh) -> dict[str, float]:
    """Returns `scores` with the graph bonus spread breadth-first from the best hits; neighbours in
    `scope` become candidates (scored like the others, plus their bonus)."""
    bonus, seeds = _graph_bonus(scores, graph, scope, relevance.weights.graph_bonus)
    scores = dict(scores)
    newcomers = [i for i in bonus if i not in scores]
    for memory_id, match in relevance.of(newcomers).items():
        scores[memory_id] = relevance.weights.relevance * max(0.0, match) * weigh(scope.memories[memory_id])
    for memory_id, gain in bonus.items():
        if memory_id not in seeds:
            scores[memory_id] += gain
    return scores


def _graph_bonus(scores: Mapping[str, float], graph: Mapping[str, Mapping[str, float]],
                 allowed: Callable[[str], bool], weight_bonus: float) -> tuple[dict[str, float], list[str]]:
    """Returns {id: bonus} of the memories reachable from the SEEDS best hits (bonus × link weight
    at depth 1, half that at depth 2), and those seeds."""
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
            gain = weight_bonus * weight * (1.0 if depth == 0 else 0.5)
            bonus[other] = max(bonus.get(other, 0.0), gain)
            if other not in seen:
                seen.add(other)
                queue.append((other, depth + 1))
    return bonus, seeds


def _hit(obs: Observation, score: float, relevance: Relevance, bm25: float, now: datetime,
         archived: bool) -> dict[str, Any]:
    """Returns what recall answers per memory: the memory, its score and the parts of the score."""
    cosine, match = relevance.cosines.get(obs.id, 0.0), relevance.matches[obs.id]
    return {"id": obs.id, "title": obs.title, "content": obs.content, "project": obs.project,
            "category": obs.category, "kind": obs.kind, "type": obs.type, "score": round(score, 4),
            "cosine": round(cosine, 4), "match": round(match, 4), "bm25": round(bm25, 4),
            "strength": round(obs.strength(now), 4), "archived": archived,
            "recall_count": obs.recall_count, "created_at": obs.created_at, "sources": list(obs.sources),
            "fields": obs.fields}
