"""Transcript bridges: mem_save calls in OpenClaw JSONL, OpenClaw SQLite and Claude Code transcripts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from compiler.core.settings import Settings
from compiler.events.store import read_vault_chunks
from compiler.memory.fold import fold
from compiler.memory.vault import VaultMemory, read_memories
from compiler.memory.write import memory_id_for
from compiler.sync.bridges import read_transcripts
from compiler.sync.exchange import export_memories


def openclaw_lines(session: str) -> list[dict]:
    return [
        {"type": "session", "version": 3, "id": session, "timestamp": "2026-02-06T07:49:00.000Z", "cwd": "/srv/agent"},
        {"type": "message", "id": "m1", "timestamp": "2026-02-06T07:49:03.491Z",
         "message": {"role": "assistant", "content": [
             {"type": "text", "text": "Saving that."},
             {"type": "toolCall", "id": "call_1", "name": "engram_mem_save",
              "arguments": {"title": "Webhook retries", "content": "Stripe webhooks retry for 3 days", "project": "payments",
                            "type": "decision"}},
             {"type": "toolCall", "id": "call_2", "name": "mem_save",
              "arguments": json.dumps({"title": "Deploy window", "content": "Deploys stop on Fridays after 3pm"})},
             {"type": "toolCall", "id": "call_3", "name": "engram_mem_save", "arguments": {"title": "No content"}},
             {"type": "toolCall", "id": "call_4", "name": "read_file", "arguments": {"path": "/etc/hosts"}}]}},
        {"type": "message", "id": "m2", "message": {"role": "toolResult", "toolCallId": "call_1", "content": []}},
    ]


def claude_lines(session: str) -> list[dict]:
    block = {"type": "tool_use", "id": "toolu_01", "name": "mcp__engram__mem_save",
             "input": {"title": "Tests need Docker", "content": "Integration tests need a running Docker daemon",
                       "project": "api", "topic_key": "testing/docker"}}
    line = {"type": "assistant", "sessionId": session, "timestamp": "2026-03-01T10:00:00Z",
            "message": {"id": "msg_1", "role": "assistant", "content": [block]}}
    empty = {**line, "message": {"id": "msg_2", "content": [{**block, "id": "toolu_02", "input": {"content": "x"}}]}}
    return [line, line, {**line, "uuid": "streamed-again"}, empty, {"type": "user", "sessionId": session}]


def write_jsonl(path: Path, lines: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return path


def write_openclaw_db(path: Path, session: str) -> Path:
    """An OpenClaw agent store: the transcript_events table of its schema, one event per row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sessions (session_id TEXT NOT NULL PRIMARY KEY, session_key TEXT NOT NULL)")
    db.execute("CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT NOT NULL,"
               " created_at INTEGER NOT NULL, PRIMARY KEY (session_id, seq))")
    for seq, event in enumerate(openclaw_lines(session)[1:], start=1):
        db.execute("INSERT INTO transcript_events VALUES (?, ?, ?, ?)", (session, seq, json.dumps(event), 1770364143489))
    db.commit()
    db.close()
    return path


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def test_openclaw_jsonl_calls_become_memories(tmp_path):
    path = write_jsonl(tmp_path / "sessions" / "ignored-name.jsonl", [*openclaw_lines("sess-oc-1"), "not json", "[1]"])
    items, report = read_transcripts([tmp_path / "sessions"], project="agents")
    assert [(i.title, i.project, i.source_id) for i in items] == [
        ("Webhook retries", "payments", "sess-oc-1:call_1"), ("Deploy window", "agents", "sess-oc-1:call_2")]
    assert items[0].type == "decision" and items[0].created_at == "2026-02-06 07:49:03"
    assert items[0].session_id == "sess-oc-1"
    assert (report.files, report.calls, report.skipped_empty, report.bad_lines) == (1, 3, 1, 2)
    assert path.exists()


def test_claude_code_blocks_repeat_and_are_deduplicated_on_the_tool_call_id(tmp_path):
    write_jsonl(tmp_path / "project" / "abc.jsonl", claude_lines("cc-session-9"))
    items, report = read_transcripts([tmp_path / "project" / "abc.jsonl"])
    assert [(i.title, i.source_id, i.topic_key) for i in items] == [
        ("Tests need Docker", "cc-session-9:toolu_01", "testing/docker")]
    assert (report.calls, report.repeated, report.skipped_empty) == (2, 2, 1)


def test_openclaw_sqlite_store(tmp_path):
    write_openclaw_db(tmp_path / "agent.sqlite", "sess-db-1")
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()  # not a transcript store
    items, report = read_transcripts([tmp_path])
    assert [i.source_id for i in items] == ["sess-db-1:call_1", "sess-db-1:call_2"]
    assert report.files == 2 and report.skipped_empty == 1 and not report.unreadable


def test_export_from_sessions_is_idempotent_with_sync_ids_from_session_and_call(vault, tmp_path, fake_embedder):
    sessions = tmp_path / "transcripts"
    write_jsonl(sessions / "oc.jsonl", openclaw_lines("sess-oc-1"))
    write_jsonl(sessions / "cc.jsonl", claude_lines("cc-session-9"))
    write_openclaw_db(sessions / "agent.sqlite", "sess-oc-1")  # the same session, moved to the SQLite store
    first = export_memories(vault, Settings(), embedder=fake_embedder, sessions=[sessions], project="agents")
    bridged = first["bridged"]
    assert (bridged["calls"], bridged["repeated"], bridged["skipped_empty"]) == (5, 5, 2)
    assert bridged["actions"] == {"new": 3}
    assert first["chunk"] and first["memories"] == 1  # --project: only "agents" (calls naming none go there)
    rest = export_memories(vault, Settings(), embedder=fake_embedder, sessions=[sessions])
    assert rest["chunk"] and rest["memories"] == 2 and rest["bridged"]["actions"] == {"known": 3}
    again = export_memories(vault, Settings(), embedder=fake_embedder, sessions=[sessions])
    assert again["chunk"] is None and again["events"] == 0  # exporting twice exports nothing new
    state = fold(read_vault_chunks(vault / ".engram").events())
    assert memory_id_for("payments", "sess-oc-1:call_1") in state
    assert memory_id_for("api", "cc-session-9:toolu_01") in state
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        state = read_memories(memories).state
        assert sum(1 for o in state.values() if o.live) == 3  # (old transcripts: archived by decay)


def test_missing_paths_are_reported(tmp_path):
    items, report = read_transcripts([tmp_path / "nope"])
    assert items == [] and report.unreadable == [f"{tmp_path / 'nope'}: no such file or folder"]
