"""The memory commands through Click's runner, with parsed JSON. Uses the real bundled model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main

pytestmark = pytest.mark.integration
NOW = ["--now", "2026-11-30 12:00:00"]


def run(vault: Path, *args: str) -> tuple[int, object, str]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=[*args, "--vault", str(vault), *NOW, "--json"])
    try:
        return result.exit_code, json.loads(result.stdout), result.stderr
    except json.JSONDecodeError:
        return result.exit_code, None, result.stderr


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})


def test_the_issue_walkthrough(vault):
    code, first, _ = run(vault, "memory", "add", "The user prefers TypeScript for new services", "--project", "web")
    assert code == 0 and first["action"] == "new"
    code, second, _ = run(vault, "memory", "add", "The user decided to abandon TypeScript for Go", "--project", "web")
    assert second["action"] == "replaced" and second["id"] == first["id"]
    code, hits, _ = run(vault, "recall", "which language for services?", "--project", "web")
    assert hits[0]["id"] == first["id"] and "Go" in hits[0]["content"]
    code, failure, _ = run(vault, "track", "failure", "--error", "CSRF token missing", "--component", "payment",
                           "--severity", "critical")
    assert code == 0 and failure["action"] == "new"
    code, progress, _ = run(vault, "track", "progress", "--feature", "login-refactor", "--status", "in_progress",
                            "--completion", "60")
    assert progress["status"] == "in_progress"
    code, _, _ = run(vault, "handoff", "save", "--summary", "Login refactor half done", "--next-step", "finish it",
                     "--project", "web")
    code, handoff, _ = run(vault, "handoff", "load", "--project", "web")
    assert handoff["fields"]["next_steps"] == ["finish it"]
    code, stats, _ = run(vault, "memory", "stats")
    assert stats["live"] == 4 and stats["failures_by_severity"] == {"critical": 1}
    code, shown, _ = run(vault, "memory", "show", first["id"])
    assert shown["history"][0]["content"] == "The user prefers TypeScript for new services"


def test_forget_restore_and_unknown_ids(vault):
    _, saved, _ = run(vault, "memory", "add", "Staging runs on Fly.io", "--project", "ops")
    assert run(vault, "memory", "forget", saved["id"])[1]["action"] == "forgotten"
    assert run(vault, "recall", "staging platform", "--project", "ops")[1] == []
    assert run(vault, "memory", "restore", saved["id"])[1]["live"] is True
    code, _, err = run(vault, "memory", "forget", "mem-nope")
    assert code == 1 and "no memory with id" in err


@pytest.mark.parametrize("args, message", [
    (["memory", "add", "   "], "content is empty"),
    (["memory", "add", "x", "--importance", "1.5"], "from 0 to 1"),
    (["memory", "add", "x" * 70_000], "over the 64 KB limit"),
])
def test_bad_input_is_one_clear_line_and_exit_1(vault, args, message):
    code, _, err = run(vault, *args)
    assert code == 1 and message in err and "Traceback" not in err


def test_bad_now_is_a_usage_error(vault):
    result = CliRunner().invoke(main, catch_exceptions=False, args=["memory", "stats", "--vault", str(vault), "--now", "yesterday"])
    assert result.exit_code == 2 and "now" in result.stderr


def test_import_reports_skipped_lines(vault, tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"content": "Redis runs in cluster mode", "project": "api", "source_id": "r1"}\n{"oops"\n')
    code, result, err = run(vault, "memory", "import", str(path))
    assert code == 0 and result["actions"] == {"new": 1} and result["skipped"][0]["line"] == 2
    assert run(vault, "memory", "import", str(path))[1]["actions"] == {"known": 1}


def test_recall_prints_an_archived_memory_with_its_mark(vault):
    add = ["memory", "add", "The office plant needs water on Mondays", "--project", "ops", "--importance", "0.2"]
    assert CliRunner().invoke(main, [*add, "--vault", str(vault), "--now", "2026-07-01 12:00:00"]).exit_code == 0
    later = ["recall", "office plant water", "--project", "ops", "--no-reinforce", "--vault", str(vault)]
    shown = CliRunner().invoke(main, [*later, *NOW])  # five months later: faded into the archive
    assert shown.exit_code == 0 and shown.stdout.rstrip().endswith("The office plant needs water on Mondays  (archived)")
    assert json.loads(CliRunner().invoke(main, [*later, *NOW, "--json"]).stdout)[0]["archived"] is True
