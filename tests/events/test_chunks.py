"""Chunks and the manifest: the engram CLI's bytes, both reader variants, quarantine of bad input.

Golden files under tests/golden/ pin the bytes. `engram-cli-chunk.json` is a chunk as the engram
CLI's Go code writes it (json.Marshal of its ExportData structs: struct key order, omitted unset
pointers, `\\u003c`-style escapes), written by hand from those struct definitions: no Go toolchain
runs here. Set ENGRAM_UPDATE_GOLDEN=1 to rewrite the files our own writer produces.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.sync_cycle import import_and_compile
from compiler.core.errors import CorruptDataError
from compiler.core.settings import Settings
from compiler.events.chunks import (
    chunk_id,
    compress,
    encode_chunk,
    go_json,
    gunzip_capped,
    parse_chunk,
    write_chunk,
)
from compiler.events.journal import MemoryEvent, append_events
from compiler.events.manifest import (
    ManifestEntry,
    manifest_bytes,
    merge_files,
    parse_manifest,
    union,
    write_manifest,
)
from compiler.events.replay import record_events
from compiler.events.store import read_chunk_events, read_vault_chunks
from compiler.memory.input import MemoryInput
from compiler.memory.fold import fold
from compiler.memory.edits import store_new
from compiler.memory.vault import VaultMemory, read_memories
from compiler.sync.exchange import export_memories
from compiler.sync.export import build_chunk, observation_record, session_records

GOLDEN = Path(__file__).parents[1] / "golden"
UPDATE = os.environ.get("ENGRAM_UPDATE_GOLDEN") == "1"

EVENTS = [
    MemoryEvent("ev-golden-0001", "save", "mem-golden-a", "2026-11-30 12:00:00",
                {"content": "Deploys run <on> Buildkite & fail fast\nsecond line — ünïcode", "title": "Deploys run on Buildkite",
                 "project": "web", "category": "strategy", "importance": 0.7, "type": "decision", "kind": "memory"}, 1),
    MemoryEvent("ev-golden-0002", "save", "mem-golden-b", "2026-11-30 12:01:00",
                {"content": "Payments use Stripe webhooks", "title": "Stripe webhooks", "project": "payments",
                 "category": "fact", "importance": 0.5, "type": "note", "kind": "memory", "session_id": "sess-42",
                 "topic_key": "payments/webhooks"}, 2),
    MemoryEvent("ev-golden-0003", "recall", "mem-golden-a", "2026-11-30 12:05:00", {}, 3),
    MemoryEvent("ev-golden-0004", "update", "mem-golden-b", "2026-11-30 12:06:00",
                {"content": "Payments use Stripe webhooks with retries", "source": "update"}, 4),
    MemoryEvent("ev-golden-0005", "delete", "mem-golden-a", "2026-11-30 12:07:00", {}, 5),
]


def golden(name: str, produced: bytes) -> bytes:
    path = GOLDEN / name
    if UPDATE:
        path.write_bytes(produced)
    if not path.exists():
        pytest.fail(f"missing golden file {path} (ENGRAM_UPDATE_GOLDEN=1 writes it)")
    return path.read_bytes()


def gz(records: list[str] | str) -> bytes:
    text = records if isinstance(records, str) else "\n".join(records) + "\n"
    return compress(text.encode())


def put_chunk(vault: Path, data: bytes, name: str | None = None, listed: bool = True) -> str:
    """Writes compressed `data` as a chunk (named by its content unless `name`), listed in the manifest."""
    cid = name or chunk_id(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    (vault / ".engram" / "chunks").mkdir(parents=True, exist_ok=True)
    (vault / ".engram" / "chunks" / f"{cid}.jsonl.gz").write_bytes(data if data[:2] == b"\x1f\x8b" else compress(data))
    if listed:
        entries = parse_manifest((vault / ".engram/manifest.json").read_text()) if (vault / ".engram/manifest.json").exists() else []
        write_manifest(vault / ".engram", [*entries, ManifestEntry(cid, "test", "2026-01-01T00:00:00Z", 1, 1, 0)])
    return cid


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def open_memory(vault: Path, embedder) -> VaultMemory:
    return VaultMemory(vault, Settings(), embedder=embedder)


# -- writer: the bytes --------------------------------------------------------------------------

def test_go_json_escapes_like_go():
    assert go_json({"b": "<a href='x'>&</a>", "a": "line\u2028sep\u2029"}) == \
        '{"b":"\\u003ca href=\'x\'\\u003e\\u0026\\u003c/a\\u003e","a":"line\\u2028sep\\u2029"}'
    assert go_json(["\x00\x01\b\f\n\r\t\x7f", "ünï €", "\ud800"]) == '["\\u0000\\u0001\\b\\f\\n\\r\\t\x7f","ünï €","\\ufffd"]'
    assert go_json({"chunks": []}, indent=2) == '{\n  "chunks": []\n}'


def test_go_json_reproduces_a_chunk_the_engram_cli_wrote():
    written = (GOLDEN / "engram-cli-chunk.json").read_bytes()
    document = json.loads(written)  # dicts keep the file's key order: Go's struct order
    assert go_json(document).encode() == written
    # our records use the Go structs' key order (same optional fields present → same key list)
    go_obs = document["observations"][0]
    ours = observation_record(fold(record_events(go_obs))[go_obs["sync_id"]], 1, 2)
    assert [k for k in ours if k != "tool_name"] == [k for k in go_obs if k in ours]
    assert list(session_records([ours])[0]) == list(document["sessions"][1])


def test_export_chunk_bytes_match_the_golden_files():
    data, counts = build_chunk(EVENTS, fold(EVENTS), EVENTS)
    assert counts == {"events": 5, "memories": 2, "sessions": 2, "redacted": {"count": 0, "memories": {}}}
    assert data == golden("chunk-export.json", data)
    packed = compress(data)
    assert packed == golden(f"{chunk_id(data)}.jsonl.gz", packed)
    # the header Go's gzip.NewWriter writes: magic, deflate, no flags, mtime 0, xfl 0, OS 255
    assert packed[:10] == bytes.fromhex("1f8b0800000000000" + "0ff")
    assert gzip.decompress(packed) == data
    assert chunk_id(data) == hashlib.sha256(data).hexdigest()[:8]


def test_export_chunk_carries_the_engram_fields_and_every_session():
    document = json.loads(build_chunk(EVENTS, fold(EVENTS), EVENTS)[0])
    assert list(document) == ["sessions", "observations", "prompts", "engram_vault"]
    assert document["prompts"] is None
    first, second = document["observations"]
    assert list(first) == ["id", "sync_id", "session_id", "type", "title", "content", "project", "scope",
                           "revision_count", "duplicate_count", "last_seen_at", "created_at", "updated_at", "deleted_at"]
    assert first["deleted_at"] == "2026-11-30 12:07:00" and second["revision_count"] == 2
    assert {o["session_id"] for o in document["observations"]} == {s["id"] for s in document["sessions"]}
    assert [e["id"] for e in document["engram_vault"]["events"]] == [e.id for e in EVENTS]


def test_manifest_bytes_match_go_marshal_indent():
    entries = [ManifestEntry("b7d2e4f1", "laptop", "2026-11-30T12:00:00Z", 2, 5, 0),
               ManifestEntry("a3f8c1d2", "server", "2026-11-29T08:00:00Z", 1, 1, 0)]
    expected = (GOLDEN / "manifest.json").read_bytes()
    assert manifest_bytes(entries) == expected  # sorted by created_at, no trailing newline, 2-space indent
    assert [e.id for e in parse_manifest(expected.decode())] == ["a3f8c1d2", "b7d2e4f1"]
    assert parse_manifest('{"version": 1, "chunks": null}') == []


# -- reader: both variants ------------------------------------------------------------------------

def test_reads_the_engram_cli_chunk_and_synthesises_events(vault):
    cid = put_chunk(vault, (GOLDEN / "engram-cli-chunk.json").read_bytes())
    found = read_vault_chunks(vault / ".engram")
    assert [c.id for c in found.chunks] == [cid] == ["5cb9a2fc"] and not found.warnings
    replay = found.chunks[0].replay
    assert (replay.observations, replay.sessions, replay.prompts) == (3, 2, 1)
    state = fold(found.events())
    jwt = state["obs-1a2b3c4d5e6f"]
    assert jwt.content.startswith("Tokens failed the <exp> check & a 30 s skew") and jwt.category == "failure"
    assert jwt.created_at == "2026-01-10 09:10:00" and jwt.updated_at == "2026-01-10 09:40:00"
    assert not state["obs-9f8e7d6c5b4a"].live  # deleted_at → tombstone
    assert state["obs-00aa11bb22cc"].project == "default" and state["obs-00aa11bb22cc"].scope == "personal"
    assert fold(found.events()[::-1]) == state  # deterministic whatever the order


def test_reads_null_lists_and_the_one_observation_per_line_variant(vault):
    record = {"sync_id": "obs-line-1", "session_id": "s", "type": "manual", "title": "Line one",
              "content": "First line record", "project": "p", "scope": "project", "created_at": "2026-01-01 00:00:00",
              "updated_at": "2026-01-01 00:00:00"}
    empty = put_chunk(vault, b'{"sessions":null,"observations":null,"prompts":null}')
    lines = put_chunk(vault, gz([json.dumps({"id": "s", "project": "p", "directory": "/x", "started_at": "2026-01-01 00:00:00"}),
                                 json.dumps(record), json.dumps({**record, "sync_id": "obs-line-2", "title": "Line two"})]))
    found = read_vault_chunks(vault / ".engram")
    assert {c.id: c.ok for c in found.chunks} == {empty: True, lines: True} and not found.warnings
    assert set(fold(found.events())) == {"obs-line-1", "obs-line-2"}


def test_own_chunks_replay_the_exact_events(vault, fake_embedder):
    append_events(vault / ".engram", EVENTS)
    exported = export_memories(vault, Settings(), created_by="laptop")
    found = read_vault_chunks(vault / ".engram")
    assert exported["chunk"] == found.chunks[0].id and found.chunks[0].replay.synthesised == 0
    assert [e.to_dict() for e in found.events()] == [e.to_dict() for e in EVENTS]


# -- quarantine ---------------------------------------------------------------------------------------

def test_bad_input_is_quarantined_naming_the_chunk_and_the_rest_imports(vault, fake_embedder, tmp_path):
    good = {"sync_id": "obs-good", "session_id": "s", "type": "manual", "title": "Good one", "content": "Kept",
            "project": "p", "scope": "project", "created_at": "2026-01-01 00:00:00", "updated_at": "2026-01-01 00:00:00"}
    hostile = [{**good, "sync_id": "obs-h1", "project": "../x"}, {**good, "sync_id": "obs-h2", "title": "/etc/passwd"},
               {**good, "sync_id": "obs-h3", "project": "p\x00q"}, {**good, "sync_id": "../../evil"},
               {**good, "sync_id": "obs-h5", "project": "C:\\Windows"}]
    mixed = put_chunk(vault, gz([json.dumps(good), "[1, 2]", "not json at all", *map(json.dumps, hostile)]))
    raw = json.dumps({"observations": [good]}).encode()
    truncated = put_chunk(vault, compress(raw)[:-12], name="0badbeef")
    not_json = put_chunk(vault, compress(b"this is not json {"))
    wrong_id = put_chunk(vault, compress(raw), name="12345678")
    bomb = put_chunk(vault, compress(b'{"observations":[' + b" " * (65 * 1024 * 1024) + b"]}"))
    bad_event = put_chunk(vault, encode_chunk([], [], [{"id": "ev-x", "op": "save", "memory": "mem-x",
                                                         "at": "2026-01-01 00:00:00", "data": {"content": "x",
                                                         "project": "p", "importance": "high"}}]))
    result = import_and_compile(vault, Settings(), embedder=fake_embedder)
    messages = {w["message"] for w in result["quarantined"]}

    def about(cid: str) -> list[str]:
        return [m for m in messages if m.startswith(f"chunk {cid}")]

    assert len(about(mixed)) == 7 and any("line 2" in m and "not an object" in m for m in about(mixed))
    assert any("line 3" in m and "not JSON" in m for m in about(mixed))
    assert any("'../x' looks like a file path" in m for m in about(mixed))
    assert about(truncated) == [f"chunk {truncated} quarantined: truncated gzip (the file ends mid-stream)"]
    assert "not JSON" in about(not_json)[0] and "hashes to" in about(wrong_id)[0]
    assert "gzip bomb" in about(bomb)[0] and "importance" in about(bad_event)[0]
    with open_memory(vault, fake_embedder) as memories:
        assert set(read_memories(memories).state) == {"obs-good"}  # the rest of the chunk still imports
    outside = {p for p in tmp_path.rglob("*") if not p.is_relative_to(vault)}
    assert outside == set()  # nothing written outside the vault
    assert not list(vault.rglob("passwd*")) and not (vault.parent / "x").exists()


def test_gunzip_cap_and_truncation():
    with pytest.raises(CorruptDataError, match="gzip bomb"):
        gunzip_capped(compress(b"0" * 5000), cap=1000)
    with pytest.raises(CorruptDataError, match="truncated"):
        gunzip_capped(compress(b"0" * 5000)[:15])
    with pytest.raises(CorruptDataError, match="not a gzip"):
        gunzip_capped(b"plain text")
    assert gunzip_capped(compress(b"ab") + compress(b"cd")) == b"abcd"  # multi-member, as Go reads it
    with pytest.raises(CorruptDataError):
        parse_chunk(b"[1, 2, 3]")


def test_tombstones_win_over_older_upserts_in_any_order(vault, fake_embedder):
    base = {"sync_id": "obs-t", "session_id": "s", "type": "manual", "title": "Temp", "project": "p",
            "scope": "project", "created_at": "2026-01-01 00:00:00"}
    older = {**base, "content": "old text", "updated_at": "2026-01-02 00:00:00"}
    deleted = {**base, "content": "newer text", "updated_at": "2026-01-03 00:00:00", "deleted_at": "2026-01-03 00:00:00"}
    events_a = [e for r in (older,) for e in record_events(r)]
    events_b = [e for r in (deleted,) for e in record_events(r)]
    for order in (events_a + events_b, events_b + events_a):
        assert not fold(order)["obs-t"].live
    put_chunk(vault, encode_chunk([], [deleted]))
    put_chunk(vault, encode_chunk([], [older]))
    import_and_compile(vault, Settings(), embedder=fake_embedder)
    with open_memory(vault, fake_embedder) as memories:
        assert not read_memories(memories).state["obs-t"].live and "obs-t" not in read_memories(memories).live


# -- manifest --------------------------------------------------------------------------------------

def test_manifest_union_keeps_both_appends_and_deliberate_removals():
    a, b, c, d = (ManifestEntry(i, "m", f"2026-01-0{n}T00:00:00Z") for n, i in enumerate(
        ("aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"), start=1))
    assert [e.id for e in union([a, b], [a, b, c], [a, b, d])] == [a.id, b.id, c.id, d.id]
    assert [e.id for e in union([a, b], [a, c], [a, b, d])] == [a.id, c.id, d.id]  # b removed on purpose
    assert union([], [a], [a]) == [a]


def test_merge_manifest_driver_command(tmp_path):
    entries = [ManifestEntry(f"{n}" * 8, "m", f"2026-01-0{n}T00:00:00Z") for n in range(1, 4)]
    for name, chosen in (("base", entries[:1]), ("ours", entries[:2]), ("theirs", [entries[0], entries[2]])):
        (tmp_path / name).write_bytes(manifest_bytes(chosen))
    result = CliRunner().invoke(main, catch_exceptions=False, args=["merge-manifest", *(str(tmp_path / n) for n in ("base", "ours", "theirs"))])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ours").read_bytes() == manifest_bytes(entries)
    (tmp_path / "theirs").write_text("<<<<<<< not json")
    assert CliRunner().invoke(main, catch_exceptions=False, args=["merge-manifest", *(str(tmp_path / n) for n in ("base", "ours", "theirs"))]).exit_code == 1
    merge_files(tmp_path / "none", tmp_path / "ours", tmp_path / "ours")  # a missing base is an empty one


def test_listed_but_missing_and_unlisted_chunks_are_reported_and_adopted(vault, fake_embedder):
    write_manifest(vault / ".engram", [ManifestEntry("deadbeef", "server", "2026-01-01T00:00:00Z", 1, 1, 0)])
    with open_memory(vault, fake_embedder) as memories:
        store_new(memories, MemoryInput("An exported memory that lost its manifest entry", project="p"))
    export_memories(vault, Settings())
    (vault / ".engram/manifest.json").write_bytes(manifest_bytes([ManifestEntry("deadbeef", "server",
                                                                                 "2026-01-01T00:00:00Z", 1, 1, 0)]))
    found = read_vault_chunks(vault / ".engram")
    assert found.missing == ["deadbeef"] and len(found.unlisted) == 1
    assert any("listed but its file is missing" in w.message for w in found.warnings)
    assert any("not listed" in w.message for w in found.warnings)
    with open_memory(vault, fake_embedder) as memories:
        assert len(read_memories(memories).state) == 1  # an unlisted chunk still imports
    again = export_memories(vault, Settings())
    assert again["chunk"] is None and again["adopted"] == found.unlisted
    assert read_vault_chunks(vault / ".engram").unlisted == []


# -- export: per event, idempotent --------------------------------------------------------------

def test_export_is_per_event_not_a_timestamp_watermark(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        early = store_new(memories, MemoryInput("Written here before pulling the newer chunk", project="p"))["id"]
    later = {"sync_id": "obs-from-elsewhere", "session_id": "s", "type": "manual", "title": "Later",
             "content": "Made on another machine, later", "project": "p", "scope": "project",
             "created_at": "2099-01-01 00:00:00", "updated_at": "2099-01-01 00:00:00"}
    put_chunk(vault, encode_chunk([], [later]))
    first = export_memories(vault, Settings())
    assert first["memories"] == 1 and first["events"] == 1
    exported = json.loads(gunzip_capped((vault / f".engram/chunks/{first['chunk']}.jsonl.gz").read_bytes()))
    assert [o["sync_id"] for o in exported["observations"]] == [early]
    assert export_memories(vault, Settings())["chunk"] is None  # exporting twice exports nothing new


def test_write_chunk_is_atomic_and_idempotent(vault):
    data = encode_chunk([], [], [EVENTS[0].to_dict()])
    assert write_chunk(vault / ".engram", data) == write_chunk(vault / ".engram", data) == chunk_id(data)
    assert [p.name for p in (vault / ".engram/chunks").iterdir()] == [f"{chunk_id(data)}.jsonl.gz"]


def test_unchanged_chunks_hand_every_read_the_same_events_uncopied(vault):
    """Every memory read asks for the chunks' events: a copy of a synced vault's events per read
    made every write O(store)."""
    put_chunk(vault, encode_chunk([], [], [e.to_dict() for e in EVENTS]))
    first, _ = read_chunk_events(vault / ".engram")
    again, _ = read_chunk_events(vault / ".engram")
    assert [e.id for e in first] == [e.id for e in EVENTS] and again is first
