"""`engram serve|setup|check|install-hook`: how agents, git and editors plug into a vault.

Thin adapters: `serve` runs compiler.mcp_server.server, `check` prints compiler.commands.check's
report, `setup` and `install-hook` call compiler.commands.setup. Human output goes to stderr;
--json prints one JSON value on stdout. Expected failures are raised, and answered by EngramGroup.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import click

from compiler.cli.common import (
    emit_json,
    json_option,
    now_option,
    vault_and_settings,
    vault_argument,
    vault_option,
)


@click.command("serve")
@vault_option
@click.option("--project", default="", envvar="ENGRAM_PROJECT",
              help="Default project: memories are stored in it and recalled from it (tools with `project` override).")
@click.option("--model", help="Embedding model: multilingual-e5-small, or a sentence-transformers directory or name.")
@click.option("--chroma-url", envvar="ENGRAM_CHROMA_URL", help="Use a Chroma server instead of the embedded store.")
@now_option
@click.option("--no-maintenance", is_flag=True, help="Do not consolidate and archive at start and every 12 h.")
def serve_command(vault: str | None, project: str, model: str | None, chroma_url: str | None, now: str | None,
                  no_maintenance: bool) -> None:
    """Serve the vault's memory to an agent over MCP (stdio).

    \b
    Claude Code:  claude mcp add engram -- engram serve --vault ~/vault
    Cursor:       see `engram setup` for the .cursor/mcp.json block
    stdout carries the protocol (so there is no --json); logs go to stderr.
    """
    # mcp and pydantic: only for this command
    from compiler.mcp_server.server import serve_stdio

    root, settings = vault_and_settings(vault, model=model, chroma_url=chroma_url, now=now)
    serve_stdio(root, settings, project=project, maintenance=not no_maintenance)


@click.command("check")
@vault_argument
@vault_option
@json_option
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but the problems.")
def check_command(vault_path: str | None, vault: str | None, as_json: bool, quiet: bool) -> None:
    """Check that generated pages are current and memory files sound. Fast: no model.

    Exits 1, naming each file, when a note changed since the last compile, a generated page is
    missing or edited, memory events are newer than the memory pages, or a journal line, a chunk
    or the manifest is corrupt. What the pre-commit hook runs.
    """
    from compiler.commands.check import check_vault

    root, settings = vault_and_settings(vault_path or vault)
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
@vault_argument
@vault_option
@click.option("--project", default="", help="Default project for the agent's memories (added to the serve command).")
@click.option("--skip-model-check", is_flag=True, help="Do not load the embedding model (faster; CI).")
@click.option("--obsidian-exclude", is_flag=True,
              help="Add the output folder to Obsidian's Excluded files (.obsidian/app.json): out of Search and the graph.")
@click.option("--obsidian-graph", is_flag=True,
              help="Add a grey colour group for the output folder to Obsidian's graph (.obsidian/graph.json).")
@json_option
def setup_command(vault_path: str | None, vault: str | None, project: str, skip_model_check: bool,
                  obsidian_exclude: bool, obsidian_graph: bool, as_json: bool) -> None:
    """Prepare VAULT for engram and print how to connect an agent.

    Creates .engram/ and a commented engram.toml when missing, checks that the embedding model
    loads offline (exit 1 when it does not), and prints the Claude Code and Cursor configuration
    and the memory rules to paste into CLAUDE.md (recall first, store what is learned, update
    what changed). VAULT may be any folder: setup makes it a vault.

    It also offers two Obsidian settings that keep the generated pages out of your way, and
    changes Obsidian's files only when asked: --obsidian-exclude, --obsidian-graph.
    """
    from compiler.commands.setup import setup_vault

    asked = frozenset(name for name, on in (("exclude", obsidian_exclude), ("graph", obsidian_graph)) if on)
    result = setup_vault(vault_path or vault, project=project, check_model=not skip_model_check, obsidian=asked)
    if as_json:
        emit_json(result)
    else:
        _print_setup(result)
    sys.exit(1 if result["model"].get("error") else 0)


def _print_setup(result: dict[str, Any]) -> None:
    """Prints setup's result for a person, on stderr: the vault, what was created, the model, the configs."""
    def echo(text: str = "") -> None:
        click.echo(text, err=True)

    echo(f"vault: {result['vault']}")
    echo(f"created: {', '.join(result['created'])}" if result["created"] else "created: nothing (already set up)")
    model = result["model"]
    if model.get("error"):
        echo(f"model: FAILED: {model['error']}")
    elif not model.get("skipped"):
        echo(f"model: {model['identity']} loads offline · {model['dimension']} dimensions · {model['seconds']}s")
    _print_obsidian(result["obsidian"], echo)
    echo("\nClaude Code (run once):\n\n    " + result["claude_code"])
    echo("\nCursor (.cursor/mcp.json in a project, or ~/.cursor/mcp.json) and Claude Desktop "
         "(claude_desktop_config.json):\n")
    echo("\n".join("    " + line for line in json.dumps(result["cursor"], indent=2).splitlines()))
    echo("\nPaste into CLAUDE.md (or AGENTS.md / Cursor rules):\n")
    echo(result["rules"])
    echo("Then: engram compile " + shlex.quote(result["vault"]) + "   (indexes the notes for search_notes)")


def _print_obsidian(obsidian: dict[str, Any], echo: Any) -> None:
    """Prints where each offered Obsidian setting stands, and the option that applies it."""
    if obsidian["error"]:
        echo(f"obsidian: settings not offered: {obsidian['error']}")
        return
    for setting in obsidian["settings"]:
        where = f"{setting['file']} {setting['key']} += {json.dumps(setting['value'])}"
        if setting["state"] == "offered":
            echo(f"obsidian: not changed; `engram setup --obsidian-{setting['name']}` would add {where}")
            echo(f"          ({setting['effect']})")
        else:
            echo(f"obsidian: {'added' if setting['state'] == 'applied' else 'already set'}: {where}")


@click.command("install-hook")
@vault_argument
@vault_option
@click.option("--force", is_flag=True, help="Replace an existing pre-commit hook that engram did not write "
                                            "(it is kept as pre-commit.engram-backup).")
@json_option
def install_hook_command(vault_path: str | None, vault: str | None, force: bool, as_json: bool) -> None:
    """Write a git pre-commit hook that runs `engram check` on VAULT (for repos without pre-commit).

    Prints {hook, vault, replaced} with --json. With the pre-commit framework, use the
    `engram-check` hook of .pre-commit-hooks.yaml instead.
    """
    from compiler.commands.setup import install_hook

    root, _ = vault_and_settings(vault_path or vault)  # a bad engram.toml is reported before any file is written
    result = install_hook(root, force=force)
    if as_json:
        emit_json(result)
    click.echo(f"installed {result['hook']}: each commit runs `engram check` on {result['vault']}"
               + (f" (old hook kept as {result['replaced']})" if result["replaced"] else ""), err=True)


COMMANDS = (serve_command, check_command, setup_command, install_hook_command)
