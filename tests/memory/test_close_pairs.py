"""Incremental maintenance: after a change, only the memories it can concern are asked for their
neighbours again (compiler.memory.close_pairs), and what maintenance decides is what a full run
on the same store decides.

Each comparison copies the vault, drops the copy's recorded pairs (an older vault's state) and
runs the full maintenance there: the same store, the same events, asked from scratch. Both the
clusters and the close pairs under them must agree (a cluster hides a missing pair).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from compiler.pipeline.spine import compile_vault
from compiler.core import clock
from compiler.core.settings import Settings
from compiler.events.journal import MemoryEvent, append_events, new_id
from compiler.memory import close_pairs
from compiler.memory.edits import forget_memory, restore_memory, update_memory
from compiler.memory.engineering import track_failure, track_progress
from compiler.memory.input import MemoryInput
from compiler.memory.maintenance import find_clusters, prepare_maintenance, run_maintenance
from compiler.memory.vault import VaultMemory, read_memories, sync_index
from compiler.memory.write import store_memory, write_memories
from compiler.sync.exchange import export_memories

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
# No merge or reinforce on write: near-duplicates stay apart until maintenance folds them.
SETTINGS = replace(Settings(), reinforce_min=1.1, merge_min=1.1, replace_min=1.1, consolidate_min=0.8)
TOPICS = ["redis cache keys expire after one hour".split(), "kafka brokers run on three rack nodes".split(),
          "postgres replica lag alarms page the oncall".split()]


def sentence(rng: random.Random, spread: bool = False) -> str:
    """A few words of one topic: memories of a topic crowd each other's ten nearest places.
    `spread`: of every topic's words, so that few memories are close to any one."""
    return " ".join(rng.sample(sum(TOPICS, []) if spread else rng.choice(TOPICS), rng.randint(5, 7)))


def open_memory(vault: Path, embedder, now: datetime = NOW) -> VaultMemory:
    return VaultMemory(vault, SETTINGS, embedder=embedder, now=now)


def clusters_of(vault: Path, embedder) -> tuple[list[list[str]], int]:
    """The clusters maintenance would fold now, and how many memories it asked."""
    with open_memory(vault, embedder) as memories:
        current = read_memories(memories)
        sync_index(memories, current)
        return find_clusters(memories, current)


def decided(vault: Path, embedder) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """The clusters maintenance would fold now, and the close pairs of the live memories under them."""
    clusters, _ = clusters_of(vault, embedder)
    with open_memory(vault, embedder) as memories:
        live = read_memories(memories).indexed
    with sqlite3.connect(vault / ".engram/cache/memories.sqlite") as db:
        pairs = [(a, b) for a, b in db.execute("SELECT a, b FROM close_pairs ORDER BY a, b") if b in live]
    return clusters, pairs


def full_run_of(vault: Path, embedder, tmp_path: Path) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """What a full run decides on a copy of the same store whose recorded pairs were dropped."""
    copy = tmp_path / f"full-{random.random():.12f}"
    shutil.copytree(vault, copy)
    with sqlite3.connect(copy / ".engram/cache/memories.sqlite") as db:
        db.execute("DROP TABLE IF EXISTS close_meta")
    found = decided(copy, embedder)
    shutil.rmtree(copy)
    return found


def seed_store(vault: Path, embedder, count: int = 120, spread: bool = False) -> list[str]:
    rng = random.Random(5)
    items = [MemoryInput(sentence(rng, spread), project=f"p{i % 3}", category=rng.choice(["fact", "strategy"]),
                         importance=round(rng.uniform(0.3, 1.0), 2)) for i in range(count)]
    with open_memory(vault, embedder) as memories:
        return [r["id"] for r in write_memories(memories, items)["results"]]


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def test_one_new_memory_asks_only_its_neighbourhood_and_finds_what_a_full_run_finds(vault, fake_embedder, tmp_path):
    ids = seed_store(vault, fake_embedder, spread=True)
    first, asked_first = clusters_of(vault, fake_embedder)
    assert asked_first == len(ids)  # nothing recorded yet: everyone is asked
    assert first and (first, decided(vault, fake_embedder)[1]) == full_run_of(vault, fake_embedder, tmp_path)
    with open_memory(vault, fake_embedder) as memories:
        store_memory(memories, MemoryInput("postgres replica lag alarms page the on-call", project="p1"))
    after, asked = clusters_of(vault, fake_embedder)
    assert 1 <= asked < len(ids) // 4
    assert decided(vault, fake_embedder) == full_run_of(vault, fake_embedder, tmp_path)
    again, asked_again = clusters_of(vault, fake_embedder)
    assert (again, asked_again) == (after, 0)


