"""`engram serve`: the vault's memory as MCP tools over stdio, thin adapters over the memory library.

Each tool calls one library function and answers its value as JSON text: the value the CLI
prints with --json. Calls run one at a time on one worker thread (SQLite and Chroma handles stay
on it: compiler.mcp_server.worker), and so does maintenance, in slices between the calls, at
start and every `maintenance_hours`. One long-lived
`VaultMemory` serves every call, its index kept open between calls: the events are re-read on
each (its fold applies only the new ones) and the flat vector store reloads its row map when
another process wrote to it (compiler.index.flat), so a concurrent `engram compile` or `engram
memory add` is seen. An expected failure (compiler.core.errors.EXPECTED: input a
caller can get wrong, an unknown id, a busy vault, a path outside the vault) is a tool error
with one clear line (`MemoryServer._run`, the one handler), and the server goes on; so is an
argument that does not validate (`EngramMCP.call_tool`: one line, not pydantic's dump). What
mcp-engram 0.5 accepted is accepted (compiler.mcp_server.contract), and the Go engram CLI's tool
names that map onto ours are aliases (docs/migration.md has the table).

`initialize` is answered before anything heavy is imported: the memory library, numpy, the model
and the index load on the worker once the client says it is initialized (`serve_stdio`), and
maintenance waits behind them, so the handshake never shares the one interpreter lock with them.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import Field, ValidationError

from compiler.commands.setup import MEMORY_RULES
from compiler.core.errors import InputError
from compiler.core.settings import Settings
from compiler.mcp_server import contract
from compiler.mcp_server.wiki_tools import register_wiki_tools
from compiler.mcp_server.worker import MemoryServer, library
from compiler.memory.input import MemoryInput
from compiler.notes.access import MAX_PATH_CHARS

if TYPE_CHECKING:  # the memory library pulls numpy and the index in: imported on the worker, after the handshake
    pass

MAX_QUERY_CHARS = 2000
MAX_TEXT_CHARS = 100_000  # the library's 64 KB limit on one memory gives the precise message below this
MAX_METADATA_BYTES = 16 * 1024

log = logging.getLogger("engram.serve")

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in plain words")]
MemoryId = Annotated[str | int, Field(description="A memory id from store or recall")]
Detail = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Line = Annotated[str, Field(max_length=2000)]
Lines = Annotated[list[Line], Field(max_length=200)]
Project = Annotated[str, Field(max_length=200, description="Project name (default: the server's project)")]
Importance = Annotated[float, Field(description="0..1: how slowly it fades (outside it: clamped, with a warning)")]
Category = Annotated[str, Field(max_length=100, description="fact, strategy, assumption or failure (another word "
                                                         "is mapped, with a warning)")]
MAX_ID_CHARS = 100


def memory_from_metadata(content: str, importance: float, category: str, metadata: dict[str, Any],
                         project: str) -> MemoryInput:
    """Returns the input of `store_memory`: known metadata keys become fields, the rest is kept as details."""
    known = ("title", "project", "type", "topic_key", "scope", "session_id", "source_id")
    text = {k: str(metadata[k]) for k in known if metadata.get(k) is not None}
    details = {k: v for k, v in metadata.items() if k not in known}
    if len(json.dumps(details, default=str)) > MAX_METADATA_BYTES:
        raise InputError(f"metadata is over {MAX_METADATA_BYTES // 1024} KB: keep it to a few short fields")
    text.setdefault("project", project)
    return MemoryInput(content=content, importance=importance, category=category, fields=details, **text)


class EngramMCP(FastMCP):
    """FastMCP, with an argument that does not validate answered in one line."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(contract.one_line(name, error.__cause__)) from None
            raise


def memory_id(value: str | int) -> str:
    """Returns a memory id argument as text (mcp-engram took numbers), refusing an absurd one."""
    text = contract.memory_id(value)
    if not text or len(text) > MAX_ID_CHARS:
        raise ToolError(f"memory_id must be 1 to {MAX_ID_CHARS} characters (at most {MAX_ID_CHARS} characters)")
    return text


