"""A compile that runs at N memories: `python benchmarks/memory_pages.py [--memories 50000] [--json] [--keep DIR]`.

Stores bench_memory.py's synthetic memories with the hashing embedder of the unit tests (what a
compile costs besides embedding does not depend on the model), compiles once, then times, in
process: a compile after one more memory was stored (`engram memory add`), how many memory pages
it rendered and wrote, the no-op compile after it, and maintenance alone (`engram maintain`)
after one more memory, with how many memories it asked the index about again. Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench import log  # noqa: E402
from benchmarks.bench_memory import CHUNK, synthetic_memories  # noqa: E402
from compiler.core.settings import load_settings  # noqa: E402
from compiler.memory.input import MemoryInput  # noqa: E402
from compiler.memory.maintenance import run_maintenance  # noqa: E402
from compiler.memory.vault import VaultMemory  # noqa: E402
from compiler.memory.write import store_memory, write_memories  # noqa: E402
from compiler.pipeline.spine import compile_vault  # noqa: E402
from tests.conftest import FakeEmbedder  # noqa: E402


def timed_compile(vault: Path, embedder: FakeEmbedder) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    report = compile_vault(vault, load_settings(vault), embedder=embedder)
    return {"s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
            "written": len(report.written), "rendered": report.memories.get("pages_rendered"),
            "live": report.memories["live"]}


def run(count: int, vault: Path) -> dict[str, Any]:
    embedder = FakeEmbedder()
    if (vault / "engram.toml").is_file():
        log(f"reusing the memories stored in {vault}")
    else:
        (vault / ".obsidian").mkdir(parents=True)
        (vault / "engram.toml").write_text('now = "2026-11-30 12:00:00"\n')  # pinned: the pages do not move by the day
        log(f"storing {count} memories (hashing embedder)")
        with VaultMemory(vault, load_settings(vault), embedder=embedder) as memories:
            items = synthetic_memories(count)
            for start in range(0, count, CHUNK):
                write_memories(memories, items[start:start + CHUNK])
    log("first compile")
    first = timed_compile(vault, embedder)
    log("one memory added, compile")
    with VaultMemory(vault, load_settings(vault), embedder=embedder) as memories:
        store_memory(memories, MemoryInput(content="The quota service now runs on Nomad.", project="project-03"))
    added = timed_compile(vault, embedder)
    log("no-op compile")
    noop = timed_compile(vault, embedder)
    log("one more memory added, maintenance alone")
    with VaultMemory(vault, load_settings(vault), embedder=embedder) as memories:
        store_memory(memories, MemoryInput(content="The quota service pages on-call after two failed retries.",
                                           project="project-05"))
        cpu = time.process_time()
        report = run_maintenance(memories)
        maintained = {"cpu_s": round(time.process_time() - cpu, 2), "reconsidered": report.get("reconsidered")}
    return {"memories": count, "first_compile": first, "after_one_add": added, "noop": noop,
            "maintenance_after_one_add": maintained, "load_avg": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=50_000, help="memories stored (default 50000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="build the vault in DIR and leave it there, to profile; a DIR that holds one "
                             "from an earlier run is reused (its memories, plus one more)")
    args = parser.parse_args(argv)
    if args.keep:
        figures = run(args.memories, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="engram-memory-pages-") as workdir:
            figures = run(args.memories, Path(workdir) / "vault")
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        added, noop = figures["after_one_add"], figures["noop"]
        print(f"{figures['memories']} memories ({added['live']} live): compile after one memory added "
              f"{added['cpu_s']:.2f} s CPU / {added['s']:.2f} s wall, {added['rendered']} memory pages rendered, "
              f"{added['written']} written · no-op {noop['cpu_s']:.2f} s CPU · maintenance after one more memory "
              f"{figures['maintenance_after_one_add']['cpu_s']:.2f} s CPU · load {figures['load_avg']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
