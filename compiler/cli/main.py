"""The `engram` command: one group, its commands registered from the modules that define them.

Each command is a thin adapter over one library function. An expected failure raised anywhere
below is answered once, by `EngramGroup` (compiler.cli.common): one line, an exit code.
"""

from __future__ import annotations

import click

from compiler.cli import memory, notes, serve, sync
from compiler.cli.common import EngramGroup


@click.group(cls=EngramGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="engram-vault-compiler")
def main() -> None:
    """Engram Vault: compile an Obsidian vault into search indexes and pages.

    \b
      engram compile ~/vault          index notes, regenerate pages
      engram search "topic"           keyword search (BM25)
      engram vsearch "a question"     vector search
      engram query "a question"       hybrid search (the best default)
    """


for module in (notes, memory, serve, sync):
    for command in module.COMMANDS:
        main.add_command(command)
