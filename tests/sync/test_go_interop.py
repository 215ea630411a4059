"""Chunks as the Go engram CLI writes and reads them, v1.x and v2.x (issue 12, items 1-3).

The records are built from the Go structs (internal/store/store.go in Gentleman-Programming/engram):

    type Observation struct {            // v2.x; v1.x had no SyncID
        ID int64 `json:"id"`; SyncID string `json:"sync_id"`; SessionID string `json:"session_id"`
        Type, Title, Content string; ToolName *string `json:"tool_name,omitempty"`
        Project *string `json:"project,omitempty"`; Scope string; TopicKey *string `json:"topic_key,omitempty"`
        RevisionCount, DuplicateCount int; LastSeenAt *string `json:"last_seen_at,omitempty"`
        CreatedAt, UpdatedAt string; DeletedAt *string `json:"deleted_at,omitempty"` }
    type ChunkData struct { Sessions []Session; Observations []Observation; Prompts []Prompt
        Mutations []SyncMutation `json:"mutations,omitempty"` }

and the Go reader's import (`Store.Import`) inserts every observation of a chunk as a NEW row
(`INSERT INTO observations ...`, AUTOINCREMENT ids, no unique key on sync_id): a sync_id stated
in two chunks becomes two memories on a Go machine. `go_import` below replays that rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.clock import parse_time
from compiler.core.settings import Settings
from compiler.events.chunks import compress, encode_chunk, go_json, gunzip_capped
from compiler.events.journal import MemoryEvent, append_events
from compiler.events.manifest import read_manifest
from compiler.events.replay import PEER_FLOOR, legacy_sync_id
from compiler.events.store import read_vault_chunks
from compiler.memory.fold import fold
from compiler.memory.model import archived
from compiler.sync.exchange import export_memories
from tests.events.test_chunks import GOLDEN, put_chunk

NOW = "2026-11-30 12:00:00"  # ten months after the golden chunk's records


def go_observation(row: int, title: str, content: str, *, sync_id: str | None, session: str = "s-go",
                   kind: str = "bugfix", project: str | None = "api", created: str = "2026-01-10 09:10:00",
                   updated: str | None = None, deleted: str | None = None) -> dict[str, Any]:
    """An observation record in the Go struct's field order (v1.x: `sync_id=None` leaves the field out)."""
    record: dict[str, Any] = {"id": row}
    if sync_id is not None:
        record["sync_id"] = sync_id
    record.update({"session_id": session, "type": kind, "title": title, "content": content})
    if project is not None:
        record["project"] = project
    record.update({"scope": "project", "revision_count": 1, "duplicate_count": 1, "created_at": created,
                   "updated_at": updated or created})
    if deleted:
        record["deleted_at"] = deleted
    return record


def go_chunk(observations: list[dict[str, Any]], session: str = "s-go") -> bytes:
    sessions = [{"id": session, "project": "api", "directory": "/home/dev/api", "started_at": "2026-01-10 09:00:00"}]
    return go_json({"sessions": sessions, "observations": observations, "prompts": None}).encode()


def go_import(vault: Path) -> list[dict[str, Any]]:
    """The Go reader's import over every chunk in the manifest: one row per observation record."""
    rows: list[dict[str, Any]] = []
    for entry in read_manifest(vault / ".engram"):
        path = vault / ".engram" / "chunks" / f"{entry.id}.jsonl.gz"
        chunk = json.loads(gunzip_capped(path.read_bytes()))
        rows += chunk.get("observations") or []
    return rows


def cli(vault: Path, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=[*args, "--vault", str(vault), "--json"],
                                env={"ENGRAM_NOW": NOW})
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


# -- item 1: Go memories stay recallable ---------------------------------------------------------

def test_go_memories_never_fade_below_the_floor_whatever_their_age(vault):
    put_chunk(vault, (GOLDEN / "engram-cli-chunk.json").read_bytes())
    state = fold(read_vault_chunks(vault / ".engram").events())
    jwt = state["obs-1a2b3c4d5e6f"]  # a bugfix saved ten months before NOW: its half-life is about 3 days
    assert jwt.floor == PEER_FLOOR and jwt.strength(parse_time(NOW)) == PEER_FLOOR
    assert "obs-1a2b3c4d5e6f" not in archived(state, parse_time(NOW))
    own = MemoryEvent("ev-own", "save", "mem-own", "2026-01-10 09:10:00",
                      {"content": "an old memory of ours", "project": "api", "category": "failure"}, 1)
    assert "mem-own" in archived(fold([own]), parse_time(NOW))  # our own memories still fade as before


