"""LoCoMo retrieval benchmark: store every dialog turn as a memory, answer questions with recall.

    python benchmarks/locomo.py --data ../shared/data/locomo-dev.json [--k 5] [--keep DIR] [--json]
        [--conversation ID1,ID2]

For each conversation: a fresh vault; every turn stored through the product's own store path
(`compiler.memory.write.write_memories`) as "[<session date>] <speaker>: <text>" (plus " [shares <caption>]"
when an image was shared), source_id = the turn's dia_id, importance 1.0, the memory clock at
the conversation's last session date. Every question of category 1–4 is answered with the
product's `recall` (default settings; recall events are not recorded, so one question does not
reinforce the memories the next one sees).

A question is a hit at k when one of the top-k memories has one of the question's evidence ids
among its sources AND its returned content still holds that turn's text — a merge may not turn
a memory into a bag of turns that "covers" many questions.

`--keep DIR` keeps each conversation's stored vault in DIR/<sample_id>: a rerun stores nothing and
only recalls (a recall-side change tried on the same stored vectors; its store rate is null).
`--conversation` runs only those sample ids. `--dated` stores each turn with its session's date as
`created_at` (what an agent logging turns would write), so strength decay and the archive apply:
a different experiment, kept apart (`--keep` a different DIR). Every summary carries `by_conversation` ({sample_id:
Hit@k, MRR and per-category Hit@k}): choose a change on one conversation, confirm it on the others.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.core.settings import load_settings  # noqa: E402
from compiler.memory.input import MemoryInput  # noqa: E402
from compiler.memory.recall import recall  # noqa: E402
from compiler.memory.vault import VaultMemory, read_memories  # noqa: E402
from compiler.memory.write import write_memories  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEPTH = 10  # recall this many: Hit@k, Recall@10 and MRR all come from one recall per question
MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"], start=1)}


def session_keys(conversation: dict[str, Any]) -> list[str]:
    keys = [k for k in conversation if re.fullmatch(r"session_\d+", k) and conversation[k]]
    return sorted(keys, key=lambda k: int(k.split("_")[1]))


def turns(conversation: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Returns (dia_id, stored text, bare turn text) for every turn, in order."""
    out = []
    for key in session_keys(conversation):
        date = conversation.get(f"{key}_date_time", "")
        for turn in conversation[key]:
            text = f"[{date}] {turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append((turn["dia_id"], text, turn["text"]))
    return out


def clock(conversation: dict[str, Any]) -> str:
    """Returns the last session's date as 'YYYY-MM-DD HH:MM:SS' ("1:56 pm on 8 May, 2023")."""
    return session_time(conversation, session_keys(conversation)[-1])


def session_times(conversation: dict[str, Any]) -> dict[str, str]:
    """Returns {dia_id: its session's date as 'YYYY-MM-DD HH:MM:SS'} for every turn."""
    return {turn["dia_id"]: session_time(conversation, key) for key in session_keys(conversation)
            for turn in conversation[key]}


