"""The memory model: fold events into observations, and how strong each one is at a moment.

Decay (Ebbinghaus): rate = base × (1 − 0.8 × importance) per day;
strength = min(1, importance × e^(−rate × days) × (1 + 0.2 × recall_count)), with `days`
counted from the last reinforcement (save, update, merge, replace, reinforce, recall, restore),
and never below the memory's `floor` (0 unless it came from an engram CLI record, which carries
no importance: compiler.events.replay.PEER_FLOOR keeps those above the archive line).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import chain
from typing import Any

from compiler.core.clock import parse_time
from compiler.events.journal import MemoryEvent

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


def fold(events: Iterable[MemoryEvent]) -> dict[str, Observation]:
    """Returns every memory ever saved, by id, after applying `events` in (time, sequence, id) order.

    Sorting makes the result independent of the order the events arrive in (journal, chunks
    from other machines); duplicate event ids are applied once.
    """
    return dict(IncrementalFold().update(events))


class IncrementalFold:
    """A fold that applies only events it has not seen, as long as they come after the last one.

    A long-lived handle (the MCP server's) re-reads the events on every call; most calls add a
    few events at the end, which this applies in microseconds. An event that sorts before what
    was already applied (a chunk from another machine) triggers a full refold, so the result is
    always exactly `fold(all events)`.
    """

    def __init__(self) -> None:
        self.state: dict[str, Observation] = {}
        self.version = 0  # changes whenever `state` does
        self.lookups = Lookups()
        self._applied: set[str] = set()
        self._last: tuple[str, int, str] | None = None
        self._views: list[weakref.ref[StateView]] = []  # the views handed out since the state last changed

    def saved(self) -> tuple[Any, ...]:
        """Returns what `restored` continues from: plain data (the state, the lookups, what was
        applied), for a checkpoint file."""
        return self.state, dict(self.lookups.holders), dict(self.lookups.followers), self._applied, self._last

    @classmethod
    def restored(cls, saved: tuple[Any, ...]) -> IncrementalFold:
        """Returns a fold that continues from `saved` (a `saved()` of a fold) as that fold would."""
        fold = cls()
        fold.state, holders, followers, fold._applied, fold._last = saved
        fold.lookups.holders, fold.lookups.followers = holders, followers
        return fold

    def view(self) -> StateView:
        """Returns the state as it is now, read-only, without copying it: the view reads the fold's
        own dict until the fold is about to change it, and is handed a copy then (only a view still
        held by someone costs that copy; copying 50,000 memories on every read made a write O(store))."""
        view = StateView(self.state)
        self._views = [r for r in self._views if r() is not None]  # dropped views: a read usually drops the last
        self._views.append(weakref.ref(view))
        return view

    def _freeze_views(self) -> None:
        """Gives every view still alive its own copy of the state, before the state changes."""
        views = [view for view in (r() for r in self._views) if view is not None]
        if views:
            frozen = dict(self.state)
            for view in views:
                view._data = frozen
        self._views = []

    def update(self, events: Sequence[MemoryEvent], known: int = 0) -> dict[str, Observation]:
        """Returns the state after all `events` (the same dict object, updated in place).

        `known`: how many leading events were all handed to this fold before (the events only
        grow), so only the rest is looked at; a write at 50,000 memories need not scan them all.
        """
        fresh = sorted({e.id: e for e in events[known:] if e.id not in self._applied}.values(), key=MemoryEvent.order)
        if fresh and self._last is not None and fresh[0].order() < self._last:
            version = self.version
            self.__init__()  # type: ignore[misc]  # a new dict: views of the old one keep it unchanged
            self.version = version  # still counting up: the refold below changes it
            return self.update(events)
        if fresh:
            self._freeze_views()
        self.version += bool(fresh)
        for event in fresh:
            before = self.state.get(event.memory)
            changed = apply_event(before, event)
            if changed is not None:
                self.state[event.memory] = changed
                self.lookups.note(before, changed)
            self._applied.add(event.id)
        if fresh:
            self._last = fresh[-1].order()
        return self.state


class StateView(Mapping[str, Observation]):
    """A read-only state of an `IncrementalFold` at one version (see `IncrementalFold.view`)."""

    __slots__ = ("_data", "__weakref__")

    def __init__(self, data: dict[str, Observation]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Observation:
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> Any:
        return self._data.keys()

    def items(self) -> Any:
        return self._data.items()

    def values(self) -> Any:
        return self._data.values()


_MISSING = object()


class Layer(MutableMapping[str, Any]):
    """Changes kept over a base mapping that is never changed: a batch's writes over the read state.
    A ChainMap does the same in several Python calls a lookup (a tenth of resolving a write)."""

    __slots__ = ("base", "top")

    def __init__(self, base: Mapping[str, Any]) -> None:
        self.top: dict[str, Any] = {}
        self.base = base

    def __getitem__(self, key: str) -> Any:
        value = self.top.get(key, _MISSING)
        return self.base[key] if value is _MISSING else value

    def get(self, key: str, default: Any = None) -> Any:
        value = self.top.get(key, _MISSING)
        return self.base.get(key, default) if value is _MISSING else value

    def __contains__(self, key: object) -> bool:
        return key in self.top or key in self.base

    def __setitem__(self, key: str, value: Any) -> None:
        self.top[key] = value

    def __delitem__(self, key: str) -> None:
        del self.top[key]  # as a ChainMap: only what the layer itself holds

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self.base), **self.top})

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Lookups:
    """What a write (or a recall) looks up in the fold, kept as the fold goes (building them from
    the state made every write O(store)): which memory holds each source id, which memories
    follow each one in a conversation, in save order, and which memories link to each one (an
    association is set at save and never changes: `linked_from` is the reverse of `links`)."""

    def __init__(self, holders: Mapping[str, str] | None = None,
                 followers: Mapping[str, tuple[str, ...]] | None = None,
                 linked_from: Mapping[str, list[str]] | None = None) -> None:
        self.holders: MutableMapping[str, str] = Layer(holders) if holders is not None else {}
        self.followers: MutableMapping[str, tuple[str, ...]] = Layer(followers) if followers is not None else {}
        # Lists grown in place (tuples rebuilt per link cost 0.4 s at 50,000 memories, 190,000
        # links); a layer's own lists are copies, so a batch's drafts never reach the fold's.
        self.linked_from: MutableMapping[str, list[str]] = Layer(linked_from) if linked_from is not None else {}

    def layer(self) -> Lookups:
        """Returns lookups that start as these and take further notes without changing them (a batch's drafts)."""
        return Lookups(self.holders, self.followers, self.linked_from)

    def note(self, before: Observation | None, after: Observation) -> None:
        """Records that a memory changed from `before` (None: just saved) to `after`."""
        for source in after.sources:
            self.holders[source] = after.id
        if before is None and after.follows:
            self.followers[after.follows] = (*self.followers.get(after.follows, ()), after.id)
        if before is None and after.links:
            linked = self.linked_from
            own = linked.top if isinstance(linked, Layer) else linked  # the lists these lookups may grow
            for other, _ in after.links:  # a memory linking twice to one is listed twice: harmless
                found = own.get(other)
                if found is not None:
                    found.append(after.id)
                else:
                    linked[other] = [*linked.get(other, ()), after.id]


def apply_event(current: Observation | None, event: MemoryEvent) -> Observation | None:
    """Returns the memory after `event`; None when the event changes nothing (a repeated save,
    or a change to a memory never saved)."""
    if event.op == "save":
        return None if current is not None else _saved(event)
    return _APPLY[event.op](current, event) if current is not None else None


def _saved(event: MemoryEvent) -> Observation:
    data = event.data
    return Observation(
        id=event.memory, project=str(data.get("project", "")), title=str(data.get("title", "")),
        content=str(data.get("content", "")), type=str(data.get("type", "note")),
        category=str(data.get("category", "fact")), kind=str(data.get("kind", "memory")),
        importance=float(data.get("importance", 0.5)), created_at=str(data.get("created_at") or event.at),
        # An imported memory decays from when it was created, not from when it arrived.
        updated_at=event.at, reinforced_at=str(data.get("created_at") or event.at),
        topic_key=str(data.get("topic_key", "")),
        scope=str(data.get("scope", "")), session_id=str(data.get("session_id", "")),
        sources=_merge_sources((event.memory,), data.get("sources", ())),
        links=tuple((str(o), float(w)) for o, w in data.get("links", ())), fields=dict(data.get("fields", {})),
        follows=str(data.get("follows", "")), floor=float(data.get("floor") or 0.0))


def _merge_sources(current: Iterable[str], more: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*current, *(str(s) for s in more)]))


