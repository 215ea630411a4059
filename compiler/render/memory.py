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
    digests: dict[str, str] = field(default_factory=dict)  # observation page → `page_digest` of its inputs
    kept: set[str] = field(default_factory=set)  # observation pages not rendered: the disk already holds them


def render_memory_pages(state: Mapping[str, Observation], pruned: set[str], now: datetime,
                        env: jinja2.Environment, unchanged: Callable[[str, str], bool] = lambda page, digest: False,
                        ) -> MemoryPages:
    """Returns the page of every live observation, each project and the archive.

    An observation page is rendered only when `unchanged(page, its digest)` is false: a digest of
    everything its bytes are made of (`page_digest`), so the caller can say "the page on disk was
    made from exactly this" and spare rendering 50,000 pages after one memory was added. Project
    pages, the archive and the Bases file gather many memories each: they are always rendered.
    """
    result = MemoryPages()
    live = {i: o for i, o in state.items() if o.live and i not in pruned}
    if not state:
        return result
    projects = project_slugs([o.project for o in state.values()])
    paths = {i: memory_page(o, projects) for i, o in live.items()}
    template = env.get_template("memory.md.j2")
    key = template_key(env, "memory.md.j2")
    adjacency = association_graph(live)
    for memory_id, obs in sorted(live.items()):
        related = [(live[i], w) for i, w in sorted(adjacency.get(memory_id, {}).items(), key=lambda kv: (-kv[1], kv[0]))]
        page, strength, half_life = paths[memory_id], obs.strength(now), half_life_days(obs.category, obs.importance)
        digest = page_digest(key, page, obs, strength, half_life, [(o.id, o.title, paths[o.id], w) for o, w in related],
                             projects[obs.project])
        result.digests[page] = digest
        if unchanged(page, digest):
            result.kept.add(page)
            continue
        result.pages[page] = template.render(
            obs=obs, strength=strength, half_life=half_life,
            related=related, page_of=paths, content_start=CONTENT_START, content_end=CONTENT_END,
            project_slug=projects.__getitem__)
    by_project: dict[str, list[Observation]] = defaultdict(list)
    for obs in live.values():
        by_project[obs.project].append(obs)
    project_template = env.get_template("project.md.j2")
    for project, members in sorted(by_project.items()):
        result.pages[f"projects/{projects[project]}.md"] = project_template.render(**_project(project, members, paths, now))
    archived = sorted((o for i, o in state.items() if i in pruned or not o.live), key=lambda o: (o.project, o.id))
    result.pages["memory/archive.md"] = env.get_template("archive.md.j2").render(archived=archived, now=now)
    result.pages["memory/memories.base"] = env.get_template("memories.base.j2").render()  # Obsidian Bases view
    result.page_ids = {page: memory_id for memory_id, page in paths.items()}
    return result


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
    """Returns the content between the content markers of an observation page, or None."""
    start, end = page_text.find(CONTENT_START), page_text.find(CONTENT_END)
    if start < 0 or end < start:
        return None
    return page_text[start + len(CONTENT_START):end].strip()
