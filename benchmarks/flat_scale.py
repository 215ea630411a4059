"""The flat vector store alone at scale: what a write's resolve and a recall pay for its vectors.

    python benchmarks/flat_scale.py [--rows 500000] [--projects 20] [--calls 200] [--json]

Builds a flat store of N random unit rows (384-d) spread over P projects in a temporary folder
(as the memory index holds them: metadata project and kind), then, as one long-lived process (the
MCP server) does, CALLS times: one write's nearest search (`query_many` of one vector over its
project's and kind's rows, NEAREST of them), its one-row append, and one recall's filtered query
(`query` with a project). Prints each step's median and p95 ms (CPU of this process) and the
first search's apart (it reads the project's rows for the first time). No model, no events: the
vector store's part of the write path, separated from everything else a write does.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.index.flat import FlatStore  # noqa: E402

DIM = 384
NEAREST = 30  # compiler.memory.write.NEAREST


def unit(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIM), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def build(folder: Path, rows: int, projects: int) -> FlatStore:
    store, rng = FlatStore(folder, "memories"), np.random.default_rng(7)
    for start in range(0, rows, 20_000):
        count = min(20_000, rows - start)
        ids = [f"mem-{k}" for k in range(start, start + count)]
        store.add(ids, unit(rng, count), ["text"] * count,
                  [{"project": f"project-{k % projects:02d}", "kind": "memory"} for k in range(start, start + count)])
    return store


def run(rows: int, projects: int, calls: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="engram-flat-scale-"))
    try:
        started = time.perf_counter()
        build(folder, rows, projects).close()
        built = time.perf_counter() - started
        store, rng = FlatStore(folder, "memories"), np.random.default_rng(11)  # a new handle: as a server starts
        times: dict[str, list[float]] = {"nearest": [], "append": [], "recall_query": []}
        first = None
        for k in range(calls):
            project = f"project-{k % 3:02d}"  # an agent works in a few projects
            vector = unit(rng, 1)
            began = time.process_time()
            store.query_many(vector, NEAREST, {"$and": [{"project": project}, {"kind": "memory"}]})
            spent = (time.process_time() - began) * 1000
            if first is None:
                first = spent
            else:
                times["nearest"].append(spent)
            began = time.process_time()
            store.add([f"new-{k}"], vector, ["text"], [{"project": project, "kind": "memory"}])
            times["append"].append((time.process_time() - began) * 1000)
            began = time.process_time()
            store.query(unit(rng, 1)[0], 5, {"project": project})
            times["recall_query"].append((time.process_time() - began) * 1000)
        store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"rows": rows, "projects": projects, "calls": calls, "build_seconds": round(built, 1),
            "first_nearest_ms": round(first or 0.0, 2),
            **{f"{name}_ms": {"p50": round(statistics.median(t), 3), "p95": round(sorted(t)[int(len(t) * 0.95) - 1], 3)}
               for name, t in times.items()},
            "load": float(Path("/proc/loadavg").read_text().split()[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run(args.rows, args.projects, args.calls)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{figures['rows']:,} rows over {figures['projects']} projects (built in {figures['build_seconds']} s)")
    print(f"first nearest search     {figures['first_nearest_ms']} ms")
    for name in ("nearest", "append", "recall_query"):
        t = figures[f"{name}_ms"]
        print(f"{name:<24} p50 {t['p50']} ms · p95 {t['p95']} ms (CPU)")


if __name__ == "__main__":
    main()
