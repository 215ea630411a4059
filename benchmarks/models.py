"""Embedding models side by side: what each costs, and where its cosines fall.

    python benchmarks/models.py --data ../shared/data/locomo-dev.json [--models A,B] [--json]

Default models: the bundled MiniLM and multilingual-e5-small (the `multilingual` extra), loaded
in one process (MiniLM first). For each model:

- load: importing the model's library, loading the weights and embedding one text;
- query p50: one short query at a time, 30 queries, the median;
- passage throughput: the first 400 LoCoMo turns (as `benchmarks/locomo.py` stores them) in one
  call, texts per wall second and per CPU second of the process;
- nearest earlier turn: for every turn, its best cosine to an earlier turn of its conversation,
  the share of turns at or above each threshold — the share of LoCoMo writes that the memory
  resolve would fold into an older memory at that threshold, though they are all distinct;
- paraphrases: the cosine of hand-made pairs of one fact reworded (should merge), and of the
  bilingual facts (English vs Spanish of one fact, from benchmarks/bilingual.py);
- contradictions: the share of the contradicting pairs of tests/test_contradiction.py at or above
  the model's `replace_min` (only those reach the contradiction check).

Then, for each cosine setting of the first model, the cosine of every other model that puts the
same share of LoCoMo turn pairs (within a conversation) at or above it: how the multilingual
model's defaults in compiler/core/settings.py were derived.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bilingual import FACTS  # noqa: E402
from locomo import turns  # noqa: E402
from tests.memory.test_contradiction import PAIRS as CONTRADICTION_PAIRS  # noqa: E402

from compiler.core.settings import BUNDLED_MODEL, MULTILINGUAL_MODEL, load_settings  # noqa: E402
from compiler.embed.embedder import embed_query, load_embedder  # noqa: E402

THRESHOLDS = (0.50, 0.65, 0.80, 0.85, 0.90, 0.93, 0.95)
SETTINGS = ("related_min_cosine", "replace_min", "associate_min", "merge_min", "reinforce_min", "consolidate_min")
QUERIES = [f"what did {name} say about the {thing}?" for name in ("Caroline", "Melanie", "Jon")
           for thing in ("adoption agency", "camping trip", "painting", "new job", "dance studio",
                         "support group", "kids", "charity race", "pottery class", "book")]
# (a memory, the same fact reworded): writes that should reinforce or merge.
PARAPHRASES = [
    ("The user prefers dark mode in every editor.", "The user likes dark mode in all of their editors."),
    ("Never deploy on Fridays.", "Deploys are not allowed on Fridays."),
    ("The API rate limit is 100 requests per minute.", "The rate limit of the API is 100 requests a minute."),
    ("Integration tests run against a real PostgreSQL in Docker.",
     "The integration tests use a real PostgreSQL running in Docker."),
    ("Marta owns the refunds flow.", "The refunds flow is owned by Marta."),
    ("The nightly backup is stored in S3 in Frankfurt.", "Nightly backups go to an S3 bucket in Frankfurt."),
    ("The user prefers TypeScript for new services.", "For new services the user prefers TypeScript."),
    ("CI runs on GitHub Actions.", "Our CI runs in GitHub Actions."),
    ("El usuario prefiere el modo oscuro.", "Al usuario le gusta el modo oscuro."),
    ("Las claves de la API se rotan cada noventa días.", "Rotamos las claves de la API cada 90 días."),
    ("La guardia cambia cada lunes a las nueve.", "El turno de guardia rota los lunes a las 9."),
    ("Nunca desplegamos los viernes.", "Los viernes no se despliega."),
]


def nearest_earlier(vectors: np.ndarray) -> np.ndarray:
    """Returns, for each row after the first, its best cosine to an earlier row."""
    sims = vectors @ vectors.T
    return np.array([sims[i, :i].max() for i in range(1, len(vectors))])


def pair_cosines(embedder, pairs: list[tuple[str, str]]) -> list[float]:
    left, right = embedder.embed([a for a, _ in pairs]), embedder.embed([b for _, b in pairs])
    return [round(float(c), 3) for c in (left * right).sum(axis=1)]


def measure(model: str, conversations: list[list[str]]) -> tuple[dict, np.ndarray]:
    """Returns (the figures of `model`, the cosines of all turn pairs within each conversation)."""
    started = time.perf_counter()
    embedder = load_embedder(model)
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - started
    latencies = []
    for query in QUERIES:
        started = time.perf_counter()
        embed_query(embedder, query)
        latencies.append(time.perf_counter() - started)
    batch = [t for conversation in conversations for t in conversation][:400]
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed(batch)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    vectors = [embedder.embed(c) for c in conversations]
    nearest = np.concatenate([nearest_earlier(v) for v in vectors])
    pairs = np.concatenate([(v @ v.T)[np.triu_indices(len(v), 1)] for v in vectors])
    paraphrases = pair_cosines(embedder, PARAPHRASES)
    translations = pair_cosines(embedder, [(f[0], f[1]) for f in FACTS])
    contradictions = [c for c, (_, _, label) in zip(pair_cosines(embedder, [p[:2] for p in CONTRADICTION_PAIRS]),
                                                     CONTRADICTION_PAIRS) if label]
    replace_min = load_settings(Path(tempfile.gettempdir()), model=model).replace_min
    return {"model": model, "identity": embedder.identity, "load_s": round(load_s, 2),
            "query_p50_ms": round(statistics.median(latencies) * 1000, 1),
            "passages": len(batch), "passages_per_s": round(len(batch) / wall, 1),
            "passages_per_cpu_s": round(len(batch) / cpu, 1),
            "turns": len(nearest),
            "nearest_earlier_at_least": {f"{t:.2f}": round(float((nearest >= t).mean()), 3) for t in THRESHOLDS},
            "nearest_earlier_median": round(float(np.median(nearest)), 3),
            "paraphrase": {"min": min(paraphrases), "median": round(statistics.median(paraphrases), 3),
                           "all": paraphrases},
            "translation": {"min": min(translations), "median": round(statistics.median(translations), 3)},
            "contradictions_reaching_check": {"replace_min": replace_min,
                                              "share": round(sum(c >= replace_min for c in contradictions)
                                                             / len(contradictions), 3)}}, pairs


def equal_share(settings_of: str, reference: np.ndarray, other: np.ndarray) -> dict[str, dict[str, float]]:
    """Returns, per cosine setting of `settings_of`, its value, the share of `reference` pairs at or
    above it, and the cosine with the same share in `other`."""
    settings = load_settings(Path(tempfile.gettempdir()), model=settings_of)
    result = {}
    for name in SETTINGS:
        value = getattr(settings, name)
        share = float((reference >= value).mean())
        result[name] = {"value": value, "share": round(share, 5), "equal_share": round(float(np.quantile(other, 1 - share)), 3)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--models", default=f"{BUNDLED_MODEL},{MULTILINGUAL_MODEL}", help="comma-separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    conversations = [[text for _, text, _ in turns(s["conversation"])] for s in samples]
    measured = [measure(model, conversations) for model in args.models.split(",")]
    results = [r for r, _ in measured]
    (first, reference), others = measured[0], measured[1:]
    matched = {r["model"]: equal_share(first["model"], reference, pairs) for r, pairs in others}
    if args.json:
        print(json.dumps({"models": results, "equal_share": matched}, indent=2))
        return
    for r in results:
        print(f"{r['identity']}: load {r['load_s']} s, query p50 {r['query_p50_ms']} ms, "
              f"{r['passages_per_s']} passages/s ({r['passages_per_cpu_s']} per CPU s, {r['passages']} LoCoMo turns)")
        shares = "  ".join(f"≥{t} {s:.1%}" for t, s in r["nearest_earlier_at_least"].items())
        print(f"  nearest earlier turn ({r['turns']} turns, median {r['nearest_earlier_median']}): {shares}")
        print(f"  paraphrase pairs: min {r['paraphrase']['min']}, median {r['paraphrase']['median']}; "
              f"English/Spanish pairs: min {r['translation']['min']}, median {r['translation']['median']}")
        reached = r["contradictions_reaching_check"]
        print(f"  contradicting pairs at or above replace_min {reached['replace_min']}: {reached['share']:.1%}")
    for model, rows in matched.items():
        print(f"{first['model']} settings → {model} cosine with the same share of LoCoMo turn pairs above it:")
        for name, row in rows.items():
            print(f"  {name:<20} {row['value']:.2f} ({row['share']:.3%} of pairs) → {row['equal_share']}")


if __name__ == "__main__":
    main()
