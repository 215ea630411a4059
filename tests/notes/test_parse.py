"""Stage 2, parse: Obsidian constructs, frontmatter, encodings, limits and sections."""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest

from compiler.core.errors import BuildWarning
from compiler.notes.markdown_rules import markdown_parser, strip_comments
from compiler.notes.parse import parse_note
from compiler.notes.records import Heading, Link, Note


def parse(text: str, path: str = "notes/n.md", **limits: int) -> Note:
    """Returns the parsed note of dedented `text`, asserting it parses without warnings."""
    note, warnings = parse_note(path, textwrap.dedent(text).lstrip("\n").encode("utf-8"), **limits)
    assert warnings == []
    assert note is not None
    return note


def targets(note: Note) -> list[str]:
    return [link.target for link in note.links]


# --- wikilinks and embeds ------------------------------------------------------------------


def test_every_wikilink_form_becomes_a_link_with_its_parts():
    note = parse(
        """
        See [[Plain]] and [[Folder/Other|shown text]].
        Jump to [[Guide#Setup steps]] or [[Guide#^abc123]].
        Local [[#Only here]] is not a link.
        ![[Diagram]] ![[photos/cat.png|300]]
        """
    )
    assert note.links == (
        Link("Plain", 1, "wikilink"),
        Link("Folder/Other", 1, "wikilink", alias="shown text"),
        Link("Guide", 2, "wikilink", heading="Setup steps"),
        Link("Guide", 2, "wikilink", block="abc123"),
        Link("Diagram", 4, "embed"),
        Link("photos/cat.png", 4, "embed", alias="300"),
    )


def test_wikilink_target_whitespace_is_stripped_and_empty_links_are_text():
    note = parse("a [[  Spaced Note  |  nick ]] b [[]] c [[ ]]\n")
    assert note.links == (Link("Spaced Note", 1, "wikilink", alias="nick"),)


def test_wikilink_with_escaped_pipe_outside_a_table():
    assert parse("[[Target\\|label]]\n").links == (Link("Target", 1, "wikilink", alias="label"),)


def test_wikilink_with_escaped_pipe_inside_a_table():
    note = parse(
        """
        | a | b |
        |---|---|
        | [[Target\\|label]] | x |
        """
    )
    assert note.links == (Link("Target", 3, "wikilink", alias="label"),)


def test_links_in_code_html_and_comments_do_not_count():
    note = parse(
        """
        Inline `[[InCode]]` and <!-- [[InInlineComment]] --> here.

        ```
        [[InFence]] #fencetag
        ```

            [[InIndentedCode]]

        <!--
        [[InHtmlComment]]
        -->

        <div>
        [[InHtmlBlock]]
        </div>

        Text %% [[InObsidianComment]] #hidden %% after.
        %%
        [[InMultiLineComment]]
        %%
        [[Counted]] #kept
        """
    )
    assert note.links == (Link("Counted", 21, "wikilink"),)
    assert note.tags == ("kept",)


def test_comment_markers_inside_code_are_literal():
    note = parse(
        """
        Use `%%` for modulo in R, see [[Visible]].

        ```r
        x %% 2
        ```

        [[AlsoVisible]]
        """
    )
    assert targets(note) == ["Visible", "AlsoVisible"]
    assert "x %% 2" in note.sections[0].text


def test_strip_comments_keeps_every_newline():
    text = "a %% one\ntwo\nthree %% b\nc %%unclosed\nd\n"
    stripped = strip_comments(text)
    assert stripped.count("\n") == text.count("\n")
    assert stripped == "a \n\n b\nc \n\n"


def test_link_lines_count_soft_breaks_inside_a_paragraph():
    note = parse(
        """
        first line
        second [[Two]]
        third [link](three.md) and ![img](four.png)
        """
    )
    assert [(link.target, link.line) for link in note.links] == [
        ("Two", 2),
        ("three.md", 3),
        ("four.png", 3),
    ]


# --- markdown links ------------------------------------------------------------------------


