"""What every `engram` command promises, read from the command tree itself: `--vault` (and
$ENGRAM_VAULT), `--json`, and an expected failure answered as one line on stderr. Fast: no model.

The tree is walked from `compiler.cli.main:main`, so a command added later is held to the same
promises without being listed here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from tests.conftest import ROOT

# serve: stdout is the MCP protocol, so nothing else may be printed there.
NO_JSON = {"serve", "mcp"}  # stdout carries the MCP protocol


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Returns the path of every visible command a person runs: the leaves, and the groups that
    run on their own too (`engram sync`). Hidden commands (the git merge driver) are left out."""
    found = []
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        if not isinstance(command, click.Group) or command.invoke_without_command:
            found.append((*path, name))
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
    return found


def help_text(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def lists_option(help_output: str, option: str) -> bool:
    """Whether `option` is in the help's option list (not merely mentioned in a description)."""
    return re.search(rf"^\s+(-\w, )?{re.escape(option)}\b", help_output, re.MULTILINE) is not None


def test_the_walk_sees_the_commands_and_the_subcommands():
    found = {" ".join(path) for path in commands()}
    assert {"check", "compile", "setup", "install-hook", "serve", "sync", "sync status", "memory show",
            "track failure", "handoff load"} <= found
    assert "merge-manifest" not in found and "memory" not in found  # hidden; a group that only holds commands


@pytest.mark.parametrize("path", commands(), ids=" ".join)
def test_every_command_takes_vault(path):
    assert lists_option(help_text(path), "--vault"), f"engram {' '.join(path)} has no --vault"


@pytest.mark.parametrize("path", [p for p in commands() if " ".join(p) not in NO_JSON], ids=" ".join)
def test_every_command_but_serve_takes_json(path):
    assert lists_option(help_text(path), "--json"), f"engram {' '.join(path)} has no --json"


def test_serve_says_why_it_has_no_json():
    shown = help_text(("serve",))
    assert not lists_option(shown, "--json") and "stdout carries the protocol" in shown


# -- an expected failure: one line, an exit code, no traceback -------------------------------------

def one_line_failure(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Runs `engram args` (exceptions propagate: a crash fails the test); returns (exit code, the
    one stderr line), asserting nothing else was printed."""
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: "), result.stderr
    assert "Traceback" not in result.output and result.stdout == ""
    return result.exit_code, lines[0]


def test_no_such_vault_is_one_line_and_exit_2(tmp_path):
    missing = str(tmp_path / "no/such/dir")
    assert one_line_failure(["check", "--vault", missing]) == (2, f"engram: no such vault folder: {missing}")
    assert one_line_failure(["check", missing])[0] == 2  # the positional shortcut
    assert one_line_failure(["check"], env={"ENGRAM_VAULT": missing})[0] == 2  # $ENGRAM_VAULT through --vault
    assert one_line_failure(["setup", "--vault", missing, "--skip-model-check"]) == (2, f"engram: no such folder: {missing}")


def test_an_unknown_memory_is_one_line_and_exit_1(make_vault):
    vault = make_vault({".obsidian/app.json": "{}"})
    code, line = one_line_failure(["memory", "show", "no-such-id", "--vault", str(vault)])
    assert code == 1 and "no-such-id" in line


def test_a_real_process_prints_no_traceback(tmp_path):
    """The runner above is Click's; this is a real `engram` process, as a shell or git hook sees it."""
    done = subprocess.run([sys.executable, "-m", "compiler", "install-hook", "--vault", str(tmp_path / "nope")],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"engram: no such vault folder: {tmp_path / 'nope'}"]


def test_group_options_before_a_sync_subcommand_count_for_it(make_vault):
    vault = make_vault({"Note.md": "# Note\n"})
    before = CliRunner().invoke(main, ["sync", "--vault", str(vault), "status", "--json"], catch_exceptions=False)
    after = CliRunner().invoke(main, ["sync", "status", "--vault", str(vault), "--json"], catch_exceptions=False)
    assert before.exit_code == after.exit_code == 0, before.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert json.loads(before.stdout)["pending_export"] == {"events": 0, "memories": 0,
                                                          "redacted": {"count": 0, "memories": {}}}
