"""`engram serve`: the vault's memory as MCP tools over stdio, thin adapters over the memory library.

Each tool calls one library function and answers its value as JSON text: the value the CLI
prints with --json. Calls run one at a time on one worker thread (SQLite and Chroma handles stay
on it), and so does maintenance, at start and every `maintenance_hours`. One long-lived
`VaultMemory` serves every call: the events are re-read on each (its fold applies only the new
ones) and Chroma is reopened when another process wrote to it, so a concurrent `engram compile`
or `engram memory add` is seen. An expected failure (compiler.core.errors.EXPECTED: input a
caller can get wrong, an unknown id, a busy vault, a path outside the vault) is a tool error
with one clear line (`MemoryServer._run`, the one handler), and the server goes on.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import Field

from compiler.commands.setup import MEMORY_RULES
from compiler.core.errors import EXPECTED, InputError, describe
from compiler.core.settings import Settings
from compiler.index.embedder import Embedder
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.notes.access import MAX_PATH_CHARS, read_note

MAX_QUERY_CHARS = 2000
MAX_TEXT_CHARS = 100_000  # the library's 64 KB limit on one memory gives the precise message below this
MAX_METADATA_BYTES = 16 * 1024

log = logging.getLogger("engram.serve")

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in plain words")]
MemoryId = Annotated[str, Field(min_length=1, max_length=100, description="A memory id from store or recall")]
Detail = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Line = Annotated[str, Field(max_length=2000)]
Lines = Annotated[list[Line], Field(max_length=200)]
Project = Annotated[str, Field(max_length=200, description="Project name (default: the server's project)")]
Importance = Annotated[float, Field(ge=0, le=1, description="0..1: how slowly it fades")]
Category = Literal["fact", "strategy", "assumption", "failure"]


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


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


class MemoryServer:
    """One vault's memory behind the tools: a single worker thread runs every call and the maintenance."""

    def __init__(self, vault: Path, settings: Settings, *, project: str = "", embedder: Embedder | None = None) -> None:
        self.vault = vault.resolve()
        self.settings = settings
        self.project = project
        self._embedder = embedder
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-memory")
        self._memory: VaultMemory | None = None
        self._stop = threading.Event()

    async def call(self, action: Callable[[VaultMemory], Any]) -> str:
        """Runs `action(memory)` on the worker; returns its value as JSON text."""
        return await asyncio.wrap_future(self._worker.submit(self._run, action))

    def _run(self, action: Callable[[VaultMemory], Any]) -> str:
        """Returns `action`'s value as JSON text. The one error handler of the tools: an expected
        failure becomes a tool error with its one line (FastMCP answers any exception a tool raises
        as an error result); anything else is logged with its traceback and raised as it is."""
        if self._memory is None:  # one handle for every call: its fold is incremental, its model loaded once
            self._memory = VaultMemory(self.vault, self.settings, embedder=self._embedder)
        try:
            return to_json(action(self._memory))
        except EXPECTED as error:
            raise ToolError(describe(error)) from error
        except Exception:
            log.exception("tool call failed")
            raise
        finally:
            self._memory.close()  # Chroma and SQLite handles live for one call: others may write before the next

    def start_maintenance(self) -> None:
        """Maintains now, then every `maintenance_hours`, on the worker (between tool calls)."""
        threading.Thread(target=self._maintain_forever, name="engram-maintenance", daemon=True).start()

    def _maintain_forever(self) -> None:
        from compiler.memory.maintenance import run_maintenance

        interval = max(60.0, self.settings.maintenance_hours * 3600)
        while not self._stop.is_set():
            try:
                done = self._worker.submit(self._run, run_maintenance).result()
                log.info("maintenance: %s", " ".join(done.split()))
            except Exception as error:  # a failed maintenance never stops the server
                log.warning("maintenance failed: %s", error)
            self._stop.wait(interval)

    def close(self) -> None:
        self._stop.set()
        self._worker.shutdown(wait=True, cancel_futures=True)


