"""`engram sync` with real git: a bare repository and two clones (laptop, server) in a temp folder.

The laptop has the manifest merge driver installed; the server does not (its git config lacks the
driver), so both ways of settling a manifest conflict run: git's driver, and the resolver inside
`engram sync`. Memories use the small fake embedder; the real model is covered elsewhere.
Git identity comes from environment variables set here, for these tests only.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FakeEmbedder

from compiler.cli.main import main
from compiler.commands import sync_cycle
from compiler.commands.sync_cycle import install_sync, run_sync
from compiler.core.errors import BusyError, GitError
from compiler.core.settings import Settings
from compiler.events.store import read_vault_chunks
from compiler.memory.edits import forget_memory, store_new
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory, read_memories
from compiler.sync.exchange import export_memories, sync_files
from compiler.sync.git import commit_paths, open_repo
from compiler.sync.monitor import read_status

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = replace(Settings(), extra={"sync": {"stale_lock_seconds": 1.0}})
WORDS = ("amber basil cedar delta ember fjord garnet harbor indigo juniper kelp lumen maple nectar onyx pylon "
         "quartz raven sierra tundra umber velvet willow xenon yarrow zephyr").split()


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@dataclass
class Machine:
    name: str
    vault: Path
    embedder: FakeEmbedder

    def memory(self) -> VaultMemory:
        return VaultMemory(self.vault, SETTINGS, embedder=self.embedder)

    def add(self, text: str) -> str:
        with self.memory() as memories:
            return store_new(memories, MemoryInput(text, project=f"proj-{self.name}"))["id"]

    def state(self) -> dict:
        with self.memory() as memories:
            return dict(read_memories(memories).state)

    def sync(self, **options) -> dict:
        return run_sync(self.vault, SETTINGS, embedder=self.embedder, created_by=self.name, **options)

    def export_and_commit(self) -> None:
        export_memories(self.vault, SETTINGS, embedder=self.embedder, created_by=self.name)
        commit_paths(open_repo(self.vault), sync_files(self.vault), f"export on {self.name}")

    def clean(self) -> bool:
        return git(self.vault, "status", "--porcelain") == ""


@pytest.fixture
def git_identity(monkeypatch, tmp_path):
    config = tmp_path / "gitconfig"
    config.write_text("")
    for key, value in {"GIT_AUTHOR_NAME": "Engram Test", "GIT_AUTHOR_EMAIL": "test@engram.invalid",
                       "GIT_COMMITTER_NAME": "Engram Test", "GIT_COMMITTER_EMAIL": "test@engram.invalid",
                       "GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"}.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def machines(tmp_path, git_identity) -> tuple[Machine, Machine, Path]:
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "--quiet", str(bare), "laptop")
    laptop = Machine("laptop", tmp_path / "laptop", FakeEmbedder())
    (laptop.vault / "Home.md").write_text("# Home\n\nThe shared vault.\n")
    git(laptop.vault, "add", "Home.md")
    git(laptop.vault, "commit", "--quiet", "-m", "A vault")
    install_sync(laptop.vault, SETTINGS)
    git(laptop.vault, "push", "--quiet", "origin", "HEAD:main")
    git(tmp_path, "clone", "--quiet", str(bare), "server")
    server = Machine("server", tmp_path / "server", FakeEmbedder())
    install_sync(server.vault, SETTINGS)
    git(server.vault, "config", "--remove-section", "merge.engram-manifest")  # the server relies on engram sync
    return laptop, server, bare


def sentence(rng: random.Random, *prefix: str) -> str:
    return " ".join([*prefix, *rng.sample(WORDS, 8)])


def assert_converged(laptop: Machine, server: Machine, live: set[str], gone: set[str]) -> None:
    a, b = laptop.state(), server.state()
    assert a == b  # the same memories, in the same state, on both machines
    assert {i for i, o in a.items() if o.live} == live  # none lost
    assert {i for i, o in a.items() if not o.live} == gone  # deletes travelled, nothing resurrected
    contents = [o.content for o in a.values()]
    assert len(contents) == len(set(contents))  # none duplicated
    for machine in (laptop, server):
        found = read_vault_chunks(machine.vault / ".engram")
        assert not found.warnings and not found.missing and not found.unlisted
        ids = [e.id for c in found.chunks for e in c.replay.events]
        assert len(ids) == len(set(ids))  # every event exported exactly once
        assert machine.clean(), git(machine.vault, "status", "--porcelain")
    assert (laptop.vault / ".engram/manifest.json").read_bytes() == (server.vault / ".engram/manifest.json").read_bytes()
    assert git(laptop.vault, "rev-parse", "HEAD") == git(server.vault, "rev-parse", "HEAD")


def test_two_machines_sync_for_many_rounds_in_interleaved_orders(machines):
    laptop, server, _ = machines
    rng = random.Random(int(os.environ.get("ROUNDS_SEED", "20261130")))
    live: set[str] = set()
    gone: set[str] = set()
    orders = {"laptop, server": "LS", "server, laptop": "SL", "both export before either pulls": "",
              "laptop only": "L", "server only": "S", "server twice, then laptop": "SSL"}
    for number in range(24):
        for machine in (laptop, server):
            for _ in range(rng.randint(0, 2)):
                live.add(machine.add(sentence(rng, "round", str(number), machine.name)))
        if number % 4 == 3:  # a machine forgets one memory it knows
            machine = rng.choice((laptop, server))
            known = sorted(i for i, o in machine.state().items() if o.live and i in live)
            if known:
                victim = rng.choice(known)
                with machine.memory() as memories:
                    forget_memory(memories, victim)
                live.discard(victim)
                gone.add(victim)
        order = list(orders)[number % len(orders)] if number < len(orders) else rng.choice(list(orders))
        if not orders[order]:  # both export (and commit) before either pulls
            laptop.export_and_commit()
            server.export_and_commit()
            for machine in rng.sample([laptop, server], 2):
                machine.sync()
        for letter in orders[order]:
            (laptop if letter == "L" else server).sync()
    for machine in (laptop, server, laptop):
        machine.sync()
    assert len(live) > 30 and gone
    assert_converged(laptop, server, live, gone)


def test_both_export_before_either_pulls_with_and_without_the_merge_driver(machines):
    laptop, server, _ = machines
    rng = random.Random(7)
    live = {laptop.add(sentence(rng, "laptop")), server.add(sentence(rng, "server"))}
    laptop.export_and_commit()
    server.export_and_commit()
    assert laptop.sync()["resolved"] == 0
    assert server.sync()["resolved"] == 1  # no driver on the server: engram sync merged the manifests itself
    live |= {laptop.add(sentence(rng, "laptop again")), server.add(sentence(rng, "server again"))}
    laptop.export_and_commit()
    server.export_and_commit()
    server.sync()
    assert laptop.sync()["resolved"] == 0  # the laptop's git called `engram merge-manifest`: no conflict stop
    log = git(laptop.vault, "log", "--format=%s")
    assert "engram sync (laptop)" in log or "export on laptop" in log
    server.sync()
    assert_converged(laptop, server, live, set())


def test_a_rejected_push_is_pulled_and_retried_once(machines, monkeypatch):
    laptop, server, _ = machines
    rng = random.Random(3)
    live = {laptop.add(sentence(rng, "laptop")), server.add(sentence(rng, "server"))}
    real_push = sync_cycle.push
    raced = []

    def push_after_the_server(repo, remote, branch):
        if repo.vault == laptop.vault.resolve() and not raced:
            raced.append(True)
            monkeypatch.setattr(sync_cycle, "push", real_push)
            server.sync()  # the server pushes between the laptop's pull and its push
            monkeypatch.setattr(sync_cycle, "push", push_after_the_server)
        return real_push(repo, remote, branch)

    monkeypatch.setattr(sync_cycle, "push", push_after_the_server)
    result = laptop.sync()
    assert raced and result["pushed"] and result["push_retries"] == 1
    assert "push rejected" in (laptop.vault / ".engram/sync.log").read_text()
    server.sync()
    assert_converged(laptop, server, live, set())


def test_a_conflict_engram_cannot_resolve_aborts_and_never_forces(machines):
    laptop, server, bare = machines
    for machine, text in ((laptop, "laptop edit"), (server, "server edit")):
        (machine.vault / "Home.md").write_text(f"# Home\n\n{text}\n")
        git(machine.vault, "commit", "--quiet", "-am", text)
    server.sync()
    before = git(laptop.vault, "rev-parse", "HEAD")
    with pytest.raises(GitError, match="Home.md"):
        laptop.sync()
    assert git(laptop.vault, "rev-parse", "HEAD") == before and not (open_repo(laptop.vault).git_dir / "rebase-merge").exists()
    assert git(bare, "rev-parse", "main") == git(server.vault, "rev-parse", "HEAD")  # the remote was not overwritten
    status = read_status(laptop.vault / ".engram")
    assert status["consecutive_failures"] == 1 and "Home.md" in status["last_error"]["message"]


def test_status_exits_non_zero_after_consecutive_failures(machines, monkeypatch):
    laptop, _, bare = machines
    git(laptop.vault, "remote", "set-url", "origin", str(bare.parent / "gone.git"))
    for _ in range(3):
        with pytest.raises(GitError):
            laptop.sync()
    runner = CliRunner()
    failing = runner.invoke(main, catch_exceptions=False, args=["sync", "status", "--vault", str(laptop.vault), "--json"])
    assert failing.exit_code == 1, failing.output
    status = json.loads(failing.output)
    assert status["consecutive_failures"] == 3 and not status["healthy"] and status["last_error"]["message"]
    patient = runner.invoke(main, catch_exceptions=False, args=["sync", "status", "--vault", str(laptop.vault), "--max-failures", "5"])
    assert patient.exit_code == 0 and "consecutive failures: 3 (alarm at 5)" in patient.stdout
    git(laptop.vault, "remote", "set-url", "origin", str(bare))
    laptop.add("A memory after the repair")
    laptop.sync()
    healthy = runner.invoke(main, catch_exceptions=False, args=["sync", "status", "--vault", str(laptop.vault), "--json"])
    assert healthy.exit_code == 0 and json.loads(healthy.output)["last_export"]["chunk"]
    log = (laptop.vault / ".engram/sync.log").read_text()
    assert log.count(" error: sync: ") == 3 and " ok: sync: " in log


HOLD_LOCK = """
import sys, time
from pathlib import Path
from compiler.core.lock import writer_lock
with writer_lock(Path(sys.argv[1]) / ".engram"):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_one_sync_at_a_time_and_a_killed_holder_releases_the_lock(machines):
    laptop, _, _ = machines
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(laptop.vault)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(BusyError):
            laptop.sync(lock_timeout=0.5)
        assert read_status(laptop.vault / ".engram")["consecutive_failures"] == 1
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    laptop.add("Written once the other writer died")
    assert laptop.sync(lock_timeout=5)["pushed"]  # the dead holder's lock is gone with it
    assert read_status(laptop.vault / ".engram")["consecutive_failures"] == 0


