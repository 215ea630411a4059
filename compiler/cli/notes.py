"""`engram compile | search | vsearch | query`: thin adapters over the compile spine and note search.

Heavy modules (torch, Chroma) are imported inside the commands that need them, so `--help` and
`search` stay instant.
"""

from __future__ import annotations

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
    from compiler.commands.compile import compile_vault

    root, settings = vault_and_settings(vault_path or vault, out=out, model=model, chroma_url=chroma_url, now=now)
    report = compile_vault(root, settings, progress=stderr_progress(quiet),
                           warn=(lambda w: None) if quiet else echo_warning)
    if as_json:
        emit_json(report.to_dict())
    if not quiet:
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
    ]
    for option in reversed(options):
        command = option(command)
    return vault_option(command)


@click.command("search")
@_search_options
def search_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Keyword search (BM25). Fast: loads no model."""
    from compiler.notes.search import keyword_search

    root, _ = vault_and_settings(vault)
    _show(keyword_search(root, " ".join(query), shown["limit"], _filters(shown)), shown)


@click.command("vsearch")
@_search_options
def vsearch_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Vector search: finds notes by meaning, not words."""
    from compiler.index.embedder import load_embedder
    from compiler.notes.search import vector_search

    root, settings = vault_and_settings(vault)
    _show(vector_search(root, " ".join(query), shown["limit"], _filters(shown),
                                     embedder=load_embedder(settings.model), chroma_url=settings.chroma_url), shown)


@click.command("query")
@_search_options
def query_command(query: tuple[str, ...], vault: str | None, **shown: Any) -> None:
    """Hybrid search: 0.4 × BM25 + 0.6 × cosine, plus a bonus for graph neighbours of strong hits."""
    from compiler.index.embedder import load_embedder
    from compiler.notes.search import hybrid_search

    root, settings = vault_and_settings(vault)
    _show(hybrid_search(root, " ".join(query), shown["limit"], _filters(shown),
                                     embedder=load_embedder(settings.model), chroma_url=settings.chroma_url,
                                     graph_bonus=settings.graph_bonus), shown)


def _filters(shown: dict[str, Any]) -> Any:
    from compiler.notes.search import Filters

    return Filters(path=shown["path_filter"], tag=shown["tag"], min_score=shown["min_score"])


def _show(hits: list[dict[str, Any]], shown: dict[str, Any]) -> None:
    if shown["as_json"]:
        return emit_json(hits)
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


COMMANDS = (compile_command, search_command, vsearch_command, query_command)
