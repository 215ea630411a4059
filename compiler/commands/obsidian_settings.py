"""Obsidian's own settings that keep generated pages out of a person's way, offered by `engram setup`.

Two settings, each in a file Obsidian owns, changed only when the person asks (`engram setup
--obsidian-exclude`, `--obsidian-graph`); otherwise setup only says what it would change:

- `.obsidian/app.json` `userIgnoreFilters` (Settings → Files and links → Excluded files). Obsidian's
  help: excluded files are "hidden in Search, Graph View, and Unlinked Mentions, less noticeable in
  Quick Switcher and link suggestions". Not hidden: the file explorer, the Backlinks pane, links.
- `.obsidian/graph.json` `colorGroups`: a grey group `path:<out>`, so generated pages stay in the
  graph but recede behind the notes.

Each change is merged into the file as it is (every other key and entry kept, in order) and
written atomically; a file that is not a JSON object is a CorruptDataError naming it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from compiler.core.errors import CorruptDataError
from compiler.core.files import atomic_write
from compiler.core.json_input import load_json

GREY = 0x999999  # Obsidian stores a group's colour as {"a": alpha, "rgb": 24-bit integer}


@dataclass(frozen=True)
class ObsidianSetting:
    """One setting setup offers, and where it stands in this vault."""

    name: str  # the setup option that applies it: "exclude" or "graph"
    file: str  # vault-relative, ".obsidian/app.json"
    key: str  # the JSON key it changes
    value: Any  # the entry it adds to that key's list
    effect: str  # what it does, in Obsidian's words where it has them
    state: str  # "set" (already there), "offered" (would be added), "applied" (added now)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def offered_settings(root: Path, out: str) -> list[ObsidianSetting]:
    """Returns the settings setup offers and whether each is already set. A file that cannot be
    read as a JSON object is a CorruptDataError (one line naming it)."""
    folder = out.strip("/")
    exclude = ObsidianSetting(
        "exclude", ".obsidian/app.json", "userIgnoreFilters", f"{folder}/",
        f"Excluded files: {folder}/ hidden in Search, Graph view and Unlinked mentions, less noticeable in "
        "the Quick Switcher and link suggestions; still in the file explorer and the Backlinks pane", "")
    graph = ObsidianSetting(
        "graph", ".obsidian/graph.json", "colorGroups", {"query": f"path:{folder}", "color": {"a": 1, "rgb": GREY}},
        f"Graph view: {folder}/ pages drawn grey, so your notes stand out (they stay in the graph)", "")
    return [_with_state(root, exclude, _has_exclude(_read(root, exclude.file), folder)),
            _with_state(root, graph, _has_group(_read(root, graph.file), folder))]


def apply_settings(root: Path, out: str, names: set[str]) -> list[ObsidianSetting]:
    """Adds the settings named in `names` ("exclude", "graph") that are not set yet; returns every
    offered setting with its state after."""
    result = []
    for setting in offered_settings(root, out):
        if setting.name in names and setting.state == "offered":
            data = _read(root, setting.file)
            entries = data.get(setting.key, [])
            data[setting.key] = [*entries, setting.value]
            atomic_write(root / setting.file, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
            setting = _with_state(root, setting, False, applied=True)
        result.append(setting)
    return result


def _with_state(root: Path, setting: ObsidianSetting, present: bool, applied: bool = False) -> ObsidianSetting:
    state = "applied" if applied else "set" if present else "offered"
    return ObsidianSetting(**{**asdict(setting), "state": state})


def _read(root: Path, relative: str) -> dict[str, Any]:
    """Returns the JSON object in `relative` ({} when the file does not exist)."""
    path = root / relative
    if not path.is_file():
        return {}
    try:
        data = load_json(path.read_bytes())
    except ValueError as error:  # JSONDecodeError, bad UTF-8, too deep
        raise CorruptDataError(f"not valid JSON ({getattr(error, 'msg', error)}); engram changed nothing",
                               path=relative, line=getattr(error, "lineno", 0)) from None
    if not isinstance(data, dict):
        raise CorruptDataError("not a JSON object, as Obsidian writes it; engram changed nothing", path=relative)
    return data


def _entries(data: dict[str, Any], key: str, relative: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise CorruptDataError(f"`{key}` is not a list, as Obsidian writes it; engram changed nothing", path=relative)
    return value


def _has_exclude(data: dict[str, Any], folder: str) -> bool:
    """True when an Excluded files entry already names the folder (with or without its slash)."""
    return any(isinstance(e, str) and e.strip().rstrip("/") == folder
               for e in _entries(data, "userIgnoreFilters", ".obsidian/app.json"))


def _has_group(data: dict[str, Any], folder: str) -> bool:
    """True when a colour group already queries the folder (`path:_engram`, `path:"_engram"`…)."""
    wanted = {f"path:{folder}", f'path:"{folder}"', f"path:{folder}/", f'path:"{folder}/"'}
    return any(isinstance(g, dict) and str(g.get("query", "")).strip() in wanted
               for g in _entries(data, "colorGroups", ".obsidian/graph.json"))
