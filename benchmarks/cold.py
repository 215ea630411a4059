"""Cold starts: each command as a new process, ONNX against torch, and the MCP server's first contact.

    python benchmarks/cold.py                 # a table on stdout (progress on stderr)
    python benchmarks/cold.py --json          # one JSON object on stdout
    python benchmarks/cold.py --runs 5        # rounds of cold commands (default 3)
    python benchmarks/cold.py --code ../main  # time another checkout's code (before / after)

On a copy of vault-example/ (without its derived files) compiled once: `engram search`, `query`,
`vsearch`, `recall --no-reinforce` and `memory add` each run as a new process, one of each per
round, rounds repeated (`--runs`); each command's median wall seconds, CPU seconds (its own
rusage from wait4) and peak RSS (its VmHWM, polled: a vfork+exec child inherits our ru_maxrss),
and its median ratio to the cold `search` of the same round. One unmeasured round first, so a
first-use cost (the ONNX export and its optimized copy, the page cache, the bytecode: the children
may write it even when PYTHONDONTWRITEBYTECODE is set here) is not counted.

Then ONNX Runtime against sentence-transformers on the same ~500 paragraphs (this checkout's docs
and example notes), alternating, each the median of its runs: texts per second, their ratio, and
the minimum cosine between the two paths' sentence vectors and token vectors.

Then `engram serve` (maintenance on, as users run it) as a new process, spoken to over stdio as a
client does: seconds from process start to the `initialize` answer and to the first
`recall_memory` result (median of `--runs`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.mcp_stdio import Served, child_env  # noqa: E402

EXAMPLE = ROOT / "vault-example"
DERIVED = {".": ("_engram",), ".engram": ("cache", "journal.jsonl", "lock")}
COMMANDS = {
    "search": ["search", "incident runbook", "-n", "3", "--json"],
    "query": ["query", "how do we deploy the payments service?", "-n", "3", "--json"],
    "vsearch": ["vsearch", "how do we deploy the payments service?", "-n", "3", "--json"],
    "recall": ["recall", "--no-reinforce", "how do we roll back a deploy?", "-n", "3", "--json"],
    "memory_add": ["memory", "add", "--json"],  # + a new sentence each run
}
TEXTS = 500


def log(message: str) -> None:
    print(f"[cold] {message}", file=sys.stderr, flush=True)


def copy_example(target: Path) -> Path:
    def derived(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n in DERIVED.get(Path(folder).relative_to(EXAMPLE).as_posix(), ())]
    shutil.copytree(EXAMPLE, target, ignore=derived)
    return target


def _watch_peak(pid: int, peak: list[float], done: threading.Event) -> None:
    status = Path(f"/proc/{pid}/status")
    while not done.wait(0.01):
        try:
            line = next(l for l in status.read_text().splitlines() if l.startswith("VmHWM:"))
        except (OSError, StopIteration):
            continue
        peak[0] = max(peak[0], int(line.split()[1]) / 1024)


def run_engram(code: Path, args: list[str]) -> dict[str, float]:
    """Runs `python -m compiler ARGS` as a new process; returns wall s, CPU s and peak RSS MB."""
    peak, done = [0.0], threading.Event()
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "compiler", *args], stdout=subprocess.DEVNULL,
                                   stderr=errors, env=child_env(code), cwd=code)
        watcher = threading.Thread(target=_watch_peak, args=(process.pid, peak, done), daemon=True)
        watcher.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        watcher.join()
        if process.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"engram {' '.join(args)} exited {process.returncode}: "
                               f"{errors.read().decode(errors='replace')[-2000:]}")
    return {"s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": peak[0]}


def command_args(name: str, vault: Path, run: int) -> list[str]:
    args = [*COMMANDS[name], "--vault", str(vault)]
    if name == "memory_add":
        args.append(f"The cold benchmark stored note number {run} at {time.time_ns()}.")
    return args


def cold_commands(code: Path, vault: Path, runs: int) -> dict[str, dict[str, float]]:
    rounds: list[dict[str, dict[str, float]]] = []
    for run in range(runs + 1):
        figures = {name: run_engram(code, command_args(name, vault, run)) for name in COMMANDS}
        log(f"round {run}{' (warm-up, not counted)' if run == 0 else ''}: "
            + ", ".join(f"{n} {f['s']:.2f}s" for n, f in figures.items()))
        if run:
            rounds.append(figures)
    result = {}
    for name in COMMANDS:
        result[name] = {key: statistics.median(r[name][key] for r in rounds) for key in ("s", "cpu_s", "peak_rss_mb")}
        result[name]["vs_search"] = statistics.median(r[name]["s"] / r["search"]["s"] for r in rounds)
    return result


def paragraphs(count: int) -> list[str]:
    """The first `count` paragraphs (40 characters or more) of the example notes and the docs."""
    found = []
    files = sorted(p for p in EXAMPLE.rglob("*.md") if "_engram" not in p.parts) + sorted((ROOT / "docs").rglob("*.md"))
    for path in files:
        found += [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if len(p.strip()) >= 40]
    return found[:count]


def onnx_vs_torch(code: Path, runs: int) -> dict[str, Any] | None:
    """ONNX Runtime against sentence-transformers on the same texts, in this process."""
    sys.path.insert(0, str(code))
    try:
        from compiler.core.settings import BUNDLED_MODEL
        from compiler.embed.minilm import SentenceTransformerEmbedder
        from compiler.embed.onnx_minilm import OnnxEmbedder
    except ImportError:
        log("this checkout has no ONNX path: skipped")
        return None
    import numpy as np

    texts = paragraphs(TEXTS)
    onnx, torch = OnnxEmbedder.load(BUNDLED_MODEL), SentenceTransformerEmbedder(BUNDLED_MODEL)
    onnx.embed(texts[:8]), torch.embed(texts[:8])  # first-call costs out of the timing
    times: dict[str, list[float]] = {"onnx": [], "torch": []}
    for _ in range(max(runs, 2)):
        for name, model in (("onnx", onnx), ("torch", torch)):
            start = time.perf_counter()
            vectors = model.embed(texts)
            times[name].append(time.perf_counter() - start)
            if name == "onnx":
                a = vectors
            else:
                b = vectors
        log(f"{len(texts)} texts: onnx {times['onnx'][-1]:.2f}s, torch {times['torch'][-1]:.2f}s")
    cosines = [float(np.min(np.sum(a * b, axis=1)))]
    for (pa, ta, sa), (pb, tb, sb) in zip(onnx.embed_tokens(texts[:100]), torch.embed_tokens(texts[:100])):
        assert pa == pb, "the two paths cut a text into different word pieces"
        cosines += [float(np.min(np.sum(ta * tb, axis=1))), float(sa @ sb)]
    onnx_rate = len(texts) / statistics.median(times["onnx"])
    torch_rate = len(texts) / statistics.median(times["torch"])
    return {"texts": len(texts), "onnx_texts_per_s": onnx_rate, "torch_texts_per_s": torch_rate,
            "ratio": onnx_rate / torch_rate, "min_cosine": min(cosines)}


def mcp_first_contact(code: Path, vault: Path) -> dict[str, float]:
    """Seconds from starting `engram serve` to its `initialize` answer and to a first recall result."""
    with Served(code, vault) as server:
        server.initialize()
        initialized = time.perf_counter() - server.started
        server.tool("recall_memory", {"query": "how do we roll back a deploy?"})
        return {"initialize_s": initialized, "first_recall_s": time.perf_counter() - server.started}


def run(code: Path, runs: int, workdir: Path) -> dict[str, Any]:
    load_start = os.getloadavg()[0]
    vault = copy_example(workdir / "vault")
    log(f"compiling a copy of vault-example/ with {code}")
    subprocess.run([sys.executable, "-m", "compiler", "compile", "-q", str(vault)], check=True, env=child_env(code),
                   stdout=subprocess.DEVNULL, cwd=code)
    cold = cold_commands(code, vault, runs)
    onnx = onnx_vs_torch(code, runs)
    log("MCP first contact")
    contacts = [mcp_first_contact(code, vault) for _ in range(runs)]
    mcp = {key: statistics.median(c[key] for c in contacts) for key in ("initialize_s", "first_recall_s")}
    return {"cold": cold, "onnx": onnx, "mcp": mcp,
            "machine": {"load_avg_start": load_start, "load_avg_end": os.getloadavg()[0], "cpus": os.cpu_count()}}


def table(f: dict[str, Any]) -> str:
    lines = ["| cold command | wall s | CPU s | peak RSS MB | × cold search |", "| --- | --- | --- | --- | --- |"]
    for name, v in f["cold"].items():
        lines.append(f"| {name} | {v['s']:.2f} | {v['cpu_s']:.2f} | {v['peak_rss_mb']:.0f} | {v['vs_search']:.2f} |")
    if f["onnx"]:
        o = f["onnx"]
        lines += ["", (f"ONNX {o['onnx_texts_per_s']:.1f} texts/s, torch {o['torch_texts_per_s']:.1f} texts/s "
                       f"({o['ratio']:.2f}×) on {o['texts']} texts; min cosine {o['min_cosine']:.6f}")]
    m, machine = f["mcp"], f["machine"]
    lines += [f"MCP: initialize {m['initialize_s']:.2f} s, first recall_memory {m['first_recall_s']:.2f} s after start",
              f"load average {machine['load_avg_start']:.2f} → {machine['load_avg_end']:.2f} on {machine['cpus']} CPUs"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--runs", type=int, default=3, help="rounds of cold commands and MCP starts (default 3)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose code runs (default: this one)")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engram-cold-") as workdir:
        figures = run(options.code.resolve(), options.runs, Path(workdir))
    print(json.dumps(figures, indent=2, sort_keys=True) if options.json else table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
