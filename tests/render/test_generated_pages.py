"""Generated pages read back as Obsidian reads them (issue 14): no tag a note did not have, every
wikilink resolves, notes linked from few generated pages, ISO dates, grouped broken links, one
backlink row per place, safe text from notes, a Bases view of memories.

The committed example pages are checked as they are (the golden test keeps them equal to a fresh
compile); hostile notes are rendered here with the real templates.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from compiler.core.files import is_generated, write_pages
from compiler.notes.links import resolve_links
from compiler.notes.parse import parse_note
from compiler.notes.search import unmark_links
from compiler.render.notes import VaultView, backlinks_page, render_note_pages, template_environment
from tests.conftest import EXAMPLE_VAULT
from tests.render.pages import bad_dates, page_links, split_page, tags

OUT = EXAMPLE_VAULT / "_engram"
NOTE_SUFFIXES = (".md", ".qmd")


def example_pages() -> dict[str, str]:
    return {p.relative_to(OUT).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(OUT.rglob("*")) if p.is_file()}


def example_notes() -> tuple[dict[str, str], list[str]]:
    notes, attachments = {}, []
    for path in sorted(EXAMPLE_VAULT.rglob("*")):
        relative = path.relative_to(EXAMPLE_VAULT).as_posix()
        if not path.is_file() or relative.startswith(("_engram/", ".", "Templates/")):
            continue
        if path.suffix in NOTE_SUFFIXES:
            notes[relative] = path.read_text(encoding="utf-8")
        else:
            attachments.append(relative)
    return notes, attachments


def render(files: dict[str, str]) -> tuple[dict[str, str], list]:
    """Returns the note pages rendered from `files` ({path: text}) and the parse warnings."""
    notes, warnings = [], []
    for path, text in sorted(files.items()):
        note, found = parse_note(path, text.encode())
        notes.append(note)
        warnings += found
    links, link_warnings = resolve_links(notes)
    view = VaultView(notes, links, {}, warnings + link_warnings)
    return render_note_pages(view, template_environment(None), "_engram"), warnings


HOSTILE = {
    "Decisions/ADR 1.md": "# ADR 1 #decision\n\nWe use `[[UID]]` and `#not-a-tag` in code; see [[Missing Page]] "
                          "and $5 == *bold* <b>x</b> %%hidden%% ^block | pipe.\n\n#decision #Decision\n",
    "Notes/Tips #1 #rule.md": "---\ntags: [howto]\naliases: ['[[Alias]] #alias']\n---\nSee [[ADR 1#Common incidents]], "
                              "[[ADR 1#Common incidents]] and [[ADR 1#^abc]] on one line.\n",
    "Notes/Three.md": "[[Configuración]] [[Configuración]] [[configuración]] ![[diagram.png]]\n\n[[Configuración]]\n",
    "Notes/Four.md": "Text [[Configuración]] and [[Otra]].\n",
}


# --- 1. tags ------------------------------------------------------------------------------------


def test_example_pages_create_no_tags():
    assert tags(example_pages()) == {}


def test_hostile_notes_put_no_tag_in_the_pages():
    pages, _ = render(HOSTILE)
    assert tags(pages) == {}
    backlinks = pages["backlinks/Decisions/ADR 1.links.md"]
    assert "heading “Common incidents”" in backlinks and " · #Common" not in backlinks


# --- 2 and 3. links -----------------------------------------------------------------------------


def test_every_link_of_the_example_pages_resolves():
    notes, attachments = example_notes()
    links = page_links(example_pages(), notes, attachments)
    assert len(links) > 200
    assert [(l.source, l.link.target) for l in links if l.status != "ok"] == []


def test_summaries_and_titles_from_notes_stay_inert():
    pages, _ = render(HOSTILE)
    links = page_links(pages, HOSTILE, [])
    # the catalog's summary shows `[[UID]]` from a code span: it must not become a live link
    assert not [l for l in links if l.status != "ok"]
    catalog = pages["catalog.md"]
    assert "\\[\\[UID\\]\\]" in catalog and "\\$5" in catalog


def test_notes_are_linked_from_their_catalog_entry_and_backlinks_page_only():
    notes, attachments = example_notes()
    links = page_links(example_pages(), notes, attachments)
    linking = Counter()
    for page, target in {(l.source, l.target) for l in links if l.target in notes}:
        linking[target] += 1
    problem = {l.source for l in page_links(example_pages(), notes, attachments) if l.source == "_engram/health.md"}
    assert linking["Engineering/Incident Runbook.md"] == 3  # catalog, its backlinks page, health (a broken link)
    assert max(linking.values()) <= 3 and not problem - {"_engram/health.md"}
    assert Counter(linking.values())[2] > 30  # most notes: the catalog and their own backlinks page


# --- 4. health and backlinks --------------------------------------------------------------------


def test_health_groups_broken_links_by_target_and_kind():
    pages, _ = render(HOSTILE)
    health = pages["health.md"]
    front = yaml.safe_load(split_page(health)[0])
    assert (front["broken_links"], front["missing_notes"], front["missing_files"]) == (9, 4, 1)
    wanted = health.split("## Create these pages (4)")[1].split("##")[0]
    rows = [line for line in wanted.splitlines() if line.startswith("| `")]
    # case variants want one page; most-wanted first; the image is listed apart
    assert rows[0].startswith("| `Configuración` | 5 | ") and "Notes/Four" in rows[0] and "Notes/Three" in rows[0]
    assert "diagram.png" not in wanted and "| `diagram.png` | 1 |" in health.split("## Missing files")[1]
    chart = health.split("```mermaid")[1].split("```")[0]
    assert chart.count(" : ") >= 3  # resolved, missing note, missing file: the chart has slices that vary


def test_backlinks_list_each_place_once_with_a_count():
    pages, _ = render(HOSTILE)
    adr = pages["backlinks/Decisions/ADR 1.links.md"]
    rows = [line for line in adr.split("## Linked from")[1].split("##")[0].splitlines() if line.startswith("- ")]
    assert len(rows) == 2 and "· 2 links" in rows[0] and "block \\^abc" in rows[1]
    three = pages["backlinks/Notes/Three.links.md"]
    assert "line 1: `Configuración` · **broken** · 2 links" in three


# --- 7. table pipes -----------------------------------------------------------------------------


def test_an_unescaped_pipe_in_a_table_keeps_the_link_and_warns():
    text = ("| Página | Nota |\n| --- | --- |\n| [[Propiedades|propiedades]] | x |\n| [[Ok\\|ok]] | `[[a|b]]` |\n\n"
            "Outside a table [[Plain|alias]] is fine.\n")
    note, warnings = parse_note("n.md", text.encode())
    assert [(l.target, l.alias, l.line) for l in note.links] == [
        ("Propiedades", "propiedades", 3), ("Ok", "ok", 4), ("Plain", "alias", 6)]
    assert [(w.line, w.kind) for w in warnings] == [(3, "table-link")]
    assert "[[Propiedades\\|propiedades]]" in warnings[0].message


# --- 8. dates -----------------------------------------------------------------------------------


def test_every_frontmatter_date_is_iso_8601():
    pages = example_pages()
    assert bad_dates({"x.md": '---\nat: "2026-11-30 12:00:00"\n---\n'}) == [("x.md", 'at: "2026-11-30 12:00:00"')]
    memory = [p for p in pages if p.startswith("memory/") and p.endswith(".md") and p != "memory/archive.md"]
    assert memory and bad_dates(pages) == []
    front = yaml.safe_load(split_page(pages[memory[0]])[0])
    assert "T" in str(front["created_at"]).replace(" ", "T") and ":" in split_page(pages[memory[0]])[0]


# --- 13. Bases ----------------------------------------------------------------------------------


def test_memory_pages_have_typed_properties_and_a_bases_view():
    pages = example_pages()
    base = yaml.safe_load(pages["memory/memories.base"])
    columns = {c for view in base["views"] for c in view["order"]} - {"file.name"}
    memory = [yaml.safe_load(split_page(t)[0]) for p, t in pages.items()
              if p.startswith("memory/") and p.endswith(".md") and p != "memory/archive.md"]
    assert memory and all(isinstance(m["strength"], float) and isinstance(m["importance"], float)
                          and isinstance(m["recall_count"], int) and isinstance(m["sources"], list) for m in memory)
    assert all(type(m["created_at"]).__name__ == "datetime" for m in memory)  # YAML reads ISO as a timestamp
    present = set().union(*memory) | {"last_recalled_at"}  # written once a memory is recalled; none is here
    assert columns <= present, columns - present
    assert {v["type"] for v in base["views"]} == {"table"} and base["filters"]["and"][1] == 'kind == "memory"'


def test_a_generated_base_file_is_ours_to_rewrite_and_delete(tmp_path: Path):
    vault = tmp_path / "vault"
    vault.mkdir()
    write_pages(vault, "_engram", {"memory/memories.base": "# generated_by: engram\nviews: []\n"})
    assert is_generated(vault / "_engram/memory/memories.base")
    person = vault / "_engram/mine.base"
    person.write_text("views: []\n")
    result = write_pages(vault, "_engram", {"mine.base": "# generated_by: engram\n",
                                            "memory/memories.base": "# generated_by: engram\nviews: []\n"})
    assert not is_generated(person) and result.warnings[0].kind == "collision"
    assert write_pages(vault, "_engram", {}).deleted == ["_engram/memory/memories.base"] and person.exists()


# --- search snippets (item 2) -------------------------------------------------------------------


@pytest.mark.parametrize("snippet, expected", [
    ("see [[**Canvas**|**canvas**]] and **canvas**", "see [[Canvas|canvas]] and **canvas**"),
    ("…Canvas**|**canvas**]] then **canvas**", "…Canvas|canvas]] then **canvas**"),
    ("no links, **match**", "no links, **match**"),
])
def test_search_snippets_keep_wikilinks_whole(snippet, expected):
    assert unmark_links(snippet) == expected


@pytest.mark.parametrize("note", ["a.md", "x/y/b.c.md", "x/.md", ".md", "a.qmd", "f/a b.MD", "x//y.md", "x/y.md.md",
                                  "é/" + "ñ" * 200 + ".md", "a/..md", "/a.md", "a/b/.c.md", "..md", "a/b..md"])
def test_backlinks_page_shortcut_names_pages_as_posixpath_does(note):
    import posixpath

    from compiler.core.files import bounded_name

    stem, ext = posixpath.splitext(note)
    folder, name = posixpath.split(f"{stem}{'' if ext == '.md' else ext}")
    assert backlinks_page(note) == posixpath.join("backlinks", folder, bounded_name(name, ".links.md", note))
