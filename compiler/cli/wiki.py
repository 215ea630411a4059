"""`engram ingest`, `engram lint` and `engram wiki …`: thin adapters over the wiki library (compiler.wiki).

What an agent does over MCP, a person (or a script) does here with the same functions and the same
dicts: JSON with --json, else a short human answer. Page bodies come from a file or stdin (`-`).
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

import click

from compiler.cli.common import (
    emit_json,
    json_option,
    vault_and_settings,
    vault_argument,
    vault_option,
)
from compiler.core.errors import InputError

KIND_CHOICE = click.Choice(["source", "concept", "entity", "decision", "synthesis", "note"])
WRITER_HELP = "Who writes, for the page's `writer` and the history (default: cli:<user>)."


def _layout(vault: str | None) -> Any:
    from compiler.wiki.layout import WikiLayout

    root, settings = vault_and_settings(vault)
    return WikiLayout.of(root, settings)


def _writer(writer: str) -> str:
    if writer:
        return writer
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _text(path: str | None, what: str) -> str | None:
    """Returns the text of `path` (`-`: stdin), or None when no path was given."""
    if path is None:
        return None
    data = sys.stdin.buffer.read() if path == "-" else _read(Path(path))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}: the {what} is not UTF-8 text") from None


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return path.read_bytes()


def _show(result: Any, as_json: bool, line: str) -> None:
    if as_json:
        emit_json(result)
    else:
        click.echo(line)


@click.command("ingest")
@click.argument("source", metavar="PATH")
@vault_option
@json_option
@click.option("--title", default="", help="The source's title (default: its first heading, <title> or file name).")
@click.option("--origin", default="", help="Where it came from (a URL); new bytes from the same origin are a new "
                                          "version (default: the file's path).")
@click.option("--writer", default="", help=WRITER_HELP)
def ingest_command(source: str, vault: str | None, as_json: bool, title: str, origin: str, writer: str) -> None:
    """Copy a source (Markdown, text, HTML or PDF; - reads stdin) into raw/, byte for byte.

    The same bytes twice are one source; new bytes from the same origin replace the old version
    (which stays, and the pages citing it become stale for `engram lint`).
    """
    from compiler.wiki.sources import ingest_source

    layout = _layout(vault)
    data = sys.stdin.buffer.read() if source == "-" else _read(Path(source))
    where = origin or ("" if source == "-" else str(Path(source).resolve()))
    result = ingest_source(layout, data, source, title=title, origin=where, writer=_writer(writer))
    said = "already there as" if result["duplicate"] else "ingested as"
    _show(result, as_json, f"{said} {result['source']['text']}"
                           f"{' (replaces ' + result['replaces'] + ')' if result['replaces'] else ''}")


@click.command("lint")
@vault_argument
@vault_option
@json_option
@click.option("--strict", is_flag=True, help="Exit 1 when there is any finding (for a pre-commit hook).")
@click.option("--log", "record", is_flag=True, help="Append this lint to log.md (the MCP tool always does).")
def lint_command(vault_path: str | None, vault: str | None, as_json: bool, strict: bool, record: bool) -> None:
    """Check the wiki: broken links, orphans, contradictions, stale pages, uncited pages, missing
    and duplicate pages. One `path:line: kind: message` line per finding."""
    from compiler.wiki.lint import lint_wiki, log_lint

    layout = _layout(vault_path or vault)
    result = lint_wiki(layout)
    if record:
        log_lint(layout, result, _writer(""))
    if as_json:
        emit_json(result)
    else:
        for finding in result["findings"]:
            click.echo(f"{finding['file']}:{finding['line']}: {finding['kind']}: {finding['message']}")
        counted = ", ".join(f"{n} {k}" for k, n in result["counts"].items() if n) or "no findings"
        click.echo(f"engram lint: {result['pages']} pages, {result['sources']} sources: {counted}", err=True)
    sys.exit(1 if strict and result["findings"] else 0)


@click.group("wiki")
def wiki_group() -> None:
    """The wiki's pages: list, read, write, edit, move, history, undo, answers and promotions."""


