"""The wiki's MCP tools: ingest a source, read and write pages, lint, file answers, promote memories.

Each is a thin adapter over one compiler.wiki function, run on the server's one worker like every
memory tool (so two agents' writes are serialised and the revision check sees the first), and
answered as the JSON the CLI prints with --json. The writer recorded in a page and its history is
the MCP client's name (`clientInfo.name` of its `initialize`).
"""

from __future__ import annotations

import base64
import binascii
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.fastmcp import Context
from pydantic import Field

from compiler.core.errors import InputError

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

    from compiler.mcp_server.server import MemoryServer

MAX_BODY_CHARS = 200_000
MAX_SOURCE_CHARS = 30_000_000  # base64 of a 20 MB source; the library names the real limit

Kind = Literal["source", "concept", "entity", "decision", "synthesis", "note"]
Title = Annotated[str, Field(min_length=1, max_length=200, description="The page's title: its file name too")]
PageRef = Annotated[str, Field(min_length=1, max_length=1000, description="A page's title or wiki path")]
Body = Annotated[str, Field(max_length=MAX_BODY_CHARS, description="Markdown, without frontmatter")]
Refs = Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=200)]
Revision = Annotated[int, Field(ge=0, description="The revision read_page returned: a write over a newer one is refused")]


@cache
def wiki() -> SimpleNamespace:
    """The wiki library, imported on first use (on the worker)."""
    from compiler.commands.wiki_memories import promote
    from compiler.wiki import answers, lint, pages, revisions, sources
    from compiler.wiki.layout import WikiLayout
    from compiler.wiki.source_files import read_source

    return SimpleNamespace(answers=answers, lint=lint, pages=pages, revisions=revisions, sources=sources, WikiLayout=WikiLayout,
                           read_source=read_source, promote=promote)


def writer_of(ctx: Context | None) -> str:
    """Returns `mcp:<client name>` (`mcp` when the client gave none)."""
    try:
        name = ctx.session.client_params.clientInfo.name  # type: ignore[union-attr]
    except AttributeError:
        name = ""
    return f"mcp:{name}" if name else "mcp"


def source_bytes(vault: Path, content: str, content_base64: str, path: str) -> tuple[bytes, str]:
    """Returns (the source's bytes, the name it came as) from exactly one of the three ways to pass it.
    A `path` must be a file inside the vault (an inbox the person dropped it in), never outside it."""
    given = [bool(content), bool(content_base64), bool(path)]
    if sum(given) != 1:
        raise InputError("pass exactly one of content, content_base64 or path")
    if content:
        return content.encode("utf-8"), ""
    if content_base64:
        try:
            return base64.b64decode(content_base64, validate=True), ""
        except (binascii.Error, ValueError):
            raise InputError("content_base64 is not base64") from None
    root = vault.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or any(p.startswith(".") for p in target.relative_to(root).parts):
        raise InputError(f"{path}: ingest_source reads files inside the vault only (not hidden ones): pass the "
                         "text as content, or drop the file into the vault first")
    if not target.is_file():
        raise InputError(f"{path}: no such file in the vault")
    return target.read_bytes(), target.name


