"""The build state's head: the few bytes every command reads to learn which model built the index.

Apart from compiler.pipeline.state (the state itself: every note's parse, the file stamps)
so that reading it imports only `json`: `engram search` and the memory commands ask this before
they start, and importing the state's module (its note records, the atomic writer) cost them more
than reading the head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler.pipeline.vault_paths import VaultPaths

STATE_VERSION = 1


def recorded_model(paths: VaultPaths) -> str:
    """Returns the `model` setting the vault's index was built with ("" before the first compile,
    or for a state from an engram that did not record it).

    Every command asks this before it starts (compiler.cli.common.vault_and_settings), so it reads
    the few bytes of the state's head (`head_path`), not the state: parsing a 10,000-note state.json
    (25 MB) took 1.3 s of a cold `engram search`. An older engram's state.json without a head is read whole.
    """
    legacy = legacy_path(paths.state)
    if not paths.state.is_file() and not legacy.is_file():  # deleted, for a rebuild: its head says nothing any more
        return ""
    data = _read_json(head_path(paths.state)) or _read_json(legacy) or _read_meta(paths.state)
    setting = data.get("model_setting", "") if data.get("version") == STATE_VERSION else ""
    return setting if isinstance(setting, str) else ""


def head_path(state: Path) -> Path:
    """Returns where the state's head lives: its version and model setting, beside it."""
    return state.with_name("state-head.json")


def legacy_path(state: Path) -> Path:
    """Returns where an older engram kept the whole state, as one JSON file (read once, then removed)."""
    return state.with_name("state.json")


def head_bytes(model: str, model_setting: str) -> bytes:
    """Returns the head of a state built with `model` (its identity) from the setting `model_setting`."""
    return json.dumps({"version": STATE_VERSION, "model": model, "model_setting": model_setting},
                      sort_keys=True).encode("utf-8")


def _read_json(path: Path) -> dict[str, Any]:
    """Returns the JSON object in `path`, or {} when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_meta(state: Path) -> dict[str, Any]:
    """Returns the version and model setting kept in the state file itself, or {} (a head lost)."""
    import sqlite3  # only when the head is missing: a search's start imports no SQLite for this

    try:
        db = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
        try:
            found = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('version', 'model_setting')").fetchall())
        finally:
            db.close()
    except sqlite3.Error:
        return {}
    return {**found, "version": int(found["version"])} if str(found.get("version", "")).isdigit() else {}