def session_time(conversation: dict[str, Any], key: str) -> str:
    """Returns session `key`'s date ("1:56 pm on 8 May, 2023") as 'YYYY-MM-DD HH:MM:SS' (2024-01-01 unread)."""
    raw = conversation.get(f"{key}_date_time", "")
    found = re.search(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", raw, re.I)
    if not found:
        return "2024-01-01 00:00:00"
    hour, minute, half, day, month, year = found.groups()
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return f"{year}-{MONTHS[month.lower()]:02d}-{int(day):02d} {hour_24:02d}:{minute}:00"


def evidence_ids(raw: Any) -> set[str]:
    """Normalises evidence such as ["D8:6; D9:17", "D1:3"] to {"D8:6", "D9:17", "D1:3"}."""
    items = raw if isinstance(raw, list) else [raw]
    return {m.group(0) for item in items for m in re.finditer(r"D\d+:\d+", str(item))}


def holds(hit: dict[str, Any], dia_id: str, text_of: dict[str, str]) -> bool:
    return dia_id in hit["sources"] and _squash(text_of.get(dia_id, "\0")) in _squash(hit["content"])


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def run_conversation(sample: dict[str, Any], k: int, keep: Path | None = None, dated: bool = False) -> dict[str, Any]:
    conversation = sample["conversation"]
    vault = keep / sample.get("sample_id", "conversation") if keep else Path(tempfile.mkdtemp(prefix="engram-locomo-"))
    stored_before = (vault / ".engram" / "stored").exists()
    if not stored_before:
        shutil.rmtree(vault, ignore_errors=True)  # a half-stored vault from an interrupted run
        (vault / ".engram").mkdir(parents=True)
    settings = load_settings(vault, now=clock(conversation))
    stored = turns(conversation)
    text_of = {dia: bare for dia, _, bare in stored}
    when = session_times(conversation) if dated else {}
    items = [MemoryInput(content=text, project="locomo", importance=1.0, source_id=dia, created_at=when.get(dia, ""))
             for dia, text, _ in stored]
    try:
        with VaultMemory(vault, settings) as memories:
            memories.embedder().embed(["warm up"])
            started = time.perf_counter()
            result = {"actions": {}} if stored_before else write_memories(memories, items)
            store_seconds = time.perf_counter() - started
            if keep:
                (vault / ".engram" / "stored").touch()
            live = len(read_memories(memories).live)
            rows, latencies, lengths = [], [], []
            for qa in sample["qa"]:
                if qa.get("category") not in CATEGORIES:
                    continue
                wanted = evidence_ids(qa.get("evidence", []))
                started = time.perf_counter()
                hits = recall(memories, qa["question"], DEPTH, reinforce=False)
                latencies.append((time.perf_counter() - started) * 1000)
                lengths.extend(len(h["content"]) for h in hits[:k])
                rows.append(_score(hits, wanted, text_of, k, CATEGORIES[qa["category"]]))
    finally:
        if not keep:
            shutil.rmtree(vault, ignore_errors=True)
    return {"id": sample.get("sample_id", "conversation"), "rows": rows, "latencies": latencies, "lengths": lengths, "turns": len(stored), "memories": live,
            "actions": result["actions"], "store_seconds": None if stored_before else store_seconds}


def _score(hits: list[dict[str, Any]], wanted: set[str], text_of: dict[str, str], k: int, category: str) -> dict:
    first = next((rank for rank, hit in enumerate(hits, start=1) if any(holds(hit, d, text_of) for d in wanted)), 0)
    found = {d for hit in hits[:DEPTH] for d in wanted if holds(hit, d, text_of)}
    return {"category": category, "hit": 0 < first <= k, "rr": 1.0 / first if first else 0.0,
            "recall10": len(found) / len(wanted) if wanted else 0.0}


def quality(rows: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """Returns Hit@k, Recall@10, MRR and per-category Hit@k of `rows` (questions scored by `_score`)."""
    by_category = {}
    for name in CATEGORIES.values():
        mine = [r for r in rows if r["category"] == name]
        by_category[name] = {f"hit@{k}": _mean(r["hit"] for r in mine), "questions": len(mine)}
    return {f"hit@{k}": _mean(r["hit"] for r in rows), "recall@10": _mean(r["recall10"] for r in rows),
            "mrr": _mean(r["rr"] for r in rows), "questions": len(rows), "by_category": by_category}


def summarise(results: list[dict[str, Any]], k: int, seconds: float, model: str) -> dict[str, Any]:
    rows = [r for res in results for r in res["rows"]]
    latencies = sorted(x for res in results for x in res["latencies"])
    lengths = [x for res in results for x in res["lengths"]]
    actions: Counter = Counter()
    for res in results:
        actions.update(res["actions"])
    turn_count = sum(r["turns"] for r in results)
    return {
        **quality(rows, k), "by_conversation": {res["id"]: quality(res["rows"], k) for res in results},
        "seconds": round(seconds, 1), "model": model, "turns": turn_count,
        "memories": sum(r["memories"] for r in results), "actions": dict(actions),
        "mean_returned_chars": round(statistics.mean(lengths), 1) if lengths else 0.0,
        "recall_p50_ms": round(statistics.median(latencies), 1) if latencies else 0.0,
        "recall_p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 1) if latencies else 0.0,
        "store_per_second": _store_rate(results),
    }


def _store_rate(results: list[dict[str, Any]]) -> float | None:
    """Turns stored per second, over the conversations stored in this run (None: all were kept)."""
    stored = [r for r in results if r["store_seconds"] is not None]
    seconds = sum(r["store_seconds"] for r in stored)
    return round(sum(r["turns"] for r in stored) / seconds, 1) if stored and seconds > 0 else None


def _mean(values: Any) -> float:
    values = [float(v) for v in values]
    return round(sum(values) / len(values), 4) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="keep the stored vaults here; a rerun only recalls")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--conversation", default="", help="only these sample ids (comma-separated)")
    parser.add_argument("--dated", action="store_true", help="store each turn with its session's date as created_at")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    if args.conversation:
        wanted = args.conversation.split(",")
        samples = [s for s in samples if s.get("sample_id") in wanted]
        if not samples:
            parser.error(f"no conversation {args.conversation!r} in {args.data}")
    started = time.perf_counter()
    results = []
    for sample in samples:
        print(f"{sample.get('sample_id', '?')}: storing and asking…", file=sys.stderr)
        results.append(run_conversation(sample, args.k, args.keep, args.dated))
    settings = load_settings(Path(tempfile.gettempdir()))
    summary = summarise(results, args.k, time.perf_counter() - started, settings.model)
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"Hit@{args.k} {summary[f'hit@{args.k}']:.1%}  Recall@10 {summary['recall@10']:.1%}  MRR {summary['mrr']:.3f}  "
          f"({summary['questions']} questions, {summary['seconds']} s, {summary['model']})")
    for name, row in summary["by_category"].items():
        print(f"  {name:<12} {row[f'hit@{args.k}']:.1%}  ({row['questions']})")
    if len(summary["by_conversation"]) > 1:
        for sample_id, part in summary["by_conversation"].items():
            cells = "  ".join(f"{name} {row[f'hit@{args.k}']:.1%} ({row['questions']})"
                              for name, row in part["by_category"].items() if row["questions"])
            print(f"  {sample_id}: Hit@{args.k} {part[f'hit@{args.k}']:.1%}  MRR {part['mrr']:.3f}  {cells}")
    print(f"{summary['turns']} turns became {summary['memories']} memories; writes: {summary['actions']}")
    print(f"mean returned memory {summary['mean_returned_chars']} chars; recall p50 {summary['recall_p50_ms']} ms, "
          f"p95 {summary['recall_p95_ms']} ms; store {summary['store_per_second'] or '(kept vaults)'} turns/s")


if __name__ == "__main__":
    main()
