"""Stage 8, render: Jinja2 templates → Markdown pages (catalog, backlinks, health).

Returns page texts keyed by their path inside the output folder; `compiler.core.files` writes them.
A vault overrides any template by putting a file of the same name in its templates folder.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from compiler.core.clock import parse_time
from compiler.core.errors import BuildWarning
from compiler.core.files import bounded_name
from compiler.notes.links import missing_kind
from compiler.notes.markdown_rules import inert, inert_block
from compiler.notes.records import Note, ResolvedLink

PACKAGE_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"  # editable checkout
NOTE_TEMPLATES = ("catalog.md.j2", "catalog_folder.md.j2", "health.md.j2", "backlinks.md.j2")
_RENDER_CODE = Path(__file__).read_bytes() + Path(inert.__code__.co_filename).read_bytes()  # what page digests hold of the code


@dataclass(frozen=True)
class VaultView:
    """Everything the note pages are made from."""

    notes: Sequence[Note]
    links: Sequence[ResolvedLink]
    neighbours: Mapping[str, Sequence[tuple[str, float]]]
    warnings: Sequence[BuildWarning]
    projects: Sequence[tuple[str, str]] = ()  # memory projects: (name, page path inside the output folder)
    lint: Mapping[str, Any] | None = None  # the wiki's lint (compiler.wiki.lint), when the vault has a wiki
    # More notes than this: the catalog lists its top folders, each with a page of its notes (None: one page).
    catalog_split: int | None = None


def template_environment(override_dir: Path | None, out: str = "_engram") -> jinja2.Environment:
    """Returns a Jinja2 environment: the vault's overrides first, then the bundled templates."""
    loaders: list[jinja2.BaseLoader] = []
    if override_dir and override_dir.is_dir():
        loaders.append(jinja2.FileSystemLoader(str(override_dir)))
    loaders.append(_bundled_loader())
    env = jinja2.Environment(loader=jinja2.ChoiceLoader(loaders), keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters.update(wikilink=wikilink, yaml=yaml_value, cell=table_cell, inert=inert, inert_block=inert_block,
                       code=code_span, mermaid_text=mermaid_text, iso=iso_time)
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
    if note_path.endswith(".md") and "//" not in note_path and not note_path.startswith("/"):
        # Most notes: the same split as below without posixpath's three calls (100,000 notes per
        # compile). A name starting with "." has no extension to splitext: the general way.
        folder, _, name = note_path[:-3].rpartition("/")
        if name and not name.startswith("."):
            page = bounded_name(name, ".links.md", note_path)
            return f"backlinks/{folder}/{page}" if folder else f"backlinks/{page}"
    stem, ext = posixpath.splitext(note_path)
    folder, name = posixpath.split(f"{stem}{'' if ext == '.md' else ext}")
    return posixpath.join("backlinks", folder, bounded_name(name, ".links.md", note_path))


def render_note_pages(view: VaultView, env: jinja2.Environment, out: str) -> dict[str, str]:
    """Returns {page path inside `out`: text} for the catalog, the health page and every backlinks page."""
    return render_changed_note_pages(view, env, out).pages


@dataclass(frozen=True)
class NotePages:
    """The note pages of a build: those rendered, and the digest of every page's inputs."""

    pages: dict[str, str]  # page path inside the output folder → text, for the pages rendered
    digests: dict[str, str]  # every page → `page_digest` of what it is made of
    kept: list[str]  # pages not rendered: `unchanged` said the disk holds them as made


def render_changed_note_pages(view: VaultView, env: jinja2.Environment, out: str,
                              unchanged: Callable[[str, str], bool] = lambda page, digest: False,
                              moved: Collection[str] | None = None, last: Mapping[str, str] | None = None) -> NotePages:
    """Renders the catalog, the health page and every backlinks page, but a page for which
    `unchanged(page, digest of its inputs)` is true: after one edit, a few pages of 10,000 are
    rendered. The digest holds everything the page's bytes are made of (the template, the render
    code, and the values the template reads), so a page kept is the page a render would give.

    `moved`, when given, names the notes whose backlinks page may show something new since the
    build whose page digests `last` holds (compiler.pipeline.note_pages says which): every other
    backlinks page takes its digest from `last` instead of digesting its inputs again."""
    by_path = {n.path: n for n in view.notes}
    incoming: dict[str, list[ResolvedLink]] = defaultdict(list)
    outgoing: dict[str, list[ResolvedLink]] = defaultdict(list)
    for link in view.links:
        outgoing[link.source].append(link)
        if link.status != "broken" and link.target != link.source:
            incoming[link.target].append(link)
    result = NotePages({}, {}, [])

    def page(name: str, template: str, inputs: Callable[[], Any], render: Callable[[], str], known: str | None = None
             ) -> None:
        digest = known or page_digest(keys[template], name, inputs())
        result.digests[name] = digest
        if unchanged(name, digest):
            result.kept.append(name)
        else:
            result.pages[name] = render()

    keys = {name: template_key(env, name) for name in NOTE_TEMPLATES}
    folders = _top_folders(view) if view.catalog_split is not None and len(view.notes) > view.catalog_split else None
    page("catalog.md", "catalog.md.j2", lambda: _catalog_inputs(view, out, folders),
         lambda: env.get_template("catalog.md.j2").render(**_catalog(view, out, folders)))
    for top, members in (folders or {}).items():
        # A folder's page shows its notes' titles, summaries and tags: only an edit can move them
        # while the paths stay (`moved` holds every edited note), so the others keep their digest.
        name = catalog_folder_page(top)
        known = (last.get(name) if moved is not None and last is not None and not any(n.path in moved for n in members)
                 else None)
        page(name, "catalog_folder.md.j2", lambda: (out, top, [(n.path, n.title, n.summary, n.tags) for n in members]),
             lambda: env.get_template("catalog_folder.md.j2").render(**_catalog_folder(top, members, out)), known)
    health = _health(view, incoming, outgoing)
    page("health.md", "health.md.j2", lambda: _health_inputs(health),
         lambda: env.get_template("health.md.j2").render(**health))
    backlinks = env.get_template("backlinks.md.j2")
    for note in sorted(view.notes, key=lambda n: n.path):
        name = backlinks_page(note.path)
        known = last.get(name) if moved is not None and last is not None and note.path not in moved else None
        if known is not None and unchanged(name, known):  # most pages after an edit: nothing is built for them
            result.digests[name] = known
            result.kept.append(name)
            continue
        context = _backlinks_context(note, incoming, outgoing, by_path, view.neighbours)
        page(name, "backlinks.md.j2", lambda: _backlinks_inputs(context, by_path),
             lambda: backlinks.render(**context, by_path=by_path), known)
    return result


def _backlinks_context(note: Note, incoming: Mapping[str, list[ResolvedLink]],
                       outgoing: Mapping[str, list[ResolvedLink]], by_path: Mapping[str, Note],
                       neighbours: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, Any]:
    """Returns what the backlinks page of `note` shows (but `by_path`, which every page shares)."""
    into, out_of = incoming.get(note.path, []), outgoing.get(note.path, [])
    linked = {l.source for l in into} | {l.target for l in out_of}
    related = [(by_path[p], c) for p, c in neighbours.get(note.path, ()) if p not in linked and p in by_path]
    return {"note": note, "incoming": [(by_path[link.source], link, n) for link, n in places(into)],
            "sources": len({l.source for l in into}), "outgoing": places(out_of), "related": related}


def note_pages_key(env: jinja2.Environment) -> str:
    """Returns a digest of what turns every note page's inputs into its bytes (`template_key` of each
    template): while it holds, a page whose inputs did not move has the digest it had."""
    return hashlib.sha256(repr([template_key(env, name) for name in NOTE_TEMPLATES]).encode("utf-8")).hexdigest()


def template_key(env: jinja2.Environment, name: str) -> str:
    """Returns a digest of what turns a page's inputs into its bytes: the template's source as `env`
    finds it (a vault's override or the bundled one), the code of this module (filters, globals,
    the page contexts), the output folder and the Jinja version."""
    assert env.loader is not None
    source = env.loader.get_source(env, name)[0]
    digest = hashlib.sha256(_RENDER_CODE)
    digest.update(repr((source, env.globals.get("out"), jinja2.__version__)).encode("utf-8"))
    return digest.hexdigest()


def page_digest(key: str, page: str, inputs: Any) -> str:
    """Returns a digest of a page's inputs (plain values and frozen records, whose repr is stable)."""
    return hashlib.sha256(repr((key, page, inputs)).encode("utf-8")).hexdigest()


def _note_shown(note: Note) -> tuple[str, str, tuple[str, ...]]:
    """What a page shows of a note it mentions: a link to its page, its title (and aliases)."""
    return note.path, note.title, note.aliases


def _backlinks_inputs(context: Mapping[str, Any], by_path: Mapping[str, Note]) -> tuple[Any, ...]:
    """Returns what a backlinks page is made of: the note as the page shows it, each incoming and
    outgoing link (with the note it resolves to, when it is one) and the related notes."""
    note = context["note"]
    return (_note_shown(note), context["sources"],
            [(_note_shown(source), _link_shown(link), n) for source, link, n in context["incoming"]],
            [(_link_shown(link), n, _note_shown(by_path[link.target]) if link.target in by_path else None)
             for link, n in context["outgoing"]],
            [(_note_shown(other), cosine) for other, cosine in context["related"]])


def _link_shown(link: ResolvedLink) -> tuple[Any, ...]:
    """A link's every field, as a tuple: a dataclass's repr costs ten times as much."""
    written = link.link
    return (link.source, link.target, link.status, link.candidates, written.target, written.line, written.kind,
            written.heading, written.block, written.alias)


def _catalog_inputs(view: VaultView, out: str, folders: Mapping[str, list[Note]] | None) -> tuple[Any, ...]:
    if folders is None:
        return out, list(view.projects), [(n.path, n.title, n.summary, n.tags) for n in view.notes]
    return out, list(view.projects), [(top, len(members)) for top, members in folders.items()], _tag_counts(view)


ROOT_FOLDER = "(root)"  # the notes outside every folder, as the catalog's chart and pages name them


def catalog_folder_page(top: str) -> str:
    """Returns the page (inside the output folder) that lists the notes under top folder `top` of a
    split catalog; the notes outside every folder get their own name, no folder's."""
    return "catalog/root.md" if top == ROOT_FOLDER else f"catalog/folders/{bounded_name(top, '.md', top)}"


def _top_folders(view: VaultView) -> dict[str, list[Note]]:
    """Returns {top folder: its notes, by path ignoring case}, the folders sorted."""
    found: dict[str, list[Note]] = defaultdict(list)
    for note in sorted(view.notes, key=lambda n: n.path.lower()):
        found[_top(note.path)].append(note)
    return dict(sorted(found.items()))


def _top(path: str) -> str:
    return path.split("/")[0] if "/" in path else ROOT_FOLDER


def _tag_counts(view: VaultView) -> list[tuple[str, int]]:
    return sorted(Counter(tag for note in view.notes for tag in note.tags).items())


def _health_inputs(health: Mapping[str, Any]) -> tuple[Any, ...]:
    """The health page's context, its notes as the page shows them (it never reads their text), its
    links and missing targets as tuples of their fields: at 100,000 notes the dataclasses' reprs of
    21,000 broken links were most of the page's digest."""
    shown = {"notes": _note_shown, "orphans": _note_shown, "broken": _link_shown, "ambiguous": _link_shown,
             "notes_wanted": _missing_shown, "files_wanted": _missing_shown}
    return tuple((name, [shown[name](v) for v in value] if name in shown else value)
                 for name, value in sorted(health.items()))


def _missing_shown(missing: Missing) -> tuple[Any, ...]:
    return missing.target, missing.kind, missing.links, missing.sources


def places(links: Sequence[ResolvedLink]) -> list[tuple[ResolvedLink, int]]:
    """Returns one (link, how many) per place: a line holding the same link three times is one row."""
    if not links:
        return []
    counts: dict[tuple, int] = {}
    first: dict[tuple, ResolvedLink] = {}
    for link in links:
        key = (link.source, link.target, link.link.line, link.link.kind, link.link.heading, link.link.block,
               link.link.target if link.status == "broken" else "")
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, link)
    return [(link, counts[key]) for key, link in first.items()]


