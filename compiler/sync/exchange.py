"""Memory sync between machines: export new events as a chunk, import chunks, and the whole git cycle.

    engram sync export   journal events no chunk holds yet → one new chunk + manifest entry
    engram sync import   chunks not seen yet → counted, quarantine reported; then compile
    engram sync          pull --rebase, import + compile, export, commit, push (one retry)

What is new is decided per event id (the ids every chunk file holds, read from the chunks
themselves), never by a timestamp watermark: events written before a pull are still exported.
The journal keeps exported events (the fold deduplicates by id), so no write is ever at risk.
Everything runs under the vault's writer lock, so a sync never overlaps a compile or another sync.
"""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time, parse_time
from compiler.core.files import atomic_write
from compiler.core.lock import writer_lock
from compiler.core.settings import Settings
from compiler.embed.embedder import Embedder
from compiler.events.chunks import CHUNKS_DIR, is_chunk_name, write_chunk
from compiler.events.journal import read_journal
from compiler.events.manifest import (
    MANIFEST,
    ManifestEntry,
    append_entries,
    parse_manifest,
)
from compiler.events.store import (
    ChunkRead,
    VaultChunks,
    pending_events,
    read_vault_chunks,
)
from compiler.memory.fold import fold
from compiler.sync.export import build_chunk, pending_redactions

IMPORTED = "cache/sync-imported.json"  # chunk ids already imported here (derived, disposable)


def sync_files(vault: Path) -> list[str]:
    """Returns the vault-relative files a sync commits: the manifest and every chunk file (by its name).

    Named one by one, so a temp file of an interrupted write never slips into a commit.
    """
    folder = vault / ".engram" / CHUNKS_DIR
    chunks = sorted(p.name for p in folder.iterdir() if is_chunk_name(p.name)) if folder.is_dir() else []
    return [f".engram/{MANIFEST}", *(f".engram/{CHUNKS_DIR}/{name}" for name in chunks)]


def sync_setting(settings: Settings, key: str, default: Any) -> Any:
    """Returns a sync setting from engram.toml: `[sync] key = ...` or top-level `sync_key = ...`."""
    table = settings.extra.get("sync")
    value = table.get(key) if isinstance(table, dict) and key in table else settings.extra.get(f"sync_{key}", default)
    if isinstance(default, bool):
        return value if isinstance(value, bool) else default
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value if isinstance(value, type(default)) and not isinstance(value, bool) else default


def machine_name(settings: Settings) -> str:
    """Returns who creates chunks here (`created_by`): the setting, else user@host."""
    named = sync_setting(settings, "created_by", "")
    if named:
        return named
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "engram"
    return f"{user}@{socket.gethostname().split('.')[0]}"


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- export ------------------------------------------------------------------------------------

def export_memories(vault: Path, settings: Settings, *, embedder: Embedder | None = None, created_by: str = "",
                    project: str = "", sessions: Sequence[Path] = (), created_at: datetime | None = None) -> dict[str, Any]:
    """Writes the journal events no chunk holds yet as one new chunk and lists it in the manifest.

    `sessions`: transcript files or folders whose mem_save calls are stored first (idempotent).
    `project`: export only that project's memories (and give bridged calls without one that project).
    Credentials are redacted from the chunk unless `[sync] redact = false` (compiler.sync.redact).
    Returns {"chunk": id or None, "events", "memories", "sessions", "pending", "adopted": [ids], "bridged",
    "redacted": {"count", "memories": {id: {kind: n}}}}.
    """
    root = vault.resolve()
    engram = root / ".engram"
    result: dict[str, Any] = {"chunk": None, "events": 0, "memories": 0, "sessions": 0, "adopted": [], "bridged": None,
                              "redacted": {"count": 0, "memories": {}}}
    with writer_lock(engram):
        if sessions:
            result["bridged"] = _bridge(root, settings, embedder, sessions, project)
        found = read_vault_chunks(engram)
        journal, _ = read_journal(engram)
        every = found.events() + journal
        state = fold(every)
        pending = pending_events(journal, found.event_ids())
        if project:
            pending = [e for e in pending if e.memory in state and state[e.memory].project == project]
        result["pending"] = len(pending)
        entries = [_adopted_entry(c) for c in found.chunks if c.ok and c.id in set(found.unlisted)]
        if pending:
            data, counts = build_chunk(pending, state, every, redact=sync_setting(settings, "redact", True),
                                       stated=found.stated())
            cid = write_chunk(engram, data)
            entries.append(ManifestEntry(cid, created_by or machine_name(settings),
                                         _rfc3339(created_at or datetime.now(timezone.utc)),
                                         counts["sessions"], counts["memories"], 0))
            result.update(chunk=cid, **counts)
            _remember_imported(engram, _imported(engram) | {cid})  # our own chunk is nothing to import
        added = append_entries(engram, entries)
        result["adopted"] = [i for i in added if i != result["chunk"]]
    return result


def _bridge(root: Path, settings: Settings, embedder: Embedder | None, sessions: Sequence[Path],
            project: str) -> dict[str, Any]:
    """Stores the mem_save calls of transcripts (already-known calls are skipped); returns the counts."""
    from compiler.memory.vault import VaultMemory, read_memories
    from compiler.memory.write import write_memories
    from compiler.sync.bridges import read_transcripts

    items, report = read_transcripts(list(sessions), project)
    actions: dict[str, int] = {}
    with VaultMemory(root, settings, embedder=embedder) as vault:
        # A call stored before is known by its source id (session:call) whatever project it got then.
        known = {source for obs in read_memories(vault).state.values() for source in obs.sources}
        fresh = [item for item in items if item.source_id not in known]
        if fresh:
            actions = write_memories(vault, fresh)["actions"]
    if len(items) > len(fresh):
        actions["known"] = actions.get("known", 0) + len(items) - len(fresh)
    return {**report.to_dict(), "actions": actions}


