"""The tool contract agents already speak: what mcp-engram 0.5 accepted is accepted here too.

mcp-engram took a `memory_id` as a number or a string, a `completion` as any number, clamped an
importance like 1.2 into 0..1 and mapped a category it did not know; agents and their prompts
were written against that. So the tools take those values and say what they did in a `warnings`
list in the result, instead of refusing the call. A value that cannot mean anything (a
importance of "very") is still an error, in one line (`one_line`), never a pydantic dump.
"""

from __future__ import annotations

import importlib.metadata
import math
from typing import Any

from pydantic import ValidationError

from compiler.events.checks import CATEGORIES
from compiler.events.replay import TYPE_CATEGORY

# words agents use for a category, beyond engram's own types (TYPE_CATEGORY)
CATEGORY_WORDS = {**TYPE_CATEGORY, "bug": "failure", "incident": "failure", "lesson": "failure", "preference": "fact",
                  "knowledge": "fact", "note": "fact", "plan": "strategy", "approach": "strategy", "guess": "assumption",
                  "hypothesis": "assumption"}


def package_version() -> str:
    """Returns this product's version (the MCP `serverInfo.version`), not the SDK's."""
    try:
        return importlib.metadata.version("engram-vault-compiler")
    except importlib.metadata.PackageNotFoundError:
        from compiler import __version__

        return __version__


def memory_id(value: str | int) -> str:
    """Returns a memory id as text: mcp-engram took numbers too."""
    return str(value).strip()


def importance(value: float, warnings: list[str]) -> float:
    """Returns `value` clamped into 0..1, noting a clamp in `warnings`."""
    if not math.isfinite(value):
        raise ValueError("importance must be a number from 0 to 1")
    clamped = min(1.0, max(0.0, float(value)))
    if clamped != value:
        warnings.append(f"importance {value:g} is outside 0..1: stored as {clamped:g}")
    return clamped


def category(value: str, warnings: list[str]) -> str:
    """Returns one of the four categories: a known word is mapped, anything else becomes `fact`."""
    word = value.strip().lower()
    if word in CATEGORIES:
        return word
    mapped = CATEGORY_WORDS.get(word, "fact")
    warnings.append(f"category {value!r} is not one of {', '.join(CATEGORIES)}: stored as {mapped!r}")
    return mapped


def completion(value: float | None, warnings: list[str]) -> int | None:
    """Returns a completion percentage as an integer in 0..100 (rounded, clamped, with a warning)."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise ValueError("completion must be a number from 0 to 100")
    whole = min(100, max(0, round(value)))
    if whole != value:
        warnings.append(f"completion {value:g} stored as {whole}")
    return whole


def with_warnings(result: Any, warnings: list[str]) -> Any:
    """Returns the tool's result with `warnings` added (a dict result only; nothing when there are none)."""
    if warnings and isinstance(result, dict):
        return {**result, "warnings": warnings}
    return result


def one_line(tool: str, error: ValidationError) -> str:
    """Returns a validation error as one line: `tool: field: problem; field: problem`."""
    parts = []
    for problem in error.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in problem.get("loc", ()) if p != "arguments") or "arguments"
        parts.append(f"{where}: {problem.get('msg', 'invalid')}")
    return f"{tool}: {'; '.join(parts)}"
