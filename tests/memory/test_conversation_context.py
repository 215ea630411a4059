"""What a write recomputes, it recomputes for what changed only: the conversational context of the
rows it rewrites (the same strings the full computation gives them) and the fold of the new events.
"""

from __future__ import annotations

from compiler.events.journal import MemoryEvent
from compiler.memory.index import conversation_context
from compiler.memory.model import IncrementalFold, Observation, fold


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


def save(event_id: str, memory: str, at: str, content: str) -> MemoryEvent:
    return MemoryEvent(event_id, "save", memory, at, {"content": content, "project": "p"}, seq=0)


def update(event_id: str, memory: str, at: str, content: str) -> MemoryEvent:
    return MemoryEvent(event_id, "update", memory, at, {"content": content}, seq=0)


def test_the_fold_of_a_grown_event_list_looks_only_at_the_new_events_and_equals_a_full_fold():
    first = (save("e1", "m1", "2026-01-01 00:00:01", "one"), save("e2", "m2", "2026-01-01 00:00:02", "two"))
    incremental = IncrementalFold()
    incremental.update(first)
    grown = (*first, update("e3", "m1", "2026-01-01 00:00:03", "one, edited"))
    state = incremental.update(grown, known=len(first))
    assert state == fold(grown) and state["m1"].content == "one, edited"
    # An event older than the last applied one (a chunk from another machine) refolds everything.
    late = (*grown, update("e0", "m2", "2026-01-01 00:00:02.5", "two, edited before e3"))
    assert incremental.update(late, known=len(grown)) == fold(late)
