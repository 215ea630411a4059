"""`engram setup`'s Obsidian settings (compiler.commands.obsidian_settings): offered by default and
never written, applied only when asked, merged into the files as Obsidian writes them (every other
key kept, in order), idempotent, and a corrupt file is one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.obsidian_settings import GREY, apply_settings, offered_settings
from compiler.core.errors import CorruptDataError

# What Obsidian itself writes (keys and shapes as in real vaults' .obsidian/ folders).
APP_JSON = """{
  "alwaysUpdateLinks": true,
  "newLinkFormat": "shortest",
  "showIndentGuide": true,
  "userIgnoreFilters": [
    "Archives"
  ],
  "pdfExportSettings": {
    "pageSize": "A4",
    "landscape": false,
    "margin": "0",
    "downscalePercent": 80
  },
  "attachmentFolderPath": "Attachments"
}"""
GRAPH_JSON = """{
  "collapse-filter": true,
  "search": "",
  "showTags": false,
  "showAttachments": false,
  "hideUnresolved": false,
  "showOrphans": true,
  "collapse-color-groups": false,
  "colorGroups": [
    {
      "query": "tag:#project",
      "color": {
        "a": 1,
        "rgb": 14048348
      }
    }
  ],
  "collapse-display": true,
  "showArrow": false,
  "textFadeMultiplier": 0,
  "nodeSizeMultiplier": 1,
  "lineSizeMultiplier": 1,
  "centerStrength": 0.518713248970312,
  "repelStrength": 10,
  "linkStrength": 1,
  "linkDistance": 250,
  "scale": 1,
  "close": true
}"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["setup", *args, "--skip-model-check"], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({".obsidian/app.json": APP_JSON, ".obsidian/graph.json": GRAPH_JSON, "Home.md": "# Home\n"})


def test_by_default_setup_offers_and_changes_nothing(vault):
    code, _, err = run(str(vault))
    assert code == 0
    assert (vault / ".obsidian/app.json").read_text() == APP_JSON
    assert (vault / ".obsidian/graph.json").read_text() == GRAPH_JSON
    assert "`engram setup --obsidian-exclude` would add .obsidian/app.json userIgnoreFilters" in err
    assert "`engram setup --obsidian-graph` would add .obsidian/graph.json colorGroups" in err
    code, out, _ = run(str(vault), "--json")
    states = {s["name"]: s["state"] for s in json.loads(out)["obsidian"]["settings"]}
    assert code == 0 and states == {"exclude": "offered", "graph": "offered"}


def test_asked_for_each_setting_is_merged_keeping_every_other_key(vault):
    code, _, err = run(str(vault), "--obsidian-exclude")
    app = json.loads((vault / ".obsidian/app.json").read_text())
    before = json.loads(APP_JSON)
    assert code == 0 and "obsidian: added: .obsidian/app.json userIgnoreFilters" in err
    assert list(app) == list(before) and app == {**before, "userIgnoreFilters": ["Archives", "_engram/"]}
    assert (vault / ".obsidian/graph.json").read_text() == GRAPH_JSON  # not asked: untouched
    code, _, _ = run(str(vault), "--obsidian-graph")
    graph = json.loads((vault / ".obsidian/graph.json").read_text())
    expected = json.loads(GRAPH_JSON)
    expected["colorGroups"].append({"query": "path:_engram", "color": {"a": 1, "rgb": GREY}})
    assert code == 0 and list(graph) == list(expected) and graph == expected
    assert not list((vault / ".obsidian").glob(".engram-*"))  # the atomic write left no temp file


def test_applying_twice_changes_nothing_the_second_time(vault):
    assert run(str(vault), "--obsidian-exclude", "--obsidian-graph")[0] == 0
    written = {p.name: p.read_bytes() for p in (vault / ".obsidian").iterdir()}
    code, _, err = run(str(vault), "--obsidian-exclude", "--obsidian-graph")
    assert code == 0 and err.count("obsidian: already set") == 2
    assert {p.name: p.read_bytes() for p in (vault / ".obsidian").iterdir()} == written


def test_an_existing_entry_in_another_spelling_counts_as_set(make_vault):
    vault = make_vault({".obsidian/app.json": '{"userIgnoreFilters": ["_pages"]}',
                        ".obsidian/graph.json": '{"colorGroups": [{"query": "path:\\"_pages\\"", "color": {"a": 1, "rgb": 0}}]}',
                        "engram.toml": 'out = "_pages"\n'})
    assert {s.name: s.state for s in offered_settings(vault, "_pages")} == {"exclude": "set", "graph": "set"}


def test_missing_files_are_created_with_the_setting_alone(make_vault):
    vault = make_vault({"Home.md": "# Home\n"})
    states = {s.name: s.state for s in apply_settings(vault, "_engram", {"exclude"})}
    assert states == {"exclude": "applied", "graph": "offered"}
    assert json.loads((vault / ".obsidian/app.json").read_text()) == {"userIgnoreFilters": ["_engram/"]}
    assert not (vault / ".obsidian/graph.json").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("{oops", ".obsidian/app.json:1: not valid JSON"),
    ("[1, 2]", ".obsidian/app.json: not a JSON object"),
    ('{"userIgnoreFilters": "_engram/"}', ".obsidian/app.json: `userIgnoreFilters` is not a list"),
    (b'{"a": "\xc3\x28"}', ".obsidian/app.json: not valid JSON"),  # not UTF-8
])
def test_a_corrupt_app_json_is_one_line_naming_it_and_is_never_written(make_vault, text, message):
    vault = make_vault({".obsidian/app.json": text})
    code, _, err = run(str(vault), "--obsidian-exclude")
    assert code == 1 and err.startswith(f"engram: {message}") and err.count("\n") == 1
    assert (vault / ".obsidian/app.json").read_bytes() == (text if isinstance(text, bytes) else text.encode())
    code, _, err = run(str(vault))  # only offering: setup goes on and says why it offers nothing
    assert code == 0 and f"obsidian: settings not offered: {message}" in err
    with pytest.raises(CorruptDataError):
        offered_settings(vault, "_engram")
