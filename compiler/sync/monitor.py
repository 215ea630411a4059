"""Monitoring of unattended syncs: a log file and a status file, so a bridge never fails silently.

- `.engram/sync.log`: one line per event, `2026-11-30 12:00:00 pid=4242 ok: ...` (trimmed to
  the last ~500 KB when it passes 1 MB).
- `.engram/sync-status.json`: last success, last error, consecutive failures, last export, and
  the run in progress (pid): a run killed midway is noticed by the next one and counted as a failure.

Neither file is tracked by git (`engram sync install` ignores them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time
from compiler.core.files import atomic_write

STATUS = "sync-status.json"
LOG = "sync.log"
MAX_LOG_BYTES = 1_000_000


def now_text() -> str:
    return format_time(datetime.now(timezone.utc))


def read_status(engram_dir: Path) -> dict[str, Any]:
    """Returns the status file's content ({} when there is none or it is unreadable)."""
    try:
        data = json.loads((engram_dir / STATUS).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_status(engram_dir: Path, status: dict[str, Any]) -> None:
    atomic_write(engram_dir / STATUS, (json.dumps(status, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())


def log(engram_dir: Path, level: str, message: str) -> None:
    """Appends one line to the sync log (and trims the log when it grows past MAX_LOG_BYTES)."""
    engram_dir.mkdir(parents=True, exist_ok=True)
    path = engram_dir / LOG
    line = f"{now_text()} pid={os.getpid()} {level}: {' '.join(message.split())}\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
    if path.stat().st_size > MAX_LOG_BYTES:
        data = path.read_bytes()[-MAX_LOG_BYTES // 2:]
        atomic_write(path, data[data.find(b"\n") + 1:])


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def monitored(engram_dir: Path, action: str) -> Iterator[dict[str, Any]]:
    """Records a run: yields a dict the run fills with its result; success resets the failure count.

    Any exception is logged, recorded as the last error (consecutive failures + 1) and re-raised.
    """
    status = read_status(engram_dir)
    previous = status.get("running")
    if isinstance(previous, dict) and previous.get("pid") != os.getpid() and not _alive(previous.get("pid")):
        message = f"the {previous.get('action', 'sync')} started {previous.get('started_at')} (pid {previous.get('pid')}) never finished: killed?"
        log(engram_dir, "error", message)
        status = _failed(status, message)
    status["running"] = {"pid": os.getpid(), "started_at": now_text(), "action": action}
    write_status(engram_dir, status)
    log(engram_dir, "start", action)
    result: dict[str, Any] = {}
    try:
        yield result
    except BaseException as error:
        message = f"{type(error).__name__}: {error}" if not isinstance(error, (KeyboardInterrupt, SystemExit)) \
            else f"interrupted ({type(error).__name__})"
        log(engram_dir, "error", f"{action}: {message}")
        write_status(engram_dir, {**_failed(read_status(engram_dir), message), "running": None})
        raise
    done = read_status(engram_dir)
    done.update(running=None, consecutive_failures=0, last_success=now_text(), last_action=action,
                last_result=result)
    if result.get("export", {}).get("chunk"):
        done["last_export"] = {"at": now_text(), **result["export"]}
    write_status(engram_dir, done)
    log(engram_dir, "ok", f"{action}: {summary(result)}")


def record_failure(engram_dir: Path, action: str, message: str) -> None:
    """Records a run that could not even start (the vault busy for too long)."""
    log(engram_dir, "error", f"{action}: {message}")
    write_status(engram_dir, _failed(read_status(engram_dir), message))


def _failed(status: dict[str, Any], message: str) -> dict[str, Any]:
    return {**status, "last_error": {"at": now_text(), "message": message},
            "consecutive_failures": int(status.get("consecutive_failures") or 0) + 1}


def summary(result: dict[str, Any]) -> str:
    """Returns one line saying what a run did (also the commit message's tail)."""
    parts = []
    imported = result.get("import") or {}
    if imported:
        parts.append(f"imported {len(imported.get('chunks_new', []))} chunks ({imported.get('events_new', 0)} events, "
                     f"{imported.get('memories_new', 0)} new memories)")
    exported = result.get("export") or {}
    if exported.get("chunk"):
        parts.append(f"exported chunk {exported['chunk']} ({exported['events']} events, {exported['memories']} memories)")
    elif exported:
        parts.append("nothing new to export")
    for key, text in (("quarantined", "records quarantined"), ("resolved", "manifest conflicts resolved")):
        if result.get(key):
            parts.append(f"{result[key]} {text}")
    if result.get("pushed"):
        parts.append("pushed" + (" after a retry" if result.get("push_retries") else ""))
    return ", ".join(parts) or "nothing to do"
