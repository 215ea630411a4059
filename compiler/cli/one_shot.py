"""A command that embeds a text or two, answers once and exits (`engram query`, `vsearch`, `recall`,
`memory add`): the process settings that make its cold start cheaper (`one_shot_process`).

Its process ends right after the answer, holding numpy's, ONNX Runtime's and its own ~300,000
objects. Python's last garbage collection at exit traverses all of them to find cycles that the
exit frees anyway: 0.04–0.06 s CPU of every cold model command (perf: `gc_collect_main`; 0.86× the
command's CPU without it, benchmarks/README.md). Frozen at exit (`gc.freeze`), they are skipped;
objects outside cycles are still freed as before (open files flushed and closed), and the answer
is written before. The collections while it runs (~80, over the objects its imports make) found
~500 objects in cycles in all (`gc.get_stats`, any of the four commands): off, too (`gc.disable`).
All of it only in a process of its own: under a test's CliRunner the process goes on.
"""

from __future__ import annotations

import atexit
import gc

from compiler.index.blas import one_thread_process

_own_process = False  # the `engram` entry point runs this process's own command line


def own_process() -> None:
    """Called by the `engram` group when it parses the process's own argv (not a CliRunner's args)."""
    global _own_process
    _own_process = True


def one_shot_process() -> None:
    """Called first by a one-shot model command, in a process of its own (else nothing: the process
    goes on): one BLAS thread (compiler.index.blas), and no garbage collection, neither while it
    runs nor over everything at exit."""
    if not _own_process:
        return
    one_thread_process()
    gc.disable()
    atexit.register(gc.freeze)  # atexit runs before the interpreter's final collection, which runs disabled or not
