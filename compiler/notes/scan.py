"""Stage 1, scan: walk the vault in sorted order and stamp every note file.

A file whose size, mtime and inode match the previous build keeps its old hash, so a no-op
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
    skipping `ignore` globs. `previous` holds the last build's stamps: a note whose size, mtime and
    inode match keeps its hash unread, so only what changed is hashed."""
    notes: list[FileStamp] = []
    attachments: list[str] = []
    root = vault.resolve()
    found, skipped = _walk(root, ignore)
    for path, stat in found:
        if path.lower().endswith(NOTE_SUFFIXES):
            notes.append(_stamp(root, path, stat, previous.get(path)))
        else:
            attachments.append(path)
    return ScanResult(tuple(notes), tuple(attachments), edited_since(notes, previous), tuple(skipped))


def vault_files(vault: Path, ignore: Sequence[str]) -> list[str]:
    """Returns the vault-relative path of every file scan would read (notes and attachments), sorted,
    without reading or hashing any: what link resolution needs to know exists (wiki lint)."""
    return [path for path, _ in _walk(vault.resolve(), ignore)[0]]


def edited_since(notes: Sequence[FileStamp], previous: Mapping[str, FileStamp]) -> tuple[str, ...]:
    """Returns the paths of `notes` that are new or whose bytes differ from `previous`, in order."""
    return tuple(s.path for s in notes if s.path not in previous or previous[s.path].sha256 != s.sha256)


def is_ignored(path: str, ignore: Sequence[str]) -> bool:
    """True when a vault-relative path matches an ignore glob (or lies in an ignored folder)."""
    for pattern in ignore:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern + "/*"):
            return True
    return False


def _walk(root: Path, ignore: Sequence[str]) -> tuple[list[tuple[str, os.stat_result]], list[BuildWarning]]:
    """Returns the vault-relative files to read with their stat, sorted, and a warning for each entry skipped.

    os.scandir, not os.walk + Path.stat: one lstat per entry (a no-op compile of 10,000 notes is
    mostly this walk), and the entry's type comes with the directory listing.
    """
    found: list[tuple[str, os.stat_result]] = []
    skipped: list[BuildWarning] = []
    folders = [""]
    while folders:
        rel_folder = folders.pop()
        try:
            entries = sorted(os.scandir(root / rel_folder if rel_folder else root), key=lambda e: e.name)
        except OSError as error:
            skipped.append(BuildWarning(rel_folder.rstrip("/"), 0, f"cannot read ({error.strerror}), skipped", "skipped"))
            continue
        for entry in entries:
            rel = rel_folder + entry.name
            if entry.is_dir(follow_symlinks=False):
                if not _skip_dir(rel, entry.name, ignore):
                    folders.append(rel + "/")
            elif entry.is_symlink() and Path(entry.path).is_dir():
                if not _skip_dir(rel, entry.name, ignore):
                    # Not followed: a link can loop, or index a folder twice.
                    skipped.append(BuildWarning(rel, 0, "symlinked folder, not followed: its notes are "
                                                "not indexed", "skipped"))
            elif not entry.name.startswith(".") and not is_ignored(rel, ignore):
                stat, why = _regular_stat(root, entry)
                if why:
                    skipped.append(BuildWarning(rel, 0, why, "skipped"))
                else:
                    found.append((rel, stat))
    return sorted(found, key=lambda f: f[0]), sorted(skipped, key=lambda w: w.file)


def _skip_dir(rel: str, name: str, ignore: Sequence[str]) -> bool:
    return name in ALWAYS_IGNORED or name.startswith(".") or is_ignored(rel, ignore)


def _regular_stat(root: Path, entry: os.DirEntry) -> tuple[os.stat_result | None, str]:
    """Returns (the file's stat, "") or (None, why it is not read): a symlink out of the vault (we
    never read outside it), a dangling one, or not a regular file. A FIFO is never opened: that would block."""
    try:
        if entry.is_symlink():
            target = Path(entry.path).resolve()
            if not target.is_relative_to(root):
                return None, "symlink to a file outside the vault, skipped"
            if not target.exists():
                return None, "symlink to a missing file, skipped"
            stat = target.stat()
        else:
            stat = entry.stat(follow_symlinks=False)
    except OSError as error:
        return None, f"cannot read ({error.strerror}), skipped"
    mode = stat.st_mode
    if stat_module.S_ISREG(mode):
        return stat, ""
    kind = "a FIFO" if stat_module.S_ISFIFO(mode) else "a socket" if stat_module.S_ISSOCK(mode) else \
        "a folder" if stat_module.S_ISDIR(mode) else "a device"
    return None, f"not a regular file ({kind}), skipped"


def _stamp(root: Path, rel: str, stat: os.stat_result, previous: FileStamp | None) -> FileStamp:
    if previous and (previous.size, previous.mtime_ns, previous.inode) == (stat.st_size, stat.st_mtime_ns, stat.st_ino):
        return previous
    return FileStamp(rel, stat.st_size, stat.st_mtime_ns, file_sha256(root / rel), stat.st_ino)


def file_sha256(path: Path) -> str:
    """Returns the hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
