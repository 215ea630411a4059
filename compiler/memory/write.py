"""The memory write path: every new statement is resolved against what the vault already knows.

    write_memories = validate → lock → read the memories → sync the index
                     → per batch: embed → resolve → append the events → reindex

Resolve (compiler.memory.resolve) decides per item: new, reinforced, merged or replaced. A
batch is resolved in order, so each item sees the index plus the items before it; known source
ids are skipped and known texts are not re-embedded. Events are appended (fsync'd) before the
index is touched: the index is derived and rebuildable, the journal is the truth.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, MutableMapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.clock import format_time
from compiler.core.lock import writer_lock
from compiler.core.progress import Progress, no_progress
from compiler.events.journal import MemoryEvent, append_events, new_id
from compiler.memory.fold import Layer, Lookups, apply_event
from compiler.memory.index import LiveView, conversation_context, memory_text, row_hash
from compiler.memory.input import MemoryInput, event_data, read_import_file, validate
from compiler.memory.model import Observation
from compiler.memory.resolve import Decision, considered, decide
from compiler.memory.vault import VaultMemory, read_memories, sync_index

IMPORT_BATCH = 256
NEAREST = 30  # each write is resolved against this many nearest indexed memories of its project and kind
ROW_NEUTRAL = frozenset({"reinforce"})  # write ops that leave a memory's text, vector and metadata as they were


def write_memories(vault: VaultMemory, items: Sequence[MemoryInput], progress: Progress = no_progress) -> dict[str, Any]:
    """Stores `items` through resolve, in order, telling `progress` after each batch.

    Returns {"results": [one answer per item], "actions": {action: count}, "embedded": n}.
    """
    clean = [validate(i) for i in items]
    with writer_lock(vault.engram):
        memories = read_memories(vault)
        embedded = sync_index(vault, memories)
        # Each batch folds its own events into a layer over the read (copying the state, or
        # rebuilding its lookups, would make every write O(store)).
        state: MutableMapping[str, Observation] = Layer(memories.state)
        lookups = memories.lookups.layer()
        results: list[dict[str, Any]] = []
        with progress("store", len(clean)) as tick:
            for start in range(0, len(clean), IMPORT_BATCH):
                batch = clean[start:start + IMPORT_BATCH]
                vectors, fresh = embed_drafts(vault, batch)
                events, answers = resolve_batch(vault, batch, vectors, state, lookups)
                append_events(vault.engram, events)
                reindex(vault, state, lookups, events)
                results += answers
                embedded += fresh
                tick(len(batch))
    return {"results": results, "actions": count_actions(results), "embedded": embedded}


def store_memory(vault: VaultMemory, item: MemoryInput) -> dict[str, Any]:
    """Stores one memory through resolve; returns its answer ({"action", "id", "title", ...})."""
    return write_memories(vault, [item])["results"][0]


def import_memories(vault: VaultMemory, path: Path, progress: Progress = no_progress) -> dict[str, Any]:
    """Stores every memory of a JSON-lines file (see `read_import_file`); a second import adds nothing.

    Returns {"read": n, "skipped": [a warning dict per unusable line], "actions", "embedded"}.
    """
    items, warnings = read_import_file(path)
    written = write_memories(vault, items, progress)
    return {"read": len(items), "skipped": [w.to_dict() for w in warnings], "actions": written["actions"],
            "embedded": written["embedded"]}


def memory_id_for(project: str, source_id: str) -> str:
    """Returns a stable sync_id for an external source, so importing it twice adds nothing."""
    return "mem-" + hashlib.sha256(f"{project}\x00{source_id}".encode()).hexdigest()[:16]


def new_memory_id(item: MemoryInput) -> str:
    """Returns the id a new memory of `item` gets: stable for an external source, else fresh."""
    return memory_id_for(item.project, item.source_id) if item.source_id else new_id("mem-")


def embed_drafts(vault: VaultMemory, batch: Sequence[MemoryInput]) -> tuple[np.ndarray, int]:
    """Returns the vectors of the texts `batch` would index, and how many were newly embedded."""
    drafts = [Observation(id="", project=i.project, title=i.title, content=i.content) for i in batch]
    return vault.index().embed([memory_text(d) for d in drafts], vault.embedder, vault.identity)


def resolve_batch(vault: VaultMemory, batch: Sequence[MemoryInput], vectors: np.ndarray,
                  state: MutableMapping[str, Observation], lookups: Lookups
                  ) -> tuple[list[MemoryEvent], list[dict[str, Any]]]:
    """Resolves a batch in order, each item against its nearest indexed memories and the items
    before it, folding each event into `state` and `lookups`. Returns the events and one answer per item."""
    at = format_time(vault.now())
    found = nearest_indexed(vault, batch, vectors)
    written = _Written(state, lookups)
    events: list[MemoryEvent] = []
    answers: list[dict[str, Any]] = []
    for row, item in enumerate(batch):
        memory_id = new_memory_id(item)
        if memory_id in written.known:
            answers.append(written.known_answer(memory_id))
            continue
        cosines = written.cosines(vectors[row], item.project, item.kind, considered(vault.limits))
        cosines.update((i, c) for i, c in found[row] if i not in written.vectors.get((item.project, item.kind), ()))
        decision = decide(item.content, _nearest(item, cosines, state), vault.limits)
        event = event_for(decision, item, memory_id, at, written.last.get((item.project, item.session_id), ""))
        events.append(event)
        answers.append(answer(decision, written.apply(event, item, vectors[row]), vault.now()))
    return events, answers


def nearest_indexed(vault: VaultMemory, batch: Sequence[MemoryInput], vectors: np.ndarray
                    ) -> list[list[tuple[str, float]]]:
    """Returns, per item, its NEAREST indexed memories of its own project and kind (id, cosine).

    Resolve only ever folds an item into a memory of its project and kind, so only those rows
    are searched: the cost of a write is its project's size, not the store's. (Searching the
    whole store and filtering after also let 30 closer memories of other projects crowd out
    the item's own duplicate.)"""
    groups: dict[tuple[str, str], list[int]] = {}
    for row, item in enumerate(batch):
        groups.setdefault((item.project, item.kind), []).append(row)
    found: list[list[tuple[str, float]]] = [[] for _ in batch]
    for (project, kind), rows in groups.items():
        where = {"$and": [{"project": project}, {"kind": kind}]}
        for row, hits in zip(rows, vault.index().vectors.query_many(vectors[rows], NEAREST, where)):
            found[row] = hits
    return found


class _Written:
    """What the items before in a batch wrote, as the items after them must see it."""

    def __init__(self, state: MutableMapping[str, Observation], lookups: Lookups) -> None:
        self.state = state
        self.lookups = lookups
        self.known = lookups.holders  # source id → the memory holding it; folded-in writes count as known
        # Written in this batch, not in the vector index yet, by (project, kind): resolve only
        # looks at memories of the item's own project and kind.
        self.vectors: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        self.last: dict[tuple[str, str], str] = {}  # (project, session) → the memory the last item went to

    def cosines(self, vector: np.ndarray, project: str, kind: str, keep: int) -> dict[str, float]:
        """Returns {id: cosine} of `vector` with the memories of `project` and `kind` written
        earlier in the batch that could be among its `keep` closest candidates (one matrix product:
        a batch of 256 made 33,000 dot products).

        Every memory written here is a candidate (live, of its group's project and kind: no write
        op removes one), so one farther than the `keep`-th closest of them can never be among the
        `keep` closest: it is dropped (ties kept) before resolve looks at each candidate in Python."""
        group = self.vectors.get((project, kind))
        if not group:
            return {}
        ids = list(group)
        cosines = np.stack(list(group.values())) @ vector
        if len(ids) <= keep:
            return dict(zip(ids, cosines.tolist()))
        floor = np.partition(cosines, len(ids) - keep)[len(ids) - keep]
        return {ids[k]: float(cosines[k]) for k in np.flatnonzero(cosines >= floor)}

    def known_answer(self, memory_id: str) -> dict[str, Any]:
        """Returns the answer for an item whose source is already known: nothing is written."""
        holder = self.known[memory_id]
        return {"action": "known", "id": holder, "title": self.state[holder].title}

    def apply(self, event: MemoryEvent, item: MemoryInput, vector: np.ndarray) -> Observation:
        """Folds `event` (written for `item`) into the state; returns the memory it went to."""
        state = self.state
        before = state.get(event.memory)
        changed = apply_event(before, event)
        if changed is not None:
            state[event.memory] = changed
            self.lookups.note(before, changed)
        obs = state[event.memory]
        self.vectors.setdefault((obs.project, obs.kind), {})[event.memory] = vector
        self.last[(item.project, item.session_id)] = event.memory
        return obs


def _nearest(item: MemoryInput, cosines: dict[str, float],
             state: Mapping[str, Observation]) -> list[tuple[Observation, float]]:
    """Returns the candidates resolve may fold `item` into: live, same project, same kind."""
    found = ((state.get(i), c) for i, c in cosines.items())  # one lookup each: `state` is a layered view
    return [(o, c) for o, c in found if o is not None and o.live and o.project == item.project and o.kind == item.kind]


def event_for(decision: Decision, item: MemoryInput, memory_id: str, at: str, follows: str = "") -> MemoryEvent:
    """Returns the event that carries out `decision` for `item`: a save, or a change to its target."""
    sources = [memory_id] + ([item.source_id] if item.source_id else [])
    if decision.action == "new":
        data = {**event_data(item), "links": [list(link) for link in decision.links]}
        if follows:
            data["follows"] = follows  # a conversation imported in order: each turn indexes its neighbours
        return MemoryEvent(event_id("save", memory_id), "save", memory_id, at, data)
    op = {"reinforced": "reinforce", "merged": "merge", "replaced": "replace"}[decision.action]
    data = {"sources": sources, "source": memory_id, "similarity": round(decision.similarity, 4),
            "reason": decision.reason}
    if item.created_at:
        # A dated item (an import) changes its target as of its own date; `at` stays the write
        # clock, which orders replay (an old date would sort the change before its target's save).
        data["created_at"] = item.created_at
    if decision.content:
        data["content"] = decision.content
    return MemoryEvent(event_id(op, memory_id), op, decision.target, at, data)


def event_id(op: str, memory_id: str) -> str:
    """Deterministic for writes derived from a stable memory id: re-importing writes the same event."""
    return "ev-" + hashlib.sha256(f"{op}\x00{memory_id}".encode()).hexdigest()[:16]


def answer(decision: Decision, obs: Observation, now: datetime) -> dict[str, Any]:
    """Returns what a write answers: the action, the memory it went to, and why."""
    result = {"action": decision.action, "id": obs.id, "title": obs.title, "project": obs.project,
              "category": obs.category, "strength": round(obs.strength(now), 4)}
    if decision.target:
        result.update(similarity=round(decision.similarity, 4), reason=decision.reason)
    if decision.links:
        result["links"] = [i for i, _ in decision.links]
    return result


def reindex(vault: VaultMemory, state: Mapping[str, Observation], lookups: Lookups,
            events: Sequence[MemoryEvent]) -> None:
    """Indexes the memories `events` wrote with the vectors of their current text (one only
    reinforced keeps its rows, unless its keyword context changed), rewrites the
    keyword rows of memories whose conversational neighbours changed, and records the events as
    reflected by the index (so the next `sync_index` need not check every memory)."""
    if not events:
        return
    ids = list(dict.fromkeys(e.memory for e in events))
    live = LiveView(state)  # looked up, never listed: this costs the same at any store size
    before = {live[i].follows for i in ids if i in live}  # their context gained the new memories
    touched = (before | {live[i].follows for i in before if i in live}) - set(ids)
    context = conversation_context(live, [*ids, *sorted(touched)], lookups.followers)  # only the rows rewritten here
    changed = {e.memory for e in events if e.op not in ROW_NEUTRAL}
    memories = [live[i] for i in ids if i in live and i in changed]
    kept = [live[i] for i in ids if i in live and i not in changed]
    vectors, _ = vault.index().embed([memory_text(m) for m in memories], vault.embedder, vault.identity)
    vault.index().put(memories, vectors, context)
    vault.index().put_keywords([*_stale_rows(vault, kept, context), *(live[i] for i in sorted(touched) if i in live)],
                               context)
    vault.indexed_events.wrote(events)


def _stale_rows(vault: VaultMemory, kept: Sequence[Observation], context: Mapping[str, str]) -> list[Observation]:
    """Returns the memories of `kept` (only reinforced: the same text, vector and metadata) whose
    keyword row no longer matches their context. Putting them again cost a write to every index
    (a dead vector row, a keyword delete and insert) for nothing, and reinforcements grow with the
    store: 0.1% of the writes at 1,000 memories, about 3% at 50,000."""
    if not kept:
        return []
    stored = vault.index().keywords.hashes_of([m.id for m in kept])
    return [m for m in kept if stored.get(m.id) != row_hash(m, context.get(m.id, ""))]


def count_actions(results: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Returns {action: how many results had it}, in the order actions first appear."""
    actions: dict[str, int] = {}
    for result in results:
        actions[result["action"]] = actions.get(result["action"], 0) + 1
    return actions
