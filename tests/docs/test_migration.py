"""docs/migration.md, run: every command and config on the page, as written, against real vaults.

The page's paths (`~/code/api`, `/home/me/vault`, `/srv/vault`, the OpenClaw sessions folder)
are swapped for temp folders; everything else is the page's text. `engram` on PATH is this
checkout (a wrapper around `python -m compiler`). Uses the real bundled model.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.events.test_chunks import GOLDEN, put_chunk
from tests.sync.test_bridges import openclaw_lines, write_jsonl
from tests.sync.test_go_interop import go_import

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "migration.md").read_text(encoding="utf-8")
NOW = "2026-11-30 12:00:00"


def section(title: str) -> str:
    start = PAGE.index(f"## {title}")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start:end if end > 0 else len(PAGE)]


def blocks(title: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(title), re.DOTALL)


def commands(block: str) -> list[str]:
    """The block's lines without comments (`#` after two spaces, as the page writes them)."""
    return [re.split(r"\s{2,}#", line)[0].strip() for line in block.splitlines() if line.strip()]


def cron_command(line: str) -> str:
    """The command of a cron line, without the schedule and the output redirection."""
    return " ".join(line.split()[5:]).replace(" >/dev/null 2>&1", "")


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "engram").write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m compiler "$@"\n')
    (bin_dir / "engram").chmod(0o755)
    git_config = tmp_path / "gitconfig"
    git_config.write_text("[user]\n\tname = Engram Test\n\temail = test@engram.invalid\n")
    values = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ENGRAM_NOW": NOW,
              "GIT_CONFIG_GLOBAL": str(git_config), "GIT_CONFIG_NOSYSTEM": "1"}
    values.pop("ENGRAM_VAULT", None)
    return values


def run(line: str, cwd: Path, env: dict[str, str], swap: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for old, new in swap.items():
        line = line.replace(old, new)
    done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, (line, done.stderr[-1500:])
    return done


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_from_the_go_engram_cli(tmp_path, env):
    repo = tmp_path / "api"
    repo.mkdir()
    put_chunk(repo, (GOLDEN / "engram-cli-chunk.json").read_bytes())  # what the Go CLI's sync left there
    swap = {"~/code/api": str(repo)}
    lines = commands(blocks("From the Go engram CLI", "sh")[0])
    assert lines[0].startswith("cd ~/code/api")
    outputs = [run(f"{lines[0]} && {line}", tmp_path, env, swap) for line in lines[1:]]
    assert "JWT clock skew" in outputs[1].stdout  # the ten-month-old Go memory is found
    rows = go_import(repo)  # what a Go machine imports from the manifest's chunks
    titles = [r["title"] for r in rows]
    assert titles.count("Pin Node") == 1 and titles.count("JWT clock skew") == 1
    cron = [cron_command(line) for line in commands(blocks("From the Go engram CLI", "cron")[0])]
    assert [c.split(" && ")[1] for c in cron] == ["engram sync --import", "engram sync --export"]
    for line in cron:
        run(line, tmp_path, env, swap)
    mcp_line = commands(blocks("From the Go engram CLI", "sh")[1])[0]
    server = shlex.split(mcp_line.split(" -- ", 1)[1].replace("/home/me/vault", str(repo)))
    assert server[:2] == ["engram", "mcp"]
    assert "mem_timeline" in asyncio.run(list_tools(server, env))


async def list_tools(command: list[str], env: dict[str, str]) -> list[str]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        stored = await session.call_tool("store_memory", {"content": "Deploys need a green build", "importance": 1.2})
        assert not stored.isError and "warnings" in stored.content[0].text
        return [t.name for t in (await session.list_tools()).tools]


def test_from_mcp_engram(tmp_path, env, make_vault):
    vault = make_vault({"vault/.obsidian/app.json": "{}", "vault/Home.md": "# Home\n"}) / "vault"
    config = json.loads(blocks("From mcp-engram", "json")[0])["mcpServers"]["engram"]
    assert config["command"] == "engram" and "args" not in config
    server_env = {**env, **{k: v.replace("/home/me/vault", str(vault)) for k, v in config["env"].items()}}
    assert "store_memory" in asyncio.run(list_tools([config["command"]], server_env))
    (tmp_path / "memories.jsonl").write_text(json.dumps({"content": "The API listens on 8080", "project": "api",
                                                         "source_id": "old-1"}) + "\n")
    line = commands(blocks("From mcp-engram", "sh")[0])[0]
    run(line, tmp_path, env, {"/home/me/vault": str(vault)})
    again = run(line + " --json", tmp_path, env, {"/home/me/vault": str(vault)})
    assert json.loads(again.stdout)["actions"] == {"known": 1}  # importing twice adds nothing


def test_from_the_openclaw_bridge(tmp_path, env):
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "--quiet", str(bare), "vault")
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir()
    (vault / "Home.md").write_text("# Home\n")
    git(vault, "add", "-A")
    git(vault, "commit", "--quiet", "-m", "vault")
    git(vault, "push", "--quiet", "origin", "HEAD:main")
    sessions = tmp_path / "sessions"
    write_jsonl(sessions / "s-1.jsonl", openclaw_lines("s-1"))
    swap = {"/srv/vault": str(vault), "~/.openclaw/agents/main/sessions": str(sessions)}
    install, line = commands(blocks("From the OpenClaw bridge", "sh")[0])
    run(install, tmp_path, env, swap)
    exported = run(line + " --json", tmp_path, env, swap)
    assert json.loads(exported.stdout)["bridged"]["calls"] >= 2
    cron = cron_command(commands(blocks("From the OpenClaw bridge", "cron")[0])[0])
    run(cron, tmp_path, env, swap)
    assert "engram sync" in git(bare, "log", "--format=%s", "main")  # committed and pushed
    assert git(vault, "status", "--porcelain") == ""
