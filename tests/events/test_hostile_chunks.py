"""Issue 11, item 1: what a hostile peer can commit (a chunk, the manifest) is quarantined, never a crash.

Each probe crashed every command that read memories before the fix: 425 bytes of nested JSON
(RecursionError), a time that overflows once converted to UTC (OverflowError), a nested manifest.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from compiler.commands.sync_cycle import import_and_compile
from compiler.core.clock import engram_time, format_time, parse_time
from compiler.core.errors import CorruptDataError
from compiler.core.json_input import load_json
from compiler.core.settings import Settings
from compiler.events.chunks import chunk_id, compress, encode_chunk
from compiler.events.manifest import ManifestEntry, manifest_bytes, parse_manifest, read_manifest
from compiler.events.store import read_vault_chunks
from compiler.memory.vault import VaultMemory, read_memories

DEEP = b"[" * 200_000 + b"]" * 200_000  # the probe: 425 bytes once gzip'd
LATE = "9999-12-31T23:59:59-01:00"  # past the last datetime once in UTC
EARLY = "0001-01-01T00:00:00+01:00"  # before the first one
GOOD = {"sync_id": "obs-good", "session_id": "s", "type": "manual", "title": "Good one", "content": "Kept",
        "project": "p", "scope": "project", "created_at": "2026-01-01 00:00:00", "updated_at": "2026-01-01 00:00:00"}


def plant(vault: Path, data: bytes, gzipped: bytes | None = None) -> str:
    """Writes a chunk named by its content and lists it in the manifest; returns its id."""
    cid = chunk_id(data)
    folder = vault / ".engram" / "chunks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{cid}.jsonl.gz").write_bytes(gzipped or compress(data))
    listed = read_manifest(vault / ".engram")
    (vault / ".engram" / "manifest.json").write_bytes(
        manifest_bytes([*listed, ManifestEntry(cid, "peer", "2026-01-01T00:00:00Z", 1, 1, 0)]))
    return cid


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def test_load_json_refuses_deep_nesting_as_a_value_error():
    with pytest.raises(ValueError, match="nested deeper than 100 levels"):
        load_json(DEEP)  # RecursionError inside json
    with pytest.raises(ValueError, match="nested deeper than 100 levels"):
        load_json("[" * 101 + "]" * 101)  # loads, but deeper than the fixed limit
    assert load_json("[" * 100 + "]" * 100) is not None
    assert load_json('{"a": [1, {"b": "[[[["}]}') == {"a": [1, {"b": "[[[["}]}
    with pytest.raises(ValueError):
        load_json("{not json")


@pytest.mark.parametrize("text", [LATE, EARLY])
def test_a_time_that_overflows_in_utc_is_a_value_error(text):
    with pytest.raises(ValueError, match="out of range once converted to UTC"):
        parse_time(text)
    assert engram_time(text) == text  # unparseable: left as given, as for any bad time


def test_the_first_and_last_utc_seconds_format_and_parse_back():
    for text in ("0001-01-01 00:00:00", "9999-12-31 23:59:59", "2026-11-30 12:00:00"):
        assert format_time(parse_time(text)) == text  # strftime's %Y wrote "1-01-01", which never parsed


def test_hostile_chunks_are_quarantined_naming_them_and_the_rest_imports(vault, fake_embedder):
    nested = plant(vault, DEEP, gzip.compress(DEEP))
    late = plant(vault, encode_chunk([], [], [{"id": "ev-late", "op": "save", "memory": "mem-late", "at": LATE,
                                               "seq": 1, "data": {"content": "x", "project": "p"}}]))
    early = plant(vault, encode_chunk([], [{**GOOD, "sync_id": "obs-early", "created_at": EARLY}]))
    deep_line = b"[" * 5000 + b"]" * 5000
    lines = plant(vault, json.dumps({**GOOD, "sync_id": "obs-lines"}).encode() + b"\n" + deep_line + b"\n")
    payload = plant(vault, json.dumps({"mutations": [{"entity": "observation", "entity_key": "obs-m", "op": "upsert",
                                                      "payload": deep_line.decode()}]}).encode())
    good = plant(vault, encode_chunk([], [GOOD]))
    result = import_and_compile(vault, Settings(), embedder=fake_embedder)
    messages = sorted(w["message"] for w in result["quarantined"])
    range_error = "is out of range once converted to UTC (years 1 to 9999)"
    assert messages == sorted([
        f"chunk {nested} quarantined: not JSON (nested deeper than 100 levels)",
        f"chunk {late}: engram_vault.events[0] quarantined: `at` '{LATE}' {range_error}",
        f"chunk {early}: observations[0] quarantined: created_at '{EARLY}' {range_error}",
        f"chunk {lines}: line 2 quarantined: not JSON (nested deeper than 100 levels)",
        f"chunk {payload}: mutations[0] quarantined: payload is not JSON"])
    assert good not in " ".join(messages)
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        assert set(read_memories(memories).state) == {"obs-good", "obs-lines"}


def test_a_deeply_nested_manifest_is_corrupt_data_naming_the_file(vault, fake_embedder):
    good = plant(vault, encode_chunk([], [GOOD]))
    (vault / ".engram" / "manifest.json").write_bytes(b'{"chunks": ' + DEEP + b"}")
    with pytest.raises(CorruptDataError, match=r"^\.engram/manifest\.json: not valid JSON \(nested deeper"):
        read_manifest(vault / ".engram")
    with pytest.raises(CorruptDataError, match="nested deeper than 100 levels"):
        parse_manifest(DEEP.decode(), "theirs")  # the merge driver's reader
    found = read_vault_chunks(vault / ".engram")
    assert found.readable() == [good]  # the chunks still import; the manifest is reported
    assert any(w.file == ".engram/manifest.json" and "manifest unreadable" in w.message and "nested deeper"
               in w.message for w in found.warnings)
    import_and_compile(vault, Settings(), embedder=fake_embedder)
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        assert set(read_memories(memories).state) == {"obs-good"}
