"""Where a vault keeps its derived state: one place that names every file under `.engram/`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATE_FILE = ".engram/cache/state.sqlite"  # vault-relative: what warnings about the build state name


@dataclass(frozen=True)
class VaultPaths:
    """Where a vault keeps its derived state."""

    root: Path

    @property
    def engram(self) -> Path:
        return self.root / ".engram"

    @property
    def cache(self) -> Path:
        return self.engram / "cache"

    @property
    def state(self) -> Path:
        return self.cache / "state.sqlite"  # compiler.pipeline.state_store

    @property
    def inputs(self) -> Path:
        return self.cache / "inputs.json"  # what the last build read, to skip a build that would change nothing

    @property
    def fts(self) -> Path:
        return self.cache / "fts.sqlite"

    @property
    def graph(self) -> Path:
        return self.cache / "graph.sqlite"

    @property
    def embeddings(self) -> Path:
        return self.cache / "embeddings.sqlite"
