"""What a build read, stamped cheaply, so a compile whose inputs did not change does nothing at all.

A no-op compile must not cost O(vault): loading the build state of 10,000 notes, rendering every
page to find that none changed and saving it all again took 10+ s. Instead each build ends by
recording, in `.engram/cache/inputs.json`, a digest of everything it read or wrote — settings,
model, the engram code and templates, every note's path and content hash, the attachment list,
the memory events' files, every generated page's stat and the derived files — with the report it
made. The next compile stats the same things (one lstat each; only a note whose size, mtime or
inode moved is hashed again) and, when every part matches, returns that report without loading
the state, a model, an index or a template.

Time is an input too: memory pages show strength at 00:00 UTC of the current day (or at the pinned
clock), so the day is part of the digest, and maintenance falls due `maintenance_hours` after it
last ran: the shortcut holds until the next midnight or that moment, whichever comes first.
"""

from __future__ import annotations

import hashlib
import json
import os
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from stat import S_ISREG
from typing import Any

import compiler
from compiler.core import clock
from compiler.core.errors import BuildWarning
from compiler.core.files import atomic_write
from compiler.core.settings import Settings
from compiler.notes.records import FileStamp
from compiler.notes.scan import ScanResult, VaultFiles, stamp_files, walk_vault
from compiler.pipeline.vault_paths import VaultPaths

INPUTS_VERSION = 3
BUNDLED_TEMPLATES = Path(compiler.__file__).resolve().parent.parent / "templates"
MEMORY_SKIPPED = ("cache", "lock")  # under .engram: derived or transient, never an input of the pages
# The report fields a no-op returns (spine._unchanged_report): the record keeps these, not the
# lists of a first build's 100,000 changed notes and written pages.
REPORT_KEPT = ("notes", "sections", "links", "memories", "warnings")


@dataclass(frozen=True)
class BuildInputs:
    """The digest of one build's inputs, in parts (so a mismatch can be named in tests), and the
    note stamps the next scan starts from.

    Two parts name the notes: "notes" by their content (path and sha256: a touched note is
    unchanged) and "note_stats" by their stat alone (path, size, mtime_ns, inode). A no-op compile
    compares the stats and never loads the stamps; only when a stat moved are the stamps read and
    the content compared."""

    parts: dict[str, str]
    stamps: dict[str, FileStamp]

    def matches(self, other: BuildInputs) -> bool:
        return self.parts == other.parts


@dataclass(frozen=True)
class OutputListing:
    """The output folder as the no-op check stat'ed it: every file's (path inside the folder, size,
    mtime_ns, inode), sorted, and which of them are not regular files. A build reuses it three
    times instead of going over 100,000 pages again: the page checks take their stat from it, the
    stale pages are looked for among it, and the record of the build's inputs is it with the
    pages the build wrote or deleted stat'ed again. A stat older than the build is safe: a page
    changed after it makes the next compile's check differ, so that compile builds."""

    rows: tuple[tuple[str, int, int, int], ...]
    irregular: frozenset[str]  # links, FIFOs, ...: never a page we made

    def stamps(self) -> dict[str, tuple[int, int, int] | None]:
        """Returns {path inside the folder: (size, mtime_ns, inode)}, None for a file not regular."""
        return {p: None if p in self.irregular else (size, mtime, inode) for p, size, mtime, inode in self.rows}

    def after_writes(self, folder: Path, written: Iterable[str], deleted: Iterable[str]) -> list[tuple[str, int, int, int]]:
        """Returns the rows with the pages `written` (paths inside the folder) stat'ed again and those `deleted` gone."""
        rows = list(self.rows)  # sorted by path: each page found by bisection, not a dict of 100,000 rows
        for page, found in [*((p, None) for p in deleted), *((p, _stat_row(folder, p)) for p in written)]:
            at = bisect_left(rows, (page,))
            if at < len(rows) and rows[at][0] == page:
                del rows[at]
            if found is not None:
                rows.insert(at, found)
        return rows


def shown_instant(settings: Settings, now: datetime) -> datetime:
    """Returns the instant the memory pages show strength at: a pinned clock as it is, the real one
    as of 00:00 UTC today, so a page changes when its shown values move, at most once a day."""
    return clock.parse_time(settings.now) if settings.now else clock.day_start(now)


