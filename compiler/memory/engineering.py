"""Engineering state on top of memories: failures, feature progress, session handoffs, stats.

- track_failure → category failure, importance critical 0.9 / major 0.7 / minor 0.5; a recurring
  failure resolves like any memory (reinforced when it is the same one).
- track_progress → category strategy, importance by status; ONE live record per feature and
  project (an upsert: later calls update it).
- handoff → a structured record; `load_handoff` returns the latest for a project, not whatever ranks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from compiler.core.clock import format_time
from compiler.core.errors import InputError
from compiler.events.checks import CATEGORIES
from compiler.events.journal import MemoryEvent, new_id
from compiler.memory.input import MemoryInput, clean_line
from compiler.memory.maintenance import last_maintenance
from compiler.memory.service import MemoryService

SEVERITY_IMPORTANCE = {"critical": 0.9, "major": 0.7, "minor": 0.5}
STATUS_IMPORTANCE = {"blocked": 0.9, "in_progress": 0.8, "review": 0.7, "planning": 0.6, "done": 0.5}


def _choice(value: str, allowed: dict[str, float], name: str) -> str:
    key = str(value or "").strip().lower().replace("-", "_").replace(" ", "_")
    if key not in allowed:
        raise InputError(f"unknown {name} {value!r}: use one of {', '.join(allowed)}")
    return key


def track_failure(service: MemoryService, error: str, component: str, severity: str = "major",
                  root_cause: str = "", fix: str = "", related_test_ids: Sequence[str] = (),
                  project: str = "") -> dict[str, Any]:
    """Records a failure; returns the resolve answer ({"action", "id", ...})."""
    severity = _choice(severity, SEVERITY_IMPORTANCE, "severity")
    component = clean_line(component, 80) or "unknown"
    lines = [f"{component}: {error}"] + [f"{label}: {value}" for label, value in
                                         (("Root cause", root_cause), ("Fix", fix)) if value]
    fields = {"error": error, "component": component, "severity": severity, "root_cause": root_cause,
              "fix": fix, "related_test_ids": list(related_test_ids)}
    return service.add(MemoryInput(content="\n".join(lines), title=f"{component}: {error}", project=project,
                                   category="failure", kind="failure", type="bugfix",
                                   importance=SEVERITY_IMPORTANCE[severity], fields=fields))


def track_progress(service: MemoryService, feature: str, status: str, completion: int | None = None,
                   blockers: Sequence[str] = (), quality_score: float | None = None, notes: str = "",
                   project: str = "") -> dict[str, Any]:
    """Creates or updates the one live progress record of `feature`; returns it."""
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
    item = MemoryInput(content=content, title=f"Progress: {feature}", project=project, category="strategy",
                       kind="progress", type="progress", topic_key=f"progress/{feature.lower()}",
                       importance=STATUS_IMPORTANCE[status], fields=fields)
    current = _live_topic(service, item)
    if current is None:
        return {**service.add(item), "feature": feature, "status": status}
    data = {"content": content, "importance": item.importance, "fields": fields, "source": "track_progress"}
    service.write_events([MemoryEvent(new_id("ev-"), "update", current, format_time(service.now()), data)])
    return {"action": "updated", "id": current, "title": item.title, "feature": feature, "status": status}


def _live_topic(service: MemoryService, item: MemoryInput) -> str | None:
    project = item.project or "default"
    for obs in sorted(service.state().values(), key=lambda o: (o.created_at, o.id)):
        if obs.live and obs.kind == item.kind and obs.project == project and obs.topic_key == item.topic_key:
            return obs.id
    return None


def save_handoff(service: MemoryService, summary: str, completed: Sequence[str] = (), in_progress: Sequence[str] = (),
                 blocked: Sequence[str] = (), next_steps: Sequence[str] = (), project: str = "") -> dict[str, Any]:
    """Stores a session handoff for the next session; returns the resolve answer."""
    fields = {"summary": summary, "completed": list(completed), "in_progress": list(in_progress),
              "blocked": list(blocked), "next_steps": list(next_steps)}
    parts = [summary] + [f"{label}: {'; '.join(items)}" for label, items in
                         (("Completed", completed), ("In progress", in_progress), ("Blocked", blocked),
                          ("Next", next_steps)) if items]
    item = MemoryInput(content="\n".join(parts), title=f"Handoff: {clean_line(summary, 80)}", project=project,
                       category="strategy", kind="handoff", type="session_summary", importance=0.8, fields=fields)
    return service.save_new(item)  # a handoff is a record of a moment: never merged with an earlier one


def load_handoff(service: MemoryService, project: str = "") -> dict[str, Any] | None:
    """Returns the latest live handoff of `project` (or of any project), or None."""
    handoffs = [o for o in service.state().values() if o.kind == "handoff" and o.live
                and (not project or o.project == project)]
    if not handoffs:
        return None
    latest = max(handoffs, key=lambda o: (o.created_at, o.id))
    return service.describe(latest.id)


def memory_stats(service: MemoryService) -> dict[str, Any]:
    """Returns totals, counts by category, average strength, last maintenance, failures, active features."""
    state = service.state()
    live = service.live(state)
    now = service.now()
    failures = [o for o in live.values() if o.kind == "failure"]
    features = [o for o in live.values() if o.kind == "progress" and o.fields.get("status") != "done"]
    return {
        "total": len(state), "live": len(live), "archived": sum(1 for o in state.values() if o.live) - len(live),
        "forgotten": sum(1 for o in state.values() if o.deleted_at),
        "consolidated": sum(1 for o in state.values() if o.absorbed_into),
        "by_category": {c: sum(1 for o in live.values() if o.category == c) for c in CATEGORIES},
        "by_project": dict(sorted(Counter(o.project for o in live.values()).items())),
        "average_strength": round(sum(o.strength(now) for o in live.values()) / len(live), 4) if live else 0.0,
        "last_maintenance": last_maintenance(service.engram).get("at", ""),
        "failures_by_component": dict(sorted(Counter(o.fields.get("component", "?") for o in failures).items())),
        "failures_by_severity": dict(sorted(Counter(o.fields.get("severity", "?") for o in failures).items())),
        "active_features": sorted(({"feature": o.fields.get("feature"), "status": o.fields.get("status"),
                                    "completion": o.fields.get("completion"), "project": o.project, "id": o.id}
                                   for o in features), key=lambda f: (f["project"], str(f["feature"]))),
        "now": format_time(now),
    }
