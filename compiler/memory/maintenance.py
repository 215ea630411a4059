"""Maintenance: consolidate near-duplicate memories and archive the ones that faded.

Consolidation clusters live memories of the same project, category and kind whose cosine is at
least `consolidate_min` (neighbours found through the vector index, never all pairs, and asked
again only for the memories that changed: compiler.memory.close_pairs) and folds
each cluster into its most important member: a `consolidate` event on the keeper (it gains the
others' sources) and one on each absorbed memory (it points at the keeper, stays restorable).
Progress records and handoffs are never consolidated. Pruning is not an event: a memory whose
strength fell below 0.05 without a strong neighbour is archived by the fold itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time, parse_time
from compiler.core.files import atomic_write
from compiler.core.lock import writer_lock
from compiler.events.journal import MemoryEvent, new_id
from compiler.memory.close_pairs import ClosePairs
from compiler.memory.index import KEYWORDS_FILE, LiveView
from compiler.memory.model import Observation, archived
from compiler.memory.snapshot import EventSet, Memories, event_mark
from compiler.memory.vault import VaultMemory, append_and_sync, read_memories, sync_index

MAINTENANCE_FILE = "maintenance.json"  # in .engram/cache: when maintenance last ran, over which events


def run_maintenance(vault: VaultMemory) -> dict[str, Any]:
    """Consolidates and prunes; returns {"consolidated": n, "clusters": n, "archived": n, "at": time,
    "reconsidered": n} (how many memories' neighbours were looked up again: those whose own or
    whose neighbours' inputs changed since the last run, every one on a first run)."""
    done = consolidate(vault)
    return {**done, "archived": len(archived(read_memories(vault).state, vault.now()))}


def consolidate(vault: VaultMemory) -> dict[str, Any]:
    """The maintenance without its archive count (pruning needs no event: the fold archives; counting
    it is a pass over every memory's strength that only a report needs, not a server's background
    run); returns run_maintenance's report but "archived"."""
    with writer_lock(vault.engram):
        memories = read_memories(vault)
        sync_index(vault, memories)  # clusters are found through the index: it must hold every memory
        clusters, reconsidered = find_clusters(vault, memories)
        at = format_time(vault.now())
        events = [event for cluster in clusters for event in consolidation_events(cluster, memories.indexed, at)]
        after = append_and_sync(vault, events)
        marker = {"at": at, "events": events_key(after.events)}
        atomic_write(vault.engram / "cache" / MAINTENANCE_FILE, json.dumps(marker).encode())
    return {"clusters": len(clusters), "consolidated": sum(len(c) - 1 for c in clusters), "at": at,
            "reconsidered": reconsidered}


def prepare_maintenance(vault: VaultMemory, budget: float) -> bool:
    """Does about `budget` seconds of the work maintenance starts with (the index in step, the close
    pairs found: on a store never maintained, 50,000 queries of the index), holding the writer lock
    for that slice only; returns True while some of it is left. A server runs slices between tool
    calls until none is left, then `consolidate`, which finds the pairs up to date but for what
    the calls changed meanwhile: no call waits for more than a slice."""
    with writer_lock(vault.engram):
        memories = read_memories(vault)
        sync_index(vault, memories)
        with ClosePairs(vault.engram / "cache" / KEYWORDS_FILE) as close:
            # the indexed memories looked up one at a time: building `memories.indexed` after each
            # tool call's events (a pass over every memory: 17 ms at 50,000) was a third of a slice
            _, done = close.advance(vault.index().vectors, LiveView(memories.state), memories.events,
                                    vault.settings.consolidate_min, vault.identity, budget)
    return not done


def events_digest(events: Iterable[MemoryEvent]) -> str:
    """Returns a short hash of the set of event ids: changes whenever any event is added."""
    return hashlib.sha256("\n".join(sorted(e.id for e in events)).encode()).hexdigest()[:16]


def events_key(events: EventSet) -> str:
    """Returns where the event set ends (`event_mark`): it changes whenever an event is added, and
    reads none of the events a fold checkpoint stands for (a digest of every id read 50,000 lines
    of journal at 50,000 memories: 0.85 s of a server's maintenance)."""
    return json.dumps(event_mark(events), sort_keys=True)


def last_maintenance(engram_dir: Path) -> dict[str, str]:
    """Returns {"at", "events"} of the last maintenance, or {} when it never ran."""
    try:
        data = json.loads((engram_dir / "cache" / MAINTENANCE_FILE).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def maintenance_due(vault: VaultMemory, events: EventSet) -> bool:
    """True when events arrived since the last maintenance, or `maintenance_hours` have passed."""
    last = last_maintenance(vault.engram)
    if not last.get("at") or last.get("events") != events_key(events):
        return True
    return (vault.now() - parse_time(last["at"])).total_seconds() >= vault.settings.maintenance_hours * 3600


def find_clusters(vault: VaultMemory, memories: Memories) -> tuple[list[list[str]], int]:
    """Returns the groups (2+ ids, sorted; the groups by their first) of mutually reachable memories
    at ≥ consolidate_min, via the index (which must hold every indexed memory), and how many
    memories were asked for their neighbours again."""
    live = memories.indexed
    with ClosePairs(vault.engram / "cache" / KEYWORDS_FILE) as close:
        pairs, asked = close.current(vault.index().vectors, live, memories.events,
                                     vault.settings.consolidate_min, vault.identity)
    pairs = [(a, b) for a, b in pairs if a in live and b in live]  # grouped when asked (close_pairs)
    members = sorted({i for pair in pairs for i in pair})
    return _components(members, pairs), asked


def _components(members: list[str], pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Returns the groups (2+, sorted, in the order of their first member in `members`) of the
    `members` that `pairs` connect, by union-find."""
    parent = {i: i for i in members}

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        parent[root(b)] = root(a)
    groups: dict[str, list[str]] = {}
    for memory_id in members:
        groups.setdefault(root(memory_id), []).append(memory_id)
    return [sorted(g) for g in groups.values() if len(g) > 1]


def consolidation_events(cluster: list[str], live: Mapping[str, Observation], at: str) -> list[MemoryEvent]:
    """Returns the events folding `cluster` into its keeper: one on the keeper, one per absorbed memory."""
    # The keeper must not depend on the machine's clock: two machines that consolidate the same
    # cluster pick the same keeper, and since every absorbed memory points at a strictly greater
    # one in this total order, absorptions from different machines can never form a cycle.
    keeper = max(cluster, key=lambda i: (live[i].importance, -parse_time(live[i].created_at).timestamp(), i))
    absorbed = [i for i in cluster if i != keeper]
    sources = [s for i in absorbed for s in live[i].sources]
    events = [MemoryEvent(new_id("ev-"), "consolidate", keeper, at, {"sources": sources, "absorbed": absorbed})]
    events += [MemoryEvent(new_id("ev-"), "consolidate", i, at, {"into": keeper}) for i in absorbed]
    return events
