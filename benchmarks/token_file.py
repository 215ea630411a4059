"""How much of the token-vector file is dead, and what compacting it costs:
`python benchmarks/token_file.py VAULT [--compact] [--json]`.

Finds the texts still in use as compile does (every section of the notes the last build parsed,
every live memory of the events' fold) and how many of the file's bytes they take. With
`--compact` it then rewrites the file whatever the share (compile does that only past
`token_cache.COMPACT_SHARE` and `COMPACT_MIN_BYTES`) and reports the size after and the wall and
CPU seconds. It writes into VAULT's cache: run it on a copy. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.core.settings import load_settings  # noqa: E402
from compiler.embed.embedder import model_identity  # noqa: E402
from compiler.index.cache import text_hash  # noqa: E402
from compiler.index.token_cache import TokenVectorCache  # noqa: E402
from compiler.memory.index import memory_text  # noqa: E402
from compiler.memory.vault import VaultMemory, read_memories  # noqa: E402
from compiler.pipeline.index import section_texts  # noqa: E402
from compiler.pipeline.state import load_state  # noqa: E402


def measure(vault: Path, compact: bool) -> dict[str, object]:
    """Returns the file's usage (and, with `compact`, the compaction's result and cost)."""
    settings = load_settings(vault)
    state, _ = load_state(vault / ".engram" / "cache" / "state.json")
    with VaultMemory(vault, settings) as memory:
        live = [memory_text(o) for o in read_memories(memory).state.values() if o.live]
    texts = section_texts(state.notes) + live
    identity = state.model or model_identity(settings.model)
    tokens = TokenVectorCache(vault / ".engram" / "cache" / "embeddings.sqlite")
    try:
        found = tokens.compact({identity: {text_hash(t) for t in texts}}, share=1.0)
        result: dict[str, object] = {"texts_in_use": len(texts), "memories_live": len(live), **found.to_dict()}
        if compact:
            wall, cpu = time.perf_counter(), time.process_time()
            done = tokens.compact({identity: {text_hash(t) for t in texts}}, share=0.0, floor=0)
            result["compaction"] = {**done.to_dict(), "wall_s": round(time.perf_counter() - wall, 3),
                                    "cpu_s": round(time.process_time() - cpu, 3)}
    finally:
        tokens.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("vault", type=Path)
    parser.add_argument("--compact", action="store_true", help="rewrite the file whatever the dead share")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.vault.resolve(), args.compact)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