def test_relative_markdown_links_are_decoded_and_external_ones_skipped():
    note = parse(
        """
        [a](My%20Note.md) [b](../up/There.md#Some%20Part) [c](Other.md#^blk)
        [web](https://example.com/x.md) [mail](mailto:x@example.com)
        [app](obsidian://open?vault=v) [anchor](#local) [angle](<with space.md>)
        ![pic](images/pic%201.png) ![remote](https://example.com/r.png)
        """
    )
    assert note.links == (
        Link("My Note.md", 1, "markdown", alias="a"),
        Link("../up/There.md", 1, "markdown", heading="Some Part", alias="b"),
        Link("Other.md", 1, "markdown", block="blk", alias="c"),
        Link("with space.md", 3, "markdown", alias="angle"),
        Link("images/pic 1.png", 4, "embed", alias="pic"),
    )


def test_non_ascii_markdown_link_round_trips():
    note = parse("[x](diseño/señal.md)\n")
    assert targets(note) == ["diseño/señal.md"]


# --- tags ----------------------------------------------------------------------------------


def test_inline_tags_follow_obsidian_rules():
    note = parse(
        """
        #start and #Nested/Tag plus #tag-with_dash, #diseño.
        Not tags: #1984 a#b &#123; http://x.org/#frag (#paren) ##double `#code`
        But #y1984 is.
        # Heading is not a tag
        """
    )
    assert note.tags == ("diseño", "nested/tag", "start", "tag-with_dash", "y1984")


def test_frontmatter_tags_list_and_string_forms_merge_with_inline_tags():
    listed = parse("---\ntags: [Project, '#Area/Sub', 2024]\n---\nbody #inline #project\n")
    assert listed.tags == ("area/sub", "inline", "project")
    spaced = parse('---\ntags: "alpha  #beta"\n---\n')  # unquoted, " #beta" is a YAML comment
    assert spaced.tags == ("alpha", "beta")
    commas = parse("---\ntag: one, two,three\n---\n")
    assert commas.tags == ("one", "three", "two")


# --- aliases and title ---------------------------------------------------------------------


def test_aliases_from_list_string_and_alias_key():
    listed = parse("---\naliases: [' First ', Second, '', First, 'Last, Name']\n---\n")
    assert listed.aliases == ("First", "Second", "Last, Name")
    single = parse("---\nalias: One, Two ,\n---\n")
    assert single.aliases == ("One", "Two")


def test_title_prefers_frontmatter_then_first_h1_then_file_name():
    assert parse("---\ntitle: From YAML\n---\n# From H1\n").title == "From YAML"
    assert parse("## Sub first\n\n# From *H1* [[Link|shown]]\n").title == "From H1 shown"
    assert parse("## Only level two\n", path="dir/My File.v2.qmd").title == "My File.v2"
    assert parse("---\ntitle: 1984\n---\n").title == "1984"


def test_hostile_title_is_only_text():
    note = parse("---\ntitle: ../../etc/passwd\n---\nbody\n", path="safe/place.md")
    assert note.title == "../../etc/passwd"
    assert note.path == "safe/place.md"


# --- frontmatter ---------------------------------------------------------------------------


def test_broken_yaml_warns_with_the_file_line_and_still_indexes_the_body():
    raw = b"---\ntitle: fine\ntags: [a, b\nnext: x\n---\n# Body\n[[StillFound]]\n"
    note, warnings = parse_note("n.md", raw)
    assert note is not None
    assert [(w.kind, w.line) for w in warnings] == [("frontmatter", 3)]  # where the unclosed bracket opened
    assert not note.frontmatter_valid and note.frontmatter == {}
    assert note.links == (Link("StillFound", 7, "wikilink"),)
    assert note.headings == (Heading("Body", 1, 6),)


def test_yaml_error_on_the_first_yaml_line_points_at_line_two():
    note, warnings = parse_note("n.md", b"---\nkey: a: b\n---\ntext\n")
    assert [(w.kind, w.line) for w in warnings] == [("frontmatter", 2)]
    assert note is not None and note.sections[0].line == 4


