"""One read of a vault's memories: the events, their fold, and what is derived from the fold.

Every memory operation reads the events once (`read_events`) and works on that `Memories`
snapshot: the write path resolves against its state, recall scores its live memories, and both
hand it down as a value. Nothing here is invalidated by a caller: a snapshot never changes, and
`Snapshots` (one per `VaultMemory` handle) only reuses work keyed on the event set itself, its
`EventSet.key` (count, last id; events are only ever added): the fold applies just the events
added since the last read and is skipped while the key is unchanged, and what is derived from
the fold (live, neighbours, associations) is reused while the key and the minute stay the same.
Those are decided per memory on lookup (a cold recall looks up its candidates, not the store)
and completed into whole views when a handle reads the same events again (`Memories.settle`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from pathlib import Path
from types import MappingProxyType
from typing import Any

from compiler.core.errors import BuildWarning, NotFoundError
from compiler.events.journal import MemoryEvent, journal_view
from compiler.memory.index import LiveView, conversation_neighbours
from compiler.memory.model import Associations, IncrementalFold, Lookups, Observation, Unarchived

EventKey = tuple[int, str]


@dataclass(frozen=True)
class EventSet:
    """Every memory event a vault knows at one read — every chunk's, then the journal's — and the
    warnings of the readers (quarantined chunk records, a chunk listed but missing, corrupt lines)."""

    events: Sequence[MemoryEvent] = ()  # read-only: the chunks' events, then the journal's (`Joined`)
    warnings: tuple[BuildWarning, ...] = ()
    chunks: int = 0  # how many of `events` (the first ones) came from chunks

    @property
    def key(self) -> EventKey:
        """A cheap fingerprint of the set: (count, last id) changes whenever an event is added."""
        return len(self.events), self.events[-1].id if self.events else ""

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[MemoryEvent]:
        return iter(self.events)


def event_mark(events: EventSet) -> dict[str, str]:
    """Returns where `events` end, to ask `named_since` about a later read: how many came from
    chunks and the last of them, how many there were in all and the last."""
    seq, chunks = events.events, events.chunks
    return {"chunks": str(chunks), "chunk_last": seq[chunks - 1].id if chunks else "",
            "count": str(len(seq)), "last": seq[-1].id if len(seq) else ""}


def named_since(events: EventSet, mark: Mapping[str, str]) -> set[str] | None:
    """Returns the memories the events after `mark` (an `event_mark` of an earlier read) name,
    when the chunks are the marked ones and only the journal grew since (journal writes); else
    None: a chunk came in (its events are anywhere in the order) or the mark is not of these events."""
    since = events_since(events, mark)
    return None if since is None else {e.memory for e in since}


def events_since(events: EventSet, mark: Mapping[str, str]) -> Sequence[MemoryEvent] | None:
    """Returns the events after `mark` (see `named_since`), or None when `events` do not extend it."""
    seq, now = events.events, event_mark(events)
    if (mark.get("chunks"), mark.get("chunk_last")) != (now["chunks"], now["chunk_last"]):
        return None
    try:
        count, chunks = int(mark["count"]), events.chunks
    except (KeyError, ValueError):
        return None
    if not chunks <= count <= len(seq) or mark.get("last") != (seq[count - 1].id if count else ""):
        return None
    return seq[count:]


def read_events(engram_dir: Path) -> EventSet:
    """Returns every memory event of the vault whose `.engram` folder is `engram_dir`, with warnings."""
    from compiler.events.store import read_chunk_events

    chunked, chunk_warnings = read_chunk_events(engram_dir)
    journal, warnings = journal_view(engram_dir)
    return EventSet(Joined(chunked, journal), tuple(chunk_warnings + warnings), len(chunked))


class Joined(Sequence[MemoryEvent]):
    """Two sequences read as one, without copying them (every memory read copied every event)."""

    def __init__(self, first: Sequence[MemoryEvent], second: Sequence[MemoryEvent]) -> None:
        self._first, self._second = first, second

    def __len__(self) -> int:
        return len(self._first) + len(self._second)

    def __getitem__(self, index: Any) -> Any:
        split, total = len(self._first), len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(total)
            if step != 1:
                return [self[k] for k in range(start, stop, step)]
            return [*self._first[start:min(stop, split)], *self._second[max(start - split, 0):max(stop - split, 0)]]
        if not -total <= index < total:
            raise IndexError(index)
        index %= total
        return self._first[index] if index < split else self._second[index - split]

    def __iter__(self) -> Iterator[MemoryEvent]:
        return chain(self._first, self._second)


class Memories:
    """The memories of one event set at `now`. `state` holds every memory ever saved (read-only);
    the derived views are computed on first use and kept with the snapshot."""

    def __init__(self, events: EventSet, state: Mapping[str, Observation], now: datetime,
                 derived: dict[str, Any] | None = None, lookups: Lookups | None = None) -> None:
        self.events = events
        self.state: Mapping[str, Observation] = state
        self.now = now
        # The fold's own lookups, not a copy (copying them made every write O(store)): current
        # with the newest read of the handle, which is this one while a write holds the lock.
        self.lookups = lookups if lookups is not None else _lookups_of(state)
        self._derived = {} if derived is None else derived  # shared with snapshots of the same events and minute

    def get(self, memory_id: str) -> Observation:
        """Returns the memory `memory_id` (live or not); raises NotFoundError."""
        found = self.state.get(memory_id)
        if found is None:
            raise NotFoundError(f"no memory with id {memory_id!r}")
        return found

    @property
    def indexed(self) -> Mapping[str, Observation]:
        """The memories the index holds: every one not forgotten or consolidated (archived ones too)."""
        return self._memo("indexed", lambda: {i: o for i, o in self.state.items() if o.live})

    @property
    def live(self) -> Mapping[str, Observation]:
        """The live memories not archived at `now` (to the minute: the archive changes over days),
        decided per memory on lookup (`Unarchived`: a recall looks up its candidates only)."""
        return self._memo("live", lambda: Unarchived(self.state, self.now, self.lookups.linked_from))

    def neighbours_of(self, ids: Iterable[str]) -> dict[str, tuple[list[str], list[str]]]:
        """The conversational neighbours of `ids` (see `conversation_neighbours`), looked up
        through the fold's followers; archived memories count, as in the keyword index."""
        whole = self._derived.get("neighbours")
        if whole is not None:
            return {i: whole[i] for i in dict.fromkeys(ids) if i in whole}
        self._derived.setdefault("neighbours", None)  # asked for: `settle` computes them all
        return conversation_neighbours(LiveView(self.state), ids, self.lookups.followers)

    @property
    def associations(self) -> Mapping[str, Mapping[str, float]]:
        """The association links among the live, unarchived memories (see `association_graph`),
        per memory on lookup (`Associations`)."""
        return self._memo("associations", lambda: Associations(self.live, self.lookups.linked_from))

    def settle(self) -> None:
        """Completes the derived views asked for so far. Per memory they cost nothing to start
        (a cold command) but something on every lookup, and a handle that reads the same events
        in the same minute again (a long-lived server) looks up thousands a call: for it the
        whole views, computed once, are cheaper."""
        derived = self._derived
        for name in ("live", "associations"):
            if name in derived:
                derived[name].whole()
        if "neighbours" in derived and derived["neighbours"] is None:
            derived["neighbours"] = MappingProxyType(conversation_neighbours(self.indexed))

    def _memo(self, name: str, build: Callable[[], Any]) -> Any:
        if name not in self._derived:
            built = build()
            self._derived[name] = MappingProxyType(built) if isinstance(built, dict) else built  # lazy ones are read-only
        return self._derived[name]


