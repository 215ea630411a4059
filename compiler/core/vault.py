"""Finding the vault a command works on."""

from __future__ import annotations

import os
from pathlib import Path

from compiler.core.errors import UsageError


def find_vault(explicit: str | None = None, start: Path | None = None) -> Path:
    """Returns the vault: `explicit`, else $ENGRAM_VAULT, else the nearest folder holding .engram/ or .obsidian/."""
    chosen = explicit or os.environ.get("ENGRAM_VAULT")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_dir():
            raise UsageError(f"no such vault folder: {chosen}")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".engram").is_dir() or (folder / ".obsidian").is_dir():
            return folder
    raise UsageError(f"no vault found at or above {here}: pass --vault, set ENGRAM_VAULT, "
                             "or run inside a folder with .obsidian/ or .engram/")