def build_server(memory: MemoryServer) -> FastMCP:
    """Returns the FastMCP server with every tool bound to `memory`."""
    from compiler.memory import edits, write
    from compiler.memory import engineering as eng
    from compiler.memory.maintenance import run_maintenance
    from compiler.memory.recall import recall

    server = FastMCP("engram", instructions=MEMORY_RULES, log_level="WARNING")

    def tool(description: str) -> Callable[[Any], Any]:  # the answer is JSON text: no second, structured copy
        return server.tool(description=description, structured_output=False)

    default = memory.project

    @tool(description="Save a fact, decision, preference or lesson worth remembering across sessions. Call it "
                      "whenever you learn something new; near-duplicates are merged, contradictions replace.")
    async def store_memory(content: Text, importance: Importance, category: Category = "fact",
                           metadata: dict[str, Any] | None = None) -> str:
        return await memory.call(lambda m: write.store_memory(m, memory_from_metadata(content, importance, category,
                                                                                      metadata or {}, default)))

    @tool(description="Recall memories relevant to a question, best first. Call it FIRST, before starting a "
                      "task, and whenever past context could help.")
    async def recall_memory(query: Query, top_k: Annotated[int, Field(ge=1, le=100)] = 5) -> str:
        return await memory.call(lambda m: recall(m, query, top_k, project=default))

    @tool(description="Rewrite a memory that changed; the old version stays in its history. Call it when a "
                      "recalled memory is outdated or wrong.")
    async def update_memory(memory_id: MemoryId, new_content: Text, importance: Importance | None = None) -> str:
        return await memory.call(lambda m: edits.update_memory(m, memory_id, new_content, importance))

    @tool(description="Fold near-duplicate memories together and archive faded ones. Rarely needed: the "
                      "server does it at start and every 12 hours.")
    async def consolidate_memory() -> str:
        return await memory.call(run_maintenance)

    @tool(description="Save where this session stands for the next one. Call it before the session ends or "
                      "when the context is about to run out.")
    async def session_handoff(summary: Text, completed: Lines | None = None, in_progress: Lines | None = None,
                              blocked: Lines | None = None, next_steps: Lines | None = None) -> str:
        return await memory.call(lambda m: eng.save_handoff(m, summary, completed or (), in_progress or (),
                                                            blocked or (), next_steps or (), default))

    @tool(description="Overview: memories by category and project, failures by component and severity, "
                      "active features, last maintenance.")
    async def memory_stats() -> str:
        return await memory.call(eng.memory_stats)

    @tool(description="Record a failure (error, component, root cause, fix) so it is not repeated. Call it "
                      "when something breaks or a bug is fixed.")
    async def track_failure(error: Text, component: Line, severity: Literal["critical", "major", "minor"] = "major",
                            root_cause: Detail = "", fix: Detail = "",
                            related_test_ids: Lines | None = None) -> str:
        return await memory.call(lambda m: eng.track_failure(m, error, component, severity, root_cause, fix,
                                                             related_test_ids or (), default))

    @tool(description="Create or update the one progress record of a feature. Call it when a feature's "
                      "status, completion or blockers change.")
    async def track_progress(feature: Line, status: Literal["planning", "in_progress", "review", "blocked", "done"],
                             completion: Annotated[int, Field(ge=0, le=100)] | None = None,
                             blockers: Lines | None = None, quality_score: float | None = None,
                             notes: Detail = "") -> str:
        return await memory.call(lambda m: eng.track_progress(m, feature, status, completion, blockers or (),
                                                              quality_score, notes, default))

    @tool(description="Forget a memory that is wrong or unwanted (it stays in the log; restore_memory "
                      "brings it back).")
    async def forget_memory(memory_id: MemoryId) -> str:
        return await memory.call(lambda m: edits.forget_memory(m, memory_id))

    @tool(description="Bring back a forgotten, archived or consolidated memory.")
    async def restore_memory(memory_id: MemoryId) -> str:
        return await memory.call(lambda m: edits.restore_memory(m, memory_id))

    @tool(description="Load the latest session handoff (null when there is none). Call it at the start of a "
                      "session to pick up where the last one stopped.")
    async def load_handoff(project: Project = "") -> str:
        return await memory.call(lambda m: eng.load_handoff(m, project or default))

    @tool(description="Search the user's notes in the vault (keywords and meaning). Call it when their notes "
                      "may hold the answer; read a hit with get_note.")
    async def search_notes(query: Query, n: Annotated[int, Field(ge=1, le=50)] = 5) -> str:
        from compiler.notes.search import Filters, hybrid_search

        return await memory.call(lambda m: hybrid_search(
            memory.vault, query, n, Filters(), embedder=m.embedder(), chroma_url=memory.settings.chroma_url,
            graph_bonus=memory.settings.graph_bonus))

    @tool(description="Read one note (.md or .qmd) by its vault-relative path or its docid (#3f9a1c), "
                      "as search_notes returns them.")
    async def get_note(path: Annotated[str, Field(max_length=MAX_PATH_CHARS)]) -> str:
        return await memory.call(lambda m: read_note(memory.vault, path, memory.settings.max_note_bytes))

    @tool(description="Save an observation (engram CLI style). Call it after a decision, bugfix or discovery; "
                      "a repeated topic_key updates the earlier observation.")
    async def mem_save(title: Line, content: Text, type: Line = "manual", project: Project = "",
                       scope: Line = "project", topic_key: Line = "") -> str:
        item = MemoryInput(content=content, title=title, type=type, project=project or default, scope=scope,
                           topic_key=topic_key)
        return await memory.call(lambda m: eng.save_observation(m, item))

    @tool(description="Search saved observations (engram CLI style). Call it before working on something "
                      "that may have history.")
    async def mem_search(query: Query, type: Line = "", project: Project = "",
                         limit: Annotated[int, Field(ge=1, le=100)] = 10) -> str:
        return await memory.call(lambda m: recall(m, query, limit, project=project or default, memory_type=type))

    @tool(description="Recent observations and the last session summary of a project. Call it at session start.")
    async def mem_context(project: Project = "", limit: Annotated[int, Field(ge=1, le=200)] = 20) -> str:
        return await memory.call(lambda m: eng.memory_context(m, project or default, limit))

    @tool(description="Save the session summary (goal, discoveries, accomplished, next steps). Call it "
                      "before the session ends.")
    async def mem_session_summary(content: Text, project: Project) -> str:
        return await memory.call(lambda m: eng.save_handoff(m, content, project=project or default))

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
    memory = MemoryServer(vault, settings, project=project)
    server = build_server(memory)
    if maintenance:
        memory.start_maintenance()
    sys.stdout = _StrayOutput(sys.stdout)  # a library's print must never corrupt the protocol
    log.info("serving %s over stdio%s", memory.vault, f" (project {project})" if project else "")
    try:
        server.run("stdio")
    finally:
        memory.close()
