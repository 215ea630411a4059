"""Page writes: where they may land, revisions that refuse a stale writer, undo and move, two
writers at once losing nothing, and navigation that is a function of the pages alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from compiler.core.errors import InputError, NotFoundError
from compiler.wiki import history
from compiler.wiki.navigation import refresh_navigation
from compiler.wiki.pages import edit_page, read_page, replace_section, write_page
from compiler.wiki.revisions import move_page, page_history, undo_page
from compiler.wiki.sources import ingest_source

REPO = Path(__file__).resolve().parents[2]


def test_a_new_page_lands_in_its_kind_folder_with_its_provenance(wiki):
    ingest_source(wiki, b"# Pools\n\nA pool keeps 10 connections.\n", "pools.md")
    done = write_page(wiki, "Connection Pooling", "A pool keeps 10 connections.\n", kind="concept",
                      summary="Why pools", sources=["raw/pools.md"], links=["Postgres"], writer="claude")
    assert (done["path"], done["revision"], done["created"]) == ("wiki/concepts/Connection Pooling.md", 1, True)
    page = read_page(wiki, "connection pooling")  # found by title, any case
    assert (page["kind"], page["summary"], page["sources"], page["writer"]) == \
        ("concept", "Why pools", ["raw/pools.md"], "claude")
    assert page["created"] == page["updated"] == "2026-03-04 05:06:07"
    assert "Related: [[Postgres]]" in page["body"]
    index = (wiki.wiki / "index.md").read_text(encoding="utf-8")
    assert "[[wiki/concepts/Connection Pooling|Connection Pooling]] — Why pools · updated 2026-03-04" in index
    assert "## [2026-03-04] write | Connection Pooling" in (wiki.wiki / "log.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("title", ["../../x", "a/b", "..", ".hidden", "tab\there", "back\\slash", "", "x" * 201])
def test_a_hostile_title_is_refused_and_nothing_is_written(wiki, title, snapshot):
    wiki.wiki.mkdir()
    before = snapshot(wiki.root)
    with pytest.raises(InputError) as error:
        write_page(wiki, title, "body\n")
    assert "\n" not in str(error.value)
    assert snapshot(wiki.root) == before


@pytest.mark.parametrize(("path", "why"), [
    ("notes/mine.md", "only inside wiki/"), ("raw/source.md", "read-only"), ("wiki/index.md", "generates"),
    ("wiki/log.md", "generates"), ("wiki/AGENTS.md", "generates"), ("wiki/../notes/x.md", "'..'"),
    ("/etc/passwd.md", "absolute"), ("wiki/.obsidian/x.md", "hidden"), ("wiki/page.txt", ".md file"),
])
def test_the_write_gate_refuses_every_path_outside_the_pages(wiki, path, why):
    with pytest.raises(InputError, match=why.replace(".", r"\.").replace("(", r"\(")):
        wiki.writable(path)


def test_a_symlink_out_of_the_wiki_is_refused(wiki, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    wiki.wiki.mkdir()
    (wiki.wiki / "concepts").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="symlink"):
        write_page(wiki, "Escape", "body\n", kind="concept")
    assert list(outside.iterdir()) == []
    (wiki.root / "notes").mkdir()
    (wiki.root / "notes/human.md").write_text("mine\n", encoding="utf-8")
    (wiki.wiki / "Linked.md").symlink_to(wiki.root / "notes/human.md")
    with pytest.raises(InputError, match="symlink"):
        wiki.writable("wiki/Linked.md")
    assert (wiki.root / "notes/human.md").read_text(encoding="utf-8") == "mine\n"


def test_a_stale_revision_is_refused_and_the_newer_text_stays(wiki):
    write_page(wiki, "Retries", "## Policy\nthree tries\n")
    edit_page(wiki, "Retries", 1, section="Policy", section_body="five tries", writer="a")
    with pytest.raises(InputError, match="revision 2, not 1"):
        edit_page(wiki, "Retries", 1, section="Policy", section_body="one try", writer="b")
    with pytest.raises(InputError, match="expected_revision=2"):
        write_page(wiki, "Retries", "rewritten\n")
    page = read_page(wiki, "Retries")
    assert page["revision"] == 2 and "five tries" in page["body"] and "one try" not in page["body"]
    assert [e["action"] for e in page_history(wiki, "Retries")["entries"]] == ["write", "edit"]


def test_edits_by_section_and_by_passage(wiki):
    write_page(wiki, "Queue", "# Queue\n\n## Timeout\nold\n\n## Other\nkept\n")
    edit_page(wiki, "Queue", 1, section="timeout", section_body="30 seconds")
    edit_page(wiki, "Queue", 2, section="New", section_body="appended")
    body = read_page(wiki, "Queue")["body"]
    assert "## Timeout\n30 seconds\n\n## Other\nkept" in body and body.rstrip().endswith("## New\nappended")
    with pytest.raises(InputError, match="occurs 0 times"):
        edit_page(wiki, "Queue", 3, find="absent", replace="x")
    edit_page(wiki, "Queue", 3, find="kept", replace="changed")
    assert "changed" in read_page(wiki, "Queue")["body"]
    with pytest.raises(InputError, match="nothing to change"):
        edit_page(wiki, "Queue", 4)


def test_replace_section_stops_at_a_heading_of_its_level_or_higher():
    body = "# T\n## A\none\n### A.1\nsub\n## B\ntwo\n"
    assert replace_section(body, "A", "new") == "# T\n## A\nnew\n\n## B\ntwo\n"


def test_undo_restores_each_write_in_turn_and_refuses_to_lose_a_hand_edit(wiki):
    write_page(wiki, "Keys", "first\n")
    edit_page(wiki, "Keys", 1, body="second\n")
    undone = undo_page(wiki, "Keys")
    assert undone["revision"] == 3 and read_page(wiki, "Keys")["body"].strip() == "first"
    undo_page(wiki, "Keys")  # undoing the undo redoes
    assert read_page(wiki, "Keys")["body"].strip() == "second"
    path = wiki.root / "wiki/Keys.md"
    path.write_text(path.read_text(encoding="utf-8") + "a person's line\n", encoding="utf-8")
    with pytest.raises(InputError, match="changed since its last engram write"):
        undo_page(wiki, "Keys")
    assert "a person's line" in path.read_text(encoding="utf-8")


def test_undoing_a_creation_removes_the_page_and_undoing_that_brings_it_back(wiki):
    write_page(wiki, "Short Lived", "here\n")
    assert undo_page(wiki, "Short Lived")["removed"] is True
    assert not (wiki.root / "wiki/Short Lived.md").exists()
    assert "Short Lived" not in (wiki.wiki / "index.md").read_text(encoding="utf-8")
    assert undo_page(wiki, "Short Lived")["removed"] is False
    assert read_page(wiki, "Short Lived")["body"].strip() == "here"


def test_a_move_relinks_the_other_pages_and_its_undo_moves_everything_back(wiki):
    write_page(wiki, "Old Name", "target\n", kind="concept")
    write_page(wiki, "Citing", "see [[Old Name]] and [[wiki/concepts/Old Name|alias]]\n")
    moved = move_page(wiki, "Old Name", "New Name", expected_revision=1)
    assert (moved["path"], moved["relinked"]) == ("wiki/concepts/New Name.md", ["wiki/Citing.md"])
    citing = read_page(wiki, "Citing")
    assert "[[wiki/concepts/New Name]]" in citing["body"] and "[[wiki/concepts/New Name|alias]]" in citing["body"]
    assert citing["revision"] == 2
    undo_page(wiki, "New Name")
    assert (wiki.root / "wiki/concepts/Old Name.md").is_file() and not (wiki.root / "wiki/concepts/New Name.md").exists()
    assert "[[wiki/concepts/Old Name]]" in read_page(wiki, "Citing")["body"]


def test_reading_a_missing_page_says_how_to_find_one(wiki):
    with pytest.raises(NotFoundError, match="list_pages"):
        read_page(wiki, "Nowhere")


def test_navigation_is_a_function_of_the_pages_and_keeps_a_persons_index(wiki):
    write_page(wiki, "B page", "b\n", kind="entity", summary="bee")
    write_page(wiki, "A page", "a\n", kind="entity", summary="ay")
    index, log = (wiki.wiki / "index.md").read_bytes(), (wiki.wiki / "log.md").read_bytes()
    assert refresh_navigation(wiki)[0] == []  # nothing changed: nothing written
    assert index.decode().index("A page") < index.decode().index("B page")
    (wiki.wiki / "index.md").unlink()
    refresh_navigation(wiki)
    assert (wiki.wiki / "index.md").read_bytes() == index and (wiki.wiki / "log.md").read_bytes() == log
    (wiki.wiki / "index.md").write_text("# my own index\n", encoding="utf-8")
    written, warnings = refresh_navigation(wiki)
    assert written == [] and "generated_by" in warnings[0].message
    assert (wiki.wiki / "index.md").read_text(encoding="utf-8") == "# my own index\n"


WRITER = textwrap.dedent("""
    import random
    import sys
    import time
    from compiler.core.errors import InputError
    from compiler.core.settings import load_settings
    from compiler.wiki.layout import WikiLayout
    from compiler.wiki.pages import edit_page, read_page
    from pathlib import Path

    vault, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    layout = WikiLayout.of(vault, load_settings(vault))
    (vault / f"ready-{name}").touch()
    while not (vault / "go").exists():  # both start together, or there is no race to test
        time.sleep(0.005)
    done = refused = 0
    while done < count:
        page = read_page(layout, "Shared")
        time.sleep(random.uniform(0, 0.01))  # the other writer gets its chance to move the page on
        try:
            # the whole body, rebuilt from what was read: a write over a stale read would drop the other's lines
            body = page["body"].replace("<!-- end -->", f"- {name} {done}\\n<!-- end -->")
            edit_page(layout, "Shared", page["revision"], body=body, writer=name)
            done += 1
        except InputError as error:
            assert "someone changed it" in str(error), error
            refused += 1
    print(done, refused)
