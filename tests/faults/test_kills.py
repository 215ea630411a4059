"""Fault injection: SIGKILL at random points of compile and of memory writes, and two writer processes.

Each run is seeded (`KILL_SEED`) and takes a few seconds. What must hold after recovery: no
acknowledged memory is lost, none is stored twice, the pages are byte-identical to a clean build,
and nothing is written outside the vault. (The sync cycle's kill test is in tests/sync/.)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from compiler.core.settings import Settings
from compiler.memory.input import MemoryInput
from compiler.memory.snapshot import read_events
from compiler.memory.vault import VaultMemory, read_memories
from compiler.memory.write import write_memories
from compiler.pipeline.spine import compile_vault
from tests.conftest import EXAMPLE_VAULT, ROOT, FakeEmbedder

NOW = "2026-12-01 10:00:00"
SETTINGS = Settings(now=NOW)
SEED = int(os.environ.get("KILL_SEED", "7"))

PRELUDE = f"""
import sys
from pathlib import Path
sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]
from conftest import FakeEmbedder
from compiler.core.settings import Settings
settings = Settings(now={NOW!r})
vault = Path(sys.argv[1])
"""

COMPILE = PRELUDE + """
from compiler.pipeline.spine import compile_vault
print("start", flush=True)
compile_vault(vault, settings, embedder=FakeEmbedder())
print("done", flush=True)
"""

# Stores memories one call at a time and prints each id once the call returned (acknowledged).
WRITER = PRELUDE + """
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import store_memory
prefix, count = sys.argv[2], int(sys.argv[3])
print("start", flush=True)
with VaultMemory(vault, settings, embedder=FakeEmbedder()) as memory:
    for number in range(count):
        item = MemoryInput(content=" ".join(f"w{prefix}{number}x{i}" for i in range(6)),  # no word shared: no merge
                           project="faults", source_id=f"{prefix}-{number}")
        answer = store_memory(memory, item)
        print("ack", item.source_id, answer["id"], flush=True)
print("done", flush=True)
"""


def start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def kill_after(process: subprocess.Popen[str], delay: float) -> tuple[str, str, float]:
    """Waits for the process's "start" line, kills it `delay` s later (whole group) unless it ended.

    Returns its output and the seconds it ran after its start line."""
    assert process.stdout is not None
    first = process.stdout.readline()
    started = time.perf_counter()
    deadline = started + delay
    while process.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.005)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    out, err = process.communicate(timeout=120)
    return first + out, err, time.perf_counter() - started


def pages(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted((vault / "_engram").rglob("*.md"))}


def outside_listing(vault: Path) -> list[str]:
    """Everything next to the vault (the test's own tmp folder), to prove nothing was written beside it."""
    return sorted(str(p.relative_to(vault.parent)) for p in vault.parent.rglob("*") if vault not in p.parents
                  and p != vault)


def copy_example(target: Path) -> Path:
    shutil.copytree(EXAMPLE_VAULT, target, ignore=shutil.ignore_patterns(".engram", "_engram"))
    return target


def test_compile_killed_at_random_points_recovers_byte_identical_pages(tmp_path):
    rng = random.Random(SEED)
    clean = copy_example(tmp_path / "clean" / "vault")
    with VaultMemory(clean, SETTINGS, embedder=FakeEmbedder()) as memory:
        items = [MemoryInput(content=f"fact {n}: the payments service keeps ledger {n} in region {n % 3}",
                             project="acme", source_id=f"seed-{n}") for n in range(12)]
        write_memories(memory, items)
    killed = copy_example(tmp_path / "killed" / "vault")
    shutil.copytree(clean / ".engram", killed / ".engram")  # the same memories, no cache
    shutil.rmtree(killed / ".engram" / "cache", ignore_errors=True)
    compile_vault(clean, SETTINGS, embedder=FakeEmbedder())
    beside = outside_listing(killed)
    done, err, cycle = kill_after(start(COMPILE, str(killed)), 60.0)  # a whole run, to time it
    assert "done" in done, err
    shutil.rmtree(killed / ".engram" / "cache")
    shutil.rmtree(killed / "_engram")
    interrupted = 0
    for _ in range(8):
        out, _, _ = kill_after(start(COMPILE, str(killed)), rng.uniform(0.0, cycle))
        interrupted += "done" not in out
    compile_vault(killed, SETTINGS, embedder=FakeEmbedder())
    assert interrupted >= 2, "the kills should land mid-compile"
    assert pages(killed) == pages(clean)
    assert outside_listing(killed) == beside


def test_memory_writes_killed_at_random_points_lose_nothing_acknowledged(tmp_path):
    rng = random.Random(SEED)
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    # A whole run on another vault times the kills: a fixed window would miss a fast write path.
    (tmp_path / "timing" / ".engram").mkdir(parents=True)
    done, err, cycle = kill_after(start(WRITER, str(tmp_path / "timing"), "k", "40"), 120.0)
    assert "done" in done, err
    beside = outside_listing(vault)
    acknowledged: dict[str, str] = {}  # source id → the memory id the write answered
    interrupted = 0
    for attempt in range(6):
        out, _, _ = kill_after(start(WRITER, str(vault), "k", "40"), rng.uniform(0.0, 0.9 * cycle))
        interrupted += "done" not in out
        for line in out.splitlines():
            if line.startswith("ack "):
                _, source, memory_id = line.split()
                acknowledged.setdefault(source, memory_id)
    out, err, _ = kill_after(start(WRITER, str(vault), "k", "40"), 120.0)  # a run that finishes
    assert "done" in out, err
    assert interrupted >= 2, "the kills should land mid-write"
    with VaultMemory(vault, SETTINGS, embedder=FakeEmbedder()) as memory:
        state = read_memories(memory).state
    live = [o for o in state.values() if o.live]
    by_source = {s: o.id for o in live for s in o.sources if s.startswith("k-")}
    assert set(by_source) == {f"k-{n}" for n in range(40)}  # every write arrived, re-runs added none twice
    assert len(live) == 40
    assert all(by_source[s] == i for s, i in acknowledged.items())  # acknowledged ids still answer
    assert outside_listing(vault) == beside


def test_two_writer_processes_store_every_memory_once(tmp_path):
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    writers = [start(WRITER, str(vault), name, "40") for name in ("a", "b")]
    outputs = [w.communicate(timeout=300) for w in writers]
    for writer, (out, err) in zip(writers, outputs):
        assert writer.returncode == 0 and "done" in out, err
    acks = [line.split()[1] for out, _ in outputs for line in out.splitlines() if line.startswith("ack ")]
    assert len(acks) == len(set(acks)) == 80
    journal = (vault / ".engram" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line) for line in journal)  # no torn or interleaved line
    with VaultMemory(vault, SETTINGS, embedder=FakeEmbedder()) as memory:
        live = [o for o in read_memories(memory).state.values() if o.live]
    assert sorted(s for o in live for s in o.sources if s[:2] in ("a-", "b-")) == sorted(acks)
    assert len(read_events(vault / ".engram")) == 80
