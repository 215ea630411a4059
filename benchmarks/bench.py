"""Compile and search benchmark for Engram Vault.

Measures, in one process and with the real bundled model:

1. the model load (import torch + sentence-transformers, read the weights, embed one text);
2. a full compile of a copy of `vault-example/`;
3. a full, a no-op and a one-note-changed compile of a synthetic vault (`--notes`, default 2,000);
4. cold `engram search` (median of 5 subprocesses) and one cold `engram query`;
5. the "pure embedding" time of exactly the section texts each full compile embedded, so every
   compile figure can also be read as a ratio to it (the machine is shared and noisy: ratios
   travel better than seconds). Nothing here asserts a time.

    python benchmarks/bench.py [--notes 2000] [--seed 7] [--json]

Progress goes to stderr; the table (or, with `--json`, one JSON object) goes to stdout.
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a checkout: `python benchmarks/bench.py`

from compiler.build import BuildReport, VaultPaths, compile_vault, section_text  # noqa: E402
from compiler.embed import Embedder, load_embedder, text_hash  # noqa: E402
from compiler.settings import load_settings  # noqa: E402
from compiler.state import load_state  # noqa: E402

EXAMPLE_VAULT = REPO / "vault-example"
DERIVED = (".engram", "_engram")  # left out of the example copy: we compile from scratch
SEARCH_WORDS = "latency budget for the deployment pipeline"
QUERY_WORDS = "how do we roll back a failed deployment?"
SEARCH_RUNS = 5
T = TypeVar("T")

# --- synthetic text: a small vocabulary and sentence templates (no real corpus) -------------

NOUNS = """service pipeline deployment database index cache queue worker schema migration latency
budget incident runbook dashboard alert metric trace span request response payload customer invoice
refund ledger account report review decision roadmap milestone sprint backlog ticket feature flag
release rollback outage postmortem owner team meeting agenda action summary draft proposal experiment
hypothesis baseline model dataset feature label warehouse table partition job schedule retry timeout
contract interface endpoint client server cluster node region replica shard lock transaction snapshot
backup restore policy budget forecast estimate risk dependency library framework test fixture coverage
build artifact container image template config secret token permission audit log event stream topic
consumer producer batch window threshold capacity quota cost vendor invoice checklist diagram note
paper chapter idea question answer tradeoff constraint goal objective outcome signal noise""".split()
VERBS = """deploy review measure reduce track ship migrate index cache retry refactor document
monitor schedule replace split merge validate benchmark profile debug test publish archive draft
estimate prioritise discuss approve reject revisit simplify automate batch throttle shard replicate
restore audit summarise compare rank filter tag link plan""".split()
ADJECTIVES = """slow fast stale fresh noisy quiet critical minor flaky stable legacy shiny brittle robust
internal external nightly weekly quarterly manual automatic partial complete expensive cheap risky
safe idempotent eventual consistent durable temporary shared private regional global cold warm""".split()
ADVERBS = """carefully quickly eventually rarely usually twice again later first only still already
manually gradually safely""".split()
PREPOSITIONS = "for in behind before after during across with without under over".split()
TEMPLATES = [
    "The {adj} {noun} {verbs} the {noun} {prep} the {noun}.",
    "We {verb} the {noun} {adv} because the {noun} is {adj}.",
    "{Adj} {noun}s make the {noun} {adj}, so we {verb} them {prep} every {noun}.",
    "After the {noun} {verbs}, the {noun} team will {verb} the {adj} {noun}.",
    "Nobody wants to {verb} a {adj} {noun} {prep} a {adj} {noun}.",
    "Open question: should we {verb} the {noun} or {verb} the {noun} {adv}?",
    "The {noun} {verbs} {adv}; the {noun} {prep} it stays {adj}.",
    "Next step: {verb} the {noun} and {verb} the {adj} {noun} {prep} the {noun}.",
]
TOP_FOLDERS = ["Projects", "Areas", "Resources", "Meetings", "Journal", "People", "Archive", "Inbox"]


def verbs_form(verb: str) -> str:
    """Returns the third-person singular of a vocabulary verb."""
    return verb + ("es" if verb.endswith(("s", "sh", "ch", "x")) else "s")


def sentence(rng: random.Random) -> str:
    """Returns one sentence made from a random template and the vocabulary."""
    fill = {"noun": lambda: rng.choice(NOUNS), "verb": lambda: rng.choice(VERBS),
            "verbs": lambda: verbs_form(rng.choice(VERBS)), "adj": lambda: rng.choice(ADJECTIVES),
            "Adj": lambda: rng.choice(ADJECTIVES).capitalize(), "adv": lambda: rng.choice(ADVERBS),
            "prep": lambda: rng.choice(PREPOSITIONS)}
    return re.sub(r"\{(\w+)\}", lambda m: fill[m.group(1)](), rng.choice(TEMPLATES))


def wikilink(rng: random.Random, titles: list[str]) -> str:
    """Returns a wikilink in one of Obsidian's forms; about one in ten points at no note."""
    if rng.random() < 0.1:
        return f"[[{rng.choice(NOUNS).capitalize()} {rng.choice(NOUNS)} {rng.randint(100, 999)}]]"
    target = rng.choice(titles)
    form = rng.random()
    if form < 0.15:
        return f"[[{target}|{rng.choice(NOUNS)}]]"
    if form < 0.25:
        return f"[[{target}#{rng.choice(NOUNS).capitalize()}]]"
    return f"[[{target}]]"


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
    """Returns a note: frontmatter, maybe an H1, paragraphs, and `##` sections in two notes of five."""
    blocks = [f"# {title}"] if rng.random() < 0.5 else []
    blocks += [paragraph(rng, titles) for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))]
    for _ in range(rng.choice([0, 0, 0, 1, 2, 3, 4]) if rng.random() < 0.4 else 0):
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

