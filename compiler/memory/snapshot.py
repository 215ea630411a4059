"""One read of a vault's memories: the events, their fold, and what is derived from the fold.

Every memory operation reads the events once (`read_events`) and works on that `Memories`
snapshot: the write path resolves against its state, recall scores its live memories, and both
hand it down as a value. Nothing here is invalidated by a caller: a snapshot never changes, and
`Snapshots` (one per `VaultMemory` handle) only reuses work keyed on the event set itself, its
`EventSet.key` (count, last id; events are only ever added): the fold applies just the events
added since the last read and is skipped while the key is unchanged, and what is derived from
the fold (live, neighbours, associations) is reused while the key and the minute stay the same.
Those are decided per memory on lookup (a recall looks up its candidates, not the store), and
the decisions are kept for the next read of the same events in the same minute. They are never
completed into whole views on a call's path: that cost one call a minute O(store) (2.5 s at
136,000 memories) and made the warm recalls after it no cheaper (benchmarks/README.md).

A new handle (every CLI command) starts from the fold checkpoint (`compiler.memory.checkpoint`):
it reads and folds only the journal after the checkpoint's mark. Its `EventSet.events` is then
`Deferred`: the length, the key, the marks and the events after the checkpoint cost nothing;
only a consumer that asks for an earlier event (an events digest, a refold) reads them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from datetime import datetime
from itertools import chain
from pathlib import Path
from types import MappingProxyType
from typing import Any

from compiler.core.errors import BuildWarning, CorruptDataError, NotFoundError
from compiler.events.journal import JournalMark, MemoryEvent, journal_since, journal_view
from compiler.memory.checkpoint import (
    Checkpoint,
    OnDisk,
    collector_paused,
    load_checkpoint,
    save_checkpoint,
    worth_saving,
)
from compiler.memory.index import LiveView, conversation_neighbours
from compiler.memory.fold import IncrementalFold, Lookups
from compiler.memory.model import Associations, Observation, Unarchived

EventKey = tuple[int, str]


@dataclass(frozen=True)
class EventSet:
    """Every memory event a vault knows at one read — every chunk's, then the journal's — and the
    warnings of the readers (quarantined chunk records, a chunk listed but missing, corrupt lines)."""

    events: Sequence[MemoryEvent] = ()  # read-only: the chunks' events, then the journal's (`Joined`, `Deferred`)
    warnings: tuple[BuildWarning, ...] = ()
    chunks: int = 0  # how many of `events` (the first ones) came from chunks
    disk: OnDisk | None = None  # what on disk the events are (None: it changed while they were read)
    start: Checkpoint | None = None  # the checkpoint this read continued (its events are read only if asked for)

    @property
    def key(self) -> EventKey:
        """A cheap fingerprint of the set: (count, last id) changes whenever an event is added."""
        count = len(self.events)
        return count, self.id_at(count - 1) if count else ""

    def id_at(self, index: int) -> str:
        """Returns the id of the event at `index` (0 ≤ index < len), without reading the events a
        checkpoint stands for when it knows the id."""
        known = getattr(self.events, "id_at", None)
        return known(index) if known else self.events[index].id

    def extends(self, key: EventKey | None) -> bool:
        """True when these events begin with the set whose key is `key`: as many events or more,
        and the same event at its last place."""
        if key is None:
            return False
        count, last = key
        if count == 0:
            return last == ""
        return count <= len(self.events) and self.id_at(count - 1) == last

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[MemoryEvent]:
        return iter(self.events)


def event_mark(events: EventSet) -> dict[str, str]:
    """Returns where `events` end, to ask `named_since` about a later read: how many came from
    chunks and the last of them, how many there were in all and the last."""
    (count, last), chunks = events.key, events.chunks
    return {"chunks": str(chunks), "chunk_last": events.id_at(chunks - 1) if chunks else "",
            "count": str(count), "last": last}


def named_since(events: EventSet, mark: Mapping[str, str]) -> set[str] | None:
    """Returns the memories the events after `mark` (an `event_mark` of an earlier read) name,
    when the chunks are the marked ones and only the journal grew since (journal writes); else
    None: a chunk came in (its events are anywhere in the order) or the mark is not of these events."""
    since = events_since(events, mark)
    return None if since is None else {e.memory for e in since}


def events_since(events: EventSet, mark: Mapping[str, str]) -> Sequence[MemoryEvent] | None:
    """Returns the events after `mark` (see `named_since`), or None when `events` do not extend it."""
    now = event_mark(events)
    if (mark.get("chunks"), mark.get("chunk_last")) != (now["chunks"], now["chunk_last"]):
        return None
    try:
        count = int(mark["count"])
    except (KeyError, ValueError):
        return None
    if count < events.chunks or not events.extends((count, mark.get("last", ""))):
        return None
    return events.events[count:]


def read_events(engram_dir: Path, start: Checkpoint | None = None) -> EventSet:
    """Returns every memory event of the vault whose `.engram` folder is `engram_dir`, with warnings.

    With `start` (a checkpoint of an earlier read) while the disk still holds what it reflects
    (the same chunks and manifest, a journal that continues its mark), only the journal after
    the mark is read: the events it stands for are read only when one of them is asked for."""
    from compiler.events.store import chunks_stamp, read_chunk_events

    stamp, names = chunks_stamp(engram_dir)
    if start is not None and start.disk.chunks == stamp:
        tail = journal_since(engram_dir, start.disk.journal)
        if tail is not None:
            events = Deferred(start.count, dict(start.ids), partial(_checkpointed, engram_dir, start), tail.events)
            disk = OnDisk(stamp, tail.end, names)
            return EventSet(events, (*start.warnings, *tail.warnings), start.chunks, disk, start)
    chunked, chunk_warnings = read_chunk_events(engram_dir)
    journal = journal_since(engram_dir, JournalMark())
    assert journal is not None  # the empty mark starts every journal
    disk = OnDisk(stamp, journal.end, names) if chunks_stamp(engram_dir)[0] == stamp else None
    return EventSet(Joined(chunked, journal.events), (*chunk_warnings, *journal.warnings), len(chunked), disk)


def _checkpointed(engram_dir: Path, point: Checkpoint) -> Sequence[MemoryEvent]:
    """Returns the events `point` stands for, read again: its chunks' (a chunk added since is not
    one of them), then the journal's up to its mark (the journal is only appended to)."""
    from compiler.events.store import events_of_chunks

    with collector_paused():
        chunked = events_of_chunks(engram_dir, point.disk.names)
        journal, _ = journal_view(engram_dir)
    head = Joined(chunked, journal[:max(0, point.count - len(chunked))])
    if len(chunked) != point.chunks or len(head) != point.count or any(head[k].id != i for k, i in point.ids):
        # A chunk deleted, or the journal cut, since the read: its events are gone from the disk.
        raise CorruptDataError(".engram: memory events were removed while this command read them; run it again")
    return head


