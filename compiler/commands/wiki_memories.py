"""Memories meet the wiki: the memories a promotion names, looked up with their observation pages.

Here, not in compiler.wiki, because it needs both the memory library and the observation pages'
paths (compiler.render), which the wiki layer beside render cannot import.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compiler.core.settings import Settings
from compiler.memory.vault import VaultMemory, read_memories
from compiler.render.memory import memory_page, project_slugs
from compiler.wiki.answers import promote_memories
from compiler.wiki.layout import WikiLayout


def promote(memory: VaultMemory, settings: Settings, ids: Sequence[str], title: str, *, kind: str = "concept",
            summary: str = "", intro: str = "", writer: str = "") -> dict[str, Any]:
    """Writes a wiki page from the memories `ids`; returns promote_memories' answer. Raises
    NotFoundError for an unknown id (nothing is written then)."""
    memories = read_memories(memory)
    found = [memories.get(memory_id) for memory_id in dict.fromkeys(ids)]
    projects = project_slugs([o.project for o in memories.state.values()])
    records = [{"id": o.id, "title": o.title, "content": o.content, "project": o.project,
                "page": f"{settings.out}/{memory_page(o, projects)}" if o.live else ""} for o in found]
    return promote_memories(WikiLayout.of(Path(memory.root), settings), records, title, kind=kind, summary=summary,
                            intro=intro, writer=writer)
