"""Folding events into memories: every memory after a set of events, the incremental fold a
long-lived process keeps, its read-only views, and the lookups a write needs, kept as the fold goes.

What a memory is, and how strong at a moment, is compiler.memory.model.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import replace
from typing import Any

from compiler.events.journal import MemoryEvent
from compiler.memory.model import Observation, Version


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
