"""`engram compile | watch | search | vsearch | query | get`: thin adapters over the compile spine and note search.

Heavy modules (torch, Chroma) are imported inside the commands that need them, so `--help` and
`search` stay instant.
"""

from __future__ import annotations

import csv
import io
import json
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from compiler.cli.common import (
    echo_warning,
    emit_json,
    vault_and_settings,
    vault_option,
)
from compiler.cli.progress import stderr_progress
from compiler.core.errors import InputError, UsageError


@click.command("compile")
@click.argument("vault_path", metavar="[VAULT]", required=False, type=click.Path(file_okay=False))
@vault_option
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON on stdout.")
@click.option("--strict", is_flag=True, help="Exit 1 when there are warnings.")
@click.option("--out", help="Output folder inside the vault (default: _engram, or `out` in engram.toml).")
@click.option("--model", help="Embedding model: multilingual-e5-small, or a sentence-transformers directory or name.")
@click.option("--chroma-url", envvar="ENGRAM_CHROMA_URL", help="Use a Chroma server instead of the embedded store.")
@click.option("--now", envvar="ENGRAM_NOW", help="The memory clock, 'YYYY-MM-DD HH:MM:SS' UTC (reproducible pages).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (and the JSON with --json).")
def compile_command(vault_path: str | None, vault: str | None, as_json: bool, strict: bool, out: str | None, model: str | None,
                    chroma_url: str | None, now: str | None, quiet: bool) -> None:
    """Compile VAULT (default: the vault around the current folder): index notes, write pages.

    Prints each warning on stderr as soon as it is found, progress while it works (a bar on a
    terminal, else a line every few seconds), then a one-line summary (what an Obsidian shell
    command shows).
    """
    from compiler.pipeline.spine import compile_vault

    root, settings = vault_and_settings(vault_path or vault, builds_index=True, out=out, model=model,
                                        chroma_url=chroma_url, now=now)
    report = compile_vault(root, settings, progress=stderr_progress(quiet),
                           warn=(lambda w: None) if quiet else echo_warning)
    if as_json:
        emit_json(report.to_dict())
    if not quiet:
        click.echo(report.summary(), err=True)
    sys.exit(1 if strict and report.warnings else 0)


@click.command("watch")
@click.argument("vault_path", metavar="[VAULT]", required=False, type=click.Path(file_okay=False))
@vault_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per build on stdout (JSON lines).")
@click.option("--out", help="Output folder inside the vault (default: _engram, or `out` in engram.toml).")
@click.option("--model", help="Embedding model: multilingual-e5-small, or a sentence-transformers directory or name.")
@click.option("--chroma-url", envvar="ENGRAM_CHROMA_URL", help="Use a Chroma server instead of the embedded store.")
@click.option("--quiet-ms", default=400, show_default=True, type=click.IntRange(50, 60_000),
              help="Build once nothing has changed for this many milliseconds.")
