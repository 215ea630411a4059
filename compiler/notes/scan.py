"""Stage 1, scan: walk the vault in sorted order and stamp every note file.

A file whose size and mtime match the previous build keeps its old hash, so a no-op
compile reads no note bytes at all.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compiler.notes.records import NOTE_SUFFIXES, FileStamp

# Folders that are never notes: tool state, VCS, and our own state.
ALWAYS_IGNORED = (".obsidian", ".git", ".engram", ".trash", "node_modules")


@dataclass(frozen=True)
class ScanResult:
    notes: tuple[FileStamp, ...]  # note files (.md, .qmd), sorted by path
    attachments: tuple[str, ...]  # every other file, for embeds such as ![[diagram.png]]
    edited: tuple[str, ...]  # paths of the notes that are new or whose bytes changed, sorted


def scan_vault(vault: Path, ignore: Sequence[str], previous: Mapping[str, FileStamp]) -> ScanResult:
    """Returns the stamped notes, the attachment paths and the new or edited notes of `vault`,
    skipping `ignore` globs. `previous` holds the last build's stamps."""
    notes: list[FileStamp] = []
    attachments: list[str] = []
    root = vault.resolve()
    for path in _walk(root, ignore):
        if path.lower().endswith(NOTE_SUFFIXES):
            notes.append(_stamp(root, path, previous.get(path)))
        else:
            attachments.append(path)
    edited = tuple(s.path for s in notes if s.path not in previous or previous[s.path].sha256 != s.sha256)
    return ScanResult(tuple(notes), tuple(attachments), edited)


def is_ignored(path: str, ignore: Sequence[str]) -> bool:
    """True when a vault-relative path matches an ignore glob (or lies in an ignored folder)."""
    for pattern in ignore:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern + "/*"):
            return True
    return False


def _walk(root: Path, ignore: Sequence[str]) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel_folder = Path(folder).relative_to(root).as_posix()
        rel_folder = "" if rel_folder == "." else rel_folder + "/"
        dirs[:] = sorted(d for d in dirs if not _skip_dir(rel_folder + d, d, ignore))
        for name in sorted(files):
            rel = rel_folder + name
            if name.startswith(".") or is_ignored(rel, ignore):
                continue
            if _inside(root, Path(folder) / name):
                found.append(rel)
    return sorted(found)


def _skip_dir(rel: str, name: str, ignore: Sequence[str]) -> bool:
    return name in ALWAYS_IGNORED or name.startswith(".") or is_ignored(rel, ignore)


def _inside(root: Path, path: Path) -> bool:
    """False for a symlink that leads out of the vault: we never read outside it."""
    if not path.is_symlink():
        return path.is_file()
    target = path.resolve()
    return target.is_file() and target.is_relative_to(root)


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
