"""How right `engram lint` is: `python benchmarks/lint_quality.py [--json] [--verbose]`.

A small hand-labelled wiki, built in a temporary vault through the library's own write paths
(ingest_source, write_page, edit_page), holds planted problems of every kind lint reports and,
next to each, look-alikes that are not problems: paraphrased and Spanish contradictions next to
compatible statements on the same subject; orphans next to pages linked once; sources replaced
after the page that cites them next to a page revised after the replacement; concepts named by
two pages with no page next to a link only one page makes; duplicate titles and copied text next
to near titles; figures no cited source holds next to the same figure spelled in words. Every
finding lint makes is scored against the labels (a finding nobody planted is a false positive),
and precision and recall are printed per kind. Nothing is asserted: the numbers are the result.

The labels were written from what a careful reader would call a problem, not from what the rules
catch; the look-alikes are the mistakes a rules-only checker is expected to make.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a checkout

from compiler.core.settings import load_settings  # noqa: E402
from compiler.wiki.layout import WikiLayout  # noqa: E402
from compiler.wiki.lint import lint_wiki  # noqa: E402
from compiler.wiki.pages import edit_page, write_page  # noqa: E402
from compiler.wiki.sources import ingest_source  # noqa: E402

# (topic, page A's text, page B's text, contradicts?): each pair's pages link each other.
PAIRS = [
    ("Autovacuum", "Autovacuum is enabled by default in PostgreSQL.",
     "Autovacuum is disabled by default in PostgreSQL.", True),
    ("Service Language", "The platform team prefers TypeScript for new services.",
     "The platform team abandoned TypeScript for Go in new services.", True),
    ("Kafka Ordering", "Kafka guarantees message ordering within a partition.",
     "Kafka does not guarantee message ordering within a partition.", True),
    ("Webhook Backoff", "Webhook deliveries are retried with exponential backoff.",
     "Webhook deliveries are never retried with exponential backoff.", True),
    ("Billing Database", "The billing service runs on PostgreSQL 15.",
     "The billing service runs on PostgreSQL 16.", True),
    ("Serverless Pools", "Connection pooling is recommended for serverless functions.",
     "Connection pooling is discouraged for serverless functions.", True),
    ("Sesiones", "El equipo usa Redis para la caché de sesiones.",
     "El equipo ya no usa Redis para la caché de sesiones.", True),
    ("Flag Storage", "Feature flags are stored in LaunchDarkly.",
     "Feature flags are no longer stored in LaunchDarkly.", True),
    ("Queue Timeout", "The orders queue uses a visibility timeout of 30 seconds.",
     "The orders queue uses a visibility timeout of 60 seconds.", True),
    ("Cron Jobs", "Nightly exports run as cron jobs on the scheduler host.",
     "Nightly exports stopped running as cron jobs on the scheduler host.", True),
    # look-alikes: one subject, statements that can both be true
    ("Vacuum Tuning", "Vacuum thresholds can be tuned per table.",
     "Vacuum thresholds are tuned for the largest tables first.", False),
    ("Partition Order", "Pulsar guarantees ordering within a topic partition.",
     "Pulsar does not guarantee ordering across topic partitions.", False),
    ("Timeouts", "The gateway read timeout is 30 seconds.",
     "The gateway write timeout is 60 seconds.", False),
    ("Frontend Language", "The web team prefers Svelte for dashboards.",
     "The web team prefers Rust for command line tools.", False),
    ("Session Cache", "Valkey stores the checkout session data.",
     "Memcached does not store the checkout session data.", False),
    ("Jitter", "Payment retries use exponential backoff.",
     "Payment retries also add random jitter to that backoff.", False),
    ("Versions", "The staging cluster runs MySQL 8.",
     "The analytics warehouse runs ClickHouse 24.", False),
    ("Signatures", "Invoice webhooks are signed with HMAC.",
     "Invoice webhooks are not delivered after three days.", False),
]
ORPHANS = ["Forgotten Runbook", "Unlinked Glossary", "Old Migration Notes", "Stray Draft"]
# (title, body, source name): a page citing one source, re-ingested with new bytes afterwards unless
# the page is revised after that (`revised`), or edited in place in raw/ (`in_place`).
STALE = [
    ("Cache Eviction Summary", "Eviction removes the least recently used keys.", "eviction", "replaced"),
    ("TLS Rotation Summary", "Certificates rotate before they expire.", "tls", "replaced"),
    ("Schema Migration Summary", "Migrations run before the deploy.", "migrations", "in_place"),
    ("Load Shedding Summary", "Shedding drops low-priority requests first.", "shedding", "revised"),
    ("Tracing Summary", "Spans carry the request id.", "tracing", "untouched"),
]
MISSING = {  # concept: the pages naming it ([[linked]] by the first, named in words by the rest)
    "Backpressure": ["Stream Consumers", "Batch Importer"],
    "Outbox Pattern": ["Order Events", "Inventory Events", "Email Events"],
    "Quorum Reads": ["Replica Lag", "Failover Drill"],
}
LINKED_ONCE = ("Read Replicas", "Capacity Review")  # a link one page makes to a page nobody wrote
DUPLICATES = [
    ("Rate Limit", "Requests over the limit get status 429 and a retry hint.",
     "Rate Limits", "Each client key has its own budget of requests per minute.", True),
    ("Circuit Breaker", "A breaker opens after repeated failures, waits, then lets one trial request through "
                        "to see whether the dependency has recovered before closing again for everyone.",
     "Breaker Pattern", "A breaker opens after repeated failures, waits, then lets one trial request through "
                        "to see whether the dependency has recovered before closing again for all callers.", True),
    ("Rate Limiting Algorithms", "Token bucket and sliding window are the two common algorithms.",
     "Rate Limiter Deployment", "The limiter runs as a sidecar next to each gateway instance.", False),
]
# (title, source text or None, page text): a concept page must cite sources and its figures must be in them.
CITED = [
    ("Pool Sizing", None, "Size the pool from the database's connection budget.", True),
    ("Retry Budget", "Clients retry at most three times.", "Clients retry at most 5 times.", True),
    ("Visibility Default", "The default visibility timeout is thirty seconds.",
     "The default visibility timeout is 30 seconds.", False),
    ("Port Choice", "The admin API listens on port 9090.", "The admin API listens on port 9090.", False),
]


def build(root: Path) -> tuple[WikiLayout, dict[str, set[Any]]]:
    """Writes the labelled wiki into `root`; returns its layout and the planted findings by kind."""
    (root / "engram.toml").write_text('now = "2026-01-10 09:00:00"\n', encoding="utf-8")
    layout = WikiLayout.of(root, load_settings(root))
    at = lambda day: dataclasses.replace(layout, now=f"2026-01-{day:02d} 09:00:00")  # noqa: E731
    truth: dict[str, set[Any]] = {k: set() for k in ("contradiction", "orphan", "stale", "missing-page",
                                                      "broken-link", "duplicate", "uncited")}
    linked: list[str] = []  # every page the map links (all but the planted orphans)

    def page(title: str, body: str, day: int = 10, **fields: Any) -> str:
        path = write_page(at(day), title, body + "\n", **fields)["path"]
        if title not in ORPHANS:
            linked.append(title)
        return path

    for topic, first, second, contradicts in PAIRS:
        a = page(f"{topic} A", f"{first} See [[{topic} B]].")
        b = page(f"{topic} B", f"{second} See [[{topic} A]].")
        if contradicts:
            truth["contradiction"].add(frozenset((a, b)))
    for title in ORPHANS:
        truth["orphan"].add(page(title, f"{title} holds notes nobody links to yet."))
    for title, body, name, fate in STALE:
        cited = ingest_source(at(1), f"# {name}\n\n{body}\n".encode(), f"{name}.md", origin=f"https://docs.example/{name}")
        path = page(title, body, day=5, kind="source", sources=[cited["source"]["text"]])
        if fate in ("replaced", "revised"):
            ingest_source(at(7), f"# {name}\n\n{body} Revised guidance.\n".encode(), f"{name}.md",
                          origin=f"https://docs.example/{name}")
        if fate == "revised":
            edit_page(at(8), title, 1, find=body, replace=body + " Checked against the new version.")
        if fate == "in_place":
            (root / cited["source"]["text"]).write_text(f"# {name}\n\nchanged by hand\n", encoding="utf-8")
        if fate in ("replaced", "in_place"):
            truth["stale"].add(path)
    for concept, titles in MISSING.items():
        first = page(titles[0], f"Consumers slow down through [[{concept}]] when the queue fills.")
        truth["broken-link"].add((first, concept))
        for number, title in enumerate(titles[1:]):
            page(title, f"{title} relies on {concept.lower()} {('as well', 'too', 'during peaks')[number]}.")
        truth["missing-page"].add(concept.lower())
    first = page(LINKED_ONCE[1], f"Reads move to [[{LINKED_ONCE[0]}]] during the review.")
    truth["broken-link"].add((first, LINKED_ONCE[0]))
    for title_a, body_a, title_b, body_b, duplicate in DUPLICATES:
        a, b = page(title_a, body_a), page(title_b, body_b)
        if duplicate:
            truth["duplicate"].add(frozenset((a, b)))
    for title, source_text, body, uncited in CITED:
        sources = []
        if source_text:
            sources = [ingest_source(at(1), f"# {title}\n\n{source_text}\n".encode(), f"{title}.md")["source"]["text"]]
        path = page(title, body, kind="concept", sources=sources)
        if uncited:
            truth["uncited"].add(path)
    # A map linked from a start page (and back) links every page but the orphans: no orphan unplanned.
    page("Start", "Begin at the [[Wiki Map]].")
    page("Wiki Map", "Every page: " + ", ".join(f"[[{t}]]" for t in linked if t != "Wiki Map") + ".")
    return layout, truth


def key(finding: dict[str, Any]) -> Any:
    """What a finding is about, in the labels' terms."""
    kind, file = finding["kind"], finding["file"]
    if kind in ("contradiction", "duplicate"):
        return frozenset((file, *finding["related"][:1]))
    if kind == "missing-page":
        return re.search(r"“(.*?)”", finding["message"]).group(1).rsplit("/", 1)[-1].lower()
    if kind == "broken-link":
        return (file, re.search(r"\[\[(.*?)\]\]", finding["message"]).group(1))
    return file


