"""The invocations of the other two `engram`s, answered here: the Go engram CLI's and mcp-engram's.

Three programs install a command called `engram`. What people already run keeps working:

    engram mcp                       the Go CLI's MCP server → ours (`engram serve`)
    engram save TITLE CONTENT        the Go CLI's save → a memory, as its mem_save tool
    engram sync --import / --export  the Go CLI's cron lines (compiler.cli.sync takes the flags)
    engram                           mcp-engram's `{"command": "engram"}`: no arguments and no
                                     terminal on stdin → the MCP server; at a terminal → the help

Where a Go command means something else here or has no counterpart, `GO_COMMANDS` answers in
one line with what to run instead (exit 2). `engram-vault` is the same program under a name no
other tool installs (docs/migration.md).
"""

from __future__ import annotations

import sys

import click

from compiler.cli.common import (
    common_options,
    emit_json,
    vault_and_settings,
    vault_option,
)

# a Go engram CLI command with no counterpart of the same name → what to run here
GO_COMMANDS = {
    "context": "engram handoff load [--project P] (the MCP tool mem_context gives the recent memories too)",
    "stats": "engram memory stats",
    "timeline": "the MCP tool mem_timeline, or engram memory show ID",
    "export": "engram sync export (chunks in .engram/chunks/, the Go CLI's sync format)",
    "import": "engram sync import (chunks), or engram memory import FILE (JSON lines)",
    "tui": "nothing: open the vault in Obsidian, the memories are pages under _engram/memory/",
    "version": "engram --version",
    "projects": "engram memory stats (its by_project counts)",
}


def go_command_hint(name: str) -> str:
    """Returns the one line for a Go engram CLI command this program does not have ("" for others)."""
    if name not in GO_COMMANDS:
        return ""
    return f"'engram {name}' is the Go engram CLI's command; here, run: {GO_COMMANDS[name]}"


def serve_without_arguments(ctx: click.Context) -> None:
    """`engram` alone: the help at a terminal; the MCP server when a client pipes stdin (mcp-engram's config).

    The vault is $ENGRAM_VAULT, else the one around the current folder.
    """
    if sys.stdin is None or sys.stdin.isatty():
        click.echo(ctx.get_help())
        ctx.exit(0)
    from compiler.mcp_server.server import serve_stdio

    root, settings = vault_and_settings(None)
    serve_stdio(root, settings)


@click.command("mcp")
@vault_option
@click.option("--project", default="", envvar="ENGRAM_PROJECT", help="Default project (as `engram serve --project`).")
@click.option("--tools", default="", hidden=True, help="The Go CLI's tool filter: every tool is served here.")
def mcp_command(vault: str | None, project: str, tools: str) -> None:
    """The Go engram CLI's `engram mcp`: serve the vault's memory over MCP (stdio), as `engram serve`.

    stdout carries the protocol (so there is no --json); logs go to stderr.
    """
    from compiler.mcp_server.server import serve_stdio

    root, settings = vault_and_settings(vault)
    serve_stdio(root, settings, project=project)


@click.command("save")
@click.argument("title")
@click.argument("content", required=False, default="")
@click.option("--type", "type_", default="manual", help="Free-text type (decision, bugfix, ...), as the Go CLI.")
@click.option("--project", default="", help="Project the memory belongs to.")
@click.option("--scope", default="project", help="project or personal, as the Go CLI.")
@click.option("--topic", "topic_key", default="", help="Topic key: a later save with the same key updates that memory.")
@click.option("--session", "session_id", default="", help="The session it belongs to.")
@common_options
def save_command(title: str, content: str, type_: str, project: str, scope: str, topic_key: str, session_id: str,
                 vault: str | None, as_json: bool, now: str | None) -> None:
    """The Go engram CLI's `engram save TITLE [CONTENT]`: store a memory as its mem_save tool does."""
    from compiler.memory.engineering import save_observation
    from compiler.memory.input import MemoryInput
    from compiler.memory.vault import VaultMemory

    root, settings = vault_and_settings(vault, now=now)
    item = MemoryInput(content=content if content.strip() else title, title=title, type=type_, project=project,
                       scope=scope, topic_key=topic_key, session_id=session_id)
    with VaultMemory(root, settings) as memory:
        result = save_observation(memory, item)
    if as_json:
        emit_json(result)
    else:
        click.echo(f"{result['action']}: {result['id']} · {result.get('title', '')}")


COMMANDS = (mcp_command, save_command)
