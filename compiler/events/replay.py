"""Chunks → memory events: the events every chunk in a vault replays (sync/export.py writes them).

The mapping (README "Chunk format"):

- Export: a chunk carries the journal events no chunk holds yet, exactly, under the top-level
  key `engram_vault`; `observations` holds one engram observation record per memory those
  events touch, in its latest state (what the engram CLI imports); `sessions` holds a record
  for every session those observations name (`engram-vault-<project>` for memories without one).
- Import of one of our chunks replays its events (deduplicated by event id in the fold).
- Import of a chunk written by the engram CLI (no events) synthesises deterministic events from
  each observation record: a `save` (at created_at) and, when updated_at is later, an `update`
  (at updated_at), with ids derived from sync_id + updated_at + content; a `delete` when
  deleted_at is set. The fold orders by time and never revives a deleted memory on a later
  save or update, so a tombstone wins over an older upsert in whatever order chunks arrive.
- A record of engram v1.x has no `sync_id`: it gets one derived from its identity and content
  (`legacy_sync_id`), so two machines importing the same chunk agree on it.
- A memory made from an engram CLI record carries no importance (the Go CLI has no decay): it
  decays from its last update like any memory, but never below `PEER_FLOOR`, so what a Go
  machine saved stays recallable however old it is (docs/memory.md, "Decay").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.core.clock import engram_time
from compiler.core.json_input import load_json
from compiler.events.checks import event_problem, record_problem
from compiler.events.chunks import ChunkContent
from compiler.events.journal import MemoryEvent

PEER_FLOOR = 0.1  # strength floor of memories from engram CLI records: above the 0.05 archive line
VAULT_DIRECTORY = "engram-vault"  # the `directory` of sessions we synthesise (Go requires one)
# engram's free-text types that say which of our four categories a memory belongs to
TYPE_CATEGORY = {"bugfix": "failure", "error": "failure", "failure": "failure", "decision": "strategy",
                 "architecture": "strategy", "pattern": "strategy", "strategy": "strategy", "assumption": "assumption"}


@dataclass(frozen=True)
class ChunkEvents:
    """The events one chunk replays, what was quarantined, and what it held."""

    events: tuple[MemoryEvent, ...] = ()
    quarantined: tuple[tuple[str, str], ...] = ()  # (where, why)
    observations: int = 0
    sessions: int = 0
    prompts: int = 0
    synthesised: int = 0  # events made from engram observation records
    stated: frozenset[str] = frozenset()  # sync_ids of its observation records (an export states each once)


def chunk_events(content: ChunkContent) -> ChunkEvents:
    """Returns the events a chunk replays: its own events, plus events synthesised from records they don't cover."""
    quarantined = list(content.problems)
    events: list[MemoryEvent] = []
    for where, raw in content.events:
        try:
            event = MemoryEvent.from_dict(raw)
        except ValueError as error:
            quarantined.append((where, str(error)))
            continue
        problem = event_problem(event)
        if problem:
            quarantined.append((where, problem))
        else:
            events.append(event)
    covered = {e.memory for e in events}
    synthesised = 0
    stated: set[str] = set()
    for where, record in [*content.observations, *_mutation_records(content, quarantined)]:
        if isinstance(record, dict) and not record.get("sync_id"):
            record = {**record, "sync_id": legacy_sync_id(record)}  # engram v1.x: no sync_id yet
        problem = record_problem(record)
        if problem:
            quarantined.append((where, problem))
            continue
        stated.add(record["sync_id"])
        if record["sync_id"] not in covered:
            made = record_events(record)
            events.extend(made)
            synthesised += len(made)
    for where, session in content.sessions:
        if not isinstance(session, dict):
            quarantined.append((where, f"is a {type(session).__name__}, not an object"))
    return ChunkEvents(tuple(events), tuple(quarantined), len(content.observations), len(content.sessions),
                       content.prompts, synthesised, frozenset(stated))


def _mutation_records(content: ChunkContent, quarantined: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    """Returns observation records carried by the newer engram CLI's `mutations` (other entities are skipped)."""
    records: list[tuple[str, Any]] = []
    for where, mutation in content.mutations:
        if not isinstance(mutation, dict):
            quarantined.append((where, f"is a {type(mutation).__name__}, not an object"))
            continue
        if mutation.get("entity") != "observation":
            continue  # sessions, prompts, relations: nothing of ours
        try:
            payload = mutation.get("payload")
            payload = load_json(payload) if isinstance(payload, str) else payload
            payload = load_json(payload) if isinstance(payload, str) else payload  # Go may double-encode
        except ValueError:
            quarantined.append((where, "payload is not JSON"))
            continue
        if not isinstance(payload, dict):
            quarantined.append((where, "payload is not an object"))
            continue
        record = dict(payload)
        record.setdefault("sync_id", mutation.get("entity_key"))
        if mutation.get("op") == "delete":
            record["deleted_at"] = record.get("deleted_at") or mutation.get("occurred_at") or record.get("updated_at")
        record.setdefault("created_at", record.get("updated_at") or mutation.get("occurred_at"))
        records.append((where, record))
    return records


def legacy_sync_id(record: Mapping[str, Any]) -> str:
    """Returns the sync_id of an engram v1.x record that has none: `obs-` + 16 hex of a digest of
    its session, project, type, title, content and created_at (not its `id`: a row number, local
    to the machine that wrote it). The same record gives the same id on every machine."""
    parts = (record.get(key) for key in ("session_id", "project", "type", "title", "content", "created_at"))
    return f"obs-{_digest('engram-v1', *(str(p) if p is not None else '' for p in parts))}"


def record_events(record: Mapping[str, Any]) -> list[MemoryEvent]:
    """Returns the deterministic events of one checked engram observation record."""
    sync_id = record["sync_id"]
    created = engram_time(record["created_at"])
    updated = engram_time(record.get("updated_at") or record["created_at"])
    content, title = str(record.get("content") or ""), str(record.get("title") or "")
    stamp = _digest(sync_id, updated, title, content)
    events: list[MemoryEvent] = []
    if content.strip():
        kind = str(record.get("type") or "manual")
        data: dict[str, Any] = {"content": content.strip(), "title": title, "type": kind,
                                "project": str(record.get("project") or "default"),
                                "category": TYPE_CATEGORY.get(kind.lower(), "fact"), "importance": 0.5,
                                "kind": "memory", "created_at": created, "floor": PEER_FLOOR}
        data.update({k: str(record[k]) for k in ("topic_key", "scope", "session_id") if record.get(k)})
        events.append(MemoryEvent(f"ev-{_digest('engram-save', stamp)}", "save", sync_id, created, data, 0))
        if updated > created:
            events.append(MemoryEvent(f"ev-{_digest('engram-update', stamp)}", "update", sync_id, updated,
                                      {"content": content.strip(), "title": title, "source": "engram"}, 0))
    if record.get("deleted_at"):
        deleted = engram_time(record["deleted_at"])
        events.append(MemoryEvent(f"ev-{_digest('engram-delete', sync_id, deleted)}", "delete", sync_id, deleted,
                                  {}, 0))
    return events


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:16]
