"""One long-lived memory handle on a large store, without the model: what a server's calls cost.

    python benchmarks/memory_handle.py [--memories 136000] [--store DIR] [--recalls 40] [--json]

Builds (once, kept with `--store`) a vault of N synthetic memories (`bench_memory.synthetic_memories`,
20 projects) through `write_memories` with the tests' hashing embedder: no model, so 136,000
memories take minutes instead of hours, and what is measured is everything a call does besides
the forward pass. Then, on a fresh copy, as the MCP server does in one process: a cold recall
(the checkpoint, the indexes), RECALLS warm recalls with a project and without reinforcing,
then three `store_memory` calls (the first one after reads in the same minute was where a
handle used to complete its derived views: O(store)). CPU seconds of this process. Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_memory import OBJECTS, SUBJECTS, VERBS, build_store  # noqa: E402
from compiler.core.settings import load_settings  # noqa: E402
from compiler.memory.input import MemoryInput  # noqa: E402
from compiler.memory.recall import recall  # noqa: E402
from compiler.memory.vault import VaultMemory  # noqa: E402
from compiler.memory.write import store_memory  # noqa: E402
from tests.conftest import FakeEmbedder  # noqa: E402


def cpu(call: Any) -> float:
    began = time.process_time()
    call()
    return time.process_time() - began


def measure(vault: Path, recalls: int) -> dict[str, Any]:
    rng = random.Random(5)
    queries = [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}" for _ in range(recalls)]
    with VaultMemory(vault, load_settings(vault), embedder=FakeEmbedder()) as memories:
        cold = cpu(lambda: recall(memories, "The payments API times out", 5, project="project-03", reinforce=False))
        warm = [cpu(lambda q=q, k=k: recall(memories, q, 5, project=f"project-{k % 3:02d}", reinforce=False)) * 1000
                for k, q in enumerate(queries)]
        stores = [cpu(lambda k=k: store_memory(memories, MemoryInput(
            content=f"The payments API now retries {k} times against Redis", project="project-01")))
                  for k in range(3)]
    return {"cold_recall_s": round(cold, 3),
            "warm_recall_ms": {"first": round(warm[0], 1), "p50": round(statistics.median(warm[1:]), 1),
                               "p95": round(sorted(warm[1:])[int(len(warm[1:]) * 0.95) - 1], 1)},
            "stores_s": [round(s, 3) for s in stores]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=136_000)
    parser.add_argument("--store", type=Path, help="keep the built store here and reuse it on the next run")
    parser.add_argument("--recalls", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-memory-handle-") as scratch:
        store = args.store or Path(scratch) / "store"
        if not (store / ".engram").exists():
            build_store(store, args.memories, FakeEmbedder())
        copy = Path(scratch) / "copy"
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns("_engram"))
        figures = {"memories": args.memories, **measure(copy, args.recalls),
                   "load": float(Path("/proc/loadavg").read_text().split()[0])}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    warm = figures["warm_recall_ms"]
    print(f"{figures['memories']:,} memories (hashing embedder), load {figures['load']}")
    print(f"cold recall {figures['cold_recall_s']} s CPU; warm recalls: the first {warm['first']} ms, then "
          f"p50 {warm['p50']} ms · p95 {warm['p95']} ms; three stores {figures['stores_s']} s CPU")


if __name__ == "__main__":
    main()
