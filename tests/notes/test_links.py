"""Obsidian-style link resolution and backlinks."""

from __future__ import annotations

import unicodedata

from compiler.core.errors import BuildWarning
from compiler.notes.links import backlinks, resolve_links
from compiler.notes.parse import parse_note
from compiler.notes.records import Link, Note, ResolvedLink


def note(path: str, *links: Link) -> Note:
    return Note(path=path, sha256="0" * 64, title=path, links=links)


def wiki(target: str, line: int = 1, kind: str = "wikilink") -> Link:
    return Link(target, line, kind)


def resolve_one(source: str, target: str, paths: list[str], attachments: tuple[str, ...] = ()):
    """Returns the single ResolvedLink of `[[target]]` written in `source`."""
    notes = [note(p, wiki(target)) if p == source else note(p) for p in paths]
    if source not in paths:
        notes.append(note(source, wiki(target)))
    resolved, _ = resolve_links(notes, attachments)
    (only,) = resolved
    return only


# --- resolution order ----------------------------------------------------------------------


def test_exact_vault_path_beats_same_folder_and_shortest():
    paths = ["Topic.md", "a/Topic.md", "b/c/Topic.md"]
    assert resolve_one("a/src.md", "b/c/Topic", paths).target == "b/c/Topic.md"
    assert resolve_one("a/src.md", "Topic", paths).target == "Topic.md"


def test_same_folder_beats_shortest_path():
    paths = ["x/Topic.md", "deep/er/Topic.md", "deep/er/src.md"]
    assert resolve_one("deep/er/src.md", "Topic", paths).target == "deep/er/Topic.md"


def test_relative_folder_path_is_tried_before_the_shortest_suffix():
    paths = ["proj/sub/Plan.md", "other/sub/Plan.md"]
    found = resolve_one("proj/readme.md", "sub/Plan", paths)
    assert (found.target, found.status) == ("proj/sub/Plan.md", "ok")


def test_shortest_path_wins_by_segments_then_length():
    paths = ["a/b/Topic.md", "zz/Topic.md", "y/x/w/Topic.md"]
    assert resolve_one("src.md", "Topic", paths).target == "zz/Topic.md"
    paths = ["long-folder/Topic.md", "ab/Topic.md"]
    found = resolve_one("src.md", "Topic", paths)
    assert (found.target, found.status, found.candidates) == ("ab/Topic.md", "ok", ())


def test_suffix_match_respects_folder_boundaries():
    paths = ["xsub/Plan.md", "a/sub/Plan.md"]
    assert resolve_one("src.md", "sub/Plan", paths).target == "a/sub/Plan.md"


def test_tie_is_ambiguous_lists_candidates_and_picks_the_first():
    notes = [note("src.md", wiki("Topic", 7)), note("b/Topic.md"), note("a/Topic.md")]
    resolved, warnings = resolve_links(notes)
    tied = ("a/Topic.md", "b/Topic.md")
    assert resolved == [ResolvedLink("src.md", "a/Topic.md", wiki("Topic", 7), "ambiguous", tied)]
    assert [(w.file, w.line, w.kind) for w in warnings] == [("src.md", 7, "ambiguous-link")]
    assert "a/Topic.md, b/Topic.md" in warnings[0].message


def test_matching_ignores_case_and_unicode_form():
    assert resolve_one("src.md", "my NOTE", ["Folder/My Note.md"]).target == "Folder/My Note.md"
    decomposed = unicodedata.normalize("NFD", "Diseño.md")
    assert resolve_one("src.md", "diseño", [decomposed]).target == decomposed


def test_case_variants_prefer_the_exact_spelling():
    paths = ["Note.md", "note.md"]
    assert resolve_one("src.md", "note", paths).target == "note.md"
    assert resolve_one("src.md", "NOTE", paths).status == "ambiguous"


def test_qmd_is_reached_only_with_its_extension():
    paths = ["analysis.qmd"]
    assert resolve_one("src.md", "analysis", paths).status == "broken"
    assert resolve_one("src.md", "Analysis.qmd", paths).target == "analysis.qmd"


def test_dotted_note_name_is_not_an_extension():
    assert resolve_one("src.md", "Meeting 2024.01.15", ["j/Meeting 2024.01.15.md"]).status == "ok"


# --- markdown links and attachments --------------------------------------------------------


