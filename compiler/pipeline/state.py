"""The build state: what the last compile saw, so the next one only redoes what changed.

Lives in `.engram/cache/state.sqlite` (one row per note, file, page: compiler.pipeline.state_store)
— derived and disposable: deleting it means a full rebuild that produces the same pages. A
compile builds a new state once, at its end; nothing mutates one, and saving it writes only the
rows that differ from the state the compile started from.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.core.errors import BuildWarning
from compiler.core.files import atomic_write
from compiler.core.settings import Settings
from compiler.notes.records import FileStamp, Note
from compiler.pipeline.state_head import (
    STATE_VERSION,
    head_bytes,
    head_path,
    legacy_path,
)
from compiler.pipeline.state_store import PARTS, pin_rows, read_state, write_state
from compiler.pipeline.vault_paths import STATE_FILE, VaultPaths


@dataclass(frozen=True)
class BuildState:
    model: str = ""  # model identity the vectors were made with
    model_setting: str = ""  # the `model` setting that made them: what search and recall must embed queries with
    fingerprint: str = ""  # settings that shape the index
    parser: str = ""  # hash of the parser's code: a new parser re-parses every note
    files: dict[str, FileStamp] = field(default_factory=dict)
    notes: dict[str, Note] = field(default_factory=dict)  # parsed notes; binary files have no entry
    warnings: dict[str, list[BuildWarning]] = field(default_factory=dict)  # parse warnings per file
    memory_pages: dict[str, str] = field(default_factory=dict)  # observation page → memory id (edits → updates)
    pages: dict[str, str] = field(default_factory=dict)  # vault-relative page → sha256 (for `engram check`)
    memory_events: str = ""  # digest of the memory events the pages were rendered from ("" when none)
    # observation page → (digest of what it was rendered from, size, mtime_ns, inode once written):
    # a page whose digest and stat both still match is not rendered again (compiler.pipeline.memory_pages)
    memory_renders: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)
    # where the memory events stood and what the pages were made with (compiler.pipeline.memories.render_mark)
    memory_mark: dict[str, Any] = field(default_factory=dict)
    # the same as memory_renders for the note pages (catalog, health, backlinks): a page whose inputs did not move is kept
    note_renders: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)
    # what the note pages' digests were made with (compiler.pipeline.note_pages.render_mark): while it
    # holds, a page none of whose inputs moved keeps its recorded digest, not computed again
    note_mark: str = ""
    # True when this is exactly what the state file holds (read from it): the next save writes the difference
    stored: bool = field(default=False, compare=False)

    def meta(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "model": self.model, "model_setting": self.model_setting,
                "fingerprint": self.fingerprint, "parser": self.parser, "memory_events": self.memory_events,
                "memory_mark": self.memory_mark, "note_mark": self.note_mark}

    def parts(self) -> dict[str, dict[str, Any]]:
        """Returns {part: {key: value}}: the rows of compiler.pipeline.state_store."""
        return {"files": self.files, "notes": self.notes, "heads": self.notes,
                "warnings": {p: ws for p, ws in self.warnings.items() if ws},
                "memory_pages": self.memory_pages, "pages": self.pages, "memory_renders": self.memory_renders,
                "note_renders": self.note_renders}


def load_state(path: Path) -> tuple[BuildState, str]:
    """Returns (the saved state, "") or (an empty state, why it could not be used).

    Without `path` (state.sqlite), the JSON state of an older engram beside it is read: the first
    compile after an upgrade reuses it and saves the new file (no rebuild)."""
    if not path.is_file():
        legacy = legacy_path(path)
        return load_legacy_state(legacy) if legacy.is_file() else (BuildState(), "no previous build")
    try:
        data = read_state(path)
        if data.get("version") != str(STATE_VERSION):
            return BuildState(), "build state from another version"
        return BuildState(**{k: data[k] for k in ("model", "model_setting", "fingerprint", "parser")},
                          memory_events=data.get("memory_events", ""), memory_mark=dict(data["memory_mark"]),
                          note_mark=data.get("note_mark", ""),
                          **{part: data[part] for part in PARTS if part != "heads"},
                          stored=not data["heads_missing"]), ""
    except (sqlite3.Error, ValueError, KeyError, TypeError) as error:
        return BuildState(), f"build state unreadable ({error.__class__.__name__})"


def load_legacy_state(path: Path) -> tuple[BuildState, str]:
    """Returns the state an older engram saved as one JSON file (`state.json`), or why it cannot be used."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != STATE_VERSION:
            return BuildState(), "build state from another version"
        return BuildState(
            model=data["model"], model_setting=data.get("model_setting", ""), fingerprint=data["fingerprint"],
            parser=data.get("parser", ""),
            files={p: FileStamp(p, *stamp) for p, stamp in data["files"].items()},  # [size, mtime, sha, inode]
            notes={p: Note.from_dict(n) for p, n in data["notes"].items()},
            warnings={p: [BuildWarning(**w) for w in ws] for p, ws in data.get("warnings", {}).items()},
            memory_pages={p: v if isinstance(v, str) else v[0] for p, v in data.get("memory_pages", {}).items()},
            pages=dict(data.get("pages", {})), memory_events=data.get("memory_events", ""),
            memory_renders={p: (str(d), int(s), int(m), int(i)) for p, (d, s, m, i) in data.get("memory_renders", {}).items()},
            memory_mark=dict(data.get("memory_mark", {})),
            note_renders={p: (str(d), int(s), int(m), int(i)) for p, (d, s, m, i) in data.get("note_renders", {}).items()}), ""
    except (OSError, ValueError, KeyError, TypeError) as error:
        return BuildState(), f"build state unreadable ({error.__class__.__name__})"


