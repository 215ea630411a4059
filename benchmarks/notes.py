"""Note search quality on a vault nobody here wrote: `search`, `vsearch` and `query` at defaults.

    python benchmarks/notes.py [--workdir DIR] [--cache DIR] [--model M] [--part dev|heldout|heldout2|both|all] [--misses] [--json]

The vault is real documentation shipped inside npm packages, fetched at run time with `npm pack`
at pinned versions (cached in --cache, default ~/.cache/engram-bench), never committed:

- npm 12.2.0 (Artistic-2.0): its docs/content/ — 70 command pages, configuring-npm/, using-npm/;
- undici, as bundled inside that npm tarball (MIT): its docs/docs/api/ and best-practices/;
- markdownlint 0.40.0 (MIT): its doc/ folder, one page per rule, without Rules.md (every rule
  page again, concatenated) and CHANGELOG.md.

Each package's LICENSE file is copied next to its pages (and indexed with them, as a user's
vault would). The questions come in two parts: dev, benchmarks/notes_questions.json, written
before any search ran (its first commit says so) and the set `query`'s recipe was then chosen on;
heldout, benchmarks/notes_questions_heldout.json, written afterwards, also before any search ran on
it, and not used to choose anything before it was measured; heldout2,
benchmarks/notes_questions_heldout2.json, written blind to confirm or reject one change chosen on the
other two. `--part` picks one, both (dev and heldout) or all three (default: dev, the output of
before). A question's hit is any note it names; MRR counts the top 10.
The vault is compiled once into --workdir (kept, so a second run reuses the index: a no-op
compile) or a temporary folder. Prints Hit@1, Hit@5 and MRR per search mode, split by the
question's language and part, then the index size and query p50 per mode. In --json, a mode's
groups are keyed by language for dev ("en", "es", "all": the keys of before) and
"heldout-en", "heldout-es", "heldout-all" (and "heldout2-…") for the held-out parts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.core.settings import load_settings  # noqa: E402
from compiler.embed.embedder import load_embedder  # noqa: E402
from compiler.notes.search import hybrid_search, keyword_search, vector_search  # noqa: E402
from compiler.pipeline.spine import compile_vault  # noqa: E402

PARTS = {"dev": Path(__file__).resolve().parent / "notes_questions.json",
         "heldout": Path(__file__).resolve().parent / "notes_questions_heldout.json",
         "heldout2": Path(__file__).resolve().parent / "notes_questions_heldout2.json"}
# (npm package spec, {folder in the tarball: folder in the vault}, license file in the tarball)
SOURCES = [
    ("npm@12.2.0", {"package/docs/content": "npm", "package/node_modules/undici/docs/docs": "undici"},
     {"npm": "package/LICENSE", "undici": "package/node_modules/undici/LICENSE"}),
    ("markdownlint@0.40.0", {"package/doc": "markdownlint"}, {"markdownlint": "package/LICENSE"}),
]
LEFT_OUT = {"markdownlint/Rules.md"}  # every rule page again in one file: a duplicate of the vault
DEPTH = 10  # results asked for; MRR counts ranks up to here


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fetch(cache: Path) -> list[Path]:
    """Returns the cached tarballs of SOURCES, packing the missing ones with `npm pack`."""
    cache.mkdir(parents=True, exist_ok=True)
    tarballs = []
    for spec, _, _ in SOURCES:
        name, version = spec.rsplit("@", 1)
        tarball = cache / f"{name}-{version}.tgz"
        if not tarball.is_file():
            log(f"fetching {spec} with npm pack")
            subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", str(cache)], check=True,
                           stdout=subprocess.DEVNULL)
        tarballs.append(tarball)
    return tarballs


def build_vault(tarballs: list[Path], vault: Path) -> int:
    """Extracts the documentation folders (and licenses) into `vault`; returns the number of pages."""
    pages = 0
    for tarball, (_, folders, licenses) in zip(tarballs, SOURCES):
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                for inside, target in folders.items():
                    if not (member.isfile() and member.name.startswith(inside + "/") and member.name.endswith(".md")):
                        continue
                    relative = f"{target}/{member.name[len(inside) + 1:]}"
                    if relative in LEFT_OUT or relative.endswith("CHANGELOG.md"):
                        continue
                    destination = vault / relative
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    destination.write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
                    pages += 1
            for target, inside in licenses.items():
                (vault / target / "LICENSE.md").write_bytes(archive.extractfile(inside).read())  # type: ignore[union-attr]
    return pages


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def score(ranks: list[int]) -> dict[str, float]:
    return {"hit@1": round(sum(r == 1 for r in ranks) / len(ranks), 3),
            "hit@5": round(sum(0 < r <= 5 for r in ranks) / len(ranks), 3),
            "mrr": round(sum(1 / r for r in ranks if r) / len(ranks), 3), "questions": len(ranks)}


def load_questions(parts: list[str]) -> list[dict[str, Any]]:
    """The questions of `parts`, each with its "part" added."""
    questions = []
    for part in parts:
        for question in json.loads(PARTS[part].read_text(encoding="utf-8"))["questions"]:
            questions.append({**question, "part": part})
    return questions


def groups_of(question: dict[str, Any]) -> tuple[str, str]:
    """The score groups a question counts in: its language and its part ("all"), prefixed but for dev."""
    prefix = "" if question["part"] == "dev" else question["part"] + "-"
    return prefix + "all", prefix + question["lang"]


def run(workdir: Path, cache: Path, model: str, parts: list[str]) -> dict[str, Any]:
    vault = workdir / "vault"
    if not vault.is_dir():
        pages = build_vault(fetch(cache), vault)
    else:
        pages = sum(1 for p in vault.rglob("*.md") if not p.name == "LICENSE.md" and "_engram" not in p.parts)
    settings = load_settings(vault, model=model)
    log(f"compiling {pages} pages")
    started = time.perf_counter()
    report = compile_vault(vault, settings)
    compile_s = time.perf_counter() - started
    embedder = load_embedder(settings.model)
    questions = load_questions(parts)
    modes: dict[str, Callable[[str], list[dict[str, Any]]]] = {
        "search": lambda q: keyword_search(vault, q, DEPTH),
        "vsearch": lambda q: vector_search(vault, q, DEPTH, embedder=embedder, chroma_url=settings.chroma_url),
        "query": lambda q: hybrid_search(vault, q, DEPTH, embedder=embedder, chroma_url=settings.chroma_url,
                                         graph_bonus=settings.graph_bonus),
    }
    modes["vsearch"]("warm up")  # the first query loads the model and opens the store
    ranks: dict[str, dict[str, list[int]]] = {m: {} for m in modes}
    times: dict[str, list[float]] = {m: [] for m in modes}
    misses: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for question in questions:
        for mode, search in modes.items():
            started = time.perf_counter()
            files = [h["file"] for h in search(question["q"])]
            times[mode].append(time.perf_counter() - started)
            rank = next((r for r, f in enumerate(files, 1) if f in question["answers"]), 0)
            for group in groups_of(question):
                ranks[mode].setdefault(group, []).append(rank)
            if rank != 1:
                misses[mode].append({"part": question["part"], "q": question["q"], "rank": rank, "top": files[:3]})
    cache_dir = vault / ".engram" / "cache"
    return {
        "model": settings.model, "pages": pages, "sections": report.sections,
        "questions": len(questions), "parts": parts, "compile_s": round(compile_s, 1),
        "modes": {m: {group: score(r) for group, r in by_group.items()} for m, by_group in ranks.items()},
        "query_p50_ms": {m: round(1000 * statistics.median(t), 1) for m, t in times.items()},
        "index_bytes": {"keywords": (cache_dir / "fts.sqlite").stat().st_size,
                        "vectors": folder_bytes(cache_dir / "chroma"),
                        "all": folder_bytes(cache_dir)},
        "misses": misses,
        "load_avg": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="keep the vault and its index here (reused by the next run)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "engram-bench",
                        help="where the npm tarballs are kept")
    parser.add_argument("--model", default="", help="multilingual-e5-small or a sentence-transformers directory")
    parser.add_argument("--part", choices=("dev", "heldout", "heldout2", "both", "all"), default="dev",
                        help="which questions: dev (notes_questions.json, the default), heldout "
                             "(notes_questions_heldout.json), heldout2 (notes_questions_heldout2.json), "
                             "both (dev and heldout) or all")
    parser.add_argument("--misses", action="store_true", help="also list each mode's questions not ranked first")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="engram-notes-"))
    try:
        parts = {"both": ["dev", "heldout"], "all": list(PARTS)}.get(args.part, [args.part])
        result = run(workdir, args.cache, args.model, parts)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        if not args.misses:
            result.pop("misses")
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    print(f"{result['model']}: {result['pages']} pages, {result['sections']} sections, "
          f"{result['questions']} questions (load {result['load_avg']})")
    print(f"{'mode':<8} {'group':<11} {'n':>3}  Hit@1  Hit@5   MRR   p50")
    for mode, groups in result["modes"].items():
        for group, row in sorted(groups.items(), key=lambda g: ("-" in g[0], g[0].endswith("all"), g[0])):
            print(f"{mode:<8} {group:<11} {row['questions']:>3}  {row['hit@1']:5.1%}  {row['hit@5']:5.1%}  "
                  f"{row['mrr']:.3f}  {result['query_p50_ms'][mode] if group.endswith('all') else '':>5}")
    sizes = result["index_bytes"]
    print(f"index: keywords {sizes['keywords'] / 1e6:.1f} MB, vectors {sizes['vectors'] / 1e6:.1f} MB, "
          f"all of .engram/cache {sizes['all'] / 1e6:.1f} MB; compile {result['compile_s']} s")
    if args.misses:
        for mode, rows in result["misses"].items():
            print(f"\n{mode} misses:")
            for row in rows:
                print(f"  {row['part']:<7} {row['rank'] or '-':>2}  {row['q']}  →  {', '.join(row['top'])}")


if __name__ == "__main__":
    main()
