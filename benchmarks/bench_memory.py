"""Memory at scale: import N synthetic observations, compile, and time recall.

    python benchmarks/bench_memory.py [--memories 50000] [--queries 100] [--json]
    python benchmarks/bench_memory.py --memories 500000 --store DIR [--parts served,compile,cold,recall]

Prints seconds, throughput, peak memory and recall latency (p50/p95, model loaded), plus how
the writes resolved (in all, in the first and last chunk). Then SINGLE_CALLS more stored one
`store_memory` call at a time through a new `engram serve` (its rate, each action's median ms).
Times are for this machine at this moment: compare ratios, not absolutes.

`--store DIR` keeps the imported store (N synthetic memories, as `maintenance_wait.py` builds it:
no unrelated control, no per-chunk figures) and reuses it on the next run: at 500,000 memories the
import alone takes hours on two shared cores. Each run measures a fresh copy of it (the single
calls, the compile and the recalls change it); `--parts` picks the measurements, in this order.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.pipeline.spine import compile_vault  # noqa: E402
from compiler.core.settings import load_settings  # noqa: E402
from compiler.embed.embedder import load_embedder  # noqa: E402
from compiler.memory.input import MemoryInput  # noqa: E402
from compiler.memory.recall import recall  # noqa: E402
from compiler.memory.vault import VaultMemory  # noqa: E402
from compiler.memory.write import write_memories  # noqa: E402
from benchmarks.bench import run_cli  # noqa: E402
from benchmarks.mcp_stdio import Served  # noqa: E402

SUBJECTS = ["The payments API", "The billing worker", "Our staging cluster", "The data pipeline", "The search service",
            "The mobile app", "The auth gateway", "The nightly backup", "The analytics warehouse", "The CI runner",
            "The feature flag service", "The notification queue", "The invoice generator", "The fraud model",
            "The admin dashboard", "The export job", "The webhook relay", "The image resizer", "The rate limiter",
            "The session store"]
VERBS = ["runs on", "depends on", "was migrated to", "is monitored with", "stores its data in", "is deployed with",
         "times out when talking to", "caches responses from", "is owned by the team that maintains",
         "sends alerts through", "reads configuration from", "writes audit logs to", "is load tested against",
         "falls back to", "retries requests to"]
OBJECTS = ["PostgreSQL 16", "Redis cluster mode", "Kafka with three brokers", "S3 in eu-west-1", "a Kubernetes Deployment",
           "PagerDuty", "Grafana dashboards", "the legacy SOAP endpoint", "DynamoDB on-demand", "a Lambda function",
           "Terraform modules", "the vendor sandbox", "ClickHouse", "an SQS FIFO queue", "GitHub Actions",
           "Vault secrets", "the CDN edge", "OpenSearch", "a cron on the bastion host", "BigQuery"]
DETAILS = ["since the March incident", "after the 2.3 release", "for customers in Europe", "only during business hours",
           "with a 30 second timeout", "behind a feature flag", "with exponential backoff", "in read-only mode",
           "as agreed in ADR-{n}", "until the rewrite lands", "per the runbook", "with retries capped at {n}",
           "for tenants on the enterprise plan", "when the queue depth exceeds {n}", "as measured in week {n}"]
CATEGORIES = ["fact", "fact", "fact", "strategy", "assumption", "failure"]


def synthetic_memories(count: int, seed: int = 7) -> list[MemoryInput]:
    """Returns `count` varied observations over 20 projects, dated across the last 60 days."""
    rng = random.Random(seed)
    items = []
    for i in range(count):
        detail = rng.choice(DETAILS).format(n=rng.randint(2, 999))
        text = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {detail}."
        day, hour = rng.randint(1, 60), rng.randint(0, 23)
        items.append(MemoryInput(content=text, project=f"project-{i % 20:02d}", category=rng.choice(CATEGORIES),
                                 importance=round(rng.uniform(0.3, 1.0), 2), source_id=f"bench-{i}",
                                 created_at=f"2026-{10 + (day > 30):02d}-{(day - 1) % 30 + 1:02d} {hour:02d}:00:00"))
    return items


def unrelated_memories(count: int, seed: int = 13) -> list[MemoryInput]:
    """Returns `count` memories that share no statement with each other or with synthetic_memories:
    14 words each drawn from the bundled model's vocabulary. Every one of them is stored as new, so
    the time to write them at the empty store and at the full one is the cost of a write as the store
    grows, apart from the mix of actions (synthetic_memories repeats itself more as it grows: more
    merges and replaces, which embed a second text and compare more statements)."""
    from compiler.embed.minilm import bundled_model_dir

    words = [w for w in (bundled_model_dir() / "vocab.txt").read_text(encoding="utf-8").split()
             if w.isalpha() and w.isascii() and len(w) >= 5]
    rng = random.Random(seed)
    return [MemoryInput(content=" ".join(rng.sample(words, 14)).capitalize() + ".", project=f"project-{i % 20:02d}",
                        category="fact", importance=0.5, source_id=f"unrelated-{i}", created_at="2026-11-15 12:00:00")
            for i in range(count)]


CHUNK = 1000  # memories per timed import chunk: the first and the last show whether a write's cost grows
SINGLE_CALLS = 100  # one-at-a-time stores at the end, through the MCP server (over stdio, as an agent stores)


def run(count: int, queries: int) -> dict:
    vault = Path(tempfile.mkdtemp(prefix="engram-bench-memory-"))
    (vault / ".obsidian").mkdir()
    (vault / "engram.toml").write_text('now = "2026-11-30 12:00:00"\n')
    settings = load_settings(vault)
    embedder = load_embedder(settings.model)
    items = synthetic_memories(count + SINGLE_CALLS)
    items, singles = items[:count], items[count:]
    figures: dict = {"memories": count}
    started = time.perf_counter()
    embedder.embed([i.content for i in items[:2000]])
    figures["embed_2000_seconds"] = round(time.perf_counter() - started, 2)
    print(f"importing {count} memories…", file=sys.stderr)
    chunk_rates, chunk_actions, actions = [], [], {}
    unrelated = unrelated_memories(2 * CHUNK + 10)
    with VaultMemory(vault, settings) as memories:
        _timed_new(memories, unrelated[-10:])  # the store's first write creates its files: not timed
        figures["unrelated_first_per_second"] = _timed_new(memories, unrelated[:CHUNK])
        started = time.perf_counter()
        for start in range(0, count, CHUNK):
            chunk_started = time.perf_counter()
            result = write_memories(memories, items[start:start + CHUNK])
            chunk_rates.append(len(items[start:start + CHUNK]) / (time.perf_counter() - chunk_started))
            chunk_actions.append(result["actions"])
            for action, n in result["actions"].items():
                actions[action] = actions.get(action, 0) + n
        figures["import_seconds"] = round(time.perf_counter() - started, 1)
        figures["unrelated_last_per_second"] = _timed_new(memories, unrelated[CHUNK:2 * CHUNK])
    print(f"storing {SINGLE_CALLS} more one call at a time through `engram serve`…", file=sys.stderr)
    figures.update(_served_writes(vault, singles))
    figures["import_per_second"] = round(count / figures["import_seconds"], 1)
    figures["import_first_chunk_per_second"] = round(chunk_rates[0], 1)
    figures["import_last_chunk_per_second"] = round(chunk_rates[-1], 1)
    # The mix of actions changes as the store grows (a project's new statement more often repeats
    # or updates an earlier one), and a merge or replace embeds a second text: these tell a write
    # that grew costlier from a mix that holds more of the costlier writes.
    figures["import_first_chunk_actions"], figures["import_last_chunk_actions"] = chunk_actions[0], chunk_actions[-1]
    figures["actions"] = actions
    print("compiling (a fresh `engram compile` process, its peak RSS polled)…", file=sys.stderr)
    figures["compile_seconds"], _, figures["compile_peak_rss_mb"] = run_cli("compile", "-q", str(vault))
    started = time.perf_counter()
    report = compile_vault(vault, settings)
    figures["noop_compile_seconds"] = round(time.perf_counter() - started, 2)
    figures["compile_pages_written"] = len(report.written)  # 0: the no-op wrote nothing
    figures["live"], figures["archived"] = report.memories["live"], report.memories["archived"]
    figures["noop_compile_cli_seconds"] = round(run_cli("compile", "-q", str(vault))[0], 2)
    figures["cold_recall_cli"] = _cold_recall(vault)
    figures.update(_recall_latency(vault, settings, queries))
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    figures["import_vs_pure_embedding"] = round(figures["import_seconds"] / (figures["embed_2000_seconds"] * count / 2000), 2)
    shutil.rmtree(vault, ignore_errors=True)
    return figures


def build_store(vault: Path, count: int, embedder: Any = None) -> None:
    """Writes `count` synthetic memories into a new vault at `vault` (what `memory import` runs),
    with the vault's model or `embedder`."""
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "engram.toml").write_text('now = "2026-11-30 12:00:00"\n')
    items = synthetic_memories(count)
    started = time.perf_counter()
    with VaultMemory(vault, load_settings(vault), embedder=embedder) as memories:
        for start in range(0, count, CHUNK):
            write_memories(memories, items[start:start + CHUNK])
            done = min(start + CHUNK, count)
            print(f"\r  {done:,} / {count:,} memories stored ({done / (time.perf_counter() - started):.0f}/s)",
                  end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


PARTS = ("served", "compile", "cold", "recall")


def run_on_store(store: Path, count: int, queries: int, parts: Sequence[str] = PARTS) -> dict:
    """The figures of `run` after the import, on a copy of the kept store at `store` (built first
    if it holds none): the single calls through `engram serve`, the compile (its peak RSS, then
    the no-op in process and as a new process), the cold `engram recall`, the recall latency."""
    if not (store / ".engram").exists():
        print(f"building a store of {count:,} memories in {store}…", file=sys.stderr)
        build_store(store, count)
    vault = Path(tempfile.mkdtemp(prefix="engram-bench-memory-")) / "vault"
    shutil.copytree(store, vault)
    figures: dict = {"memories": count, "store": str(store), "load_start": _load()}
    try:
        settings = load_settings(vault)
        if "served" in parts:
            # Without the server's maintenance: on a store never maintained a full one is due, and at
            # 500,000 memories it runs for tens of minutes (every memory asks the whole store for its
            # neighbours), its slices taking turns with the calls; maintenance_wait.py measures that.
            figures["served_maintenance"] = False
            figures.update(_served_writes(vault, synthetic_memories(count + SINGLE_CALLS)[count:], maintenance=False))
        if "compile" in parts:
            figures["compile_seconds"], _, figures["compile_peak_rss_mb"] = run_cli("compile", "-q", str(vault))
            started = time.perf_counter()
            report = compile_vault(vault, settings)
            figures["noop_compile_seconds"] = round(time.perf_counter() - started, 2)
            figures["live"], figures["archived"] = report.memories["live"], report.memories["archived"]
            figures["noop_compile_cli_seconds"] = round(run_cli("compile", "-q", str(vault))[0], 2)
        if "cold" in parts:
            figures["cold_recall_cli"] = _cold_recall(vault)
        if "recall" in parts:
            figures.update(_recall_latency(vault, settings, queries))
    finally:
        shutil.rmtree(vault.parent, ignore_errors=True)
    figures["load_end"] = _load()
    return figures


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _served_writes(vault: Path, items: list[MemoryInput], maintenance: bool = True) -> dict:
    """Stores `items` through a new `engram serve` on the vault, one `store_memory` call at a time
    after its warm-up (a first recall, which waits for the start's maintenance too): the first
    call's ms apart (at 50,000 it pays ~0.3 s after that maintenance; with `--no-maintenance` it
    costs what the others do), then the calls per second of the rest and each action's median ms."""
    calls: list[tuple[str, float]] = []  # (action, ms) per call, in order
    with Served(ROOT, vault, maintenance=maintenance) as server:
        server.initialize()
        server.tool("recall_memory", {"query": "what runs on Kafka?"})
        cpu: list[float] = []  # the server's CPU seconds (all its threads) before each call, and after the last
        for item in items:
            cpu.append(_process_cpu(server.pid))
            started = time.perf_counter()
            answer = server.tool("store_memory", {
                "content": item.content, "importance": item.importance, "category": item.category,
                "metadata": {"project": item.project, "source_id": item.source_id}})
            calls.append((answer["action"], (time.perf_counter() - started) * 1000))
        cpu.append(_process_cpu(server.pid))
        rss = _server_rss_mb(server)
    by_action: dict[str, list[float]] = {}
    for action, ms in calls:
        by_action.setdefault(action, []).append(ms)
    rest = [ms for _, ms in calls[1:]]
    return {"single_call_first_ms": round(calls[0][1], 1), "server_rss_mb": rss,
            "single_call_per_second": round(len(rest) / (sum(rest) / 1000), 1),
            # the server's own CPU per call (after the first): what a call costs it, whatever else
            # the machine runs (the wall rate above waits for the cores too; at 10 ms ticks, a mean)
            "single_call_cpu_ms": round((cpu[-1] - cpu[1]) * 1000 / len(rest), 1),
            "single_call_ms_by_action": {a: [len(t), round(statistics.median(t), 1)] for a, t in by_action.items()}}


def _process_cpu(pid: int) -> float:
    """Returns the CPU seconds (user + system, all threads) process `pid` has used, 0.0 if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_rss_mb(server: Served) -> dict[str, int]:
    """Returns the server's resident and peak resident memory in MB (Linux), {} elsewhere."""
    try:
        status = Path(f"/proc/{server.pid}/status").read_text()
    except OSError:
        return {}
    found = dict(line.split(":", 1) for line in status.splitlines() if line.startswith(("VmRSS", "VmHWM")))
    return {key: round(int(value.split()[0]) / 1024) for key, value in found.items()}


def _timed_new(memories: VaultMemory, items: list[MemoryInput]) -> float:
    """Writes `items` (all new: unrelated_memories) in one call and returns memories per second."""
    started = time.perf_counter()
    result = write_memories(memories, items)
    rate = len(items) / (time.perf_counter() - started)
    if result["actions"] != {"new": len(items)}:
        raise RuntimeError(f"unrelated memories resolved as {result['actions']}: the control is not all new")
    return round(rate, 1)


def _cold_recall(vault: Path, runs: int = 3) -> dict[str, float]:
    """A cold `engram recall` on the compiled store, as a person at a terminal runs it: the median
    of `runs` new processes (wall and CPU seconds, peak RSS). What a command that starts from
    nothing pays for the store's size: the MCP server pays it once, the CLI every time."""
    found = [run_cli("recall", "--vault", str(vault), "--no-reinforce", "how are retries of the webhook relay capped?")
             for _ in range(runs)]
    wall, cpu, rss = (statistics.median(column) for column in zip(*found))
    return {"s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_mb": round(rss)}


def _recall_latency(vault: Path, settings, queries: int) -> dict:
    rng = random.Random(11)
    with VaultMemory(vault, settings) as memories:
        recall(memories, "warm up", 5, reinforce=False)
        times, cpu = [], []
        for _ in range(queries):
            query = f"what does {rng.choice(SUBJECTS).lower()} {rng.choice(VERBS)}?"
            started, began = time.perf_counter(), time.process_time()
            recall(memories, query, 5, project=f"project-{rng.randint(0, 19):02d}", reinforce=False)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - began) * 1000)  # the model's threads included
    times.sort()
    cpu.sort()
    return {"recall_p50_ms": round(statistics.median(times), 1), "recall_p95_ms": round(times[int(len(times) * 0.95) - 1], 1),
            "recall_cpu_p50_ms": round(statistics.median(cpu), 1), "recall_cpu_p95_ms": round(cpu[int(len(cpu) * 0.95) - 1], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--store", type=Path, help="keep the imported store here and reuse it on the next run")
    parser.add_argument("--parts", default=",".join(PARTS), help="with --store: which measurements, of " + ",".join(PARTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.store:
        print(json.dumps(run_on_store(args.store.resolve(), args.memories, args.queries, args.parts.split(",")), indent=2))
        return
    figures = run(args.memories, args.queries)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"memories                 {figures['memories']}")
    print(f"import (resolve + index) {figures['import_seconds']:8.1f} s   {figures['import_per_second']:.0f}/s   "
          f"{figures['import_vs_pure_embedding']:.2f}× pure embedding   actions {figures['actions']}")
    print(f"compile                  {figures['compile_seconds']:8.1f} s   "
          f"live {figures['live']} archived {figures['archived']}")
    print(f"import rate first / last {figures['import_first_chunk_per_second']:.0f} / "
          f"{figures['import_last_chunk_per_second']:.0f} per s (chunks of {CHUNK})")
    print(f"unrelated, empty / full  {figures['unrelated_first_per_second']:.0f} / "
          f"{figures['unrelated_last_per_second']:.0f} per s ({CHUNK} memories, all new)")
    print(f"through MCP, one by one {figures['single_call_per_second']:.1f} per s at {figures['memories']} memories "
          f"(after a first call of {figures['single_call_first_ms']:.0f} ms)")
    print("  median ms by action    " + "   ".join(f"{a} {ms:.1f} (×{n})" for a, (n, ms)
                                                 in figures["single_call_ms_by_action"].items()))
    print(f"compile peak RSS         {figures['compile_peak_rss_mb']:.0f} MB")
    print(f"no-op compile            {figures['noop_compile_seconds']:8.2f} s in process · "
          f"{figures['noop_compile_cli_seconds']:.2f} s as a new process")
    print(f"recall p50 / p95         {figures['recall_p50_ms']:.0f} / {figures['recall_p95_ms']:.0f} ms")
    print(f"peak memory              {figures['peak_rss_mb']} MB")


if __name__ == "__main__":
    main()