def watch_command(vault_path: str | None, vault: str | None, as_json: bool, out: str | None, model: str | None,
                  chroma_url: str | None, quiet_ms: int) -> None:
    """Compile VAULT now, then again whenever a note, an attachment, engram.toml, the memory journal
    or a synced chunk changes. One summary line per build on stderr; Ctrl-C stops (exit 0).

    Bursts (a git checkout, a sync) are one build; the watch's own writes start none; a failing
    build prints its error and the watch goes on.
    """
    from compiler.commands.watch import Build, watch_vault

    root, _ = vault_and_settings(vault_path or vault, out=out, model=model, chroma_url=chroma_url)  # exit 2 now, not later

    def show(build: Build) -> None:
        if as_json:
            click.echo(json.dumps(build.to_dict(), ensure_ascii=False, sort_keys=True))
        else:
            click.echo(build.line, err=True)

    click.echo(f"engram: watching {root} (Ctrl-C to stop)", err=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop is a Ctrl-C too
    try:
        watch_vault(root, lambda: vault_and_settings(str(root), out=out, model=model, chroma_url=chroma_url)[1], show,
                    quiet_ms=quiet_ms)
    except KeyboardInterrupt:
        click.echo("engram: stopped watching", err=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.exit(0)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


ALL_HITS = 100_000  # --all: qmd's "all results" is this many too
FORMATS = ("as_json", "as_files", "as_md", "as_csv")  # at most one of them
CSV_HEADER = ("docid", "score", "file", "title", "context", "line", "snippet")  # qmd's columns


def _search_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("query", nargs=-1),
        click.option("-n", "limit", default=5, show_default=True, type=click.IntRange(1, 1000), help="Number of results."),
        click.option("--all", "all_hits", is_flag=True, help="Every hit, no -n limit (narrow it with --min-score)."),
        click.option("--json", "as_json", is_flag=True, help="Print hits as a JSON list."),
        click.option("--files", "as_files", is_flag=True, help="Print one `docid,score,file` line per hit."),
        click.option("--md", "as_md", is_flag=True, help="Print hits as a Markdown list of wikilinks."),
        click.option("--csv", "as_csv", is_flag=True, help="Print hits as CSV with qmd's columns and a header."),
        click.option("--min-score", default=0.0, type=click.FloatRange(0, 1), help="Drop hits scoring below this (0..1)."),
        click.option("--path", "path_filter", default="", help="Only notes under this folder or matching this glob."),
        click.option("--tag", default="", help="Only notes with this tag (nested tags included)."),
        click.option("--layer", type=click.Choice(["notes", "wiki", "raw"]), default=None,
                     help="Only hits from the person's notes, the wiki's pages or its raw sources."),
    ]
    for option in reversed(options):
        command = option(command)
    return vault_option(command)


def _query_text(query: tuple[str, ...], shown: dict[str, Any]) -> str:
    """Returns the query, after checking what was asked: one output format at most (UsageError,
    exit 2), and some words to look for (InputError, exit 1, as qmd answers an empty query)."""
    chosen = [f"--{name.removeprefix('as_')}" for name in FORMATS if shown[name]]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} cannot be combined: choose one output format")
    text = " ".join(query).strip()
    if not text:
        raise InputError("empty query: give the words to look for, e.g. engram search \"deploy\"")
    return text


def _limit(shown: dict[str, Any]) -> int:
    return ALL_HITS if shown["all_hits"] else shown["limit"]


