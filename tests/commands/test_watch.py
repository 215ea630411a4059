"""`engram watch`'s library (compiler.commands.watch): a real watchfiles watcher on a temp vault, in a
thread, with the fake embedder. Each wait has a generous timeout: a timeout says the build never
came, it is not a timing assertion."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import watchfiles
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.watch import Build, VaultChanges, watch_vault
from compiler.core.settings import Settings, load_settings
from compiler.events.journal import MemoryEvent, append_events
from compiler.pipeline.spine import compile_vault
from tests.conftest import FakeEmbedder

WAIT = 120.0  # seconds: a build that has not come by then is not coming
GOLDEN_CHUNK = Path(__file__).parents[1] / "golden" / "51d119a4.jsonl.gz"


class Watcher:
    """`watch_vault` on a thread; its builds arrive on a queue."""

    def __init__(self, vault: Path, quiet_ms: int = 400) -> None:
        self.builds: queue.Queue[Build] = queue.Queue()
        self.stop = threading.Event()
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(vault, quiet_ms), daemon=True)
        self.thread.start()

    def _run(self, vault: Path, quiet_ms: int) -> None:
        try:
            watch_vault(vault, lambda: load_settings(vault), self.builds.put, embedder=FakeEmbedder(), stop=self.stop,
                        quiet_ms=quiet_ms)
        except BaseException as error:  # surfaced by next(): a crashed watcher must fail the test, not hang it
            self.failure.append(error)
            raise

    def next(self) -> Build:
        try:
            return self.builds.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no build within {WAIT}s; watcher failure: {self.failure}") from None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=WAIT)
        assert not self.thread.is_alive(), "the watch did not end when asked to"


@pytest.fixture
def watched(make_vault) -> Iterator[tuple[Path, Watcher]]:
    vault = make_vault({"Home.md": "# Home\n\nSee [[Plan]].\n", "Plan.md": "# Plan\n\nShip it.\n",
                        ".obsidian/app.json": "{}"})
    watcher = Watcher(vault)
    first = watcher.next()
    assert first.number == 1 and first.changes == () and first.report and first.report.notes == 2
    yield vault, watcher
    watcher.close()


def test_a_new_note_is_one_build_and_the_builds_own_pages_start_none(watched):
    vault, watcher = watched
    (vault / "Idea.md").write_text("# Idea\n\nLinks to [[Plan]].\n")
    second = watcher.next()
    assert second.changes == ("Idea.md",) and second.report.changed == ["Idea.md"] and second.report.written
    assert second.line.startswith("engram: 3 notes · 1 changed")
    # The pages build 2 wrote did not start a build: the next one is started by this edit alone.
    (vault / "Plan.md").write_text("# Plan\n\nShip it on Friday.\n")
    third = watcher.next()
    assert third.number == 3 and third.changes == ("Plan.md",) and third.report.changed == ["Plan.md"]


def test_a_burst_like_a_git_checkout_is_one_build(make_vault):
    vault = make_vault({"Home.md": "# Home\n"})
    watcher = Watcher(vault, quiet_ms=1500)
    try:
        watcher.next()
        for i in range(40):
            (vault / "Checkout" / f"Note {i:02}.md").parent.mkdir(exist_ok=True)
            (vault / "Checkout" / f"Note {i:02}.md").write_text(f"# Note {i}\n\nText {i}.\n")
        build = watcher.next()
        assert build.report.notes == 41 and len(build.report.changed) == 40
        # inotify sees the new folder, and only the notes written after it began watching the folder
        # (the scan finds them all): the build names the folder or its notes.
        assert build.changes and all(c == "Checkout" or c.startswith("Checkout/Note ") for c in build.changes)
        assert build.to_dict()["changed_files"] == len(build.changes)
        (vault / "After.md").write_text("# After\n")  # the burst left no second build behind
        after = watcher.next()
        assert after.number == 3 and after.changes == ("After.md",)
    finally:
        watcher.close()


def test_the_memory_journal_and_a_synced_chunk_are_changes(watched):
    vault, watcher = watched
    append_events(vault / ".engram", [MemoryEvent("ev-watch-1", "save", "mem-watch-1", "2026-11-30 12:00:00",
                                                  {"content": "Deploys run on Fridays", "title": "Deploy day",
                                                   "project": "web", "category": "fact", "importance": 0.6,
                                                   "kind": "memory"})])
    build = watcher.next()
    assert build.changes == (".engram/journal.jsonl",) and build.report.memories["live"] == 1
    (vault / ".engram" / "chunks").mkdir(exist_ok=True)
    shutil.copy(GOLDEN_CHUNK, vault / ".engram" / "chunks" / GOLDEN_CHUNK.name)
    build = watcher.next()
    assert f".engram/chunks/{GOLDEN_CHUNK.name}" in build.changes and build.report is not None


def test_a_failing_build_is_reported_and_the_watch_goes_on(watched):
    vault, watcher = watched
    (vault / "engram.toml").write_text('modle = "x"\n')
    failed = watcher.next()
    assert failed.report is None and "engram.toml" in failed.error and "modle" in failed.error
    assert failed.line == f"engram: {failed.error}" and "\n" not in failed.line
    assert failed.to_dict()["ok"] is False
    (vault / "engram.toml").write_text('out = "_pages"\n')  # fixed: and the new setting applies
    fixed = watcher.next()
    assert fixed.report is not None and any(p.startswith("_pages/") for p in fixed.report.written)


def test_the_filter_takes_inputs_and_leaves_own_writes_and_tool_state(make_vault):
    vault = make_vault({"Home.md": "# Home\n", "Templates/Daily.md": "# {{date}}\n"}).resolve()
    settings = Settings(ignore=("Templates/**",))
    report = compile_vault(vault, settings, embedder=FakeEmbedder())
    changes = VaultChanges(vault, settings)
    changes.built(report)
    page = next(p for p in report.written if p.endswith(".md"))
    seen = {rel: changes(watchfiles.Change.modified, str(vault / rel)) for rel in [
        "Home.md", "img/diagram.png", "engram.toml", ".engram/journal.jsonl", ".engram/chunks/ab12.jsonl.gz",
        ".engram/templates/catalog.md.j2", page,
        ".engram/cache/fts.sqlite", ".engram/lock", ".obsidian/workspace.json", ".git/index", ".trash/Old.md",
        "Templates/Daily.md", ".hidden.md", "Home.md~", "Notes/.Home.md.swp"]}
    assert seen == {**{rel: True for rel in list(seen)[:6]}, **{rel: False for rel in list(seen)[6:]}}
    # A person's edit of a page the build wrote is a change again (a memory page edit is an update).
    (vault / page).write_text((vault / page).read_text() + "\nmine\n")
    assert changes(watchfiles.Change.modified, str(vault / page))
    assert not changes(watchfiles.Change.modified, "/somewhere/else.md")
    (vault / "_engram" / "backlinks" / "New folder").mkdir(parents=True)  # a build makes folders: not a change
    assert not changes(watchfiles.Change.added, str(vault / "_engram" / "backlinks" / "New folder"))
    other = next(p for p in report.written if p.endswith(".md") and p != page)
    (vault / other).unlink()  # a person deleting a generated page: the next build writes it again
    assert changes(watchfiles.Change.deleted, str(vault / other))


@pytest.mark.integration
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_the_command_prints_a_json_line_per_build_and_ctrl_c_exits_0(make_vault, stop):
    """`engram watch --json` in a real process, with the bundled model: a line per build, and
    SIGINT (Ctrl-C) or SIGTERM (a service manager) ends it with exit 0 and one line on stderr."""
    vault = make_vault({"Home.md": "# Home\n\nThe runbook.\n"})
    # As a terminal starts it: a suite run from a background job (`cmd &` in a script) ignores
    # SIGINT, the child inherits that, and Python then installs no Ctrl-C handler at all.
    process = subprocess.Popen([sys.executable, "-m", "compiler", "watch", str(vault), "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
        first = json.loads(lines.get(timeout=600))  # the model loads first: generous
        assert first["build"] == 1 and first["ok"] is True and first["report"]["notes"] == 1
        (vault / "Deploy.md").write_text("# Deploy\n\nBlue-green.\n")
        second = json.loads(lines.get(timeout=WAIT))
        assert second == {**second, "build": 2, "ok": True, "changes": ["Deploy.md"], "changed_files": 1}
        assert second["report"]["changed"] == ["Deploy.md"] and second["summary"].startswith("engram: 2 notes")
        process.send_signal(stop)
        _, err = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert err.splitlines() == [f"engram: watching {vault.resolve()} (Ctrl-C to stop)", "engram: stopped watching"]


def test_a_missing_vault_is_a_usage_error_before_any_watching(tmp_path):
    result = CliRunner().invoke(main, ["watch", str(tmp_path / "nope")], catch_exceptions=False)
    assert result.exit_code == 2 and result.stderr == f"engram: no such vault folder: {tmp_path / 'nope'}\n"
