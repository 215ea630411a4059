"""Compile and search benchmark for Engram Vault: `python benchmarks/bench.py [--notes 2000] [--json]`.

With the real bundled model, in one process: the model load; a full compile of a copy of
`vault-example/`; a full, a no-op and a one-note-changed compile of a seeded synthetic vault;
cold `engram search` / `query` / `compile` subprocesses; and the "pure embedding" time of exactly
the section texts each full compile embedded. Compile times are also printed as ratios to that
pure embedding time: the machine is shared and noisy, and ratios travel better than seconds.
Nothing here asserts a time. Progress goes to stderr; the table (or one JSON object) to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a checkout: `python benchmarks/bench.py`

from compiler.core.settings import load_settings  # noqa: E402
from compiler.embed.embedder import Embedder, load_embedder  # noqa: E402
from compiler.index.cache import text_hash
from compiler.pipeline.section_text import section_text  # noqa: E402
from compiler.pipeline.spine import VaultPaths, compile_vault  # noqa: E402
from compiler.pipeline.state import load_state  # noqa: E402

EXAMPLE_VAULT = REPO / "vault-example"
# Left out of the example copy: derived state, and the machine-local journal (`make demo` imports agent
# memories there), so the copy compiles from scratch like a fresh clone. Tracked memory chunks stay.
DERIVED = {".": ("_engram",), ".engram": ("cache", "lock", "journal.jsonl")}
SEARCH_WORDS = "latency budget for the deployment pipeline"
QUERY_WORDS = "how do we roll back a failed deployment?"
SEARCH_RUNS = 5
STARTED = time.perf_counter()  # progress lines show the seconds since this
# The CLI runs the same code as this process, from bytecode as a user's engram does (pip compiles it
# at install): with PYTHONDONTWRITEBYTECODE set (as in some shells here) a checkout without
# __pycache__ compiled every module from source in every cold search (cold.py drops it too).
CHILD_ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(REPO)}
T = TypeVar("T")

# --- synthetic text: a small vocabulary and sentence templates (no real corpus) -------------

NOUNS = """service pipeline deployment database index cache queue worker schema migration latency budget
incident runbook dashboard alert metric trace span request response payload customer invoice refund ledger
account report review decision roadmap milestone sprint backlog ticket feature flag release rollback outage
postmortem owner team meeting agenda action summary draft proposal experiment hypothesis baseline model dataset
label warehouse table partition job schedule retry timeout contract interface endpoint client server
cluster node region replica shard lock transaction snapshot backup restore policy forecast estimate risk
dependency library framework test fixture coverage build artifact container image template config secret token
permission audit log event stream topic consumer producer batch window threshold capacity quota cost vendor
checklist diagram note paper chapter idea question answer tradeoff constraint goal objective outcome
signal noise""".split()
VERBS = """deploy review measure reduce track ship migrate index cache retry refactor document monitor schedule
replace split merge validate benchmark profile debug test publish archive draft estimate prioritise discuss
approve reject revisit simplify automate batch throttle shard replicate restore audit summarise compare rank
filter tag link plan""".split()
ADJECTIVES = """slow fast stale fresh noisy quiet critical minor flaky stable legacy shiny brittle robust
internal external nightly weekly quarterly manual automatic partial complete expensive cheap risky safe
idempotent eventual consistent durable temporary shared private regional global cold warm""".split()
ADVERBS = """carefully quickly eventually rarely usually twice again later first only still already manually
gradually safely""".split()
PREPOSITIONS = "for in behind before after during across with without under over".split()
TEMPLATES = [
    "The {adj} {noun} {verbs} the {noun} {prep} the {noun}.", "We {verb} the {noun} {adv} because the {noun} is {adj}.",
    "{Adj} {noun}s make the {noun} {adj}, so we {verb} them {prep} every {noun}.",
    "After the {noun} {verbs}, the {noun} team will {verb} the {adj} {noun}.",
    "Nobody wants to {verb} the {adj} {noun} {prep} this {adj} {noun}.",
    "Open question: should we {verb} the {noun} or {verb} the {noun} {adv}?",
    "The {noun} {verbs} {adv}; the {noun} {prep} it stays {adj}.",
    "Next step: {verb} the {noun} and {verb} the {adj} {noun} {prep} the {noun}."]
TOP_FOLDERS = ["Projects", "Areas", "Resources", "Meetings", "Journal", "People", "Archive", "Inbox"]


def sentence(rng: random.Random) -> str:
    """Returns one sentence made from a random template and the vocabulary."""
    fill = {"noun": lambda: rng.choice(NOUNS), "verb": lambda: rng.choice(VERBS),
            "verbs": lambda: re.sub(r"(s|sh|ch|x)$", r"\1e", rng.choice(VERBS)) + "s",  # "fixes", "ships"
            "adj": lambda: rng.choice(ADJECTIVES), "Adj": lambda: rng.choice(ADJECTIVES).capitalize(),
            "adv": lambda: rng.choice(ADVERBS), "prep": lambda: rng.choice(PREPOSITIONS)}
    return re.sub(r"\{(\w+)\}", lambda m: fill[m.group(1)](), rng.choice(TEMPLATES))


def wikilink(rng: random.Random, titles: list[str]) -> str:
    """Returns a wikilink in one of Obsidian's forms; about one in ten points at no note."""
    if rng.random() < 0.1:
        return f"[[{rng.choice(NOUNS).capitalize()} {rng.choice(NOUNS)} {rng.randint(100, 999)}]]"
    target, form = rng.choice(titles), rng.random()
    suffix = f"|{rng.choice(NOUNS)}" if form < 0.15 else f"#{rng.choice(NOUNS).capitalize()}" if form < 0.25 else ""
    return f"[[{target}{suffix}]]"


