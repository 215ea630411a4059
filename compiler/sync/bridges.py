"""Transcript bridges: memories agents saved with engram's `mem_save` tool, read back from their transcripts.

Three stores, one event shape (a JSON object per transcript event):

- OpenClaw session JSONL (`~/.openclaw/agents/<agent>/sessions/<session>.jsonl`): a header line
  `{"type":"session","id":...}`, then events whose `message.content[]` holds blocks
  `{"type":"toolCall","id","name","arguments"}` (`arguments` an object or a JSON string).
- OpenClaw's SQLite store: table `transcript_events(session_id, seq, event_json, ...)`, one
  such event per row.
- Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`): events with `sessionId`
  whose `message.content[]` holds `{"type":"tool_use","id","name","input"}`. A streamed message
  repeats its blocks on several lines: calls are deduplicated on the tool-call id.

A call counts when its tool name ends in `mem_save`. Its `source_id` is `<session id>:<tool-call
id>`, so the memory's sync_id is the same on every run and exporting twice adds nothing. Calls
without a title or a content are skipped and counted, never guessed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time, parse_time
from compiler.core.errors import InputError
from compiler.core.json_input import load_json
from compiler.memory.input import MemoryInput, validate

TOOL_SUFFIX = "mem_save"
TRANSCRIPT_SUFFIXES = (".jsonl",)
DATABASE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


@dataclass
class BridgeReport:
    files: int = 0
    calls: int = 0  # distinct mem_save calls found
    repeated: int = 0  # the same tool-call id seen again (streamed blocks)
    skipped_empty: int = 0  # no title or no content
    invalid: int = 0  # rejected by the memory input rules (too large, bad importance...)
    bad_lines: int = 0  # transcript lines that are not JSON objects
    unreadable: list[str] = field(default_factory=list)  # "path: why"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def read_transcripts(paths: Sequence[Path], project: str = "") -> tuple[list[MemoryInput], BridgeReport]:
    """Returns one MemoryInput per distinct mem_save call under `paths` (files or folders), and the counts.

    `project` is used for calls that name none.
    """
    report = BridgeReport()
    items: list[MemoryInput] = []
    seen: set[str] = set()
    for path in _files(paths, report):
        report.files += 1
        try:
            events = list(_database_events(path) if path.suffix in DATABASE_SUFFIXES else _jsonl_events(path, report))
        except (OSError, sqlite3.Error) as error:
            report.unreadable.append(f"{path}: {error}")
            continue
        for session, event in events:
            for call_id, arguments in _mem_save_calls(event):
                source = f"{session}:{call_id}"
                if source in seen:
                    report.repeated += 1
                    continue
                seen.add(source)
                report.calls += 1
                item = _memory_input(arguments, session, source, _event_time(event), project, report)
                if item:
                    items.append(item)
    return items, report


def _files(paths: Sequence[Path], report: BridgeReport) -> Iterator[Path]:
    for root in paths:
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                              and p.suffix in (*TRANSCRIPT_SUFFIXES, *DATABASE_SUFFIXES))
        else:
            report.unreadable.append(f"{root}: no such file or folder")


def _jsonl_events(path: Path, report: BridgeReport) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yields (session id, event) for each line; the session comes from a header, `sessionId`, or the file name."""
    session = path.stem
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                event = load_json(raw.decode("utf-8", errors="replace"))
            except ValueError:
                report.bad_lines += 1
                continue
            if not isinstance(event, dict):
                report.bad_lines += 1
                continue
            if event.get("type") == "session" and isinstance(event.get("id"), str):
                session = event["id"]
                continue
            yield str(event.get("sessionId") or event.get("session_id") or session), event


def _database_events(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yields (session id, event) from an OpenClaw SQLite store's `transcript_events`, read-only."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        columns = {row[1] for row in db.execute("PRAGMA table_info(transcript_events)")}
        if "event_json" not in columns:
            return  # another SQLite file: nothing of ours
        session = "session_id" if "session_id" in columns else "''"
        order = ", ".join(c for c in ("session_id", "seq") if c in columns) or "rowid"
        rows = db.execute(f"SELECT {session}, event_json FROM transcript_events ORDER BY {order}").fetchall()
    finally:
        db.close()
    for session_id, text in rows:
        try:
            event = load_json(text) if isinstance(text, (str, bytes)) else None
        except ValueError:
            continue
        if isinstance(event, dict):
            yield str(session_id or event.get("sessionId") or event.get("session_id") or path.stem), event


def _mem_save_calls(event: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Yields (tool-call id, arguments) for each mem_save call in an event's content blocks."""
    message = event.get("message") if isinstance(event.get("message"), dict) else event
    blocks = message.get("content")
    if not isinstance(blocks, list):
        return
    for block in blocks:
        if not isinstance(block, dict) or not str(block.get("name", "")).endswith(TOOL_SUFFIX):
            continue
        if block.get("type") == "toolCall":
            arguments = block.get("arguments")
        elif block.get("type") == "tool_use":
            arguments = block.get("input")
        else:
            continue
        call_id = block.get("id") or block.get("toolCallId")
        if isinstance(call_id, str) and call_id:
            yield call_id, arguments


def _memory_input(arguments: Any, session: str, source: str, at: str, project: str,
                  report: BridgeReport) -> MemoryInput | None:
    if isinstance(arguments, str):
        try:
            arguments = load_json(arguments)
        except ValueError:
            arguments = None
    args = arguments if isinstance(arguments, dict) else {}
    title, content = args.get("title"), args.get("content")
    if not isinstance(title, str) or not title.strip() or not isinstance(content, str) or not content.strip():
        report.skipped_empty += 1
        return None
    text = {k: str(args[k]) for k in ("type", "topic_key", "scope") if isinstance(args.get(k), str)}
    try:
        return validate(MemoryInput(content=content, title=title, project=str(args.get("project") or project),
                                    type=text.get("type", "manual"), topic_key=text.get("topic_key", ""),
                                    scope=text.get("scope", ""), session_id=session, source_id=source,
                                    created_at=at))
    except InputError:
        report.invalid += 1
        return None


def _event_time(event: dict[str, Any]) -> str:
    """Returns when an event happened ("YYYY-MM-DD HH:MM:SS" UTC), or "" when it does not say."""
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    for value in (event.get("timestamp"), message.get("timestamp")):
        try:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                seconds = value / 1000 if value > 1e11 else value  # epoch milliseconds or seconds
                return format_time(datetime.fromtimestamp(seconds, timezone.utc))
            if isinstance(value, str) and value:
                return format_time(parse_time(value))
        except (ValueError, OverflowError, OSError):
            continue
    return ""
