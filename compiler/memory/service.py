"""The memory library: store, import, update, forget, restore and recall memories in a vault.

Every CLI command and MCP tool is a thin adapter over `MemoryService`, and they all return the
same plain dicts. Writes take the vault's writer lock, append events to the fsync'd journal,
then bring the memory index in step; state is always re-folded from the events, never cached
across writes, so a concurrent compile or import is seen.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.clock import format_time, parse_time
from compiler.core.errors import BuildWarning, InputError, NotFoundError
from compiler.core.lock import writer_lock
from compiler.core.settings import Settings
from compiler.events.journal import MemoryEvent, append_events, new_id, read_journal
from compiler.index.embedder import Embedder, load_embedder, model_identity
from compiler.memory.index import (
    MemoryIndex,
    conversation_context,
    conversation_neighbours,
    memory_text,
    sync_index,
)
from compiler.memory.input import MemoryInput, event_data, validate
from compiler.memory.model import (
    IncrementalFold,
    Observation,
    apply_event,
    archived,
    association_graph,
)
from compiler.memory.resolve import Decision, Thresholds, decide

IMPORT_BATCH = 256
RECALL_POOL = 30
GRAPH_BONUS = 0.1  # × edge weight at depth 1, halved at depth 2


def memory_id_for(project: str, source_id: str) -> str:
    """Returns a stable sync_id for an external source, so importing it twice adds nothing."""
    return "mem-" + hashlib.sha256(f"{project}\x00{source_id}".encode()).hexdigest()[:16]


class MemoryService:
    """Memories of one vault. Open it, use it, `close()` it (or use it as a context manager)."""

    def __init__(self, vault: Path, settings: Settings, *, embedder: Embedder | None = None,
                 now: datetime | None = None) -> None:
        self.vault = vault.resolve()
        self.engram = self.vault / ".engram"
        self.settings = settings
        self._embedder = embedder
        self._identity = embedder.identity if embedder else model_identity(settings.model)
        self._fixed_now = now or (parse_time(settings.now) if settings.now else None)
        self._index: MemoryIndex | None = None
        self._fold = IncrementalFold()
        self._synced_key: tuple[int, str] | None = None  # the event set the index was last synced to
        self._derived_cache: dict[str, tuple[Any, Any]] = {}
        self.limits = Thresholds(settings.reinforce_min, settings.merge_min, settings.replace_min,
                                 settings.merge_max_chars, settings.associate_min, settings.associate_max)

    def __enter__(self) -> "MemoryService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._index:
            self._index.close()
            self._index = None

    # -- state ---------------------------------------------------------------------------

    def now(self) -> datetime:
        return self._fixed_now or datetime.now(timezone.utc).replace(microsecond=0)

    def events(self) -> tuple[list[MemoryEvent], list[BuildWarning]]:
        """Returns every memory event this vault knows: every chunk's, then the journal's, with warnings.

        Chunk problems (quarantined records, a chunk listed but missing...) come back as warnings.
        """
        from compiler.events.store import read_chunk_events

        chunked, chunk_warnings = read_chunk_events(self.engram)
        journal, warnings = read_journal(self.engram)
        return chunked + journal, chunk_warnings + warnings

    def state(self) -> dict[str, Observation]:
        """Returns every memory (live or not) folded from the events; a copy the caller may change."""
        return dict(self._fold.update(self.events()[0]))

    def events_key(self) -> tuple[int, str]:
        """Returns a cheap fingerprint of the event set: it changes whenever an event is added."""
        events = self.events()[0]
        return len(events), events[-1].id if events else ""

    def live(self, state: dict[str, Observation] | None = None) -> dict[str, Observation]:
        """Returns live, unarchived memories at `now` (cached while neither the events nor `now` change)."""
        if state is not None:
            pruned = archived(state, self.now())
            return {i: o for i, o in state.items() if o.live and i not in pruned}
        return dict(self._derived("live", self._unarchived))

    def neighbours(self) -> dict[str, tuple[list[str], list[str]]]:
        """Returns each live memory's conversational neighbours (see `conversation_neighbours`; archived
        memories count, as in the keyword index), cached like `live`."""
        return self._derived("neighbours", lambda: conversation_neighbours(
            {i: o for i, o in self.state().items() if o.live}))

    def associations(self) -> dict[str, dict[str, float]]:
        """Returns the association links among live, unarchived memories (see `association_graph`),
        cached like `live`."""
        return self._derived("associations", lambda: association_graph(self._derived("live", self._unarchived)))

    def _unarchived(self) -> dict[str, Observation]:
        return self.live(self.state())

    def _derived(self, name: str, build: Callable[[], Any]) -> Any:
        """Returns build(), cached while neither the events nor `now` (to the minute: the archive
        changes over days, not seconds) change. Recall reads these on every query: rebuilding
        them is O(n) in the memories."""
        key = (self.events_key(), self.now().replace(second=0))
        cached = self._derived_cache.get(name)
        if cached is None or cached[0] != key:
            cached = self._derived_cache[name] = (key, build())
        return cached[1]

    @property
    def identity(self) -> str:
        """The embedding model's identity (what cached vectors are keyed by)."""
        return self._identity

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self.settings.model)
        return self._embedder

    def index(self) -> MemoryIndex:
        if self._index is None:
            self._index = MemoryIndex(self.engram / "cache", self.settings.chroma_url)
        return self._index

    def sync_index(self) -> int:
        """Brings the memory index in step with the events; returns texts embedded.

        Checking every memory is O(n): skipped while the event set is the one last synced.
        """
        key = self.events_key()
        if key == self._synced_key:
            return 0
        live = {i: o for i, o in self.state().items() if o.live}
        embedded = sync_index(self.index(), live, self.embedder, self._identity)
        self._synced_key = key
        return embedded

    def mark_synced(self, before: tuple[int, str]) -> None:
        """After appending events that change no indexed text (recalls): the index is still in step."""
        if self._synced_key == before:
            self._synced_key = self.events_key()

    def get(self, memory_id: str) -> Observation:
        found = self.state().get(memory_id)
        if found is None:
            raise NotFoundError(f"no memory with id {memory_id!r}")
        return found

    # -- writes ----------------------------------------------------------------------------

    def add(self, item: MemoryInput) -> dict[str, Any]:
        """Stores one memory through resolve; returns {"action", "id", ...}."""
        return self.add_many([item])["results"][0]

    def add_many(self, items: Sequence[MemoryInput]) -> dict[str, Any]:
        """Stores many memories; known source ids are skipped and known texts are not re-embedded.

        Returns {"results": [one dict per item], "actions": {action: count}, "embedded": n}.
        """
        clean = [validate(i) for i in items]
        with writer_lock(self.engram):
            embedded = self.sync_index()
            state = self.state()
            results: list[dict[str, Any]] = []
            for start in range(0, len(clean), IMPORT_BATCH):
                batch = clean[start:start + IMPORT_BATCH]
                vectors, fresh = self.index().embed([memory_text(_draft(i)) for i in batch], self.embedder, self._identity)
                embedded += fresh
                results.extend(self._resolve_batch(batch, vectors, state))
            self._synced_key = self.events_key()  # every memory written was indexed as it was written
        actions: dict[str, int] = {}
        for result in results:
            actions[result["action"]] = actions.get(result["action"], 0) + 1
        return {"results": results, "actions": actions, "embedded": embedded}

    def save_new(self, item: MemoryInput) -> dict[str, Any]:
        """Stores a memory as NEW without resolving it against others; returns the answer."""
        item = validate(item)
        memory_id = memory_id_for(item.project, item.source_id) if item.source_id else new_id("mem-")
        with writer_lock(self.engram):
            event = MemoryEvent(_event_id("save", memory_id), "save", memory_id, format_time(self.now()),
                                event_data(item))
            self.write_events([event])
        return self._answer(Decision("new"), self.get(memory_id))

    def _resolve_batch(self, batch: Sequence[MemoryInput], vectors: np.ndarray,
                       state: dict[str, Observation]) -> list[dict[str, Any]]:
        """Resolves a batch in order: each item sees the index plus the items before it."""
        at = format_time(self.now())
        found = self.index().vectors.query_many(vectors, RECALL_POOL)
        pending: dict[str, np.ndarray] = {}  # written in this batch, not in the vector index yet
        previous: dict[tuple[str, str], str] = {}  # (project, session) → the memory the last item went to
        known = {source: i for i, o in state.items() for source in o.sources}  # folded-in writes count as known
        results, events = [], []
        for row, item in enumerate(batch):
            memory_id = memory_id_for(item.project, item.source_id) if item.source_id else new_id("mem-")
            if memory_id in known:
                results.append({"action": "known", "id": known[memory_id], "title": state[known[memory_id]].title})
                continue
            cosines = {**dict(found[row]), **{i: float(v @ vectors[row]) for i, v in pending.items()}}
            nearest = [(state[i], c) for i, c in cosines.items() if i in state and state[i].live
                       and state[i].project == item.project and state[i].kind == item.kind]
            decision = decide(item.content, nearest, self.limits)
            event = self._event_for(decision, item, memory_id, at, previous.get((item.project, item.session_id), ""))
            state[event.memory] = apply_event(state.get(event.memory), event) or state[event.memory]
            events.append(event)
            pending[event.memory] = vectors[row]
            previous[(item.project, item.session_id)] = event.memory
            known.update({source: event.memory for source in state[event.memory].sources})
            results.append(self._answer(decision, state[event.memory]))
        append_events(self.engram, events)
        self._reindex(state, list(pending))
        return results

    def _event_for(self, decision: Decision, item: MemoryInput, memory_id: str, at: str,
                   follows: str = "") -> MemoryEvent:
        sources = [memory_id] + ([item.source_id] if item.source_id else [])
        if decision.action == "new":
            data = {**event_data(item), "links": [list(link) for link in decision.links]}
            if follows:
                data["follows"] = follows  # a conversation imported in order: each turn indexes its neighbours
            return MemoryEvent(_event_id("save", memory_id), "save", memory_id, at, data)
        op = {"reinforced": "reinforce", "merged": "merge", "replaced": "replace"}[decision.action]
        data = {"sources": sources, "source": memory_id, "similarity": round(decision.similarity, 4),
                "reason": decision.reason}
        if decision.content:
            data["content"] = decision.content
        return MemoryEvent(_event_id(op, memory_id), op, decision.target, at, data)

    def _answer(self, decision: Decision, obs: Observation) -> dict[str, Any]:
        answer = {"action": decision.action, "id": obs.id, "title": obs.title, "project": obs.project,
                  "category": obs.category, "strength": round(obs.strength(self.now()), 4)}
        if decision.target:
            answer.update(similarity=round(decision.similarity, 4), reason=decision.reason)
        if decision.links:
            answer["links"] = [i for i, _ in decision.links]
        return answer

    def _reindex(self, state: dict[str, Observation], ids: Sequence[str]) -> None:
        """Indexes memories written in a batch with the vectors of their current text; memories
        whose conversational neighbours changed get their keyword row rewritten."""
        live = {i: o for i, o in state.items() if o.live}
        context = conversation_context(live)
        memories = [live[i] for i in ids if i in live]
        vectors, _ = self.index().embed([memory_text(m) for m in memories], self.embedder, self._identity)
        self.index().put(memories, vectors, context)
        before = {live[i].follows for i in ids if i in live}  # their context gained the new memories
        touched = (before | {live[i].follows for i in before if i in live}) - set(ids)
        self.index().put_keywords([live[i] for i in sorted(touched) if i in live], context)

    def update(self, memory_id: str, content: str | None = None, importance: float | None = None,
               title: str | None = None) -> dict[str, Any]:
        """Rewrites a memory (its old content stays as history); returns the memory."""
        with writer_lock(self.engram):
            current = self.get(memory_id)
            item = validate(MemoryInput(content=content if content is not None else current.content,
                                        title=title or current.title, project=current.project,
                                        category=current.category,
                                        importance=current.importance if importance is None else importance))
            data = {"content": item.content, "title": item.title, "importance": item.importance, "source": "update"}
            self.write_events([MemoryEvent(new_id("ev-"), "update", memory_id, format_time(self.now()), data)])
        return self.describe(memory_id)

    def forget(self, memory_id: str) -> dict[str, Any]:
        """Deletes a memory (a tombstone: it stays in the log, `restore` brings it back)."""
        with writer_lock(self.engram):
            self.get(memory_id)
            self.write_events([MemoryEvent(new_id("ev-"), "delete", memory_id, format_time(self.now()))])
        return {"action": "forgotten", "id": memory_id}

    def restore(self, memory_id: str) -> dict[str, Any]:
        """Brings back a forgotten, archived or consolidated memory, with a fresh decay clock."""
        with writer_lock(self.engram):
            self.get(memory_id)
            self.write_events([MemoryEvent(new_id("ev-"), "restore", memory_id, format_time(self.now()))])
        return {"action": "restored", **self.describe(memory_id)}

    def write_events(self, events: Sequence[MemoryEvent]) -> None:
        """Appends events to the journal (fsync'd) and brings the index in step, under the writer lock."""
        with writer_lock(self.engram):
            append_events(self.engram, events)
            self.sync_index()

    def describe(self, memory_id: str, state: dict[str, Observation] | None = None) -> dict[str, Any]:
        """Returns a memory as a dict, with its strength now."""
        obs = (state or self.state()).get(memory_id)
        if obs is None:
            raise NotFoundError(f"no memory with id {memory_id!r}")
        data = asdict(obs)
        data["strength"] = round(obs.strength(self.now()), 4)
        data["live"] = obs.live
        return data


def _event_id(op: str, memory_id: str) -> str:
    """Deterministic for writes derived from a stable memory id: re-importing writes the same event."""
    return "ev-" + hashlib.sha256(f"{op}\x00{memory_id}".encode()).hexdigest()[:16]


def _draft(item: MemoryInput) -> Observation:
    return Observation(id="", project=item.project, title=item.title, content=item.content)


def read_import_file(path: Path) -> tuple[list[MemoryInput], list[BuildWarning]]:
    """Returns the memories of a JSON-lines import file and a warning per unusable line."""
    items: list[MemoryInput] = []
    warnings: list[BuildWarning] = []
    allowed = {"content", "title", "project", "category", "importance", "created_at", "source_id", "type",
               "topic_key", "scope", "session_id", "kind", "fields"}
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise InputError("a line must be a JSON object")
            item = MemoryInput(**{k: v for k, v in raw.items() if k in allowed and v is not None})
            if item.created_at:
                item = replace(item, created_at=format_time(parse_time(str(item.created_at))))
            items.append(validate(item))
        except (ValueError, TypeError) as error:
            warnings.append(BuildWarning(path.name, number, f"skipped: {error}", "import"))
    return items, warnings
