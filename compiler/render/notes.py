"""Stage 8, render: Jinja2 templates → Markdown pages (catalog, backlinks, health).

Returns page texts keyed by their path inside the output folder; `compiler.core.files` writes them.
A vault overrides any template by putting a file of the same name in its templates folder.
"""

from __future__ import annotations

import json
import posixpath
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from compiler.core.clock import parse_time
from compiler.core.errors import BuildWarning
from compiler.core.files import bounded_name
from compiler.notes.links import missing_kind
from compiler.notes.markdown_rules import inert
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
    env.filters.update(wikilink=wikilink, yaml=yaml_value, cell=table_cell, inert=inert, code=code_span,
                       mermaid_text=mermaid_text, iso=iso_time)
    env.globals["page"] = lambda path, text="": wikilink(f"{out}/{path}", text)  # a link to a generated page
    # Generated pages link a note from two places only, the catalog and its own backlinks page; every
    # other mention goes through the note's backlinks page, so Obsidian's backlinks pane and graph
    # show the people's links, not ours.
    env.globals["via"] = lambda note: wikilink(f"{out}/{backlinks_page(note.path)}", note.title)
    env.globals["out"] = out
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
            note=note, incoming=[(by_path[link.source], link, n) for link, n in places(incoming[note.path])],
            sources=len({l.source for l in incoming[note.path]}), outgoing=places(outgoing[note.path]),
            related=related, by_path=by_path)
    return pages


def places(links: Sequence[ResolvedLink]) -> list[tuple[ResolvedLink, int]]:
    """Returns one (link, how many) per place: a line holding the same link three times is one row."""
    counts = Counter((l.source, l.target, l.link.line, l.link.kind, l.link.heading, l.link.block,
                      l.link.target if l.status == "broken" else "") for l in links)
    first: dict[tuple, ResolvedLink] = {}
    for link in links:
        key = (link.source, link.target, link.link.line, link.link.kind, link.link.heading, link.link.block,
               link.link.target if link.status == "broken" else "")
        first.setdefault(key, link)
    return [(link, counts[key]) for key, link in first.items()]


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


@dataclass(frozen=True)
class Missing:
    """One page or file that broken links want, with who wants it."""

    target: str  # as written in the first link that wants it
    kind: str  # "note" | "file"
    links: int
    sources: tuple[str, ...]  # notes that link to it, sorted


def _health(view: VaultView, incoming: Mapping[str, list], outgoing: Mapping[str, list]) -> dict[str, Any]:
    broken = [l for l in view.links if l.status == "broken"]
    ambiguous = [l for l in view.links if l.status == "ambiguous"]
    orphans = [n for n in sorted(view.notes, key=lambda n: n.path)
               if not incoming.get(n.path) and not any(l.status != "broken" for l in outgoing.get(n.path, ()))]
    frontmatter = [w for w in view.warnings if w.kind == "frontmatter"]
    other = [w for w in view.warnings if w.kind not in ("frontmatter", "broken-link", "ambiguous-link")]
    missing = missing_targets(broken)
    notes_wanted = [m for m in missing if m.kind == "note"]
    files_wanted = [m for m in missing if m.kind == "file"]
    # The chart shows every link by outcome: it has more than one slice whenever anything resolves.
    outcomes = {"Resolved": sum(1 for l in view.links if l.status == "ok"), "Ambiguous": len(ambiguous),
                "Missing note": sum(m.links for m in notes_wanted), "Missing file": sum(m.links for m in files_wanted)}
    by_note = sorted({(l.source, l.link.target) for l in broken}, key=lambda st: (st[1].lower(), st[0]))
    broken_rows = [(source, target, sorted({l.link.line for l in broken if l.source == source and l.link.target == target}))
                   for source, target in by_note]
    return {"notes": view.notes, "broken": broken, "ambiguous": ambiguous, "orphans": orphans,
            "frontmatter": frontmatter, "other": other, "notes_wanted": notes_wanted, "files_wanted": files_wanted,
            "outcomes": outcomes, "broken_rows": broken_rows}


def missing_targets(broken: Sequence[ResolvedLink]) -> list[Missing]:
    """Returns the notes and files broken links want, most-wanted first: links that differ only in
    case or Unicode form want the same page, as Obsidian would create one for all of them."""
    groups: dict[tuple[str, str], list[ResolvedLink]] = defaultdict(list)
    for link in broken:
        target = link.link.target.strip()
        groups[(missing_kind(link.link), unicodedata.normalize("NFC", target).lower())].append(link)
    found = [Missing(links[0].link.target.strip(), kind, len(links), tuple(sorted({l.source for l in links})))
             for (kind, _), links in groups.items()]
    return sorted(found, key=lambda m: (-m.links, m.target.lower()))


_UNSAFE_ALIAS = re.compile(r"[\[\]|\n\r]+")


# A wikilink's target ends at "#" (a heading), "^" or "|"; Obsidian cannot link such a name.
_UNLINKABLE = re.compile(r"[#^|\[\]]")


def wikilink(path: str, text: str = "") -> str:
    """Returns `[[path|text]]` with the extension of .md notes dropped, safe for any title; a path a
    wikilink cannot hold ("Tips #1.md") becomes a Markdown link with the path percent-encoded."""
    target = path[:-3] if path.endswith(".md") else path
    shown = _UNSAFE_ALIAS.sub(" ", text).strip()
    if _UNLINKABLE.search(target):
        return f"[{inert(shown or posixpath.basename(target))}]({quote(path)})"
    return f"[[{target}|{shown}]]" if shown and shown != target else f"[[{target}]]"


def yaml_value(value: Any) -> str:
    """Returns a YAML scalar for frontmatter: JSON strings are valid YAML and escape everything."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def table_cell(value: Any) -> str:
    """Returns text safe inside a Markdown table cell."""
    # A pipe that `inert` escaped already stays as it is; Obsidian reads `\|` as a pipe, not a cell edge.
    return re.sub(r"(?<!\\)\|", r"\\|", str(value).replace("\n", " "))


def code_span(value: Any) -> str:
    """Returns `value` as an inline code span, fenced by more backticks than it holds in a row."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def mermaid_text(value: Any) -> str:
    """Returns a quoted Mermaid label: Mermaid has no escape for `"` inside one, so it becomes `'`."""
    return '"' + " ".join(str(value).replace('"', "'").split()) + '"'


def iso_time(value: str) -> str:
    """Returns an engram time ("2026-11-30 12:00:00", UTC) as ISO 8601, the form Obsidian's date & time
    properties read: "2026-11-30T12:00:00" (no offset, as Obsidian writes them; engram times are UTC)."""
    try:
        return parse_time(value).replace(tzinfo=None).isoformat(timespec="seconds")
    except ValueError:  # never seen in a folded event; shown as it is rather than failing the build
        return yaml_value(value)