STARTED = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


def timed(action: Callable[[], T]) -> tuple[T, float]:
    """Returns (what `action` returned, seconds it took)."""
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def load_model(model: str) -> tuple[Embedder, float]:
    """Returns the loaded embedder and the seconds to import, load and embed one text."""
    def load() -> Embedder:
        embedder = load_embedder(model)
        embedder.embed(["warm up the model once"])
        return embedder
    return timed(load)


def compile_timed(vault: Path) -> tuple[BuildReport, float]:
    """Compiles `vault` with its own settings; returns the report and the wall-clock seconds."""
    return timed(lambda: compile_vault(vault, load_settings(vault)))


def compiled_texts(vault: Path) -> list[str]:
    """Returns the distinct section texts of the last compile, in the order the compile embeds them."""
    state, reason = load_state(VaultPaths(vault.resolve()).state)
    if reason:
        raise RuntimeError(f"{vault}: no build state ({reason})")
    unique = {text_hash(section_text(note, i)): section_text(note, i)
              for note in state.notes.values() for i in range(len(note.sections))}
    return [unique[h] for h in sorted(unique)]


def embedding_seconds(embedder: Embedder, texts: list[str]) -> float:
    """Returns the seconds the embedder takes for `texts` in one call: no cache, no index, no I/O."""
    return timed(lambda: embedder.embed(texts))[1]


