"""No-op compile at scale: `python benchmarks/noop.py [--notes 10000] [--json]`.

Generates the synthetic vault of bench.py, builds it once, then times no-op compiles (nothing
changed), a compile after `touch` of every tenth note (stats moved, bytes did not), a compile
after one note was edited, and a cold `engram search` (a new process, median of 5) on that
vault. What a no-op costs does not depend on the model, so the first build uses a small hashing
embedder (the one the unit tests use) instead of MiniLM: 10,000 notes build in minutes instead of
half an hour. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench import (  # noqa: E402
    SEARCH_RUNS,
    SEARCH_WORDS,
    append_paragraph,
    generate_vault,
    log,
    run_cli,
)
from compiler.core.settings import load_settings  # noqa: E402
from compiler.pipeline.spine import compile_vault  # noqa: E402
from tests.conftest import FakeEmbedder  # noqa: E402

RUNS = 3


def timed_compile(vault: Path, embedder: FakeEmbedder) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    report = compile_vault(vault, load_settings(vault), embedder=embedder)
    return {"s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "changed": len(report.changed),
            "embedded": report.embedded, "written": len(report.written)}


def run(notes: int, workdir: Path) -> dict[str, Any]:
    vault = workdir / "vault"
    log(f"no-op benchmark: generating {notes} notes")
    files = generate_vault(vault, notes, seed=7)
    embedder = FakeEmbedder()
    log("first build (hashing embedder)")
    first = timed_compile(vault, embedder)
    log(f"{RUNS} no-op compiles")
    noops = [timed_compile(vault, embedder) for _ in range(RUNS)]
    for path in files[::10]:
        os.utime(path)
    log("touched every tenth note")
    touched = timed_compile(vault, embedder)
    append_paragraph(files[len(files) // 2], 7)
    log("one note edited")
    edited = timed_compile(vault, embedder)
    log(f"cold engram search ×{SEARCH_RUNS}")  # keywords only: no model is loaded
    searches = [run_cli("search", "--vault", str(vault), SEARCH_WORDS) for _ in range(SEARCH_RUNS)]
    return {"notes": notes, "first_build_s": first["s"], "sections": first["embedded"],
            "cold_search_s": statistics.median(r[0] for r in searches),
            "cold_search_cpu_s": statistics.median(r[1] for r in searches),
            "cold_search_runs_s": [round(r[0], 3) for r in searches],
            "noop_s": statistics.median(r["s"] for r in noops), "noop_cpu_s": statistics.median(r["cpu_s"] for r in noops),
            "noop_runs_s": [r["s"] for r in noops], "noop_written": max(r["written"] for r in noops),
            "touched_s": touched["s"], "touched_cpu_s": touched["cpu_s"], "touched_written": touched["written"],
            "one_change_s": edited["s"], "one_change_cpu_s": edited["cpu_s"], "one_change_embedded": edited["embedded"],
            "load_avg": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000, help="synthetic vault size (default 10000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", type=Path, help="build the vault in this folder and leave it there (to profile it after)")
    args = parser.parse_args(argv)
    if args.keep:
        figures = run(args.notes, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="engram-noop-") as workdir:
            figures = run(args.notes, Path(workdir))
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        print(f"{figures['notes']} notes: no-op {figures['noop_s']:.2f} s wall / {figures['noop_cpu_s']:.2f} s CPU "
              f"(median of {RUNS}) · every tenth note touched {figures['touched_s']:.2f} s · one note edited "
              f"{figures['one_change_s']:.2f} s · cold search {figures['cold_search_s']:.2f} s · load {figures['load_avg']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
