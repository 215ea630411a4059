"""Stage 8, render: Jinja2 templates → Markdown pages (catalog, backlinks, health).

Returns page texts keyed by their path inside the output folder; `compiler.core.files` writes them.
A vault overrides any template by putting a file of the same name in its templates folder.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from compiler.core.errors import BuildWarning
from compiler.core.files import bounded_name
from compiler.notes.records import Note, ResolvedLink

PACKAGE_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"  # editable checkout


@dataclass(frozen=True)
class VaultView:
    """Everything the note pages are made from."""

    notes: Sequence[Note]
    links: Sequence[ResolvedLink]
    neighbours: Mapping[str, Sequence[tuple[str, float]]]
    warnings: Sequence[BuildWarning]
    projects: Sequence[tuple[str, str]] = ()  # memory projects: (name, page path inside the output folder)


def template_environment(override_dir: Path | None, out: str = "_engram") -> jinja2.Environment:
    """Returns a Jinja2 environment: the vault's overrides first, then the bundled templates."""
    loaders: list[jinja2.BaseLoader] = []
    if override_dir and override_dir.is_dir():
        loaders.append(jinja2.FileSystemLoader(str(override_dir)))
    loaders.append(_bundled_loader())
    env = jinja2.Environment(loader=jinja2.ChoiceLoader(loaders), keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters.update(wikilink=wikilink, yaml=yaml_value, cell=table_cell)
    env.globals["page"] = lambda path, text="": wikilink(f"{out}/{path}", text)  # a link to a generated page
    return env


def _bundled_loader() -> jinja2.BaseLoader:
    if PACKAGE_TEMPLATES.is_dir():
        return jinja2.FileSystemLoader(str(PACKAGE_TEMPLATES))
    return jinja2.PackageLoader("compiler", "templates")  # installed wheel: templates ship as compiler/templates


def backlinks_page(note_path: str) -> str:
    """Returns the page path (inside the output folder) of a note's backlinks page.

    The ".links" suffix keeps the page's name distinct from the note's, so `[[Note]]` in the
    vault never becomes ambiguous because of us. The note's folders are legal names already; the
    file name is bounded (a 250-byte note name would otherwise make a 256-byte page name).
    """
    stem, ext = posixpath.splitext(note_path)
    folder, name = posixpath.split(f"{stem}{'' if ext == '.md' else ext}")
    return posixpath.join("backlinks", folder, bounded_name(name, ".links.md", note_path))


def render_note_pages(view: VaultView, env: jinja2.Environment, out: str) -> dict[str, str]:
    """Returns {page path inside `out`: text} for the catalog, the health page and every backlinks page."""
    by_path = {n.path: n for n in view.notes}
    incoming: dict[str, list[ResolvedLink]] = defaultdict(list)
    outgoing: dict[str, list[ResolvedLink]] = defaultdict(list)
    for link in view.links:
        outgoing[link.source].append(link)
        if link.status != "broken" and link.target != link.source:
            incoming[link.target].append(link)
    pages = {"catalog.md": env.get_template("catalog.md.j2").render(**_catalog(view, out)),
             "health.md": env.get_template("health.md.j2").render(**_health(view, incoming, outgoing))}
    backlinks = env.get_template("backlinks.md.j2")
    for note in sorted(view.notes, key=lambda n: n.path):
        linked = {l.source for l in incoming[note.path]} | {l.target for l in outgoing[note.path]}
        related = [(by_path[p], c) for p, c in view.neighbours.get(note.path, ()) if p not in linked and p in by_path]
        pages[backlinks_page(note.path)] = backlinks.render(
            note=note, incoming=[(by_path[l.source], l) for l in incoming[note.path]],
            outgoing=outgoing[note.path], related=related, by_path=by_path)
    return pages


def _catalog(view: VaultView, out: str) -> dict[str, Any]:
    folders: dict[str, list[Note]] = defaultdict(list)
    tags: dict[str, list[Note]] = defaultdict(list)
    for note in sorted(view.notes, key=lambda n: n.path.lower()):
        folders[posixpath.dirname(note.path) or "/"].append(note)
        for tag in note.tags:
            tags[tag].append(note)
    top = Counter(note.path.split("/")[0] if "/" in note.path else "(root)" for note in view.notes)
    return {"notes": view.notes, "folders": sorted(folders.items()), "tags": sorted(tags.items()),
            "out": out, "top_folders": sorted(top.items()), "projects": view.projects}


def _health(view: VaultView, incoming: Mapping[str, list], outgoing: Mapping[str, list]) -> dict[str, Any]:
    broken = [l for l in view.links if l.status == "broken"]
    ambiguous = [l for l in view.links if l.status == "ambiguous"]
    orphans = [n for n in sorted(view.notes, key=lambda n: n.path)
               if not incoming.get(n.path) and not any(l.status != "broken" for l in outgoing.get(n.path, ()))]
    frontmatter = [w for w in view.warnings if w.kind == "frontmatter"]
    other = [w for w in view.warnings if w.kind not in ("frontmatter", "broken-link", "ambiguous-link")]
    counts = {"Broken links": len(broken), "Ambiguous links": len(ambiguous), "Orphan notes": len(orphans),
              "Invalid frontmatter": len(frontmatter), "Other warnings": len(other)}
    return {"notes": view.notes, "broken": broken, "ambiguous": ambiguous, "orphans": orphans,
            "frontmatter": frontmatter, "other": other, "counts": counts}


_UNSAFE_ALIAS = re.compile(r"[\[\]|\n\r]+")


def wikilink(path: str, text: str = "") -> str:
    """Returns `[[path|text]]` with the extension of .md notes dropped, safe for any title."""
    target = path[:-3] if path.endswith(".md") else path
    shown = _UNSAFE_ALIAS.sub(" ", text).strip()
    return f"[[{target}|{shown}]]" if shown and shown != target else f"[[{target}]]"


def yaml_value(value: Any) -> str:
    """Returns a YAML scalar for frontmatter: JSON strings are valid YAML and escape everything."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def table_cell(value: Any) -> str:
    """Returns text safe inside a Markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")