def cli_seconds(*args: str) -> float:
    """Runs `engram ARGS` in a fresh process; returns its wall-clock seconds (raises if it fails)."""
    engram = Path(sys.executable).parent / "engram"
    start = time.perf_counter()
    done = subprocess.run([str(engram), *args], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"engram {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return seconds


def full_compile(vault: Path, embedder: Embedder, label: str) -> dict[str, Any]:
    """Full compile of `vault`, then the pure embedding of the same texts; returns the figures."""
    log(f"{label}: full compile")
    report, seconds = compile_timed(vault)
    texts = compiled_texts(vault)
    log(f"{label}: pure embedding of {len(texts)} section texts")
    embed = embedding_seconds(embedder, texts)
    return {"notes": report.notes, "sections": report.sections, "embedded": report.embedded,
            "texts_timed": len(texts), "pages_written": len(report.written), "links": report.links,
            "warnings": len(report.warnings), "compile_s": seconds, "embedding_s": embed,
            "compile_vs_embedding": seconds / embed, "notes_per_s": report.notes / seconds,
            "sections_per_s": report.sections / seconds, "embedding_sections_per_s": len(texts) / embed}


def recompile(vault: Path, embed_s: float, label: str) -> dict[str, Any]:
    """Compiles `vault` again; returns seconds, ratio to the full embedding time, and work done."""
    log(f"{label}")
    report, seconds = compile_timed(vault)
    return {"compile_s": seconds, "compile_vs_embedding": seconds / embed_s, "changed": len(report.changed),
            "embedded": report.embedded, "pages_written": len(report.written)}


def append_paragraph(note: Path, seed: int) -> None:
    """Appends one new paragraph to `note` (a realistic one-line edit in Obsidian)."""
    with note.open("a", encoding="utf-8") as handle:
        handle.write("\n" + paragraph(random.Random(seed + 1), [note.stem]) + "\n")


def cold_cli(vault: Path) -> dict[str, Any]:
    """Returns cold-process timings of `engram search` (median of 5), `engram query` and a no-op compile."""
    log(f"cold engram search ×{SEARCH_RUNS}")
    runs = [cli_seconds("search", "--vault", str(vault), SEARCH_WORDS) for _ in range(SEARCH_RUNS)]
    log("cold engram query ×1")
    query = cli_seconds("query", "--vault", str(vault), QUERY_WORDS)
    log("cold engram compile (no-op) ×1")
    noop = cli_seconds("compile", "-q", str(vault))
    return {"search_median_s": statistics.median(runs), "search_runs_s": runs, "query_s": query,
            "compile_noop_s": noop}


def peak_rss_mb() -> dict[str, float]:
    """Returns peak resident memory in MB of this process and of its largest child (Linux: KB units)."""
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 1024 / 1024
    return {"self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale,
            "largest_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale}


# --- the run --------------------------------------------------------------------------------


def copy_example(target: Path) -> Path:
    """Copies vault-example/ without its derived folders; returns the copy."""
    shutil.copytree(EXAMPLE_VAULT, target, ignore=lambda folder, names: [n for n in names
                    if Path(folder) == EXAMPLE_VAULT and n in DERIVED])
    return target


def run(notes: int, seed: int, workdir: Path) -> dict[str, Any]:
    """Runs every measurement in `workdir`; returns all figures as one dict."""
    example = copy_example(workdir / "example")
    model = load_settings(example).model
    log("loading the model")
    embedder, load_s = load_model(model)
    figures: dict[str, Any] = {"model": embedder.identity, "model_load_s": load_s}
    figures["example"] = full_compile(example, embedder, "example vault")
    log(f"generating a {notes}-note vault (seed {seed})")
    synthetic = workdir / "synthetic"
    files, generate_s = timed(lambda: generate_vault(synthetic, notes, seed))
    figures["synthetic"] = full_compile(synthetic, embedder, f"{notes}-note vault") | {"generate_s": generate_s}
    embed_s = figures["synthetic"]["embedding_s"]
    figures["noop"] = recompile(synthetic, embed_s, "no-op recompile")
    append_paragraph(files[len(files) // 2], seed)
    figures["one_change"] = recompile(synthetic, embed_s, "one-note-changed recompile")
    figures["cli"] = cold_cli(synthetic)
    figures["peak_rss_mb"] = peak_rss_mb()
    figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "load_avg": [round(x, 2) for x in os.getloadavg()]}
    return figures


def table(f: dict[str, Any]) -> str:
    """Returns the human-readable table of the figures."""
    ex, syn, noop, one, cli = f["example"], f["synthetic"], f["noop"], f["one_change"], f["cli"]
    m = f["machine"]
    row = "  {:<34}{:>8.2f} s   {}".format
    lines = [f"Engram Vault benchmark · {f['model']} · {m['cpus']} CPUs · Python {m['python']} "
             f"· load avg at end {m['load_avg'][0]}",
             row("model load (import + weights + 1 text)", f["model_load_s"], "")]
    for name, v in ((f"example vault ({ex['notes']} notes)", ex), (f"synthetic vault ({syn['notes']} notes)", syn)):
        lines += [f"{name}: {v['sections']} sections, {v['embedded']} embedded, {v['pages_written']} pages, "
                  f"{v['links']['total']} links ({v['links']['broken']} broken)",
                  row("pure embedding of the same texts", v["embedding_s"], f"{v['embedding_sections_per_s']:.0f} sections/s"),
                  row(f"full compile {v['notes']} notes", v["compile_s"],
                      f"{v['compile_vs_embedding']:.2f}× embedding · {v['notes_per_s']:.1f} notes/s · "
                      f"{v['sections_per_s']:.1f} sections/s")]
    for label, v in (("no-op recompile", noop), ("one-note-changed recompile", one)):
        lines.append(row(label, v["compile_s"], f"{v['compile_vs_embedding']:.4f}× embedding · changed "
                         f"{v['changed']}, embedded {v['embedded']}, written {v['pages_written']}"))
    runs = ", ".join(f"{s:.2f}" for s in cli["search_runs_s"])
    lines += ["cold processes on the synthetic vault:",
              row(f"engram search (median of {len(cli['search_runs_s'])})", cli["search_median_s"], f"runs: {runs}"),
              row("engram query (once; loads the model)", cli["query_s"], ""),
              row("engram compile, no-op (once)", cli["compile_noop_s"], ""),
              f"peak RSS: this process {f['peak_rss_mb']['self']:.0f} MB, "
              f"largest child {f['peak_rss_mb']['largest_child']:.0f} MB"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
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
