"""Every performance figure in one table: `python benchmarks/table.py [--quick] [--json]` (`make bench`).

Runs the benchmarks as child processes, each printing one JSON object — bench.py (compile against
pure embedding, the no-op at its size, cold search), noop.py (the no-op at 10,000 and at 100,000 notes),
bench_memory.py at two sizes (store rates, no-op, recall p50/p95, compile RSS), cold.py when this
checkout has it (cold commands against cold search, ONNX against torch, the MCP server's start),
bench_wiki.py (ingest, page writes and lint of a 1,000-page wiki), lint_quality.py (lint's
precision and recall on a labelled wiki), redaction.py (redaction against detect-secrets) and
maintenance_wait.py (how long a tool call waits for a full maintenance at the larger size) —
then prints one table of figures, their targets and ratios, with the load average, and writes the
same as JSON to benchmarks/results.json (`--out`). A figure whose benchmark is missing or failed
reads "not measured". `--quick` runs small sizes (minutes, for development: the figures are not the
targets' sizes and the table says so). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FULL = {"notes": 1000, "noop_notes": 10_000, "noop_notes_large": 100_000, "memories": (5_000, 50_000), "queries": 100,
        "cold_runs": 3,
        "wiki_pages": 1000}
QUICK = {"notes": 150, "noop_notes": 1_000, "noop_notes_large": 3_000, "memories": (300, 1_000), "queries": 20,
         "cold_runs": 1, "wiki_pages": 150}


def child(script: str, *args: str) -> dict[str, Any] | None:
    """Runs `benchmarks/SCRIPT ARGS --json`; returns its JSON, or None (with the reason on stderr)."""
    path = HERE / script
    if not path.is_file():
        print(f"table: {script} is not in this checkout: its figures are not measured", file=sys.stderr)
        return None
    print(f"table: running {script} {' '.join(args)}", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, str(path), *args, "--json"], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        print(f"table: {script} exited {done.returncode}: its figures are not measured", file=sys.stderr)
        return None
    try:
        return json.loads(done.stdout)
    except ValueError:
        print(f"table: {script} printed no JSON: its figures are not measured", file=sys.stderr)
        return None


def benchmarks(sizes: dict[str, Any]) -> dict[str, Callable[[], dict[str, Any] | None]]:
    """Each benchmark of the table by name, as a call that runs it."""
    small, large = sizes["memories"]
    return {
        "bench": lambda: child("bench.py", "--notes", str(sizes["notes"])),
        "noop": lambda: child("noop.py", "--notes", str(sizes["noop_notes"])),
        "noop_large": lambda: child("noop.py", "--notes", str(sizes.get("noop_notes_large", 100_000))),
        "memory_small": lambda: child("bench_memory.py", "--memories", str(small), "--queries", str(sizes["queries"])),
        "memory_large": lambda: child("bench_memory.py", "--memories", str(large), "--queries", str(sizes["queries"])),
        "cold": lambda: child("cold.py", "--runs", str(sizes["cold_runs"])),
        "wiki": lambda: child("bench_wiki.py", "--pages", str(sizes.get("wiki_pages", 1000))),
        "lint_quality": lambda: child("lint_quality.py"),
        "secrets": lambda: child("redaction.py"),
        "maintenance_wait": lambda: child("maintenance_wait.py", "--memories", str(large)),
    }


def commit() -> str | None:
    """The checkout's commit, so a saved figure says which code it measured."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def measure(sizes: dict[str, Any], results: dict[str, Any] | None = None, names: list[str] | None = None) -> dict[str, Any]:
    """Runs the named benchmarks (all by default) into results; each records its commit and load average."""
    results = dict(results or {})
    runs = dict(results.get("runs") or {})
    load_start = os.getloadavg()
    started = time.perf_counter()
    for name, run in benchmarks(sizes).items():
        if names is not None and name not in names:
            continue
        load, began = os.getloadavg()[0], time.perf_counter()
        results[name] = run()
        runs[name] = {"commit": commit(), "load_avg_start": round(load, 2), "load_avg_end": round(os.getloadavg()[0], 2),
                      "seconds": round(time.perf_counter() - began, 1)}
    results["runs"] = runs
    results["machine"] = {"cpus": os.cpu_count(), "load_avg_start": [round(x, 2) for x in load_start],
                          "load_avg_end": [round(x, 2) for x in os.getloadavg()],
                          "seconds": round(time.perf_counter() - started, 1)}
    results["sizes"] = {**sizes, "memories": list(sizes["memories"])}
    return results


