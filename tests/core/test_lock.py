"""The writer lock (compiler.core.lock): one process at a time, nested takes in one process count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compiler.core.errors import BusyError
from compiler.core.lock import writer_lock

ROOT = Path(__file__).resolve().parents[2]
TRY_LOCK = """
import sys
from pathlib import Path
from compiler.core.errors import BusyError
from compiler.core.lock import writer_lock
try:
    with writer_lock(Path(sys.argv[1]), timeout=0.2):
        print("taken")
except BusyError:
    print("busy")
"""


def other_process_tries(engram: Path) -> str:
    """What another process gets when it tries to take the lock: "taken" or "busy"."""
    done = subprocess.run([sys.executable, "-c", TRY_LOCK, str(engram)], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def test_a_held_lock_keeps_other_processes_out_until_the_outermost_release(tmp_path: Path) -> None:
    engram = tmp_path / "vault" / ".engram"
    with writer_lock(engram):
        with writer_lock(engram):  # a library call inside another: counted, no deadlock
            assert other_process_tries(engram) == "busy"
        assert other_process_tries(engram) == "busy"  # the inner release leaves it held
    assert other_process_tries(engram) == "taken"


def test_a_lock_another_process_holds_raises_busy_error_after_the_timeout(tmp_path: Path) -> None:
    engram = tmp_path / "vault" / ".engram"
    engram.mkdir(parents=True)
    hold = "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(engram / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(BusyError, match="another engram process is writing"), writer_lock(engram, timeout=0.2):
            pass
    finally:
        holder.kill()
        holder.wait()
    with writer_lock(engram, timeout=5):  # the killed holder's lock went with it
        pass


def test_an_error_inside_the_block_releases_the_lock(tmp_path: Path) -> None:
    engram = tmp_path / "vault" / ".engram"
    with pytest.raises(RuntimeError), writer_lock(engram):
        raise RuntimeError("boom")
    assert other_process_tries(engram) == "taken"
