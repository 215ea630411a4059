"""Checking what callers (CLI, MCP, imports) hand us before it becomes an event.

Rules (documented in the README): empty content, importance outside 0..1, an unknown
category and content over MAX_CONTENT_BYTES are errors; titles and projects are normalised
(control characters dropped, whitespace collapsed, length capped, path look removed) and never
used as paths. What validate returns passes compiler.events.checks.save_problem, the check every
peer applies on import: a memory acknowledged here is never quarantined there.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time, parse_time
from compiler.core.errors import BuildWarning, InputError
from compiler.core.json_input import MAX_FIELDS_DEPTH, json_depth, load_json
from compiler.events.checks import CATEGORIES, KINDS, MAX_CONTENT_BYTES, save_problem, time_problem, unpath

MAX_TITLE_CHARS = 120
MAX_PROJECT_CHARS = 80
DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class MemoryInput:
    content: str
    title: str = ""
    project: str = ""
    category: str = "fact"
    importance: float = 0.5
    type: str = "note"
    kind: str = "memory"
    topic_key: str = ""
    scope: str = ""
    session_id: str = ""
    source_id: str = ""  # an external id (a transcript turn, an import row): kept as provenance
    created_at: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


def clean_line(text: Any, limit: int) -> str:
    """Returns `text` as one printable line of at most `limit` characters."""
    flat = str(text or "")
    if not flat.isprintable():  # isprintable: no character of C or Z but the ASCII space, which stays
        flat = "".join(" " if unicodedata.category(c).startswith(("C", "Z")) else c for c in flat)
    flat = re.sub(r"\s+", " ", flat).strip()
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


def validate(item: MemoryInput) -> MemoryInput:
    """Returns a normalised copy of `item`, or raises InputError naming the field.

    What a peer would quarantine (compiler.events.checks.save_problem, the one rule) is normalised
    here when it can be (one line, no path look: `../../x` becomes `x`) and refused when it cannot.
    """
    content = _content(item.content)
    _check_shape(item)
    clean = replace(item, content=content, title=_title(item.title, content), category=_category(item.category),
                    importance=_importance(item.importance),
                    project=_line(item.project, MAX_PROJECT_CHARS, "project") or DEFAULT_PROJECT,
                    type=_line(item.type, 40, "type") or "note", topic_key=_line(item.topic_key, 200, "topic_key"),
                    scope=_line(item.scope, 40, "scope"), session_id=_line(item.session_id, 120, "session_id"),
                    source_id=clean_line(item.source_id, 200))
    problem = save_problem(event_data(clean))  # a backstop: what passes here, every peer imports
    if problem:
        raise InputError(problem)
    return clean


def _content(value: Any) -> str:
    """Returns the content as stored: UTF-8-safe, no NULs, "\n" line ends, trimmed; raises InputError."""
    if not isinstance(value, str):
        raise InputError(f"content must be text, got {type(value).__name__}")
    # A lone surrogate (JSON "\ud800") cannot be written as UTF-8: it becomes U+FFFD.
    content = value.encode("utf-8", "replace").decode("utf-8")
    content = content.replace("\x00", "").replace("\r\n", "\n").strip()
    if not content:
        raise InputError("content is empty")
    size = len(content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise InputError(f"content is {size / 1024:.0f} KB, over the {MAX_CONTENT_BYTES // 1024} KB limit "
                         "for one memory: store a summary and keep the document as a note")
    return content


def _importance(value: Any) -> float:
    """Returns the importance as a float in 0..1; raises InputError (a bool is not a number here)."""
    if isinstance(value, bool):
        raise InputError(f"importance must be a number from 0 to 1, got {value!r}")
    try:
        importance = float(value)
    except (TypeError, ValueError):
        raise InputError(f"importance must be a number from 0 to 1, got {value!r}") from None
    if not 0.0 <= importance <= 1.0:
        raise InputError(f"importance must be from 0 to 1, got {importance}")
    return importance


def _category(value: Any) -> str:
    category = str(value or "fact").strip().lower()
    if category not in CATEGORIES:
        raise InputError(f"unknown category {value!r}: use one of {', '.join(CATEGORIES)}")
    return category


def _check_shape(item: MemoryInput) -> None:
    """Raises InputError when the kind or the structured fields are not what every reader accepts."""
    if not isinstance(item.kind, str) or item.kind not in KINDS:
        raise InputError(f"unknown kind {item.kind!r}")
    if not isinstance(item.fields, dict):
        raise InputError(f"fields must be an object, got {type(item.fields).__name__}")
    if json_depth(item.fields) > MAX_FIELDS_DEPTH:
        # accepted here, its journal line and chunk would be refused as too deep on every reader
        raise InputError(f"metadata fields nest deeper than {MAX_FIELDS_DEPTH} levels")


def _line(value: Any, limit: int, what: str) -> str:
    """Returns a one-line field as every peer accepts it ("" when none was given); raises InputError
    when what was given is nothing but a path (`..`, `~`)."""
    line = clean_line(value, limit)
    kept = unpath(line)
    if line and not kept:
        raise InputError(f"{what} {line[:80]!r} is only path characters: give it a name")
    return kept


def _title(title: Any, content: str) -> str:
    """Returns the memory's title: the given one, else the first line of the content with any text.
    A title is display text, never a path: what would look like one is dropped (`../../x` → `x`)."""
    for candidate in [title, *content.splitlines()]:
        line = unpath(clean_line(candidate, MAX_TITLE_CHARS))
        if line:
            return line
    raise InputError("title is empty and no line of the content can be one: give a title")


def event_data(item: MemoryInput) -> dict[str, Any]:
    """Returns the `data` of a save event for a validated input."""
    data: dict[str, Any] = {"content": item.content, "title": item.title, "project": item.project,
                            "category": item.category, "importance": item.importance, "type": item.type,
                            "kind": item.kind}
    optional = {"topic_key": item.topic_key, "scope": item.scope, "session_id": item.session_id,
                "created_at": item.created_at, "fields": item.fields}
    data.update({k: v for k, v in optional.items() if v})
    if item.source_id:
        data["sources"] = [item.source_id]
    return data


IMPORT_FIELDS = {"content", "title", "project", "category", "importance", "created_at", "source_id", "type",
                 "topic_key", "scope", "session_id", "kind", "fields"}


def read_import_file(path: Path) -> tuple[list[MemoryInput], list[BuildWarning]]:
    """Returns the memories of a JSON-lines import file and a warning per unusable line."""
    items: list[MemoryInput] = []
    warnings: list[BuildWarning] = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(_import_line(line))
        except (ValueError, TypeError) as error:
            warnings.append(BuildWarning(path.name, number, f"skipped: {error}", "import"))
    return items, warnings


def _import_line(line: str) -> MemoryInput:
    """Returns the validated memory of one import line; raises ValueError or TypeError."""
    raw = load_json(line)
    if not isinstance(raw, dict):
        raise InputError("a line must be a JSON object")
    item = MemoryInput(**{k: v for k, v in raw.items() if k in IMPORT_FIELDS and v is not None})
    if item.created_at:
        problem = time_problem(item.created_at, "created_at")  # the rule a chunk's records are held to
        if problem:
            raise InputError(problem)
        item = replace(item, created_at=format_time(parse_time(item.created_at)))
    return validate(item)
