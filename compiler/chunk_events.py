"""Memory events ↔ chunks: what an exported chunk holds, and the events every chunk in a vault replays.

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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.chunk_checks import event_problem, record_problem
from compiler.chunks import ChunkContent, encode_chunk
from compiler.memory_events import MemoryEvent, format_time, parse_time
from compiler.memory_model import Observation

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


# -- export ------------------------------------------------------------------------------------

def build_chunk(events: Sequence[MemoryEvent], state: Mapping[str, Observation],
                all_events: Iterable[MemoryEvent] = ()) -> tuple[bytes, dict[str, int]]:
    """Returns (uncompressed chunk JSON, counts) carrying `events` and the memories they touch.

    `state` is the fold of every known event (latest state of each memory); `all_events`
    gives the reinforcement counts shown as engram's duplicate_count.
    """
    ordered = sorted({e.id: e for e in events}.values(), key=MemoryEvent.order)
    touched = sorted((state[i] for i in {e.memory for e in ordered} if i in state),
                     key=lambda o: (_time(o.created_at), o.id))
    duplicates: dict[str, int] = {}
    for event in all_events:
        if event.op == "reinforce":
            duplicates[event.memory] = duplicates.get(event.memory, 0) + 1
    observations = [observation_record(o, n, duplicates.get(o.id, 0)) for n, o in enumerate(touched, start=1)]
    sessions = session_records(observations)
    data = encode_chunk(sessions, observations, [e.to_dict() for e in ordered])
    return data, {"events": len(ordered), "memories": len(observations), "sessions": len(sessions)}


def session_id_for(obs: Observation) -> str:
    return obs.session_id or f"{VAULT_DIRECTORY}-{obs.project}"


def observation_record(obs: Observation, position: int, duplicates: int = 0) -> dict[str, Any]:
    """Returns the engram observation record of a memory, keys in the Go struct's order."""
    record: dict[str, Any] = {"id": position, "sync_id": obs.id, "session_id": session_id_for(obs),
                              "type": obs.type or "manual", "title": obs.title, "content": obs.content,
                              "project": obs.project, "scope": obs.scope or "project"}
    if obs.topic_key:
        record["topic_key"] = obs.topic_key
    record["revision_count"] = 1 + len(obs.history)
    record["duplicate_count"] = 1 + duplicates
    if obs.recall_count:
        record["last_seen_at"] = _time(obs.reinforced_at)
    record["created_at"] = _time(obs.created_at)
    record["updated_at"] = _time(obs.updated_at or obs.created_at)
    if obs.deleted_at:
        record["deleted_at"] = _time(obs.deleted_at)
    return record


def session_records(observations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Returns one session record per session the observations name (started at its first memory)."""
    sessions: dict[str, dict[str, Any]] = {}
    for record in observations:
        found = sessions.setdefault(record["session_id"], {
            "id": record["session_id"], "project": record["project"], "directory": VAULT_DIRECTORY,
            "started_at": record["created_at"]})
        found["started_at"] = min(found["started_at"], record["created_at"])
    return [sessions[key] for key in sorted(sessions)]


def _time(text: str) -> str:
    """Returns a timestamp as engram writes it, "YYYY-MM-DD HH:MM:SS" UTC (as given if unparseable)."""
    try:
        return format_time(parse_time(text))
    except (TypeError, ValueError):
        return text


# -- import ------------------------------------------------------------------------------------

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
    for where, record in [*content.observations, *_mutation_records(content, quarantined)]:
        problem = record_problem(record)
        if problem:
            quarantined.append((where, problem))
        elif record["sync_id"] not in covered:
            made = record_events(record)
            events.extend(made)
            synthesised += len(made)
    for where, session in content.sessions:
        if not isinstance(session, dict):
            quarantined.append((where, f"is a {type(session).__name__}, not an object"))
    return ChunkEvents(tuple(events), tuple(quarantined), len(content.observations), len(content.sessions),
                       content.prompts, synthesised)


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
            payload = json.loads(payload) if isinstance(payload, str) else payload
            payload = json.loads(payload) if isinstance(payload, str) else payload  # Go may double-encode
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


def record_events(record: Mapping[str, Any]) -> list[MemoryEvent]:
    """Returns the deterministic events of one checked engram observation record."""
    sync_id = record["sync_id"]
    created = _time(record["created_at"])
    updated = _time(record.get("updated_at") or record["created_at"])
    content, title = str(record.get("content") or ""), str(record.get("title") or "")
    stamp = _digest(sync_id, updated, title, content)
    events: list[MemoryEvent] = []
    if content.strip():
        kind = str(record.get("type") or "manual")
        data: dict[str, Any] = {"content": content.strip(), "title": title, "type": kind,
                                "project": str(record.get("project") or "default"),
                                "category": TYPE_CATEGORY.get(kind.lower(), "fact"), "importance": 0.5,
                                "kind": "memory", "created_at": created}
        data.update({k: str(record[k]) for k in ("topic_key", "scope", "session_id") if record.get(k)})
        events.append(MemoryEvent(f"ev-{_digest('engram-save', stamp)}", "save", sync_id, created, data, 0))
        if updated > created:
            events.append(MemoryEvent(f"ev-{_digest('engram-update', stamp)}", "update", sync_id, updated,
                                      {"content": content.strip(), "title": title, "source": "engram"}, 0))
    if record.get("deleted_at"):
        deleted = _time(record["deleted_at"])
        events.append(MemoryEvent(f"ev-{_digest('engram-delete', sync_id, deleted)}", "delete", sync_id, deleted,
                                  {}, 0))
    return events


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:16]