def build_server(memory: MemoryServer) -> FastMCP:
    """Returns the FastMCP server with every tool bound to `memory`. The library functions are
    looked up when a tool runs (`library()`), so building the server imports none of them."""
    server = EngramMCP("engram", instructions=MEMORY_RULES, log_level="WARNING")
    server._mcp_server.version = contract.package_version()  # serverInfo.version: ours, not the SDK's

    def tool(description: str) -> Callable[[Any], Any]:  # the answer is JSON text: no second, structured copy
        return server.tool(description=description, structured_output=False)

    default = memory.project
    _id = memory_id

    @tool(description="Save a fact, decision, preference or lesson worth remembering across sessions. Call it "
                      "whenever you learn something new; near-duplicates are merged, contradictions replace.")
    async def store_memory(content: Text, importance: Importance, category: Category = "fact",
                           metadata: dict[str, Any] | None = None) -> str:
        said: list[str] = []
        item = memory_from_metadata(content, contract.importance(importance, said), contract.category(category, said),
                                    metadata or {}, default)
        return await memory.call(lambda m: contract.with_warnings(library().write.store_memory(m, item), said))

    @tool(description="Recall memories relevant to a question, best first. Call it FIRST, before starting a "
                      "task, and whenever past context could help.")
    async def recall_memory(query: Query, top_k: Annotated[int, Field(ge=1, le=100)] = 5) -> str:
        return await memory.call(lambda m: library().recall(m, query, top_k, project=default))

    @tool(description="Rewrite a memory that changed; the old version stays in its history. Call it when a "
                      "recalled memory is outdated or wrong.")
    async def update_memory(memory_id: MemoryId, new_content: Text, importance: Importance | None = None) -> str:
        said: list[str] = []
        level = None if importance is None else contract.importance(importance, said)
        key = _id(memory_id)
        return await memory.call(lambda m: contract.with_warnings(library().edits.update_memory(m, key, new_content, level), said))

    @tool(description="Fold near-duplicate memories together and archive faded ones. Rarely needed: the "
                      "server does it at start and every 12 hours.")
    async def consolidate_memory() -> str:
        return await memory.call(lambda m: library().run_maintenance(m))

    @tool(description="Save where this session stands for the next one. Call it before the session ends or "
                      "when the context is about to run out.")
    async def session_handoff(summary: Text, completed: Lines | None = None, in_progress: Lines | None = None,
                              blocked: Lines | None = None, next_steps: Lines | None = None) -> str:
        return await memory.call(lambda m: library().eng.save_handoff(m, summary, completed or (), in_progress or (),
                                                            blocked or (), next_steps or (), default))

    @tool(description="Overview: memories by category and project, failures by component and severity, "
                      "active features, last maintenance.")
    async def memory_stats() -> str:
        return await memory.call(lambda m: library().eng.memory_stats(m))

    @tool(description="Record a failure (error, component, root cause, fix) so it is not repeated. Call it "
                      "when something breaks or a bug is fixed.")
    async def track_failure(error: Text, component: Line, severity: Literal["critical", "major", "minor"] = "major",
                            root_cause: Detail = "", fix: Detail = "",
                            related_test_ids: Lines | None = None) -> str:
        return await memory.call(lambda m: library().eng.track_failure(m, error, component, severity, root_cause, fix,
                                                             related_test_ids or (), default))

    @tool(description="Create or update the one progress record of a feature. Call it when a feature's "
                      "status, completion or blockers change.")
    async def track_progress(feature: Line, status: Literal["planning", "in_progress", "review", "blocked", "done"],
                             completion: Annotated[float, Field(description="0..100 (rounded and clamped, "
                                                                            "with a warning)")] | None = None,
                             blockers: Lines | None = None, quality_score: float | None = None,
                             notes: Detail = "") -> str:
        said: list[str] = []
        done = contract.completion(completion, said)
        return await memory.call(lambda m: contract.with_warnings(
            library().eng.track_progress(m, feature, status, done, blockers or (), quality_score, notes, default), said))

    @tool(description="Forget a memory that is wrong or unwanted (it stays in the log; restore_memory "
                      "brings it back).")
    async def forget_memory(memory_id: MemoryId) -> str:
        key = _id(memory_id)
        return await memory.call(lambda m: library().edits.forget_memory(m, key))

    @tool(description="Bring back a forgotten, archived or consolidated memory.")
    async def restore_memory(memory_id: MemoryId) -> str:
        key = _id(memory_id)
        return await memory.call(lambda m: library().edits.restore_memory(m, key))

    @tool(description="Load the latest session handoff (null when there is none). Call it at the start of a "
                      "session to pick up where the last one stopped.")
    async def load_handoff(project: Project = "") -> str:
        return await memory.call(lambda m: library().eng.load_handoff(m, project or default))

    @tool(description="Search the vault: the user's notes, the wiki's pages and raw sources (each hit's layer says "
                      "which), by keywords and meaning. Read a hit with get_note.")
    async def search_notes(query: Query, n: Annotated[int, Field(ge=1, le=50)] = 5) -> str:
        layers = ((memory.settings.raw, "raw"), (memory.settings.wiki, "wiki"))
        return await memory.call(lambda m: library().hybrid_search(
            memory.vault, query, n, library().Filters(layers=layers), embedder=m.embedder(),
            chroma_url=memory.settings.chroma_url, graph_bonus=memory.settings.graph_bonus))

    @tool(description="Read one note (.md or .qmd) by its vault-relative path or its docid (#3f9a1c), "
                      "as search_notes returns them.")
    async def get_note(path: Annotated[str, Field(max_length=MAX_PATH_CHARS)]) -> str:
        return await memory.call(lambda m: library().read_note(memory.vault, path, memory.settings.max_note_bytes))

    @tool(description="Save an observation (engram CLI style). Call it after a decision, bugfix or discovery; "
                      "a repeated topic_key updates the earlier observation.")
    async def mem_save(title: Line, content: Detail = "", type: Line = "manual", project: Project = "",
                       scope: Line = "project", topic_key: Line = "", session_id: Line = "") -> str:
        # The newer Go contract makes content optional: a title alone is the memory then.
        item = MemoryInput(content=content if content.strip() else title, title=title, type=type,
                           project=project or default, scope=scope, topic_key=topic_key, session_id=session_id)
        return await memory.call(lambda m: library().eng.save_observation(m, item))

    @tool(description="Search saved observations (engram CLI style). Call it before working on something "
                      "that may have history.")
    async def mem_search(query: Query, type: Line = "", project: Project = "",
                         limit: Annotated[int, Field(ge=1, le=100)] = 10) -> str:
        return await memory.call(lambda m: library().recall(m, query, limit, project=project or default, memory_type=type))

    @tool(description="Recent observations and the last session summary of a project. Call it at session start.")
    async def mem_context(project: Project = "", limit: Annotated[int, Field(ge=1, le=200)] = 20) -> str:
        return await memory.call(lambda m: library().eng.memory_context(m, project or default, limit))

    @tool(description="Save the session summary (goal, discoveries, accomplished, next steps). Call it "
                      "before the session ends.")
    async def mem_session_summary(content: Text, project: Project = "", session_id: Line = "") -> str:
        return await memory.call(lambda m: library().eng.save_handoff(m, content, project=project or default))

    @tool(description="One observation by id, with its history (engram CLI alias of `engram memory show`).")
    async def mem_get_observation(id: MemoryId) -> str:
        key = _id(id)
        return await memory.call(lambda m: library().edits.show_memory(m, key))

    @tool(description="Rewrite an observation's content or title (engram CLI alias of update_memory).")
    async def mem_update(id: MemoryId, content: Detail = "", title: Line = "") -> str:
        key = _id(id)
        return await memory.call(lambda m: library().edits.update_memory(m, key, content or None, title=title or None))

    @tool(description="Delete an observation (engram CLI alias of forget_memory: it stays restorable).")
    async def mem_delete(id: MemoryId, hard_delete: bool = False) -> str:
        key = _id(id)
        said = ["hard_delete is not offered: the memory is forgotten, and restore_memory brings it back"] \
            if hard_delete else []
        return await memory.call(lambda m: contract.with_warnings(library().edits.forget_memory(m, key), said))

    @tool(description="The observations of the same project saved just before and after one (engram CLI alias).")
    async def mem_timeline(observation_id: MemoryId, before: Annotated[int, Field(ge=0, le=50)] = 5,
                           after: Annotated[int, Field(ge=0, le=50)] = 5) -> str:
        key = _id(observation_id)
        return await memory.call(lambda m: library().eng.memory_timeline(m, key, before, after))

    @tool(description="Memory totals (engram CLI alias of memory_stats).")
    async def mem_stats(project: Project = "") -> str:
        return await memory.call(lambda m: library().eng.memory_stats(m))

    register_wiki_tools(server, memory)
    return server


