"""`engram check`: are the generated pages current, and are the memory files sound? Fast: no model, no Chroma.

It compares the vault with what the last compile recorded in the build state — the notes'
sha256, every page it rendered with its sha256, and a digest of the memory events the memory
pages reflect — and reports what the journal and chunk readers had to skip. Every
problem names the vault-relative file (and line when there is one); the fix is `engram compile`
for stale pages, and a look at the named file for corrupt ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.core.errors import BuildWarning
from compiler.core.files import GENERATED_YAML, is_generated
from compiler.core.settings import CONFIG_FILE, Settings, setting_source
from compiler.index.token_bytes import usage_found
from compiler.notes.scan import file_sha256, scan_vault
from compiler.pipeline.state import BuildState, load_state
from compiler.pipeline.vault_paths import STATE_FILE, VaultPaths


@dataclass
class CheckReport:
    problems: list[BuildWarning] = field(default_factory=list)
    notes: int = 0
    pages: int = 0
    events: int = 0
    chunks: int = 0
    token_file: dict[str, Any] = field(default_factory=dict)  # its bytes and dead share, as the last compile found
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": [p.to_dict() for p in self.problems], "notes": self.notes,
                "pages": self.pages, "events": self.events, "chunks": self.chunks, "token_file": self.token_file, "seconds": self.seconds}

    def summary(self) -> str:
        if self.ok:
            return (f"engram check: ok · {self.notes} notes · {self.pages} pages · {self.events} memory events"
                    f"{self._token_part()} · {self.seconds:.1f}s")
        stale = any(p.kind.startswith(("stale", "missing", "edited", "leftover", "not-compiled", "settings"))
                    for p in self.problems)
        hint = " · run `engram compile`" if stale else ""
        return f"engram check: {len(self.problems)} problems{hint}{self._token_part()} · {self.seconds:.1f}s"

    def _token_part(self) -> str:
        if not self.token_file:
            return ""
        return (f" · token vectors {self.token_file['file_bytes'] / 2**20:.0f} MB,"
                f" {self.token_file['dead_share']:.0%} dead")


def check_vault(vault: Path, settings: Settings) -> CheckReport:
    """Returns every way the vault's generated pages or memory files disagree with its sources."""
    started = time.perf_counter()
    root = vault.resolve()
    report = CheckReport()
    state, reason = load_state(VaultPaths(root).state)
    events, warnings = _memory_events(root)
    report.events = len(events)
    if reason:
        report.problems.append(BuildWarning(STATE_FILE, 0,
                                            f"never compiled on this machine ({reason})", "not-compiled"))
    else:
        report.problems += _check_build_inputs(root, state, settings)
        report.problems += _check_notes(root, settings, state, report)
        report.problems += _check_pages(root, settings, state, report)
        report.problems += _check_memory_pages(state, events)
    report.problems += warnings + _check_journal_tail(root)
    report.chunks = _count_chunks(root)
    usage = usage_found(root / ".engram" / "cache" / "embeddings.sqlite")  # one read of two rows: no fold, no scan
    report.token_file = {k: v for k, v in usage.to_dict().items() if k in ("file_bytes", "live_bytes", "dead_share")} \
        if usage else {}
    report.problems.sort(key=lambda p: (p.file, p.line, p.kind, p.message))
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _check_build_inputs(root: Path, state: BuildState, settings: Settings) -> list[BuildWarning]:
    """Settings, model or engram version changed since the compile: every page may change."""
    from compiler.core.errors import ModelLoadError
    from compiler.embed.embedder import model_identity
    from compiler.pipeline.state import rebuild_reason

    try:
        identity = model_identity(settings.model)
    except ModelLoadError as error:
        return [BuildWarning(*_source_of(root, ("model",)), str(error), "settings")]
    reason, source = rebuild_reason(state, identity, settings)
    if source == CONFIG_FILE:  # rebuild_reason means "the settings": name where they really come from
        keys = ("model",) if reason.startswith("embedding model") else ("model", "max_note_bytes", "max_section_chars")
        return [BuildWarning(*_source_of(root, keys), reason, "settings")]
    return [BuildWarning(source, 0, reason, "settings")] if reason else []


