"""qmd habits at the `engram` command: `get #docid` and `get PATH:LINE`, `--all`, `--csv`, one output
format at a time, and an empty query exiting 1. Keyword search and `get` load no model, so a vault
compiled with the small fake embedder is enough."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.settings import load_settings
from compiler.pipeline.spine import compile_vault
from tests.conftest import FakeEmbedder

NOTES = {
    "Deploy.md": "# Deploying\n\nRun the blue-green deploy, then watch the dashboard.\nLine four, with a comma.\n",
    "Feed.md": "# Form\x0cfeed\n\nline three\u2028still three\nline four\n",  # only \n ends a line
    **{f"Ops/Deploy note {i}.md": f"# Deploy note {i}\n\nAnother deploy story, number {i}.\n" for i in range(8)},
    **{f"Kitchen/Recipe {i}.md": f"# Recipe {i}\n\nBoil water, add salt, cook for {i} minutes.\n" for i in range(20)},
}  # the recipes keep "deploy" rare enough for BM25 to score it


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def vault(make_vault) -> Path:
    root = make_vault(NOTES)
    compile_vault(root, load_settings(root), embedder=FakeEmbedder())
    return root


def _docid(vault: Path, file: str) -> str:
    code, out, _ = run("search", "--vault", str(vault), "--all", "--json", "deploy")
    assert code == 0
    return next(h["docid"] for h in json.loads(out) if h["file"] == file)


def test_all_returns_every_hit_past_the_default_limit(vault):
    code, out, _ = run("search", "--vault", str(vault), "--json", "deploy")
    assert code == 0 and len(json.loads(out)) == 5  # the -n default
    code, out, _ = run("search", "--vault", str(vault), "--all", "--json", "deploy")
    assert code == 0 and len(json.loads(out)) == 9  # Deploy.md and the eight notes under Ops/


def test_csv_has_qmds_header_and_one_parsable_row_per_hit(vault):
    code, out, _ = run("search", "--vault", str(vault), "--csv", "-n", "3", "deploy")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["docid", "score", "file", "title", "context", "line", "snippet"]
    assert len(rows) == 4 and all(r[0].startswith("#") and len(r[0]) == 7 for r in rows[1:])
    assert all(0 < float(r[1]) <= 1 and r[5].isdigit() for r in rows[1:])
    code, out, _ = run("search", "--vault", str(vault), "--csv", "nothing-matches-this")
    assert code == 0 and out == "docid,score,file,title,context,line,snippet\n"  # the header alone, as qmd


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
@pytest.mark.parametrize("formats", [("--json", "--files"), ("--md", "--csv"), ("--json", "--csv")])
def test_two_output_formats_are_a_usage_error(vault, command, formats):
    code, out, err = run(command, "--vault", str(vault), *formats, "deploy")
    assert code == 2 and out == ""
    assert err == f"engram: {formats[0]} and {formats[1]} cannot be combined: choose one output format\n"


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
@pytest.mark.parametrize("query", [[], [""], ["  ", " "]])
def test_an_empty_query_exits_1_as_in_qmd(vault, command, query):
    code, out, err = run(command, "--vault", str(vault), *query)
    assert code == 1 and out == "" and err.startswith("engram: empty query") and err.count("\n") == 1


def test_get_by_docid_prints_the_note(vault):
    docid = _docid(vault, "Deploy.md")
    code, out, _ = run("get", "--vault", str(vault), docid)
    assert code == 0 and out == NOTES["Deploy.md"]
    code, out, _ = run("get", "--vault", str(vault), docid.upper())  # hex digits in any case
    assert code == 0 and out == NOTES["Deploy.md"]


def test_get_path_with_line_and_count(vault):
    code, out, _ = run("get", "--vault", str(vault), "Deploy.md:3")
    assert code == 0 and out == "Run the blue-green deploy, then watch the dashboard.\nLine four, with a comma.\n"
    code, out, _ = run("get", "--vault", str(vault), "Deploy:3:1", "--line-numbers")  # suffix left out, numbered
    assert code == 0 and out == "     3  Run the blue-green deploy, then watch the dashboard.\n"
    code, out, _ = run("get", "--vault", str(vault), _docid(vault, "Deploy.md") + ":4", "--json")
    note = json.loads(out)
    assert code == 0 and note == {**note, "path": "Deploy.md", "from": 4, "lines": 1,
                                  "content": "Line four, with a comma.\n"}
    code, out, _ = run("get", "--vault", str(vault), "Deploy.md:1", "--from", "4", "-l", "1")  # options win
    assert code == 0 and out == "Line four, with a comma.\n"


def test_lines_are_counted_by_newlines_only(vault):
    code, out, _ = run("get", "--vault", str(vault), "Feed.md:4")
    assert code == 0 and out == "line four\n"


def test_a_note_whose_name_ends_in_a_line_suffix_is_read_as_named(make_vault):
    root = make_vault({"Meeting 10:30.md": "# At half past ten\n"})
    compile_vault(root, load_settings(root), embedder=FakeEmbedder())
    code, out, _ = run("get", "--vault", str(root), "Meeting 10:30")
    assert code == 0 and out == "# At half past ten\n"


@pytest.mark.parametrize(("target", "message"), [
    ("#000000", "no note has docid #000000"),
    ("Deploy.md:99", "Deploy.md has 4 lines: line 99 is past its end"),
    ("Nope.md", "no note 'Nope.md'"),
    ("../outside.md", "'..' and hidden folders are not notes"),
    (".engram/journal.jsonl", "'..' and hidden folders are not notes"),
])
def test_get_failures_are_one_line_and_exit_1(vault, target, message):
    code, out, err = run("get", "--vault", str(vault), target)
    assert code == 1 and out == "" and message in err and err.count("\n") == 1


def test_get_before_any_compile_says_to_compile(make_vault):
    root = make_vault({"A.md": "# A\n"})
    code, _, err = run("get", "--vault", str(root), "#abcdef")
    assert code == 1 and "not compiled yet" in err
    code, out, _ = run("get", "--vault", str(root), "A.md")  # a path needs no index
    assert code == 0 and out == "# A\n"


def test_an_ambiguous_docid_names_the_notes(vault):
    from compiler.index.keywords import KeywordIndex, NoteRow

    index = KeywordIndex(vault / ".engram/cache/fts.sqlite")
    index.replace_paths([], [NoteRow("Twin A.md", "abcdef01" + "0" * 56, "A", ""),
                             NoteRow("Twin B.md", "abcdef02" + "0" * 56, "B", "")], [])
    index.close()
    code, _, err = run("get", "--vault", str(vault), "#abcdef")
    assert code == 1 and "names 2 notes" in err and "Twin A.md" in err and "Twin B.md" in err
    code, _, err = run("get", "--vault", str(vault), "#abcdef01")  # more digits tell them apart
    assert code == 1 and "no note 'Twin A.md'" in err  # found in the index; the file itself was never written