def gather_inputs(paths: VaultPaths, settings: Settings, identity: str, scan: ScanResult,
                  override_templates: Path, shown_at: str, pages: Sequence[tuple[str, int, int, int]] | None = None
                  ) -> BuildInputs:
    """Returns the digest of what a build of `scan` reads, as it is on disk now; `shown_at` is the
    instant its memory pages show strength at ("" when there are no memories). `pages`, when
    given, are the output folder's rows (`OutputListing.after_writes`), else it is stat'ed now."""
    parts = {**_other_parts(paths, settings, identity, override_templates, shown_at, pages), **_note_parts(scan)}
    return BuildInputs(parts, {s.path: s for s in scan.notes})


def unchanged_build(paths: VaultPaths, settings: Settings, identity: str, override_templates: Path
                    ) -> tuple[dict[str, Any] | None, VaultFiles | None, OutputListing | None]:
    """Returns (the last build's report, None, None) when nothing it read has changed since, else
    (None, the walk of the vault made to find out, for the build to stamp, and the output folder's
    listing; both None when there was no record)."""
    record = _load(paths.inputs)
    if record is None or settings.chroma_url:  # a Chroma server can be emptied or swapped behind our back
        return None, None, None
    parts, report, memory = record
    now = clock.utc_now()
    if memory.get("maintenance_due") and now >= clock.parse_time(memory["maintenance_due"]):
        return None, None, None  # maintenance falls due: the build runs it
    shown_at = clock.format_time(shown_instant(settings, now)) if memory.get("shown_at") else ""
    files = walk_vault(paths.root, (*settings.ignore, settings.out))
    irregular: set[str] = set()
    listing = _tree_stats(paths.root / settings.out, caches=True, irregular=irregular)
    pages = OutputListing(tuple(listing), frozenset(irregular))
    others = _other_parts(paths, settings, identity, override_templates, shown_at, listing)
    if any(parts.get(name) != digest for name, digest in others.items()):
        return None, files, pages
    if parts.get("note_stats") == _stats_part(*files.split(), files.skipped):
        return report, None, None
    # A stat moved: hash the notes whose stat is new (touched, or edited) and compare their content.
    scan = stamp_files(files, _load_stamps(_stamps_path(paths.inputs)))
    notes = _note_parts(scan)
    if parts.get("notes") != notes["notes"]:
        return None, files, pages
    current = BuildInputs({**others, **notes}, {s.path: s for s in scan.notes})
    save_inputs(paths.inputs, current, report, memory)  # touched, not changed: hash them never again
    return report, None, None


def save_inputs(path: Path, inputs: BuildInputs, report: Mapping[str, Any], memory: Mapping[str, str]) -> None:
    """Writes the record of a finished build: its inputs' digest, its report and `memory`
    ({"shown_at", "maintenance_due"}, each "" when it does not apply); the note stamps go to a
    file of their own beside it, read only when a note's stat moved.

    The stamps are written first: whatever they hold is true (each hash was read from a file with
    that stat), so a stamps file older or newer than the record only costs a hash, never a miss."""
    stamps = {p: [s.size, s.mtime_ns, s.sha256, s.inode] for p, s in inputs.stamps.items()}
    atomic_write(_stamps_path(path), json.dumps(stamps, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
                 durable=False)
    data = {"version": INPUTS_VERSION, "parts": inputs.parts, "memory": dict(memory),
            "report": {k: report[k] for k in REPORT_KEPT}}
    atomic_write(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), durable=False)


def forget_inputs(path: Path) -> None:
    """Drops the record before a build changes anything: a build that dies midway is never skipped."""
    path.unlink(missing_ok=True)


def _stamps_path(inputs: Path) -> Path:
    return inputs.with_name("inputs-stamps.json")


