"""Where a full compile's time goes: `python benchmarks/stages.py [--notes 1000] [--json]`.

Generates bench.py's synthetic vault, compiles it once with the bundled model while each stage
function is wrapped in a timer (wall and CPU seconds of this process), then embeds the same texts
in one call, as bench.py does: the stages beside "pure embedding" show what a compile spends
besides the model, and how many OS threads it ran (ONNX Runtime's intra-op pool). Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import compiler.core.files as files  # noqa: E402
import compiler.notes.links as links  # noqa: E402
import compiler.pipeline.graph as graph  # noqa: E402
import compiler.pipeline.index as index  # noqa: E402
import compiler.pipeline.inputs as inputs  # noqa: E402
import compiler.pipeline.memories as memories  # noqa: E402
import compiler.pipeline.notes as notes  # noqa: E402
import compiler.pipeline.spine as spine  # noqa: E402
import compiler.render.notes as render  # noqa: E402
from benchmarks.bench import compiled_texts, generate_vault, log  # noqa: E402
from compiler.core.settings import load_settings  # noqa: E402
from compiler.embed.embedder import load_embedder  # noqa: E402

STAGES = [(notes, "parse_notes"), (links, "resolve_links"), (index, "embed_sections"), (index, "update_indexes"),
          (graph, "update_related"), (graph, "save_graph"), (memories, "compile_memories"),
          (render, "render_changed_note_pages"), (files, "write_pages"), (spine, "save_state"), (inputs, "gather_inputs"),
          (spine, "_rescan")]


def wrap(module: Any, name: str, times: dict[str, list[float]]) -> None:
    """Replaces `module.name` by itself plus a timer (the spine imports the stages when it runs)."""
    original = getattr(module, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent = times.setdefault(name, [0.0, 0.0])
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu
    setattr(module, name, timed)


def run(count: int, workdir: Path) -> dict[str, Any]:
    vault = workdir / "vault"
    generate_vault(vault, count, seed=7)
    settings = load_settings(vault)
    embedder = load_embedder(settings.model)
    embedder.embed(["warm up the model once"])
    times: dict[str, list[float]] = {}
    for module, name in STAGES:
        wrap(module, name, times)
    threads, done = [0], threading.Event()

    def count_threads() -> None:
        while not done.wait(0.05):
            threads[0] = max(threads[0], len(os.listdir("/proc/self/task")) if Path("/proc/self/task").is_dir() else 0)
    threading.Thread(target=count_threads, daemon=True).start()
    log(f"full compile of {count} notes, stages timed")
    load_start = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    report = spine.compile_vault(vault, settings)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done.set()
    texts = compiled_texts(vault)
    log(f"pure embedding of {len(texts)} texts")
    embed_wall, embed_cpu = time.perf_counter(), time.process_time()
    embedder.embed(texts)
    embed_wall, embed_cpu = time.perf_counter() - embed_wall, time.process_time() - embed_cpu
    stages = {name: {"s": round(w, 3), "cpu_s": round(c, 3)} for name, (w, c) in sorted(times.items(), key=lambda kv: -kv[1][0])}
    stages["other"] = {"s": round(wall - sum(w for w, _ in times.values()), 3),
                       "cpu_s": round(cpu - sum(c for _, c in times.values()), 3)}
    return {"notes": report.notes, "sections": report.sections, "texts": len(texts), "compile_s": wall,
            "compile_cpu_s": cpu, "embedding_s": embed_wall, "embedding_cpu_s": embed_cpu,
            "compile_vs_embedding": wall / embed_wall, "compile_vs_embedding_cpu": cpu / embed_cpu,
            "stages": stages, "peak_threads": threads[0],
            "onnx_intra_op_threads": _intra_op_threads(embedder),
            "load_avg_start": round(load_start, 2), "load_avg_end": round(os.getloadavg()[0], 2)}


def _intra_op_threads(embedder: Any) -> int | None:
    """Returns the ONNX session's intra-op thread setting (0: one per physical core), or None off ONNX."""
    session = getattr(embedder, "_session", None)
    return session.get_session_options().intra_op_num_threads if session is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=1000, help="synthetic vault size (default 1000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engram-stages-") as workdir:
        figures = run(args.notes, Path(workdir))
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{figures['notes']} notes, {figures['sections']} sections · load {figures['load_avg_start']} → "
          f"{figures['load_avg_end']} · peak {figures['peak_threads']} threads · ONNX intra-op threads "
          f"{figures['onnx_intra_op_threads']} (0 = one per core)")
    print(f"  {'compile':<22}{figures['compile_s']:9.2f} s wall {figures['compile_cpu_s']:9.2f} s CPU")
    print(f"  {'pure embedding':<22}{figures['embedding_s']:9.2f} s wall {figures['embedding_cpu_s']:9.2f} s CPU")
    print(f"  {'ratio':<22}{figures['compile_vs_embedding']:9.3f}×     {figures['compile_vs_embedding_cpu']:9.3f}×")
    for name, spent in figures["stages"].items():
        print(f"  {name:<22}{spent['s']:9.2f} s wall {spent['cpu_s']:9.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