class _StrayOutput(io.TextIOBase):
    """sys.stdout while serving: the transport writes to `.buffer` (the real stdout), stray prints go to stderr."""

    def __init__(self, real: Any) -> None:
        self.buffer = real.buffer

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def serve_stdio(vault: Path, settings: Settings, *, project: str = "", maintenance: bool = True) -> None:
    """Serves MCP over stdin/stdout until the client closes the connection."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="engram serve: %(message)s")
    for noisy in ("mcp", "httpx", "chromadb", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from mcp.types import InitializedNotification

    memory = MemoryServer(vault, settings, project=project)
    server = build_server(memory)
    # What serving imports, imported before the worker starts importing the model's libraries: two
    # threads importing the same modules at once can see each other's half-made modules.
    import mcp.server.stdio  # noqa: F401

    async def initialized(_: InitializedNotification) -> None:
        """The handshake is answered: now load, in the background. Before it, the worker's imports
        would take half of the one interpreter lock from answering `initialize` (2.5 s instead of 1)."""
        if not started.is_set():
            started.set()
            memory.start_warmup()  # queued first on the worker: maintenance and tool calls run after it
            if maintenance:
                memory.start_maintenance()

    started = threading.Event()
    server._mcp_server.notification_handlers[InitializedNotification] = initialized
    sys.stdout = _StrayOutput(sys.stdout)  # a library's print must never corrupt the protocol
    log.info("serving %s over stdio%s", memory.vault, f" (project {project})" if project else "")
    try:
        server.run("stdio")
    finally:
        memory.close()
