"""The memory model: what a memory is, how strong it is at a moment, and which memories are
archived or associated then.

Events become observations in compiler.memory.fold.

Decay (Ebbinghaus): rate = base × (1 − 0.8 × importance) per day;
strength = min(1, importance × e^(−rate × days) × (1 + 0.2 × recall_count)), with `days`
counted from the last reinforcement (save, update, merge, replace, reinforce, recall, restore),
and never below the memory's `floor` (0 unless it came from an engram CLI record, which carries
no importance: compiler.events.replay.PEER_FLOOR keeps those above the archive line).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any

from compiler.core.clock import parse_time

BASE_RATES = {"strategy": 0.10, "fact": 0.16, "assumption": 0.20, "failure": 0.35}  # per day
PRUNE_BELOW = 0.05
STRONG_NEIGHBOUR = 0.30  # chain protection: a weak memory linked to one this strong is kept


def decay_rate(category: str, importance: float) -> float:
    """Returns the daily decay rate of a category at an importance."""
    return BASE_RATES[category] * (1.0 - 0.8 * importance)


def half_life_days(category: str, importance: float) -> float:
    """Returns the days until strength halves with no recall: ln 2 / rate."""
    return math.log(2) / decay_rate(category, importance)


@dataclass(frozen=True)
class Version:
    """A past state of a memory, kept on its page: nothing is destroyed."""

    at: str
    op: str
    content: str
    source: str = ""  # the sync_id or source id that caused the change


@dataclass(frozen=True)
class Observation:
    id: str  # sync_id
    project: str
    title: str
    content: str
    type: str = "note"  # free text, as the engram CLI
    category: str = "fact"
    kind: str = "memory"
    importance: float = 0.5
    created_at: str = ""
    updated_at: str = ""
    reinforced_at: str = ""  # last save/update/merge/replace/reinforce/recall/restore
    recall_count: int = 0
    last_recalled_at: str = ""
    topic_key: str = ""
    scope: str = ""
    session_id: str = ""
    sources: tuple[str, ...] = ()  # every sync_id / external source id folded into this memory
    links: tuple[tuple[str, float], ...] = ()  # association edges (other id, weight)
    follows: str = ""  # the memory written just before it in the same batch: its conversational context
    fields: dict[str, Any] = field(default_factory=dict)  # structured: failure, progress, handoff
    history: tuple[Version, ...] = ()
    deleted_at: str = ""
    absorbed_into: str = ""  # consolidated into another memory
    floor: float = 0.0  # strength never falls below it (memories from engram CLI records)

    @property
    def live(self) -> bool:
        return not self.deleted_at and not self.absorbed_into

    def strength(self, now: datetime) -> float:
        """Returns the memory's strength (0..1) at `now`."""
        days = max(0.0, (now - parse_time(self.reinforced_at or self.created_at)).total_seconds() / 86400)
        value = self.importance * math.exp(-decay_rate(self.category, self.importance) * days)
        return max(self.floor, min(1.0, value * (1.0 + 0.2 * self.recall_count)))




def association_graph(memories: Mapping[str, Observation]) -> dict[str, dict[str, float]]:
    """Returns association links in both directions among `memories`: {id: {other: weight}}."""
    graph: dict[str, dict[str, float]] = {}
    for memory_id, obs in memories.items():
        for other, weight in obs.links:
            if other in memories and other != memory_id:
                for a, b in ((memory_id, other), (other, memory_id)):
                    graph.setdefault(a, {})[b] = max(graph.get(a, {}).get(b, 0.0), weight)
    return graph


def archived(observations: Mapping[str, Observation], now: datetime) -> set[str]:
    """Returns the ids of live memories pruned at `now`: weaker than 0.05 and not protected.

    Protected: linked (either way) to a live memory at least STRONG_NEIGHBOUR strong (chain
    protection), or a live progress record / handoff (engineering state does not fade while it
    is current). Only the links touching a weak memory are looked at: building the whole
    association graph for it was most of its cost at 50,000 memories.
    """
    strength = {i: o.strength(now) for i, o in observations.items() if o.live}
    weak = {i for i, s in strength.items() if s < PRUNE_BELOW and observations[i].kind in ("memory", "failure")}
    if not weak:
        return weak
    strong = {i for i, s in strength.items() if s >= STRONG_NEIGHBOUR}
    kept = set()
    for memory_id, obs in observations.items():
        for other, _ in obs.links:
            if memory_id in weak and other in strong:
                kept.add(memory_id)
            elif other in weak and memory_id in strong:
                kept.add(other)
    return weak - kept


