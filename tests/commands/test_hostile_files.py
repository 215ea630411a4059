"""Hostile files in a vault (issue 11): long names, symlinks, NUL bytes, FIFOs. Nothing crashes,
nothing is written outside the vault, nothing is skipped without a word."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.errors import UsageError
from compiler.core.files import MAX_NAME_BYTES, bounded_name, contained, write_pages
from compiler.core.settings import Settings
from compiler.embed.embedder import model_identity
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import store_memory
from compiler.render.notes import backlinks_page
from tests.conftest import FakeEmbedder

LONG_MD = "a" * 250 + ".md"  # a legal name: 253 bytes
LONG_QMD = "b" * 243 + ".qmd"  # 247 bytes: "….qmd.links.md" would be 256


@pytest.fixture
def cli(monkeypatch):
    """Returns a runner of `engram …` (exit code, stdout, stderr) that embeds with FakeEmbedder."""
    fake = FakeEmbedder()
    fake.identity = model_identity(Settings().model)
    monkeypatch.setattr("compiler.pipeline.index.load_embedder", lambda name: fake)
    monkeypatch.setattr("compiler.memory.vault.load_embedder", lambda name: fake)

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


# --- item 4: symlinks never take a write out of the vault ----------------------------------


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def test_contained_names_the_symlink_that_leads_out(make_vault, outside):
    vault = make_vault({"A.md": "# A\n"})
    (vault / "_engram").symlink_to(outside, target_is_directory=True)
    assert contained(vault, vault / "A.md") == (vault / "A.md").resolve()
    with pytest.raises(UsageError, match=r"^_engram: a symlink to .*outside, outside the vault; refusing"):
        contained(vault, vault / "_engram" / "catalog.md")
    with pytest.raises(UsageError, match="_engram: a symlink"):
        write_pages(vault, "_engram", {"catalog.md": "x"})
    assert files_under(outside) == []


def test_a_symlinked_output_folder_stops_the_compile_with_one_line(make_vault, cli, outside):
    vault = make_vault({"A.md": "# A\n"})
    (vault / "_engram").symlink_to(outside, target_is_directory=True)
    code, out, err = cli("compile", str(vault))
    assert code == 2 and out == ""
    assert err == f"engram: _engram: a symlink to {outside.resolve()}, outside the vault; refusing to write there " \
                  "(remove the symlink)\n"
    assert files_under(outside) == []


def test_a_symlinked_backlinks_folder_is_one_line_not_a_traceback(make_vault, cli, outside):
    vault = make_vault({"A.md": "# A\n", "Notes/B.md": "# B\n"})
    (vault / "_engram").mkdir()
    (vault / "_engram/backlinks").symlink_to(outside, target_is_directory=True)
    code, _, err = cli("compile", str(vault))
    assert code == 2 and err == f"engram: refusing to write outside _engram/: _engram/backlinks is a symlink to " \
                                f"{outside.resolve()}\n"
    (vault / "_engram/backlinks").unlink()
    (vault / "_engram/backlinks").symlink_to(vault / "Notes", target_is_directory=True)  # inside, not ours
    code, _, err = cli("compile", str(vault))
    assert code == 2 and err.startswith("engram: refusing to write outside _engram/: _engram/backlinks is a symlink")
    assert files_under(outside) == [] and files_under(vault / "Notes") == ["B.md"]


def test_a_symlinked_chunks_folder_refuses_the_export(make_vault, cli, outside):
    vault = make_vault({"A.md": "# A\n"})
    with VaultMemory(vault, Settings(), embedder=FakeEmbedder()) as memory:
        store_memory(memory, MemoryInput(content="Deploys go out on Tuesdays", project="ops"))
    (vault / ".engram/chunks").symlink_to(outside, target_is_directory=True)
    code, _, err = cli("sync", "export", "--vault", str(vault))
    assert code == 2
    assert err == f"engram: .engram/chunks: a symlink to {outside.resolve()}, outside the vault; refusing to " \
                  "write there (remove the symlink)\n"
    assert files_under(outside) == []


def test_a_symlinked_state_folder_refuses_every_writer(make_vault, cli, outside):
    vault = make_vault({"A.md": "# A\n"})
    (vault / ".engram").symlink_to(outside, target_is_directory=True)
    for args in (["compile", str(vault)], ["sync", "export", "--vault", str(vault)],
                 ["memory", "add", "Deploys go out on Tuesdays", "--vault", str(vault)]):
        code, _, err = cli(*args)
        assert code == 2 and err.startswith("engram: .engram: a symlink to"), (args, err)
    assert files_under(outside) == []


# --- item 9: nothing skipped without a word -------------------------------------------------


def test_nul_bytes_symlinks_and_fifos_are_reported_and_listed_in_health(make_vault, cli, outside):
    vault = make_vault({"Nul.md": b"# Nul note\n\nsearchable\x00 words about kayaks\n",
                        "image.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
                        "Real/Inside.md": "# Inside\n"})
    (outside / "Secret.md").write_text("# Secret\n")
    (vault / "Linked").symlink_to(vault / "Real", target_is_directory=True)
    (vault / "secret.md").symlink_to(outside / "Secret.md")
    os.mkfifo(vault / "pipe.md")
    code, out, err = cli("compile", str(vault), "--json")
    assert code == 0, err
    assert err.splitlines()[:5] == [
        "warning: Linked: symlinked folder, not followed: its notes are not indexed",
        "warning: Nul.md:3: 1 NUL byte (first on line 3) removed; the rest is indexed as text",
        "warning: image.md: binary file, skipped",
        "warning: pipe.md: not a regular file (a FIFO), skipped",
        "warning: secret.md: symlink to a file outside the vault, skipped",
    ]
    assert "2 notes" in err and "5 warnings" in err
    report = json.loads(out)
    assert sorted(w["kind"] for w in report["warnings"]) == ["binary", "nul", "skipped", "skipped", "skipped"]
    health = (vault / "_engram/health.md").read_text()
    for line in ("- `Linked` (skipped): symlinked folder, not followed: its notes are not indexed",
                 "- `Nul.md` line 3 (nul): 1 NUL byte (first on line 3) removed; the rest is indexed as text",
                 "- `pipe.md` (skipped): not a regular file (a FIFO), skipped",
                 "- `secret.md` (skipped): symlink to a file outside the vault, skipped"):
        assert line in health
    code, out, _ = cli("search", "kayaks", "--vault", str(vault), "--json")
    assert code == 0 and [hit["file"] for hit in json.loads(out)] == ["Nul.md"]
    code, _, err = cli("compile", str(vault))  # the warnings stay, once each, on the next build
    assert code == 0 and err.count("pipe.md") == 1 and "5 warnings" in err


def test_a_memory_page_reached_through_a_symlink_is_not_read_back_as_an_edit(make_vault, cli, tmp_path):
    vault = make_vault({"A.md": "# A\n"})
    with VaultMemory(vault, Settings(), embedder=FakeEmbedder()) as memory:
        store_memory(memory, MemoryInput(content="Deploys go out on Tuesdays", project="ops"))
    assert cli("compile", str(vault))[0] == 0
    elsewhere = tmp_path / "elsewhere"
    (vault / "_engram/memory").rename(elsewhere)
    (vault / "_engram/memory").symlink_to(elsewhere, target_is_directory=True)
    page = next(p for p in elsewhere.rglob("*.md") if p.name != "archive.md")
    page.write_text(page.read_text().replace("Deploys go out on Tuesdays", "Deploys go out on Fridays"))
    code, _, err = cli("compile", str(vault))
    assert code == 2 and err.startswith("engram: refusing to write outside _engram/: _engram/memory is a symlink")
    journal = (vault / ".engram/journal.jsonl").read_text()
    assert "Fridays" not in journal  # nothing read back through the link