@wiki_group.command("list")
@vault_option
@json_option
@click.option("--kind", type=KIND_CHOICE, help="Only pages of this kind.")
def wiki_list(vault: str | None, as_json: bool, kind: str | None) -> None:
    """Every page (path, title, kind, revision, updated, summary) and every source."""
    from compiler.wiki.pages import list_pages

    result = list_pages(_layout(vault), kind or "")
    if as_json:
        emit_json(result)
        return
    for page in result["pages"]:
        click.echo(f"{page['path']}\t{page['kind']}\tr{page['revision']}\t{page['updated'][:10]}\t{page['summary']}")


@wiki_group.command("read")
@click.argument("page")
@vault_option
@json_option
def wiki_read(page: str, vault: str | None, as_json: bool) -> None:
    """Print PAGE (a title or a wiki path): its revision (what edit needs) and its body."""
    from compiler.wiki.pages import read_page

    result = read_page(_layout(vault), page)
    _show(result, as_json, f"{result['path']} · revision {result['revision']} · {result['kind']}\n\n{result['body']}")


def _page_options(command: Any) -> Any:
    for option in reversed([
        click.option("--summary", default=None, help="One line for index.md."),
        click.option("--source", "sources", multiple=True, help="A raw/ source the page cites (repeatable)."),
        click.option("--writer", default="", help=WRITER_HELP),
    ]):
        command = option(command)
    return command


@wiki_group.command("write")
@click.argument("title")
@vault_option
@json_option
@_page_options
@click.option("--body", "body_file", required=True, help="File holding the page's Markdown body (- for stdin).")
@click.option("--kind", type=KIND_CHOICE, default="note", show_default=True, help="What the page is.")
@click.option("--link", "links", multiple=True, help="A page title to link under Related (repeatable).")
@click.option("--expected-revision", type=int, default=None, help="Replace an existing page whole: the revision read.")
def wiki_write(title: str, vault: str | None, as_json: bool, summary: str | None, sources: tuple[str, ...], writer: str,
               body_file: str, kind: str, links: tuple[str, ...], expected_revision: int | None) -> None:
    """Create the page TITLE (or replace it, given --expected-revision)."""
    from compiler.wiki.pages import write_page

    result = write_page(_layout(vault), title, _text(body_file, "body") or "", kind=kind, summary=summary or "",
                        sources=sources, links=links, writer=_writer(writer), expected_revision=expected_revision)
    _show(result, as_json, f"{'created' if result['created'] else 'rewrote'} {result['path']} (revision {result['revision']})")


@wiki_group.command("edit")
@click.argument("page")
@vault_option
@json_option
@_page_options
@click.option("--expected-revision", type=int, required=True, help="The revision you read (refused if it moved on).")
@click.option("--body", "body_file", default=None, help="File with the new whole body (- for stdin).")
@click.option("--section", default="", help="Replace the section under this heading (appended when missing)...")
@click.option("--section-body", "section_file", default=None, help="...with this file's text (- for stdin).")
@click.option("--find", default="", help="Replace this exact passage (it must occur once)...")
@click.option("--replace", default=None, help="...with this text.")
def wiki_edit(page: str, vault: str | None, as_json: bool, summary: str | None, sources: tuple[str, ...], writer: str,
              expected_revision: int, body_file: str | None, section: str, section_file: str | None, find: str,
              replace: str | None) -> None:
    """Revise PAGE: its body, one section, or one passage, checked against --expected-revision."""
    from compiler.wiki.pages import edit_page

    result = edit_page(_layout(vault), page, expected_revision, body=_text(body_file, "body"), section=section,
                       section_body=_text(section_file, "section"), find=find, replace=replace, summary=summary,
                       sources=sources or None, writer=_writer(writer))
    _show(result, as_json, f"edited {result['path']} (revision {result['revision']})")


