"""The memory model and its library: decay, resolve, provenance, maintenance, engineering state.

Unit tests: a small fake embedder (texts sharing words are close) and a fixed `now`.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from compiler.pipeline.spine import compile_vault
from compiler.core.errors import InputError
from compiler.core.settings import Settings
from compiler.events.journal import read_journal
from compiler.memory.engineering import (
    load_handoff,
    memory_stats,
    save_handoff,
    track_failure,
    track_progress,
)
from compiler.memory.edits import forget_memory, restore_memory, update_memory
from compiler.memory.input import MemoryInput, read_import_file
from compiler.memory.maintenance import run_maintenance
from compiler.memory.fold import fold
from compiler.memory.model import Observation, archived, half_life_days
from compiler.memory.recall import recall
from compiler.memory.vault import VaultMemory, read_memories
from compiler.memory.write import store_memory, write_memories

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n\nA vault with agent memories.\n"})


def open_memory(vault: Path, embedder, now: datetime = NOW, **settings) -> VaultMemory:
    return VaultMemory(vault, replace(Settings(), **settings), embedder=embedder, now=now)


def state_of(memories: VaultMemory):
    """Every memory of the vault, folded from the events as they are now."""
    return read_memories(memories).state


def test_strength_follows_the_decay_formula():
    obs = Observation(id="m", project="p", title="t", content="c", category="fact", importance=0.5,
                      created_at="2026-11-20 12:00:00", reinforced_at="2026-11-20 12:00:00", recall_count=2)
    rate = 0.16 * (1 - 0.8 * 0.5)
    assert obs.strength(NOW) == pytest.approx(0.5 * math.exp(-rate * 10) * 1.4, rel=1e-9)
    assert half_life_days("fact", 0.5) == pytest.approx(math.log(2) / rate)
    assert half_life_days("failure", 0.9) < half_life_days("fact", 0.9) < half_life_days("strategy", 0.9)


def test_replaying_events_in_any_order_gives_the_same_state(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        first = store_memory(memories, MemoryInput("The deploy pipeline runs on GitHub Actions", project="web"))
        store_memory(memories, MemoryInput("Payments use Stripe webhooks with retries", project="web"))
        update_memory(memories, first["id"], content="The deploy pipeline runs on Buildkite")
        forget_memory(memories, first["id"])
        events, warnings = read_journal(vault / ".engram")
    assert not warnings and len({e.id for e in events}) == len(events) == 4
    expected = fold(events)
    for seed in range(5):
        shuffled = events[:]
        random.Random(seed).shuffle(shuffled)
        assert fold(shuffled + shuffled[:2]) == expected  # duplicates are applied once


def test_resolve_actions_new_reinforced_merged_replaced(vault, fake_embedder):
    with open_memory(vault, fake_embedder, reinforce_min=0.95, merge_min=0.6) as memories:
        new = store_memory(memories, MemoryInput("The user prefers TypeScript for new services", project="web"))
        again = store_memory(memories, MemoryInput("The user prefers TypeScript for new services", project="web"))
        merged = store_memory(memories, MemoryInput("The user prefers TypeScript for new services with strict mode",
                                                    project="web"))
        replaced = store_memory(memories, MemoryInput("The user decided to abandon TypeScript for Go in new services",
                                                      project="web"))
        other = store_memory(memories, MemoryInput("Grafana dashboards live in the ops repository", project="web"))
        state = state_of(memories)
    assert [r["action"] for r in (new, again, merged, replaced, other)] == \
        ["new", "reinforced", "merged", "replaced", "new"]
    assert again["id"] == merged["id"] == replaced["id"] == new["id"]
    obs = state[new["id"]]
    assert obs.content == "The user decided to abandon TypeScript for Go in new services"
    assert [v.op for v in obs.history] == ["merge", "replace"]  # nothing destroyed
    assert "with strict mode" in obs.history[-1].content
    assert obs.recall_count == 1


def test_projects_do_not_resolve_into_each_other(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        a = store_memory(memories, MemoryInput("Releases happen on Tuesdays", project="web"))
        b = store_memory(memories, MemoryInput("Releases happen on Tuesdays", project="api"))
    assert (a["action"], b["action"]) == ("new", "new") and a["id"] != b["id"]


def test_a_duplicate_is_found_behind_closer_memories_of_other_projects(vault, fake_embedder):
    """The nearest memories are searched within the item's project and kind: 40 identical
    statements in other projects (closer, or as close and older) must not hide its own."""
    text = "Releases happen on Tuesdays after the freeze"
    with open_memory(vault, fake_embedder) as memories:
        write_memories(memories, [MemoryInput(text, project=f"team-{k:02d}") for k in range(40)])
        own = store_memory(memories, MemoryInput(text, project="web"))
        again = store_memory(memories, MemoryInput(text, project="web"))
        failure = store_memory(memories, MemoryInput(text, project="web", kind="failure"))
    assert (own["action"], again["action"], again["id"]) == ("new", "reinforced", own["id"])
    assert failure["action"] == "new"  # another kind is never folded in


def test_provenance_keeps_every_source(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        first = store_memory(memories, MemoryInput("Caroline went to the LGBTQ support group", project="c",
                                                   source_id="D1:3"))
        second = store_memory(memories, MemoryInput("Caroline went to the LGBTQ support group", project="c",
                                                    source_id="D7:2"))
        sources = state_of(memories)[first["id"]].sources
    assert second["action"] == "reinforced"
    assert {"D1:3", "D7:2", first["id"]} <= set(sources) and len(sources) == 4  # both sync_ids and source ids


def test_import_is_idempotent_and_does_not_reembed(vault, fake_embedder, tmp_path):
    lines = [{"content": f"Fact number {i} about the data pipeline stage {i * 7}", "project": "data",
              "source_id": f"row-{i}", "importance": 0.6, "created_at": "2026-11-01T10:00:00Z"} for i in range(20)]
    lines.append({"content": "", "project": "data"})
    lines.append("not an object")
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    items, warnings = read_import_file(path)
    assert len(items) == 20 and [w.line for w in warnings] == [21, 22, 23]
    with open_memory(vault, fake_embedder) as memories:
        first = write_memories(memories, items)
        texts = fake_embedder.texts
        second = write_memories(memories, items)
        state = state_of(memories)
    assert sum(first["actions"].values()) == 20 and second["actions"] == {"known": 20}
    assert second["embedded"] == 0 and fake_embedder.texts == texts
    assert all(o.created_at == "2026-11-01 10:00:00" for o in state.values())


@pytest.mark.parametrize("item, message", [
    (MemoryInput(""), "empty"),
    (MemoryInput("x", importance=1.5), "from 0 to 1"),
    (MemoryInput("x", category="rumour"), "unknown category"),
    (MemoryInput("x" * 1_000_000), "over the 64 KB limit"),
])
def test_bad_input_is_a_clear_error(vault, fake_embedder, item, message):
    with open_memory(vault, fake_embedder) as memories, pytest.raises(InputError, match=message):
        store_memory(memories, item)
    assert not (vault / ".engram" / "journal.jsonl").exists()


def test_forget_and_restore(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        saved = store_memory(memories, MemoryInput("Staging database is called pg-staging-2", project="ops"))
        forget_memory(memories, saved["id"])
        assert not recall(memories, "staging database", project="ops")
        restore_memory(memories, saved["id"])
        hits = recall(memories, "staging database", project="ops")
    assert [h["id"] for h in hits] == [saved["id"]]


def test_recall_reinforces_what_it_returns(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        saved = store_memory(memories, MemoryInput("Use pnpm, not npm, in the web repo", project="web"))
        recall(memories, "which package manager in the web repo", project="web")
        recall(memories, "pnpm", project="web", reinforce=False)
        assert state_of(memories)[saved["id"]].recall_count == 1


def test_an_archived_memory_is_still_recalled_and_recalling_it_revives_it(vault, fake_embedder):
    later = NOW + timedelta(days=120)  # importance 0.2, never recalled: long under the archive line
    with open_memory(vault, fake_embedder) as memories:
        faded = store_memory(memories, MemoryInput("The office plant needs water on Mondays", project="ops",
                                                   importance=0.2))
    with open_memory(vault, fake_embedder, now=later) as memories:
        assert faded["id"] in archived(state_of(memories), later)
        fresh = store_memory(memories, MemoryInput("The office printer needs toner on Mondays", project="ops",
                                                   importance=0.2))
        hits = recall(memories, "office plant water", project="ops")
        assert [h["id"] for h in hits][:1] == [faded["id"]]  # archived, never lost: the query names it
        assert hits[0]["archived"] is True and hits[0]["strength"] < 0.05
        assert all(h["archived"] is False for h in hits if h["id"] == fresh["id"])
        assert faded["id"] not in archived(state_of(memories), later)  # the recall revived it
        again = recall(memories, "office plant water", project="ops", reinforce=False)
        assert again[0]["id"] == faded["id"] and again[0]["archived"] is False


def test_of_two_equal_matches_the_live_memory_outranks_the_archived_one(vault, fake_embedder):
    later = NOW + timedelta(days=120)
    with open_memory(vault, fake_embedder) as memories:
        old = store_memory(memories, MemoryInput("Rotate the staging TLS certificate", project="ops", importance=0.2))
    with open_memory(vault, fake_embedder, now=later) as memories:
        new = store_memory(memories, MemoryInput("Rotate the staging TLS certificate", project="web", importance=0.2))
        hits = recall(memories, "rotate staging TLS certificate", reinforce=False)
    assert [(h["id"], h["archived"]) for h in hits] == [(new["id"], False), (old["id"], True)]


def test_weak_memories_are_archived_unless_a_strong_neighbour_protects_them(vault, fake_embedder):
    later = NOW + timedelta(days=40)  # the strong one is still ≥ 0.30, the weak ones < 0.05
    with open_memory(vault, fake_embedder, associate_min=0.3) as memories:
        strong = store_memory(memories, MemoryInput("Kafka cluster brokers run on three nodes", project="ops",
                                                    importance=1.0, category="strategy"))
        chained = store_memory(memories, MemoryInput("Kafka cluster brokers need rack awareness", project="ops",
                                                     importance=0.2))
        lonely = store_memory(memories, MemoryInput("The office plant needs water on Mondays", project="ops",
                                                    importance=0.2))
        state = state_of(memories)
    assert strong["id"] in dict(state[chained["id"]].links)
    pruned = archived(state, later)
    assert lonely["id"] in pruned and chained["id"] not in pruned and strong["id"] not in pruned


def test_archived_protects_exactly_what_the_association_graph_protects():
    """The archive looks only at links touching weak memories; it must decide what the whole
    association graph decided (any link, either way, to a live memory at least 0.30 strong)."""
    from compiler.memory.model import PRUNE_BELOW, STRONG_NEIGHBOUR, association_graph

    rng = random.Random(3)
    ids = [f"m{i}" for i in range(300)]
    state = {i: Observation(id=i, project="p", title=i, content=i, category=rng.choice(["fact", "failure"]),
                            kind=rng.choice(["memory", "memory", "progress"]), importance=rng.uniform(0.01, 1.0),
                            recall_count=rng.choice([0, 0, 1, 4]), floor=rng.choice([0.0, 0.0, 0.0, 0.06]),
                            created_at=f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d} 00:00:00",
                            links=tuple((rng.choice(ids), 0.3) for _ in range(rng.randint(0, 3))),
                            deleted_at=rng.choice(["", "", "", "2026-11-01 00:00:00"])) for i in ids}
    strength = {i: o.strength(NOW) for i, o in state.items() if o.live}
    graph = association_graph(state)
    expected = {i for i, s in strength.items() if s < PRUNE_BELOW and state[i].kind in ("memory", "failure")
                and not any(strength.get(n, 0.0) >= STRONG_NEIGHBOUR for n in graph.get(i, {}))}
    assert expected and expected != {i for i, s in strength.items() if s < PRUNE_BELOW}  # both cases occur
    assert archived(state, NOW) == expected


def test_consolidation_folds_near_duplicates_into_the_most_important(vault, fake_embedder):
    with open_memory(vault, fake_embedder, reinforce_min=1.1, merge_min=1.1, consolidate_min=0.8) as memories:
        keep = store_memory(memories, MemoryInput("Redis cache keys expire after one hour", project="api",
                                                  importance=0.9))
        fold_in = store_memory(memories, MemoryInput("Redis cache keys expire after one hour always", project="api",
                                                     importance=0.4, source_id="chat-9"))
        failure = track_failure(memories, "Redis cache keys expire after one hour", "cache", project="api")
        report = run_maintenance(memories)
        state = state_of(memories)
        assert report["consolidated"] == 1
        assert state[fold_in["id"]].absorbed_into == keep["id"]
        assert "chat-9" in state[keep["id"]].sources
        assert state[failure["id"]].live  # a failure never folds into a plain memory
        restore_memory(memories, fold_in["id"])
        assert state_of(memories)[fold_in["id"]].live


def test_engineering_state(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        failure = track_failure(memories, "CSRF token missing", "payment", "critical", fix="send the header",
                                project="web")
        first = track_progress(memories, "login-refactor", "in_progress", 60, project="web")
        second = track_progress(memories, "login-refactor", "review", 90, project="web")
        save_handoff(memories, "Old handoff", next_steps=["x"], project="web")
    with open_memory(vault, fake_embedder, NOW + timedelta(hours=1)) as memories:  # an hour later
        save_handoff(memories, "Refactored login; CSRF fixed", completed=["login"], next_steps=["ship"], project="web")
        save_handoff(memories, "Other project", project="api")
        stats = memory_stats(memories)
        handoff = load_handoff(memories, "web")
        state = state_of(memories)
    assert state[failure["id"]].importance == 0.9 and state[failure["id"]].category == "failure"
    assert (first["action"], second["action"], first["id"]) == ("new", "updated", second["id"])
    progress = [o for o in state.values() if o.kind == "progress"]
    assert len(progress) == 1 and progress[0].fields["completion"] == 90 and progress[0].importance == 0.7
    assert handoff["fields"]["summary"] == "Refactored login; CSRF fixed"
    assert stats["failures_by_component"] == {"payment": 1} and stats["failures_by_severity"] == {"critical": 1}
    assert stats["active_features"][0]["status"] == "review"
    assert set(stats) >= {"total", "by_category", "average_strength", "last_maintenance"}


def test_compile_writes_observation_project_and_archive_pages(vault, fake_embedder):
    settings = replace(Settings(), now="2026-11-30 12:00:00")
    with open_memory(vault, fake_embedder) as memories:
        saved = store_memory(memories, MemoryInput("Deploys go through the blue-green pipeline", project="web",
                                                   title="../../etc/passwd"))
        track_failure(memories, "CSRF token missing", "payment", "critical", project="web")
    report = compile_vault(vault, settings, embedder=fake_embedder)
    pages = [p for p in report.written if p.startswith("_engram/memory/web/")]
    assert len(pages) == 2 and all(".." not in p for p in pages)
    page = next(vault / p for p in pages if "passwd" in p)
    text = page.read_text()
    assert f'id: "{saved["id"]}"' in text and "strength: 0.50" in text
    project = (vault / "_engram/projects/web.md").read_text()
    assert "pie title Memories by category" in project and "payment" in project
    assert "[[_engram/projects/web|web]]" in (vault / "_engram/catalog.md").read_text()
    assert compile_vault(vault, settings, embedder=fake_embedder).written == []  # no-op stays a no-op


def test_human_edit_of_an_observation_page_becomes_an_update(vault, fake_embedder):
    settings = replace(Settings(), now="2026-11-30 12:00:00")
    with open_memory(vault, fake_embedder) as memories:
        saved = store_memory(memories, MemoryInput("The API rate limit is 100 requests per minute", project="api"))
    compile_vault(vault, settings, embedder=fake_embedder)
    page = next((vault / "_engram/memory/api").glob("*.md"))
    page.write_text(page.read_text().replace("100 requests", "250 requests"))
    report = compile_vault(vault, settings, embedder=fake_embedder)
    assert report.memories["edits"] == [saved["id"]]
    with open_memory(vault, fake_embedder) as memories:
        obs = state_of(memories)[saved["id"]]
    assert obs.content == "The API rate limit is 250 requests per minute"
    assert obs.history[-1].content == "The API rate limit is 100 requests per minute"
    assert "250 requests" in page.read_text()


def test_a_torn_journal_line_is_reported_and_later_writes_survive(vault, fake_embedder):
    with open_memory(vault, fake_embedder) as memories:
        store_memory(memories, MemoryInput("Before the crash", project="p"))
    with open(vault / ".engram" / "journal.jsonl", "ab") as journal:
        journal.write(b'{"id": "ev-torn", "op": "sa')  # a crash in the middle of an append
    with open_memory(vault, fake_embedder) as memories:
        after = store_memory(memories, MemoryInput("After the crash, on another topic entirely", project="p"))
        found = read_memories(memories).events
        events, warnings = found.events, found.warnings
        assert after["id"] in state_of(memories)
    assert len(events) == 2 and [w.line for w in warnings] == [2] and "journal line skipped" in warnings[0].message


def test_a_long_lived_handle_sees_other_writers_and_checks_the_index_only_when_needed(vault, fake_embedder,
                                                                                     monkeypatch):
    from compiler.memory import index as memory_index

    full, named = [], []
    real_full, real_named = memory_index.sync_index, memory_index.sync_named
    monkeypatch.setattr(memory_index, "sync_index", lambda *args: full.append(1) or real_full(*args))
    monkeypatch.setattr(memory_index, "sync_named", lambda *args: named.append(set(args[2])) or real_named(*args))
    with open_memory(vault, fake_embedder) as server, open_memory(vault, fake_embedder) as other:
        store_memory(server, MemoryInput("Nightly backups run at two in the morning", project="ops"))
        recall(server, "when do the nightly backups run", project="ops")  # appends recall events
        recall(server, "nightly backups", project="ops")
        assert (len(full), named) == (1, [])  # no record yet: every memory once; its own writes and recalls need no more
        snapshot = read_memories(server)
        assert read_memories(server).live is snapshot.live  # derived views are reused while no event is added
        server.close()  # as the MCP server does after each call: index handles live for one call
        later = store_memory(other, MemoryInput("The VPN gateway lives in Frankfurt", project="ops"))
        other.close()
        hits = recall(server, "where is the VPN gateway", project="ops")
        # The other handle starts from the index's record: nothing named since (recalls name no
        # text); it records what it wrote as it closes, so ours checks nothing again, and finds it.
        assert hits[0]["id"] == later["id"] and (len(full), named) == (1, [set(), set()])
        assert read_memories(server).live is not snapshot.live


def test_dated_items_reinforce_and_merge_as_of_their_own_date(vault, fake_embedder):
    """An import of dated items (LongMemEval-style): a later item that reinforces or merges into an
    earlier one changes it as of the later item's date, not as of the import clock (NOW, 2026)."""
    text = "the staging cluster runs postgres sixteen with nightly backups to the eu bucket"
    items = [MemoryInput(content=text, project="p", source_id="a", created_at="2023-05-01 09:00:00"),
             MemoryInput(content=text, project="p", source_id="b", created_at="2023-06-01 09:00:00"),
             MemoryInput(content=text + " and the replica in frankfurt", project="p", source_id="c", created_at="2023-07-01 09:00:00")]
    with open_memory(vault, fake_embedder) as memories:
        written = write_memories(memories, items)
        assert [r["action"] for r in written["results"]] == ["new", "reinforced", "merged"]
        obs = state_of(memories)[written["results"][0]["id"]]
    assert obs.created_at == "2023-05-01 09:00:00"
    assert obs.updated_at == "2023-07-01 09:00:00"
    assert obs.reinforced_at == "2023-07-01 09:00:00"
    assert obs.history[0].content == text
    events, _ = read_journal(vault / ".engram")
    assert {e.at for e in events} == {"2026-11-30 12:00:00"}  # replay still orders by the write clock
    assert [e.data.get("created_at") for e in events if e.op != "save"] == ["2023-06-01 09:00:00",
                                                                          "2023-07-01 09:00:00"]


def test_a_dated_reinforcement_never_moves_the_decay_clock_back(vault, fake_embedder):
    text = "the release train leaves every tuesday at noon from the main branch"
    items = [MemoryInput(content=text, project="p", source_id="a", created_at="2024-03-01 09:00:00"),
             MemoryInput(content=text, project="p", source_id="b", created_at="2023-01-01 09:00:00")]
    with open_memory(vault, fake_embedder) as memories:
        written = write_memories(memories, items)
        assert [r["action"] for r in written["results"]] == ["new", "reinforced"]
        assert state_of(memories)[written["results"][0]["id"]].reinforced_at == "2024-03-01 09:00:00"
