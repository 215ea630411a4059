"""Memory pages: one page per live observation, a page per project, and the archive.

Page paths come from slugs, never from raw titles or project names: lower-case letters and digits
of any script joined by dashes (accents dropped from Latin letters, so "Diseño" → "diseno", while
"Решение", "Απόφαση" and "语义图谱" stay readable), no punctuation, no reserved device names, bounded
in UTF-8 bytes, and the memory id's tail for uniqueness and stability.
The observation's content sits between two HTML comments, so a person's edit of it can be read
back as an update event (see `read_edited_content`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2

from compiler.events.checks import CATEGORIES
from compiler.memory.model import Observation, association_graph, half_life_days

# A slug's bytes: room for the id tail and ".md" in a folder slug, far below any file-name limit
# (a CJK title of 50 characters is 150 bytes).
SLUG_BYTES = 120
CONTENT_START, CONTENT_END = "<!-- engram:content -->", "<!-- /engram:content -->"
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10)),
             "index", "archive"}


def slugify(text: str, limit: int = 60) -> str:
    """Returns a safe file-name stem: lower-case words of letters and digits joined by dashes, at
    most `limit` characters and SLUG_BYTES bytes of UTF-8, never empty or reserved."""
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
    import hashlib

    plain = {p: slugify(p) for p in sorted(set(projects))}
    taken = Counter(plain.values())
    return {p: s if taken[s] == 1 else f"{s}-{hashlib.sha256(p.encode()).hexdigest()[:6]}" for p, s in plain.items()}


def memory_page(obs: Observation, projects: Mapping[str, str]) -> str:
    """Returns the page path (inside the output folder) of a live observation."""
    tail = re.sub(r"[^a-z0-9]", "", obs.id.lower())[-6:] or "0"
    return f"memory/{projects[obs.project]}/{slugify(obs.title, 50)}-{tail}.md"


def render_memory_pages(state: Mapping[str, Observation], pruned: set[str], now: datetime,
                        env: jinja2.Environment) -> tuple[dict[str, str], dict[str, str]]:
    """Returns ({page path: text} for every live observation, each project and the archive,
    {observation page path: memory id})."""
    live = {i: o for i, o in state.items() if o.live and i not in pruned}
    if not state:
        return {}, {}
    projects = project_slugs([o.project for o in state.values()])
    paths = {i: memory_page(o, projects) for i, o in live.items()}
    pages: dict[str, str] = {}
    template = env.get_template("memory.md.j2")
    adjacency = association_graph(live)
    for memory_id, obs in sorted(live.items()):
        related = [(live[i], w) for i, w in sorted(adjacency.get(memory_id, {}).items(), key=lambda kv: (-kv[1], kv[0]))]
        pages[paths[memory_id]] = template.render(
            obs=obs, strength=obs.strength(now), half_life=half_life_days(obs.category, obs.importance),
            related=related, page_of=paths, content_start=CONTENT_START, content_end=CONTENT_END,
            project_slug=projects.__getitem__)
    by_project: dict[str, list[Observation]] = defaultdict(list)
    for obs in live.values():
        by_project[obs.project].append(obs)
    project_template = env.get_template("project.md.j2")
    for project, members in sorted(by_project.items()):
        pages[f"projects/{projects[project]}.md"] = project_template.render(**_project(project, members, paths, now))
    archived = sorted((o for i, o in state.items() if i in pruned or not o.live), key=lambda o: (o.project, o.id))
    pages["memory/archive.md"] = env.get_template("archive.md.j2").render(archived=archived, now=now)
    pages["memory/memories.base"] = env.get_template("memories.base.j2").render()  # Obsidian Bases view
    return pages, {page: memory_id for memory_id, page in paths.items()}


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