def score(truth: dict[str, set[Any]], findings: Iterable[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, set[Any]] = {kind: set() for kind in truth}
    for finding in findings:
        found.setdefault(finding["kind"], set()).add(key(finding))
    rows = {}
    for kind in sorted(found):
        planted, got = truth.get(kind, set()), found[kind]
        hits = planted & got
        rows[kind] = {"planted": len(planted), "found": len(got), "correct": len(hits),
                      "precision": round(len(hits) / len(got), 3) if got else None,
                      "recall": round(len(hits) / len(planted), 3) if planted else None,
                      "missed": sorted(map(str, planted - got)), "false": sorted(map(str, got - planted))}
    planted = sum(r["planted"] for r in rows.values())
    got = sum(r["found"] for r in rows.values())
    correct = sum(r["correct"] for r in rows.values())
    return {"kinds": rows, "planted": planted, "found": got, "correct": correct,
            "precision": round(correct / got, 3) if got else None, "recall": round(correct / planted, 3) if planted else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--verbose", action="store_true", help="name every missed and false finding")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lint-quality-") as folder:
        layout, truth = build(Path(folder))
        result = lint_wiki(layout)
        summary = {**score(truth, result["findings"]), "pages": result["pages"], "sources": result["sources"]}
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    print(f"lint quality on {summary['pages']} labelled pages, {summary['sources']} sources: "
          f"precision {summary['precision']:.0%}, recall {summary['recall']:.0%} "
          f"({summary['correct']} of {summary['planted']} planted found, {summary['found']} reported)")
    for kind, row in summary["kinds"].items():
        shown = lambda v: "—" if v is None else f"{v:.0%}"  # noqa: E731
        print(f"  {kind:<14} precision {shown(row['precision']):>5}  recall {shown(row['recall']):>5}  "
              f"(planted {row['planted']}, reported {row['found']}, correct {row['correct']})")
        if args.verbose:
            for label, items in (("missed", row["missed"]), ("false", row["false"])):
                for item in items:
                    print(f"      {label}: {item}")


if __name__ == "__main__":
    main()
