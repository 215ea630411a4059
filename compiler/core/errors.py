"""One error type for every expected failure, and the warning a build reports and goes on.

`EngramError` carries the vault-relative path and line where there is one, and the exit code
the CLI gives. The CLI and the MCP server each turn it into one line (`describe`); nothing else
catches it to reword it. The subclasses say what kind of failure it is, and keep the builtin
base a caller might already catch (a bad input is still a ValueError).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.core.space import free_bytes, is_disk_full, size_text


class EngramError(Exception):
    """An expected failure: bad input, a missing index, a busy lock, corrupt data, a tool missing."""

    exit_code = 1

    def __init__(self, message: str, *, path: str = "", line: int = 0) -> None:
        super().__init__(message)
        self.message, self.path, self.line = message, path, line

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.path and self.line else self.path
        return f"{where}: {self.message}" if where else self.message


class UsageError(EngramError, ValueError):
    """The command cannot run as invoked: no vault there, a bad `engram.toml`, a bad option."""

    exit_code = 2


class InputError(EngramError, ValueError):
    """What the caller handed us cannot be stored or read as given; the message says which field."""


class NotFoundError(EngramError, LookupError):
    """The thing asked for is not there: an unknown memory id, an index never compiled."""


class CorruptDataError(EngramError, ValueError):
    """A file in the vault cannot be read as its format says: a chunk, the manifest."""


class BusyError(EngramError):
    """Another engram process holds the vault's writer lock for too long."""


class ModelLoadError(EngramError):
    """The embedding model cannot be loaded (offline, missing, or not a sentence-transformers model)."""


class GitError(EngramError):
    """A git step of a sync failed; the message says which and what to do."""


class StorageFullError(EngramError, OSError):
    """A write found no room on its filesystem. Still an OSError (ENOSPC), as the failure it replaces.

    The message says what could not be written, how much room is left and, where known, about
    how much the write needed; `after` says what happens to the half-done work."""

    def __init__(self, path: Path, what: str, *, needed: int = 0, after: str = "") -> None:
        free = free_bytes(path)
        room = f"{size_text(free)} free on that filesystem" if free is not None else "free space unknown"
        need = f", this write needs at least {size_text(needed)}" if needed else ""
        then = f"; {after}" if after else ""
        super().__init__(f"could not write {what}: the disk is full ({room}{need}){then}. "
                         "Free some space and run the command again.", path=str(path))
        self.errno, self.strerror, self.filename = errno.ENOSPC, self.message, str(path)


# What a StorageFullError of an index or cache adds: nothing there is the only copy of anything.
DERIVED = "it is derived from your notes and memories, and the next run brings it up to date"


@contextmanager
def full_disk_guard(path: Path, what: str, *, needed: int = 0, after: str = "") -> Iterator[None]:
    """Turns a full-disk failure of the writes inside (OSError, SQLite, Chroma) into a
    StorageFullError naming `path` and `what`; any other failure passes through unchanged."""
    try:
        yield
    except StorageFullError:
        raise
    except Exception as error:
        if is_disk_full(error, path):
            raise StorageFullError(path, what, needed=needed, after=after) from error
        raise


def describe(error: BaseException) -> str:
    """Returns the one line a user sees for an expected failure (an EngramError or an OSError)."""
    if isinstance(error, OSError) and not isinstance(error, EngramError):
        if error.errno in (errno.ENOSPC, errno.EDQUOT) and error.filename:  # a write no module translated
            return str(StorageFullError(Path(error.filename), "this file"))
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    return str(error)


EXPECTED = (EngramError, OSError)  # what the CLI and the MCP server answer in one line, never a traceback


@dataclass(frozen=True)
class BuildWarning:
    """A problem with one file, reported to the user; the build goes on."""

    file: str  # vault-relative POSIX path
    line: int  # 1-based; 0 when the problem concerns the whole file
    message: str
    kind: str = "warning"  # e.g. frontmatter, encoding, binary, size, broken-link, ambiguous-link

    def to_dict(self) -> dict[str, Any]:
        # Not `asdict`: its deep copy of four plain values cost a second for the 21,000 warnings
        # of a 100,000-note vault.
        return {"file": self.file, "line": self.line, "message": self.message, "kind": self.kind}