def _go_search_flag(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The Go engram CLI's `engram search --type/--scope/--limit/--project` searches memories: say what does here."""
    if value:
        raise UsageError("engram search searches your notes here; to search memories as the Go engram "
                               "CLI's `engram search` does, run: engram recall QUERY [--project P] [-n N]")
    return value


@click.command("search")
@_search_options
@click.option("--type", "go_type", hidden=True, callback=_go_search_flag, expose_value=False)
@click.option("--scope", "go_scope", hidden=True, callback=_go_search_flag, expose_value=False)
@click.option("--limit", "go_limit", hidden=True, callback=_go_search_flag, expose_value=False)
@click.option("--project", "go_project", hidden=True, callback=_go_search_flag, expose_value=False)
def search_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Keyword search of the notes (BM25). Fast: loads no model. Memories: `engram recall`."""
    from compiler.notes.search import keyword_search

    text = _query_text(query, shown)
    root, settings = vault_and_settings(vault)
    _show(keyword_search(root, text, _limit(shown), _filters(shown, settings)), shown)


@click.command("vsearch")
@_search_options
def vsearch_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Vector search: finds notes by meaning, not words."""
    from compiler.cli.one_shot import one_shot_process

    one_shot_process()  # before numpy loads: this process embeds one query and exits
    from compiler.embed.embedder import load_embedder
    from compiler.notes.search import vector_search

    text = _query_text(query, shown)
    root, settings = vault_and_settings(vault)
    _show(vector_search(root, text, _limit(shown), _filters(shown, settings),
                                     embedder=load_embedder(settings.model), chroma_url=settings.chroma_url), shown)


@click.command("query")
@_search_options
def query_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Hybrid search: 0.4 × BM25 + 0.6 × cosine, plus a bonus for graph neighbours of strong hits."""
    from compiler.cli.one_shot import one_shot_process

    one_shot_process()  # before numpy loads: this process embeds one query and exits
    from compiler.embed.embedder import load_embedder
    from compiler.notes.search import hybrid_search

    text = _query_text(query, shown)
    root, settings = vault_and_settings(vault)
    _show(hybrid_search(root, text, _limit(shown), _filters(shown, settings),
                                     embedder=load_embedder(settings.model), chroma_url=settings.chroma_url,
                                     graph_bonus=settings.graph_bonus), shown)


def _filters(shown: dict[str, Any], settings: Any) -> Any:
    from compiler.notes.search import Filters

    return Filters(path=shown["path_filter"], tag=shown["tag"], min_score=shown["min_score"],
                   layers=((settings.raw, "raw"), (settings.wiki, "wiki")), layer=shown["layer"] or "")


def _show(hits: list[dict[str, Any]], shown: dict[str, Any]) -> None:
    if shown["as_json"]:
        return emit_json(hits)
    if shown["as_csv"]:
        return click.echo(_csv(hits), nl=False)
    for hit in hits:
        if shown["as_files"]:
            click.echo(f"{hit['docid']},{hit['score']:.2f},{hit['file']}")
        elif shown["as_md"]:
            click.echo(f"- [[{hit['file']}|{hit['title']}]] ({hit['score']:.2f}): {hit['snippet']}")
        else:
            click.echo(f"{hit['docid']}  {hit['score']:.2f}  {hit['file']}:{hit['line']}  {hit['title']}")
            click.echo(f"    {hit['snippet']}")
    if not hits:
        click.echo("no results", err=True)


def _csv(hits: list[dict[str, Any]]) -> str:
    """qmd's CSV: a header, then one quoted-when-needed row per hit (we have no contexts: empty)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for hit in hits:
        writer.writerow([hit["docid"], f"{hit['score']:.4f}", hit["file"], hit["title"], "", hit["line"], hit["snippet"]])
    return buffer.getvalue()


@click.command("get")
@click.argument("target", metavar="PATH[:LINE[:COUNT]] | #DOCID")
@vault_option
@click.option("-l", "max_lines", default=0, type=click.IntRange(0), help="At most this many lines (0: to the end).")
@click.option("--from", "from_line", default=0, type=click.IntRange(0), help="Start at this line (1-based; wins over :LINE).")
@click.option("--line-numbers", is_flag=True, help="Put each line's number in front of it.")
@click.option("--json", "as_json", is_flag=True, help="Print {path, content, from, lines, bytes, truncated} as JSON.")
def get_command(target: str, vault: str | None, max_lines: int, from_line: int, line_numbers: bool, as_json: bool) -> None:
    """Print one note: by vault-relative PATH (the suffix may be left out), from LINE on, or by the
    #DOCID a search hit shows (`engram get '#3f9a1c'`: quote it, a shell reads # as a comment)."""
    from compiler.notes.access import read_lines

    root, settings = vault_and_settings(vault)
    note = read_lines(root, target, settings.max_note_bytes, start=from_line, count=max_lines)
    if as_json:
        return emit_json(note)
    text = note["content"]
    if line_numbers:
        text = "".join(f"{n:>6}  {line}" for n, line in enumerate(text.splitlines(keepends=True), start=note["from"]))
    click.echo(text, nl=not text.endswith("\n") and bool(text))
    if note["truncated"]:
        click.echo(f"engram: {note['path']}: only the first {settings.max_note_bytes} bytes (max_note_bytes)", err=True)


COMMANDS = (compile_command, watch_command, search_command, vsearch_command, query_command, get_command)