""")


def test_two_writers_editing_one_page_at_once_lose_nothing(wiki):
    """Two real processes, each reading the page and editing it from what it read: a stale read is
    refused (never merged over), the writer reads again, and every edit of both survives."""
    write_page(wiki, "Shared", "# Shared\n<!-- end -->\n")
    count = 25
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(wiki.root), name, str(count)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("alpha", "beta")]
    while not all((wiki.root / f"ready-{name}").exists() for name in ("alpha", "beta")):
        assert all(w.poll() is None for w in writers), [w.communicate() for w in writers]
        time.sleep(0.01)
    (wiki.root / "go").touch()
    outputs = [w.communicate(timeout=300) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], outputs
    refused = sum(int(out.split()[1]) for out, _ in outputs)
    assert refused > 0, outputs  # they did race: some edits were made from a stale read, and refused
    body = read_page(wiki, "Shared")["body"]
    for name in ("alpha", "beta"):
        assert [line for line in body.splitlines() if line.startswith(f"- {name} ")] == \
            [f"- {name} {i}" for i in range(count)]
    assert read_page(wiki, "Shared")["revision"] == 1 + 2 * count
    entries = history.read_history(wiki.history)
    assert [e.revision for e in entries] == list(range(1, 2 + 2 * count))  # one journaled write per revision
    log = (wiki.wiki / "log.md").read_text(encoding="utf-8")
    assert log.count("## [") == 1 + 2 * count


def test_two_agents_creating_one_title_at_once_get_one_page(wiki):
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from compiler.core.errors import InputError
        from compiler.core.settings import load_settings
        from compiler.wiki.layout import WikiLayout
        from compiler.wiki.pages import write_page
        vault = Path(sys.argv[1])
        try:
            write_page(WikiLayout.of(vault, load_settings(vault)), "Race", f"by {sys.argv[2]}\\n", writer=sys.argv[2])
            print("wrote")
        except InputError as error:
            print("refused", error)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [subprocess.Popen([sys.executable, "-c", script, str(wiki.root), name], env=env, stdout=subprocess.PIPE,
                             text=True) for name in ("a", "b")]
    said = sorted(r.communicate(timeout=120)[0].split()[0] for r in runs)
    assert said == ["refused", "wrote"]
    page = read_page(wiki, "Race")
    assert page["revision"] == 1 and page["body"].strip() == f"by {page['writer']}"


def test_a_promoted_memory_is_quoted_as_text_that_runs_nothing(wiki):
    from compiler.notes.markdown_rules import uninert
    from compiler.wiki.answers import promote_memories
    from tests.render.test_hostile_memory import PAYLOADS, live_parts

    memories = [{"id": f"mem-{n}", "title": f"{name} [[Private]]", "content": text, "project": "peer <% x %>",
                 "page": ""} for n, (name, text) in enumerate(PAYLOADS.items())]
    done = promote_memories(wiki, memories, "Promoted", writer="peer")
    text = (wiki.root / done["path"]).read_text(encoding="utf-8")
    assert live_parts(text) == []
    quoted = "\n".join(line[2:] for line in text.splitlines() if line.startswith("> "))
    for payload in PAYLOADS.values():
        assert payload.split("\n")[0] in uninert(quoted)  # still readable as the text it was
