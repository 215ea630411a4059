"""Ingest: a source copied into raw/ byte for byte, described by a sidecar, never changed after."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from compiler.core.errors import InputError
from compiler.wiki import history
from compiler.wiki.source_files import read_source, read_sources
from compiler.wiki.sources import ingest_source

NOW = "2026-03-04 05:06:07"  # the clock the wiki fixtures pin

MARKDOWN = b"# Autovacuum\n\nPostgres vacuums tables when dead tuples pass a threshold.\n"
HTML = b"""<!doctype html><html><head><title>Autovacuum  Tuning</title><script>steal()</script>
<style>p { color: red }</style></head><body>
<h1>Autovacuum</h1><p>Raise <b>autovacuum_max_workers</b> on <a href="https://example.org/pg">busy</a> servers.</p>
<p><a href="javascript:alert(1)">click me</a> <a href=" JaVaScRiPt:alert(2)">or me</a>
<a href="data:text/html,<script>x()</script>">data</a> <a href="obsidian://open?vault=x">vault</a></p>
<img src="x.png" onerror="alert(3)"><img src="javascript:alert(4)" alt="js">
<p>Shown as code on the page: &lt;script&gt;alert(5)&lt;/script&gt; and &lt;img src=y onerror=alert(6)&gt;</p>
<p>Text that looks like a link: [[Private Note]] and ![[.engram/wiki/history.jsonl]]</p>
<iframe src="https://evil.example"></iframe><form action="/x"><input name="q"></form>
<p onclick="alert(7)">Last paragraph.</p><script>more()</script></body></html>"""


def test_markdown_is_copied_byte_for_byte_with_a_sidecar(wiki):
    result = ingest_source(wiki, MARKDOWN, "notes/auto.md", origin="https://example.org/a", writer="claude")
    source = result["source"]
    assert result["duplicate"] is False and result["replaces"] == ""
    assert source["text"] == source["file"] == "raw/autovacuum.md"
    assert (wiki.root / "raw/autovacuum.md").read_bytes() == MARKDOWN
    sidecar = json.loads((wiki.root / "raw/autovacuum.source.json").read_text(encoding="utf-8"))
    assert sidecar == {"text": "raw/autovacuum.md", "file": "raw/autovacuum.md", "title": "Autovacuum",
                       "sha256": hashlib.sha256(MARKDOWN).hexdigest(), "bytes": len(MARKDOWN), "media": "markdown",
                       "ingested": NOW, "origin": "https://example.org/a", "replaces": "", "writer": "claude"}
    assert source == {**sidecar, "sidecar": True}
    assert sorted(p.name for p in (wiki.root / "raw").iterdir()) == ["autovacuum.md", "autovacuum.source.json"]
    assert [(e.action, e.path, e.sha256) for e in history.read_history(wiki.history)] == \
        [("ingest", "raw/autovacuum.md", sidecar["sha256"])]


def test_text_keeps_its_bytes_as_md_and_takes_the_file_name_as_title(wiki):
    data = "Léa's notes\r\non vacuum\r\n".encode("utf-8")
    source = ingest_source(wiki, data, "Vacuum Notes.txt")["source"]
    assert (source["media"], source["title"], source["text"]) == ("text", "Vacuum Notes", "raw/vacuum-notes.md")
    assert (wiki.root / source["file"]).read_bytes() == data


def test_html_keeps_the_original_and_its_markdown_has_only_the_readable_text(wiki):
    source = ingest_source(wiki, HTML, "page.html", origin="https://example.org/pg")["source"]
    assert (source["title"], source["media"], source["file"], source["text"]) == \
        ("Autovacuum Tuning", "html", "raw/autovacuum-tuning.html", "raw/autovacuum-tuning.md")
    assert (wiki.root / source["file"]).read_bytes() == HTML
    text = (wiki.root / source["text"]).read_text(encoding="utf-8")
    assert "# Autovacuum" in text and "[busy](https://example.org/pg)" in text and "Last paragraph." in text
    assert "click me" in text and "or me" in text  # a link's words stay, its unsafe target goes
    for live in ("steal()", "more()", "color: red", "javascript", "JaVaScRiPt", "data:", "obsidian://",
                 "alert(3)", "alert(4)", "alert(7)", "evil.example", "<input", "<iframe"):
        assert live not in text, live
    assert not re.search(r"(?<!\\)<", text), text  # no raw HTML at all: a shown `<script>` stays text
    assert "[[" not in text and "![[" not in text, text  # nor a wikilink or embed made from the page's words
    assert "\\<script\\>alert(5)" in text and "\\<img src=y onerror=alert(6)\\>" in text  # shown text stays, inert


def test_a_pdf_keeps_its_bytes_and_its_text_layer_becomes_markdown(wiki, make_pdf):
    data = make_pdf("Vacuum reclaims dead tuples", "", "Freeze prevents wraparound", title="Vacuum Paper")
    from io import BytesIO

    from pypdf import PdfReader
    assert "dead tuples" in PdfReader(BytesIO(data)).pages[0].extract_text()  # the fixture really has text
    source = ingest_source(wiki, data, "paper.pdf")["source"]
    assert (source["title"], source["media"], source["file"]) == ("Vacuum Paper", "pdf", "raw/vacuum-paper.pdf")
    assert (wiki.root / "raw/vacuum-paper.pdf").read_bytes() == data
    assert (wiki.root / source["text"]).read_text(encoding="utf-8") == \
        "## Page 1\n\nVacuum reclaims dead tuples\n\n## Page 3\n\nFreeze prevents wraparound\n"


def test_a_pdf_without_a_suffix_is_known_by_its_bytes(wiki, make_pdf):
    assert ingest_source(wiki, make_pdf("Hello PDF"), "-", title="Piped")["source"]["media"] == "pdf"


def test_pdf_text_that_looks_like_html_stays_text(wiki, make_pdf):
    source = ingest_source(wiki, make_pdf("<script>alert(1)</script> see ![[Secret]]"), "x.pdf", title="X")
    text = (wiki.root / source["source"]["text"]).read_text(encoding="utf-8")
    assert "alert(1)" in text and not re.search(r"(?<!\\)<", text) and "[[" not in text, text


@pytest.mark.parametrize("data, name, message", [
    (b"", "empty.md", "empty.md: the source is empty"),
    (b" \n\t\n", "blank.txt", "blank.txt: the source is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "photo.png", "photo.png: a binary file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "-", "-: a binary file"),
    (b"PK\x03\x04\x14\x00\x00\x00", "notes.md", "notes.md: "),  # a zip renamed .md
    ("hello there".encode("utf-16-le"), "notes.txt", "notes.txt: a binary file"),  # NUL bytes: not text
    (b"caf\xe9\n", "latin1.md", r"latin1.md: not UTF-8 text \(byte 3\)"),
    (b"PK\x03\x04", "archive.zip", "archive.zip: not a Markdown, text, HTML or PDF file"),
    (b"%PDF-1.4\nnot really", "broken.pdf", "broken.pdf: not a readable PDF"),
])
def test_inputs_that_are_not_sources_are_refused_naming_the_file(wiki, snapshot, data, name, message):
    before = snapshot(wiki.root)
    with pytest.raises(InputError, match=message):
        ingest_source(wiki, data, name, title="T")
    assert snapshot(wiki.root) == before


def test_a_scanned_pdf_is_refused_for_having_no_text(wiki, make_pdf):
    with pytest.raises(InputError, match="scan.pdf: the PDF has no text layer"):
        ingest_source(wiki, make_pdf(""), "scan.pdf")
    assert not (wiki.root / "raw").exists() or not any((wiki.root / "raw").iterdir())


def test_a_source_over_the_limit_is_refused_naming_the_limit(make_wiki):
    wiki = make_wiki(toml="max_source_bytes = 100\n")
    ingest_source(wiki, b"# Small\n" + b"x" * 92, "small.md")  # exactly at the limit: fine
    with pytest.raises(InputError) as caught:
        ingest_source(wiki, b"# Big\n" + b"x" * 95, "big.md")
    assert str(caught.value) == "big.md: 101 bytes is over the 100-byte limit for one source " \
                                "(`max_source_bytes` in engram.toml)"
    assert not (wiki.root / "raw/big.md").exists()


def test_the_same_bytes_twice_are_one_source_and_change_nothing(wiki, snapshot):
    first = ingest_source(wiki, MARKDOWN, "a.md", origin="https://example.org/a")
    before = snapshot(wiki.root)
    again = ingest_source(wiki, MARKDOWN, "copy.md", title="Another title", origin="https://elsewhere")
    assert again == {"source": first["source"], "duplicate": True, "replaces": ""}
    assert snapshot(wiki.root) == before  # no file, sidecar or history line added


def test_new_bytes_from_the_same_origin_are_a_new_version_and_the_old_one_stays(wiki):
    old = ingest_source(wiki, MARKDOWN, "a.md", origin="https://example.org/a")["source"]
    new = ingest_source(wiki, MARKDOWN + b"\nRevised.\n", "a.md", origin="https://example.org/a")
    assert new["duplicate"] is False and new["replaces"] == old["text"] == "raw/autovacuum.md"
    assert new["source"]["text"] == "raw/autovacuum-2.md" and new["source"]["replaces"] == "raw/autovacuum.md"
    assert (wiki.root / "raw/autovacuum.md").read_bytes() == MARKDOWN
    third = ingest_source(wiki, MARKDOWN + b"\nRevised twice.\n", "a.md", origin="https://example.org/a")
    assert third["replaces"] == "raw/autovacuum-2.md"  # the newest version, not the first
    other = ingest_source(wiki, MARKDOWN + b"\nElsewhere.\n", "a.md", origin="https://example.org/b")
    assert other["replaces"] == ""  # another origin with the same title is another source
    assert set(read_sources(wiki)) == {"raw/autovacuum.md", "raw/autovacuum-2.md", "raw/autovacuum-3.md",
                                       "raw/autovacuum-4.md"}


def test_without_an_origin_the_same_title_is_a_new_version(wiki):
    ingest_source(wiki, b"# Runbook\n\nv1\n", "-")
    assert ingest_source(wiki, b"# runbook\n\nv2\n", "-")["replaces"] == "raw/runbook.md"


def test_a_file_already_in_raw_is_never_overwritten(make_wiki):
    mine = b"# Autovacuum\n\nmy own clipping\n"
    wiki = make_wiki({"raw/autovacuum.md": mine, "raw/autovacuum-tuning.html": b"<p>mine</p>"})
    source = ingest_source(wiki, MARKDOWN + b"other\n", "a.md")["source"]
    assert source["text"] == "raw/autovacuum-2.md"
    html = ingest_source(wiki, HTML, "page.html")["source"]
    assert html["file"] == "raw/autovacuum-tuning-2.html"
    assert (wiki.root / "raw/autovacuum.md").read_bytes() == mine
    assert (wiki.root / "raw/autovacuum-tuning.html").read_bytes() == b"<p>mine</p>"
    assert read_sources(wiki)["raw/autovacuum.md"].sidecar is False  # adopted as found


def test_read_source_returns_the_markdown_by_either_path(wiki):
    ingest_source(wiki, HTML, "page.html")
    by_file = read_source(wiki, "raw/autovacuum-tuning.html", 20)
    assert by_file["source"]["text"] == "raw/autovacuum-tuning.md" and by_file["truncated"] is True
    assert len(by_file["content"]) <= 20
    with pytest.raises(InputError, match="no source 'raw/nope.md'"):
        read_source(wiki, "raw/nope.md", 100)


@pytest.mark.parametrize("sidecar", [
    b"{not json", b"[1, 2]", b'"a string"',
    b'{"text": "raw/x.md", "file": "raw/x.md", "title": 7, "sha256": "ab", "bytes": "many", "media": "markdown",'
    b' "ingested": 20260101}',
])
def test_a_peers_broken_sidecar_stops_nothing(make_wiki, sidecar):
    from compiler.wiki.navigation import refresh_navigation
    from compiler.wiki.pages import write_page

    wiki = make_wiki({"raw/x.source.json": sidecar, "raw/x.md": "# X\n\ntext\n"})
    assert read_sources(wiki)["raw/x.md"].sidecar is False  # the file is still a source, found as it is
    write_page(wiki, "Page", "Body.\n", sources=["raw/x.md"])
    assert refresh_navigation(wiki)[0] == []


@pytest.mark.parametrize("text", [".engram/wiki/history.jsonl", "Private/diary.md", "raw/../Private/diary.md",
                                  "raw/.hidden.md", "/etc/passwd"])
def test_a_sidecar_pointing_out_of_raw_is_no_source(make_wiki, text):
    wiki = make_wiki({"Private/diary.md": "# Diary\n\nsecret\n", ".engram/wiki/history.jsonl": "",
                      "raw/x.source.json": json.dumps({"text": text, "file": text, "title": "X", "sha256": "ab",
                                                       "bytes": 1, "media": "markdown", "ingested": NOW})})
    assert text not in read_sources(wiki)
    with pytest.raises(InputError, match="no source"):
        read_source(wiki, text, 1000)


def test_relative_links_of_a_clipped_page_resolve_against_its_web_origin_or_lose_their_target(wiki):
    page = (b"<html><title>Clip</title><body><p><a href='/blog'>Blog</a> <a href='#top'>Top</a> "
            b"<img src='../fig.png' alt='fig'> <a href='https://a.example/x'>abs</a></p></body></html>")
    web = ingest_source(wiki, page, "clip.html", origin="https://site.example/docs/page.html")["source"]
    text = (wiki.root / web["text"]).read_text(encoding="utf-8")
    assert "[Blog](https://site.example/blog)" in text and "![fig](https://site.example/fig.png)" in text
    assert "[abs](https://a.example/x)" in text and "Top" in text and "#top" not in text
    local = ingest_source(wiki, page.replace(b"Clip", b"Clip two"), "clip2.html", origin="~/Downloads/clip.html")["source"]
    text = (wiki.root / local["text"]).read_text(encoding="utf-8")
    assert "Blog" in text and "/blog" not in text and "fig.png" not in text  # nothing in the vault to point at