class Snapshots:
    """Reads the memories of one vault for one handle, reusing the work of the last read.

    The fold is incremental (only events it has not applied); the derived views are shared with
    the last snapshot while its event set and its minute are this one's. Both are keyed on what
    was read, so no caller ever invalidates anything.
    """

    def __init__(self) -> None:
        self._fold = IncrementalFold()
        self._folded: EventKey | None = None  # the event set last handed to the fold
        # What the last read derived, and for which events and minute. Not the last `Memories`
        # itself: holding it would hold a view of the fold's state, which the fold then copies.
        self._derived: tuple[EventKey, datetime, dict[str, Any]] | None = None

    def read(self, engram_dir: Path, now: datetime) -> Memories:
        """Returns the memories of the vault's events as they are now on disk, at `now`."""
        events = read_events(engram_dir)
        if events.key != self._folded:  # even finding nothing new is O(n): a recall at 20k memories +11 ms
            self._fold.update(events.events, self._known_prefix(events))
            self._folded = events.key
        last = self._derived
        same = last is not None and last[0] == events.key and last[1] == _minute(now)
        derived: dict[str, Any] = last[2] if same and last else {}
        self._derived = (events.key, _minute(now), derived)
        # A view, not a copy: the fold copies it out only if it is still held when the fold changes.
        memories = Memories(events, self._fold.view(), now, derived, self._fold.lookups)
        if same:
            memories.settle()  # read again with nothing new: a long-lived handle
        return memories

    def _known_prefix(self, events: EventSet) -> int:
        """Returns how many leading events of `events` the fold was handed before: all of the last
        read's when `events` extends it (same event at the same place), else 0."""
        if self._folded is None:
            return 0
        count, last = self._folded
        extends = 0 < count <= len(events) and events.events[count - 1].id == last
        return count if extends else 0


def _lookups_of(state: Mapping[str, Observation]) -> Lookups:
    lookups = Lookups()
    for obs in state.values():
        lookups.note(None, obs)
    return lookups


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)
