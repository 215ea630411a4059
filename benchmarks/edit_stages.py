"""Where one edit's compile goes, stage by stage: `python benchmarks/edit_stages.py VAULT [--edits 3] [--json]`.

VAULT is a vault built with the hashing embedder of the unit tests (`noop.py --keep DIR` leaves
one in DIR/vault). Each round appends a paragraph to one note (a different one each round, chosen
by a fixed seed) and compiles in a fresh process, with every stage function the spine calls
wrapped in a CPU timer (`time.process_time`, this process's threads only: the figure to compare on
a shared machine); then a no-op compile, in a fresh process too. Prints each stage's median over
the rounds, the whole compile's CPU and wall seconds and the peak RSS of the compiling process
(imports included). The vault keeps the paragraphs. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# (module, function): what `compile_vault` and `_build` call, each where the spine finds it when it
# runs (the stages are imported inside `_build`, so wrapping the module's attribute is enough).
STAGES = [
    ("compiler.pipeline.spine", "unchanged_build"), ("compiler.pipeline.spine", "previous_build"),
    ("compiler.wiki.navigation", "refresh_navigation"), ("compiler.pipeline.spine", "_scan"),
    ("compiler.pipeline.notes", "parse_notes"), ("compiler.notes.links", "vault_index"),
    ("compiler.render.notes", "template_environment"), ("compiler.pipeline.note_pages", "render_mark"),
    ("compiler.pipeline.graph", "notes_digest"), ("compiler.notes.graph_store", "stored_links"),
    ("compiler.notes.links", "resolve_links"), ("compiler.pipeline.index", "SectionVectors"),
    ("compiler.pipeline.index", "update_indexes"), ("compiler.pipeline.graph", "update_related"),
    ("compiler.pipeline.graph", "graph_changes"), ("compiler.notes.graph_store", "save_graph"),
    ("compiler.pipeline.memories", "compile_memories"), ("compiler.index.vector_index", "bring_chroma_in_step"),
    ("compiler.pipeline.index", "compact_token_vectors"), ("compiler.wiki.lint", "lint_wiki"),
    ("compiler.render.notes", "VaultView"), ("compiler.pipeline.memory_pages", "KeptPages"),
    ("compiler.pipeline.note_pages", "notes_to_digest"), ("compiler.render.notes", "render_changed_note_pages"),
    ("compiler.core.files", "write_pages"), ("compiler.pipeline.memory_pages", "page_records"),
    ("compiler.pipeline.spine", "_page_hashes"), ("compiler.pipeline.spine", "save_state"),
    ("compiler.pipeline.spine", "gather_inputs"), ("compiler.pipeline.spine", "save_inputs"),
    ("compiler.pipeline.spine", "forget_inputs"),
]


def _wrap(module: Any, name: str, times: dict[str, float]) -> None:
    """Replaces `module.name` by itself plus a CPU timer (classes too: their construction is timed)."""
    original = getattr(module, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        cpu = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            times[name] = times.get(name, 0.0) + time.process_time() - cpu
    setattr(module, name, timed)


def compile_once(vault: Path) -> dict[str, Any]:
    """Compiles `vault` in this process with the stages timed; returns the figures (the child's part)."""
    from compiler.core.settings import load_settings
    from compiler.pipeline import spine
    from tests.conftest import FakeEmbedder

    times: dict[str, float] = {}
    for module_name, name in STAGES:
        _wrap(importlib.import_module(module_name), name, times)
    settings = load_settings(vault)
    wall, cpu = time.perf_counter(), time.process_time()
    report = spine.compile_vault(vault, settings, embedder=FakeEmbedder())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stages = {name: round(spent, 3) for name, spent in times.items()}
    stages["(rest of the spine)"] = round(cpu - sum(times.values()), 3)
    return {"cpu_s": round(cpu, 3), "s": round(wall, 3), "changed": len(report.changed), "written": len(report.written),
            "embedded": report.embedded, "stages": stages,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _child(vault: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, __file__, "--child", str(vault)], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"the compile failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def _notes(vault: Path) -> list[Path]:
    """The synthetic vault's notes (its folders never start with "." or "_")."""
    found = []
    for folder, dirs, files in os.walk(vault):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [Path(folder, f) for f in sorted(files) if f.endswith(".md")]
    return found


def run(vault: Path, edits: int, seed: int) -> dict[str, Any]:
    from benchmarks.bench import append_paragraph, log

    notes = _notes(vault)
    rng = random.Random(seed)
    log("a first compile: whatever the vault holds that the last build did not")
    first = _child(vault)
    rounds, noops = [], []
    for number in range(edits):
        note = rng.choice(notes)
        append_paragraph(note, seed + number)
        log(f"edit {number + 1}/{edits}: {note.relative_to(vault)}")
        rounds.append(_child(vault))
        log(f"  {rounds[-1]['cpu_s']:.2f} s CPU; a no-op after it")
        noops.append(_child(vault))
    names = sorted({n for r in rounds for n in r["stages"]}, key=lambda n: -statistics.median(
        r["stages"].get(n, 0.0) for r in rounds))
    return {"vault": str(vault), "edits": edits, "first_cpu_s": first["cpu_s"],
            "edit_cpu_s": statistics.median(r["cpu_s"] for r in rounds),
            "edit_s": statistics.median(r["s"] for r in rounds),
            "edit_cpu_runs_s": [r["cpu_s"] for r in rounds],
            "edit_peak_rss_mb": max(r["peak_rss_mb"] for r in rounds),
            "edit_written": [r["written"] for r in rounds],
            "noop_cpu_s": statistics.median(r["cpu_s"] for r in noops), "noop_cpu_runs_s": [r["cpu_s"] for r in noops],
            "noop_peak_rss_mb": max(r["peak_rss_mb"] for r in noops),
            "stages_cpu_s": {n: statistics.median(r["stages"].get(n, 0.0) for r in rounds) for n in names},
            "stage_runs_cpu_s": {n: [r["stages"].get(n, 0.0) for r in rounds] for n in names},
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path, help="a vault built with the hashing embedder (noop.py --keep DIR: DIR/vault)")
    parser.add_argument("--edits", type=int, default=3, help="edited compiles to time (default 3)")
    parser.add_argument("--seed", type=int, default=29, help="chooses the notes edited (default 29)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(compile_once(args.vault)))
        return 0
    figures = run(args.vault, args.edits, args.seed)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"one note edited: {figures['edit_cpu_s']:.2f} s CPU median {figures['edit_cpu_runs_s']} "
          f"({figures['edit_s']:.2f} s wall), peak RSS {figures['edit_peak_rss_mb']:.0f} MB · no-op "
          f"{figures['noop_cpu_s']:.2f} s CPU {figures['noop_cpu_runs_s']} · load {figures['load_avg']}")
    for name, spent in figures["stages_cpu_s"].items():
        print(f"  {name:<28}{spent:8.3f} s CPU   {figures['stage_runs_cpu_s'][name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