SYNC_SCRIPT = """
import sys
from dataclasses import replace
from pathlib import Path
sys.path[:0] = [{tests!r}, {root!r}]
from conftest import FakeEmbedder
from compiler.core.settings import Settings
from compiler.commands.sync_cycle import run_sync
settings = replace(Settings(), extra={{"sync": {{"stale_lock_seconds": 1.0}}}})
run_sync(Path(sys.argv[1]), settings, embedder=FakeEmbedder(), created_by="laptop")
print("done", flush=True)
"""


def test_a_sync_killed_at_random_points_loses_nothing(machines):
    laptop, server, _ = machines
    rng = random.Random(int(os.environ.get("KILL_SEED", "99")))
    script = textwrap.dedent(SYNC_SCRIPT.format(tests=str(ROOT / "tests"), root=str(ROOT)))
    log_path = laptop.vault / ".engram/sync.log"
    live: set[str] = set()

    def run(delay: float | None, whole_group: bool = False, after: str = "start:") -> tuple[bool, int, float]:
        """Runs a sync in a subprocess; kills it `delay` s after it logs `after` (None: let it finish)."""
        process = subprocess.Popen([sys.executable, "-c", script, str(laptop.vault)], cwd=ROOT, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        while f"pid={process.pid} {after}" not in (log_path.read_text() if log_path.exists() else ""):
            if process.poll() is not None:
                break
            time.sleep(0.005)
        started = time.perf_counter()
        if delay is not None:
            time.sleep(delay)
            if whole_group:
                os.killpg(process.pid, signal.SIGKILL)  # git children die too: stale .git/*.lock files
            else:
                process.send_signal(signal.SIGKILL)
        out, err = process.communicate(timeout=120)
        assert delay is not None or process.returncode == 0, err
        return "done" in out, process.pid, time.perf_counter() - started

    live.add(laptop.add(sentence(rng, "first")))
    _, _, cycle = run(None)  # how long one cycle takes here, from its start line to its end
    interrupted = []
    for number in range(9):
        live.add(laptop.add(sentence(rng, "laptop", str(number))))
        live.add(server.add(sentence(rng, "server", str(number))))
        if number % 2:
            server.sync()  # so the laptop's pull has something to rebase onto
        # kill it anywhere: during start-up, or just after one of its steps (pull, compile, export, commit)
        after = ["start:", "start:", "step: pulled", "step: imported", "step: exported", "step: committed"][number % 6]
        delay = rng.uniform(0.0, cycle) if number == 0 else rng.uniform(0.0, 0.08)
        done, pid, _ = run(delay, whole_group=number % 3 == 0, after=after)
        before = log_path.read_text()
        mine = [line.split(f"pid={pid} ", 1)[1] for line in before.splitlines() if f" pid={pid} " in line]
        if not done:
            interrupted.append(mine[-1] if mine else "before its cycle")
        laptop.sync()  # the next sync completes
        finished = bool(mine) and mine[-1].startswith("ok:")  # killed after its cycle ended, before printing
        if not done and mine and not finished:
            assert "never finished: killed?" in log_path.read_text()[len(before):]  # and says what happened
    assert len(interrupted) >= 2, interrupted
    server.sync()
    laptop.sync()
    assert_converged(laptop, server, live, set())


def test_cli_export_import_install_and_sync_settings(machines):
    laptop, server, _ = machines
    runner = CliRunner()
    laptop.add("A memory exported through the CLI")
    exported = runner.invoke(main, catch_exceptions=False, args=["sync", "export", "--vault", str(laptop.vault), "--created-by", "cli", "--json"])
    assert exported.exit_code == 0, exported.output
    chunk = json.loads(exported.stdout)["chunk"]
    assert chunk and f"chunk {chunk}" in exported.stderr
    commit_paths(open_repo(laptop.vault), sync_files(laptop.vault), "export")
    git(laptop.vault, "push", "--quiet", "origin", "HEAD:main")
    git(server.vault, "pull", "--quiet", "--rebase", "origin", "main")
    imported = runner.invoke(main, catch_exceptions=False, args=["sync", "import", "--vault", str(server.vault), "--no-compile", "--json"])
    assert imported.exit_code == 0, imported.stderr
    assert json.loads(imported.stdout)["chunks_new"] == [chunk] and "1 new chunks" in imported.stderr
    again = runner.invoke(main, catch_exceptions=False, args=["sync", "install", "--vault", str(server.vault), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["changed"] == []  # idempotent
    assert "merge-manifest %O %A %B" in git(server.vault, "config", "merge.engram-manifest.driver")
    (server.vault / "engram.toml").write_text("[sync]\nremote = \"nowhere\"\nmax_failures = 1\n")
    failed = runner.invoke(main, catch_exceptions=False, args=["sync", "--vault", str(server.vault)])
    assert failed.exit_code == 1 and "no remote 'nowhere'" in failed.stderr
    assert failed.stderr.startswith("engram: ") and len(failed.stderr.splitlines()) == 1  # no traceback
    status = runner.invoke(main, catch_exceptions=False, args=["sync", "status", "--vault", str(server.vault)])
    assert status.exit_code == 1 and "consecutive failures: 1 (alarm at 1)" in status.stdout  # 1 failure is enough


# -- issue 12: a clone without the driver, derived files out of git --------------------------------

def test_a_clone_whose_config_names_the_driver_without_its_command_still_syncs(machines):
    """The failing case: `.gitattributes` names engram-manifest, this clone's config has only the
    driver's name (no command line), and plain git stops ("lacks command line"); engram sync does not."""
    laptop, server, _ = machines
    git(server.vault, "config", "merge.engram-manifest.name", "engram chunk manifest")  # no .driver
    assert "merge=engram-manifest" in (server.vault / ".gitattributes").read_text()
    rng = random.Random(12)
    live = {laptop.add(sentence(rng, "laptop")), server.add(sentence(rng, "server"))}
    laptop.export_and_commit()
    server.export_and_commit()
    laptop.sync()
    plain = subprocess.run(["git", "pull", "--rebase", "origin", "main"], cwd=server.vault, capture_output=True,
                           text=True, check=False)
    assert plain.returncode != 0 and "lacks command line" in plain.stderr  # what git alone does here
    subprocess.run(["git", "rebase", "--abort"], cwd=server.vault, capture_output=True, check=False)
    assert server.sync()["resolved"] == 1  # the union rule, without the driver
    laptop.sync()
    assert_converged(laptop, server, live, set())


def test_derived_files_stay_out_of_git_from_the_first_write_without_sync_install(tmp_path, git_identity):
    vault = tmp_path / "vault"
    vault.mkdir()
    git(vault, "init", "--quiet", "-b", "main")
    (vault / "Home.md").write_text("# Home\n")
    machine = Machine("solo", vault, FakeEmbedder())
    machine.add("The build cache lives in .engram/cache")
    export_memories(vault, SETTINGS, embedder=machine.embedder, created_by="solo")
    assert (vault / ".engram/.gitignore").is_file() and (vault / ".engram/cache").is_dir()
    git(vault, "add", "-A")  # a person's plain `git add -A`, no `engram sync install` ever ran
    git(vault, "commit", "--quiet", "-m", "vault")
    tracked = set(git(vault, "ls-files").split())
    assert not any(p.startswith((".engram/cache/", ".engram/journal", ".engram/lock")) for p in tracked)
    assert ".engram/manifest.json" in tracked and any(p.startswith(".engram/chunks/") for p in tracked)
    machine.add("A second memory: the cache and the journal change again")
    export_memories(vault, SETTINGS, embedder=machine.embedder, created_by="solo")
    git(vault, "add", "-A")
    git(vault, "commit", "--quiet", "-m", "again")
    with machine.memory() as memories:  # another write touches the cache and the journal
        store_new(memories, MemoryInput("A third memory, not exported yet"))
    assert machine.clean(), git(vault, "status", "--porcelain")