def register_wiki_tools(server: FastMCP, memory: MemoryServer) -> None:
    """Adds the wiki's tools to `server`, each run on `memory`'s worker."""

    def tool(description: str) -> Any:
        return server.tool(description=description, structured_output=False)

    def layout() -> Any:
        return wiki().WikiLayout.of(memory.vault, memory.settings)

    @tool(description="Copy a source (article, paper, transcript: Markdown, text, HTML, PDF) into raw/ byte for "

                      "byte: as content, content_base64 or a vault path. Then write its summary page citing it.")
    async def ingest_source(ctx: Context, content: Annotated[str, Field(max_length=MAX_SOURCE_CHARS)] = "",
                            name: Annotated[str, Field(max_length=255)] = "",
                            content_base64: Annotated[str, Field(max_length=MAX_SOURCE_CHARS)] = "",
                            path: Annotated[str, Field(max_length=1000)] = "",
                            title: Annotated[str, Field(max_length=200)] = "",
                            origin: Annotated[str, Field(max_length=2000, description="A URL or where it came from")] = "") -> str:
        who = writer_of(ctx)
        data, found_name = source_bytes(memory.vault, content, content_base64, path)
        return await memory.call(lambda m: wiki().sources.ingest_source(
            layout(), data, name or found_name or "-", title=title, origin=origin or path, writer=who))

    @tool(description="Create a wiki page (or replace it whole, given expected_revision). Cite its raw sources, "

                      "link related pages with [[Title]]; index.md and log.md follow.")
    async def write_page(ctx: Context, title: Title, body: Body, kind: Kind = "note",
                         summary: Annotated[str, Field(max_length=500)] = "", sources: Refs | None = None,
                         links: Refs | None = None, expected_revision: Revision | None = None) -> str:
        who = writer_of(ctx)
        return await memory.call(lambda m: wiki().pages.write_page(
            layout(), title, body, kind=kind, summary=summary, sources=sources or (), links=links or (), writer=who,
            expected_revision=expected_revision))

    @tool(description="Revise a page: its body, a section (section + section_body) or one exact passage (find + "

                      "replace). Refused if it moved past expected_revision: read it again.")
    async def edit_page(ctx: Context, page: PageRef, expected_revision: Revision, body: Body | None = None,
                        section: Annotated[str, Field(max_length=200)] = "", section_body: Body | None = None,
                        find: Body = "", replace: Body | None = None,
                        summary: Annotated[str, Field(max_length=500)] | None = None, sources: Refs | None = None) -> str:
        who = writer_of(ctx)
        return await memory.call(lambda m: wiki().pages.edit_page(
            layout(), page, expected_revision, body=body, section=section, section_body=section_body, find=find,
            replace=replace, summary=summary, sources=sources, writer=who))

    @tool(description="Read a wiki page by title or path: body, revision (edit_page needs it), kind, sources.")
    async def read_page(page: PageRef) -> str:
        return await memory.call(lambda m: wiki().pages.read_page(layout(), page))

    @tool(description="List the wiki's pages (title, kind, summary, revision, updated) and raw sources. Read it "

                      "before writing, to update a page rather than duplicate it.")
    async def list_pages(kind: Kind | Literal[""] = "") -> str:
        return await memory.call(lambda m: wiki().pages.list_pages(layout(), kind))

    @tool(description="Rename a wiki page; the wiki's links to it follow.")
    async def move_page(ctx: Context, page: PageRef, new_title: Title, expected_revision: Revision,
                        kind: Kind | Literal[""] = "") -> str:
        who = writer_of(ctx)
        return await memory.call(lambda m: wiki().revisions.move_page(layout(), page, new_title, expected_revision,
                                                                      kind=kind, writer=who))

    @tool(description="Read a raw source's Markdown by its raw/ path, as list_pages shows it.")
    async def read_source(path: Annotated[str, Field(min_length=1, max_length=1000)]) -> str:
        return await memory.call(lambda m: wiki().read_source(layout(), path, memory.settings.max_note_bytes))

    @tool(description="Lint the wiki: broken links, orphans, contradictions, stale pages, uncited, missing and "

                      "duplicate pages, with file and line. Run it after a batch of writes.")
    async def lint_wiki(ctx: Context) -> str:
        who = writer_of(ctx)

        def run(m: Any) -> Any:
            result = wiki().lint.lint_wiki(layout(), (*memory.settings.ignore, memory.settings.out))
            wiki().lint.log_lint(layout(), result, who)
            return result

        return await memory.call(run)

    @tool(description="Save a good answer as a synthesis page linking the pages it drew on and citing their "

                      "sources, so the next question starts from it.")
    async def file_answer(ctx: Context, question: Annotated[str, Field(min_length=1, max_length=2000)], answer: Body,
                          pages: Refs | None = None, sources: Refs | None = None,
                          title: Annotated[str, Field(max_length=200)] = "") -> str:
        who = writer_of(ctx)
        return await memory.call(lambda m: wiki().answers.file_answer(
            layout(), question, answer, pages=pages or (), sources=sources or (), title=title, writer=who))

    @tool(description="Gather memories (ids from recall_memory) into one wiki page that quotes and cites each: what"

                      " agents learned joins the knowledge base.")
    async def promote_memories(ctx: Context, memory_ids: Annotated[list[str], Field(min_length=1, max_length=100)],
                               title: Title, kind: Kind = "concept",
                               summary: Annotated[str, Field(max_length=500)] = "", intro: Body = "") -> str:
        who = writer_of(ctx)
        return await memory.call(lambda m: wiki().promote(m, memory.settings, memory_ids, title, kind=kind,
                                                          summary=summary, intro=intro, writer=who))
