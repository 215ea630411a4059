"""The other `engram`s' invocations (issue 12, item 4): the Go engram CLI's and mcp-engram's.

`engram mcp`, `engram save TITLE CONTENT`, `engram sync --import/--export` from cron, mcp-engram's
`{"command": "engram"}` (no arguments, stdin a pipe → MCP; a terminal → the help), one line
for a Go command whose meaning differs here, and the second script name `engram-vault`.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from compiler.cli.main import main
from tests.events.test_chunks import GOLDEN, put_chunk

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-11-30 12:00:00"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "ENGRAM_NOW": NOW}


def run(*args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=list(args))
    try:
        return result.exit_code, json.loads(result.stdout), result.stderr
    except json.JSONDecodeError:
        return result.exit_code, None, result.stderr


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})


@pytest.mark.integration
def test_go_cli_save_and_cron_sync_lines(vault):
    code, saved, _ = run("save", "JWT leeway", "A 30 s leeway fixed the exp check", "--type", "bugfix",
                         "--project", "api", "--vault", str(vault), "--now", NOW, "--json")
    assert code == 0 and saved["action"] == "new"
    code, exported, _ = run("sync", "--export", "--vault", str(vault), "--json")
    assert code == 0 and exported["chunk"] and exported["memories"] == 1
    put_chunk(vault, (GOLDEN / "engram-cli-chunk.json").read_bytes())
    code, imported, _ = run("sync", "--import", "--vault", str(vault), "--json")
    assert code == 0 and imported["memories_new"] == 3 and imported["compile"]
    code, status, _ = run("sync", "--status", "--vault", str(vault), "--json")
    assert code == 0 and status["chunks"]["local"] == 2
    code, _, err = run("sync", "--import", "--export", "--vault", str(vault))
    assert code == 2 and "one of --import" in err


def test_go_commands_that_mean_something_else_answer_in_one_line(vault):
    for args, words in ((["tui"], "Obsidian"), (["stats"], "engram memory stats"), (["export"], "engram sync export"),
                        (["search", "jwt", "--limit", "3", "--vault", str(vault)], "engram recall QUERY"),
                        (["serve", "7437"], "HTTP API")):
        code, _, err = run(*args)
        assert code == 2 and err.count("\n") == 1 and err.startswith("engram: ") and words in err, (args, err)
    code, _, err = run("nonsense")
    assert code == 2 and "No such command" in err  # an unknown word is still click's usage error


def test_no_arguments_at_a_terminal_prints_the_help(vault):
    main_fd, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "compiler"], stdin=terminal, capture_output=True, text=True,
                              env={**ENV, "ENGRAM_VAULT": str(vault)}, timeout=60, check=False)
    finally:
        os.close(terminal)
        os.close(main_fd)
    assert done.returncode == 0 and "Usage:" in done.stdout and "engram-vault" in done.stdout


async def _initialize(args: list[str], env: dict[str, str]) -> tuple[Any, list[str]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "compiler", *args], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        hello = await session.initialize()
        tools = await session.list_tools()
        return hello.serverInfo, sorted(t.name for t in tools.tools)


@pytest.mark.parametrize("args", [[], ["mcp"]], ids=["mcp-engram: no arguments", "Go CLI: engram mcp"])
def test_mcp_engram_config_and_go_mcp_serve_over_stdio(vault, args):
    info, tools = asyncio.run(asyncio.wait_for(_initialize(args, {**ENV, "ENGRAM_VAULT": str(vault)}), 300))
    assert info.version == importlib.metadata.version("engram-vault-compiler")
    assert {"store_memory", "recall_memory", "mem_save", "mem_search", "mem_get_observation"} <= set(tools)


def test_the_second_script_name_is_installed(tmp_path):
    """pip installs `engram-vault` beside `engram` (pyproject [project.scripts]), both this program."""
    # --target, not --prefix: `pip install --prefix` first uninstalls this package from the test's own
    # environment, taking its `engram` with it.
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(ROOT)], check=True, capture_output=True, timeout=600)
    scripts = {p.name for p in (target / "bin").iterdir()}
    assert {"engram", "engram-vault"} <= scripts
    script = str(target / "bin" / "engram-vault")  # run by this interpreter, which has the dependencies
    version = subprocess.run([sys.executable, script, "--version"], capture_output=True, text=True,
                             env=ENV, timeout=60, check=False)
    assert version.returncode == 0 and importlib.metadata.version("engram-vault-compiler") in version.stdout
    hint = subprocess.run([sys.executable, script, "tui"], capture_output=True, text=True, env=ENV,
                          timeout=60, check=False)
    assert hint.returncode == 2 and "Go engram CLI" in hint.stderr
