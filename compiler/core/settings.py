"""Settings: defaults, overridden by the vault's `engram.toml`, then by the environment.

Errors in `engram.toml` are user errors: they raise `UsageError` naming the file and line. A key
engram does not know is one of them (with the closest known key), so a typo never passes silently.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from compiler.core.errors import UsageError

CONFIG_FILE = "engram.toml"
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
MULTILINGUAL_MODEL = "multilingual-e5-small"  # the optional extra `engram-vault-compiler[multilingual]` (embed/e5.py)

# Settings the environment overrides (engram.toml < these < command-line options).
ENV_VARS = {"model": "ENGRAM_MODEL", "chroma_url": "ENGRAM_CHROMA_URL", "now": "ENGRAM_NOW"}

# The `[sync]` table of engram.toml (or top-level `sync_<key>`), with each key's default. compiler.sync
# reads them through `sync_setting`; a key not listed here is rejected as unknown.
SYNC_KEYS: dict[str, Any] = {
    "remote": "origin",  # the git remote shared by every machine
    "branch": "",  # default: the checked-out branch
    "created_by": "",  # this machine's name in the manifest (default user@host)
    "max_failures": 3,  # `engram sync status` exits 1 from this many failed syncs in a row
    "stale_lock_seconds": 60.0,  # a .git/*.lock older than this was left by a killed git: removed
    "redact": True,  # credentials in exported memories become [redacted:<kind>] in the chunk (compiler.sync.redact)
}


# Cosine thresholds and bonuses belong to a model. multilingual-e5-small crowds texts together
# (two LoCoMo turns: median cosine 0.85, against 0.25 with MiniLM), so with MiniLM's thresholds 98%
# of LoCoMo turns would merge into an earlier one. Its defaults put the same share of LoCoMo turn
# pairs above each threshold as MiniLM's do. Graph bonuses were sized for MiniLM's spread and
# outweighed E5's small cosine gaps: association links start at 0.95 (recall's bonus is fixed) and
# the notes' hybrid bonus is 0.03 (docs/configuration.md). engram.toml, env and options win.
MODEL_DEFAULTS: dict[str, dict[str, float]] = {
    MULTILINGUAL_MODEL: {"reinforce_min": 0.98, "merge_min": 0.97, "replace_min": 0.87, "associate_min": 0.95,
                         "consolidate_min": 0.98, "related_min_cosine": 0.86, "graph_bonus": 0.03},
}


@dataclass(frozen=True)
class Settings:
    out: str = "_engram"  # the one folder the compiler writes pages into
    ignore: tuple[str, ...] = ()  # extra glob patterns, vault-relative (e.g. "Templates/**")
    model: str = BUNDLED_MODEL  # or MULTILINGUAL_MODEL, or any sentence-transformers directory or model name
    max_note_bytes: int = 1_000_000  # larger notes are indexed up to this size, with a warning
    max_section_chars: int = 1200  # about the 256-token window of MiniLM
    related_min_cosine: float = 0.40  # semantic "related" edges between notes
    related_max: int = 5
    catalog_split: int = 2000  # a vault with more notes gets one catalog page per top folder (catalog/folders/)
    graph_bonus: float = 0.03  # hybrid query: bonus for graph neighbours of strong hits (benchmarks/README.md)
    chroma_url: str = ""  # empty: the embedded store under .engram/cache/chroma
    templates: str = ""  # vault-relative folder of template overrides
    now: str = ""  # pin the memory clock ("YYYY-MM-DD HH:MM:SS" UTC): reproducible pages and tests
    # Memory write path, calibrated for the bundled MiniLM (see docs/memory.md "Calibration"):
    reinforce_min: float = 0.95  # a write this close to a memory is the same statement: reinforce it
    merge_min: float = 0.90  # between this and reinforce_min: the same fact, worded differently → merge
    replace_min: float = 0.50  # from here up, a contradiction of a close memory replaces it
    merge_max_chars: int = 1000  # a merge that would grow a memory past this stays a new memory
    associate_min: float = 0.50  # association edges between memories
    associate_max: int = 5
    consolidate_min: float = 0.95  # maintenance folds clusters this close into their most important member
    maintenance_hours: float = 12.0
    # The LLM-owned wiki (docs/wiki.md): immutable sources, the pages agents write, and what lint asks of them.
    raw: str = "raw"  # where `engram ingest` keeps sources, byte for byte; no engram write path changes them
    wiki: str = "wiki"  # the pages agents own: the only folder wiki writes may land in
    wiki_cited_kinds: tuple[str, ...] = ("source", "concept", "entity", "decision", "synthesis")  # need `sources`
    wiki_missing_min: int = 2  # a missing page is reported once this many wiki pages link to or mention it
    max_source_bytes: int = 20_000_000  # a larger source is refused by `engram ingest`
    extra: dict[str, Any] = field(default_factory=dict)  # the [sync] table and sync_* keys (SYNC_KEYS), checked

    def index_fingerprint(self) -> str:
        """Returns a hash of the settings that shape the index: a change forces a full rebuild."""
        shaping = {"model": self.model, "max_note_bytes": self.max_note_bytes,
                   "max_section_chars": self.max_section_chars}
        return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


KNOWN_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Settings) if f.name != "extra")


def load_settings(vault: Path, *, index_model: str = "", **overrides: Any) -> Settings:
    """Returns the settings for `vault`: defaults < the model's defaults < the model the index was
    built with (`index_model`, from the build state) < engram.toml < ENGRAM_* env < overrides."""
    toml_values, toml_lines = _read_toml(vault / CONFIG_FILE)
    env = {key: os.environ.get(name) for key, name in ENV_VARS.items()}
    layers: list[tuple[dict[str, Any], Any]] = [
        ({"model": index_model} if index_model else {}, lambda key: (".engram/cache/state.sqlite", 0)),
        (toml_values, lambda key: (CONFIG_FILE, toml_lines.get(key, 0))),
        ({k: v for k, v in env.items() if v}, lambda key: (ENV_VARS.get(key, "environment"), 0)),
        ({k: v for k, v in overrides.items() if v not in (None, "")}, lambda key: ("--" + key.replace("_", "-"), 0)),
    ]
    settings = Settings()
    for values, where in layers:
        settings = _apply(settings, values, where)
    given = {key for values, _ in layers for key in values}
    model_defaults = MODEL_DEFAULTS.get(settings.model, {})
    return replace(settings, **{k: v for k, v in model_defaults.items() if k not in given})


def setting_source(vault: Path, key: str) -> tuple[str, int]:
    """Returns where `key` is set for `vault`: (engram.toml, its line) or (the env var, 0), else ("", 0)
    (a default, the build state, or a command-line option)."""
    values, lines = _read_toml(vault / CONFIG_FILE)
    if key in ENV_VARS and os.environ.get(ENV_VARS[key]):
        return ENV_VARS[key], 0
    return (CONFIG_FILE, lines.get(key, 0)) if key in values else ("", 0)


def _read_toml(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Returns engram.toml's settings (top level and `[engram]`, checked) and the line of each key."""
    if not path.is_file():
        return {}, {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"not UTF-8 ({error})", path=CONFIG_FILE) from error
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        at = re.search(r" \(at line (\d+), column (\d+)\)", str(error))  # the line goes in front, path:line:
        message = str(error).replace(at.group(0), f" (column {at.group(2)})") if at else str(error)
        raise UsageError(message, path=CONFIG_FILE, line=int(at.group(1)) if at else 0) from error
    lines = key_lines(text)
    engram = data.get("engram", {})
    if not isinstance(engram, dict):
        raise UsageError("`engram` must be a table ([engram]) of settings", path=CONFIG_FILE,
                         line=lines.get(("engram",), 0))
    # Settings may sit at top level or under an [engram] table (which wins).
    values: dict[str, Any] = {}
    where: dict[str, tuple[str, ...]] = {}
    for prefix, table in (((), {k: v for k, v in data.items() if k != "engram"}), (("engram",), engram)):
        for key, value in table.items():
            values[key], where[key] = value, prefix
    for key, value in values.items():
        _check_key(key, value, where[key], lines)
    return values, {key: lines.get((*where[key], key), 0) for key in values}