def _source_of(root: Path, keys: tuple[str, ...]) -> tuple[str, int]:
    """Returns the file (or env var) and line that set the first of `keys` that is set; else the
    build state, which holds what the last compile was given (its --model, or an older default)."""
    return next((found for key in keys if (found := setting_source(root, key))[0]), (STATE_FILE, 0))


def _check_notes(root: Path, settings: Settings, state: BuildState, report: CheckReport) -> list[BuildWarning]:
    """Notes added, edited or removed since the last compile (by sha256; unchanged size+mtime skip the read)."""
    scanned = {s.path: s for s in scan_vault(root, (*settings.ignore, settings.out), state.files).notes}
    report.notes = len(scanned)
    problems = [BuildWarning(p, 0, "new note, not compiled yet", "stale-note")
                for p in sorted(set(scanned) - set(state.files))]
    problems += [BuildWarning(p, 0, "edited since the last compile", "stale-note") for p in sorted(scanned)
                 if p in state.files and scanned[p].sha256 != state.files[p].sha256]
    problems += [BuildWarning(p, 0, "removed since the last compile (its pages remain)", "stale-note")
                 for p in sorted(set(state.files) - set(scanned))]
    return problems


def _check_pages(root: Path, settings: Settings, state: BuildState, report: CheckReport) -> list[BuildWarning]:
    """Generated pages missing, edited, or left over; a person's file in the output folder is not ours to judge."""
    if not state.pages:
        return [BuildWarning(STATE_FILE, 0, "no record of the generated pages (compiled by an older "
                             "engram)", "not-compiled")]
    report.pages = len(state.pages)
    problems: list[BuildWarning] = []
    for page, sha in sorted(state.pages.items()):
        path = root / page
        if not path.is_file():
            problems.append(BuildWarning(page, 0, "generated page missing", "missing-page"))
        elif file_sha256(path) != sha and is_generated(path):
            problems.append(BuildWarning(page, 0, "generated page edited or out of date", "edited-page"))
    out = root / settings.out
    leftovers = sorted(p.relative_to(root).as_posix() for suffix in (".md", *GENERATED_YAML)
                       for p in out.rglob(f"*{suffix}")) if out.is_dir() else []
    problems += [BuildWarning(p, 0, "generated page the last compile did not produce", "leftover-page")
                 for p in leftovers if p not in state.pages and not (root / p).is_symlink() and is_generated(root / p)]
    return problems


def _check_memory_pages(state: BuildState, events: list[Any]) -> list[BuildWarning]:
    from compiler.memory.maintenance import events_digest

    if (events_digest(events) if events else "") == state.memory_events:
        return []
    return [BuildWarning(".engram/journal.jsonl", 0, "memory events changed since the last compile: the memory "
                         "pages are out of date", "stale-memory")]


def _memory_events(root: Path) -> tuple[list[Any], list[BuildWarning]]:
    """Returns every memory event (chunks and journal) and a problem for each record or file it had to skip.

    The chunk reader reports unreadable chunks, quarantined records, and a manifest that is
    unreadable or lists a chunk that is missing; the journal reader, corrupt lines.
    """
    from compiler.memory.snapshot import read_events

    events = read_events(root.resolve() / ".engram")
    kinds = {"journal": "corrupt-journal", "chunk": "corrupt-chunk"}
    return list(events), [BuildWarning(w.file, w.line, w.message, kinds.get(w.kind, w.kind)) for w in events.warnings]


def _check_journal_tail(root: Path) -> list[BuildWarning]:
    """A last line without a newline was torn by a crash mid-append (readers skip it until it completes)."""
    path = root / ".engram" / "journal.jsonl"
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            if size == 0:
                return []
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return []
            handle.seek(0)
            lines = handle.read().count(b"\n") + 1
    except OSError:
        return []
    return [BuildWarning(".engram/journal.jsonl", lines, "last line is incomplete (torn by a crash?)",
                         "corrupt-journal")]


def _count_chunks(root: Path) -> int:
    folder = root / ".engram" / "chunks"
    return sum(1 for p in folder.glob("*.jsonl.gz")) if folder.is_dir() else 0
