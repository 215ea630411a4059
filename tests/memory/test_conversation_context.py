"""What a write recomputes, it recomputes for what changed only: the conversational context of the
rows it rewrites (the same strings the full computation gives them) and the fold of the new events.
"""

from __future__ import annotations

from compiler.events.journal import MemoryEvent
from compiler.memory.fold import IncrementalFold, Layer, Lookups, fold
from compiler.memory.index import LiveView, conversation_context
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


def test_context_looked_up_through_the_followers_equals_the_full_context():
    """What a write uses: no pass over the store, only the lookups the fold keeps (and a live view
    that hides a forgotten memory)."""
    state = {**chain(), "x": Observation(id="x", project="p", title="", content="turn x", follows="d",
                                         deleted_at="2026-01-01 00:00:00")}
    lookups = Lookups()
    for obs in state.values():
        lookups.note(None, obs)
    live = {i: o for i, o in state.items() if o.live}
    full = conversation_context(live)
    for only in (["a"], ["b", "d"], ["c", "e", "f", "g"], ["d", "d", "missing", "x"], list(state)):
        assert conversation_context(LiveView(state), only, lookups.followers) == {i: full[i] for i in only if i in full}


def test_the_folds_lookups_equal_lookups_built_from_its_state():
    events = (save("e1", "m1", "2026-01-01 00:00:01", "one"),
              MemoryEvent("e2", "save", "m2", "2026-01-01 00:00:02", {"content": "two", "follows": "m1"}, seq=0),
              MemoryEvent("e3", "reinforce", "m1", "2026-01-01 00:00:03", {"sources": ["m3", "ext-3"]}, seq=0))
    incremental = IncrementalFold()
    incremental.update(events[:2])
    incremental.update(events, known=2)
    assert incremental.lookups.holders == {"m1": "m1", "m2": "m2", "m3": "m1", "ext-3": "m1"}
    assert incremental.lookups.followers == {"m1": ("m2",)}
    layer = incremental.lookups.layer()  # a batch's drafts: noted on top, the fold's own lookups untouched
    layer.note(None, Observation(id="m4", project="p", title="", content="four", follows="m1", sources=("m4",)))
    assert layer.followers["m1"] == ("m2", "m4") and layer.holders["m4"] == "m4"
    assert incremental.lookups.followers == {"m1": ("m2",)} and "m4" not in incremental.lookups.holders


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


def test_a_view_of_the_fold_reads_its_state_uncopied_and_keeps_its_version_while_held():
    """A read hands out a view of the fold's own dict (copying 50,000 memories per write made a
    write O(store)); a view still held when the fold changes is given a copy first, so a snapshot
    never changes."""
    incremental = IncrementalFold()
    incremental.update((save("e1", "m1", "2026-01-01 00:00:01", "one"),))
    held = incremental.view()
    incremental.update((save("e1", "m1", "2026-01-01 00:00:01", "one"),
                        update("e2", "m1", "2026-01-01 00:00:02", "one, edited")), known=1)
    assert held["m1"].content == "one" and dict(held) == fold((save("e1", "m1", "2026-01-01 00:00:01", "one"),))
    current = incremental.view()
    assert current["m1"].content == "one, edited"
    assert current._data is incremental.state  # nothing held it across a change: never copied
    del current
    incremental.update((save("e3", "m3", "2026-01-01 00:00:03", "three"),))
    assert held["m1"].content == "one" and "m3" not in held and incremental.view()._data is incremental.state


def test_a_layer_reads_through_to_its_base_and_keeps_its_writes_to_itself():
    base = {"a": 1, "b": 2}
    layer = Layer(base)
    layer["b"], layer["c"] = 20, 3
    assert (layer["a"], layer["b"], layer.get("c"), layer.get("d", "none")) == (1, 20, 3, "none")
    assert "a" in layer and "c" in layer and "d" not in layer and list(layer) == ["a", "b", "c"] and len(layer) == 3
    del layer["c"]
    assert base == {"a": 1, "b": 2} and dict(layer) == {"a": 1, "b": 20}
