"""The `engram` command: thin adapters over the library functions.

Human messages go to stderr, results to stdout; `--json` prints exactly one JSON value.
Exit codes: 0 ok, 1 failure (or warnings with --strict), 2 usage. Heavy modules (torch,
Chroma) are imported inside the commands that need them, so `--help` and `search` stay instant.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from compiler.settings import SettingsError, load_settings
from compiler.vault import VaultNotFoundError, find_vault


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True))


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"engram: {message}", err=True)
    sys.exit(code)


@contextmanager
def _stderr_progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for long stages; silent when stderr is not a terminal."""
    if total < 20 or not sys.stderr.isatty():
        yield lambda n: None
        return
    with click.progressbar(length=total, label=f"{label:<6}", file=sys.stderr) as bar:
        yield bar.update


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="engram-vault")
def main() -> None:
    """Engram Vault: compile an Obsidian vault into search indexes and pages.

    \b
      engram compile ~/vault          index notes, regenerate pages
      engram search "topic"           keyword search (BM25)
      engram vsearch "a question"     vector search
      engram query "a question"       hybrid search (the best default)
    """


@main.command("compile")
@click.argument("vault", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON on stdout.")
@click.option("--strict", is_flag=True, help="Exit 1 when there are warnings.")
@click.option("--out", help="Output folder inside the vault (default: _engram, or `out` in engram.toml).")
@click.option("--model", help="Embedding model: multilingual-e5-small, or a sentence-transformers directory or name.")
@click.option("--chroma-url", envvar="ENGRAM_CHROMA_URL", help="Use a Chroma server instead of the embedded store.")
@click.option("--now", envvar="ENGRAM_NOW", help="The memory clock, 'YYYY-MM-DD HH:MM:SS' UTC (reproducible pages).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (and the JSON with --json).")
def compile_command(vault: str | None, as_json: bool, strict: bool, out: str | None, model: str | None,
                    chroma_url: str | None, now: str | None, quiet: bool) -> None:
    """Compile VAULT (default: the vault around the current folder): index notes, write pages.

    Prints a one-line summary on stderr (what an Obsidian shell command shows).
    """
    from compiler.build import compile_vault

    root, settings = _vault_and_settings(vault, out=out, model=model, chroma_url=chroma_url, now=now)
    report = _run(lambda: compile_vault(root, settings, progress=_stderr_progress))
    if as_json:
        _emit_json(report.to_dict())
    if not quiet:
        for warning in report.warnings:
            click.echo(f"warning: {warning.file}{f':{warning.line}' if warning.line else ''}: {warning.message}", err=True)
        click.echo(report.summary(), err=True)
    sys.exit(1 if strict and report.warnings else 0)


def _search_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("query", nargs=-1, required=True),
        click.option("-n", "limit", default=5, show_default=True, type=click.IntRange(1, 1000), help="Number of results."),
        click.option("--json", "as_json", is_flag=True, help="Print hits as a JSON list."),
        click.option("--files", "as_files", is_flag=True, help="Print one `docid,score,file` line per hit."),
        click.option("--md", "as_md", is_flag=True, help="Print hits as a Markdown list of wikilinks."),
        click.option("--min-score", default=0.0, type=click.FloatRange(0, 1), help="Drop hits scoring below this (0..1)."),
        click.option("--path", "path_filter", default="", help="Only notes under this folder or matching this glob."),
        click.option("--tag", default="", help="Only notes with this tag (nested tags included)."),
        click.option("--vault", envvar="ENGRAM_VAULT", help="The vault (default: found from the current folder)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@main.command("search")
@_search_options
def search_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Keyword search (BM25). Fast: loads no model."""
    from compiler.search import keyword_search

    root, _ = _vault_and_settings(vault)
    _show(_run(lambda: keyword_search(root, " ".join(query), shown["limit"], _filters(shown))), shown)


@main.command("vsearch")
@_search_options
def vsearch_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Vector search: finds notes by meaning, not words."""
    from compiler.embed import load_embedder
    from compiler.search import vector_search

    root, settings = _vault_and_settings(vault)
    _show(_run(lambda: vector_search(root, " ".join(query), shown["limit"], _filters(shown),
                                     embedder=load_embedder(settings.model), chroma_url=settings.chroma_url)), shown)


@main.command("query")
@_search_options
def query_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Hybrid search: 0.4 × BM25 + 0.6 × cosine, plus a bonus for graph neighbours of strong hits."""
    from compiler.embed import load_embedder
    from compiler.search import hybrid_search

    root, settings = _vault_and_settings(vault)
    _show(_run(lambda: hybrid_search(root, " ".join(query), shown["limit"], _filters(shown),
                                     embedder=load_embedder(settings.model), chroma_url=settings.chroma_url,
                                     graph_bonus=settings.graph_bonus)), shown)


def _filters(shown: dict[str, Any]) -> Any:
    from compiler.search import Filters

    return Filters(path=shown["path_filter"], tag=shown["tag"], min_score=shown["min_score"])


def _show(hits: list[dict[str, Any]], shown: dict[str, Any]) -> None:
    if shown["as_json"]:
        return _emit_json(hits)
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


def _vault_and_settings(vault: str | None, **overrides: Any) -> tuple[Path, Any]:
    try:
        root = find_vault(vault)
        return root, load_settings(root, **overrides)
    except (VaultNotFoundError, SettingsError) as error:
        _fail(str(error), code=2)
        raise  # unreachable: _fail exits


def _run(action: Callable[[], Any]) -> Any:
    """Runs a library call, turning the errors a user can cause into one clear line and exit 1."""
    from compiler.embed import ModelLoadError
    from compiler.lock import VaultBusyError
    from compiler.search import NotCompiledError

    try:
        return action()
    except (ModelLoadError, VaultBusyError, NotCompiledError, SettingsError, OSError) as error:
        _fail(str(error))


from compiler import cli_memory  # noqa: E402,F401  (registers the memory commands on `main`)
from compiler import cli_serve  # noqa: E402,F401  (registers serve, setup, check and install-hook on `main`)
from compiler import cli_sync  # noqa: E402,F401  (registers `engram sync` and `engram merge-manifest`)
