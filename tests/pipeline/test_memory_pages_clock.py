"""Memory pages show strength as of 00:00 UTC of the day (or at a pinned clock): time passing
alone rewrites no page within a day, and a day later only the pages whose shown values moved."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from compiler.core import clock
from compiler.core.settings import Settings
from compiler.events.journal import MemoryEvent, append_events, new_id
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import write_memories
from compiler.pipeline.spine import compile_vault

NOTES = {"Home.md": "# Home\n\nStart at [[Alpha]].\n", "Alpha.md": "# Alpha\n\nAlpha builds the payments gateway.\n"}
START = datetime(2026, 11, 30, 0, 30, tzinfo=timezone.utc)
# Decays fast: 0.3 × e^(−0.266 × days), about 0.02 of shown strength in 11 hours.
FADING = MemoryInput(content="The billing worker times out when talking to the vendor sandbox.", project="billing",
                     category="failure", importance=0.3, created_at="2026-11-28 12:00:00")
# Recalled three times: 0.9 × 1.6 × decay stays above 1, so it shows 1.00 for days.
STEADY = MemoryInput(content="The payments API runs on PostgreSQL 16.", project="payments", category="fact",
                     importance=0.9, created_at="2026-11-29 12:00:00")


@pytest.fixture
def clock_at(monkeypatch):
    def move(moment: datetime) -> None:
        monkeypatch.setattr(clock, "utc_now", lambda: moment)
    return move


def memory_vault(make_vault, fake_embedder) -> tuple[Path, dict[str, str]]:
    """Returns the vault and {"fading" / "steady": memory id}."""
    vault = make_vault(NOTES)
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memory:
        ids = [r["id"] for r in write_memories(memory, [FADING, STEADY])["results"]]
    append_events(vault / ".engram", [MemoryEvent(new_id("ev-"), "recall", ids[1], clock.format_time(START))
                                      for _ in range(3)])
    return vault, {"fading": ids[0], "steady": ids[1]}


def page_of(vault: Path, memory_id: str) -> str:
    [page] = [p for p in (vault / "_engram/memory").rglob("*.md") if f'id: "{memory_id}"' in p.read_text()]
    return page.relative_to(vault).as_posix()


def test_a_compile_hours_later_the_same_day_writes_no_memory_page(make_vault, fake_embedder, clock_at):
    clock_at(START)
    vault, _ = memory_vault(make_vault, fake_embedder)
    first = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert any(p.startswith("_engram/memory/") for p in first.written)
    clock_at(START + timedelta(hours=11))
    (vault / "Alpha.md").write_text("# Alpha\n\nAlpha now builds the refunds ledger too.\n")  # a real build
    later = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert later.changed == ["Alpha.md"]
    assert [p for p in later.written if p.startswith(("_engram/memory/", "_engram/projects/"))] == []


def test_a_day_later_only_the_pages_whose_shown_strength_moved_are_written(make_vault, fake_embedder, clock_at):
    clock_at(START)
    vault, ids = memory_vault(make_vault, fake_embedder)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    fading, steady = page_of(vault, ids["fading"]), page_of(vault, ids["steady"])
    shown = (vault / fading).read_text()
    assert "strength: 1.00" in (vault / steady).read_text()
    clock_at(START + timedelta(days=1))
    report = compile_vault(vault, Settings(), embedder=fake_embedder)
    assert sorted(report.written) == [fading, "_engram/projects/billing.md"]
    assert (vault / fading).read_text() != shown


def test_pages_show_strength_at_midnight_utc_of_the_day(make_vault, fake_embedder, clock_at):
    clock_at(START + timedelta(hours=23))
    vault, ids = memory_vault(make_vault, fake_embedder)
    compile_vault(vault, Settings(), embedder=fake_embedder)
    with VaultMemory(vault, Settings(now="2026-11-30 00:00:00"), embedder=fake_embedder) as memory:
        from compiler.memory.vault import read_memories

        at_midnight = read_memories(memory).state[ids["fading"]].strength(clock.parse_time("2026-11-30 00:00:00"))
    assert f"strength: {at_midnight:.2f}\n" in (vault / page_of(vault, ids["fading"])).read_text()
