"""`engram memory|recall|track|handoff|maintain`: thin adapters over the memory library.

Each command opens the vault's memory (`VaultMemory`), calls one library function — the one the
MCP tool of the same job calls — and prints its dict: as JSON with --json, else as a short human
line. Errors a caller can cause are answered once, by `EngramGroup`: exit 1 with one clear line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from compiler.cli.common import common_options, emit_json, vault_and_settings
from compiler.cli.progress import stderr_progress

if TYPE_CHECKING:
    from compiler.memory.vault import VaultMemory

T = TypeVar("T")


def _memory_call(vault: str | None, now: str | None, action: Callable[[VaultMemory], T]) -> T:
    """Opens the vault's memory, runs `action` on it and returns its result."""
    from compiler.memory.vault import VaultMemory

    root, settings = vault_and_settings(vault, now=now)
    with VaultMemory(root, settings) as memory:
        return action(memory)


def _print(result: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    if as_json:
        emit_json(result)
    elif result is not None:
        click.echo(human(result))


def _line(result: dict[str, Any]) -> str:
    extra = f" ({result['similarity']:.2f} similar: {result.get('reason', '')})" if "similarity" in result else ""
    return f"{result['action']}: {result['id']} · {result.get('title', '')}{extra}"


@click.group("memory")
def memory_group() -> None:
    """Store and manage agent memories (they decay, reinforce, merge and link)."""


@memory_group.command("add")
@click.argument("content")
@click.option("--title", default="", help="A short title (default: the first line).")
@click.option("--project", default="", help="Project the memory belongs to (default: 'default').")
@click.option("--category", default="fact", type=click.Choice(["fact", "strategy", "assumption", "failure"]),
              help="Which decay curve it follows (strategy fades slowest, failure fastest).")
@click.option("--importance", default=0.5, type=float, help="0..1: how slowly it fades.")
@click.option("--type", "type_", default="note", help="Free-text type, as the engram CLI (decision, bugfix, ...).")
@click.option("--topic-key", default="",
              help="Names an evolving topic: a later save with the same key updates that memory.")
@click.option("--source-id", default="", help="An external id kept as provenance (and for idempotent imports).")
@common_options
def memory_add(content: str, title: str, project: str, category: str, importance: float, type_: str,
               topic_key: str, source_id: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Store CONTENT: answers new, reinforced, merged or replaced."""
    from compiler.cli.one_shot import one_shot_process

    one_shot_process()  # before numpy loads: this process embeds a text or two and exits
    from compiler.memory.input import MemoryInput
    from compiler.memory.write import store_memory

    item = MemoryInput(content=content, title=title, project=project, category=category, importance=importance,
                       type=type_, topic_key=topic_key, source_id=source_id)
    _print(_memory_call(vault, now, lambda m: store_memory(m, item)), as_json, _line)


@memory_group.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-q", "--quiet", is_flag=True, help="No progress and no warnings on stderr (the summary and --json stay).")
@common_options
def memory_import(file: Path, quiet: bool, vault: str | None, now: str | None, as_json: bool) -> None:
    """Store every memory of a JSON-lines FILE (content, title, project, category, importance, created_at, source_id).

    Shows progress on stderr while it works: a bar on a terminal, else a line every few seconds.
    """
    from compiler.memory.write import import_memories

    summary = _memory_call(vault, now, lambda m: import_memories(m, file, stderr_progress(quiet)))
    for warning in summary["skipped"] if not quiet else ():
        click.echo(f"warning: {warning['file']}:{warning['line']}: {warning['message']}", err=True)
    _print(summary, as_json, lambda r: f"imported {r['read']} lines: {r['actions']} · {r['embedded']} embedded")


@memory_group.command("update")
@click.argument("memory_id")
@click.option("--content", default=None, help="The new content (the old one stays as history).")
@click.option("--title", default=None, help="The new title.")
@click.option("--importance", default=None, type=float, help="The new importance, 0..1.")
@common_options
def memory_update(memory_id: str, content: str | None, title: str | None, importance: float | None,
                  vault: str | None, now: str | None, as_json: bool) -> None:
    """Rewrite a memory; the old version stays in its history."""
    from compiler.memory.edits import update_memory

    result = _memory_call(vault, now, lambda m: update_memory(m, memory_id, content, importance, title))
    _print(result, as_json, lambda r: f"updated: {r['id']} · {r['title']}")


@memory_group.command("forget")
@click.argument("memory_id")
@common_options
def memory_forget(memory_id: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Forget a memory (kept in the log; `restore` brings it back)."""
    from compiler.memory.edits import forget_memory

    _print(_memory_call(vault, now, lambda m: forget_memory(m, memory_id)), as_json, lambda r: f"forgotten: {r['id']}")


@memory_group.command("restore")
@click.argument("memory_id")
@common_options
def memory_restore(memory_id: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Bring back an archived, forgotten or consolidated memory."""
    from compiler.memory.edits import restore_memory

    _print(_memory_call(vault, now, lambda m: restore_memory(m, memory_id)), as_json, lambda r: f"restored: {r['id']}")


@memory_group.command("show")
@click.argument("memory_id")
@common_options
def memory_show(memory_id: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Print one memory with its history and sources."""
    from compiler.memory.edits import show_memory

    _print(_memory_call(vault, now, lambda m: show_memory(m, memory_id)), as_json,
           lambda r: json.dumps(r, indent=2, ensure_ascii=False))


@memory_group.command("stats")
@common_options
def memory_stats_command(vault: str | None, now: str | None, as_json: bool) -> None:
    """Totals, by category, average strength, last maintenance, failures, active features."""
    from compiler.memory.engineering import memory_stats

    _print(_memory_call(vault, now, memory_stats), as_json, lambda r: json.dumps(r, indent=2, ensure_ascii=False))


@click.command("recall")
@click.argument("query", nargs=-1, required=True)
@click.option("-n", "limit", default=5, show_default=True, type=click.IntRange(1, 100),
              help="Number of memories to return.")
@click.option("--project", default="", help="Only this project's memories.")
@click.option("--category", default="", type=click.Choice(["", "fact", "strategy", "assumption", "failure"]),
              help="Only memories of this category.")
@click.option("--no-reinforce", is_flag=True, help="Do not count this recall (for inspection and benchmarks).")
@common_options
def recall_command(query: tuple[str, ...], limit: int, project: str, category: str, no_reinforce: bool,
                   vault: str | None, now: str | None, as_json: bool) -> None:
    """Recall memories: each query word's best match in a memory and its neighbouring turns
    (token vectors) × strength + graph bonus. Recalling reinforces."""
    from compiler.cli.one_shot import one_shot_process

    one_shot_process()  # before numpy loads: this process embeds a text or two and exits
    from compiler.memory.recall import recall

    hits = _memory_call(vault, now, lambda m: recall(m, " ".join(query), limit, project=project,
                                                     category=category, reinforce=not no_reinforce))
    _print(hits, as_json, lambda hs: "\n".join(f"{h['score']:.2f}  {h['id']}  [{h['project']}/{h['category']}] "
                                                f"{h['title']}{'  (archived)' if h['archived'] else ''}" for h in hs) or "no memories")


@click.group("track")
def track_group() -> None:
    """Track engineering state: failures and feature progress."""


@track_group.command("failure")
@click.option("--error", required=True, help="The error as seen (message, symptom).")
@click.option("--component", required=True, help="The component it happened in (payment, auth, ...).")
@click.option("--severity", default="major", type=click.Choice(["critical", "major", "minor"]),
              help="critical 0.9, major 0.7, minor 0.5 importance.")
@click.option("--root-cause", default="", help="Why it happened, when known.")
@click.option("--fix", default="", help="What fixed it, when known.")
@click.option("--test", "tests", multiple=True, help="A related test id (repeatable).")
@click.option("--project", default="", help="Project the failure belongs to (default: 'default').")
@common_options
def track_failure_command(error: str, component: str, severity: str, root_cause: str, fix: str,
                          tests: tuple[str, ...], project: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Record a failure (importance critical 0.9, major 0.7, minor 0.5)."""
    from compiler.memory.engineering import track_failure

    result = _memory_call(vault, now, lambda m: track_failure(m, error, component, severity, root_cause, fix,
                                                               tests, project))
    _print(result, as_json, _line)


@track_group.command("progress")
@click.option("--feature", required=True, help="The feature being tracked: one live record per feature.")
@click.option("--status", required=True, type=click.Choice(["planning", "in_progress", "review", "blocked", "done"]),
              help="Where it stands (blocked is the most important to remember).")
@click.option("--completion", default=None, type=click.IntRange(0, 100), help="Percent done, 0..100.")
@click.option("--blocker", "blockers", multiple=True, help="What blocks it (repeatable).")
@click.option("--quality", "quality_score", default=None, type=float, help="A 0..1 quality score, if you keep one.")
@click.option("--notes", default="", help="Free notes on the state of the work.")
@click.option("--project", default="", help="Project the feature belongs to (default: 'default').")
@common_options
def track_progress_command(feature: str, status: str, completion: int | None, blockers: tuple[str, ...],
                           quality_score: float | None, notes: str, project: str, vault: str | None,
                           now: str | None, as_json: bool) -> None:
    """Create or update the one live progress record of a feature."""
    from compiler.memory.engineering import track_progress

    result = _memory_call(vault, now, lambda m: track_progress(m, feature, status, completion, blockers,
                                                                quality_score, notes, project))
    _print(result, as_json, lambda r: f"{r['action']}: {r['id']} · {r['feature']} → {r['status']}")


@click.group("handoff")
def handoff_group() -> None:
    """Session handoffs: what the next session should load first."""


@handoff_group.command("save")
@click.option("--summary", required=True, help="What this session did, in a few lines.")
@click.option("--completed", multiple=True, help="Something finished this session. Repeatable.")
@click.option("--in-progress", multiple=True, help="Something started and not finished. Repeatable.")
@click.option("--blocked", multiple=True, help="Something blocked, and on what. Repeatable.")
@click.option("--next-step", "next_steps", multiple=True, help="What the next session should do first. Repeatable.")
@click.option("--project", default="", help="Project of the handoff (default: 'default').")
@common_options
def handoff_save(summary: str, completed: tuple[str, ...], in_progress: tuple[str, ...], blocked: tuple[str, ...],
                 next_steps: tuple[str, ...], project: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Save a handoff for the next session."""
    from compiler.memory.engineering import save_handoff

    result = _memory_call(vault, now, lambda m: save_handoff(m, summary, completed, in_progress, blocked,
                                                              next_steps, project))
    _print(result, as_json, _line)


@handoff_group.command("load")
@click.option("--project", default="", help="Load the latest handoff of this project (default: any).")
@common_options
def handoff_load(project: str, vault: str | None, now: str | None, as_json: bool) -> None:
    """Print the latest handoff of a project."""
    from compiler.memory.engineering import load_handoff

    result = _memory_call(vault, now, lambda m: load_handoff(m, project))
    if result is None and not as_json:
        click.echo("no handoff yet", err=True)
        sys.exit(0)
    _print(result, as_json, lambda r: f"{r['created_at']} · {r['title']}\n\n{r['content']}")


@click.command("maintain")
@common_options
def maintain_command(vault: str | None, now: str | None, as_json: bool) -> None:
    """Consolidate near-duplicate memories and archive faded ones (compile does this too)."""
    from compiler.memory.maintenance import run_maintenance

    _print(_memory_call(vault, now, run_maintenance), as_json,
           lambda r: f"consolidated {r['consolidated']} memories in {r['clusters']} clusters · {r['archived']} archived")


COMMANDS = (memory_group, recall_command, track_group, handoff_group, maintain_command)
