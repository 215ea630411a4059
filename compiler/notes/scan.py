"""Stage 1, scan: walk the vault in sorted order and stamp every note file.

A file whose size, mtime and inode match the previous build keeps its old hash, so a no-op
compile reads no note bytes at all.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import re
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


@dataclass(frozen=True)
class VaultFiles:
    """What one walk of the vault found, nothing read yet: the no-op check decides from these
    stats alone, and a build stamps the same walk instead of walking again."""

    root: Path  # resolved
    found: tuple[tuple[str, os.stat_result], ...]  # vault-relative file and its stat, sorted by path
    skipped: tuple[BuildWarning, ...]

    def split(self) -> tuple[list[tuple[str, int, int, int]], list[str]]:
        """Returns (path, size, mtime_ns, inode) of every note file (`FileStamp`s without the hash)
        and the path of every other file, in one pass."""
        notes: list[tuple[str, int, int, int]] = []
        attachments: list[str] = []
        for path, st in self.found:
            if _is_note(path):
                notes.append((path, st.st_size, st.st_mtime_ns, st.st_ino))
            else:
                attachments.append(path)
        return notes, attachments


def scan_vault(vault: Path, ignore: Sequence[str], previous: Mapping[str, FileStamp]) -> ScanResult:
    """Returns the stamped notes, the attachment paths and the new or edited notes of `vault`,
    skipping `ignore` globs. `previous` holds the last build's stamps: a note whose size, mtime and
    inode match keeps its hash unread, so only what changed is hashed."""
    return stamp_files(walk_vault(vault, ignore), previous)


def walk_vault(vault: Path, ignore: Sequence[str]) -> VaultFiles:
    """Returns every file scan would read, with its stat, and what it skipped; reads no file."""
    root = vault.resolve()
    found, skipped = _walk(root, ignore)
    return VaultFiles(root, tuple(found), tuple(skipped))


def stamp_files(files: VaultFiles, previous: Mapping[str, FileStamp]) -> ScanResult:
    """Returns the scan of a walk: `scan_vault`'s result, hashing only the notes whose stat moved."""
    notes: list[FileStamp] = []
    attachments: list[str] = []
    for path, stat in files.found:
        if _is_note(path):
            notes.append(_stamp(files.root, path, stat, previous.get(path)))
        else:
            attachments.append(path)
    return ScanResult(tuple(notes), tuple(attachments), edited_since(notes, previous), files.skipped)


def _is_note(path: str) -> bool:
    return path.lower().endswith(NOTE_SUFFIXES)


def vault_files(vault: Path, ignore: Sequence[str]) -> list[str]:
    """Returns the vault-relative path of every file scan would read (notes and attachments), sorted,
    without reading or hashing any: what link resolution needs to know exists (wiki lint)."""
    return [path for path, _ in _walk(vault.resolve(), ignore)[0]]


def edited_since(notes: Sequence[FileStamp], previous: Mapping[str, FileStamp]) -> tuple[str, ...]:
    """Returns the paths of `notes` that are new or whose bytes differ from `previous`, in order."""
    return tuple(s.path for s in notes if s.path not in previous or previous[s.path].sha256 != s.sha256)


def is_ignored(path: str, ignore: Sequence[str]) -> bool:
    """True when a vault-relative path matches an ignore glob (or lies in an ignored folder)."""
    return _ignore_matcher(tuple(ignore))(path) is not None


@functools.lru_cache(maxsize=32)
def _ignore_matcher(ignore: tuple[str, ...]):
    """Returns one compiled regex's `match` for all the globs (each as itself and as a folder):
    `fnmatchcase` per glob and per file cost a quarter of a no-op compile at 100,000 notes."""
    globs = [g for pattern in ignore for g in (pattern.rstrip("/"), pattern.rstrip("/") + "/*")]
    if not globs:
        return lambda path: None
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)).match


def _walk(root: Path, ignore: Sequence[str]) -> tuple[list[tuple[str, os.stat_result]], list[BuildWarning]]:
    """Returns the vault-relative files to read with their stat, sorted, and a warning for each entry skipped.

    os.scandir, not os.walk + Path.stat: one lstat per entry (a no-op compile of 10,000 notes is
    mostly this walk), and the entry's type comes with the directory listing.
    """
    found: list[tuple[str, os.stat_result]] = []
    skipped: list[BuildWarning] = []
    folders = [""]
    ignored = _ignore_matcher(tuple(ignore))
    top = str(root)
    while folders:
        rel_folder = folders.pop()
        try:  # strings, not Paths: a pathlib join per folder cost 0.3 s of a walk of 100,000 notes
            with os.scandir(os.path.join(top, rel_folder)) as listing:
                entries = list(listing)
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
            elif not entry.name.startswith(".") and ignored(rel) is None:
                if entry.is_file(follow_symlinks=False):  # the listing's file type: no call, no tuple made
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except OSError:
                        stat = None
                    if stat is not None and stat_module.S_ISREG(stat.st_mode):
                        found.append((rel, stat))
                        continue
                stat, why = _regular_stat(root, entry)
                if why:
                    skipped.append(BuildWarning(rel, 0, why, "skipped"))
                else:
                    found.append((rel, stat))
    found.sort(key=lambda f: f[0])
    return found, sorted(skipped, key=lambda w: w.file)


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
        else:  # a regular file took `_walk`'s shorter way: this is a FIFO, a socket, a device
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
