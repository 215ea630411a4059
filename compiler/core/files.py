"""Writing generated pages: only changed bytes, atomically, and only inside the output folder.

A file in the output folder without `generated_by: engram` frontmatter belongs to a person:
it is never overwritten or deleted, and the collision is reported.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from compiler.core.errors import BuildWarning, UsageError, full_disk_guard

MARKER = "generated_by: engram"
GENERATED_YAML = (".base",)  # generated pages that are YAML, not Markdown
MAX_NAME_BYTES = 255  # one file name, in bytes, on ext4, APFS, NTFS and most others


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


def write_after(path: Path, end: int, blob: bytes | memoryview) -> None:
    """Writes `blob` (any bytes-like: a numpy slice too) after the first `end` bytes of `path` (cutting whatever a crash left past them)
    and fsyncs: durable before the transaction that names it commits."""
    fresh = not path.exists()
    with open(path, "ab") as handle:  # never truncates on open: readers may be mapping it
        handle.truncate(end)
        handle.write(blob)
        handle.flush()
        os.fsync(handle.fileno())
    if fresh:
        fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Fsyncs `folder` itself: a new file's name is durable only once its folder is."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def bounded_name(stem: str, suffix: str, key: str) -> str:
    """Returns `stem + suffix` when it fits in MAX_NAME_BYTES of UTF-8, else the stem cut on a
    character boundary plus "~" and 8 hex digits of sha256(`key`): short names stay as they were,
    long ones stay stable (the same `key` gives the same name) and distinct."""
    name = stem + suffix
    if len(name.encode("utf-8")) <= MAX_NAME_BYTES:
        return name
    tag = "~" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
    room = MAX_NAME_BYTES - len((tag + suffix).encode("utf-8"))
    cut = stem.encode("utf-8")[:room].decode("utf-8", errors="ignore")  # drops a split last character
    return cut + tag + suffix


def is_generated(path: Path) -> bool:
    """True when the file's frontmatter carries our marker (a YAML file such as an Obsidian `.base`,
    which has no frontmatter, carries it as its first line: `# generated_by: engram`)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    if path.suffix in GENERATED_YAML:
        return head.split("\n", 1)[0] == f"# {MARKER}"
    if not head.startswith("---\n"):
        return False
    frontmatter = head[4:].split("\n---", 1)[0]
    return MARKER in frontmatter.splitlines()


def safe_target(vault: Path, out: str, relative: str, root: Path | None = None) -> Path:
    """Returns the absolute path of a page; raises UsageError for anything that escapes the output
    folder, a symlink on the way included (`_engram/backlinks -> /elsewhere`)."""
    root = root or contained(vault, vault / out)
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or target == root:
        link = _first_symlink(vault, vault / out / relative)
        why = f"{link.relative_to(vault).as_posix()} is a symlink to {link.resolve()}" if link else repr(relative)
        raise UsageError(f"refusing to write outside {out}/: {why}")
    return target


def contained(vault: Path, path: Path) -> Path:
    """Returns the real path of `path` (which need not exist yet) when it stays inside `vault`.

    Raises UsageError naming the symlink that leads out: git checks out committed symlinks, so a
    collaborator could otherwise plant `_engram -> ~/.ssh` or `.engram/chunks -> /tmp/x`.
    """
    root, real = vault.resolve(), path.resolve()
    if real.is_relative_to(root):
        return real
    link = _first_symlink(vault, path)
    shown = link.relative_to(vault).as_posix() if link else path.as_posix()
    leads = f"a symlink to {link.resolve()}" if link else f"leads to {real}"
    raise UsageError(f"{shown}: {leads}, outside the vault; refusing to write there (remove the symlink)")


def _first_symlink(vault: Path, path: Path) -> Path | None:
    """Returns the first symlink on the way from `vault` down to `path`, or None."""
    try:
        parts = path.relative_to(vault).parts
    except ValueError:
        return None
    for depth in range(1, len(parts) + 1):
        step = vault.joinpath(*parts[:depth])
        if step.is_symlink():
            return step
    return None


def write_pages(vault: Path, out: str, pages: Mapping[str, str], keep: Iterable[str] = (),
                listed: Iterable[str] | None = None) -> WriteResult:
    """Writes `pages` ({path inside out: text}) and deletes generated pages no longer wanted: wanted
    are `pages` and `keep` (pages the caller knows are on disk as they should be, not rendered).
    `listed`, when given, is every file of the output folder as the caller found it before any
    write (the stale pages are looked for among them instead of walking the folder again).

    Returns what was written and deleted, as vault-relative paths, plus collisions with human files.
    """
    result = WriteResult()
    root = contained(vault, vault / out)
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
    result.deleted = _delete_stale(vault, out, {*pages, *keep}, listed)
    return result


def _generated_candidates(root: Path) -> list[str]:
    """Returns the relative path of every file under `root` that a generated page could be (.md and
    GENERATED_YAML), in path order; links to folders are not followed. One walk: at 50,000 memory
    pages, a pathlib rglob per suffix cost seconds."""
    suffixes = (".md", *GENERATED_YAML)
    found: list[str] = []
    for folder, _, names in os.walk(root):
        prefix = os.path.relpath(folder, root).replace(os.sep, "/")
        found += [name if prefix == "." else f"{prefix}/{name}" for name in names if name.endswith(suffixes)]
    return sorted(found, key=lambda relative: relative.split("/"))


def _delete_stale(vault: Path, out: str, wanted: set[str], listed: Iterable[str] | None = None) -> list[str]:
    root = vault / out
    deleted: list[str] = []
    if not root.is_dir():
        return deleted
    suffixes = (".md", *GENERATED_YAML)
    # The pages wanted are left out before sorting: after one edit, 100,000 of them and none stale.
    candidates = _generated_candidates(root) if listed is None else \
        sorted((p for p in listed if p.endswith(suffixes) and p not in wanted), key=lambda relative: relative.split("/"))
    for relative in candidates:
        if relative in wanted:
            continue
        path = root / relative
        if not path.is_symlink() and is_generated(path):
            path.unlink()
            deleted.append(f"{out}/{relative}")
    # Remove only the folders our deletions emptied; a person's empty folder stays.
    emptied = {parent for name in deleted for parent in (vault / name).parents if parent.is_relative_to(root)}
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        if folder != root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return deleted
