"""A one-shot model command's process settings (compiler.cli.one_shot): its objects are frozen at
exit only in a process of its own, never in a process that goes on (a test's CliRunner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from compiler.cli import one_shot
from compiler.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_cli_runner_is_not_a_process_of_its_own() -> None:
    import gc

    assert CliRunner().invoke(main, ["--help"]).exit_code == 0
    assert one_shot._own_process is False
    threads = os.environ.get("OPENBLAS_NUM_THREADS")
    one_shot.one_shot_process()
    assert gc.isenabled() and os.environ.get("OPENBLAS_NUM_THREADS") == threads


OWN_PROCESS = """
import atexit, gc, sys
from compiler.cli import one_shot
from compiler.cli.main import main
sys.argv = ["engram", "--version"]
try:
    main()
except SystemExit:
    pass
one_shot.one_shot_process()
import os
print(one_shot._own_process, gc.get_freeze_count() == 0 and not gc.isenabled() and os.environ["OPENBLAS_NUM_THREADS"] == "1")
atexit._run_exitfuncs()
print(gc.get_freeze_count() > 1000)
"""


def test_the_entry_point_on_its_own_argv_freezes_the_objects_at_exit() -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", OWN_PROCESS], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split()[-3:] == ["True", "True", "True"]
