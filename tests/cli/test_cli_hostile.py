"""Issue 11, items 1 and 7 through the CLI: a hostile chunk or manifest from a peer, and bad local
input, are one line each (a quarantine, a skipped line, a usage error), never a traceback.

Before the fix every command below died with RecursionError or OverflowError. Uses the real model.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from compiler.cli.main import main
from compiler.events.chunks import chunk_id, compress, encode_chunk
from compiler.events.manifest import ManifestEntry, manifest_bytes

pytestmark = pytest.mark.integration
NOW = {"ENGRAM_NOW": "2026-11-30 12:00:00"}  # pins the memory clock of every command
DEEP = b"[" * 200_000 + b"]" * 200_000
LATE = "9999-12-31T23:59:59-01:00"
EARLY = "0001-01-01T00:00:00+01:00"
RANGE = "is out of range once converted to UTC (years 1 to 9999)"
RECORD = {"sync_id": "obs-peer", "session_id": "s", "type": "manual", "title": "Deploys", "project": "ops",
          "content": "Deploys run on Buildkite", "scope": "project", "created_at": "2026-11-29 12:00:00"}  # a day before NOW: live
# what each command answers with hostile data around: exit code (check exits 1: it reports problems)
COMMANDS = [(["sync", "import"], 0), (["sync", "status"], 0), (["memory", "stats"], 0),
            (["recall", "how do deploys run"], 0), (["compile"], 0), (["check"], 1)]


def run(vault: Path, *args: str) -> Result:
    return CliRunner(env=NOW).invoke(main, catch_exceptions=False, args=[*args, "--vault", str(vault)])


def plant(vault: Path, chunks: list[tuple[bytes, bytes]]) -> list[str]:
    """Writes each (uncompressed, gzip) chunk named by its content, lists them all; returns their ids."""
    folder = vault / ".engram" / "chunks"
    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    for data, gzipped in chunks:
        ids.append(chunk_id(data))
        (folder / f"{ids[-1]}.jsonl.gz").write_bytes(gzipped)
    (vault / ".engram" / "manifest.json").write_bytes(
        manifest_bytes([ManifestEntry(i, "peer", "2026-01-01T00:00:00Z", 1, 1, 0) for i in ids]))
    return ids


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})


def test_hostile_chunks_are_quarantined_by_name_and_every_command_keeps_working(vault):
    late = encode_chunk([], [], [{"id": "ev-late", "op": "save", "memory": "mem-late", "at": LATE, "seq": 1,
                                  "data": {"content": "x", "project": "p"}}])
    early = encode_chunk([], [{**RECORD, "sync_id": "obs-early", "created_at": EARLY}])
    good = encode_chunk([], [RECORD])
    nested, late_id, early_id, _ = plant(vault, [(DEEP, gzip.compress(DEEP)), (late, compress(late)),
                                                 (early, compress(early)), (good, compress(good))])
    assert len(gzip.compress(DEEP)) < 1000  # the probe: 425 bytes
    for args, code in COMMANDS:
        result = run(vault, *args)
        assert result.exit_code == code, (args, result.output)
        if args[0] in ("sync", "compile", "check") and args != ["sync", "status"]:
            assert f"chunk {nested} quarantined: not JSON (nested deeper than 100 levels)" in result.stderr + result.stdout
    status = json.loads(run(vault, "sync", "status", "--json").stdout)
    assert status["chunks"]["quarantined"] == [nested]  # whole chunks; a bad record is a warning
    messages = {w["message"] for w in status["warnings"]}
    assert f"chunk {late_id}: engram_vault.events[0] quarantined: `at` '{LATE}' {RANGE}" in messages
    assert f"chunk {early_id}: observations[0] quarantined: created_at '{EARLY}' {RANGE}" in messages
    hits = json.loads(run(vault, "recall", "how do deploys run", "--json", "--no-reinforce").stdout)
    assert [h["id"] for h in hits] == ["obs-peer"]  # the good chunk imported


@pytest.mark.parametrize("manifest", [b"<<<<<<< not json", b'{"chunks": ' + DEEP + b"}"])
def test_a_deeply_nested_manifest_degrades_like_any_corrupt_manifest(vault, manifest):
    good = encode_chunk([], [RECORD])
    plant(vault, [(good, compress(good))])
    (vault / ".engram" / "manifest.json").write_bytes(manifest)
    for args, code in [*COMMANDS, (["sync", "export"], 1)]:
        result = run(vault, *args)
        assert result.exit_code == code and "Traceback" not in result.output, (args, result.output)
    why = "nested deeper than 100 levels" if b"[[[" in manifest else "Expecting value"
    assert run(vault, "sync", "export").stderr.startswith(f"engram: .engram/manifest.json: not valid JSON ({why}")
    assert f"manifest unreadable: .engram/manifest.json: not valid JSON ({why}" in run(vault, "check").stderr
    stats = json.loads(run(vault, "memory", "stats", "--json").stdout)
    assert stats["live"] == 1  # the chunk still imports without its manifest


def test_memory_add_with_a_now_out_of_range_is_a_usage_error(vault):
    result = run(vault, "memory", "add", "Deploys run on Buildkite", "--now", LATE)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"engram: --now: `now` '{LATE}' {RANGE}\n"


def test_memory_import_skips_overflowing_and_deep_lines_naming_file_and_line(vault, tmp_path):
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join([json.dumps({"content": "Redis runs in cluster mode", "project": "api"}),
                               json.dumps({"content": "Too early", "created_at": EARLY}),
                               DEEP.decode(),
                               json.dumps({"content": "Postgres is version 16", "project": "api"})]) + "\n")
    result = run(vault, "memory", "import", str(path))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"warning: memories.jsonl:2: skipped: created_at '{EARLY}' {RANGE}",
                                          "warning: memories.jsonl:3: skipped: nested deeper than 100 levels"]
    assert result.stdout.startswith("imported 2 lines: {'new': 2}")
