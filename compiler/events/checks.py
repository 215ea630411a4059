"""Checks on what arrives in a chunk from another machine, before any of it becomes an event.

A chunk is input from outside: each record is checked here and a bad one is quarantined (left
out, with a message naming the chunk and the record) instead of reaching the fold, the index,
or a file name. Every function returns the problem as a sentence, or "" when the value is fine.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from compiler.core.clock import TimeRangeError, parse_time
from compiler.events.journal import OPS, MemoryEvent

CATEGORIES = ("fact", "strategy", "assumption", "failure")
KINDS = ("memory", "failure", "progress", "handoff")  # only memories of the same kind ever merge
MAX_CONTENT_BYTES = 64 * 1024  # a memory is a statement, not a document: put documents in notes
MAX_LINE_CHARS = 1000  # titles, projects, types, keys: one line each
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_SEPARATOR = re.compile(r"([\\/])")


def id_problem(value: Any, what: str) -> str:
    """An id (memory sync_id, event id) must be a short run of letters, digits and `._:@+=-`."""
    if not isinstance(value, str) or not value:
        return f"{what} is missing"
    if not _SAFE_ID.match(value) or ".." in value:
        return f"{what} {value[:80]!r} has characters an id may not have"
    return ""


def line_problem(value: Any, what: str, *, required: bool = False) -> str:
    """A title, project or other one-line field: text, no control characters (NUL...), not a path."""
    if value is None or value == "":
        return f"{what} is missing" if required else ""
    if not isinstance(value, str):
        return f"{what} is a {type(value).__name__}, not text"
    if len(value) > MAX_LINE_CHARS:
        return f"{what} is over {MAX_LINE_CHARS} characters"
    if any(unicodedata.category(c) == "Cc" for c in value):
        return f"{what} {value[:80]!r} holds control characters"
    if looks_like_path(value):
        return f"{what} {value[:80]!r} looks like a file path"
    return ""


def looks_like_path(value: str) -> bool:
    """Returns whether a one-line field could climb out of a folder if someone made it a path:
    it starts at a root (`/`, `\\`, `~`, a drive) or has a `..` segment."""
    text = value.strip()
    return text.startswith(("/", "\\", "~")) or bool(_DRIVE.match(text)) or ".." in _SEPARATOR.split(text)


def unpath(value: str) -> str:
    """Returns `value` without what makes it look like a path (leading roots, `..` segments), so
    the write boundary can keep a hostile title as display text every peer accepts."""
    text = value.strip()
    while looks_like_path(text):  # each pass removes at least one character: it ends
        tokens = _SEPARATOR.split(text)  # segment, separator, segment, ...
        kept = [tok for n, tok in enumerate(tokens)
                if not (n % 2 == 0 and tok == "..") and not (n % 2 == 1 and tokens[n - 1] == "..")]
        text = _DRIVE.sub("", "".join(kept).strip()).lstrip("/\\~ ")
    return text


def content_problem(value: Any, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        return f"content is a {type(value).__name__ if value is not None else 'null'}, not text"
    if required and not value.strip():
        return "content is empty"
    if "\x00" in value:
        return "content holds NUL bytes"
    if len(value.encode("utf-8", errors="replace")) > MAX_CONTENT_BYTES:
        return f"content is over {MAX_CONTENT_BYTES // 1024} KB"
    return ""


def time_problem(value: Any, what: str, *, required: bool = False) -> str:
    if value is None or value == "":
        return f"{what} is missing" if required else ""
    if not isinstance(value, str):
        return f"{what} is not a timestamp"
    try:
        parse_time(value)
    except TimeRangeError as error:
        return f"{what} {error}"
    except ValueError:
        return f"{what} {value[:40]!r} is not a timestamp"
    return ""


def _number_problem(value: Any, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        return f"{what} must be a number from 0 to 1"
    return ""


def _strings_problem(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= 400 for v in value):
        return f"{what} must be a list of short strings"
    return ""


def _links_problem(value: Any) -> str:
    if value is None:
        return ""
    ok = isinstance(value, list) and all(
        isinstance(link, list) and len(link) == 2 and not id_problem(link[0], "link")
        and isinstance(link[1], (int, float)) and not isinstance(link[1], bool) for link in value)
    return "" if ok else "links must be a list of [memory id, weight]"


def event_problem(event: MemoryEvent) -> str:
    """Returns why an event from a chunk must not be replayed ("" when it is fine)."""
    problem = id_problem(event.id, "event id") or id_problem(event.memory, "memory id")
    if problem or event.op not in OPS:
        return problem or f"unknown op {event.op!r}"
    data = event.data
    checks = [_strings_problem(data.get("sources"), "sources"),
              "" if isinstance(data.get("fields", {}), dict) else "fields must be an object"]
    if event.op == "save":
        checks.append(save_problem(data))
    elif event.op in ("merge", "replace", "update"):
        checks += [content_problem(data.get("content"), required=False), line_problem(data.get("title"), "title"),
                   _number_problem(data.get("importance"), "importance")]
    elif event.op == "consolidate":
        checks += [id_problem(data["into"], "consolidate target") if "into" in data else "",
                   _strings_problem(data.get("absorbed"), "absorbed")]
    return next((c for c in checks if c), "")


def save_problem(data: dict[str, Any]) -> str:
    """Returns why the data of a save event is no valid memory ("" when it is). The one rule: the
    write boundary (compiler.memory.input.validate) applies it to what it stores, a peer to what it imports."""
    checks = [content_problem(data.get("content")), line_problem(data.get("title"), "title"),
              line_problem(data.get("project"), "project"), _number_problem(data.get("importance"), "importance"),
              _number_problem(data.get("floor"), "floor"),
              "" if data.get("category", "fact") in CATEGORIES else f"unknown category {data.get('category')!r}",
              "" if data.get("kind", "memory") in KINDS else f"unknown kind {data.get('kind')!r}",
              time_problem(data.get("created_at"), "created_at"), _links_problem(data.get("links")),
              _strings_problem(data.get("sources"), "sources"),
              "" if isinstance(data.get("fields", {}), dict) else "fields must be an object"]
    checks += [line_problem(data.get(key), key) for key in ("type", "topic_key", "scope", "session_id")]
    return next((c for c in checks if c), "")


def record_problem(record: Any) -> str:
    """Returns why an engram observation record cannot be imported ("" when it can)."""
    if not isinstance(record, dict):
        return f"is a {type(record).__name__}, not an object"
    deleted = bool(record.get("deleted_at"))
    checks = [id_problem(record.get("sync_id"), "sync_id"),
              line_problem(record.get("title"), "title", required=not deleted),
              line_problem(record.get("project"), "project"),
              content_problem(record.get("content"), required=not deleted),
              time_problem(record.get("created_at"), "created_at", required=True),
              time_problem(record.get("updated_at"), "updated_at"),
              time_problem(record.get("deleted_at"), "deleted_at")]
    checks += [line_problem(record.get(key), key) for key in ("type", "scope", "topic_key", "session_id")]
    return next((c for c in checks if c), "")
