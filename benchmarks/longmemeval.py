"""LongMemEval retrieval benchmark: store every turn of a question's haystack as a memory, ask with recall.

    python benchmarks/longmemeval.py --data ../shared/data/longmemeval-dev.json [--k 5] [--json]
                                     [--questions N] [--keep DIR]

For each question: a fresh vault whose memory clock is the question's `question_date`; every turn
of its haystack (sessions in date order) stored through the product's write path
(`compiler.memory.write.write_memories`) as "[<session date>] <role>: <content>", created_at = the
session's date, session_id = the haystack session (a turn's conversational neighbours are the
turns of its own session), source_id = "<session id>:<turn number>", importance 1.0. A turn over
the product's content limit (64 KB; a few pasted documents) is cut to it. Then the question is
answered with the product's `recall` at default settings (no recall event).

Turn level: a hit at k when one of the top-k memories has a `has_answer` turn among its sources
and its content still holds that turn's text (the rule of benchmarks/locomo.py). Session level:
one of the top-k memories comes from an answer session (the figure peers publish).

Questions run round-robin over the question types, so `--questions N` (quick iterations; report
all 40) runs a stratified N; `--type` keeps only questions of the given types, `--ids` only the given questions. `--keep DIR` keeps each question's stored vault in DIR/<question_id>:
a rerun stores nothing and only recalls (for trying recall-side changes fast; the store rate
counts only the questions stored in this run).
"""

from __future__ import annotations

import argparse
import json
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
from compiler.embed.embedder import load_embedder  # noqa: E402
from compiler.events.checks import MAX_CONTENT_BYTES  # noqa: E402
from compiler.memory.input import MemoryInput  # noqa: E402
from compiler.memory.recall import recall  # noqa: E402
from compiler.memory.vault import VaultMemory, read_memories  # noqa: E402
from compiler.memory.write import write_memories  # noqa: E402

DEPTH = 10  # recall this many: Hit@k, Recall@10 and MRR all come from one recall per question
PROJECT = "longmemeval"


def engram_date(raw: str) -> str:
    """Returns LongMemEval's "2023/04/21 (Fri) 22:57" as "2023-04-21 22:57:00"."""
    day, _, rest = raw.partition(" ")
    clock = rest.split(")")[-1].strip() or "00:00"
    return f"{day.replace('/', '-')} {clock}:00"


def _cut(text: str) -> str:
    """Returns `text` cut to the product's content limit (whole characters)."""
    data = text.encode("utf-8")
    return text if len(data) <= MAX_CONTENT_BYTES else data[:MAX_CONTENT_BYTES].decode("utf-8", "ignore")


