"""Memory events → a chunk: what an exported chunk holds (README "Chunk format").

A chunk carries the journal events no chunk holds yet, exactly, under the top-level key
`engram_vault`; `observations` holds one engram observation record per memory those events
touch that no earlier chunk states yet, in its latest state (what the engram CLI imports);
`sessions` holds a record for every session those observations name (`engram-vault-<project>`
for memories without one).

Each memory is stated in one chunk only: the Go reader inserts every record of a chunk as a new
row (no unique key on sync_id), so a memory re-stated by a later chunk would be there twice on a
Go machine. Later changes travel in our events, which the Go reader ignores.
compiler.events.replay reads them back.

Credentials in titles, contents and event data are redacted on the way (compiler.sync.redact):
the chunk carries `[redacted:<kind>]`, the local journal the original.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any

from compiler.core.clock import engram_time
from compiler.events.chunks import encode_chunk
from compiler.events.journal import MemoryEvent
from compiler.events.replay import VAULT_DIRECTORY
from compiler.memory.model import Observation
from compiler.sync.redact import Redactions, redact_text, redact_value

REDACTED_FIELDS = ("title", "content", "topic_key")  # the free text of an observation record


def build_chunk(events: Sequence[MemoryEvent], state: Mapping[str, Observation],
                all_events: Iterable[MemoryEvent] = (), *, redact: bool = True,
                stated: Set[str] = frozenset()) -> tuple[bytes, dict[str, Any]]:
    """Returns (uncompressed chunk JSON, counts) carrying `events` and the memories they touch
    that are not in `stated` (the sync_ids earlier chunks hold a record of).

    `state` is the fold of every known event (latest state of each memory); `all_events`
    gives the reinforcement counts shown as engram's duplicate_count. Counts: events, memories,
    sessions, and `redacted` (see `Redactions.report`; empty when `redact` is off).
    """
    ordered = sorted({e.id: e for e in events}.values(), key=MemoryEvent.order)
    touched = sorted((state[i] for i in {e.memory for e in ordered} if i in state and i not in stated),
                     key=lambda o: (engram_time(o.created_at), o.id))
    duplicates: dict[str, int] = {}
    for event in all_events:
        if event.op == "reinforce":
            duplicates[event.memory] = duplicates.get(event.memory, 0) + 1
    observations = [observation_record(o, n, duplicates.get(o.id, 0)) for n, o in enumerate(touched, start=1)]
    records = [e.to_dict() for e in ordered]
    seen = Redactions()
    if redact:
        observations, records = redact_chunk(observations, records, seen)
    sessions = session_records(observations)
    data = encode_chunk(sessions, observations, records)
    return data, {"events": len(ordered), "memories": len(observations), "sessions": len(sessions),
                  "redacted": seen.report()}


def redact_chunk(observations: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]],
                 seen: Redactions) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns copies of a chunk's observation records and event dicts with credentials redacted
    (free-text fields of records, every string in event data); notes each secret in `seen`.

    Titles get a second pass once every secret of their memory is known: a title cut from the
    content may hold the start of a key too short for any rule."""
    clean = [{k: redact_text(v, record["sync_id"], seen) if k in REDACTED_FIELDS and isinstance(v, str) else v
              for k, v in record.items()} for record in observations]
    redacted = [{**event, "data": redact_value(event["data"], event["memory"], seen)} for event in events]
    for record in clean:
        record["title"] = seen.hide_partials(record["title"], record["sync_id"])
    for event in redacted:
        if isinstance(event["data"].get("title"), str):
            event["data"]["title"] = seen.hide_partials(event["data"]["title"], event["memory"])
    return clean, redacted


def pending_redactions(events: Sequence[MemoryEvent], state: Mapping[str, Observation]) -> dict[str, Any]:
    """Returns what exporting `events` now would redact (`Redactions.report`), writing nothing."""
    return build_chunk(events, state)[1]["redacted"] if events else Redactions().report()


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
        record["last_seen_at"] = engram_time(obs.reinforced_at)
    record["created_at"] = engram_time(obs.created_at)
    record["updated_at"] = engram_time(obs.updated_at or obs.created_at)
    if obs.deleted_at:
        record["deleted_at"] = engram_time(obs.deleted_at)
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
