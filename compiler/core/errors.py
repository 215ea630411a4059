"""One error type for every expected failure, and the warning a build reports and goes on.

`EngramError` carries the vault-relative path and line where there is one, and the exit code
the CLI gives. The CLI and the MCP server each turn it into one line (`describe`); nothing else
catches it to reword it. The subclasses say what kind of failure it is, and keep the builtin
base a caller might already catch (a bad input is still a ValueError).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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


def describe(error: BaseException) -> str:
    """Returns the one line a user sees for an expected failure (an EngramError or an OSError)."""
    if isinstance(error, OSError) and not isinstance(error, EngramError):
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
        return asdict(self)
