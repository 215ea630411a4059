"""What every `engram` command shares: the vault options, JSON output, warnings, and the one
place an expected failure becomes a line on stderr and an exit code (`EngramGroup.invoke`).

Human messages go to stderr, results to stdout; `--json` prints exactly one JSON value.
Exit codes: 0 ok, 1 failure (or warnings with --strict), 2 usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from compiler.core.errors import EXPECTED, EngramError, UsageError, describe
from compiler.core.settings import Settings, load_settings
from compiler.core.vault import find_vault

VAULT_HELP = "The vault (default: $ENGRAM_VAULT, else found from the current folder)."


class EngramGroup(click.Group):
    """A command group whose commands may raise any expected failure: it is answered here, once,
    as `engram: <path:line: message>` on stderr and the error's exit code — never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EXPECTED as error:
            click.echo(f"engram: {describe(error)}", err=True)
            ctx.exit(error.exit_code if isinstance(error, EngramError) else 1)


def emit_json(value: Any) -> None:
    """Prints `value` as one JSON document on stdout (sorted keys: stable for diffs and tests)."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True))


def vault_and_settings(vault: str | None, *, builds_index: bool = False, **overrides: Any) -> tuple[Path, Settings]:
    """Returns the vault and its settings; raises UsageError (exit 2) when either is wrong.

    The model is the one the vault's index was built with (the build state records it): queries
    embedded with another model match nothing meaningful. A command that builds the index
    (`builds_index`: compile, check's view of the next compile, sync) lets engram.toml, ENGRAM_MODEL
    and --model change it; the others use it whatever the settings say, and a --model naming
    another model is a usage error.
    """
    from compiler.pipeline.state_head import recorded_model
    from compiler.pipeline.vault_paths import VaultPaths

    root = find_vault(vault)
    recorded = recorded_model(VaultPaths(root))
    if builds_index or not recorded:
        return root, load_settings(root, index_model=recorded, **overrides)
    asked = overrides.get("model")
    if asked and asked != recorded:
        raise UsageError(f"--model {asked} conflicts with the index of {root}, built with {recorded} "
                         f"(drop --model, or rebuild: engram compile --model {asked})")
    return root, load_settings(root, **{**overrides, "model": recorded})


def vault_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--vault (or $ENGRAM_VAULT), passed as `vault`."""
    return click.option("--vault", envvar="ENGRAM_VAULT", help=VAULT_HELP)(command)


def vault_argument(command: Callable[..., Any]) -> Callable[..., Any]:
    """An optional positional [VAULT], passed as `vault_path`: a shortcut for --vault
    (`engram check ~/vault`, what hooks and editor shell commands write). It wins over --vault."""
    return click.argument("vault_path", metavar="[VAULT]", required=False, type=click.Path(file_okay=False))(command)


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--json, passed as `as_json`: print one JSON value on stdout instead of the human lines."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")(command)


def now_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--now (or $ENGRAM_NOW), passed as `now`: pins the memory clock."""
    return click.option("--now", envvar="ENGRAM_NOW",
                        help="The memory clock, 'YYYY-MM-DD HH:MM:SS' UTC (reproducible pages, tests, replays).")(command)


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--vault, --json and --now: what every memory command takes."""
    return vault_option(json_option(now_option(command)))


def echo_warning(warning: Any) -> None:
    """Prints one warning (a BuildWarning) on stderr: `warning: path:line: message`."""
    click.echo(f"warning: {warning.file}{f':{warning.line}' if warning.line else ''}: {warning.message}", err=True)
