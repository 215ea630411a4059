"""A write rebuilds the conversational context of the rows it rewrites only: the same strings the
full computation gives for them, whatever the chain looks like."""

from __future__ import annotations

from compiler.memory.index import conversation_context
from compiler.memory.model import Observation


def chain() -> dict[str, Observation]:
    # a ← b ← c ← d (a conversation); e alone; f follows a memory that is not live; g also follows b
    follows = {"a": "", "b": "a", "c": "b", "d": "c", "e": "", "f": "gone", "g": "b"}
    return {i: Observation(id=i, project="p", title="", content=f"turn {i}", follows=f) for i, f in follows.items()}


def test_context_of_some_rows_equals_the_full_context_of_those_rows():
    live = chain()
    full = conversation_context(live)
    assert full["b"] == "turn a\nturn c\x1fturn d"  # near: before and after; far: two places after (a has no before)
    for only in (["a"], ["b", "d"], ["c", "e", "f", "g"], ["d", "d", "missing"], list(live)):
        assert conversation_context(live, only) == {i: full[i] for i in only if i in full}
