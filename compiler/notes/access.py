"""Reading one note (MCP `get_note`, `engram get`): by path or by the docid search hits show, only
.md/.qmd notes inside the vault, never a hidden file, and the same rules checked again on where a
symlink really leads.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from compiler.core.errors import InputError, NotFoundError
from compiler.notes.records import NOTE_SUFFIXES

MAX_PATH_CHARS = 1000
# qmd's docid: "#" and the first 6 hex digits of the note's sha256 (search hits show it). A longer
# prefix is accepted too, to tell apart the rare notes whose first six digits are the same.
DOCID = re.compile(r"#([0-9a-fA-F]{6,64})")
# `PATH:FROM` or `PATH:FROM:COUNT` (qmd's `get` suffix): lines are 1-based.
_LINE_SUFFIX = re.compile(r"(.+?):(\d+)(?::(\d+))?")


def read_note(vault: Path, path: str, max_bytes: int) -> dict[str, Any]:
    """Returns {"path", "content", "bytes", "truncated"} of a .md/.qmd note inside `vault`.

    `path` is vault-relative, or a docid (`#3f9a1c`). Refuses absolute paths, `..`, hidden
    folders, other suffixes, and symlinks that lead out of the vault or to a file those rules
    refuse (`leak.md -> .engram/journal.jsonl`).
    """
    if DOCID.fullmatch(path.strip()):
        path = path_of_docid(vault, path.strip())
    relative = safe_relative(path)
    root = vault.resolve()
    candidates = [relative] if relative.suffix.lower() in NOTE_SUFFIXES else \
        [relative.with_name(relative.name + suffix) for suffix in NOTE_SUFFIXES]
    for candidate in candidates:
        target = _resolved_target(root, candidate, path)
        if target.is_file():
            with open(target, "rb") as handle:
                data = handle.read(max_bytes + 1)
            return {"path": candidate.as_posix(), "content": data[:max_bytes].decode("utf-8", errors="replace"),
                    "bytes": target.stat().st_size, "truncated": len(data) > max_bytes}
    raise InputError(f"no note {path!r} in the vault (paths are vault-relative, as search_notes returns them)")


def path_of_docid(vault: Path, docid: str) -> str:
    """Returns the vault-relative path of the note `docid` names; NotFoundError when none does
    (docids follow a note's bytes: an edited note has a new one after the next compile), InputError
    when several do."""
    from compiler.notes.search import open_keyword_index  # numpy and the index: not for `engram serve`'s start

    prefix = docid.lstrip("#").lower()
    index = open_keyword_index(vault)
    try:
        rows = index.notes_with_hash_prefix(prefix)
    finally:
        index.close()
    if not rows:
        raise NotFoundError(f"no note has docid {docid} (docids change when a note is edited: search again)")
    if len(rows) > 1:
        shown = ", ".join(f"#{r.sha256[:12]} {r.path}" for r in rows[:5])
        raise InputError(f"docid {docid} names {len(rows)} notes ({shown}): give more of its digits")
    return rows[0].path


def read_lines(vault: Path, target: str, max_bytes: int, *, start: int = 0, count: int = 0) -> dict[str, Any]:
    """Returns `read_note` of `target` (`PATH`, `#docid`, either with `:FROM[:COUNT]`) cut to the lines
    asked for, plus "from" (the first line given, 1-based) and "lines" (how many).

    `start` and `count` (0: not given) win over the suffix, as qmd's `--from` and `-l` do. A path
    that really ends in `:12` is read as it is when such a note exists.
    """
    suffix = _LINE_SUFFIX.fullmatch(target.strip())
    if suffix and not _note_exists(vault, target.strip()):
        target = suffix.group(1)
        start = start or int(suffix.group(2))
        count = count or int(suffix.group(3) or 0)
    note = read_note(vault, target, max_bytes)
    lines = _lines(note["content"])
    first = max(start, 1)
    if first > len(lines) and lines:
        raise InputError(f"{note['path']} has {len(lines)} lines: line {first} is past its end")
    chosen = lines[first - 1:first - 1 + count] if count else lines[first - 1:]
    return {**note, "content": "".join(chosen), "from": first, "lines": len(chosen)}


def _lines(text: str) -> list[str]:
    """Returns the lines of `text`, each with its "\n": split on newlines only, as editors and the
    index number them (str.splitlines would also split on form feeds and U+2028)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _note_exists(vault: Path, path: str) -> bool:
    try:
        relative = safe_relative(path)
    except InputError:
        return False
    return (vault / relative).is_file() or any((vault / f"{relative}{s}").is_file() for s in NOTE_SUFFIXES)


def safe_relative(path: str) -> PurePosixPath:
    """Returns `path` as a vault-relative POSIX path; raises InputError for anything not a note path."""
    if not path.strip() or "\x00" in path or len(path) > MAX_PATH_CHARS:
        raise InputError("give a vault-relative note path such as 'Projects/Plan.md'")
    posix = PurePosixPath(path.replace("\\", "/"))
    if posix.is_absolute() or PureWindowsPath(path).drive or PureWindowsPath(path).is_absolute():
        raise InputError(f"refusing {path!r}: absolute paths are not allowed, give a vault-relative path")
    _check_parts(posix, path)
    return posix


def _check_parts(posix: PurePosixPath, shown: str, via: str = "") -> None:
    """Raises InputError when a part is `..` or hidden, or the suffix is not a note's."""
    if any(part == ".." or part.startswith(".") for part in posix.parts):
        raise InputError(f"refusing {shown!r}{via}: '..' and hidden folders are not notes")
    if posix.suffix and posix.suffix.lower() not in NOTE_SUFFIXES:
        raise InputError(f"refusing {shown!r}{via}: only .md and .qmd notes can be read")


def _resolved_target(root: Path, candidate: PurePosixPath, shown: str) -> Path:
    """Returns the real path of `candidate`, checked like the path asked for: a symlink inside the
    vault must not be a way to the journal or `.git/config`."""
    target = (root / candidate).resolve()
    if not target.is_relative_to(root):
        raise InputError(f"refusing {shown!r}: it leads outside the vault")
    if target != root / candidate:
        real = PurePosixPath(target.relative_to(root).as_posix())
        _check_parts(real, shown, f" (a symlink to {real.as_posix()!r})")
        if not real.suffix:
            raise InputError(f"refusing {shown!r} (a symlink to {real.as_posix()!r}): only .md and .qmd notes can be read")
    return target
