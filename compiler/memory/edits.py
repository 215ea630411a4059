"""Edits of one memory by id — update, forget, restore — a store that skips resolve, and show.

Each is: lock → read the memories (the id must exist) → append one event → sync the index,
answering from the memories after the event. Nothing is destroyed: an update keeps the old
content as history, a forget is a tombstone that `restore` lifts.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from compiler.core.clock import format_time
from compiler.core.lock import writer_lock
from compiler.events.journal import MemoryEvent, new_id
from compiler.memory.input import MemoryInput, event_data, validate
from compiler.memory.resolve import Decision
from compiler.memory.snapshot import Memories
from compiler.memory.vault import VaultMemory, append_and_sync, read_memories
from compiler.memory.write import answer, event_id, new_memory_id


def store_new(vault: VaultMemory, item: MemoryInput) -> dict[str, Any]:
    """Stores `item` as a NEW memory without resolving it against others; returns the answer."""
    item = validate(item)
    memory_id = new_memory_id(item)
    with writer_lock(vault.engram):
        event = MemoryEvent(event_id("save", memory_id), "save", memory_id, format_time(vault.now()),
                            event_data(item))
        after = append_and_sync(vault, [event])
    return answer(Decision("new"), after.get(memory_id), vault.now())


def update_memory(vault: VaultMemory, memory_id: str, content: str | None = None, importance: float | None = None,
                  title: str | None = None) -> dict[str, Any]:
    """Rewrites a memory (its old content stays as history); returns the memory (see `describe`)."""
    with writer_lock(vault.engram):
        current = read_memories(vault).get(memory_id)
        item = validate(MemoryInput(content=content if content is not None else current.content,
                                    title=title or current.title, project=current.project,
                                    category=current.category,
                                    importance=current.importance if importance is None else importance))
        data = {"content": item.content, "title": item.title, "importance": item.importance, "source": "update"}
        after = append_and_sync(vault, [MemoryEvent(new_id("ev-"), "update", memory_id, format_time(vault.now()),
                                                    data)])
    return describe(after, memory_id)


def forget_memory(vault: VaultMemory, memory_id: str) -> dict[str, Any]:
    """Deletes a memory (a tombstone: it stays in the log, `restore_memory` brings it back);
    returns {"action": "forgotten", "id"}."""
    _mark(vault, memory_id, "delete")
    return {"action": "forgotten", "id": memory_id}


def restore_memory(vault: VaultMemory, memory_id: str) -> dict[str, Any]:
    """Brings back a forgotten, archived or consolidated memory, with a fresh decay clock;
    returns {"action": "restored", **the memory}."""
    return {"action": "restored", **describe(_mark(vault, memory_id, "restore"), memory_id)}


def _mark(vault: VaultMemory, memory_id: str, op: str) -> Memories:
    """Appends a data-less `op` event to an existing memory; returns the memories after it."""
    with writer_lock(vault.engram):
        read_memories(vault).get(memory_id)
        return append_and_sync(vault, [MemoryEvent(new_id("ev-"), op, memory_id, format_time(vault.now()))])


def show_memory(vault: VaultMemory, memory_id: str) -> dict[str, Any]:
    """Returns a memory with its history and sources (see `describe`); raises NotFoundError."""
    return describe(read_memories(vault), memory_id)


def describe(memories: Memories, memory_id: str) -> dict[str, Any]:
    """Returns a memory as a dict, with its strength at the snapshot's `now` and whether it is live."""
    obs = memories.get(memory_id)
    data = asdict(obs)
    data["strength"] = round(obs.strength(memories.now), 4)
    data["live"] = obs.live
    return data
