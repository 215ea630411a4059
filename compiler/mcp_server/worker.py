"""One vault's memory behind the MCP tools: one worker thread runs every call and the maintenance.

The SQLite and Chroma handles stay on that thread, and one long-lived `VaultMemory` (its fold
incremental, its model loaded once) serves every call.

Maintenance runs on the same worker in slices of SLICE seconds, each a task of its own, so a call
sent meanwhile waits for one slice at most (compiler.memory.maintenance.prepare_maintenance).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp.exceptions import ToolError

from compiler.core.errors import EXPECTED, describe
from compiler.core.settings import Settings

if TYPE_CHECKING:  # the memory library pulls numpy and the index in: imported on the worker, after the handshake
    from compiler.embed.embedder import Embedder
    from compiler.memory.vault import VaultMemory

log = logging.getLogger("engram.serve")


@cache
def library() -> SimpleNamespace:
    """The memory and notes functions the tools call, imported on first use (on the worker)."""
    from compiler.memory import edits, engineering, write
    from compiler.memory.maintenance import consolidate, prepare_maintenance, run_maintenance
    from compiler.memory.recall import recall
    from compiler.memory.vault import VaultMemory, read_memories
    from compiler.notes.access import read_note
    from compiler.notes.search import Filters, hybrid_search

    return SimpleNamespace(edits=edits, eng=engineering, write=write, run_maintenance=run_maintenance,
                           consolidate=consolidate, prepare_maintenance=prepare_maintenance, recall=recall,
                           VaultMemory=VaultMemory, read_memories=read_memories, read_note=read_note,
                           Filters=Filters, hybrid_search=hybrid_search)


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
        self._maintenance: Future[str] | None = None
        self._last_call = 0.0  # time.monotonic() of the last tool call

    async def call(self, action: Callable[[VaultMemory], Any]) -> str:
        """Runs `action(memory)` on the worker; returns its value as JSON text."""
        self._last_call = time.monotonic()
        return await asyncio.wrap_future(self._worker.submit(self._run, action))

    def _run(self, action: Callable[[VaultMemory], Any]) -> str:
        """Returns `action`'s value as JSON text. The one error handler of the tools: an expected
        failure becomes a tool error with its one line (FastMCP answers any exception a tool raises
        as an error result); anything else is logged with its traceback and raised as it is."""
        if self._memory is None:  # one handle for every call: its fold is incremental, its model loaded once
            self._memory = library().VaultMemory(self.vault, self.settings, embedder=self._embedder)
        try:
            return to_json(action(self._memory))
        except EXPECTED as error:
            raise ToolError(describe(error)) from error
        except Exception:
            log.exception("tool call failed")
            raise

    def start_warmup(self) -> None:
        """Loads the model and opens the index on the worker, in the background: `initialize` is
        answered while they load, and the first tool call that embeds finds them ready."""
        self._worker.submit(self._run, _warm)

    def start_maintenance(self) -> None:
        """Maintains now, then every `maintenance_hours`, on the worker (between tool calls)."""
        threading.Thread(target=self._maintain_forever, name="engram-maintenance", daemon=True).start()

    def _maintain_forever(self) -> None:
        interval = max(60.0, self.settings.maintenance_hours * 3600)
        while not self._stop.is_set():
            try:
                # In slices, each a task of its own on the worker: a tool call sent meanwhile is
                # queued before the next slice and waits for one slice at most.
                while json.loads(self._on_worker(_prepare)):
                    pass
                done = self._on_worker(_maintain)
                log.info("maintenance: %s", " ".join(done.split()))
                self._save_when_idle()
            except Exception as error:  # a failed maintenance never stops the server
                if self._stop.is_set() or isinstance(error, CancelledError):
                    # the client left before it ran ("cannot schedule new futures after shutdown", or
                    # cancelled in the queue): not a failure, and nothing was written
                    log.info("maintenance: not run, the server is closing (it runs at the next start)")
                    return
                log.warning("maintenance failed: %s", _reason(error))
            self._stop.wait(interval)

    def _save_when_idle(self) -> None:
        """Saves the fold checkpoint when due, once no call has come for IDLE s: the cold commands
        beside the server start from it, but the save is one piece (pickling every memory: ~0.8 s at
        100,000) that a call arriving meanwhile would wait for. A client that never pauses leaves
        it to the server's close."""
        while not self._stop.is_set():
            quiet = time.monotonic() - self._last_call
            if quiet >= IDLE:
                self._on_worker(_save_checkpoint)
                return
            self._stop.wait(IDLE - quiet)

    def _on_worker(self, action: Callable[[VaultMemory], Any]) -> str:
        """Runs one maintenance task on the worker and waits for it; `close` cancels it while queued."""
        self._maintenance = self._worker.submit(self._run, action)
        return self._maintenance.result()

    def close(self) -> None:
        """Stops: a maintenance still queued is dropped (it has written nothing; it runs at the next
        start), one under way finishes, the calls the client sent are answered, then the handle closes."""
        self._stop.set()
        if self._maintenance is not None:
            self._maintenance.cancel()
        if self._memory is not None:  # its SQLite handles belong to the worker thread
            self._worker.submit(self._memory.close)
        self._worker.shutdown(wait=True)


def _reason(error: BaseException) -> str:
    """Returns one line saying what went wrong: an expected failure's own line, else its type too
    (a bare `KeyError('x')` or an empty message would say nothing)."""
    said = " ".join(str(error).split())
    return said if isinstance(error, ToolError) and said else f"{type(error).__name__}: {said}" if said \
        else f"{type(error).__name__} (no message; its traceback is logged above)"


SLICE = 0.03  # seconds of maintenance between two chances for a tool call to run
IDLE = 2.0  # seconds without a call before the fold checkpoint is saved after a maintenance


def _prepare(memory: VaultMemory) -> bool:
    """One slice of the work maintenance starts with; True while some is left."""
    return library().prepare_maintenance(memory, SLICE)


def _maintain(memory: VaultMemory) -> dict[str, Any]:
    """Consolidates (the fold prunes); returns what it did."""
    return library().consolidate(memory)


def _save_checkpoint(memory: VaultMemory) -> None:
    """Saves the fold checkpoint when due: a server's handle is never closed while it runs, and the
    cold commands beside it start from that checkpoint."""
    memory.snapshots.save_if_due(memory.engram)


def _warm(memory: VaultMemory) -> None:
    """What the first tool call would load: the library, the model, the vector store, the events' fold."""
    memory.embedder()
    memory.index()
    library().read_memories(memory)
