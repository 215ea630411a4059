"""Compile keeps the token-vector file to the texts in use: edited notes and replaced or forgotten
memories leave dead matrices, counted at every compile, reported by `engram check`, and dropped
when they pass the compaction's share."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.commands.check import check_vault
from compiler.core.settings import Settings, load_settings
from compiler.index import token_cache
from compiler.index.cache import text_hash
from compiler.index.token_cache import TokenVectorCache
from compiler.memory.index import memory_text
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory, read_memories
from compiler.memory.write import store_memory
from compiler.pipeline.index import section_texts
from compiler.pipeline.spine import compile_vault
from compiler.pipeline.state import load_state
from tests.memory.test_late_interaction import FakeTokenEmbedder

NOW = "2026-11-30 12:00:00"


def _compile(vault: Path, embedder: FakeTokenEmbedder) -> dict:
    return compile_vault(vault, load_settings(vault, now=NOW), embedder=embedder).token_file


def test_dead_matrices_are_counted_reported_and_compacted(make_vault, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = FakeTokenEmbedder()
    vault = make_vault({".obsidian/app.json": "{}", "Note.md": "# Note\n\nThe first draft of the note.\n"})
    with VaultMemory(vault, Settings(now=NOW), embedder=embedder) as memory:
        store_memory(memory, MemoryInput(content="Deploys go out on Tuesdays", project="ops"))
    first = _compile(vault, embedder)
    assert first["file_bytes"] > 0 and first["dead_share"] == 0.0 and not first["compacted"]
    for draft in ("second", "third", "fourth"):  # every edit leaves the old section's matrix behind
        (vault / "Note.md").write_text(f"# Note\n\nThe {draft} draft of the note, now longer than before.\n")
        edited = _compile(vault, embedder)
    assert edited["dead_share"] > 0.5 and not edited["compacted"]  # under the floor: a small cache is left
    reported = check_vault(vault, load_settings(vault)).token_file
    assert reported == {k: edited[k] for k in ("file_bytes", "live_bytes", "dead_share")}
    monkeypatch.setattr(token_cache, "COMPACT_MIN_BYTES", 0)
    (vault / "Note.md").write_text("# Note\n\nThe last draft.\n")
    done = _compile(vault, embedder)
    assert done["compacted"] and done["bytes_after"] < done["file_bytes"]
    assert check_vault(vault, load_settings(vault)).token_file["dead_share"] == 0.0
    with VaultMemory(vault, Settings(now=NOW), embedder=embedder) as memory:  # the texts in use are all there
        texts = [memory_text(o) for o in read_memories(memory).state.values() if o.live]
    texts += section_texts(load_state(vault / ".engram" / "cache" / "state.sqlite")[0].notes)
    tokens = TokenVectorCache(vault / ".engram" / "cache" / "embeddings.sqlite", readonly=True)
    assert tokens.known(embedder.identity, [text_hash(t) for t in texts]) == {text_hash(t) for t in texts}
    tokens.close()
    assert any("last draft" in t for t in texts)