def save_state(path: Path, state: BuildState, base: BuildState | None = None) -> int:
    """Writes the state, and its head when that changed; returns how many rows were written.

    `base` is the state the build started from: when it is what the file holds (`stored`), only
    the rows that differ are written; else the file is written whole (and an older engram's
    state.json beside it removed)."""
    head = head_bytes(state.model, state.model_setting)
    if _read_bytes(head_path(path)) != head:  # first: the indexes already hold this model's vectors
        atomic_write(head_path(path), head)
    if base is not None:  # the rows this save changes or drops, fetched while the file holds them
        pin_rows(note for path, note in base.notes.items() if state.notes.get(path) is not note)
    stored = base.meta() | base.parts() if base is not None and base.stored else None
    try:
        written = write_state(path, state.meta(), state.parts(), stored)
    except sqlite3.Error:  # a damaged file that still opened: replace it whole
        written = write_state(path, state.meta(), state.parts(), None)
    if stored is None:
        legacy_path(path).unlink(missing_ok=True)
    return written


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def previous_build(paths: VaultPaths, identity: str, settings: Settings) -> tuple[BuildState, str]:
    """Returns (the last build's state, "") when it can be reused, else (an empty state, why not)."""
    previous, reason = load_state(paths.state)
    if not reason:
        reason = rebuild_reason(previous, identity, settings)[0]
    if not reason and not paths.fts.is_file():
        reason = "keyword index missing"
    return (BuildState(), reason) if reason else (previous, "")


def rebuild_reason(previous: BuildState, identity: str, settings: Settings) -> tuple[str, str]:
    """Returns (why the last build's results cannot be reused, the file behind it), or ("", "")."""
    if previous.model != identity:
        return f"embedding model changed ({previous.model} → {identity})", "engram.toml"
    if previous.fingerprint != settings.index_fingerprint():
        return "index settings changed (model, max_note_bytes or max_section_chars)", "engram.toml"
    if previous.parser != parser_fingerprint():
        return "the parser changed (a new engram version): every note is parsed again", STATE_FILE
    return "", ""


def parser_fingerprint() -> str:
    """Returns a hash of the parsing code, so cached parse results never outlive the code that made them."""
    # Imported when called: reading a saved state needs no Markdown parser.
    from compiler.notes import markdown_rules, note_bytes, parse, records

    digest = hashlib.sha256()
    for module in (parse, note_bytes, markdown_rules, records):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]
