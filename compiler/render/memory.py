"""Memory pages: one page per live observation, a page per project, and the archive.

Page paths come from slugs, never from raw titles or project names: lower-case letters and digits
of any script joined by dashes (accents dropped from Latin letters, so "Diseño" → "diseno", while
"Решение", "Απόφαση" and "语义图谱" stay readable), no punctuation, no reserved device names, bounded
in UTF-8 bytes, and the memory id's tail for uniqueness and stability.
The observation's content sits between two HTML comments, so a person's edit of it can be read
back as an update event (see `read_edited_content`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2

from compiler.events.checks import CATEGORIES
from compiler.memory.model import Observation, association_graph, half_life_days
from compiler.notes.markdown_rules import uninert

# A slug's bytes: room for the id tail and ".md" in a folder slug, far below any file-name limit
# (a CJK title of 50 characters is 150 bytes).
SLUG_BYTES = 120
CONTENT_START, CONTENT_END = "<!-- engram:content -->", "<!-- /engram:content -->"
RENDER_MODULES = ("memory.py", "notes.py")  # compiler.render: the environment's filters and globals, this module
_NOT_ASCII_ALNUM = re.compile(r"[^a-z0-9]")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10)),
             "index", "archive"}


def slugify(text: str, limit: int = 60) -> str:
    """Returns a safe file-name stem: lower-case words of letters and digits joined by dashes, at
    most `limit` characters and SLUG_BYTES bytes of UTF-8, never empty or reserved."""
    if text.isascii():  # most titles: the same result as below, without a call per character
        words = _NOT_ASCII_ALNUM.sub("-", text.lower())
    else:
        words = "".join(_slug_char(ch) for ch in unicodedata.normalize("NFC", text).lower())
    slug = re.sub(r"-+", "-", words).strip("-")[:limit]
    slug = slug.encode("utf-8")[:SLUG_BYTES].decode("utf-8", errors="ignore").strip("-") or "memory"
    return f"m-{slug}" if slug in _RESERVED else slug


def _slug_char(ch: str) -> str:
    """Returns one character of a slug: itself for a letter or digit (an accented Latin letter as its
    ASCII base), else a dash. Marks, symbols, spaces, controls and bidi overrides all become dashes."""
    if ch.isascii():
        return ch if ch.isalnum() else "-"
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    if base.isascii() and base.isalnum():
        return base.lower()  # é → e, ﬁ → fi
    # A letter or digit of another script stays as written: Cyrillic "й" keeps its breve.
    return ch if unicodedata.category(ch)[0] in "LN" and ch.isalnum() else "-"


def project_slugs(projects: Sequence[str]) -> dict[str, str]:
    """Returns a unique folder slug per project name (names that slug alike get a hash suffix)."""
    plain = {p: slugify(p) for p in sorted(set(projects))}
    taken = Counter(plain.values())
    return {p: s if taken[s] == 1 else f"{s}-{hashlib.sha256(p.encode()).hexdigest()[:6]}" for p, s in plain.items()}


def memory_page(obs: Observation, projects: Mapping[str, str]) -> str:
    """Returns the page path (inside the output folder) of a live observation."""
    tail = re.sub(r"[^a-z0-9]", "", obs.id.lower())[-6:] or "0"
    return f"memory/{projects[obs.project]}/{slugify(obs.title, 50)}-{tail}.md"


@dataclass
class MemoryPages:
    """The memory pages of a build: the ones rendered, and the observation pages left as they are on disk."""

    pages: dict[str, str] = field(default_factory=dict)  # page path → text, for every page rendered
    page_ids: dict[str, str] = field(default_factory=dict)  # observation page → memory id
    # observation page → `page_digest` of its inputs; project page → `key` (its members say whether it moved)
    digests: dict[str, str] = field(default_factory=dict)
    kept: set[str] = field(default_factory=set)  # observation and project pages not rendered: the disk already holds them
    key: str = ""  # a digest of the observation and project templates' `template_key`
    projects: dict[str, str] = field(default_factory=dict)  # project → its folder (`project_slugs`)


@dataclass(frozen=True)
class LastRender:
    """The observation pages of the last build, and which memories changed since (the memories
    named by the events added after it): a page whose memory, related memories and archive status
    did not move keeps its recorded digest, so it is not even digested again. It holds only if the
    template key and the instant shown are the last build's and its project folders still are
    (else: every page is digested, as with no last render)."""

    key: str  # `MemoryPages.key` then
    projects: Mapping[str, str]  # `project_slugs` then
    shown: datetime  # the instant the pages showed strength at
    changed: frozenset[str]  # memories named by the events added since
    pages: Mapping[str, str]  # memory id → its observation page then (live and not archived)
    digests: Mapping[str, str]  # observation page → its digest then


def render_memory_pages(state: Mapping[str, Observation], pruned: set[str], now: datetime,
                        env: jinja2.Environment, unchanged: Callable[[str, str], bool] = lambda page, digest: False,
                        last: LastRender | None = None) -> MemoryPages:
    """Returns the page of every live observation, each project and the archive.

    An observation page is rendered only when `unchanged(page, its digest)` is false: a digest of
    everything its bytes are made of (`page_digest`), so the caller can say "the page on disk was
    made from exactly this" and spare rendering 50,000 pages after one memory was added. Given the
    `last` render, only the pages near a changed memory are digested again (`_near`); the others
    keep their digest, and a project page none of whose members moved is kept when `unchanged`
    says the disk holds it. The archive and the Bases file are always rendered.
    """
    result = MemoryPages()
    live = {i: o for i, o in state.items() if o.live and i not in pruned}
    if not state:
        return result
    projects = project_slugs([o.project for o in state.values()])
    template = env.get_template("memory.md.j2")
    key = template_key(env, "memory.md.j2")
    render_key = hashlib.sha256((key + template_key(env, "project.md.j2")).encode()).hexdigest()
    if last is not None and not _same_render(last, render_key, projects, now):
        last = None
    if last is None:
        paths = {i: memory_page(o, projects) for i, o in live.items()}
        graph = association_graph(live)
        adjacent: Callable[[str], Mapping[str, float]] = lambda i: graph.get(i, {})
        near: set[str] = set(live)
        digests: Mapping[str, str] = {}
        touched: set[str] | None = None  # the projects whose page may have moved: all
    else:  # a memory not changed keeps its page (its title, id and project folder are the same)
        paths = {i: p for i, p in last.pages.items() if i in live and i not in last.changed}
        paths.update((i, memory_page(o, projects)) for i, o in live.items() if i not in paths)
        linked_from = _LinkedFrom(state)
        moved = _moved(live, last)
        near = _near(state, live, moved, linked_from)
        touched = {state[i].project for i in moved if i in state}
        adjacent = lambda i: _adjacent(i, live, linked_from(i))
        digests = last.digests
    for memory_id, obs in sorted(live.items()):
        page = paths[memory_id]
        digest = None if memory_id in near else digests.get(page)
        inputs = None
        if digest is None:
            inputs = _page_inputs(obs, adjacent(memory_id), live, now)
            related, strength, half_life = inputs
            digest = page_digest(key, page, obs, strength, half_life,
                                 [(o.id, o.title, paths[o.id], w) for o, w in related], projects[obs.project])
        result.digests[page] = digest
        if unchanged(page, digest):
            result.kept.add(page)
            continue
        related, strength, half_life = inputs or _page_inputs(obs, adjacent(memory_id), live, now)
        result.pages[page] = template.render(
            obs=obs, strength=strength, half_life=half_life,
            related=related, page_of=paths, content_start=CONTENT_START, content_end=CONTENT_END,
            project_slug=projects.__getitem__)
    by_project: dict[str, list[Observation]] = defaultdict(list)
    for obs in live.values():
        by_project[obs.project].append(obs)
    project_template = env.get_template("project.md.j2")
    for project, members in sorted(by_project.items()):
        # A project page shows its members alone: none moved, the page on disk is current.
        page = f"projects/{projects[project]}.md"
        result.digests[page] = render_key
        if touched is not None and project not in touched and unchanged(page, render_key):
            result.kept.add(page)
            continue
        result.pages[page] = project_template.render(**_project(project, members, paths, now))
    archived = sorted((o for i, o in state.items() if i in pruned or not o.live), key=lambda o: (o.project, o.id))
    result.pages["memory/archive.md"] = env.get_template("archive.md.j2").render(archived=archived, now=now)
    result.pages["memory/memories.base"] = env.get_template("memories.base.j2").render()  # Obsidian Bases view
    result.page_ids = {page: memory_id for memory_id, page in paths.items()}
    result.key, result.projects = render_key, projects
    return result


def _same_render(last: LastRender, key: str, projects: Mapping[str, str], now: datetime) -> bool:
    """Returns whether the pages of `last` were made as these would be: the same templates, the
    same instant shown, and every project folder of then still the same. A new project (a memory
    stored into it is a changed memory) leaves the others' pages where they were."""
    return (last.key, last.shown) == (key, now) and all(projects.get(p) == s for p, s in last.projects.items())


