"""`engram check`, `engram install-hook` and the pre-commit hook definition. Fast: a fake embedder.

The fake embedder takes the bundled model's identity, so the check sees the build as made with
the configured model (it compares identities, never loads the model).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.check import check_vault
from compiler.commands.setup import HOOK_MARKER
from compiler.core.settings import Settings, load_settings
from compiler.embed.embedder import model_identity
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import store_memory
from compiler.pipeline.spine import compile_vault
from tests.conftest import EXAMPLE_VAULT, ROOT, FakeEmbedder

NOTES = {
    ".obsidian/app.json": "{}",
    "Home.md": "# Home\n\nStart at [[Alpha]].\n",
    "Projects/Alpha.md": "# Alpha\n\nThe alpha project ships the payments API.\n",
    "Projects/Beta.md": "# Beta\n\nBeta depends on [[Alpha]].\n",
}
NOW = "2026-11-30 12:00:00"


@pytest.fixture
def embedder() -> FakeEmbedder:
    fake = FakeEmbedder()
    fake.identity = model_identity(Settings().model)
    return fake


def compile_now(vault: Path, embedder: FakeEmbedder) -> None:
    compile_vault(vault, load_settings(vault, now=NOW), embedder=embedder)


@pytest.fixture
def vault(make_vault, embedder) -> Path:
    vault = make_vault(NOTES)
    with VaultMemory(vault, Settings(now=NOW), embedder=embedder) as memory:
        store_memory(memory, MemoryInput(content="Deploys go out on Tuesdays", project="ops"))
    compile_now(vault, embedder)
    return vault


def problems(vault: Path) -> list[tuple[str, str]]:
    return [(p.file, p.kind) for p in check_vault(vault, load_settings(vault)).problems]


def run_check(vault: Path) -> tuple[int, dict, str]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=["check", str(vault), "--json"])
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_a_fresh_compile_passes(vault):
    code, report, err = run_check(vault)
    assert code == 0 and report["ok"] and report["problems"] == []
    assert report["notes"] == 3 and report["events"] == 1 and report["pages"] > 3
    assert "engram check: ok" in err


def test_stale_notes_are_named(vault):
    (vault / "Projects/Alpha.md").write_text("# Alpha\n\nNow it ships the billing API too.\n")
    (vault / "New.md").write_text("# New\n")
    (vault / "Projects/Beta.md").unlink()
    code, report, err = run_check(vault)
    assert code == 1 and not report["ok"]
    assert {(p["file"], p["kind"]) for p in report["problems"]} == {
        ("Projects/Alpha.md", "stale-note"), ("New.md", "stale-note"), ("Projects/Beta.md", "stale-note")}
    assert "stale-note: Projects/Alpha.md: edited since the last compile" in err and "run `engram compile`" in err


def test_the_vault_is_an_argument_an_option_or_the_environment(vault):
    runner = CliRunner()
    for args, env in ((["check", str(vault)], {}), (["check", "--vault", str(vault)], {}),
                      (["check"], {"ENGRAM_VAULT": str(vault)}),
                      (["check", str(vault), "--vault", str(vault / "nope")], {})):  # the argument wins
        result = runner.invoke(main, [*args, "--json"], env=env, catch_exceptions=False)
        assert result.exit_code == 0, (args, result.stderr)
        assert json.loads(result.stdout)["vault"] == str(vault.resolve())


def test_touching_a_note_without_changing_it_is_not_stale(vault):
    os.utime(vault / "Home.md", (1, 1))
    assert problems(vault) == []


def test_edited_missing_and_leftover_pages_are_named(vault):
    (vault / "_engram/catalog.md").unlink()
    page = vault / "_engram/backlinks/Projects/Alpha.links.md"
    page.write_text(page.read_text() + "\nsomeone edited this\n")
    (vault / "_engram/old.md").write_text("---\ngenerated_by: engram\n---\n# Old\n")
    (vault / "_engram/mine.md").write_text("# A person's file: not ours to judge\n")
    assert sorted(problems(vault)) == [("_engram/backlinks/Projects/Alpha.links.md", "edited-page"),
                                       ("_engram/catalog.md", "missing-page"), ("_engram/old.md", "leftover-page")]


def test_memory_events_after_the_compile_make_memory_pages_stale(vault, embedder):
    with VaultMemory(vault, Settings(now=NOW), embedder=embedder) as memory:
        store_memory(memory, MemoryInput(content="Rollbacks use the previous image tag", project="ops"))
    assert problems(vault) == [(".engram/journal.jsonl", "stale-memory")]
    compile_now(vault, embedder)
    assert problems(vault) == []


def test_corrupt_and_torn_journal_lines_are_named_with_their_line(vault):
    with open(vault / ".engram/journal.jsonl", "a", encoding="utf-8") as journal:
        journal.write('{"oops": \n{"id": "half a line')
    report = check_vault(vault, load_settings(vault))
    found = [(p.file, p.line, p.kind) for p in report.problems]
    assert (".engram/journal.jsonl", 2, "corrupt-journal") in found  # line 1 is the stored memory
    assert (".engram/journal.jsonl", 3, "corrupt-journal") in found  # the torn last line


def test_corrupt_manifest_and_chunks_are_named(vault):
    chunks = vault / ".engram/chunks"
    chunks.mkdir()
    (chunks / "aaaaaaaa.jsonl.gz").write_bytes(b"not gzip at all")
    (chunks / "bbbbbbbb.jsonl.gz").write_bytes(gzip.compress(b'{"observations": [}'))
    (vault / ".engram/manifest.json").write_text(json.dumps(
        {"version": 1, "chunks": [{"id": i} for i in ("aaaaaaaa", "bbbbbbbb", "dddddddd")]}))
    found = {file for file, kind in problems(vault) if kind == "corrupt-chunk"}
    assert found == {".engram/chunks/aaaaaaaa.jsonl.gz", ".engram/chunks/bbbbbbbb.jsonl.gz",
                     ".engram/manifest.json"}  # the manifest lists dddddddd, which is missing
    (vault / ".engram/manifest.json").write_text('{"version": 1, "chunks": [')
    report = check_vault(vault, load_settings(vault))
    assert any(p.file == ".engram/manifest.json" and "manifest" in p.message for p in report.problems)


def test_a_vault_never_compiled_fails(make_vault):
    vault = make_vault(NOTES)
    code, report, err = run_check(vault)
    assert code == 1 and report["problems"][0]["kind"] == "not-compiled" and "never compiled" in err


def test_changed_index_settings_are_reported(vault):
    (vault / "engram.toml").write_text("max_section_chars = 300\n")
    assert ("engram.toml", "settings") in problems(vault)


def test_check_loads_neither_torch_nor_chroma(vault):
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "compiler", "check", str(vault)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not {"torch", "chromadb", "sentence_transformers"} & imported


def test_check_on_the_example_vault_passes_after_a_compile(tmp_path, embedder):
    """Its speed is measured in `make bench` (benchmarks/bench.py), not asserted here."""
    vault = tmp_path / "example"
    shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns(".engram", "_engram"))
    compile_vault(vault, load_settings(vault), embedder=embedder)
    done = subprocess.run([str(Path(sys.executable).parent / "engram"), "check", str(vault)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("engram check: ok"), done.stderr


# -- the git hook ------------------------------------------------------------------------------

needs_git = pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")


@pytest.fixture
def repo(tmp_path, embedder) -> tuple[Path, Path]:
    """A git repository with the vault in a sub-folder, compiled."""
    top = tmp_path / "repo"
    vault = top / "notes"
    for relative, text in NOTES.items():
        (vault / relative).parent.mkdir(parents=True, exist_ok=True)
        (vault / relative).write_text(text)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    compile_now(vault, embedder)
    return top, vault


def install(vault: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=["install-hook", "--vault", str(vault), *args])
    return result.exit_code, result.stderr


@needs_git
def test_install_hook_writes_an_executable_hook_that_runs_check(repo):
    top, vault = repo
    code, err = install(vault)
    hook = top / ".git/hooks/pre-commit"
    assert code == 0 and "installed" in err
    assert os.access(hook, os.X_OK) and 'check "$(git rev-parse --show-toplevel)"/notes' in hook.read_text()
    ok = subprocess.run(["sh", str(hook)], cwd=top, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    (vault / "Home.md").write_text("# Home\n\nEdited without compiling.\n")
    stale = subprocess.run(["sh", str(hook)], cwd=top, capture_output=True, text=True)
    assert stale.returncode == 1 and "Home.md" in stale.stderr
    assert install(vault)[0] == 0  # our own hook is replaced without --force


@needs_git
def test_install_hook_refuses_a_foreign_hook_unless_forced(repo):
    top, vault = repo
    hook = top / ".git/hooks/pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\nmake lint\n")
    code, err = install(vault)
    assert code == 1 and hook.read_text() == "#!/bin/sh\nmake lint\n"
    assert err.startswith("engram: ") and "not written by engram" in err and len(err.splitlines()) == 1
    code, err = install(vault, "--force")
    assert code == 0 and (top / ".git/hooks/pre-commit.engram-backup").read_text() == "#!/bin/sh\nmake lint\n"
    assert "old hook kept as" in err and HOOK_MARKER in hook.read_text()


@needs_git
def test_install_hook_answers_json_and_follows_core_hooks_path(repo):
    top, vault = repo
    subprocess.run(["git", "-C", str(top), "config", "core.hooksPath", ".githooks"], check=True)
    result = CliRunner().invoke(main, catch_exceptions=False, args=["install-hook", str(vault), "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"hook": str((top / ".githooks/pre-commit").resolve()),
                                         "vault": str(vault.resolve()), "replaced": ""}
    assert os.access(top / ".githooks/pre-commit", os.X_OK) and not (top / ".git/hooks/pre-commit").exists()


def test_install_hook_outside_git_fails_clearly(make_vault):
    vault = make_vault(NOTES)
    code, err = install(vault)
    assert code == 1 and ("not inside a git repository" in err or "git is not installed" in err)
    assert err.startswith("engram: ") and len(err.splitlines()) == 1  # one line, no traceback


def test_pre_commit_hook_definition():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "engram-check")
    assert hook["entry"] == "engram check" and hook["pass_filenames"] is False
    assert hook["language"] in ("system", "python")