def test_a_random_history_of_changes_keeps_incremental_and_full_runs_equal(vault, fake_embedder, tmp_path):
    rng = random.Random(11)
    ids = seed_store(vault, fake_embedder, 150)  # a topic has more close memories than a first range query reads
    run_maintenance(open_memory(vault, fake_embedder))
    asked_total = 0
    for step in range(12):
        with open_memory(vault, fake_embedder, NOW + timedelta(minutes=step)) as memories:
            state = read_memories(memories).state
            live = sorted(i for i, o in state.items() if o.live)
            gone = sorted(i for i, o in state.items() if not o.live)
            for _ in range(rng.randint(1, 3)):
                action = rng.choice(["add", "add", "update", "forget", "restore", "failure", "progress"])
                if action == "add":
                    ids.append(store_memory(memories, MemoryInput(sentence(rng), project=f"p{rng.randint(0, 2)}"))["id"])
                elif action == "update" and live:
                    update_memory(memories, rng.choice(live), content=sentence(rng))
                elif action == "forget" and live:
                    forget_memory(memories, rng.choice(live))
                elif action == "restore" and gone:
                    restore_memory(memories, rng.choice(gone))
                elif action == "failure":
                    track_failure(memories, sentence(rng), "cache", project="p0")
                elif action == "progress":  # not a candidate, but it takes a neighbour's place
                    track_progress(memories, sentence(rng), "in_progress", 10, project="p0")
        if step % 3 == 2:  # maintenance folds clusters: the absorbed memories leave the index
            report = run_maintenance(open_memory(vault, fake_embedder, NOW + timedelta(minutes=step)))
            asked_total += report["reconsidered"]
        else:
            asked_total += clusters_of(vault, fake_embedder)[1]
        assert decided(vault, fake_embedder) == full_run_of(vault, fake_embedder, tmp_path)
    assert asked_total  # the history did change pairs


def test_maintenance_report_counts_the_memories_reconsidered(vault, fake_embedder):
    ids = seed_store(vault, fake_embedder, 60, spread=True)
    assert run_maintenance(open_memory(vault, fake_embedder))["reconsidered"] == len(ids)
    with open_memory(vault, fake_embedder) as memories:
        store_memory(memories, MemoryInput("kafka brokers run on three nodes in two zones", project="p2"))
        report = run_maintenance(memories)
    assert 1 <= report["reconsidered"] < len(ids) // 3


def test_an_imported_chunk_compares_signatures_and_asks_nobody_when_nothing_moved(vault, fake_embedder, tmp_path):
    seed_store(vault, fake_embedder, 40)
    clusters, _ = clusters_of(vault, fake_embedder)
    export_memories(vault, SETTINGS, embedder=fake_embedder)  # the journal's events now come twice: from a chunk, then the journal
    assert clusters_of(vault, fake_embedder) == (clusters, 0)
    assert decided(vault, fake_embedder) == full_run_of(vault, fake_embedder, tmp_path)


def test_other_settings_start_over(vault, fake_embedder):
    ids = seed_store(vault, fake_embedder, 30)
    clusters_of(vault, fake_embedder)
    with VaultMemory(vault, replace(SETTINGS, consolidate_min=0.9), embedder=fake_embedder, now=NOW) as memories:
        current = read_memories(memories)
        assert find_clusters(memories, current)[1] == len(ids)


def test_a_run_that_died_before_its_events_were_written_is_redone_the_same(vault, fake_embedder, tmp_path):
    """The pairs are recorded before the consolidation events are appended: a compile killed in
    between leaves pairs for events that are still the current ones, and the next run finds them again."""
    seed_store(vault, fake_embedder, 60)
    found, _ = clusters_of(vault, fake_embedder)  # recorded, but no consolidation written
    report = run_maintenance(open_memory(vault, fake_embedder))
    assert report["clusters"] == len(found) and report["reconsidered"] == 0
    assert decided(vault, fake_embedder) == full_run_of(vault, fake_embedder, tmp_path)