def _page_inputs(obs: Observation, adjacent: Mapping[str, float], live: Mapping[str, Observation],
                 now: datetime) -> tuple[list[tuple[Observation, float]], float, float]:
    """Returns what an observation page shows besides its memory: the related memories (strongest
    link first), the strength at `now` and the half-life."""
    related = [(live[i], w) for i, w in sorted(adjacent.items(), key=lambda kv: (-kv[1], kv[0]))]
    return related, obs.strength(now), half_life_days(obs.category, obs.importance)


def _moved(live: Mapping[str, Observation], last: LastRender) -> set[str]:
    """Returns the memories that moved since `last`: the changed ones and the ones that came into
    or left the live, unarchived set."""
    return set(last.changed) | (set(last.pages) ^ set(live))


def _near(state: Mapping[str, Observation], live: Mapping[str, Observation], moved: set[str],
          linked_from: Callable[[str], Sequence[str]]) -> set[str]:
    """Returns the live memories whose page inputs may have moved: the `moved` ones and every
    memory linked with one (their related lists show its title, page and whether it is there).
    Links are set when a memory is saved and never change after, so the links of now are the
    links of then."""
    near = set(moved)
    for memory_id in moved:
        obs = state.get(memory_id)
        near.update(other for other, _ in (obs.links if obs else ()))
        near.update(linked_from(memory_id))
    return near & set(live)