def get(data: Any, *keys: Any) -> Any:
    """Returns data[k1][k2]…, or None when any step is missing."""
    for key in keys:
        if not isinstance(data, dict) or key not in data or data[key] is None:
            return None
        data = data[key]
    return data


Row = tuple[str, Any, Callable[[Any], str], str]  # label, value, format, target


def rows(r: dict[str, Any]) -> list[Row]:
    """Returns the table's rows: what, the measured value, how to show it, the target."""
    sizes = r["sizes"]
    small, large = sizes["memories"]
    sec = lambda v: f"{v:.2f} s"  # noqa: E731
    times = lambda v: f"{v:.2f}×"  # noqa: E731
    rate = lambda v: f"{v:.1f}/s"  # noqa: E731
    mb = lambda v: f"{v:.0f} MB"  # noqa: E731
    bench, noop, ms_, ml = r["bench"], r["noop"], r["memory_small"], r["memory_large"]
    cold = r["cold"]
    onnx = get(cold, "onnx")
    out: list[Row] = [
        (f"full compile / pure embedding, wall ({sizes['notes']} notes)", get(bench, "synthetic", "compile_vs_embedding"),
         times, "≤ 1.10×"),
        (f"full compile / pure embedding, CPU ({sizes['notes']} notes)",
         get(bench, "synthetic", "compile_vs_embedding_cpu"), times, ""),
        (f"no-op compile, {sizes['notes']} notes (in process)", get(bench, "noop", "compile_s"), sec, ""),
        (f"no-op compile, {sizes['notes']} notes (new process)", get(bench, "cli", "compile_noop", "s"), sec, ""),
        (f"no-op compile, {sizes['noop_notes']} notes (in process)", get(noop, "noop_s"), sec, "≤ 1 s"),
        ("  CPU of that no-op", get(noop, "noop_cpu_s"), sec, ""),
        (f"  every tenth note touched, {sizes['noop_notes']} notes", get(noop, "touched_s"), sec, ""),
        (f"  one note edited, {sizes['noop_notes']} notes", get(noop, "one_change_s"), sec, ""),
        (f"no-op compile, {large} memories (in process)", get(ml, "noop_compile_seconds"), sec, "≤ 1 s"),
        (f"no-op compile, {large} memories (new process)", get(ml, "noop_compile_cli_seconds"), sec, ""),
        (f"peak RSS of a {large}-memory compile", get(ml, "compile_peak_rss_mb"), mb, "≤ 1500 MB"),
        (f"cold engram search ({sizes['notes']} notes)", get(bench, "cli", "search", "s"), sec, ""),
        (f"cold engram search ({sizes['noop_notes']} notes)", get(noop, "cold_search_s"), sec, "≤ 0.3 s at 10k"),
        ("  CPU of that search", get(noop, "cold_search_cpu_s"), sec, ""),
    ]
    huge, notes = r.get("noop_large"), sizes.get("noop_notes_large", 100_000)
    out += [
        (f"no-op compile, {notes} notes (in process)", get(huge, "noop_s"), sec, "≤ 1 s at 100k"),
        (f"  one note edited, {notes} notes (its embedding ~0: hashing embedder)", get(huge, "one_change_s"), sec,
         "≤ 2 s + its embedding"),
        (f"  cold engram search, {notes} notes", get(huge, "cold_search_s"), sec, "≤ 0.3 s at 100k"),
    ]
    for name in ("query", "vsearch", "recall", "memory_add"):
        out.append((f"cold {name} / cold search", get(cold, "cold", name, "vs_search"), times, "≤ 3×"))
    out += [
        ("ONNX / torch throughput", get(onnx, "ratio"), times, "≥ 1×"),
        ("  minimum cosine ONNX vs torch", get(onnx, "min_cosine"), lambda v: f"{v:.6f}", "≥ 0.9999"),
        ("MCP initialize", get(cold, "mcp", "initialize_s"), sec, "at once"),
        ("MCP first recall after start", get(cold, "mcp", "first_recall_s"), sec, "≤ 2 s"),
    ]
    for size, m in ((small, ms_), (large, ml)):
        out += [(f"recall p50 / p95 at {size} memories", (get(m, "recall_p50_ms"), get(m, "recall_p95_ms")),
                 lambda v: f"{v[0]:.0f} / {v[1]:.0f} ms", "p50 ≤ 50 ms at 50k" if size == large else "")]
    for size, m in ((small, ms_), (large, ml)):
        out += [(f"cold engram recall at {size} memories (CPU s, peak RSS)",
                 (get(m, "cold_recall_cli", "cpu_s"), get(m, "cold_recall_cli", "peak_rss_mb")),
                 lambda v: f"{v[0]:.2f} s, {v[1]:.0f} MB", "")]
    out += [
        (f"memory import, first {1000} of {large}", get(ml, "import_first_chunk_per_second"), rate, "≥ 60/s"),
        (f"memory import, last {1000} of {large}", get(ml, "import_last_chunk_per_second"), rate, "≥ 60/s, flat"),
        (f"store_memory through MCP at {small} memories", get(ms_, "single_call_per_second"), rate, "≥ 30/s"),
        (f"store_memory through MCP at {large} memories", get(ml, "single_call_per_second"), rate, "≥ 30/s, flat"),
    ]
    for size, m in ((small, ms_), (large, ml)):
        out.append((f"  the first after the server's start, at {size}", get(m, "single_call_first_ms"),
                    lambda v: f"{v:.0f} ms", ""))
    first, last = get(ms_, "single_call_per_second"), get(ml, "single_call_per_second")
    out.append((f"  store_memory rate at {large} / at {small} (flat = 1.00×)", last / first if first and last else None,
                times, "1.00×"))
    first, last = get(ml, "import_first_chunk_per_second"), get(ml, "import_last_chunk_per_second")
    out.append(("  import rate last / first (the data's own mix of actions)", last / first if first and last else None,
                times, ""))
    first, last = get(ml, "unrelated_first_per_second"), get(ml, "unrelated_last_per_second")
    out.append((f"  {1000} unrelated new memories, at {large} / at 0 (flat = 1.00×)",
                last / first if first and last else None, times, "1.00×"))
    wait = r.get("maintenance_wait")
    out.append((f"worst wait of a tool call for a full maintenance, {large} memories (a call every 50 ms)",
                get(wait, "worst_wait_ms"), lambda v: f"{v:.0f} ms", "≤ 100 ms"))
    out.append(("  that call's round trip, p50 during / without maintenance",
                (get(wait, "during_maintenance", "p50_ms"), get(wait, "no_maintenance", "p50_ms")),
                lambda v: f"{v[0]:.0f} / {v[1]:.0f} ms", ""))
    out += wiki_rows(r)
    return [(label, None if isinstance(v, tuple) and None in v else v, f, t) for label, v, f, t in out]