def test_a_compile_on_a_later_day_archives_what_faded_though_nothing_changed(make_vault, fake_embedder, monkeypatch):
    """Archiving is decided at the moment a compile shows: time alone moves memories to the archive."""
    vault = make_vault({"Home.md": "# Home\n"})
    start = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
    monkeypatch.setattr(clock, "utc_now", lambda: start)
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        fading = store_memory(memories, MemoryInput("The billing sandbox times out on Fridays", project="billing",
                                                    category="failure", importance=0.3))["id"]
        store_memory(memories, MemoryInput("The payments API runs on PostgreSQL 16", project="payments",
                                           category="strategy", importance=1.0))
    first = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert first.memories["archived"] == 0 and first.memories["maintenance"]["reconsidered"] == 2
    monkeypatch.setattr(clock, "utc_now", lambda: start + timedelta(days=30))
    later = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert later.memories["archived"] == 1
    # maintenance was due by time alone: it ran, and asked the index nothing (no vector moved)
    assert later.memories["maintenance"]["reconsidered"] == 0 and not later.memories["maintenance"].get("skipped")
    assert fading in (vault / "_engram/memory/archive.md").read_text()
    shutil.rmtree(vault / ".engram/cache")  # a full rebuild on that day agrees
    assert compile_vault(vault, Settings(), embedder=fake_embedder).memories["archived"] == 1


def test_recalls_change_no_pair(vault, fake_embedder):
    ids = seed_store(vault, fake_embedder, 30)
    clusters, _ = clusters_of(vault, fake_embedder)
    append_events(vault / ".engram", [MemoryEvent(new_id("ev-"), "recall", i, "2026-11-30 12:00:00") for i in ids[:5]])
    assert clusters_of(vault, fake_embedder) == (clusters, 0)


@pytest.mark.parametrize("plan_batch", [4096, 16])
def test_maintenance_prepared_in_slices_between_changes_decides_what_a_full_run_decides(
        vault, fake_embedder, tmp_path, monkeypatch, plan_batch):
    """A server prepares maintenance a slice at a time and answers tool calls in between: changes
    that land between slices (while the full run is planned, with 16 memories a slice, or asked)
    are planned by the next slice, and the maintenance after the last one decides what a full run
    on the same store decides, asking only what changed meanwhile."""
    monkeypatch.setattr(close_pairs, "PLAN_BATCH", plan_batch)
    rng = random.Random(3)
    ids = seed_store(vault, fake_embedder, 120)
    slices = 0
    with open_memory(vault, fake_embedder) as memories:
        while prepare_maintenance(memories, budget=0):  # one small batch a slice
            slices += 1
            if slices % 4 == 0:
                live = sorted(i for i, o in read_memories(memories).state.items() if o.live)
                action = rng.choice(["add", "update", "forget"])
                if action == "add":
                    ids.append(store_memory(memories, MemoryInput(sentence(rng), project="p1"))["id"])
                elif action == "update":
                    update_memory(memories, rng.choice(live), content=sentence(rng))
                else:
                    forget_memory(memories, rng.choice(live))
        assert slices >= len(ids) // 8  # the first run was spread over many slices
        report = run_maintenance(memories)
    assert report["reconsidered"] < len(ids) // 4  # what the last slices left: the last changes' neighbourhoods
    assert decided(vault, fake_embedder) == full_run_of(vault, fake_embedder, tmp_path)


def test_a_slice_that_died_leaves_what_the_next_run_finishes(vault, fake_embedder, tmp_path):
    """Planned but not asked (a server killed between slices): the next maintenance asks the rest."""
    seed_store(vault, fake_embedder, 60)
    with open_memory(vault, fake_embedder) as memories:
        assert prepare_maintenance(memories, budget=0)
    assert decided(vault, fake_embedder) == full_run_of(vault, fake_embedder, tmp_path)


def test_a_full_run_planned_in_slices_orders_the_ids_once(vault, fake_embedder, monkeypatch):
    """Each planning slice took the ids left by sorting every memory's id again (280 ms a slice at
    500,000 memories); the order is now taken once per run and kept until the plan is done."""
    monkeypatch.setattr(close_pairs, "PLAN_BATCH", 16)
    seed_store(vault, fake_embedder, 60)
    orders = []
    with open_memory(vault, fake_embedder) as memories:
        while prepare_maintenance(memories, budget=0):
            orders.append(next(iter(close_pairs._PLAN_ORDER.values()), (None, None))[1])
    planning = [order for order in orders if order is not None]
    assert len(planning) >= 3 and all(order is planning[0] for order in planning)  # one list, every slice
    assert close_pairs._PLAN_ORDER == {}  # dropped once the plan is done
