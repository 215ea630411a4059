"""Stage 1, scan: walk the vault in sorted order and stamp every note file.

A file whose size and mtime match the previous build keeps its old hash, so a no-op
compile reads no note bytes at all.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat as stat_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compiler.core.errors import BuildWarning
from compiler.notes.records import NOTE_SUFFIXES, FileStamp

# Folders that are never notes: tool state, VCS, and our own state.
ALWAYS_IGNORED = (".obsidian", ".git", ".engram", ".trash", "node_modules")


@dataclass(frozen=True)
class ScanResult:
    notes: tuple[FileStamp, ...]  # note files (.md, .qmd), sorted by path
    attachments: tuple[str, ...]  # every other file, for embeds such as ![[diagram.png]]
    edited: tuple[str, ...]  # paths of the notes that are new or whose bytes changed, sorted
    skipped: tuple[BuildWarning, ...] = ()  # one per entry not read: symlinked folders, FIFOs, links out


def scan_vault(vault: Path, ignore: Sequence[str], previous: Mapping[str, FileStamp]) -> ScanResult:
    """Returns the stamped notes, the attachment paths and the new or edited notes of `vault`,
    skipping `ignore` globs. `previous` holds the last build's stamps."""
    notes: list[FileStamp] = []
    attachments: list[str] = []
    root = vault.resolve()
    found, skipped = _walk(root, ignore)
    for path in found:
        if path.lower().endswith(NOTE_SUFFIXES):
            notes.append(_stamp(root, path, previous.get(path)))
        else:
            attachments.append(path)
    edited = tuple(s.path for s in notes if s.path not in previous or previous[s.path].sha256 != s.sha256)
    return ScanResult(tuple(notes), tuple(attachments), edited, tuple(skipped))


def is_ignored(path: str, ignore: Sequence[str]) -> bool:
    """True when a vault-relative path matches an ignore glob (or lies in an ignored folder)."""
    for pattern in ignore:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern + "/*"):
            return True
    return False


def _walk(root: Path, ignore: Sequence[str]) -> tuple[list[str], list[BuildWarning]]:
    """Returns the vault-relative files to read, sorted, and a warning for each entry skipped."""
    found: list[str] = []
    skipped: list[BuildWarning] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel_folder = Path(folder).relative_to(root).as_posix()
        rel_folder = "" if rel_folder == "." else rel_folder + "/"
        dirs[:] = sorted(d for d in dirs if not _skip_dir(rel_folder + d, d, ignore))
        for name in [d for d in dirs if (Path(folder) / d).is_symlink()]:
            # Not followed: a link can loop, or index a folder twice; os.walk would skip it silently.
            skipped.append(BuildWarning(rel_folder + name, 0, "symlinked folder, not followed: its notes are "
                                        "not indexed", "skipped"))
            dirs.remove(name)
        for name in sorted(files):
            rel = rel_folder + name
            if name.startswith(".") or is_ignored(rel, ignore):
                continue
            why = _unreadable(root, Path(folder) / name)
            if why:
                skipped.append(BuildWarning(rel, 0, why, "skipped"))
            else:
                found.append(rel)
    return sorted(found), sorted(skipped, key=lambda w: w.file)


def _skip_dir(rel: str, name: str, ignore: Sequence[str]) -> bool:
    return name in ALWAYS_IGNORED or name.startswith(".") or is_ignored(rel, ignore)


def _unreadable(root: Path, path: Path) -> str:
    """Returns why `path` is not read ("" when it is): a symlink out of the vault (we never read
    outside it), a dangling one, or not a regular file. A FIFO is never opened: that would block."""
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(root):
            return "symlink to a file outside the vault, skipped"
        if not target.exists():
            return "symlink to a missing file, skipped"
        path = target
    try:
        mode = path.stat().st_mode
    except OSError as error:
        return f"cannot read ({error.strerror}), skipped"
    if stat_module.S_ISREG(mode):
        return ""
    kind = "a FIFO" if stat_module.S_ISFIFO(mode) else "a socket" if stat_module.S_ISSOCK(mode) else \
        "a folder" if stat_module.S_ISDIR(mode) else "a device"
    return f"not a regular file ({kind}), skipped"


def _stamp(root: Path, rel: str, previous: FileStamp | None) -> FileStamp:
    stat = (root / rel).stat()
    if previous and previous.size == stat.st_size and previous.mtime_ns == stat.st_mtime_ns:
        return previous
    return FileStamp(rel, stat.st_size, stat.st_mtime_ns, file_sha256(root / rel))


def file_sha256(path: Path) -> str:
    """Returns the hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
