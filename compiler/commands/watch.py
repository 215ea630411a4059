"""`engram watch`: compile the vault again whenever something a build reads changes.

watchfiles (Rust's notify) reports file events; it already groups a burst — a git checkout, a
sync that drops a hundred notes — into one batch, yielded once nothing changed for `quiet_ms`
(or after `max_ms` of a continuous stream), and it keeps collecting while a build runs, so what
changes during a build is the next batch. This module decides which events are worth a build
(`VaultChanges`) and runs the loop (`watch_vault`).

Our own writes must not start a build, or the watcher would loop: the pages a build writes and
the journal lines it appends (page edits, maintenance) are remembered by their size and mtime
when the build ends, and an event on such a file counts only when the file no longer matches —
which is how a person's edit of a memory page is still seen.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import watchfiles

from compiler.core.errors import EXPECTED, describe
from compiler.core.settings import Settings
from compiler.embed.embedder import Embedder
from compiler.notes.scan import ALWAYS_IGNORED, is_ignored
from compiler.pipeline.spine import BuildReport, compile_vault

# What a build reads under .engram/: the memory journal, chunks from other machines, the default
# template overrides. Everything else there (cache/, lock, sync log and status) is ours or derived.
ENGRAM_INPUTS = (".engram/journal.jsonl", ".engram/chunks/", ".engram/templates/")
_EDITOR_LEFTOVERS = ("~", ".tmp", ".swp", ".swx", ".crdownload")  # never notes: not worth a build
START_MS = 200  # how soon the first build starts once the watcher is live
MAX_SHOWN = 50  # changed paths a build result carries (the count is always whole)

Stamp = tuple[int, int] | None  # (size, mtime_ns) of a file; None when it does not exist


@dataclass(frozen=True)
class Build:
    """One build of the watch: what started it and what it did, or the one line it failed with."""

    number: int
    changes: tuple[str, ...]  # vault-relative paths that started it, sorted (empty for the first build)
    report: BuildReport | None = None
    error: str = ""

    @property
    def line(self) -> str:
        """The line a person sees: the compile summary, or `engram: <error>`."""
        return self.report.summary() if self.report else f"engram: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return {"build": self.number, "ok": self.report is not None, "changes": list(self.changes[:MAX_SHOWN]),
                "changed_files": len(self.changes), "summary": self.line, "error": self.error,
                "report": self.report.to_dict() if self.report else None}


@dataclass
class VaultChanges:
    """The watch filter: is this event on a file a build reads, and not one it just wrote?"""

    root: Path
    settings: Settings
    own: dict[str, Stamp] = field(default_factory=dict)  # vault-relative path → its stamp after our write

    def __call__(self, change: watchfiles.Change, path: str) -> bool:
        rel = self.relative(path)
        return bool(rel) and self.is_input(rel) and not self.is_own_write(rel)

    def relative(self, path: str) -> str:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return ""

    def is_input(self, rel: str) -> bool:
        """True for what compile reads: the files scan walks (notes, attachments, engram.toml) and
        the memory inputs under .engram/; never .obsidian/, .git/, hidden files or ignored globs."""
        if rel.startswith(".engram/"):
            return rel.startswith(ENGRAM_INPUTS) or rel + "/" in ENGRAM_INPUTS  # `chunks/` made: a change
        parts = PurePosixPath(rel).parts
        if any(p.startswith(".") or p in ALWAYS_IGNORED for p in parts) or rel.endswith(_EDITOR_LEFTOVERS):
            return False
        return not is_ignored(rel, self.settings.ignore)

    def is_own_write(self, rel: str) -> bool:
        """True for what the last build left as it wrote it, and for folders in the output folder
        (a build makes and removes them; only its pages are inputs, when a person edits them)."""
        if rel in self.own:
            return _stamp(self.root / rel) == self.own[rel]
        out = self.settings.out.strip("/")
        if rel == out or rel.startswith(out + "/"):
            path = self.root / rel
            return path.is_dir() or (not path.exists() and not rel.endswith(".md"))
        return False

    def built(self, report: BuildReport) -> None:
        """Remembers what `report`'s build wrote and deleted, as it is now on disk. The journal only
        when the build appended to it (page edits taken in, maintenance run): an agent's memory
        written while a build ran must still start the next one."""
        maintenance = report.memories.get("maintenance") or {}
        wrote_journal = bool(report.memories.get("edits")) or (bool(maintenance) and not maintenance.get("skipped"))
        mine = (*report.written, *report.deleted, *((ENGRAM_INPUTS[0],) if wrote_journal else ()))
        self.own = {rel: _stamp(self.root / rel) for rel in mine}


def watch_vault(root: Path, settings: Callable[[], Settings], on_build: Callable[[Build], None], *,
                embedder: Embedder | None = None, stop: threading.Event | None = None, quiet_ms: int = 400,
                max_ms: int = 5000) -> None:
    """Compiles `root` once, then again after every batch of changes, until `stop` is set (or
    Ctrl-C: KeyboardInterrupt, for the caller to end on). `settings` is called before each build,
    so an edit of engram.toml applies to the next one. Each build is handed to `on_build`; a build
    that fails with an expected error is reported the same way, and the watch goes on."""
    root = root.resolve()
    changes = VaultChanges(root, settings())
    number = 0

    def build(paths: tuple[str, ...]) -> None:
        nonlocal number
        number += 1
        try:
            changes.settings = settings()
            report = compile_vault(root, changes.settings, embedder=embedder)
        except EXPECTED as error:
            on_build(Build(number, paths, error=describe(error)))
            return
        changes.built(report)
        on_build(Build(number, paths, report))

    first = True
    # The watcher is live before the first build, so nothing written during it is missed: the
    # first (empty, after START_MS) batch is the signal to build; later empty ones are ignored.
    for batch in watchfiles.watch(root, watch_filter=changes, step=quiet_ms, debounce=max_ms, stop_event=stop,
                                  rust_timeout=START_MS, yield_on_timeout=True, raise_interrupt=True):
        if batch or first:
            build(tuple(sorted(_with_new_files(root, changes, {changes.relative(path) for _, path in batch}))))
            first = False


def _with_new_files(root: Path, changes: VaultChanges, paths: set[str]) -> set[str]:
    """Adds the input files inside each changed folder: a file written into a folder just made
    (`mkdir chunks && cp …`) can land before inotify watches that folder, and its own event is lost."""
    found = set(paths)
    for rel in paths:
        folder = root / rel
        if folder.is_dir():
            found |= {f"{rel}/{p.name}" for p in folder.iterdir() if p.is_file() and changes.is_input(f"{rel}/{p.name}")}
    return found


def _stamp(path: Path) -> Stamp:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns
