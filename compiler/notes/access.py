"""Reading one note for an agent (MCP `get_note`): only .md/.qmd notes inside the vault, never a
hidden file, and the same rules checked again on where a symlink really leads.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from compiler.core.errors import InputError
from compiler.notes.records import NOTE_SUFFIXES

MAX_PATH_CHARS = 1000


def read_note(vault: Path, path: str, max_bytes: int) -> dict[str, Any]:
    """Returns {"path", "content", "bytes", "truncated"} of a .md/.qmd note inside `vault`.

    Refuses absolute paths, `..`, hidden folders, other suffixes, and symlinks that lead out of
    the vault or to a file those rules refuse (`leak.md -> .engram/journal.jsonl`).
    """
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