def test_yaml_error_at_the_end_points_where_the_unclosed_quote_opened():
    raw = b'---\ndate: 2026-10-09\ntitle: "Sprint retro\ntags: [a, b]\n---\nbody\n'
    note, warnings = parse_note("n.md", raw)
    assert [(w.kind, w.line) for w in warnings] == [("frontmatter", 3)]


def test_unclosed_frontmatter_is_indexed_as_text():
    note, warnings = parse_note("n.md", b"---\ntitle: x\n\n[[Link]]\n")
    assert [w.kind for w in warnings] == ["frontmatter"]
    assert note is not None and not note.frontmatter_valid
    assert note.links == (Link("Link", 4, "wikilink"),)


def test_frontmatter_that_is_not_a_mapping_warns():
    for yaml_text in ("- a\n- b", "just a string"):
        note, warnings = parse_note("n.md", f"---\n{yaml_text}\n---\nbody\n".encode())
        assert [w.kind for w in warnings] == ["frontmatter"]
        assert note is not None and note.frontmatter == {} and not note.frontmatter_valid


def test_hostile_yaml_values_warn_instead_of_crashing():
    for yaml_text in (
        "n: " + "1" * 5000,
        "when: !!timestamp 2024-13-45",
        "obj: !!python/object:os.system x",
        "a: " + "[" * 3000 + "]" * 3000,
    ):
        note, warnings = parse_note("n.md", f"---\n{yaml_text}\n---\nbody\n".encode())
        assert [w.kind for w in warnings] == ["frontmatter"], yaml_text[:20]
        assert note is not None and note.frontmatter == {} and note.sections[0].text == "body"


def test_frontmatter_values_become_json_safe():
    note = parse(
        """
        ---
        created: 2024-03-05
        updated: 2024-03-05 10:20:30
        set: !!set {h, c, f, a, e, b, g, d}
        nested: {when: [2024-01-01], n: .nan}
        2023-01-01: dated key
        ---
        """
    )
    assert note.frontmatter == {
        "created": "2024-03-05",
        "updated": "2024-03-05T10:20:30",
        "set": ["a", "b", "c", "d", "e", "f", "g", "h"],  # sorted, not in hash order
        "nested": {"when": ["2024-01-01"], "n": "nan"},
        "2023-01-01": "dated key",
    }
    json.dumps(note.to_dict(), allow_nan=False)
    assert Note.from_dict(json.loads(json.dumps(note.to_dict()))) == note


def test_yaml_alias_bomb_is_refused_not_expanded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    note, warnings = parse_note("n.md", ("---\n" + "\n".join(lines) + "\n---\nbody\n").encode())
    assert [w.kind for w in warnings] == ["frontmatter"]
    assert note is not None and note.frontmatter == {} and note.sections[0].text == "body"


def test_frontmatter_wikilinks_count_as_links():
    note = parse('---\ntitle: t\nup: "[[Parent Note|parent]]"\n---\n[[Body]]\n')
    assert note.links == (
        Link("Parent Note", 3, "wikilink", alias="parent"),
        Link("Body", 5, "wikilink"),
    )


# --- bytes: binary, encoding, BOM, line endings, size --------------------------------------


def test_binary_file_is_skipped():
    assert parse_note("x.md", b"PK\x03\x04\x00\x00rest") == (
        None,
        [BuildWarning("x.md", 0, "binary file, skipped", "binary")],
    )


def test_invalid_utf8_warns_with_the_line_and_still_parses():
    raw = b"# Title\nfine\nbad \xff\xfe byte [[Link]]\n"
    note, warnings = parse_note("x.md", raw)
    assert [(w.kind, w.line) for w in warnings] == [("encoding", 3)]
    assert note is not None and note.links == (Link("Link", 3, "wikilink"),)
    assert "\ufffd" in note.sections[0].text
    assert note.sha256 == hashlib.sha256(raw).hexdigest()