def _dated(event: MemoryEvent) -> str:
    """Returns when a write-path change happened: the item's own date when it carried one (an
    import of dated items), else the event's time."""
    return str(event.data.get("created_at") or event.at)


def _reinforce(obs: Observation, event: MemoryEvent) -> Observation:
    return replace(obs, recall_count=obs.recall_count + 1, reinforced_at=max(obs.reinforced_at, _dated(event)),
                   sources=_merge_sources(obs.sources, event.data.get("sources", ())))


def _rewrite(obs: Observation, event: MemoryEvent) -> Observation:
    """merge, replace and update: new content, the old one kept as history."""
    data = event.data
    old = Version(obs.updated_at, event.op, obs.content, str(data.get("source", "")))
    when = _dated(event)
    return replace(obs, content=str(data.get("content", obs.content)), title=str(data.get("title") or obs.title),
                   importance=float(data.get("importance", obs.importance)), updated_at=when,
                   reinforced_at=max(obs.reinforced_at, when), history=(*obs.history, old),
                   fields={**obs.fields, **data.get("fields", {})},
                   sources=_merge_sources(obs.sources, data.get("sources", ())))


def _recall(obs: Observation, event: MemoryEvent) -> Observation:
    return replace(obs, recall_count=obs.recall_count + 1, last_recalled_at=event.at, reinforced_at=event.at)


def _delete(obs: Observation, event: MemoryEvent) -> Observation:
    return replace(obs, deleted_at=event.at)


def _restore(obs: Observation, event: MemoryEvent) -> Observation:
    # Restoring counts as a reinforcement: the decay clock restarts, so it is not pruned again at once.
    return replace(obs, deleted_at="", absorbed_into="", reinforced_at=event.at)


def _consolidate(obs: Observation, event: MemoryEvent) -> Observation:
    """On the keeper: gains the absorbed memories' sources. On an absorbed one: points at the keeper."""
    keeper = event.data.get("into")
    if keeper and keeper != obs.id:
        return replace(obs, absorbed_into=str(keeper))
    return replace(obs, sources=_merge_sources(obs.sources, event.data.get("sources", ())), reinforced_at=event.at)


_APPLY = {"reinforce": _reinforce, "merge": _rewrite, "replace": _rewrite, "update": _rewrite, "recall": _recall,
          "delete": _delete, "restore": _restore, "consolidate": _consolidate}


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
