"""compiler.commands.setup as a library: what `engram setup` and `engram install-hook` return and
raise, without the CLI. Fast: no model (the model check is covered in tests/mcp_server)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from compiler.commands.setup import (
    HOOK_MARKER,
    MEMORY_RULES,
    hook_script,
    install_hook,
    setup_vault,
)
from compiler.core.errors import EngramError, GitError, UsageError

needs_git = pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")


def test_setup_returns_what_it_created_and_the_agent_configs(tmp_path):
    result = setup_vault(str(tmp_path), project="web", check_model=False)
    assert result["vault"] == str(tmp_path.resolve()) and result["model"] == {"skipped": True}
    assert result["created"] == [".engram/", ".engram/.gitignore", "engram.toml", "raw/", "wiki/", "wiki/AGENTS.md"]
    assert result["cursor"] == result["claude_desktop"] and result["rules"] == MEMORY_RULES
    assert setup_vault(str(tmp_path), check_model=False)["created"] == []  # idempotent


def test_setup_raises_usage_errors(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="no such folder"):
        setup_vault(str(tmp_path / "nope"), check_model=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ENGRAM_VAULT", raising=False)
    with pytest.raises(UsageError, match=r"engram setup ~/vault"):
        setup_vault(None, check_model=False)
    (tmp_path / "engram.toml").write_text("out = [not toml\n")
    with pytest.raises(UsageError):  # a bad engram.toml a person wrote is reported, not overwritten
        setup_vault(str(tmp_path), check_model=False)
    assert (tmp_path / "engram.toml").read_text() == "out = [not toml\n"


def test_the_hook_script_quotes_the_vault_path():
    script = hook_script("my notes/vault")
    assert script.startswith("#!/bin/sh\n" + HOOK_MARKER)
    assert script.rstrip().endswith("check \"$(git rev-parse --show-toplevel)\"/'my notes/vault'")


@needs_git
def test_install_hook_raises_git_error_outside_a_repository(tmp_path):
    with pytest.raises(GitError, match="not inside a git repository"):
        install_hook(tmp_path)


@needs_git
def test_install_hook_refuses_a_foreign_hook_with_exit_1(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    hook = tmp_path / ".git/hooks/pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\nmake lint\n")
    with pytest.raises(EngramError, match="not written by engram") as refused:
        install_hook(tmp_path)
    assert refused.value.exit_code == 1 and hook.read_text() == "#!/bin/sh\nmake lint\n"
    result = install_hook(tmp_path, force=True)
    assert result == {"hook": str(hook.resolve()), "vault": str(tmp_path.resolve()),
                      "replaced": str(hook.resolve().with_name("pre-commit.engram-backup"))}
    assert Path(result["replaced"]).read_text() == "#!/bin/sh\nmake lint\n"
    assert install_hook(tmp_path)["replaced"] == ""  # our own hook is replaced without force


def test_setup_adopts_an_existing_wiki_and_keeps_an_edited_schema(tmp_path):
    """A vault with its own raw/ and wiki/ keeps every file; a person's AGENTS.md is theirs."""
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "paper.md").write_text("# Paper\n")
    (tmp_path / "wiki" / "concepts").mkdir(parents=True)
    (tmp_path / "wiki" / "concepts" / "Idea.md").write_text("An idea.\n")
    (tmp_path / "wiki" / "AGENTS.md").write_text("My own rules.\n")
    result = setup_vault(str(tmp_path), check_model=False)
    assert "wiki/AGENTS.md" not in result["created"] and "raw/" not in result["created"]
    assert (tmp_path / "wiki" / "AGENTS.md").read_text() == "My own rules.\n"
    assert (tmp_path / "raw" / "paper.md").read_text() == "# Paper\n"
    assert (tmp_path / "wiki" / "concepts" / "Idea.md").read_text() == "An idea.\n"


def test_setup_refreshes_the_schema_it_wrote_but_not_one_a_person_edited(tmp_path):
    setup_vault(str(tmp_path), check_model=False)
    schema = tmp_path / "wiki" / "AGENTS.md"
    schema.write_text(schema.read_text() + "\nAlso: cite page numbers.\n")
    assert setup_vault(str(tmp_path), check_model=False)["created"] == []
    assert schema.read_text().endswith("Also: cite page numbers.\n")
