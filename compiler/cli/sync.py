"""`engram sync [export|import|status|install]` and `engram merge-manifest`: thin adapters over the sync library.

Results are the library's dicts: JSON with --json, else one human line on stderr. A failure is
raised, not caught here: EngramGroup answers it with one line and exit 1 (a failed sync's error is
also in `.engram/sync.log` and `.engram/sync-status.json`). `sync status` exits 1 once
`max_failures` syncs in a row have failed, so cron or a monitor notices.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from compiler.cli.common import (
    echo_warning,
    emit_json,
    json_option,
    vault_and_settings,
    vault_option,
)
from compiler.cli.progress import stderr_progress


def _export_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--from-sessions", "sessions", multiple=True, type=click.Path(exists=True, path_type=Path),
                     help="Transcripts (OpenClaw JSONL or SQLite, Claude Code JSONL; file or folder) whose "
                          "mem_save calls are stored first. Repeatable."),
        click.option("--project", default="", help="Export only this project's memories."),
        click.option("--created-by", default="", help="Name of this machine in the manifest (default: user@host)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _show(result: dict[str, Any], as_json: bool, line: str) -> None:
    if as_json:
        emit_json(result)
    quarantined = (result.get("import") or result).get("quarantined")
    for warning in quarantined if isinstance(quarantined, list) else []:
        click.echo(f"warning: {warning['file']}: {warning['message']}", err=True)
    click.echo(f"engram sync: {line}", err=True)


@click.group("sync", invoke_without_command=True)
@vault_option
@json_option
@_export_options
@click.option("--no-push", is_flag=True, help="Commit locally, do not push.")
@click.option("--import", "import_only", is_flag=True, help="Only `engram sync import` (the Go engram CLI's flag).")
@click.option("--export", "export_only", is_flag=True, help="Only `engram sync export` (no git).")
@click.option("--status", "status_only", is_flag=True, help="Only `engram sync status`.")
@click.option("--all", "all_projects", is_flag=True, hidden=True, help="The Go CLI's flag: every project is exported here.")
@click.pass_context
def sync_group(ctx: click.Context, vault: str | None, as_json: bool, sessions: tuple[Path, ...], project: str,
               created_by: str, no_push: bool, import_only: bool, export_only: bool, status_only: bool,
               all_projects: bool) -> None:
    """Share memories between machines through the vault's git repository (engram CLI chunk format).

    \b
      engram sync                    pull --rebase, import, compile, export, commit, push
      engram sync export             new memories → one new chunk + manifest entry
      engram sync import             chunks not seen yet → memories; then compile
      engram sync status [--json]    chunks, pending export, last success/error, failures
      engram sync install            merge driver for manifest.json, ignores for local state
      engram sync --import / --export / --status   the Go engram CLI's cron lines: the same as above
    """
    if ctx.invoked_subcommand is not None:
        # `engram sync --vault V status` means what `engram sync status --vault V` does
        given = {name: value for name, value in (("vault", vault), ("as_json", as_json)) if value}
        ctx.default_map = {name: given for name in sync_group.commands}
        return
    if import_only + export_only + status_only > 1:
        raise click.UsageError("give one of --import, --export and --status")
    if import_only:
        ctx.invoke(sync_import, vault=vault, as_json=as_json, no_compile=False)
        return
    if export_only:
        ctx.invoke(sync_export, vault=vault, as_json=as_json, sessions=sessions, project=project, created_by=created_by)
        return
    if status_only:
        ctx.invoke(sync_status_command, vault=vault, as_json=as_json, max_failures=None)
        return
    from compiler.commands.sync_cycle import run_sync
    from compiler.sync.monitor import summary

    root, settings = vault_and_settings(vault, builds_index=True)  # they compile
    result = run_sync(root, settings, created_by=created_by, project=project, sessions=sessions,
                      push_changes=not no_push)
    _show(result, as_json, summary(result))


@sync_group.command("export")
@vault_option
@json_option
@_export_options
def sync_export(vault: str | None, as_json: bool, sessions: tuple[Path, ...], project: str, created_by: str) -> None:
    """Write memories no chunk holds yet as one new chunk (no git)."""
    from compiler.sync.exchange import export_memories

    root, settings = vault_and_settings(vault)
    result = export_memories(root, settings, created_by=created_by, project=project, sessions=sessions)
    bridged = result.get("bridged") or {}
    extra = (f" · transcripts: {bridged['calls']} mem_save calls, {bridged['skipped_empty']} without title or "
             f"content skipped" if bridged else "")
    line = (f"chunk {result['chunk']}: {result['events']} events, {result['memories']} memories" if result["chunk"]
            else "nothing new to export")
    _show(result, as_json, line + _redacted_text(result["redacted"]) + extra)


def _redacted_text(redacted: dict[str, Any]) -> str:
    """Returns " · N secrets redacted in M memories (ids)", or "" when none were."""
    if not redacted["count"]:
        return ""
    ids = sorted(redacted["memories"])
    return f" · {redacted['count']} secrets redacted in {len(ids)} memories ({', '.join(ids)})"


@sync_group.command("import")
@vault_option
@json_option
@click.option("--no-compile", is_flag=True, help="Only take the chunks in; do not compile.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no compile warnings on stderr.")
def sync_import(vault: str | None, as_json: bool, no_compile: bool, quiet: bool) -> None:
    """Take in chunks not imported yet (bad records are quarantined and reported), then compile.

    The compile shows progress and its warnings on stderr as they come, like `engram compile`.
    """
    from compiler.commands.sync_cycle import import_and_compile

    root, settings = vault_and_settings(vault, builds_index=True)  # they compile
    result = import_and_compile(root, settings, compile=not no_compile, progress=stderr_progress(quiet),
                                warn=(lambda w: None) if quiet else echo_warning)
    _show(result, as_json, f"{len(result['chunks_new'])} new chunks, {result['events_new']} events, "
                           f"{result['memories_new']} new memories, {len(result['quarantined'])} quarantined")


@sync_group.command("status")
@vault_option
@json_option
@click.option("--max-failures", type=click.IntRange(1), default=None,
              help="Exit 1 after this many failed syncs in a row (default 3, or [sync] max_failures).")
def sync_status_command(vault: str | None, as_json: bool, max_failures: int | None) -> None:
    """Chunks local/remote/to import, pending export, last success and error; exit 1 when failing."""
    from compiler.sync.exchange import sync_status

    root, settings = vault_and_settings(vault)
    status = sync_status(root, settings, max_failures)
    if as_json:
        emit_json(status)
    else:
        click.echo("\n".join(_status_lines(status)))
    sys.exit(0 if status["healthy"] else 1)


def _status_lines(status: dict[str, Any]) -> list[str]:
    """Returns `engram sync status` as a person reads it: one line per question."""
    from compiler.sync.exchange import format_when

    chunks, remote, error = status["chunks"], status["remote"] or {}, status["last_error"] or {}
    return [(f"chunks: {chunks['local']} here, {chunks['listed']} listed, {chunks['to_import']} to import, "
             f"{len(chunks['quarantined'])} quarantined, {len(chunks['missing'])} listed but missing"),
            (f"remote {remote.get('ref', '(none)')}: {remote.get('chunks', '?')} chunks, "
             f"{len(remote.get('not_pulled', []))} not pulled yet"),
            (f"to export: {status['pending_export']['events']} events "
             f"({status['pending_export']['memories']} memories)"
             + _redacted_text(status["pending_export"]["redacted"]).replace("redacted", "to redact")),
            f"last success: {format_when(status['last_success'])}",
            f"last error: {format_when(error.get('at'))} {error.get('message', '')}".rstrip(),
            f"consecutive failures: {status['consecutive_failures']} (alarm at {status['max_failures']})"]


@sync_group.command("install")
@vault_option
@json_option
def sync_install(vault: str | None, as_json: bool) -> None:
    """Register the manifest merge driver (.gitattributes + git config) and ignore local state."""
    from compiler.commands.sync_cycle import install_sync

    root, settings = vault_and_settings(vault)
    result = install_sync(root, settings)
    if as_json:
        emit_json(result)
    changed = ", ".join(result["changed"]) or "nothing (already installed)"
    click.echo(f"engram sync install: updated {changed}; merge driver: {result['driver']}", err=True)


@click.command("merge-manifest", hidden=True)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("ours", type=click.Path(path_type=Path))
@click.argument("theirs", type=click.Path(path_type=Path))
def merge_manifest_command(base: Path, ours: Path, theirs: Path) -> None:
    """Git merge driver for .engram/manifest.json: union of chunk entries (git calls it with %O %A %B).

    A side that is not a manifest exits 1 with one line (git then reports a conflict).
    """
    from compiler.events.manifest import merge_files

    merge_files(base, ours, theirs)


COMMANDS = (sync_group, merge_manifest_command)