def _check_key(key: str, value: Any, prefix: tuple[str, ...], lines: dict[tuple[str, ...], int]) -> None:
    """Raises UsageError, with the line, for a key engram does not know (or a [sync] value of the wrong type)."""
    line = lines.get((*prefix, key), 0)
    if key in KNOWN_KEYS:
        return  # its value is checked by _coerce
    if key == "sync":
        if not isinstance(value, dict):
            raise UsageError("`sync` must be a table ([sync]) of sync settings", path=CONFIG_FILE, line=line)
        for inner, inner_value in value.items():
            inner_line = lines.get((*prefix, "sync", inner), 0) or line
            if inner not in SYNC_KEYS:
                close = difflib.get_close_matches(inner, SYNC_KEYS, n=1)
                hint = f"did you mean '{close[0]}'?" if close else "known: " + ", ".join(SYNC_KEYS)
                raise UsageError(f"unknown key '{inner}' in [sync] ({hint})", path=CONFIG_FILE, line=inner_line)
            _check_sync_value(f"[sync] {inner}", inner_value, SYNC_KEYS[inner], inner_line)
        return
    if key.startswith("sync_") and key.removeprefix("sync_") in SYNC_KEYS:
        _check_sync_value(key, value, SYNC_KEYS[key.removeprefix("sync_")], line)
        return
    candidates = [*KNOWN_KEYS, "sync", *(f"sync_{k}" for k in SYNC_KEYS)]
    close = difflib.get_close_matches(key, candidates, n=1) or difflib.get_close_matches(key.lower(), candidates, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise UsageError(f"unknown key '{key}'{hint}", path=CONFIG_FILE, line=line)


def _check_sync_value(name: str, value: Any, default: Any, line: int) -> None:
    fits = isinstance(value, type(default)) or (isinstance(default, float) and isinstance(value, int))
    if isinstance(value, bool) != isinstance(default, bool) or not fits:
        raise UsageError(f"`{name}` must be {_kind(default)}, got {value!r}", path=CONFIG_FILE, line=line)


def _apply(settings: Settings, values: dict[str, Any], where: Any) -> Settings:
    """Returns `settings` with `values` applied; `where(key)` is the (path, line) an error names."""
    changes: dict[str, Any] = {}
    extra = dict(settings.extra)
    for key, value in values.items():
        if key not in KNOWN_KEYS:
            extra[key] = value  # from engram.toml: a sync key _read_toml checked
            continue
        changes[key] = _coerce(key, value, getattr(Settings(), key), where)
    return replace(settings, extra=extra, **changes)


def _coerce(key: str, value: Any, default: Any, where: Any) -> Any:
    def fail(message: str) -> UsageError:
        path, line = where(key)
        return UsageError(message, path=path, line=line)

    if isinstance(default, tuple):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"`{key}` must be {_kind(default)}, got {value!r}")
        return tuple(value)
    if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, type(default)):
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise fail(f"`{key}` must be {_kind(default)}, got {value!r}")
    if key == "now" and value:
        from compiler.core.clock import TimeRangeError, parse_time

        try:
            parse_time(value)
        except TimeRangeError as error:
            raise fail(f"`now` {error}") from None
        except ValueError:
            raise fail(f"`now` must look like 2026-11-30 12:00:00 (UTC), got {value!r}") from None
    if key in ("out", "raw", "wiki") and not _is_safe_folder(value):
        raise fail(f"`{key}` must be a plain folder inside the vault, got {value!r}")
    return value