def unarchived(observations: Mapping[str, Observation], now: datetime) -> dict[str, Observation]:
    """Returns the live memories not archived at `now`: what recall and the stats count as live."""
    pruned = archived(observations, now)
    return {i: o for i, o in observations.items() if o.live and i not in pruned}


_MISSING = object()


class Unarchived(Mapping[str, Observation]):
    """`unarchived(state, now)` decided per memory on lookup: a recall looks up a hundred
    candidates, and computing the strength of every memory to know the archived ones was O(store)
    on every cold command. A memory is archived on the same rule as `archived`, from its own
    strength and the strength of the memories it links to or that link to it (`linked_from`, the
    fold's reverse of `links`). Listing it (iterating, its length) computes the whole set once."""

    def __init__(self, state: Mapping[str, Observation], now: datetime,
                 linked_from: Mapping[str, Sequence[str]]) -> None:
        self._state, self._now, self._linked_from = state, now, linked_from
        self._strength: dict[str, float] = {}
        self._found: dict[str, Observation | None] = {}  # decided so far (None: not live, or archived)
        self._all: dict[str, Observation] | None = None

    def get(self, key: str, default: Any = None) -> Any:  # what recall calls, a thousand times each
        if self._all is not None:
            return self._all.get(key, default)
        found = self._found.get(key, _MISSING)
        if found is _MISSING:
            obs = self._state.get(key)
            found = self._found[key] = obs if obs is not None and obs.live and not self._archived(key, obs) else None
        return default if found is None else found

    def __getitem__(self, key: str) -> Observation:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.whole())

    def __bool__(self) -> bool:  # the first live memory is nearly always unarchived: no listing
        if self._all is not None:
            return bool(self._all)
        return any(self.get(i) is not None for i in self._state)

    def whole(self) -> dict[str, Observation]:
        """Returns the whole set as `unarchived` computes it (once)."""
        if self._all is None:
            self._all = unarchived(self._state, self._now)
        return self._all

    def _archived(self, memory_id: str, obs: Observation) -> bool:
        if obs.kind not in ("memory", "failure") or self._strength_of(memory_id, obs) >= PRUNE_BELOW:
            return False
        linked = chain((other for other, _ in obs.links), self._linked_from.get(memory_id, ()))
        return not any(self._strong(other) for other in linked)

    def _strong(self, memory_id: str) -> bool:
        obs = self._state.get(memory_id)
        return obs is not None and obs.live and self._strength_of(memory_id, obs) >= STRONG_NEIGHBOUR

    def _strength_of(self, memory_id: str, obs: Observation) -> float:
        found = self._strength.get(memory_id)
        if found is None:
            found = self._strength[memory_id] = obs.strength(self._now)
        return found


class Associations(Mapping[str, Mapping[str, float]]):
    """`association_graph(live)` computed per memory on lookup: recall spreads its graph bonus
    from three hits, and building the whole graph for them was O(store). A memory's links both
    ways are its own `links` and those of the memories that link to it (`linked_from`), with the
    same weights (the larger of two links between a pair). Listing it builds the whole graph."""

    def __init__(self, live: Mapping[str, Observation], linked_from: Mapping[str, Sequence[str]]) -> None:
        self._live, self._linked_from = live, linked_from
        self._found: dict[str, dict[str, float]] = {}
        self._all: dict[str, dict[str, float]] | None = None

    def __getitem__(self, key: str) -> Mapping[str, float]:
        if self._all is not None:
            return self._all[key]
        links = self._found.get(key)
        if links is None:
            links = self._found[key] = self._links_of(key)
        if not links:
            raise KeyError(key)
        return links

    def _links_of(self, key: str) -> dict[str, float]:
        obs = self._live.get(key)
        links: dict[str, float] = {}
        if obs is not None:
            for other, weight in obs.links:
                if other != key and other in self._live:
                    links[other] = max(links.get(other, 0.0), weight)
            for other in self._linked_from.get(key, ()):
                source = self._live.get(other) if other != key else None
                for target, weight in source.links if source is not None else ():
                    if target == key:
                        links[other] = max(links.get(other, 0.0), weight)
        return links

    def __iter__(self) -> Iterator[str]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.whole())

    def whole(self) -> dict[str, dict[str, float]]:
        """Returns the whole graph as `association_graph` builds it (once); lookups then read it."""
        if self._all is None:
            self._all = association_graph(self._live)
        return self._all