@wiki_group.command("move")
@click.argument("page")
@click.argument("new_title")
@vault_option
@json_option
@click.option("--expected-revision", type=int, required=True, help="The revision you read.")
@click.option("--kind", type=KIND_CHOICE, default=None, help="A new kind (and so folder) for the page.")
@click.option("--writer", default="", help=WRITER_HELP)
def wiki_move(page: str, new_title: str, vault: str | None, as_json: bool, expected_revision: int, kind: str | None,
              writer: str) -> None:
    """Rename PAGE to NEW_TITLE; the wiki's links to it follow."""
    from compiler.wiki.revisions import move_page

    result = move_page(_layout(vault), page, new_title, expected_revision, kind=kind or "", writer=_writer(writer))
    _show(result, as_json, f"moved {result['moved_from']} → {result['path']} ({len(result['relinked'])} pages relinked)")


@wiki_group.command("history")
@click.argument("page")
@vault_option
@json_option
def wiki_history(page: str, vault: str | None, as_json: bool) -> None:
    """PAGE's writes, oldest first: when, what, who, revision."""
    from compiler.wiki.revisions import page_history

    result = page_history(_layout(vault), page)
    if as_json:
        emit_json(result)
        return
    for entry in result["entries"]:
        click.echo(f"{entry['at']}\t{entry['action']}\tr{entry.get('revision', 0)}\t{entry.get('writer', '')}\t"
                   f"{entry.get('detail', '')}")


@wiki_group.command("undo")
@click.argument("page")
@vault_option
@json_option
@click.option("--writer", default="", help=WRITER_HELP)
def wiki_undo(page: str, vault: str | None, as_json: bool, writer: str) -> None:
    """Undo PAGE's last write (a creation removes the page, a move moves it back)."""
    from compiler.wiki.revisions import undo_page

    result = undo_page(_layout(vault), page, writer=_writer(writer))
    _show(result, as_json, f"{'removed' if result['removed'] else 'restored'} {result['path']}"
                           f" (undid {result['undone']['action']} of revision {result['undone'].get('revision', 0)})")


@wiki_group.command("answer")
@click.argument("question")
@vault_option
@json_option
@click.option("--answer", "answer_file", required=True, help="File holding the answer (- for stdin).")
@click.option("--page", "pages", multiple=True, help="A page the answer draws on (repeatable).")
@click.option("--source", "sources", multiple=True, help="A raw/ source it cites directly (repeatable).")
@click.option("--title", default="", help="The page's title (default: the question).")
@click.option("--writer", default="", help=WRITER_HELP)
def wiki_answer(question: str, vault: str | None, as_json: bool, answer_file: str, pages: tuple[str, ...],
                sources: tuple[str, ...], title: str, writer: str) -> None:
    """File the answer to QUESTION as a synthesis page linking the pages it used."""
    from compiler.wiki.answers import file_answer

    result = file_answer(_layout(vault), question, _text(answer_file, "answer") or "", pages=pages, sources=sources,
                         title=title, writer=_writer(writer))
    _show(result, as_json, f"filed {result['path']} (based on {len(result['based_on'])} pages)")


@wiki_group.command("promote")
@click.argument("memory_ids", nargs=-1, required=True, metavar="MEMORY_ID...")
@vault_option
@json_option
@click.option("--title", required=True, help="The page's title.")
@click.option("--kind", type=KIND_CHOICE, default="concept", show_default=True, help="What the page is.")
@click.option("--summary", default="", help="One line for index.md.")
@click.option("--writer", default="", help=WRITER_HELP)
def wiki_promote(memory_ids: tuple[str, ...], vault: str | None, as_json: bool, title: str, kind: str, summary: str,
                 writer: str) -> None:
    """Gather memories MEMORY_ID... into one wiki page that quotes and cites each."""
    from compiler.commands.wiki_memories import promote
    from compiler.memory.vault import VaultMemory

    root, settings = vault_and_settings(vault)
    with VaultMemory(root, settings) as memory:
        result = promote(memory, settings, memory_ids, title, kind=kind, summary=summary, writer=_writer(writer))
    _show(result, as_json, f"wrote {result['path']} from {len(result['memories'])} memories")


COMMANDS = (ingest_command, lint_command, wiki_group)