def test_bom_and_crlf_do_not_hide_frontmatter_or_shift_lines():
    raw = b"\xef\xbb\xbf---\r\ntitle: T\r\n---\r\nline\r\n[[L]]\r\n"
    note, warnings = parse_note("x.md", raw)
    assert warnings == [] and note is not None
    assert note.title == "T"
    assert note.links == (Link("L", 5, "wikilink"),)
    assert "\r" not in note.sections[0].text


def test_huge_note_is_truncated_with_a_warning_and_bounded_sections():
    paragraph = ("word " * 150).strip()  # 749 characters
    text = "# Big\n\n" + "".join(f"{paragraph} [[L{i}]]\n\n" for i in range(6500))
    raw = (text + "x" * (5_000_000 - len(text))).encode()  # exactly 5.0 MB
    assert len(raw) == 5_000_000
    note, warnings = parse_note("big.md", raw)
    assert warnings == [
        BuildWarning(
            "big.md",
            0,
            "note is 5.0 MB, over the 1.0 MB limit: only the first 1.0 MB is indexed",
            "size",
        )
    ]
    assert note is not None and note.sha256 == hashlib.sha256(raw).hexdigest()
    assert 1000 < len(note.links) < 1400  # only the first megabyte's links
    assert all(len(section.text) <= 1200 for section in note.sections)
    assert note.sections[-1].text.endswith("]]")  # cut at a line boundary
    assert note.links[-1].line <= raw[:1_000_000].count(b"\n")


def test_size_cut_without_newlines_stays_on_a_character_boundary():
    raw = ("ñ" * 600_000).encode()  # 1.2 MB on one line
    note, warnings = parse_note("x.md", raw)
    assert [w.kind for w in warnings] == ["size"]
    assert note is not None and "\ufffd" not in "".join(s.text for s in note.sections)


# --- headings and sections -----------------------------------------------------------------


def test_headings_atx_and_setext_with_lines():
    note = parse(
        """
        # One #

        Two
        ===

        Three
        -----

        ```
        # not a heading
        ```
        ###### Six
        """
    )
    assert note.headings == (
        Heading("One", 1, 1),
        Heading("Two", 1, 3),
        Heading("Three", 2, 6),
        Heading("Six", 6, 12),
    )


def test_sections_split_at_headings_with_file_lines_after_frontmatter():
    note = parse(
        """
        ---
        title: T
        tags: [x]
        ---
        Intro text.

        # First
        Alpha.

        ## Second

        Beta.
        """
    )
    assert [(s.ordinal, s.heading, s.line, s.text) for s in note.sections] == [
        (0, "", 5, "Intro text."),
        (1, "First", 7, "# First\nAlpha."),
        (2, "Second", 10, "## Second\n\nBeta."),
    ]


def test_long_section_packs_paragraphs_and_keeps_their_lines():
    paragraphs = [("p%d " % i) * 20 for i in range(6)]  # about 60-80 characters each
    body = "# Head\n\n" + "\n\n".join(p.strip() for p in paragraphs) + "\n"
    note = parse("---\na: 1\n---\n" + body, max_section_chars=200)
    sections = note.sections
    assert len(sections) > 1 and all(len(s.text) <= 200 for s in sections)
    assert {s.heading for s in sections} == {"Head"}
    assert sections[0].text.startswith("# Head\n\np0")
    assert [s.ordinal for s in sections] == list(range(len(sections)))
    lines = ("---\na: 1\n---\n" + body).split("\n")
    for section in sections:  # every piece starts on the file line holding its first words
        assert lines[section.line - 1].strip() == section.text.split("\n")[0]


def test_one_long_paragraph_is_cut_at_whitespace():
    words = [f"w{i}" + "x" * (i % 7) for i in range(200)]  # uneven lengths
    text = "\n".join(" ".join(words[i : i + 10]) for i in range(0, 200, 10))  # 20 lines
    note = parse(text + "\n", max_section_chars=100)
    assert len(note.sections) > 5
    assert all(len(s.text) <= 100 for s in note.sections)
    assert [word for s in note.sections for word in s.text.split()] == words  # none broken
    lines = text.split("\n")
    for section in note.sections:
        assert section.text.split()[0] in lines[section.line - 1].split()


