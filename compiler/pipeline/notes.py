"""Compile stage parse: new and edited notes are parsed, every other one is carried over from the last build."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compiler.core.errors import BuildWarning
from compiler.core.settings import Settings
from compiler.notes.parse import parse_note
from compiler.notes.records import Note
from compiler.notes.scan import ScanResult
from compiler.pipeline.state import BuildState


@dataclass(frozen=True)
class Parsed:
    """The vault's notes after the parse stage, and how they differ from the last build's."""

    notes: dict[str, Note]  # path → note; a file that cannot be parsed has no entry
    warnings: dict[str, list[BuildWarning]]  # parse warnings per file
    # Known only after parsing: a file that no longer parses drops out of the index as if removed.
    changed: list[str]  # notes parsed in this run (new or edited), in path order
    removed: list[str]  # notes of the last build that are gone, sorted
    moved_from: dict[str, Note]  # changed note → the removed note with the same bytes (a rename or a move)
    # Sections of the last build's notes: what the indexes hold before this build writes them. An edit
    # that adds a heading changes the vault's count; only a disagreement with this one means the
    # indexes were lost or left half-written.
    indexed: int = 0

    @property
    def renamed(self) -> int:
        """Changed notes whose bytes match a removed one: moved or renamed."""
        return len(self.moved_from)

    @property
    def sections(self) -> int:
        return sum(n.section_count for n in self.notes.values())


def parse_notes(root: Path, scan: ScanResult, previous: BuildState, settings: Settings,
                tick: Callable[[int], None]) -> Parsed:
    """Returns the parsed notes of `scan`: only `scan.edited` is read, the rest comes from `previous`."""
    edited = set(scan.edited)
    kept = [s.path for s in scan.notes if s.path not in edited]
    notes = {p: previous.notes[p] for p in kept if p in previous.notes}
    warnings = {p: previous.warnings[p] for p in kept if previous.warnings.get(p)}
    for path in scan.edited:
        note, found = _parse_one(root, path, settings)
        if note:
            notes[path] = note
        if found:
            warnings[path] = found
        tick(1)
    changed = [p for p in scan.edited if p in notes]
    removed = sorted(set(previous.notes) - set(notes))
    gone = {previous.notes[p].sha256: previous.notes[p] for p in removed}
    return Parsed(notes, warnings, changed, removed, {p: gone[notes[p].sha256] for p in changed if notes[p].sha256 in gone},
                  indexed=sum(n.section_count for n in previous.notes.values()))


def _parse_one(root: Path, path: str, settings: Settings) -> tuple[Note | None, list[BuildWarning]]:
    """Returns the note at `path` and its warnings; a note that cannot be read or parsed is (None, why)."""
    try:
        raw = (root / path).read_bytes()
        return parse_note(path, raw, max_bytes=settings.max_note_bytes, max_section_chars=settings.max_section_chars)
    except OSError as error:
        return None, [BuildWarning(path, 0, f"cannot read: {error.strerror}", "io")]
    except Exception as error:  # a note that breaks the parser is reported and skipped, never fatal
        return None, [BuildWarning(path, 0, f"cannot parse: {error.__class__.__name__}: {error}", "parse")]