def _catalog(view: VaultView, out: str, split: Mapping[str, list[Note]] | None) -> dict[str, Any]:
    """The catalog page's context: every note by folder and by tag, or, when the catalog is `split`
    by top folder, a link to each folder's page and the tags' counts."""
    top = Counter(_top(note.path) for note in view.notes)
    context = {"notes": view.notes, "out": out, "top_folders": sorted(top.items()), "projects": view.projects}
    if split is not None:
        pages = [(name, catalog_folder_page(name), len(members)) for name, members in split.items()]
        return {**context, "split": True, "folder_pages": pages, "tag_counts": _tag_counts(view)}
    folders: dict[str, list[Note]] = defaultdict(list)
    tags: dict[str, list[Note]] = defaultdict(list)
    for note in sorted(view.notes, key=lambda n: n.path.lower()):
        folders[posixpath.dirname(note.path) or "/"].append(note)
        for tag in note.tags:
            tags[tag].append(note)
    return {**context, "split": False, "folders": sorted(folders.items()), "tags": sorted(tags.items())}


def _catalog_folder(top: str, members: Sequence[Note], out: str) -> dict[str, Any]:
    """A split catalog's page of one top folder: its notes by folder (`members` sorted as the catalog sorts)."""
    folders: dict[str, list[Note]] = defaultdict(list)
    for note in members:
        folders[posixpath.dirname(note.path) or "/"].append(note)
    return {"top": top, "notes": members, "folders": sorted(folders.items()), "out": out}


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
    lines: dict[tuple[str, str], set[int]] = defaultdict(set)  # one pass: a scan per row was quadratic
    for l in broken:
        lines[(l.source, l.link.target)].add(l.link.line)
    by_note = sorted(lines, key=lambda st: (st[1].lower(), st[0]))
    broken_rows = [(source, target, sorted(lines[(source, target)])) for source, target in by_note]
    return {"notes": view.notes, "broken": broken, "ambiguous": ambiguous, "orphans": orphans,
            "frontmatter": frontmatter, "other": other, "notes_wanted": notes_wanted, "files_wanted": files_wanted,
            "outcomes": outcomes, "broken_rows": broken_rows, "lint": view.lint}


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
    # Templater runs "<%" wherever it is in a file's text: an alias keeps it apart ("< %"), shown alike
    shown = _UNSAFE_ALIAS.sub(" ", text).replace("<%", "< %").strip()
    if _UNLINKABLE.search(target):
        return f"[{inert(shown or posixpath.basename(target))}]({quote(path)})"
    return f"[[{target}|{shown}]]" if shown and shown != target else f"[[{target}]]"


def yaml_value(value: Any) -> str:
    """Returns a YAML scalar for frontmatter: JSON strings are valid YAML and escape everything
    (and "<%" is written "\\u003c%", the same string to YAML, no Templater command to the raw text)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True).replace("<%", "\\u003c%")


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