def test_unbroken_word_longer_than_the_limit_is_hard_cut():
    note = parse("x" * 250 + "\n", max_section_chars=100)
    assert [len(s.text) for s in note.sections] == [100, 100, 50]


def test_empty_body_has_no_sections_and_blank_ones_are_dropped():
    assert parse("---\ntitle: only meta\n---\n").sections == ()
    assert parse("").sections == ()
    note = parse("%% only a comment %%\n\n# Real\n")
    assert [(s.heading, s.text) for s in note.sections] == [("Real", "# Real")]


# --- quarto --------------------------------------------------------------------------------


def test_qmd_code_cells_are_searchable_text_but_not_links():
    note = parse(
        """
        ---
        title: Analysis
        ---
        Intro links to [[Data]].

        ```{python}
        #| label: fig-x
        print("[[NotALink]] #nottag")
        ```
        """,
        path="analysis.qmd",
    )
    assert targets(note) == ["Data"]
    assert note.tags == ()
    assert "[[NotALink]]" in note.sections[0].text


# --- summary and determinism ---------------------------------------------------------------


def test_summary_skips_headings_code_and_link_lists():
    note = parse(
        """
        # Title

        ```
        code first
        ```

        - [[A]]
        - [[B]]

        ![[banner.png]]

        The **real** intro mentions [[Target|a friend]] and `code`.
        """
    )
    assert note.summary == "The real intro mentions a friend and code."


def test_summary_drops_the_callout_marker():
    assert parse("> [!note]- Heads up\n> read [[This]] first\n").summary == "Heads up read This first"


def test_summary_prefers_description_and_is_cut_on_a_word_boundary():
    assert parse("---\ndescription: '  Short   one. '\n---\nbody\n").summary == "Short one."
    note = parse(" ".join(["lorem"] * 60) + "\n")
    assert note.summary.endswith("lorem…")
    assert len(note.summary) <= 160


def test_parse_is_deterministic():
    raw = b"---\ntags: [b, a]\n---\n# T\n[[X]] #c\n"
    assert parse_note("a.md", raw) == parse_note("a.md", raw)


def test_parser_stamps_lines_on_markdown_links_too():
    tokens = markdown_parser().parse("a\nb [x](y.md)\n")
    link_open = next(t for t in tokens[1].children if t.type == "link_open")
    assert link_open.meta["line"] == 1


def test_a_note_with_nul_bytes_is_indexed_without_them_and_warned_about():
    raw = b"# Title\nline two [[Link]]\nbad\x00byte and\x00another\n"
    note, warnings = parse_note("x.md", raw)
    assert warnings == [BuildWarning("x.md", 3, "2 NUL bytes (first on line 3) removed; the rest is indexed as text",
                                     "nul")]
    assert note is not None and note.title == "Title" and note.links == (Link("Link", 2, "wikilink"),)
    assert "badbyte and" in note.sections[0].text and "\x00" not in note.sections[0].text
    assert note.sha256 == hashlib.sha256(raw).hexdigest()  # of the file as it is


@pytest.mark.parametrize("raw", [
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00" + bytes(range(256)),  # a PNG renamed .md
    b"\x00" * 100,  # nothing but NULs
    b"ab\x01\x02\x03\x00\x04\x05cd" * 50,  # control characters everywhere
])
def test_truly_binary_files_are_still_skipped(raw):
    assert parse_note("x.md", raw) == (None, [BuildWarning("x.md", 0, "binary file, skipped", "binary")])


def test_a_character_cut_by_the_sniff_window_is_not_binary():
    raw = b"\x00" + b"a" * 8190 + "é".encode() + b" more text\n"
    note, warnings = parse_note("x.md", raw)
    assert note is not None and [w.kind for w in warnings] == ["nul"]