def _kind(default: Any) -> str:
    """Returns how an error names the type of `default`: "a string", "a number"…"""
    if isinstance(default, bool):
        return "true or false"
    return {tuple: "a list of strings", str: "a string", int: "an integer", float: "a number"}.get(
        type(default), f"a {type(default).__name__}")


def _is_safe_folder(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts and parts[0] not in (".engram", ".obsidian", ".git")


_HEADER = re.compile(r"^\s*\[\[?([^\[\]]+)\]\]?\s*(?:#.*)?$")
_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_ASSIGN = re.compile(rf"^\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*=")
_INLINE = re.compile(rf"[{{,]\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*=")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Returns the 1-based line where each key path of a TOML text is first written.

    tomllib keeps no positions, so this scans the lines: table headers, `key =` lines (bare,
    quoted and dotted keys) and the keys of one-line inline tables; lines inside multi-line strings
    are skipped. It reads text tomllib already accepted, so it only has to find, not to validate.
    """
    found: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_string = ""
    for number, line in enumerate(text.splitlines(), 1):
        if in_string:
            if line.count(in_string) % 2:
                in_string = ""
            continue
        header = _HEADER.match(line)
        if header:
            table = _split_key(header.group(1))
            for depth in range(1, len(table) + 1):
                found.setdefault(table[:depth], number)
            continue
        assign = _ASSIGN.match(line)
        if not assign:
            continue
        path = table + _split_key(assign.group(1))
        for depth in range(len(table) + 1, len(path) + 1):
            found.setdefault(path[:depth], number)
        rest = line[assign.end():]
        for inner in _INLINE.finditer(rest):
            found.setdefault(path + _split_key(inner.group(1)), number)
        in_string = next((q for q in ('"""', "'''") if rest.count(q) % 2), "")
    return found


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r""""((?:[^"\\]|\\.)*)"|'([^']*)'|([^.\s]+)""", dotted)
    return tuple(double or single or bare for double, single, bare in parts)
