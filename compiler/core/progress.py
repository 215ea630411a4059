"""The progress protocol long work reports through: `progress(label, total)` is a context manager
yielding a tick (`tick(n)`: n more items done). The CLI passes one that draws a bar or prints lines
on stderr; library callers and the MCP server get `no_progress`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

Tick = Callable[[int], None]
Progress = Callable[[str, int], AbstractContextManager[Tick]]


@contextmanager
def no_progress(label: str, total: int) -> Iterator[Tick]:
    """Yields a tick that reports nothing: the default when no one is watching."""
    yield lambda n: None
