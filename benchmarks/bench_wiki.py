"""The LLM-owned wiki at scale: `python benchmarks/bench_wiki.py [--pages 1000] [--quick] [--json]`.

In a fresh temporary vault (clock pinned in engram.toml) it generates N synthetic Markdown sources
(a few hundred words each, seeded) on a few dozen made-up subjects, then times, through the
library (`compiler.wiki`): ingesting all N into raw/ (sources/s); writing N pages that cite them
and link each other — plain, aliased and heading links, hubs most linked, a few links to pages
nobody wrote — (pages/s, and the rate of the first and last tenth of the writes: each write
regenerates index.md and log.md, so a write's cost may grow with the wiki); one `lint_wiki` of
the whole wiki (seconds, peak RSS of a new process that runs it); and the pure embedding of the
same pages' section texts with the bundled model (bench.py's measure: one `embed` call, no cache,
index or I/O), so lint can be read as a ratio to it. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a checkout

from benchmarks.bench import (  # noqa: E402
    ADJECTIVES,
    NOUNS,
    VERBS,
    child_peak_mb,
    load_model,
    log,
    sentence,
    timed,
)
from compiler.core.settings import load_settings  # noqa: E402
from compiler.notes.parse import parse_note  # noqa: E402
from compiler.pipeline.section_text import section_text  # noqa: E402
from compiler.wiki.layout import WikiLayout  # noqa: E402
from compiler.wiki.lint import lint_wiki  # noqa: E402
from compiler.wiki.page_files import page_paths  # noqa: E402
from compiler.wiki.pages import write_page  # noqa: E402
from compiler.wiki.sources import ingest_source  # noqa: E402

NOW = "2026-12-06 10:00:00"
QUICK_PAGES = 150
KIND_MIX = ["source"] * 8 + ["concept"] * 6 + ["entity"] * 3 + ["decision"] * 2 + ["synthesis"]
SYLLABLES = "ka ro mi tel var no sen dra lu ph os qui bel tor an ex zi mar co ven".split()
# Words a wiki about engineering work uses beyond bench.py's vocabulary: what makes two sources
# on different subjects share only their common words, and two on one subject their uncommon ones.
EXTRA = """throughput regression vacuum autovacuum checkpoint compaction tombstone leader follower quorum
election heartbeat gossip backpressure rate limiter circuit breaker canary blue-green rollout feature
toggle telemetry sampling histogram percentile cardinality retention eviction warmup cold-start jitter
backoff deadline idempotency dedupe watermark offset commit rebalance partitioner serializer codec
protobuf avro parquet columnar vectorized planner optimizer statistics histogram cost-based index-only
bitmap bloom filter trie skiplist memtable sstable wal fsync durability latency-budget saturation
utilization headroom autoscaler provisioning terraform helm kubernetes pod sidecar mesh ingress egress
certificate rotation vault keychain oauth scope tenant isolation sandbox quota burst credit billing
invoice chargeback ledger reconciliation settlement""".split()


def made_up_term(rng: random.Random) -> str:
    """Returns an invented proper name ("Varnolu"): a subject's own uncommon word."""
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def subjects(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Returns `count` subjects, each a name, a few own words and a version: what sources are about."""
    names: dict[str, None] = {}
    while len(names) < count:
        names.setdefault(made_up_term(rng), None)
    return [{"name": name, "words": rng.sample(EXTRA, 6), "version": f"{rng.randint(1, 9)}.{rng.randint(0, 20)}"}
            for name in names]


def subject_sentence(rng: random.Random, subject: dict[str, Any]) -> str:
    """Returns a sentence about `subject`: a template sentence, or one naming it and its words."""
    word, other = rng.sample(subject["words"], 2)
    shapes = [
        f"{subject['name']} {rng.choice(VERBS)}s the {word} {rng.choice(['before', 'after', 'during'])} each {other}.",
        f"In {subject['name']} {subject['version']} the {word} is {rng.choice(ADJECTIVES)} under load.",
        f"The team moved the {word} of {subject['name']} behind the {other} last {rng.choice(['week', 'quarter'])}.",
        f"Measured p95 of the {subject['name']} {word} was {rng.randint(4, 900)} ms with {rng.randint(2, 64)} workers.",
        f"We still {rng.choice(VERBS)} the {rng.choice(ADJECTIVES)} {word} by hand when {subject['name']} restarts.",
    ]
    return rng.choice(shapes) if rng.random() < 0.45 else sentence(rng)


def source_text(rng: random.Random, title: str, subject: dict[str, Any]) -> str:
    """Returns a Markdown source of a few hundred words: a heading, an intro, 2–4 sections, a list."""
    blocks = [f"# {title}", " ".join(subject_sentence(rng, subject) for _ in range(rng.randint(3, 5)))]
    for _ in range(rng.randint(2, 4)):
        blocks.append(f"## {rng.choice(ADJECTIVES).capitalize()} {rng.choice(subject['words'])}")
        blocks += [" ".join(subject_sentence(rng, subject) for _ in range(rng.randint(3, 6)))
                   for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.4:
            blocks.append("\n".join(f"- {subject_sentence(rng, subject)}" for _ in range(rng.randint(2, 4))))
    return "\n\n".join(blocks) + "\n"


def fresh_title(rng: random.Random, taken: set[str], subject: dict[str, Any], prefix: str) -> str:
    """Returns a title not in `taken` (and adds it): "Varnolu checkpoint budget", "Stale quorum in Varnolu"."""
    while True:
        word, noun, adj = rng.choice(subject["words"]), rng.choice(NOUNS), rng.choice(ADJECTIVES)
        title = rng.choice([f"{subject['name']} {word} {noun}", f"{adj.capitalize()} {word} in {subject['name']}",
                            f"{subject['name']} {noun} and {word}", f"{subject['name']} {adj} {noun}"])
        title = f"{prefix} {title}".strip() if prefix else title
        if title.lower() not in taken:
            taken.add(title.lower())
            return title[0].upper() + title[1:]


def plan_wiki(pages: int, seed: int) -> dict[str, Any]:
    """Returns the sources and pages to write, all from `seed`: each page's subject, kind, title, cited sources."""
    rng = random.Random(seed)
    topics = subjects(rng, max(4, pages // 25))
    weights = [0.5 / len(topics) + 0.5 / (rank + 1) for rank in range(len(topics))]
    sources, plan, titles = [], [], set()
    for i in range(pages):
        subject = rng.choices(topics, weights)[0]  # a few subjects get many sources, as in a real wiki
        title = fresh_title(rng, titles, subject, rng.choice(["Notes on", "Report on", "Memo about", "Thread about", ""]))
        sources.append({"title": title, "subject": subject, "name": f"{title.lower().replace(' ', '-')}.md",
                        "text": source_text(rng, title, subject)})
        kind = rng.choice(KIND_MIX)
        page_title = title if kind == "source" else fresh_title(rng, titles, subject, "")
        plan.append({"title": page_title, "kind": kind, "subject": subject["name"], "sources": [i]})
    by_subject: dict[str, list[int]] = {}
    for i, page in enumerate(plan):
        by_subject.setdefault(page["subject"], []).append(i)
        near = [j for j in by_subject[page["subject"]] if j != i]
        page["sources"] += rng.sample(near, min(len(near), rng.choice([0, 0, 1, 2])))
    return {"sources": sources, "pages": plan, "by_subject": by_subject, "topics": topics, "rng": rng}


def link_to(rng: random.Random, plan: dict[str, Any], page: dict[str, Any]) -> str:
    """Returns one wikilink: to a page of the same subject (60%), a hub (30%: the first pages, Zipf), any page;
    plain, aliased or to a heading; about one in twenty to a page nobody wrote."""
    pages = plan["pages"]
    if rng.random() < 0.05:
        return f"[[{page['subject']} {rng.choice(['overview', 'glossary', 'open questions', 'history'])}]]"
    pick = rng.random()
    if pick < 0.6:
        target = pages[rng.choice(plan["by_subject"][page["subject"]])]
    elif pick < 0.9:
        target = pages[min(int(rng.paretovariate(1.0)) - 1, len(pages) - 1)]
    else:
        target = rng.choice(pages)
    form = rng.random()
    if form < 0.15:
        return f"[[{target['title']}|{target['subject']} {rng.choice(NOUNS)}]]"
    if form < 0.25:
        return f"[[{target['title']}#{rng.choice(ADJECTIVES).capitalize()} {rng.choice(NOUNS)}]]"
    return f"[[{target['title']}]]"


def page_body(rng: random.Random, plan: dict[str, Any], page: dict[str, Any]) -> tuple[str, list[str]]:
    """Returns a page's Markdown body (an intro, 1–3 sections, inline links) and the titles for `links`."""
    subject = next(t for t in plan["topics"] if t["name"] == page["subject"])

    def prose(count: int) -> str:
        said = []
        for _ in range(count):
            text = subject_sentence(rng, subject)
            said.append(f"{text[:-1]} (see {link_to(rng, plan, page)}){text[-1]}" if rng.random() < 0.3 else text)
        return " ".join(said)
    blocks = [prose(rng.randint(2, 4))]
    for _ in range(rng.randint(1, 3)):
        blocks += [f"## {rng.choice(ADJECTIVES).capitalize()} {rng.choice(subject['words'])}", prose(rng.randint(2, 5))]
        if rng.random() < 0.3:
            blocks.append("\n".join(f"- {subject_sentence(rng, subject)} {link_to(rng, plan, page)}"
                                    for _ in range(rng.randint(2, 3))))
    related = [plan["pages"][j]["title"] for j in rng.sample(plan["by_subject"][page["subject"]],
                                                              min(2, len(plan["by_subject"][page["subject"]])))]
    return "\n\n".join(blocks) + "\n", [t for t in related if t != page["title"]]


def make_vault(root: Path) -> WikiLayout:
    """Returns the layout of a fresh vault at `root`, its clock pinned."""
    (root / ".engram").mkdir(parents=True)
    (root / "engram.toml").write_text(f'now = "{NOW}"\n', encoding="utf-8")
    return WikiLayout.of(root, load_settings(root))


def tenth_rates(seconds: list[float]) -> tuple[float, float]:
    """Returns the rate (per second) of the first and of the last tenth of timed calls."""
    tenth = max(1, len(seconds) // 10)
    return tenth / sum(seconds[:tenth]), tenth / sum(seconds[-tenth:])


def timed_calls(label: str, calls: list[Any]) -> list[float]:
    """Runs each call, logging progress every tenth; returns each one's wall seconds."""
    spent = []
    for i, call in enumerate(calls, 1):
        start = time.perf_counter()
        call()
        spent.append(time.perf_counter() - start)
        if i % max(1, len(calls) // 10) == 0:
            log(f"{label}: {i}/{len(calls)} ({1 / spent[-1]:.1f}/s now)")
    return spent


def lint_process(vault: Path) -> dict[str, float]:
    """Runs one lint_wiki in a new process; returns its seconds (inside it) and peak RSS in MB."""
    code = ("import json,sys,time;from pathlib import Path;from compiler.core.settings import load_settings;"
            "from compiler.wiki.layout import WikiLayout;from compiler.wiki.lint import lint_wiki;"
            "v=Path(sys.argv[1]);l=WikiLayout.of(v,load_settings(v));t=time.perf_counter();lint_wiki(l);"
            "print(json.dumps({'s':time.perf_counter()-t}))")
    import threading
    peak, done = [0.0], threading.Event()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-c", code, str(vault)], stdout=subprocess.PIPE, text=True, env=env)
    watcher = threading.Thread(target=child_peak_mb, args=(process.pid, peak, done), daemon=True)
    watcher.start()
    out, _ = process.communicate()
    done.set()
    watcher.join()
    if process.returncode != 0:
        raise RuntimeError(f"lint in a new process exited {process.returncode}")
    return {"s": json.loads(out)["s"], "peak_rss_mb": peak[0]}


def page_texts(layout: WikiLayout) -> list[str]:
    """Returns the distinct section texts a compile would embed for the wiki's pages."""
    unique: dict[str, None] = {}
    for relative in page_paths(layout):
        note, _ = parse_note(relative, (layout.root / relative).read_bytes())
        for i in range(len(note.sections) if note else 0):
            unique.setdefault(section_text(note, i), None)
    return list(unique)


def run(pages: int, seed: int, workdir: Path) -> dict[str, Any]:
    """Runs every measurement in `workdir`; returns the figures."""
    layout = make_vault(workdir / "vault")
    plan = plan_wiki(pages, seed)
    rng = plan["rng"]
    figures: dict[str, Any] = {"pages": pages, "seed": seed, "load_avg_start": round(os.getloadavg()[0], 2)}
    words = sum(len(s["text"].split()) for s in plan["sources"])
    log(f"ingesting {pages} sources ({words / pages:.0f} words each on average)")
    ingested: list[str] = []
    spent = timed_calls("ingest", [lambda s=s: ingested.append(ingest_source(
        layout, s["text"].encode("utf-8"), s["name"], origin=f"https://example.org/{s['name']}",
        writer="bench")["source"]["text"]) for s in plan["sources"]])
    first, last = tenth_rates(spent)
    figures["ingest"] = {"s": sum(spent), "per_s": pages / sum(spent), "first_tenth_per_s": first,
                         "last_tenth_per_s": last, "last_vs_first": last / first, "words_per_source": words / pages}
    bodies = [page_body(rng, plan, page) for page in plan["pages"]]
    log(f"writing {pages} pages")
    spent = timed_calls("write", [lambda p=p, b=b: write_page(
        layout, p["title"], b[0], kind=p["kind"], summary=f"What the wiki knows of {p['subject']}.",
        sources=[ingested[j] for j in p["sources"]], links=b[1], writer="bench") for p, b in zip(plan["pages"], bodies)])
    first, last = tenth_rates(spent)
    figures["write"] = {"s": sum(spent), "per_s": pages / sum(spent), "first_tenth_per_s": first,
                        "last_tenth_per_s": last, "last_vs_first": last / first,
                        "links": sum(b[0].count("[[") + len(b[1]) for b in bodies)}
    log("lint_wiki of the whole wiki")
    report, lint_s, lint_cpu = timed(lambda: lint_wiki(layout))
    fresh = lint_process(layout.root)
    figures["lint"] = {"s": lint_s, "cpu_s": lint_cpu, "new_process_s": fresh["s"],
                       "peak_rss_mb": fresh["peak_rss_mb"], "counts": report["counts"],
                       "findings": len(report["findings"])}
    texts = page_texts(layout)
    log("loading the model")
    embedder, load_s = load_model(load_settings(layout.root).model)
    log(f"pure embedding of {len(texts)} section texts of the pages (one call)")
    _, embed_s, embed_cpu = timed(lambda: embedder.embed(texts))
    figures["embedding"] = {"model": embedder.identity, "model_load_s": load_s, "texts": len(texts), "s": embed_s,
                            "cpu_s": embed_cpu}
    figures["lint_vs_embedding"] = lint_s / embed_s
    figures["lint_vs_embedding_cpu"] = lint_cpu / embed_cpu
    figures["load_avg_end"] = round(os.getloadavg()[0], 2)
    return figures


def table(f: dict[str, Any]) -> str:
    """Returns the human-readable lines of the figures."""
    i, w, lint, e = f["ingest"], f["write"], f["lint"], f["embedding"]
    found = ", ".join(f"{k} {v}" for k, v in lint["counts"].items() if v)
    return "\n".join([
        f"Engram Vault wiki benchmark · {f['pages']} pages · load avg {f['load_avg_start']} at start, "
        f"{f['load_avg_end']} at end",
        f"  ingest {f['pages']} sources ({i['words_per_source']:.0f} words)  {i['s']:.1f} s   {i['per_s']:.1f}/s "
        f"(first tenth {i['first_tenth_per_s']:.1f}/s, last {i['last_tenth_per_s']:.1f}/s: {i['last_vs_first']:.2f}×)",
        f"  write {f['pages']} pages ({w['links']} links)  {w['s']:.1f} s   {w['per_s']:.1f}/s "
        f"(first tenth {w['first_tenth_per_s']:.1f}/s, last {w['last_tenth_per_s']:.1f}/s: {w['last_vs_first']:.2f}×)",
        f"  lint_wiki  {lint['s']:.2f} s (CPU {lint['cpu_s']:.2f} s; new process {lint['new_process_s']:.2f} s, "
        f"peak RSS {lint['peak_rss_mb']:.0f} MB) · {lint['findings']} findings: {found}",
        f"  pure embedding of {e['texts']} page sections  {e['s']:.2f} s (CPU {e['cpu_s']:.2f} s, {e['model']})",
        f"  lint / embedding  {f['lint_vs_embedding']:.3f}× wall, {f['lint_vs_embedding_cpu']:.3f}× CPU"])


def main(argv: list[str] | None = None) -> int:
    """Parses the flags, runs the benchmark in a temporary folder, prints the figures; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000, help="sources and pages (default 1000)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PAGES} pages, for development")
    parser.add_argument("--seed", type=int, default=11, help="random seed of the sources and pages")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the lines")
    args = parser.parse_args(argv)
    pages = QUICK_PAGES if args.quick else args.pages
    if pages < 10:
        parser.error("--pages must be at least 10")
    with tempfile.TemporaryDirectory(prefix="engram-bench-wiki-") as workdir:
        figures = run(pages, args.seed, Path(workdir))
    print(json.dumps(figures, indent=2, sort_keys=True) if args.json else table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