def _load(path: Path) -> tuple[dict[str, str], dict[str, Any], dict[str, str]] | None:
    try:
        data = json.loads(path.read_bytes())
        if data.get("version") != INPUTS_VERSION:
            return None
        memory = {k: str(data["memory"].get(k) or "") for k in ("shown_at", "maintenance_due")}
        return dict(data["parts"]), data["report"], memory
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _load_stamps(path: Path) -> dict[str, FileStamp]:
    """Returns the note stamps of the last build's record; {} when missing or unreadable (every note is hashed)."""
    try:
        return {p: FileStamp(p, *stamp) for p, stamp in json.loads(path.read_bytes()).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _other_parts(paths: VaultPaths, settings: Settings, identity: str, override_templates: Path,
                 shown_at: str, pages: Sequence[tuple[str, int, int, int]] | None = None) -> dict[str, str]:
    """Returns every part of the digest but the notes'; `pages`: the output folder's rows, when
    stat'ed already."""
    return {
        "settings": _digest([settings.to_dict(), identity, shown_at]),
        "code": _stats_digest(_code_stats()),
        "templates": _stats_digest([*_tree_stats(BUNDLED_TEMPLATES), ("", 0, 0, 0), *_tree_stats(override_templates)]),
        "memory": _stats_digest(_tree_stats(paths.engram, skip=MEMORY_SKIPPED)),
        "pages": _stats_digest(_tree_stats(paths.root / settings.out, caches=True) if pages is None else pages),
        # The notes' flat vector store by its file (compiler.index.flat.store_path, not imported: it
        # loads numpy): a memory command may recreate `flat/` for its own store without this one.
        "derived": _digest([_stat(p) for p in (paths.state, paths.graph, paths.fts,
                                               paths.cache / "flat" / "sections.sqlite")]
                           + [(paths.cache / "chroma").is_dir()]),
    }


def _note_parts(scan: ScanResult) -> dict[str, str]:
    """Returns the two parts that name the notes: "notes" by content, "note_stats" by stat."""
    stats = [(s.path, s.size, s.mtime_ns, s.inode) for s in scan.notes]
    return {"notes": _notes_part(scan), "note_stats": _stats_part(stats, scan.attachments, scan.skipped)}


def _notes_part(scan: ScanResult) -> str:
    """The notes by content (a touched note is unchanged), the attachments by path, what was skipped."""
    return _digest([[(s.path, s.sha256) for s in scan.notes], list(scan.attachments), [w.to_dict() for w in scan.skipped]])


def _stats_part(stats: Iterable[tuple[str, int, int, int]], attachments: Iterable[str],
                skipped: Iterable[BuildWarning]) -> str:
    """The notes by stat: equal stats mean equal bytes (the assumption scan makes), so no note is read."""
    return _digest([_stats_digest(stats), list(attachments), [w.to_dict() for w in skipped]])


def _code_stats() -> list[tuple[str, int, int, int]]:
    """The engram modules' stats: a new version (or an edited checkout) renders differently."""
    return _tree_stats(Path(compiler.__file__).resolve().parent, suffix=".py")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()


def _stat(path: Path) -> tuple[str, int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return path.name, stat.st_size, stat.st_mtime_ns, stat.st_ino


def _tree_stats(root: Path, suffix: str = "", skip: Iterable[str] = (), caches: bool = False,
                irregular: set[str] | None = None) -> list[tuple[str, int, int, int]]:
    """Returns (relative path, size, mtime_ns, inode) of every file under `root`, sorted; [] when absent.
    `__pycache__` folders are skipped unless `caches`; `irregular`, when given, gets the files that
    are not regular (links, FIFOs).

    One list and a stack of folders, not nested generators: at 100,000 generated pages each
    yield passing up through every level of the recursion cost more than the stats."""
    found: list[tuple[str, int, int, int]] = []
    folders = [(str(root), "")]
    skip = frozenset(skip)
    while folders:
        folder, prefix = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if rel not in skip and (caches or entry.name != "__pycache__"):
                    folders.append((entry.path, rel + "/"))
            elif entry.name.endswith(suffix):
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                found.append((rel, stat.st_size, stat.st_mtime_ns, stat.st_ino))
                if irregular is not None and not S_ISREG(stat.st_mode):
                    irregular.add(rel)
    found.sort()
    return found


def _stat_row(folder: Path, relative: str) -> tuple[str, int, int, int] | None:
    """Returns the row `_tree_stats` gives the file at `relative` inside `folder`, or None when it is gone."""
    try:
        stat = os.lstat(os.path.join(folder, relative))
    except OSError:
        return None
    return relative, stat.st_size, stat.st_mtime_ns, stat.st_ino


def _stats_digest(rows: Iterable[tuple[str, int, int, int]]) -> str:
    """Returns a digest of (path, size, mtime_ns, inode) rows: joined as text, which costs half
    of `json.dumps` on 100,000 rows (a path holds no NUL, the numbers no newline: one reading)."""
    return hashlib.sha256("\n".join([f"{p}\0{s}\0{m}\0{i}" for p, s, m, i in rows]).encode("utf-8",
                                                                                             "surrogateescape")).hexdigest()
