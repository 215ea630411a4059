"""The memory vectors on a Chroma server against the embedded flat store, as the store grows.

    python benchmarks/chroma_scale.py [--sizes 5000,50000,500000] [--projects 20] [--calls 100] [--json]

Starts a real `chroma run` on a free local port (its data in a temporary folder), and fills two
stores with the same rows through the product's own classes: the embedded flat store
(`compiler.index.flat.FlatStore`, what a vault uses by default) and the server's collection
(`compiler.index.vector_index.open_vectors` with a `chroma_url`, what `--chroma-url` uses). At each
size it times, per call, what a memory write and a recall ask of the vectors:

- a write's nearest search: the 30 nearest rows of its project and kind (`query_many`), for a
  near copy of a stored row (a memory said again in other words);
- a recall's candidates: the 60 nearest rows of its project (`query`), for a vector near a topic;
- a one-row append.

The server's answers are compared with the flat store's, which are exact: "recall@k" is the share
of the exact k nearest the server returns (HNSW is approximate). Rows are 384-d unit vectors in
topics (2,000 centres, each row its centre plus noise: rows of one topic sit at cosine ~0.5,
unrelated rows at ~0), spread over the projects; 90% of kind "memory".

Times are wall milliseconds of this process (the server works in its own process, so CPU time
here would miss it), median and p95, with the load average; the server's peak RSS and its data
folder's size are read at each size. Nothing here asserts a time.
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
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.index.flat import FlatStore  # noqa: E402
from compiler.index.vector_index import open_vectors  # noqa: E402
from tests.chroma_run import CHROMA, ChromaDidNotStart, chroma_server  # noqa: E402

DIM = 384
TOPICS = 2000
NEAREST = 30  # compiler.memory.write.NEAREST: a write's nearest search
CANDIDATES = 60  # compiler.memory.recall.POOL × 2: a recall's nearest vectors
BATCH = 5000  # rows added per call while filling


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


class Rows:
    """Rows in topics, generated on demand in the same order for both stores."""

    def __init__(self, projects: int, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        self.centres = unit(self.rng.standard_normal((TOPICS, DIM)))
        self.projects = projects
        self.topic_of: list[int] = []

    def noisy(self, centres: np.ndarray, noise: float) -> np.ndarray:
        return unit(centres + noise * self.rng.standard_normal(centres.shape) / np.sqrt(DIM))

    def next(self, start: int, count: int) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
        topics = self.rng.integers(0, TOPICS, count)
        self.topic_of += topics.tolist()
        ids = [f"mem-{k}" for k in range(start, start + count)]
        metadatas = [{"project": self.project(k), "kind": "memory" if k % 10 else "failure"}
                     for k in range(start, start + count)]
        return ids, self.noisy(self.centres[topics], 1.0), metadatas

    def project(self, k: int) -> str:
        return f"project-{k % self.projects:02d}"


def overlap(exact: list[str], approximate: list[str]) -> float:
    return len(set(exact) & set(approximate)) / len(exact) if exact else 1.0


def measure(flat: FlatStore, server: Any, rows: Rows, size: int, calls: int, added: int) -> dict[str, Any]:
    """Times `calls` writes' nearest searches, appends and recalls' candidate queries on both stores."""
    times: dict[str, list[float]] = {f"{store}_{step}": [] for store in ("flat", "server")
                                     for step in ("nearest", "append", "recall")}
    nearest_recall, candidates_recall = [], []
    for call in range(calls):
        project = rows.project(call % 3)  # an agent works in a few projects
        source = int(rows.rng.integers(0, size // rows.projects)) * rows.projects + call % 3  # a row of that project
        write = rows.noisy(flat.vectors([f"mem-{source}"])[f"mem-{source}"][None, :], 0.3)  # cosine ~0.9 to it
        question = rows.noisy(rows.centres[[rows.topic_of[source]]], 1.5)
        where = {"$and": [{"project": project}, {"kind": "memory"}]}
        answers: dict[str, Any] = {}
        for name, store in (("flat", flat), ("server", server)):
            began = time.perf_counter()
            near = store.query_many(write, NEAREST, where)[0]
            times[f"{name}_nearest"].append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            hits = store.query(question[0], CANDIDATES, {"project": project})
            times[f"{name}_recall"].append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            store.add([f"new-{added + call}"], write, ["text"], [{"project": project, "kind": "memory"}])
            times[f"{name}_append"].append((time.perf_counter() - began) * 1000)
            answers[name] = ([i for i, _ in near], [h.id for h in hits])
        nearest_recall.append(overlap(answers["flat"][0], answers["server"][0]))
        candidates_recall.append(overlap(answers["flat"][1], answers["server"][1]))
    return {**{f"{name}_ms": {"p50": round(statistics.median(t), 2), "p95": round(sorted(t)[int(len(t) * 0.95) - 1], 2)}
               for name, t in times.items()},
            "server_recall_at_30_nearest": round(statistics.mean(nearest_recall), 4),
            "server_recall_at_60_candidates": round(statistics.mean(candidates_recall), 4),
            "load": float(Path("/proc/loadavg").read_text().split()[0])}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def folder_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20, 1)


def run(sizes: list[int], projects: int, calls: int) -> dict[str, Any]:
    if not CHROMA.is_file():
        raise SystemExit(f"the chroma CLI is not installed next to {sys.executable} (make install)")
    work = Path(tempfile.mkdtemp(prefix="engram-chroma-scale-"))
    try:
        with chroma_server(work) as (url, pid):
            flat, server = FlatStore(work / "flat", "memories"), open_vectors(work / "cache", f"{url}/bench", "memories")
            rows, filled, figures = Rows(projects), 0, []
            fill_seconds = {"flat": 0.0, "server": 0.0}
            for size in sorted(sizes):
                while filled < size:
                    count = min(BATCH, size - filled)
                    ids, vectors, metadatas = rows.next(filled, count)
                    for name, store in (("flat", flat), ("server", server)):
                        began = time.perf_counter()
                        store.add(ids, vectors, ["text"] * count, metadatas)
                        fill_seconds[name] += time.perf_counter() - began
                    filled += count
                    print(f"  {filled:,} rows", file=sys.stderr, flush=True)
                figure = {"rows": size, **measure(flat, server, rows, size, calls, filled),
                          "fill_rows_per_second": {name: round(filled / s) for name, s in fill_seconds.items()},
                          "server_peak_rss_mb": peak_rss_mb(pid),
                          "server_data_mb": folder_mb(work / "data"), "flat_data_mb": folder_mb(work / "flat")}
                figures.append(figure)
                print(f"measured at {size:,}", file=sys.stderr, flush=True)
            flat.close()
    except ChromaDidNotStart as error:
        raise SystemExit(f"chroma run did not start: {error}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"projects": projects, "calls": calls, "sizes": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,50000,500000", help="comma-separated row counts, measured in turn")
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run([int(s) for s in args.sizes.split(",")], args.projects, args.calls)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{'rows':>8} {'step':<8} {'flat p50/p95 ms':>18} {'server p50/p95 ms':>19}")
    for f in figures["sizes"]:
        for step in ("nearest", "recall", "append"):
            a, b = f[f"flat_{step}_ms"], f[f"server_{step}_ms"]
            print(f"{f['rows']:>8,} {step:<8} {a['p50']:>8} / {a['p95']:<8} {b['p50']:>8} / {b['p95']:<8}")
        print(f"{'':>8} server recall@30 of a write's nearest {f['server_recall_at_30_nearest']}, "
              f"recall@60 of recall's candidates {f['server_recall_at_60_candidates']}; "
              f"fill rows/s {f['fill_rows_per_second']}; server peak RSS {f['server_peak_rss_mb']} MB, "
              f"data {f['server_data_mb']} MB (flat {f['flat_data_mb']} MB); load {f['load']}")


if __name__ == "__main__":
    main()