def parsed(path: str, text: str) -> Note:
    result, _ = parse_note(path, text.encode())
    assert result is not None
    return result


def test_markdown_links_with_spaces_dot_segments_and_escapes():
    notes = [
        parsed("a/b/src.md", "[x](../My%20Note.md) [y](./Here.md#Part)\n[z](../../../Out.md)\n"),
        note("a/My Note.md"),
        note("a/b/Here.md"),
        note("Out.md"),
    ]
    resolved, warnings = resolve_links(notes)
    assert {r.link.target: (r.target, r.status) for r in resolved} == {
        "../My Note.md": ("a/My Note.md", "ok"),
        "./Here.md": ("a/b/Here.md", "ok"),
        "../../../Out.md": ("", "broken"),  # climbs out of the vault; Out.md is not reached
    }
    assert [w.kind for w in warnings] == ["broken-link"]


def test_dot_relative_paths_do_not_fall_back_to_shortest_match():
    assert resolve_one("a/src.md", "./Topic", ["b/Topic.md"]).status == "broken"


def test_vault_absolute_markdown_link():
    paths = ["top/Page.md", "deep/top/Page.md"]
    assert resolve_one("deep/src.md", "/top/Page.md", paths).target == "top/Page.md"


def test_embeds_resolve_to_attachments():
    source = parsed("notes/src.md", "![[diagram.png]] ![[Report.PDF]] ![alt](../img/pic%201.jpg)\n")
    attachments = ("assets/diagram.png", "docs/report.pdf", "img/pic 1.jpg")
    resolved, warnings = resolve_links([source], attachments)
    assert {r.link.target: (r.link.kind, r.target) for r in resolved} == {
        "diagram.png": ("embed", "assets/diagram.png"),
        "Report.PDF": ("embed", "docs/report.pdf"),
        "../img/pic 1.jpg": ("embed", "img/pic 1.jpg"),
    }
    assert warnings == []


def test_embed_of_unknown_extension_in_the_vault_is_used_as_is():
    found = resolve_one("src.md", "data.xyz", ["n.md"], attachments=("files/data.xyz",))
    assert found.target == "files/data.xyz"


# --- broken links, skipping, order ---------------------------------------------------------


def test_broken_link_has_empty_target_and_a_clear_warning():
    resolved, warnings = resolve_links([note("n/src.md", wiki("Foo", 3))])
    assert resolved == [ResolvedLink("n/src.md", "", wiki("Foo", 3), "broken")]
    assert warnings == [
        BuildWarning("n/src.md", 3, 'broken link [[Foo]]: no note named "Foo"', "broken-link")
    ]


def test_same_note_links_are_skipped():
    resolved, warnings = resolve_links([note("src.md", Link("", 1, "wikilink", heading="Here"))])
    assert resolved == [] and warnings == []


def test_order_is_deterministic_whatever_the_input_order():
    a = note("a.md", wiki("c", 5), wiki("b", 2), wiki("missing", 2))
    b = note("b.md", wiki("a", 1))
    c = note("c.md")
    first = resolve_links([a, b, c])
    assert first == resolve_links([c, b, a])
    assert [(r.source, r.link.line, r.link.target) for r in first[0]] == [
        ("a.md", 2, "b"),
        ("a.md", 2, "missing"),
        ("a.md", 5, "c"),
        ("b.md", 1, "a"),
    ]


# --- backlinks -----------------------------------------------------------------------------


def test_backlinks_group_by_target_without_broken_or_self_links():
    notes = [
        note("z.md", wiki("Hub", 4)),
        note("a.md", wiki("Hub", 9), wiki("Hub", 2), wiki("Nowhere", 1), wiki("a", 3)),
        note("Hub.md", wiki("Hub", 1), wiki("a", 1)),
    ]
    resolved, _ = resolve_links(notes)
    index = backlinks(resolved)
    assert list(index) == ["Hub.md", "a.md"]
    hub = [(r.source, r.link.line) for r in index["Hub.md"]]
    assert hub == [("a.md", 2), ("a.md", 9), ("z.md", 4)]
    assert [r.source for r in index["a.md"]] == ["Hub.md"]


def test_backlinks_include_ambiguous_links_at_their_pick():
    resolved, _ = resolve_links([note("src.md", wiki("T")), note("a/T.md"), note("b/T.md")])
    assert [r.source for r in backlinks(resolved)["a/T.md"]] == ["src.md"]
