"""Engineering state on top of memories: failures, feature progress, session handoffs, stats,
and the engram CLI's observations.

- track_failure → category failure, importance critical 0.9 / major 0.7 / minor 0.5; a recurring
  failure resolves like any memory (reinforced when it is the same one).
- track_progress → category strategy, importance by status; ONE live record per feature and
  project (an upsert: later calls update it).
- handoff → a structured record; `load_handoff` returns the latest for a project, not whatever ranks.
- save_observation → engram's mem_save: a `topic_key` names an evolving topic (an upsert too).
- memory_context → the latest handoff and the most recently changed memories: a session's start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from compiler.core.clock import format_time
from compiler.core.errors import InputError
from compiler.events.checks import CATEGORIES
from compiler.events.journal import MemoryEvent, new_id
from compiler.memory.edits import describe, store_new, update_memory
from compiler.memory.input import MemoryInput, clean_line, validate
from compiler.memory.maintenance import last_maintenance
from compiler.memory.model import Observation, unarchived
from compiler.memory.snapshot import Memories
from compiler.memory.vault import VaultMemory, append_and_sync, read_memories
from compiler.memory.write import store_memory

SEVERITY_IMPORTANCE = {"critical": 0.9, "major": 0.7, "minor": 0.5}
STATUS_IMPORTANCE = {"blocked": 0.9, "in_progress": 0.8, "review": 0.7, "planning": 0.6, "done": 0.5}


def _choice(value: str, allowed: dict[str, float], name: str) -> str:
    key = str(value or "").strip().lower().replace("-", "_").replace(" ", "_")
    if key not in allowed:
        raise InputError(f"unknown {name} {value!r}: use one of {', '.join(allowed)}")
    return key


def track_failure(vault: VaultMemory, error: str, component: str, severity: str = "major",
                  root_cause: str = "", fix: str = "", related_test_ids: Sequence[str] = (),
                  project: str = "") -> dict[str, Any]:
    """Records a failure; returns the resolve answer ({"action", "id", ...})."""
    severity = _choice(severity, SEVERITY_IMPORTANCE, "severity")
    component = clean_line(component, 80) or "unknown"
    lines = [f"{component}: {error}"] + [f"{label}: {value}" for label, value in
                                         (("Root cause", root_cause), ("Fix", fix)) if value]
    fields = {"error": error, "component": component, "severity": severity, "root_cause": root_cause,
              "fix": fix, "related_test_ids": list(related_test_ids)}
    return store_memory(vault, MemoryInput(content="\n".join(lines), title=f"{component}: {error}", project=project,
                                           category="failure", kind="failure", type="bugfix",
                                           importance=SEVERITY_IMPORTANCE[severity], fields=fields))


def track_progress(vault: VaultMemory, feature: str, status: str, completion: int | None = None,
                   blockers: Sequence[str] = (), quality_score: float | None = None, notes: str = "",
                   project: str = "") -> dict[str, Any]:
    """Creates or updates the one live progress record of `feature`; returns it."""
    # Validated first: the stored topic key is the normalised one, so the lookup must use it too.
    item = validate(progress_input(feature, status, completion, blockers, quality_score, notes, project))
    feature, status = item.fields["feature"], item.fields["status"]
    holders = on_topic(read_memories(vault).state, item.kind, item.project, item.topic_key)
    if not holders:
        return {**store_memory(vault, item), "feature": feature, "status": status}
    current = min(holders, key=lambda o: (o.created_at, o.id)).id  # the first record of the feature
    data = {"content": item.content, "importance": item.importance, "fields": item.fields,
            "source": "track_progress"}
    append_and_sync(vault, [MemoryEvent(new_id("ev-"), "update", current, format_time(vault.now()), data)])
    return {"action": "updated", "id": current, "title": item.title, "feature": feature, "status": status}


def progress_input(feature: str, status: str, completion: int | None, blockers: Sequence[str],
                   quality_score: float | None, notes: str, project: str) -> MemoryInput:
    """Returns the progress record of a feature as a memory input; raises InputError."""
    status = _choice(status, STATUS_IMPORTANCE, "status")
    feature = clean_line(feature, 120)
    if not feature:
        raise InputError("feature is empty")
    if completion is not None and not 0 <= int(completion) <= 100:
        raise InputError(f"completion must be 0..100, got {completion}")
    fields = {"feature": feature, "status": status, "completion": completion, "blockers": list(blockers),
              "quality_score": quality_score, "notes": notes}
    content = f"{feature}: {status}" + (f", {completion}% done" if completion is not None else "") + \
        (f". Blocked by: {'; '.join(blockers)}" if blockers else "") + (f". {notes}" if notes else "")
    return MemoryInput(content=content, title=f"Progress: {feature}", project=project, category="strategy",
                       kind="progress", type="progress", topic_key=f"progress/{feature.lower()}",
                       importance=STATUS_IMPORTANCE[status], fields=fields)


def on_topic(state: Mapping[str, Observation], kind: str, project: str, topic_key: str) -> list[Observation]:
    """Returns the live memories of a kind, project and topic key, in the order they were saved."""
    return [o for o in state.values() if o.live and o.kind == kind and o.project == project
            and o.topic_key == topic_key]


def save_observation(vault: VaultMemory, item: MemoryInput) -> dict[str, Any]:
    """engram's mem_save: a `topic_key` names an evolving topic, so a later save updates that memory.

    Returns the store's answer, or {"action": "updated", "id", "title", "project"}.
    """
    clean = validate(item)
    holders = on_topic(read_memories(vault).state, clean.kind, clean.project, clean.topic_key) \
        if clean.topic_key else []
    if not holders:
        return store_memory(vault, item)
    updated = update_memory(vault, holders[0].id, clean.content, title=clean.title)
    return {"action": "updated", "id": updated["id"], "title": updated["title"], "project": updated["project"]}


def save_handoff(vault: VaultMemory, summary: str, completed: Sequence[str] = (), in_progress: Sequence[str] = (),
                 blocked: Sequence[str] = (), next_steps: Sequence[str] = (), project: str = "") -> dict[str, Any]:
    """Stores a session handoff for the next session; returns the resolve answer."""
    fields = {"summary": summary, "completed": list(completed), "in_progress": list(in_progress),
              "blocked": list(blocked), "next_steps": list(next_steps)}
    parts = [summary] + [f"{label}: {'; '.join(items)}" for label, items in
                         (("Completed", completed), ("In progress", in_progress), ("Blocked", blocked),
                          ("Next", next_steps)) if items]
    item = MemoryInput(content="\n".join(parts), title=f"Handoff: {clean_line(summary, 80)}", project=project,
                       category="strategy", kind="handoff", type="session_summary", importance=0.8, fields=fields)
    return store_new(vault, item)  # a handoff is a record of a moment: never merged with an earlier one


def load_handoff(vault: VaultMemory, project: str = "") -> dict[str, Any] | None:
    """Returns the latest live handoff of `project` (or of any project) as a dict, or None."""
    return latest_handoff(read_memories(vault), project)


def latest_handoff(memories: Memories, project: str = "") -> dict[str, Any] | None:
    """Returns the latest live handoff of `project` (or of any project) in `memories`, or None."""
    handoffs = [o for o in memories.state.values() if o.kind == "handoff" and o.live
                and (not project or o.project == project)]
    if not handoffs:
        return None
    latest = max(handoffs, key=lambda o: (o.created_at, o.id))
    return describe(memories, latest.id)


def memory_context(vault: VaultMemory, project: str = "", limit: int = 20) -> dict[str, Any]:
    """Returns the latest handoff and the `limit` most recently changed live memories of `project`
    (or of all): {"project", "handoff", "memories": [...]}."""
    memories = read_memories(vault)
    live = [o for o in memories.live.values() if (not project or o.project == project) and o.kind != "handoff"]
    recent = sorted(live, key=lambda o: (o.updated_at or o.created_at, o.id), reverse=True)[:limit]
    return {"project": project or "(all)", "handoff": latest_handoff(memories, project),
            "memories": [{"id": o.id, "title": o.title, "content": o.content, "project": o.project,
                          "category": o.category, "type": o.type, "updated_at": o.updated_at or o.created_at,
                          "strength": round(o.strength(memories.now), 4)} for o in recent]}


def memory_stats(vault: VaultMemory) -> dict[str, Any]:
    """Returns totals, counts by category, average strength, last maintenance, failures, active features."""
    memories = read_memories(vault)
    state, now = memories.state, memories.now
    live = unarchived(state, now)
    failures = [o for o in live.values() if o.kind == "failure"]
    features = [o for o in live.values() if o.kind == "progress" and o.fields.get("status") != "done"]
    return {
        "total": len(state), "live": len(live), "archived": sum(1 for o in state.values() if o.live) - len(live),
        "forgotten": sum(1 for o in state.values() if o.deleted_at),
        "consolidated": sum(1 for o in state.values() if o.absorbed_into),
        "by_category": {c: sum(1 for o in live.values() if o.category == c) for c in CATEGORIES},
        "by_project": dict(sorted(Counter(o.project for o in live.values()).items())),
        "average_strength": round(sum(o.strength(now) for o in live.values()) / len(live), 4) if live else 0.0,
        "last_maintenance": last_maintenance(vault.engram).get("at", ""),
        "failures_by_component": dict(sorted(Counter(o.fields.get("component", "?") for o in failures).items())),
        "failures_by_severity": dict(sorted(Counter(o.fields.get("severity", "?") for o in failures).items())),
        "active_features": sorted(({"feature": o.fields.get("feature"), "status": o.fields.get("status"),
                                    "completion": o.fields.get("completion"), "project": o.project, "id": o.id}
                                   for o in features), key=lambda f: (f["project"], str(f["feature"]))),
        "now": format_time(now),
    }


def memory_timeline(vault: VaultMemory, memory_id: str, before: int = 5, after: int = 5) -> dict[str, Any]:
    """engram's mem_timeline: the live memories of the same project saved just before and after one
    (by created_at): {"focus", "before": [...], "after": [...], "total_in_range"}; raises NotFoundError."""
    memories = read_memories(vault)
    focus = memories.get(memory_id)
    # a stable sort over the fold's order: memories saved in the same second keep their write order
    same = sorted((o for o in memories.state.values() if o.id == focus.id or o.live and o.project == focus.project
                   and o.kind != "handoff" and o.id in memories.live), key=lambda o: o.created_at)
    at = [o.id for o in same].index(focus.id)

    def entry(o: Observation) -> dict[str, Any]:
        return {"id": o.id, "title": o.title, "content": o.content, "type": o.type, "created_at": o.created_at,
                "session_id": o.session_id}

    return {"focus": describe(memories, memory_id), "before": [entry(o) for o in same[max(0, at - before):at]],
            "after": [entry(o) for o in same[at + 1:at + 1 + after]], "total_in_range": len(same)}