class _LinkedFrom:
    """{memory: the memories whose links name it}, built on the first question (one pass over every link)."""

    def __init__(self, state: Mapping[str, Observation]) -> None:
        self._state = state
        self._found: dict[str, list[str]] | None = None

    def __call__(self, memory_id: str) -> Sequence[str]:
        if self._found is None:
            self._found = defaultdict(list)
            for source, obs in self._state.items():
                for other, _ in obs.links:
                    self._found[other].append(source)
        return self._found.get(memory_id, ())


def _adjacent(memory_id: str, live: Mapping[str, Observation], linked_from: Sequence[str]) -> dict[str, float]:
    """Returns `association_graph(live).get(memory_id, {})` from the links of one memory and of those
    that name it (`linked_from`), without building the graph."""
    found: dict[str, float] = {}
    for other, weight in live[memory_id].links:
        if other in live and other != memory_id:
            found[other] = max(found.get(other, 0.0), weight)
    for other in linked_from:
        if other in live and other != memory_id:
            for target, weight in live[other].links:
                if target == memory_id:
                    found[other] = max(found.get(other, 0.0), weight)
    return found


def template_key(env: jinja2.Environment, name: str) -> str:
    """Returns a digest of what turns a page's inputs into its bytes: the template's source as `env`
    finds it (a vault's override or the bundled one), the filters and globals of compiler.render
    (their code and the output folder links point into) and the Jinja version."""
    assert env.loader is not None
    source = env.loader.get_source(env, name)[0]
    code = b"".join(Path(__file__).with_name(module).read_bytes() for module in RENDER_MODULES)
    digest = hashlib.sha256(code)
    digest.update(repr((source, env.globals.get("out"), jinja2.__version__)).encode("utf-8"))
    return digest.hexdigest()


def page_digest(key: str, page: str, obs: Observation, strength: float, half_life: float,
                related: Sequence[tuple[str, str, str, float]], project_slug: str) -> str:
    """Returns a digest of exactly what an observation page is rendered from: the template (`key`),
    the page's path, every field of the memory, its strength and half-life as the page shows them,
    its related memories (id, title, page, link weight) and its project's folder."""
    return hashlib.sha256(repr((key, page, obs, strength, half_life, related, project_slug)).encode("utf-8")).hexdigest()


def project_links(state: Mapping[str, Observation]) -> list[tuple[str, str]]:
    """Returns (project name, project page path) for the catalog."""
    projects = project_slugs([o.project for o in state.values() if o.live])
    return [(p, f"projects/{s}.md") for p, s in sorted(projects.items())]


def _project(project: str, members: list[Observation], paths: Mapping[str, str], now: datetime) -> dict[str, Any]:
    strength = {o.id: o.strength(now) for o in members}
    by_category = {c: sorted((o for o in members if o.category == c and o.kind in ("memory", "failure")),
                             key=lambda o: (-strength[o.id], o.id)) for c in CATEGORIES}
    failures = Counter(o.fields.get("component", "?") for o in members if o.kind == "failure")
    features = sorted((o for o in members if o.kind == "progress"), key=lambda o: str(o.fields.get("feature")))
    handoffs = sorted((o for o in members if o.kind == "handoff"), key=lambda o: (o.created_at, o.id), reverse=True)
    return {"project": project, "members": members, "by_category": by_category, "strength": strength,
            "category_counts": Counter(o.category for o in members), "failures": sorted(failures.items()),
            "features": features, "handoffs": handoffs[:3], "page_of": paths}


def read_edited_content(page_text: str) -> str | None:
    """Returns the content between the content markers of an observation page, or None. The page
    shows it escaped (`inert_block`: a memory is data, nothing in it may run in Obsidian); the
    escapes come off here, so a person's edit is read back as the plain text they see."""
    start, end = page_text.find(CONTENT_START), page_text.find(CONTENT_END)
    if start < 0 or end < start:
        return None
    return uninert(page_text[start + len(CONTENT_START):end].strip())