def tag(rng: random.Random) -> str:
    """Returns a tag without '#', nested one time in three."""
    base = rng.choice(NOUNS[:60])
    return f"{rng.choice(TOP_FOLDERS).lower()}/{base}" if rng.random() < 0.33 else base


def paragraph(rng: random.Random, titles: list[str]) -> str:
    """Returns a paragraph of 2–7 sentences, some with a wikilink or an inline tag."""
    parts = []
    for _ in range(rng.randint(2, 7)):
        text = sentence(rng)
        if rng.random() < 0.12:
            text = f"{text[:-1]} (see {wikilink(rng, titles)}){text[-1]}"
        parts.append(text)
    if rng.random() < 0.1:
        parts.append(f"#{tag(rng)}")
    return " ".join(parts)


def bullet_list(rng: random.Random, titles: list[str]) -> str:
    """Returns a short Markdown list, a link in some items."""
    items = [sentence(rng) + (f" {wikilink(rng, titles)}" if rng.random() < 0.3 else "")
             for _ in range(rng.randint(2, 5))]
    return "\n".join(f"- {item}" for item in items)


def frontmatter(rng: random.Random, titles: list[str]) -> str:
    """Returns a YAML frontmatter block (with its fences) or "" for one note in five."""
    if rng.random() < 0.2:
        return ""
    lines = [f"created: 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
             f"status: {rng.choice(['draft', 'active', 'done', 'parked'])}"]
    if rng.random() < 0.7:
        lines += ["tags:"] + [f"  - {tag(rng)}" for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.3:
        lines.append(f"aliases: [{rng.choice(ADJECTIVES).capitalize()} {rng.choice(NOUNS)}]")
    if rng.random() < 0.1:
        lines.append(f'related: "{wikilink(rng, titles)}"')
    return "---\n" + "\n".join(lines) + "\n---\n"


def note_body(rng: random.Random, title: str, titles: list[str]) -> str:
    """Returns a note: frontmatter, maybe an H1, 1–4 paragraphs, and `##` sections in one note of four."""
    blocks = [f"# {title}"] if rng.random() < 0.5 else []
    blocks += [paragraph(rng, titles) for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))]
    for _ in range(rng.randint(1, 4) if rng.random() < 0.25 else 0):
        blocks.append(f"## {rng.choice(ADJECTIVES).capitalize()} {rng.choice(NOUNS)}")
        blocks += [paragraph(rng, titles) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            blocks.append(bullet_list(rng, titles))
    return frontmatter(rng, titles) + "\n\n".join(blocks) + "\n"


def folders(rng: random.Random, count: int) -> list[str]:
    """Returns `count` distinct folder paths one to three levels deep."""
    found: set[str] = set()
    while len(found) < count:
        depth = rng.choice([1, 2, 2, 3])
        parts = [rng.choice(TOP_FOLDERS)] + [rng.choice(NOUNS).capitalize() for _ in range(depth - 1)]
        found.add("/".join(parts))
    return sorted(found)


def unique_titles(rng: random.Random, count: int) -> list[str]:
    """Returns `count` distinct note titles such as "Stale cache budget"."""
    found: dict[str, None] = {}
    while len(found) < count:
        found.setdefault(f"{rng.choice(ADJECTIVES).capitalize()} {rng.choice(NOUNS)} {rng.choice(NOUNS)}", None)
    return list(found)


def generate_vault(root: Path, count: int, seed: int) -> list[Path]:
    """Writes a deterministic synthetic vault of `count` notes under `root`; returns the note files."""
    rng = random.Random(seed)
    titles = unique_titles(rng, count)
    places = folders(rng, max(4, count // 25))
    files = []
    for title in titles:
        path = root / rng.choice(places) / f"{title}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note_body(rng, title, titles), encoding="utf-8")
        files.append(path)
    (root / ".obsidian").mkdir(exist_ok=True)
    return sorted(files)


# --- measuring ------------------------------------------------------------------------------


def log(message: str) -> None:
    """Prints a progress line on stderr, stamped with the seconds since start."""
    print(f"[{time.perf_counter() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


def timed(action: Callable[[], T]) -> tuple[T, float, float]:
    """Returns (what `action` returned, wall-clock seconds, CPU seconds of this process).

    CPU time counts all our threads and none of anyone else's work: on a shared machine it is far
    steadier than wall time (five identical embedding runs here: wall 8–16 s, CPU 10.7–11.1 s).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def load_model(model: str) -> tuple[Embedder, float]:
    """Returns the loaded embedder and the seconds to import, load and embed one text."""
    start = time.perf_counter()
    embedder = load_embedder(model)
    embedder.embed(["warm up the model once"])
    return embedder, time.perf_counter() - start


def compiled_texts(vault: Path) -> list[str]:
    """Returns the distinct section texts of the last compile, in the order the compile embeds them."""
    state, reason = load_state(VaultPaths(vault.resolve()).state)
    if reason:
        raise RuntimeError(f"{vault}: no build state ({reason})")
    unique = {text_hash(section_text(note, i)): section_text(note, i)
              for note in state.notes.values() for i in range(len(note.sections))}
    return [unique[h] for h in sorted(unique)]


def child_peak_mb(pid: int, peak: list[float], done: threading.Event) -> None:
    """Polls the child's VmHWM (Linux) into `peak[0]` until `done` is set.

    Not getrusage(RUSAGE_CHILDREN): a child made by (v)fork + exec inherits our high-water mark.
    """
    status = Path(f"/proc/{pid}/status")
    while not done.wait(0.02):
        try:
            line = next(l for l in status.read_text().splitlines() if l.startswith("VmHWM:"))
        except (OSError, StopIteration):
            continue
        peak[0] = max(peak[0], int(line.split()[1]) / 1024)


def run_cli(*args: str) -> tuple[float, float, float]:
    """Runs `engram ARGS` in a fresh process; returns its wall-clock seconds, CPU seconds and peak RSS in MB."""
    engram = Path(sys.executable).parent / "engram"
    peak, done = [0.0], threading.Event()
    with tempfile.TemporaryFile() as errors:
        start, before = time.perf_counter(), children_cpu()
        process = subprocess.Popen([str(engram), *args], stdout=subprocess.DEVNULL, stderr=errors, env=CHILD_ENV)
        watcher = threading.Thread(target=child_peak_mb, args=(process.pid, peak, done), daemon=True)
        watcher.start()
        code = process.wait()
        seconds, cpu = time.perf_counter() - start, children_cpu() - before
        done.set()
        watcher.join()
        if code != 0:
            errors.seek(0)
            raise RuntimeError(f"engram {' '.join(args)} exited {code}: {errors.read().decode(errors='replace')}")
    return seconds, cpu, peak[0]


def children_cpu() -> float:
    """Returns the CPU seconds of all our finished children (unlike ru_maxrss, not inherited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def full_compile(vault: Path, embedder: Embedder, label: str) -> dict[str, Any]:
    """Full compile of `vault`, then the pure embedding of the same texts; returns the figures."""
    log(f"{label}: full compile")
    report, wall, cpu = timed(lambda: compile_vault(vault, load_settings(vault)))
    texts = compiled_texts(vault)
    log(f"{label}: pure embedding of {len(texts)} section texts (one call: no cache, index or I/O)")
    _, embed_wall, embed_cpu = timed(lambda: embedder.embed(texts))
    return {"notes": report.notes, "sections": report.sections, "embedded": report.embedded,
            "texts_timed": len(texts), "pages_written": len(report.written), "links": report.links,
            "warnings": len(report.warnings), "memories": getattr(report, "memories", {}).get("live", 0),
            "embedding_s": embed_wall, "embedding_cpu_s": embed_cpu, **ratios(wall, cpu, embed_wall, embed_cpu),
            "notes_per_s": report.notes / wall, "sections_per_s": report.sections / wall,
            "embedding_texts_per_s": len(texts) / embed_wall}


def ratios(wall: float, cpu: float, embed_wall: float, embed_cpu: float) -> dict[str, float]:
    """Returns a compile's wall and CPU seconds, and each as a ratio to the pure embedding's."""
    return {"compile_s": wall, "compile_cpu_s": cpu, "compile_vs_embedding": wall / embed_wall,
            "compile_vs_embedding_cpu": cpu / embed_cpu}


def recompile(vault: Path, full: dict[str, Any], label: str) -> dict[str, Any]:
    """Compiles `vault` again; returns its times, their ratios to the full compile's embedding, and work done."""
    log(label)
    report, wall, cpu = timed(lambda: compile_vault(vault, load_settings(vault)))
    return {**ratios(wall, cpu, full["embedding_s"], full["embedding_cpu_s"]), "changed": len(report.changed),
            "embedded": report.embedded, "pages_written": len(report.written)}


def append_paragraph(note: Path, seed: int) -> None:
    """Appends one new paragraph to `note` (a realistic one-line edit in Obsidian)."""
    with note.open("a", encoding="utf-8") as handle:
        handle.write("\n" + paragraph(random.Random(seed + 1), [note.stem]) + "\n")


def cold_cli(vault: Path) -> dict[str, dict[str, Any]]:
    """Returns, per command run in fresh processes, median wall and CPU seconds, peak RSS and every run's time."""
    commands = {"search": (SEARCH_RUNS, ["search", "--vault", str(vault), SEARCH_WORDS]),
                "query": (1, ["query", "--vault", str(vault), QUERY_WORDS]),
                "compile_noop": (1, ["compile", "-q", str(vault)])}
    figures: dict[str, dict[str, Any]] = {}
    for name, (count, args) in commands.items():
        log(f"cold engram {args[0]} ×{count}")
        runs = [run_cli(*args) for _ in range(count)]
        figures[name] = {"s": statistics.median(r[0] for r in runs), "cpu_s": statistics.median(r[1] for r in runs),
                         "peak_rss_mb": max(r[2] for r in runs), "runs_s": [r[0] for r in runs]}
    return figures


def peak_rss_mb() -> float:
    """Returns this process's peak resident memory in MB (ru_maxrss is KB on Linux, bytes on macOS)."""
    kilobytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform == "darwin" else 1)
    return kilobytes / 1024


# --- the run --------------------------------------------------------------------------------


def copy_example(target: Path) -> Path:
    """Copies vault-example/ without its derived folders; returns the copy."""
    def derived(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n in DERIVED.get(Path(folder).relative_to(EXAMPLE_VAULT).as_posix(), ())]
    shutil.copytree(EXAMPLE_VAULT, target, ignore=derived)
    return target


def run(notes: int, seed: int, workdir: Path) -> dict[str, Any]:
    """Runs every measurement in `workdir`; returns all figures as one dict."""
    example = copy_example(workdir / "example")
    log("loading the model")
    embedder, load_s = load_model(load_settings(example).model)
    # The 1-minute load average shows how much others' work shared the 2 cores with us.
    figures: dict[str, Any] = {"model": embedder.identity, "model_load_s": load_s, "machine": {
        "cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_start": round(os.getloadavg()[0], 2)}}
    figures["example"] = full_compile(example, embedder, "example vault")
    log(f"generating a {notes}-note vault (seed {seed})")
    synthetic = workdir / "synthetic"
    files, generate_s, _ = timed(lambda: generate_vault(synthetic, notes, seed))
    figures["synthetic"] = full_compile(synthetic, embedder, f"{notes}-note vault") | {"generate_s": generate_s}
    figures["noop"] = recompile(synthetic, figures["synthetic"], "no-op recompile")
    append_paragraph(files[len(files) // 2], seed)
    figures["one_change"] = recompile(synthetic, figures["synthetic"], "one-note-changed recompile")
    figures["cli"] = cold_cli(synthetic)
    figures["peak_rss_mb"] = peak_rss_mb()
    figures["machine"]["load_avg_end"] = round(os.getloadavg()[0], 2)
    return figures


def seconds(value: float) -> str:
    """Returns a duration cell: "284.0 s", "1.53 s"."""
    return f"{value:.1f} s" if value >= 100 else f"{value:.2f} s"


def times(value: float) -> str:
    """Returns a ratio cell, with more decimals when it is small: "1.19×", "0.0095×"."""
    return f"{value:.2f}×" if value >= 0.1 else f"{value:.4f}×"


def row(label: str, *cells: str, note: str = "") -> str:
    """Returns one table line: the label, up to four cells (wall, × embedding, CPU, × embedding), a note."""
    padded = [*cells, *[""] * (4 - len(cells))]
    return f"  {label:<38}{''.join(f'{c:>11}' for c in padded)}   {note}".rstrip()


def vault_rows(name: str, v: dict[str, Any]) -> list[str]:
    """Returns the lines of one full compile: what was built, pure embedding, compile."""
    memories = f", {v['memories']} live memories" if v["memories"] else ""
    lines = [f"{name} ({v['notes']} notes): {v['sections']} sections, {v['embedded']} embedded, "
             f"{v['pages_written']} pages, {v['links']['total']} links ({v['links']['broken']} broken){memories}",
             row("pure embedding of the same texts", seconds(v["embedding_s"]), times(1), seconds(v["embedding_cpu_s"]),
                 times(1), note=f"{v['embedding_texts_per_s']:.1f} texts/s"),
             compile_row(f"full compile {v['notes']} notes", v,
                         f"{v['notes_per_s']:.1f} notes/s · {v['sections_per_s']:.1f} sections/s")]
    if v["texts_timed"] != v["embedded"]:
        lines.append(f"  note: {v['texts_timed']} texts timed but the compile embedded {v['embedded']}")
    return lines


def compile_row(label: str, v: dict[str, Any], note: str) -> str:
    """Returns the line of one compile: wall and CPU seconds, each with its ratio to the pure embedding."""
    return row(label, seconds(v["compile_s"]), times(v["compile_vs_embedding"]), seconds(v["compile_cpu_s"]),
               times(v["compile_vs_embedding_cpu"]), note=note)


def cli_rows(cli: dict[str, dict[str, Any]]) -> list[str]:
    """Returns the lines of the cold-process timings."""
    labels = {"search": f"engram search (median of {SEARCH_RUNS})", "query": "engram query (once, loads the model)",
              "compile_noop": "engram compile, no-op (once)"}
    return ["cold processes on the synthetic vault:"] + [
        row(labels[name], seconds(v["s"]), "", seconds(v["cpu_s"]), note=f"peak RSS {v['peak_rss_mb']:.0f} MB"
            + (f" · runs {', '.join(f'{s:.2f}' for s in v['runs_s'])}" if len(v["runs_s"]) > 1 else ""))
        for name, v in cli.items()]


def table(f: dict[str, Any]) -> str:
    """Returns the human-readable table of the figures."""
    m, noop, one = f["machine"], f["noop"], f["one_change"]
    return "\n".join([
        f"Engram Vault benchmark · {f['model']} · {m['cpus']} CPUs · Python {m['python']} "
        f"· load avg {m['load_avg_start']} at start, {m['load_avg_end']} at end",
        row("", "wall", "× embed", "CPU", "× embed"),
        row("model load (import + weights + 1 text)", seconds(f["model_load_s"])),
        *vault_rows("example vault", f["example"]),
        *vault_rows("synthetic vault", f["synthetic"]),
        compile_row("no-op recompile", noop, f"embedded {noop['embedded']}, written {noop['pages_written']}"),
        compile_row("one-note-changed recompile", one, f"changed {one['changed']}, embedded {one['embedded']}, "
                    f"written {one['pages_written']}"),
        *cli_rows(f["cli"]),
        f"peak RSS of this process (model + all compiles): {f['peak_rss_mb']:.0f} MB"])


def main(argv: list[str] | None = None) -> int:
    """Parses the flags, runs the benchmark in a temporary folder, prints the figures; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000, help="synthetic vault size (default 2000)")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the synthetic vault")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.notes < 2:
        parser.error("--notes must be at least 2")
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as workdir:
        figures = run(args.notes, args.seed, Path(workdir))
    print(json.dumps(figures, indent=2, sort_keys=True) if args.json else table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
