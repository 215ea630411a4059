"""The `engram` command: one group, its commands registered from the modules that define them.

Each command is a thin adapter over one library function. An expected failure raised anywhere
below is answered once, by `EngramGroup` (compiler.cli.common): one line, an exit code.
"""

from __future__ import annotations

from typing import Any

import click

from compiler.cli import dropin, memory, notes, one_shot, serve, sync, wiki
from compiler.cli.common import EngramGroup
from compiler.core.errors import UsageError


class EngramCLI(EngramGroup):
    """The group, answering a Go engram CLI command it does not have in one line (compiler.cli.dropin)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        hint = dropin.go_command_hint(args[0]) if args and self.get_command(ctx, args[0]) is None else ""
        if hint:
            raise UsageError(hint)
        return super().resolve_command(ctx, args)

    def main(self, args: Any = None, *rest: Any, **extra: Any) -> Any:
        if args is None:  # the process's own command line (the console script, `python -m compiler`), not a CliRunner's
            one_shot.own_process()
        return super().main(args, *rest, **extra)


@click.group(cls=EngramCLI, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="engram-vault-compiler")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Engram Vault: compile an Obsidian vault into search indexes and pages.

    \b
      engram compile ~/vault          index notes, regenerate pages
      engram search "topic"           keyword search of the notes (BM25)
      engram vsearch "a question"     vector search
      engram query "a question"       hybrid search (the best default)
      engram recall "a question"      the agents' memories
    Also installed as `engram-vault`. With no command and stdin not a terminal, serves MCP
    (mcp-engram's `{"command": "engram"}`); the Go engram CLI's commands: docs/migration.md.
    """
    if ctx.invoked_subcommand is None:
        dropin.serve_without_arguments(ctx)


for module in (notes, memory, wiki, serve, sync, dropin):
    for command in module.COMMANDS:
        main.add_command(command)
