"""Resolve on write: is a new statement the same as, an update of, or different from what we know?

A pure decision over the nearest existing memories (found through the vector index):

    cosine ≥ replace_min and contradictory     → REPLACE (the old content stays as history)
    cosine ≥ reinforce_min                     → REINFORCE (recall_count + 1, no new record)
    merge_min ≤ cosine < reinforce_min          → MERGE (unless the merged text would grow too long)
    otherwise                                  → NEW, with association links to close memories

The contradiction check reaches further down than merging (replace_min < merge_min): with
MiniLM, "prefers TypeScript" and "abandons TypeScript for Go" are only 0.55 similar, while
distinct statements on one topic are often 0.65–0.8 similar and must not be fused.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.memory.model import Observation

CONTRADICTION_CANDIDATES = 3  # the closest memories checked for a contradiction


@dataclass(frozen=True)
class Thresholds:
    reinforce_min: float = 0.95
    merge_min: float = 0.90
    replace_min: float = 0.50
    merge_max_chars: int = 1000
    associate_min: float = 0.50
    associate_max: int = 5


@dataclass(frozen=True)
class Decision:
    action: str  # "new" | "reinforced" | "merged" | "replaced"
    target: str = ""  # the memory reinforced, merged into or replaced
    similarity: float = 0.0
    reason: str = ""
    content: str = ""  # the resulting content for merged / replaced
    links: tuple[tuple[str, float], ...] = ()  # for new memories: (id, cosine × 0.5)


def considered(limits: Thresholds) -> int:
    """Returns how many of the closest candidates `decide` looks at (the contradiction candidates,
    the merge target, the links): the rest never change its decision."""
    return max(CONTRADICTION_CANDIDATES, limits.associate_max, 1)


def decide(content: str, nearest: Sequence[tuple[Observation, float]], limits: Thresholds) -> Decision:
    """Returns what to do with `content`, given the closest live memories of the same project and kind."""
    from compiler.memory.contradiction import check_contradiction

    # nsmallest is sorted()[:n]: a batch's hundreds of earlier items are not sorted for each write
    ranked = heapq.nsmallest(considered(limits), nearest, key=lambda pair: (-pair[1], pair[0].id))
    for target, cosine in ranked[:CONTRADICTION_CANDIDATES]:
        if cosine < limits.replace_min:
            break
        verdict = check_contradiction(target.content, content)
        if verdict.contradicts:
            return Decision("replaced", target.id, cosine, verdict.reason, content)
    if ranked and ranked[0][1] >= limits.merge_min:
        target, cosine = ranked[0]
        if cosine >= limits.reinforce_min:
            return Decision("reinforced", target.id, cosine, "same statement")
        merged = merge_text(target.content, content)
        if len(merged) <= limits.merge_max_chars:
            return Decision("merged", target.id, cosine, "same topic, compatible", merged)
    links = tuple((o.id, round(c * 0.5, 4)) for o, c in ranked if c >= limits.associate_min)[:limits.associate_max]
    return Decision("new", similarity=ranked[0][1] if ranked else 0.0, links=links)


def _normal(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def merge_text(old: str, new: str) -> str:
    """Returns the content of a merge: the fuller statement, or both when each adds something."""
    if _normal(old) in _normal(new):
        return new.strip()
    if _normal(new) in _normal(old):
        return old.strip()
    return f"{old.strip()}\n{new.strip()}"
