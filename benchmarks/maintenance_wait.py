"""How long an agent's tool call waits for maintenance (issue 29: "maintenance never blocks").

    python benchmarks/maintenance_wait.py [--memories 50000] [--store DIR] [--json]

Builds (or reuses, with `--store DIR`) a store of N synthetic memories (bench_memory's), then on a
copy of it makes a full maintenance due (the pairs consolidation starts from and the last run's
marker dropped, as on a store imported and never maintained), starts `engram serve`, and calls
`recall_memory` every 50 ms (an agent's usual call) from the moment `initialize` is answered until the maintenance has
finished and a few calls more. Prints each call's round trip (the first apart: it also waits for
the server's warm-up; then max, p99, p50), the same client's calls against a server started with
`--no-maintenance` (what a call costs on its own), and how long the maintenance took. The worst
wait for maintenance is the slowest call over the control's median (the first over the control's
first). `--code DIR` runs the server from another checkout: the same store, before and after.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_memory import SUBJECTS, VERBS, build_store  # noqa: E402
from benchmarks.mcp_stdio import Served  # noqa: E402
from compiler.memory.index import KEYWORDS_FILE  # noqa: E402

PERIOD = 0.05  # seconds between two calls, as an agent in a busy loop
AFTER = 20  # calls made after the maintenance finished: the server's state once it is done
CONTROL = 300  # calls made without maintenance: enough to show a call's own rare slow ones


def make_maintenance_due(vault: Path) -> None:
    """Drops what the last maintenance left (its marker and the close pairs): the next one is full."""
    cache = vault / ".engram" / "cache"
    (cache / "maintenance.json").unlink(missing_ok=True)
    with sqlite3.connect(cache / KEYWORDS_FILE) as db:
        for table in ("close_meta", "close_rows", "close_pairs"):
            db.execute(f"DROP TABLE IF EXISTS {table}")


def timed_calls(vault: Path, maintenance: bool, limit: float, code: Path = ROOT) -> dict:
    """Starts `engram serve` on `vault` and calls recall_memory every PERIOD s; returns the round
    trips (ms) and when the maintenance marker appeared (s after `initialize` was answered)."""
    marker = vault / ".engram" / "cache" / "maintenance.json"
    marker.unlink(missing_ok=True)
    trips: list[float] = []
    finished_at = None
    with Served(code, vault, maintenance=maintenance) as server:
        server.initialize()
        began = time.perf_counter()
        after, wanted = 0, AFTER if maintenance else CONTROL
        while after < wanted and time.perf_counter() - began < limit:
            started = time.perf_counter()
            server.tool("recall_memory", {"query": f"what {SUBJECTS[len(trips) % len(SUBJECTS)].lower()} "
                                                   f"{VERBS[len(trips) % len(VERBS)]}?"})
            trips.append((time.perf_counter() - started) * 1000)
            if finished_at is None and (marker.exists() or not maintenance):
                finished_at = time.perf_counter() - began
            if finished_at is not None:
                after += 1
            time.sleep(max(0.0, PERIOD - (time.perf_counter() - started)))
    # The first call also waits for the server's warm-up (the model and the index load): apart.
    rest = trips[1:]
    return {"calls": len(trips), "first_ms": round(trips[0], 1), "max_ms": round(max(rest), 1),
            "p99_ms": round(statistics.quantiles(rest, n=100, method="inclusive")[98], 1), "p50_ms": round(statistics.median(rest), 1),
            "maintenance_s": finished_at and round(finished_at, 2), "over_100ms": sum(t > 100 for t in rest),
            # when the slowest came: [call number, ms], of len(trips) calls
            "slowest": sorted(([k, round(t, 1)] for k, t in enumerate(trips)), key=lambda kt: -kt[1])[:6]}


def run(count: int, store: Path | None, limit: float, code: Path = ROOT) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="engram-maintenance-wait-"))
    source = store or scratch / "store"
    if not (source / ".engram").exists():
        print(f"building a store of {count:,} memories in {source}…", file=sys.stderr)
        build_store(source, count)
    vault = scratch / "vault"
    shutil.copytree(source, vault)
    try:
        make_maintenance_due(vault)
        print("calls while a full maintenance runs…", file=sys.stderr)
        during = timed_calls(vault, maintenance=True, limit=limit, code=code)
        print("the same calls with maintenance off…", file=sys.stderr)
        control = timed_calls(vault, maintenance=False, limit=limit, code=code)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"memories": count, "code": str(code), "during_maintenance": during, "no_maintenance": control,
            "worst_wait_ms": round(max(during["max_ms"] - control["p50_ms"], during["first_ms"] - control["first_ms"]), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=50_000)
    parser.add_argument("--store", type=Path, help="keep the built store here and reuse it on the next run")
    parser.add_argument("--limit", type=float, default=600, help="seconds of calls at most")
    parser.add_argument("--code", type=Path, default=ROOT, help="run `engram serve` from this checkout (an A/B)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run(args.memories, args.store, args.limit, args.code.resolve())
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    during, control = figures["during_maintenance"], figures["no_maintenance"]
    print(f"memories                     {figures['memories']:,}")
    print(f"full maintenance at start    {during['maintenance_s']} s")
    print(f"recall_memory every {PERIOD * 1000:.0f} ms    first {during['first_ms']} ms, then max {during['max_ms']} ms · "
          f"p99 {during['p99_ms']} ms · p50 {during['p50_ms']} ms · {during['over_100ms']} of {during['calls'] - 1} "
          "over 100 ms")
    print(f"  with --no-maintenance      first {control['first_ms']} ms, then max {control['max_ms']} ms · "
          f"p99 {control['p99_ms']} ms · p50 {control['p50_ms']} ms")
    print(f"worst wait for maintenance   {figures['worst_wait_ms']} ms (target ≤ 100 ms)")


if __name__ == "__main__":
    main()