def checkpoint_of(events: EventSet) -> Checkpoint | None:
    """Returns the marks of `events` to save with their fold (None when the disk changed as they were read)."""
    if events.disk is None:
        return None
    (count, last), chunks = events.key, events.chunks
    ids = {count - 1: last} if count else {}
    if chunks:
        ids[chunks - 1] = events.id_at(chunks - 1)
    return Checkpoint(events.disk, count, chunks, tuple(sorted(ids.items())), events.warnings)


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


class Deferred(Sequence[MemoryEvent]):
    """The events of a read that continued a checkpoint: the `count` events it stands for, read
    (`load`) only when one of them is asked for, then the events read after it (`tail`). Its
    length, the events after `count` and the ids the checkpoint knows cost nothing."""

    def __init__(self, count: int, ids: Mapping[int, str], load: Callable[[], Sequence[MemoryEvent]],
                 tail: Sequence[MemoryEvent]) -> None:
        self._count, self._ids, self._load, self._tail = count, ids, load, tail
        self._joined: Joined | None = None

    def __len__(self) -> int:
        return self._count + len(self._tail)

    def id_at(self, index: int) -> str:
        known = self._ids.get(index)
        return known if known is not None else self[index].id

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and start >= self._count:
                return list(self._tail[start - self._count:max(start, stop) - self._count])
            return self._all()[index]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self._tail[index - self._count] if index >= self._count else self._all()[index]

    def __iter__(self) -> Iterator[MemoryEvent]:
        return iter(self._all())

    def _all(self) -> Joined:
        if self._joined is None:
            self._joined = Joined(self._load(), self._tail)
        return self._joined


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
    def recallable(self) -> Mapping[str, Observation]:
        """The memories recall may return: `indexed` (every one not forgotten or consolidated,
        archived ones too: a faded memory the query matches is what the user needs, and recalling
        it revives it), decided per memory on lookup instead of listed: a recall looks up its candidates."""
        return self._memo("recallable", lambda: LiveView(self.state))

    @property
    def live(self) -> Mapping[str, Observation]:
        """The live memories not archived at `now` (to the minute: the archive changes over days),
        decided per memory on lookup (`Unarchived`: a recall looks up its candidates only)."""
        return self._memo("live", lambda: Unarchived(self.state, self.now, self.lookups.linked_from))

    def neighbours_of(self, ids: Iterable[str]) -> dict[str, tuple[list[str], list[str]]]:
        """The conversational neighbours of `ids` (see `conversation_neighbours`), looked up
        through the fold's followers; archived memories count, as in the keyword index."""
        return conversation_neighbours(LiveView(self.state), ids, self.lookups.followers)

    @property
    def associations(self) -> Mapping[str, Mapping[str, float]]:
        """The association links among the live, unarchived memories (see `association_graph`),
        per memory on lookup (`Associations`)."""
        return self._memo("associations", lambda: Associations(self.live, self.lookups.linked_from))

    def _memo(self, name: str, build: Callable[[], Any]) -> Any:
        if name not in self._derived:
            built = build()
            self._derived[name] = MappingProxyType(built) if isinstance(built, dict) else built  # lazy ones are read-only
        return self._derived[name]


