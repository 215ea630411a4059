"""Stage 4 of compile, memory: fold the events at `now`, take in page edits, maintain, render pages.

The pages show strength as of the start of the current UTC day (or at the pinned clock): time
passing alone changes them once a day, not at every compile, so a compile an hour later has
nothing to write and can take the no-op shortcut (compiler.pipeline.inputs).

A compile after a few memory writes digests only the observation pages near what they changed
(`compiler.render.memory.LastRender`): the build state records where the events stood and what
the pages were made with (`MemoryStage.render_mark`), and the events added since name the
memories that changed.

A person who edits the content of an observation page has made an update: the edit is
detected by hash (the page no longer matches what we wrote) and becomes an update event,
instead of being overwritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.core.clock import format_time, parse_time
from compiler.core.errors import BuildWarning
from compiler.core.files import is_generated
from compiler.core.settings import Settings
from compiler.embed.embedder import Embedder
from compiler.events import journal
from compiler.events.journal import MemoryEvent, append_events, new_id
from compiler.memory import fold as fold_module
from compiler.memory import model
from compiler.memory.maintenance import (
    events_digest,
    last_maintenance,
    maintenance_due,
    run_maintenance,
)
from compiler.memory.model import Observation, archived
from compiler.memory.snapshot import EventSet, Memories, event_mark, named_since
from compiler.memory.vault import VaultMemory, read_memories
from compiler.pipeline.inputs import shown_instant
from compiler.pipeline.memory_pages import KeptPages, Record, Stamp
from compiler.render.memory import (
    LastRender,
    project_links,
    read_edited_content,
    render_memory_pages,
)

if TYPE_CHECKING:  # the environment comes from compiler.render: jinja2 stays in that package
    import jinja2


@dataclass
class MemoryStage:
    state: dict[str, Observation] = field(default_factory=dict)
    pages: dict[str, str] = field(default_factory=dict)  # path inside the output folder → text, of pages rendered
    page_ids: dict[str, str] = field(default_factory=dict)  # observation page → memory id, to spot edits later
    digests: dict[str, str] = field(default_factory=dict)  # observation and project page → digest (MemoryPages.digests)
    kept: dict[str, Stamp] = field(default_factory=dict)  # observation and project pages not rendered (on disk as made) → stat
    rendered: int = 0  # observation pages rendered
    projects: list[tuple[str, str]] = field(default_factory=list)  # (name, page path) for the catalog
    warnings: list[BuildWarning] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)  # memory ids updated from page edits
    maintenance: dict[str, Any] = field(default_factory=dict)
    live: int = 0
    archived: int = 0
    events_digest: str = ""  # of every event the pages reflect ("" when there are none)
    shown_at: str = ""  # the instant the pages show strength at ("" when there are no events)
    maintenance_due: str = ""  # when maintenance falls due by time alone ("" with a pinned clock: never)
    render_mark: dict[str, Any] = field(default_factory=dict)  # what the pages were made at, for the next `LastRender`


def compile_memories(root: Path, settings: Settings, env: jinja2.Environment, page_ids: Mapping[str, str],
                     written: Mapping[str, str], records: Mapping[str, Record] | None = None,
                     embedder: Embedder | None = None, mark: Mapping[str, Any] | None = None) -> MemoryStage:
    """Returns the memory part of a build. `page_ids` maps the observation pages of the last build
    to their memory ids; `written` maps every vault-relative page to the sha256 we last wrote;
    `records` holds each observation page's input digest and stat at its last write
    (compiler.pipeline.memory_pages): a page that matches both is not rendered again. `mark` is
    the last build's `render_mark`: with it, only the pages near a changed memory are digested."""
    records = records or {}
    result = MemoryStage()
    with VaultMemory(root, settings, embedder=embedder) as vault:
        before = read_memories(vault)
        result.warnings = list(before.events.warnings)
        if not before.events:
            return result
        kept = KeptPages(root, settings.out, records, written)
        result.edits = _take_page_edits(vault, settings.out, before, page_ids, written, kept.as_written)
        result.maintenance = _maintain_if_due(vault, before.events)
        memories = read_memories(vault)
        shown = shown_instant(settings, memories.now)
        last = _last_render(mark or {}, memories.events, shown, page_ids, records)
        _render(result, memories, shown, env, kept, last)
        result.shown_at = format_time(shown)
        if not settings.now:
            result.maintenance_due = format_time(_maintenance_due(vault, memories.now))
        vault.snapshots.save(vault.engram)  # the fold checkpoint: commands after this compile fold nothing
    return result