@pytest.mark.integration
def test_a_go_chunk_of_old_dates_imports_and_recall_finds_it(vault):
    put_chunk(vault, (GOLDEN / "engram-cli-chunk.json").read_bytes())
    code, imported = cli(vault, "sync", "import")
    assert code == 0 and imported["memories_new"] == 3
    code, hits = cli(vault, "recall", "JWT clock skew", "--no-reinforce")
    assert code == 0 and [h["id"] for h in hits][:1] == ["obs-1a2b3c4d5e6f"]


# -- item 2: engram v1.x records (no sync_id) -----------------------------------------------------

def test_v1_records_without_sync_id_import_with_the_same_derived_id_on_every_machine(make_vault):
    v1 = go_chunk([go_observation(7, "Retry webhooks", "Stripe retries webhooks for 3 days", sync_id=None),
                   go_observation(8, "Pin Node", "Node 20 is pinned in .nvmrc", sync_id=None, kind="decision")])
    ids = []
    for machine in ("laptop", "server"):
        vault = make_vault({f"{machine}/Home.md": "# Home\n"}) / machine
        put_chunk(vault, v1)
        found = read_vault_chunks(vault / ".engram")
        assert not found.warnings  # nothing quarantined
        ids.append(sorted(fold(found.events())))
    assert ids[0] == ids[1] and len(ids[0]) == 2 and all(i.startswith("obs-") for i in ids[0])
    record = go_observation(7, "Retry webhooks", "Stripe retries webhooks for 3 days", sync_id=None)
    assert legacy_sync_id(record) in ids[0]
    assert legacy_sync_id({**record, "id": 99}) == legacy_sync_id(record)  # the row number is the machine's own
    assert legacy_sync_id({**record, "content": "other"}) != legacy_sync_id(record)


def test_v1_lines_variant_without_sync_id_imports(vault):
    line = json.dumps(go_observation(1, "One per line", "The older one-record-per-line chunk", sync_id=None))
    put_chunk(vault, compress((line + "\n").encode()))
    found = read_vault_chunks(vault / ".engram")
    assert not found.warnings and len(fold(found.events())) == 1


# -- item 3: a Go machine gets each memory once ---------------------------------------------------

def test_our_chunks_state_each_memory_once_so_a_go_reader_imports_it_once(vault):
    engram = vault / ".engram"
    save = MemoryEvent("ev-1", "save", "mem-a", "2026-11-01 10:00:00",
                       {"content": "Deploys run on Buildkite", "project": "web", "title": "Deploys"}, 1)
    append_events(engram, [save])
    first = export_memories(vault, Settings(), created_by="laptop")
    update = MemoryEvent("ev-2", "update", "mem-a", "2026-11-02 10:00:00", {"content": "Deploys run on GitHub"}, 2)
    other = MemoryEvent("ev-3", "save", "mem-b", "2026-11-02 11:00:00", {"content": "Staging is on Fly", "project": "web"}, 3)
    append_events(engram, [update, other])
    second = export_memories(vault, Settings(), created_by="laptop")
    assert first["chunk"] and second["chunk"] and first["chunk"] != second["chunk"]
    rows = go_import(vault)
    assert sorted(r["sync_id"] for r in rows) == ["mem-a", "mem-b"]  # once each, as Go inserts them
    # our own reader still gets the update (carried by the events), and every session a record names
    state = fold(read_vault_chunks(engram).events())
    assert state["mem-a"].content == "Deploys run on GitHub"
    for entry in read_manifest(engram):
        chunk = json.loads(gunzip_capped((engram / "chunks" / f"{entry.id}.jsonl.gz").read_bytes()))
        sessions = {s["id"] for s in chunk["sessions"] or []}
        assert {o["session_id"] for o in chunk["observations"] or []} <= sessions
        assert entry.memories == len(chunk["observations"] or [])


def test_a_chunk_with_only_changes_is_still_valid_for_go(vault):
    """Events-only chunk: `observations` null, which Go's json.Unmarshal takes as an empty slice."""
    data = encode_chunk([], [], [{"id": "ev-x", "op": "recall", "memory": "mem-a", "at": NOW, "data": {}, "seq": 1}])
    assert json.loads(data)["observations"] is None and json.loads(data)["sessions"] is None
