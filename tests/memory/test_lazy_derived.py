"""What a recall derives from the fold, it derives for what it looks at — and gets exactly what the
full computations give: the unarchived memories, their association links both ways, their
conversational neighbours (random stores against `unarchived`, `association_graph` and
`conversation_neighbours` over every memory). And a fresh handle brings the index in step by
checking only the memories named since the events the index records: random histories written
by "other processes" end with the rows and vectors a full check makes.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from compiler.core.settings import Settings
from compiler.events.journal import MemoryEvent, append_events
from compiler.memory import index as memory_index
from compiler.memory.index import conversation_context, conversation_neighbours, memory_text, row_hash
from compiler.memory.fold import IncrementalFold
from compiler.memory.model import association_graph, unarchived
from compiler.memory.snapshot import EventSet, Memories
from compiler.memory.vault import VaultMemory, read_memories, sync_index

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
KINDS = ("memory", "memory", "memory", "failure", "progress", "handoff")


def at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def random_events(rng: random.Random, count: int, start: int = 0, known: list[str] | None = None) -> list[MemoryEvent]:
    """Saves (conversations, links to anything, old and new, strong and weak) and changes to them."""
    ids = known if known is not None else []
    events = []
    for k in range(start, start + count):
        when = at(NOW - timedelta(days=200) + timedelta(minutes=k))
        if ids and rng.random() < 0.35:
            memory = rng.choice(ids)
            op = rng.choice(("update", "delete", "restore", "consolidate", "recall", "reinforce"))
            data = {"content": f"rewritten {k} of {memory}"} if op == "update" else \
                {"into": rng.choice(ids)} if op == "consolidate" else {}
            events.append(MemoryEvent(f"ev-{k}", op, memory, when, data, seq=0))
            continue
        memory = f"m{k}"
        pool = [*ids, "missing", memory]
        data = {"content": f"turn {k} about {rng.choice(('backups', 'relay', 'vpn', 'cats'))}",
                "project": rng.choice(("p", "q")), "kind": rng.choice(KINDS),
                "category": rng.choice(("fact", "strategy", "assumption", "failure")),
                "importance": round(rng.uniform(0.02, 1.0), 2),
                "created_at": at(NOW - timedelta(days=rng.uniform(0, 120))),
                "links": [[rng.choice(pool), round(rng.uniform(-0.1, 1.0), 2)] for _ in range(rng.randint(0, 3))]}
        if ids and rng.random() < 0.6:
            data["follows"] = rng.choice([ids[-1], ids[-1], rng.choice(ids), "gone"])
        ids.append(memory)
        events.append(MemoryEvent(f"ev-{k}", "save", memory, when, data, seq=0))
    return events


@pytest.mark.parametrize("seed", range(12))
def test_lookups_per_memory_equal_the_full_computations(seed):
    rng = random.Random(seed)
    events = random_events(rng, 300)
    fold = IncrementalFold()
    fold.update(events[:150])
    fold.update(events, known=150)  # the lookups as a long-lived handle's fold keeps them
    moment = NOW + timedelta(days=rng.choice((0, 10, 40)))
    for memories in (Memories(EventSet(events), fold.view(), moment, lookups=fold.lookups),
                     Memories(EventSet(events), dict(fold.state), moment)):  # lookups built from the state
        state = memories.state
        full_live = unarchived(state, moment)
        assert 0 < len(full_live) < sum(o.live for o in state.values())  # some archived, some not
        lazy = Memories(memories.events, state, moment, lookups=memories.lookups)
        assert {i: lazy.live.get(i) for i in [*state, "missing"]} == {i: full_live.get(i) for i in [*state, "missing"]}
        assert bool(lazy.live) and dict(lazy.live) == full_live and list(lazy.live) == list(full_live)
        graph = association_graph(full_live)
        assert graph  # links among live memories exist
        lazy = Memories(memories.events, state, moment, lookups=memories.lookups)
        assert {i: lazy.associations.get(i) for i in [*state, "missing"]} == {i: graph.get(i) for i in [*state, "missing"]}
        assert dict(lazy.associations) == graph
        full_neighbours = conversation_neighbours({i: o for i, o in state.items() if o.live})
        some = rng.sample(list(state), 40) + ["missing"]
        assert memories.neighbours_of(some) == {i: full_neighbours[i] for i in some if i in full_neighbours}
        # A long-lived handle's second read of the same events in the same minute reuses the
        # first read's decisions (its derived views), completed or not: the same answers.
        shared: dict = {}
        first = Memories(memories.events, state, moment, shared, memories.lookups)
        [first.live.get(i) for i in some], [first.associations.get(i) for i in some]
        again = Memories(memories.events, state, moment, shared, memories.lookups)
        assert again.live is first.live and again.associations is first.associations
        assert {i: again.live.get(i) for i in state} == {i: full_live.get(i) for i in state}
        assert {i: again.associations.get(i) for i in state} == {i: graph.get(i) for i in state}
        assert again.neighbours_of(some) == {i: full_neighbours[i] for i in some if i in full_neighbours}


def test_an_empty_or_wholly_archived_store_has_no_live_memories():
    old = at(NOW - timedelta(days=900))
    events = [MemoryEvent("e1", "save", "m1", old, {"content": "faded", "importance": 0.1, "created_at": old}, seq=0)]
    fold = IncrementalFold()
    fold.update(events)
    assert not Memories(EventSet(events), fold.view(), NOW, lookups=fold.lookups).live
    assert not Memories(EventSet(()), {}, NOW).live


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def assert_index_as_a_full_check_makes_it(memories: VaultMemory, embedder) -> None:
    """Every live memory's keyword row has the hash a full `sync_index` computes, no other row is
    left, and every vector is that of the memory's current text."""
    indexed = read_memories(memories).indexed
    context = conversation_context(indexed)
    index = memories.index()
    assert index.keywords.hashes() == {i: row_hash(o, context.get(i, "")) for i, o in indexed.items()}
    assert index.vectors.count() == len(indexed)
    stored = index.vectors.vectors(sorted(indexed))
    expected = embedder.embed([memory_text(indexed[i]) for i in sorted(indexed)])
    assert np.allclose(np.stack([stored[i] for i in sorted(indexed)]), expected, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_a_fresh_handle_checks_only_what_other_processes_named_and_ends_as_a_full_check(vault, fake_embedder,
                                                                                     monkeypatch, seed):
    rng = random.Random(seed)
    full, named = [], []
    real_full, real_named = memory_index.sync_index, memory_index.sync_named
    monkeypatch.setattr(memory_index, "sync_index", lambda *args: full.append(1) or real_full(*args))
    monkeypatch.setattr(memory_index, "sync_named", lambda *args: named.append(set(args[2])) or real_named(*args))
    engram, ids, start = vault / ".engram", [], 0
    settings = replace(Settings())
    for round_ in range(6):
        events = random_events(rng, rng.randint(1, 25), start, ids)
        start += len(events)
        append_events(engram, events)  # another process wrote them and never indexed them
        with VaultMemory(vault, settings, embedder=fake_embedder, now=NOW) as memories:
            sync_index(memories, read_memories(memories))
            assert_index_as_a_full_check_makes_it(memories, fake_embedder)
        if round_ == 0:
            assert (len(full), named) == (1, [])  # no record yet: every memory
        else:
            assert len(full) == 1 and named[-1] == {e.memory for e in events if e.op != "recall"}


def test_lost_vectors_or_a_new_model_check_every_memory(vault, fake_embedder, monkeypatch):
    full = []
    real_full = memory_index.sync_index
    monkeypatch.setattr(memory_index, "sync_index", lambda *args: full.append(1) or real_full(*args))
    append_events(vault / ".engram", random_events(random.Random(5), 30))
    settings = replace(Settings())
    with VaultMemory(vault, settings, embedder=fake_embedder, now=NOW) as memories:
        sync_index(memories, read_memories(memories))
        memories.index().vectors.reset()  # the vectors lost, the keyword rows and their record kept
    with VaultMemory(vault, settings, embedder=fake_embedder, now=NOW) as memories:
        sync_index(memories, read_memories(memories))
        assert_index_as_a_full_check_makes_it(memories, fake_embedder)
    assert len(full) == 2
    other = type(fake_embedder)()
    other.identity = "another-model"
    with VaultMemory(vault, settings, embedder=other, now=NOW) as memories:
        sync_index(memories, read_memories(memories))
    assert len(full) == 3


def test_a_batchs_drafts_add_reverse_links_without_changing_the_folds():
    fold = IncrementalFold()
    fold.update([MemoryEvent("e1", "save", "a", at(NOW), {"content": "a"}, seq=0),
                 MemoryEvent("e2", "save", "b", at(NOW), {"content": "b", "links": [["a", 0.5]]}, seq=1)])
    drafts = fold.lookups.layer()
    for name in ("c", "d"):
        drafts.note(None, replace(fold.state["b"], id=name))
    assert drafts.linked_from["a"] == ["b", "c", "d"] and fold.lookups.linked_from == {"a": ["b"]}