def _render(result: MemoryStage, memories: Memories, shown: datetime, env: jinja2.Environment, kept: KeptPages,
            last: LastRender | None) -> None:
    """Fills `result` with the pages of `memories` as of `shown` (but the observation pages `kept`
    says the disk holds), the project links, the counts and the mark of this render."""
    result.state = dict(memories.state)
    pruned = archived(result.state, shown)
    pages = render_memory_pages(result.state, pruned, shown, env, kept, last)
    result.pages, result.page_ids, result.digests = pages.pages, pages.page_ids, pages.digests
    result.render_mark = {**event_mark(memories.events), "shown": format_time(shown), "key": pages.key,
                          "projects": pages.projects, "fold": _fold_module()}
    result.kept = {page: kept.stamps[page] for page in pages.kept}
    result.rendered = sum(1 for page in pages.pages if page in pages.page_ids)
    result.projects = project_links({i: o for i, o in result.state.items() if i not in pruned})
    result.live = sum(1 for i, o in result.state.items() if o.live and i not in pruned)
    result.archived = len(pruned)
    result.events_digest = events_digest(memories.events)


def _last_render(mark: Mapping[str, Any], events: EventSet, shown: datetime, page_ids: Mapping[str, str],
                 records: Mapping[str, Record]) -> LastRender | None:
    """Returns the last build's render as `render_memory_pages` takes it, when `events` only add to
    the ones it was made from (journal writes) and the fold's code is the same; else None."""
    changed = named_since(events, mark) if mark.get("fold") == _fold_module() else None
    if changed is None or not isinstance(mark.get("projects"), dict):
        return None
    try:
        made_at = parse_time(str(mark["shown"]))
    except (KeyError, ValueError):
        return None
    return LastRender(key=str(mark.get("key", "")), projects=mark["projects"], shown=made_at,
                      changed=frozenset(changed), pages={i: page for page, i in page_ids.items()},
                      digests={page: record[0] for page, record in records.items()})


def _fold_module() -> str:
    """Returns a digest of the code that turns events into memories: with another fold, a memory no
    event named since may read differently, so no recorded digest is reused."""
    digest = hashlib.sha256()
    for module in (model, fold_module, journal):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


def _maintain_if_due(vault: VaultMemory, events: EventSet) -> dict[str, Any]:
    """Maintains when new events arrived since the last maintenance, or every `maintenance_hours`."""
    if not maintenance_due(vault, events):
        return {"skipped": True, **last_maintenance(vault.engram)}
    return run_maintenance(vault)


def _maintenance_due(vault: VaultMemory, now: datetime) -> datetime:
    """Returns when maintenance falls due with no new event: `maintenance_hours` after the last one."""
    at = last_maintenance(vault.engram).get("at")
    return parse_time(at) + timedelta(hours=vault.settings.maintenance_hours) if at else now


def _take_page_edits(vault: VaultMemory, out: str, memories: Memories, page_ids: Mapping[str, str],
                     written: Mapping[str, str], as_written: Callable[[str], bool]) -> list[str]:
    """Turns edited observation pages into update events; returns the ids updated. A page that has
    the stat it had when written (`as_written`) holds our bytes: it is not read."""
    root, state = vault.root, memories.state
    pages_root = (root / out).resolve()
    events: list[MemoryEvent] = []
    for page, memory_id in sorted(page_ids.items()):
        if memory_id not in state or as_written(page):
            continue
        path = root / out / page
        if not path.is_file() or not is_generated(path):
            continue
        if not path.resolve().is_relative_to(pages_root):  # a planted symlink (`_engram/memory -> …`): not ours
            continue
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == written.get(f"{out}/{page}"):
            continue
        content = read_edited_content(data.decode("utf-8", errors="replace"))
        if content and content != state[memory_id].content:
            events.append(MemoryEvent(new_id("ev-"), "update", memory_id, format_time(vault.now()),
                                      {"content": content, "source": f"edited {out}/{page}"}))
    if events:
        append_events(vault.engram, events)
    return [e.memory for e in events]
