"""Writing generated pages: only changed bytes, atomically, and only inside the output folder.

A file in the output folder without `generated_by: engram` frontmatter belongs to a person:
it is never overwritten or deleted, and the collision is reported.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from compiler.core.errors import BuildWarning, full_disk_guard

MARKER = "generated_by: engram"


@dataclass
class WriteResult:
    written: list[str] = field(default_factory=list)  # vault-relative paths
    deleted: list[str] = field(default_factory=list)
    warnings: list[BuildWarning] = field(default_factory=list)


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Writes `data` to `path` through a temp file and rename, so readers never see half a file.

    `durable` also fsyncs before the rename; derived pages skip it (a crash is repaired by the
    next compile), which makes writing tens of thousands of pages several times faster.
    A full disk raises StorageFullError, and the file keeps its previous content.
    """
    with full_disk_guard(path, "this file", needed=len(data), after="its previous version is untouched"):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".engram-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def is_generated(path: Path) -> bool:
    """True when the file's frontmatter carries our marker."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    if not head.startswith("---\n"):
        return False
    frontmatter = head[4:].split("\n---", 1)[0]
    return MARKER in frontmatter.splitlines()


def safe_target(vault: Path, out: str, relative: str, root: Path | None = None) -> Path:
    """Returns the absolute path of a page, refusing anything that escapes the output folder."""
    root = root or (vault / out).resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or target == root:
        raise ValueError(f"refusing to write outside {out}/: {relative!r}")
    return target


def write_pages(vault: Path, out: str, pages: Mapping[str, str]) -> WriteResult:
    """Writes `pages` ({path inside out: text}) and deletes generated pages no longer wanted.

    Returns what was written and deleted, as vault-relative paths, plus collisions with human files.
    """
    result = WriteResult()
    root = (vault / out).resolve()
    for relative in sorted(pages):
        target = safe_target(vault, out, relative, root)
        data = pages[relative].encode("utf-8")
        shown = f"{out}/{relative}"
        if target.exists():
            if target.read_bytes() == data:
                continue
            if not is_generated(target):
                result.warnings.append(BuildWarning(shown, 0, "not written: this file lacks "
                                                    f"`{MARKER}` frontmatter, so it belongs to a person", "collision"))
                continue
        atomic_write(target, data, durable=False)
        result.written.append(shown)
    result.deleted = _delete_stale(vault, out, set(pages))
    return result


def _delete_stale(vault: Path, out: str, wanted: set[str]) -> list[str]:
    root = vault / out
    deleted: list[str] = []
    if not root.is_dir():
        return deleted
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root).as_posix()
        if relative not in wanted and not path.is_symlink() and is_generated(path):
            path.unlink()
            deleted.append(f"{out}/{relative}")
    # Remove only the folders our deletions emptied; a person's empty folder stays.
    emptied = {parent for name in deleted for parent in (vault / name).parents if parent.is_relative_to(root)}
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        if folder != root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return deleted
