"""JSON from files we did not write this run (peer chunks, the manifest, the journal, import files).

Python's json has no depth limit: it recurses until the interpreter's recursion limit and
raises RecursionError, which no "bad input" handler catches, so 400 bytes of `[[[[…` took down
every command that read them. `load_json` is the one place such bytes become JSON: too deep
is a ValueError like any other malformed JSON, and the limit is a fixed number (not "whatever
stack is left"), so a value that loads here can still be re-encoded and walked recursively later.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100  # a chunk is 4 levels deep, an event with metadata fields under 10: far above any real file
MAX_FIELDS_DEPTH = 32  # a memory's metadata `fields`: its event, in a chunk, stays far below MAX_DEPTH


class JSONDepthError(ValueError):
    """The JSON nests arrays and objects deeper than MAX_DEPTH. `msg` as on json.JSONDecodeError."""

    def __init__(self, limit: int) -> None:
        self.msg = f"nested deeper than {limit} levels"
        super().__init__(self.msg)


def load_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Returns the decoded value; raises ValueError when it is not JSON or nests deeper than `max_depth`."""
    try:
        value = json.loads(text)
    except RecursionError:  # deeper than the interpreter's stack allows: certainly too deep
        raise JSONDepthError(max_depth) from None
    if _opening_brackets(text) > max_depth and json_depth(value) > max_depth:
        raise JSONDepthError(max_depth)
    return value


def _opening_brackets(text: str | bytes) -> int:
    """Returns how many `[` and `{` the text holds: a bound on its depth that is cheap to count."""
    if isinstance(text, (bytes, bytearray)):
        return text.count(b"[") + text.count(b"{")
    return text.count("[") + text.count("{")


def json_depth(value: Any) -> int:
    """Returns how deeply `value` nests lists and dicts (a scalar is 0), without recursing."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (list, dict)) else []
    while stack:
        container, level = stack.pop()
        deepest = max(deepest, level)
        for item in container.values() if isinstance(container, dict) else container:
            if isinstance(item, (list, dict)):
                stack.append((item, level + 1))
    return deepest