def turns(question: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns every turn of the haystack, sessions in date order: source id, stored text, bare text,
    session id, session date, whether it holds the answer."""
    sessions = sorted(zip(question["haystack_dates"], question["haystack_session_ids"], question["haystack_sessions"]),
                      key=lambda s: (engram_date(s[0]), s[1]))
    out = []
    for date, session_id, session in sessions:
        for number, turn in enumerate(session):
            bare = _cut(turn["content"]).strip()
            if not bare:
                continue
            text = _cut(f"[{date}] {turn['role']}: {bare}")
            out.append({"source": f"{session_id}:{number}", "text": text, "bare": bare[:200],
                        "session": session_id, "date": engram_date(date), "answer": bool(turn.get("has_answer"))})
    return out


def run_question(question: dict[str, Any], embedder: Any, keep: Path | None) -> dict[str, Any]:
    vault = keep / question["question_id"] if keep else Path(tempfile.mkdtemp(prefix="engram-longmemeval-"))
    stored_before = (vault / ".engram" / "stored").exists()
    if not stored_before:
        shutil.rmtree(vault, ignore_errors=True)  # a half-stored vault from an interrupted run
        (vault / ".engram").mkdir(parents=True)
    now = engram_date(question["question_date"])
    settings = load_settings(vault, now=now)
    stored = turns(question)
    items = [MemoryInput(content=t["text"], project=PROJECT, importance=1.0, source_id=t["source"],
                         session_id=t["session"], created_at=t["date"]) for t in stored]
    answer_turns = {t["source"]: t["bare"] for t in stored if t["answer"]}
    answer_sessions = set(question["answer_session_ids"])
    try:
        with VaultMemory(vault, settings, embedder=embedder) as memories:
            started = time.perf_counter()
            result = {"actions": {}} if stored_before else write_memories(memories, items)
            store_seconds = time.perf_counter() - started
            live = len(read_memories(memories).live)
            started = time.perf_counter()
            hits = recall(memories, question["question"], DEPTH, reinforce=False)
            latency = (time.perf_counter() - started) * 1000
        if keep:
            (vault / ".engram" / "stored").touch()
    finally:
        if not keep:
            shutil.rmtree(vault, ignore_errors=True)
    row = _score(hits, answer_turns, answer_sessions)
    row.update(type=question["question_type"], id=question["question_id"], latency=latency, turns=len(stored),
               memories=live, actions=result["actions"], store_seconds=0.0 if stored_before else store_seconds,
               stored=0 if stored_before else len(stored))
    return row


def _holds(hit: dict[str, Any], source: str, bare: str) -> bool:
    return source in hit["sources"] and _squash(bare) in _squash(hit["content"])


def _squash(text: str) -> str:
    return " ".join(text.split()).lower()


def _score(hits: list[dict[str, Any]], answer_turns: dict[str, str], answer_sessions: set[str]) -> dict[str, Any]:
    def turn_hit(hit: dict[str, Any]) -> bool:
        return any(_holds(hit, s, bare) for s, bare in answer_turns.items())

    def session_hit(hit: dict[str, Any]) -> bool:
        return any(s.rpartition(":")[0] in answer_sessions for s in hit["sources"])

    first = next((rank for rank, hit in enumerate(hits, start=1) if turn_hit(hit)), 0)
    first_session = next((rank for rank, hit in enumerate(hits, start=1) if session_hit(hit)), 0)
    found = {s for hit in hits[:DEPTH] for s, bare in answer_turns.items() if _holds(hit, s, bare)}
    return {"first": first, "first_session": first_session,
            "recall10": len(found) / len(answer_turns) if answer_turns else 0.0}


def summarise(rows: list[dict[str, Any]], k: int, seconds: float, model: str) -> dict[str, Any]:
    latencies = sorted(r["latency"] for r in rows)
    actions: Counter = Counter()
    for row in rows:
        actions.update(row["actions"])

    def hit(row: dict[str, Any]) -> bool:
        return 0 < row["first"] <= k

    by_type = {}
    for name in sorted({r["type"] for r in rows}):
        mine = [r for r in rows if r["type"] == name]
        by_type[name] = {f"hit@{k}": _mean(hit(r) for r in mine),
                         f"session_hit@{k}": _mean(0 < r["first_session"] <= k for r in mine), "questions": len(mine)}
    turn_count = sum(r["turns"] for r in rows)
    stored = sum(r["stored"] for r in rows)
    return {
        f"hit@{k}": _mean(hit(r) for r in rows), f"session_hit@{k}": _mean(0 < r["first_session"] <= k for r in rows),
        "hit@1": _mean(r["first"] == 1 for r in rows), "hit@10": _mean(r["first"] > 0 for r in rows),
        "recall@10": _mean(r["recall10"] for r in rows), "mrr": _mean(1.0 / r["first"] if r["first"] else 0.0 for r in rows),
        "questions": len(rows), "by_type": by_type, "seconds": round(seconds, 1), "model": model,
        "turns": turn_count, "memories": sum(r["memories"] for r in rows), "actions": dict(actions),
        "recall_p50_ms": round(statistics.median(latencies), 1) if latencies else 0.0,
        "recall_p95_ms": round(latencies[max(0, int(len(latencies) * 0.95) - 1)], 1) if latencies else 0.0,
        "store_per_second": round(stored / sum(r["store_seconds"] for r in rows), 1) if stored else None,
        "first_hit_rank": {r["id"]: r["first"] for r in rows},
    }


def _mean(values: Any) -> float:
    values = [float(v) for v in values]
    return round(sum(values) / len(values), 4) if values else 0.0


def round_robin(questions: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """Returns the first `count` (0: all) questions taken in turn from each question type, so any
    prefix is stratified like the whole file."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for question in questions:
        by_type.setdefault(question["question_type"], []).append(question)
    order = [group[i] for i in range(max(map(len, by_type.values()), default=0))
             for group in by_type.values() if i < len(group)]
    return order[:count] if count > 0 else order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LongMemEval JSON file (a list of questions)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--questions", type=int, default=0, help="run only this many, spread over the file")
    parser.add_argument("--type", default="", help="only questions of these types (comma-separated)")
    parser.add_argument("--ids", default="", help="only these question ids (comma-separated), in this order")
    parser.add_argument("--keep", type=Path, help="keep the stored vaults here; a rerun only recalls")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    questions = json.loads(args.data.read_text(encoding="utf-8"))
    if args.type:
        questions = [q for q in questions if q["question_type"] in args.type.split(",")]
    questions = round_robin(questions, args.questions)
    if args.ids:
        by_id = {q["question_id"]: q for q in questions}
        questions = [by_id[i] for i in args.ids.split(",") if i in by_id]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    settings = load_settings(Path(tempfile.gettempdir()))
    embedder = load_embedder(settings.model)
    embedder.embed(["warm up"])
    started = time.perf_counter()
    rows = []
    for number, question in enumerate(questions, start=1):
        print(f"{number}/{len(questions)} {question['question_id']} ({question['question_type']})…", file=sys.stderr)
        rows.append(run_question(question, embedder, args.keep))
    summary = summarise(rows, args.k, time.perf_counter() - started, settings.model)
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    k = args.k
    print(f"turn Hit@{k} {summary[f'hit@{k}']:.1%}  session Hit@{k} {summary[f'session_hit@{k}']:.1%}  "
          f"Recall@10 {summary['recall@10']:.1%}  MRR {summary['mrr']:.3f}  "
          f"({summary['questions']} questions, {summary['seconds']} s, {summary['model']})")
    for name, row in summary["by_type"].items():
        print(f"  {name:<26} {row[f'hit@{k}']:.1%}  session {row[f'session_hit@{k}']:.1%}  ({row['questions']})")
    print(f"{summary['turns']} turns became {summary['memories']} memories; writes: {summary['actions']}")
    print(f"recall p50 {summary['recall_p50_ms']} ms, p95 {summary['recall_p95_ms']} ms; "
          f"store {summary['store_per_second'] or '-'} turns/s")


if __name__ == "__main__":
    main()
