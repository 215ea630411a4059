"""The memory keyword index alone at scale: what one recall's keyword search costs as rows grow.

    python benchmarks/keyword_scale.py [--rows 500000] [--projects 20] [--keep FILE] [--json]

Fills a `MemoryKeywordIndex` (FTS5, the product's class) with N rows made of real conversation
turns: every distinct turn of the LongMemEval and LoCoMo development sets in ../shared/data (cut
to 400 characters, about a stored memory's length), each with its neighbours in its session as
the near (±1) and far (±2) context, as `keyword_row` builds them; the turns repeat to reach N,
spread over P projects. Then asks the development sets' questions (the 40 LongMemEval ones and
the first 30 of each LoCoMo conversation) for recall's 60 keyword candidates, with a project and
without one, and prints CPU ms (median, p95) of:

- `search`: `MemoryKeywordIndex.search`, what recall calls;
- `walk`: counting the matches alone (`count(*)`), FTS5 walking the query's doclists;
- `first`: the first ranked match (`bm25()` with LIMIT 1): the walk plus bm25's per-statement
  work (it counts every phrase's rows over the whole table).

What `search` costs beyond `first` is bm25() on every match of the project. No model, no events.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.index.keywords import match_expression  # noqa: E402
from compiler.memory.index import TABLE, WEIGHTS, MemoryKeywordIndex  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LIMIT = 60  # compiler.memory.recall.POOL × 2
CUT = 400  # characters of a turn kept


def sessions() -> list[list[str]]:
    """Every session of the development sets as its turns' texts (LongMemEval's shared haystack sessions once)."""
    found: dict[tuple[str, ...], None] = {}
    for question in json.loads((DATA / "longmemeval-dev.json").read_text()):
        for session in question["haystack_sessions"]:
            found.setdefault(tuple(turn["content"][:CUT] for turn in session), None)
    for sample in json.loads((DATA / "locomo-dev.json").read_text()):
        talk = sample["conversation"]
        for key in sorted(k for k in talk if k.startswith("session_") and not k.endswith("date_time")):
            if isinstance(talk[key], list):
                found.setdefault(tuple(turn["text"][:CUT] for turn in talk[key]), None)
    return [list(s) for s in found]


def turn_rows() -> list[tuple[str, str, str]]:
    """Returns (turn, near context, far context) for every distinct turn."""
    rows, seen = [], set()
    for turns in sessions():
        for k, text in enumerate(turns):
            if text in seen:
                continue
            seen.add(text)
            near = "\n".join(turns[j] for j in (k - 1, k + 1) if 0 <= j < len(turns))
            far = "\n".join(turns[j] for j in (k - 2, k + 2) if 0 <= j < len(turns))
            rows.append((text, near, far))
    return rows


def questions() -> list[str]:
    asked = [q["question"] for q in json.loads((DATA / "longmemeval-dev.json").read_text())]
    for sample in json.loads((DATA / "locomo-dev.json").read_text()):
        asked += [qa["question"] for qa in sample["qa"]][:30]
    return [q for q in asked if match_expression(q)]


def fill(path: Path, rows: int, projects: int) -> None:
    turns, index, batch = turn_rows(), MemoryKeywordIndex(path), []
    for n in range(rows):
        text, near, far = turns[n % len(turns)]
        batch.append((f"mem-{n}", f"project-{n % projects:02d}", f"sha-{n}", "", text, near, far))
        if len(batch) == 5000 or n == rows - 1:
            index.replace([], batch)
            batch = []
            print(f"  {n + 1:,} rows", file=sys.stderr, flush=True)
    index.close()


def cpu_ms(call: Any) -> float:
    began = time.process_time()
    call()
    return (time.process_time() - began) * 1000


def measure(path: Path, project: str) -> dict[str, Any]:
    index = MemoryKeywordIndex(path)
    db = index._db  # the same connection the search uses
    first, last = index._range(project)
    times: dict[str, list[float]] = {"search": [], "walk": [], "first": [], "search_without_project": []}
    for question in questions():
        expression = match_expression(question)
        times["search"].append(cpu_ms(lambda: index.search(question, LIMIT, project)))
        times["walk"].append(cpu_ms(lambda: db.execute(f"SELECT count(*) FROM {TABLE} WHERE {TABLE} MATCH ? "
                                                       "AND rowid BETWEEN ? AND ?", (expression, first, last)).fetchall()))
        times["first"].append(cpu_ms(lambda: db.execute(f"SELECT rowid, bm25({TABLE}, {WEIGHTS}) FROM {TABLE} WHERE "
                                                        f"{TABLE} MATCH ? AND rowid BETWEEN ? AND ? LIMIT 1",
                                                        (expression, first, last)).fetchall()))
        times["search_without_project"].append(cpu_ms(lambda: index.search(question, LIMIT)))
    index.close()
    return {f"{name}_ms": {"p50": round(statistics.median(t), 1), "p95": round(sorted(t)[int(len(t) * 0.95) - 1], 1)}
            for name, t in times.items()} | {"questions": len(times["search"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="the index file: filled once, reused by the next run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-keyword-scale-") as scratch:
        path = args.keep or Path(scratch) / "keywords.sqlite"
        if not path.exists():
            fill(path, args.rows, args.projects)
        figures = {"rows": args.rows, "projects": args.projects, **measure(path, "project-03"),
                   "load": float(Path("/proc/loadavg").read_text().split()[0])}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{figures['rows']:,} rows over {figures['projects']} projects, {figures['questions']} questions, "
          f"load {figures['load']}")
    for name in ("search", "walk", "first", "search_without_project"):
        t = figures[f"{name}_ms"]
        print(f"{name:<24} p50 {t['p50']} ms · p95 {t['p95']} ms (CPU)")


if __name__ == "__main__":
    main()
