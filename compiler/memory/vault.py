"""The context of every memory operation, and the steps each one starts or ends with.

`VaultMemory` is a handle, not a service: the vault's paths, settings and clock, the embedder
(loaded on first use) and the memory index (opened on first use, closed by `close()`). It holds
no memories. Every operation reads them once (`read_memories`), brings the index in step with
that read (`sync_index`) and, when it writes, appends its events (`append_and_sync`).

What a handle remembers between operations is keyed on the events themselves: its `Snapshots`
fold only what was added since the last read, and `IndexedEvents` knows which events the index
already reflects. A long-lived handle (the MCP server's) makes repeated calls cheap; a fresh one
starts from the events the index records being in step with, and checks only the memories named
since (every memory when a chunk came in, or there is no record).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from compiler.core import clock
from compiler.core.clock import parse_time
from compiler.core.errors import BusyError
from compiler.core.lock import writer_lock
from compiler.core.settings import Settings
from compiler.events.journal import MemoryEvent, append_events
from compiler.embed.embedder import Embedder, load_embedder, model_identity
from compiler.memory import index as memory_index
from compiler.memory.index import MemoryIndex
from compiler.memory.resolve import Thresholds
from compiler.memory.snapshot import EventKey, EventSet, Memories, Snapshots, event_mark, events_since

TEXT_NEUTRAL = frozenset({"recall"})  # ops that change no indexed text (no content, title or live set)


@dataclass
class IndexedEvents:
    """Which events the memory index reflects: the event set it was last checked against in full,
    and the events written and indexed since (by this handle's write path)."""

    checked: EventKey | None = None
    written: set[str] = field(default_factory=set)
    recorded: dict[str, str] | None = None  # the mark this handle last found or wrote in the index

    def reflect(self, events: EventSet) -> bool:
        """True when the index is in step with `events`: everything after the checked set is a
        recall (it changes no indexed text) or was indexed as it was written."""
        if not events.extends(self.checked):
            return False  # not an extension of the checked set: a chunk came in, or the journal changed
        return all(e.op in TEXT_NEUTRAL or e.id in self.written for e in events.events[self.checked[0]:])

    def checked_against(self, events: EventSet) -> None:
        """Records that the index is in step with `events` (all of them)."""
        self.checked, self.written = events.key, set()

    def wrote(self, events: Iterable[MemoryEvent]) -> None:
        """Records `events` as reflected: the write path indexed what they wrote as it appended them."""
        self.written.update(e.id for e in events)


class VaultMemory:
    """One vault's memory context. Open it, pass it to the memory functions, `close()` it (or use
    it as a context manager); `now` pins the clock (tests, replays), else `settings.now`, else UTC now."""

    def __init__(self, vault: Path, settings: Settings, *, embedder: Embedder | None = None,
                 now: datetime | None = None) -> None:
        self.root = vault.resolve()
        self.engram = self.root / ".engram"
        self.settings = settings
        self.identity = embedder.identity if embedder else model_identity(settings.model)
        self.limits = Thresholds(settings.reinforce_min, settings.merge_min, settings.replace_min,
                                 settings.merge_max_chars, settings.associate_min, settings.associate_max)
        self.snapshots = Snapshots()
        self.indexed_events = IndexedEvents()
        self._fixed_now = now or (parse_time(settings.now) if settings.now else None)
        self._embedder = embedder
        self._index: MemoryIndex | None = None

    def __enter__(self) -> VaultMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Records in the index what this handle wrote to it, saves the fold checkpoint when it is
        due (`Snapshots.save_if_due`) and closes the index (Chroma and SQLite handles); the next use
        reopens them."""
        self._record_writes()
        self.snapshots.save_if_due(self.engram)
        if self._index:
            self._index.close()
            self._index = None

    def _record_writes(self) -> None:
        """Tells the next process that the index reflects the events this handle wrote (the write
        path indexes as it appends, and only a read records it): without it, the next reader of a
        store just imported put its last 1,000 memories again (0.3 s at 50,000). Skipped when
        another process holds the lock: the next reader catches up, as before."""
        if self._index is None or not self.indexed_events.written:
            return
        try:
            with writer_lock(self.engram, timeout=0):
                events = read_memories(self).events
                if self.indexed_events.reflect(events):
                    self.indexed_events.checked_against(events)
                    _record(self, events)
        except BusyError:
            pass

    def now(self) -> datetime:
        """Returns the memory clock: the pinned time, else UTC now to the second."""
        return self._fixed_now or clock.utc_now()  # compiler.core.clock: where tests move time

    def embedder(self) -> Embedder:
        """Returns the embedding model, loading it on first use."""
        if self._embedder is None:
            self._embedder = load_embedder(self.settings.model)
        return self._embedder

    def index(self) -> MemoryIndex:
        """Returns the memory index (vectors, keywords, embedding caches), opening it on first use."""
        if self._index is None:
            # Kept open between operations: its flat vector store reloads its row map itself when
            # another process wrote (compiler.index.flat), and a Chroma server is always current.
            self._index = MemoryIndex(self.engram / "cache", self.settings.chroma_url)
        return self._index


def read_memories(vault: VaultMemory) -> Memories:
    """Returns the vault's memories as the events on disk hold them now: one read of the events."""
    return vault.snapshots.read(vault.engram, vault.now())


def sync_index(vault: VaultMemory, memories: Memories) -> int:
    """Brings the memory index in step with `memories` (events from another process become
    searchable); returns how many texts were embedded. Checking every memory is O(n): skipped
    while the index already reflects these events (this handle knows it), and in a fresh handle
    limited to the memories named since the events the index records being in step with (a
    journal grown by other processes); only a new chunk (from git) or no record checks them all."""
    events = memories.events
    if vault.indexed_events.reflect(events):
        embedded = 0
    else:
        index = vault.index()
        mark = index.keywords.mark()
        since = events_since(events, mark) if mark.get("identity") == vault.identity else None
        if since is None:
            embedded = memory_index.sync_index(index, memories.indexed, vault.embedder, vault.identity)
        else:
            named = {e.memory for e in since if e.op not in TEXT_NEUTRAL}
            embedded = memory_index.sync_named(index, memories.state, named, memories.lookups.followers,
                                               vault.embedder, vault.identity)
    vault.indexed_events.checked_against(events)  # the next check starts from here
    _record(vault, events)
    return embedded


def _record(vault: VaultMemory, events: EventSet) -> None:
    """Records in the index that it is in step with `events`, for the next process (written
    after the rows: see `MemoryKeywordIndex.set_mark`); a no-op while the record already says so."""
    mark = {**event_mark(events), "identity": vault.identity}
    if vault.indexed_events.recorded != mark:
        index = vault.index()
        if index.keywords.mark() != mark:
            index.keywords.set_mark(mark)
        vault.indexed_events.recorded = mark


def append_and_sync(vault: VaultMemory, events: Sequence[MemoryEvent]) -> Memories:
    """Appends `events` to the journal (fsync'd) under the writer lock and brings the index in
    step with them; returns the memories after them."""
    with writer_lock(vault.engram):
        append_events(vault.engram, events)
        memories = read_memories(vault)
        sync_index(vault, memories)
    return memories