def wiki_rows(r: dict[str, Any]) -> list[Row]:
    """The LLM-owned wiki's rows: ingest and write rates (and how they hold as the wiki grows), lint
    against pure embedding of the same pages, and lint's quality on the labelled set."""
    wiki, quality = r.get("wiki"), r.get("lint_quality")
    pages = r["sizes"].get("wiki_pages", 1000)
    times = lambda v: f"{v:.2f}×"  # noqa: E731
    rate = lambda v: f"{v:.1f}/s"  # noqa: E731
    share = lambda v: f"{v[0]:.0%} / {v[1]:.0%}"  # noqa: E731
    out: list[Row] = [
        (f"wiki ingest, {pages} sources", get(wiki, "ingest", "per_s"), rate, ""),
        ("  ingest rate, last tenth / first tenth", get(wiki, "ingest", "last_vs_first"), times, "flat = 1.00×"),
        (f"wiki page writes, {pages} pages", get(wiki, "write", "per_s"), rate, ""),
        ("  write rate, last tenth / first tenth", get(wiki, "write", "last_vs_first"), times, "flat = 1.00×"),
        (f"lint of a {pages}-page wiki", get(wiki, "lint", "s"), lambda v: f"{v:.2f} s", ""),
        ("  lint / pure embedding of its pages, wall", get(wiki, "lint_vs_embedding"), times, "well under 1×"),
        ("  peak RSS of that lint", get(wiki, "lint", "peak_rss_mb"), lambda v: f"{v:.0f} MB", ""),
        ("lint precision / recall, labelled wiki", (get(quality, "precision"), get(quality, "recall")), share, ""),
    ]
    secrets = r.get("secrets")
    for name, label in (("engram", "secret redaction"), ("detect_secrets", "  detect-secrets on the same set")):
        out.append((f"{label}: precision / recall", (get(secrets, name, "precision"), get(secrets, name, "recall")),
                    share, ""))
    percent = lambda v: "—" if v is None else f"{v:.0%}"  # noqa: E731  (— : nothing planted, or nothing reported)
    for kind, row in sorted((get(quality, "kinds") or {}).items()):
        out.append((f"  {kind} (planted {row['planted']}, reported {row['found']})",
                    f"{percent(row['precision'])} / {percent(row['recall'])}", str, ""))
    return out