class Snapshots:
    """Reads the memories of one vault for one handle, reusing the work of the last read.

    A new handle starts from the vault's fold checkpoint when the disk still holds what it
    reflects (`compiler.memory.checkpoint`), and saves one when it is closed, if its reads folded
    many events past it: never inside a read, so no call of a long-lived handle (the MCP server)
    waits for a save that grows with the store (0.65 s at 50,000 memories).
    The fold is incremental (only events it has not applied); the derived views are shared with
    the last snapshot while its event set and its minute are this one's. Both are keyed on what
    was read, so no caller ever invalidates anything.
    """

    def __init__(self) -> None:
        self._fold = IncrementalFold()
        self._folded: EventKey | None = None  # the event set last handed to the fold
        self._start: Checkpoint | None = None  # the checkpoint reads continue: the last one loaded or saved
        self._looked = False  # for a checkpoint, on the first read
        self._saving = True
        self._behind: tuple[EventSet, int] | None = None  # the last read, and how many events it folded past the checkpoint
        # What the last read derived, and for which events and minute. Not the last `Memories`
        # itself: holding it would hold a view of the fold's state, which the fold then copies.
        self._derived: tuple[EventKey, datetime, dict[str, Any]] | None = None

    def read(self, engram_dir: Path, now: datetime) -> Memories:
        """Returns the memories of the vault's events as they are now on disk, at `now`."""
        with collector_paused():
            events = self._read_events(engram_dir)
            if events.key != self._folded:  # even finding nothing new is O(n): a recall at 20k memories +11 ms
                self._fold.update(events.events, self._known_prefix(events))
                self._folded = events.key
        continued = self._start.count if self._start and events.start is self._start else 0
        self._behind = (events, len(events) - continued)  # saved, if worth it, at close
        last = self._derived
        same = last is not None and last[0] == events.key and last[1] == _minute(now)
        derived: dict[str, Any] = last[2] if same and last else {}
        self._derived = (events.key, _minute(now), derived)
        # A view, not a copy: the fold copies it out only if it is still held when the fold changes.
        return Memories(events, self._fold.view(), now, derived, self._fold.lookups)

    def _read_events(self, engram_dir: Path) -> EventSet:
        """Returns the events on disk, continuing the checkpoint when it still holds."""
        first = not self._looked
        if first:
            self._looked = True
            loaded = load_checkpoint(engram_dir)
            if loaded is not None:
                self._start, self._fold = loaded
                self._folded = self._start.count, dict(self._start.ids).get(self._start.count - 1, "")
        events = read_events(engram_dir, self._start)
        if self._start is not None and events.start is None:  # the disk no longer holds what it reflects
            if first:  # the saved fold may hold events that are gone (a journal cut short): fold afresh
                self._fold, self._folded = IncrementalFold(), None
            self._start = None
        return events

    def save_if_due(self, engram_dir: Path) -> None:
        """Saves the fold of the last read when it folded many events past the checkpoint
        (`worth_saving`): what a handle does as it closes, and the MCP server once its calls
        pause after a maintenance."""
        if self._behind is not None and worth_saving(self._behind[1], len(self._behind[0])):
            self.save(engram_dir)

    def save(self, engram_dir: Path) -> None:
        """Saves the fold of the last read as the checkpoint, if it folded any event past the last
        one (compile calls it: its own cost dwarfs the save, and the commands after it start there)."""
        events, new = self._behind or (None, 0)
        point = checkpoint_of(events) if events is not None and new > 0 and self._saving else None
        if point is not None:
            saved = save_checkpoint(engram_dir, point, self._fold)
            self._start = point if saved else self._start
            self._saving = saved  # a cache that cannot be written (read-only): not tried at every read
            self._behind = None if saved else self._behind

    def _known_prefix(self, events: EventSet) -> int:
        """Returns how many leading events of `events` the fold was handed before: all of the last
        read's when `events` extends it (same event at the same place), else 0."""
        if self._folded is None or not events.extends(self._folded):
            return 0
        return self._folded[0]


def _lookups_of(state: Mapping[str, Observation]) -> Lookups:
    lookups = Lookups()
    for obs in state.values():
        lookups.note(None, obs)
    return lookups


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)
