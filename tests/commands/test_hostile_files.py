"""Hostile files in a vault (issue 11): long names, symlinks, NUL bytes, FIFOs. Nothing crashes,
nothing is written outside the vault, nothing is skipped without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.compile import compile_vault
from compiler.core.files import MAX_NAME_BYTES, bounded_name
from compiler.core.settings import Settings
from compiler.index.embedder import model_identity
from compiler.render.notes import backlinks_page
from tests.conftest import FakeEmbedder

LONG_MD = "a" * 250 + ".md"  # a legal name: 253 bytes
LONG_QMD = "b" * 243 + ".qmd"  # 247 bytes: "….qmd.links.md" would be 256


@pytest.fixture
def cli(monkeypatch):
    """Returns a runner of `engram …` (exit code, stdout, stderr) that embeds with FakeEmbedder."""
    fake = FakeEmbedder()
    fake.identity = model_identity(Settings().model)
    monkeypatch.setattr("compiler.commands.compile_index.load_embedder", lambda name: fake)

    def run(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return run


# --- item 3: long note names ----------------------------------------------------------------


def test_short_names_are_unchanged_and_long_ones_are_bounded_and_stable():
    assert backlinks_page("Runbooks/Deploy.md") == "backlinks/Runbooks/Deploy.links.md"
    assert backlinks_page("Analyses/latency.qmd") == "backlinks/Analyses/latency.qmd.links.md"
    for note in (f"F/{LONG_MD}", f"F/{LONG_QMD}", "F/" + "é" * 125 + ".md", "日本" * 42 + ".md"):
        page = backlinks_page(note)
        name = page.rsplit("/", 1)[1]
        assert len(name.encode("utf-8")) <= MAX_NAME_BYTES and name.endswith(".links.md")
        assert page.startswith("backlinks/F/" if note.startswith("F/") else "backlinks/")
        assert backlinks_page(note) == page  # stable
    assert backlinks_page(f"F/{'a' * 251}.md") != backlinks_page(f"F/{'a' * 252}.md")  # distinct


def test_bounded_name_cuts_on_a_character_boundary():
    name = bounded_name("é" * 200, ".md", "key")
    assert len(name.encode("utf-8")) <= MAX_NAME_BYTES and name.encode("utf-8").decode("utf-8") == name
    assert name.startswith("é" * 100) and "~" in name


def test_a_long_legal_note_name_compiles(make_vault, cli):
    vault = make_vault({f"F/{LONG_MD}": "# Long\n\nSee [[Other]].\n", f"F/{LONG_QMD}": "# Quarto\n",
                        "Other.md": "# Other\n"})
    code, _, err = cli("compile", str(vault))
    assert code == 0, err
    assert "3 notes" in err and "0 warnings" in err
    for note in (f"F/{LONG_MD}", f"F/{LONG_QMD}"):
        assert (vault / "_engram" / backlinks_page(note)).is_file()
    code, _, err = cli("compile", str(vault))  # stable: the second run writes nothing
    assert code == 0 and "0 pages written" in err