def table(r: dict[str, Any], quick: bool) -> str:
    m = r["machine"]
    lines = [f"Engram Vault · {m['cpus']} CPUs · load avg {m['load_avg_start'][0]} at start, {m['load_avg_end'][0]} "
             f"at end · {m['seconds']:.0f} s" + (" · QUICK: small sizes, not the targets'" if quick else "")]
    runs = r.get("runs") or {}
    if len({run["commit"] for run in runs.values()}) > 1:  # a partial rerun: say which code each figure measured
        lines.append("  " + " · ".join(f"{name} at {run['commit']} (load {run.get('load_avg_start', 'not recorded')})"
                                       for name, run in sorted(runs.items())))
    lines.append(f"  {'figure':<52}{'measured':>16}   target")
    for label, value, show, target in rows(r):
        lines.append(f"  {label:<52}{'not measured' if value is None else show(value):>16}   {target}".rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for development (minutes)")
    parser.add_argument("--json", action="store_true", help="print the JSON on stdout instead of the table")
    parser.add_argument("--out", type=Path, default=HERE / "results.json", help="where the JSON goes")
    parser.add_argument("--from", dest="source", type=Path, help="print the table of a saved results JSON")
    parser.add_argument("--rerun", metavar="NAMES", help="with --from: rerun these benchmarks (comma-separated: "
                        f"{', '.join(benchmarks(FULL))}), keep the saved others, write to --out")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.rerun and not args.source:
        parser.error("--rerun needs --from: the saved results whose other figures it keeps")
    if args.source:
        results = json.loads(args.source.read_text())
        sizes = {**results["sizes"], "memories": tuple(results["sizes"]["memories"])}
    if args.rerun:
        names = args.rerun.split(",")
        if unknown := set(names) - set(benchmarks(sizes)):
            parser.error(f"--rerun: no benchmark named {', '.join(sorted(unknown))}")
        results = measure(sizes, results, names)
    elif not args.source:
        results = measure(sizes)
    results["table"] = [{"figure": label, "value": value, "target": target} for label, value, _, target in rows(results)]
    if args.rerun or not args.source:
        args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2, sort_keys=True) if args.json else table(results, bool(get(results, "sizes", "notes") == QUICK["notes"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
