"""Settings: defaults, overridden by the vault's `engram.toml`, then by the environment.

Errors in `engram.toml` are user errors: they raise `UsageError` naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from compiler.core.errors import UsageError

CONFIG_FILE = "engram.toml"
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
MULTILINGUAL_MODEL = "multilingual-e5-small"  # the optional extra `engram-vault[multilingual]` (compiler/index/e5.py)


# Cosine thresholds and bonuses belong to a model. multilingual-e5-small crowds texts together
# (two LoCoMo turns: median cosine 0.85, against 0.25 with MiniLM), so with MiniLM's thresholds 98%
# of LoCoMo turns would merge into an earlier one. Its defaults put the same share of LoCoMo turn
# pairs above each threshold as MiniLM's do. Graph bonuses were sized for MiniLM's spread and
# outweighed E5's small cosine gaps: association links start at 0.95 (recall's bonus is fixed) and
# the notes' hybrid bonus is 0.03 (README "Multilingual model"). engram.toml, env and options win.
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
    graph_bonus: float = 0.1  # hybrid query: bonus for graph neighbours of strong hits
    chroma_url: str = ""  # empty: the embedded store under .engram/cache/chroma
    templates: str = ""  # vault-relative folder of template overrides
    now: str = ""  # pin the memory clock ("YYYY-MM-DD HH:MM:SS" UTC): reproducible pages and tests
    # Memory write path, calibrated for the bundled MiniLM (see README "Calibration"):
    reinforce_min: float = 0.95  # a write this close to a memory is the same statement: reinforce it
    merge_min: float = 0.90  # between this and reinforce_min: the same fact, worded differently → merge
    replace_min: float = 0.50  # from here up, a contradiction of a close memory replaces it
    merge_max_chars: int = 1000  # a merge that would grow a memory past this stays a new memory
    associate_min: float = 0.50  # association edges between memories
    associate_max: int = 5
    consolidate_min: float = 0.95  # maintenance folds clusters this close into their most important member
    maintenance_hours: float = 12.0
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, kept for later stages

    def index_fingerprint(self) -> str:
        """Returns a hash of the settings that shape the index: a change forces a full rebuild."""
        shaping = {"model": self.model, "max_note_bytes": self.max_note_bytes,
                   "max_section_chars": self.max_section_chars}
        return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_settings(vault: Path, **overrides: Any) -> Settings:
    """Returns the settings for `vault`: defaults < the model's defaults < engram.toml < ENGRAM_* env < overrides."""
    env = {"model": os.environ.get("ENGRAM_MODEL"), "chroma_url": os.environ.get("ENGRAM_CHROMA_URL"),
           "now": os.environ.get("ENGRAM_NOW")}
    layers = [(_read_toml(vault / CONFIG_FILE), str(vault / CONFIG_FILE)),
              ({k: v for k, v in env.items() if v}, "environment"),
              ({k: v for k, v in overrides.items() if v not in (None, "")}, "options")]
    settings = Settings()
    for values, source in layers:
        settings = _apply(settings, values, source=source)
    given = {key for values, _ in layers for key in values}
    model_defaults = MODEL_DEFAULTS.get(settings.model, {})
    return replace(settings, **{k: v for k, v in model_defaults.items() if k not in given})


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path.name}: {error}") from error
    except UnicodeDecodeError as error:
        raise UsageError(f"{path.name}: not UTF-8 ({error})") from error
    # Settings may sit at top level or under an [engram] table.
    return {**{k: v for k, v in data.items() if k != "engram"}, **data.get("engram", {})}


def _apply(settings: Settings, values: dict[str, Any], *, source: str) -> Settings:
    known = {f.name: f for f in fields(Settings) if f.name != "extra"}
    changes: dict[str, Any] = {}
    extra = dict(settings.extra)
    for key, value in values.items():
        if key not in known:
            extra[key] = value
            continue
        default = getattr(Settings(), key)
        changes[key] = _coerce(key, value, default, source)
    return replace(settings, extra=extra, **changes)


def _coerce(key: str, value: Any, default: Any, source: str) -> Any:
    if isinstance(default, tuple):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{source}: `{key}` must be a list of strings")
        return tuple(value)
    if isinstance(default, bool) or not isinstance(value, type(default)):
        if isinstance(default, float) and isinstance(value, int):
            return float(value)
        raise UsageError(f"{source}: `{key}` must be a {type(default).__name__}, got {value!r}")
    if key == "now" and value:
        from compiler.core.clock import parse_time

        try:
            parse_time(value)
        except ValueError:
            raise UsageError(f"{source}: `now` must look like 2026-11-30 12:00:00 (UTC), got {value!r}") from None
    if key == "out" and not _is_safe_folder(value):
        raise UsageError(f"{source}: `out` must be a plain folder inside the vault, got {value!r}")
    return value


def _is_safe_folder(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts and parts[0] not in (".engram", ".obsidian", ".git")