def _adopted_entry(chunk: ChunkRead) -> ManifestEntry:
    """A manifest entry for a chunk file nobody listed (an export killed before its manifest write)."""
    times = [e.at for e in chunk.replay.events]
    at = _rfc3339(parse_time(max(times))) if times else ""
    return ManifestEntry(chunk.id, "engram-vault (adopted)", at, chunk.replay.sessions, chunk.replay.observations,
                         chunk.replay.prompts)


# -- import ------------------------------------------------------------------------------------

def import_chunks(vault: Path) -> dict[str, Any]:
    """Takes in the chunks not imported here yet; reports what they bring and what was quarantined.

    Chunk events join every memory read as soon as their file is on disk (`memory.snapshot.read_events`);
    this records which chunks were seen and counts what is new (deduplicated by chunk id and event
    id). compiler.commands.sync_cycle.import_and_compile then compiles so the pages show it.
    Returns the counts and the quarantine messages.
    """
    root = vault.resolve()
    engram = root / ".engram"
    with writer_lock(engram):
        found = read_vault_chunks(engram)
        known = _imported(engram)
        fresh = [c for c in found.chunks if c.ok and c.id not in known]
        journal, _ = read_journal(engram)
        old = [e for c in found.chunks if c.ok and c.id in known for e in c.replay.events] + journal
        old_ids, old_saved = {e.id for e in old}, {e.memory for e in old if e.op == "save"}
        new_events = {e.id: e for c in fresh for e in c.replay.events if e.id not in old_ids}.values()
        quarantined = [w for w in found.warnings if "quarantined" in w.message]
        result: dict[str, Any] = {
            "chunks_new": [c.id for c in fresh], "chunks_known": len(found.chunks) - len(fresh),
            "events_new": len(new_events),
            "memories_new": len({e.memory for e in new_events if e.op == "save"} - old_saved),
            "deletes_new": sum(1 for e in new_events if e.op == "delete"),
            "quarantined": [w.to_dict() for w in quarantined], "missing": found.missing, "unlisted": found.unlisted,
            "prompts_skipped": sum(c.replay.prompts for c in fresh), "compile": None}
        if fresh:
            _remember_imported(engram, known | {c.id for c in fresh})
    return result


def _imported(engram: Path) -> set[str]:
    try:
        data = json.loads((engram / IMPORTED).read_text(encoding="utf-8"))
        return {str(i) for i in data.get("chunks", [])} if isinstance(data, dict) else set()
    except (OSError, ValueError):
        return set()


def _remember_imported(engram: Path, ids: set[str]) -> None:
    atomic_write(engram / IMPORTED, json.dumps({"chunks": sorted(ids)}, indent=0).encode())


# -- status ------------------------------------------------------------------------------------

def sync_status(vault: Path, settings: Settings, max_failures: int | None = None) -> dict[str, Any]:
    """Returns chunks (local, listed, remote, to import), pending export, last success/error, failures, health."""
    from compiler.core.errors import GitError
    from compiler.sync.git import current_branch, open_repo, remote_manifest
    from compiler.sync.monitor import read_status

    root = vault.resolve()
    engram = root / ".engram"
    found: VaultChunks = read_vault_chunks(engram)
    journal, _ = read_journal(engram)
    pending = pending_events(journal, found.event_ids())
    redact = sync_setting(settings, "redact", True)
    # What the next export will redact: shown before anything is committed.
    redacted = pending_redactions(pending, fold(found.events() + journal)) if redact and pending else {
        "count": 0, "memories": {}}
    remote: dict[str, Any] | None = None
    try:
        repo = open_repo(root)
        name = sync_setting(settings, "remote", "origin")
        branch = sync_setting(settings, "branch", "") or current_branch(repo)
        text = remote_manifest(repo, name, branch, repo.rel(f".engram/{MANIFEST}"))
        ids = [e.id for e in parse_manifest(text)] if text is not None else None
        local = {c.id for c in found.chunks}
        remote = {"ref": f"{name}/{branch}", "chunks": len(ids) if ids is not None else None,
                  "not_pulled": sorted(set(ids or []) - local)}
    except (GitError, ValueError):
        remote = None
    status = read_status(engram)
    limit = max_failures if max_failures is not None else sync_setting(settings, "max_failures", 3)
    failures = int(status.get("consecutive_failures") or 0)
    return {
        "chunks": {"local": len(found.chunks), "listed": len(set(found.listed)),
                   "to_import": len([c for c in found.chunks if c.ok and c.id not in _imported(engram)]),
                   "quarantined": [c.id for c in found.chunks if not c.ok], "missing": found.missing,
                   "unlisted": found.unlisted},
        "remote": remote,
        "pending_export": {"events": len(pending), "memories": len({e.memory for e in pending}), "redacted": redacted},
        "redact": redact,
        "last_success": status.get("last_success"), "last_error": status.get("last_error"),
        "last_export": status.get("last_export"), "running": status.get("running"),
        "consecutive_failures": failures, "max_failures": limit, "healthy": failures < limit,
        "warnings": [w.to_dict() for w in found.warnings],
    }


def format_when(text: str | None) -> str:
    """Returns a status timestamp for people ("never" when unset)."""
    if not text:
        return "never"
    try:
        return format_time(parse_time(text)) + " UTC"
    except ValueError:
        return text
