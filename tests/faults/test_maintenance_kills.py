"""An interrupted maintenance leaves nothing half-written: a maintenance process SIGKILLed at random
points, then run again to the end, leaves the same memories as one that was never interrupted, and
every state in between reads cleanly. Small fake embedder; the real journal, index and checkpoint.
"""

from __future__ import annotations

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
from compiler.events.journal import MemoryEvent, append_events
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory, read_memories
from compiler.memory.write import write_memories
from tests.conftest import ROOT, FakeEmbedder

SEED = int(os.environ.get("KILL_SEED", "11"))
LATER = "2026-11-03 00:00:00"  # the day after the duplicates came in: all still live
MAINTAIN = f"""
import sys
from pathlib import Path
sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]
from conftest import FakeEmbedder
from compiler.core.settings import Settings
from compiler.events.journal import MemoryEvent, append_events
from compiler.mcp_server.worker import _maintain, _prepare
from compiler.memory.vault import VaultMemory
with VaultMemory(Path(sys.argv[1]), Settings(now={LATER!r}), embedder=FakeEmbedder()) as memory:
    print("started", flush=True)
    while _prepare(memory):  # the server's slices, then the maintenance
        pass
    _maintain(memory)
"""


def live_state(vault: Path) -> dict[str, tuple[str, bool]]:
    with VaultMemory(vault, Settings(now=LATER), embedder=FakeEmbedder()) as memory:
        memories = read_memories(memory)
        return {o.id: (o.content, o.live) for o in memories.state.values()}


def maintain(vault: Path, kill_after: float | None = None) -> float:
    """Runs a maintenance in a new process (killed `kill_after` s after it started); returns its seconds."""
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(MAINTAIN), str(vault)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "started", process.stderr.read()
    began = time.perf_counter()
    if kill_after is not None:
        time.sleep(kill_after)
        process.send_signal(signal.SIGKILL)
    _, err = process.communicate(timeout=300)
    assert kill_after is not None or process.returncode == 0, err
    assert "Traceback" not in err, err
    return time.perf_counter() - began


def test_a_maintenance_killed_anywhere_then_rerun_ends_like_an_uninterrupted_one(tmp_path):
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    items = [MemoryInput(content=f"alpha{n} bravo{n} delta{n} kilo{n} lima{n}", project=f"p{n % 3}",
                         importance=0.2 + (n % 5) / 10, created_at="2026-11-01 10:00:00") for n in range(240)]
    with VaultMemory(vault, Settings(now="2026-11-01 10:00:00"), embedder=FakeEmbedder()) as memory:
        write_memories(memory, items)
    # A peer's import saved the same facts again under its own ids: maintenance folds these together.
    append_events(vault / ".engram", [MemoryEvent(f"ev-dup-{n}", "save", f"obs-dup-{n}", "2026-11-02 10:00:00",
                                                  {"content": items[n].content, "project": items[n].project})
                                      for n in range(0, 240, 2)])
    control = tmp_path / "control"
    shutil.copytree(vault, control)
    full = maintain(control)
    expected = live_state(control)
    assert sum(not live for _, live in expected.values()) >= 100  # it had work to do: the duplicates folded

    rnd = random.Random(SEED)
    for _ in range(4):
        maintain(vault, kill_after=rnd.uniform(0, full))
        state = live_state(vault)  # every state in between reads: no half-written record stops a read
        assert set(state) == set(expected)
    maintain(vault)
    assert live_state(vault) == expected
