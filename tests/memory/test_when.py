"""The span of days a query names or implies (compiler.memory.when), and recall favouring it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from compiler.core.clock import parse_time
from compiler.core.settings import Settings
from compiler.memory.input import MemoryInput
from compiler.memory.recall import recall
from compiler.memory.vault import VaultMemory
from compiler.memory.when import asks_when, query_span, says_when
from compiler.memory.write import write_memories
from tests.memory.test_late_interaction import FakeTokenEmbedder

NOW = parse_time("2023-04-01 08:30:00")  # a Saturday


def _days(query: str) -> tuple[str, str] | None:
    span = query_span(query, NOW)
    return (span.start.date().isoformat(), span.end.date().isoformat()) if span else None


@pytest.mark.parametrize(("query", "days"), [
    ("I mentioned an investment four weeks ago. What was it?", ("2023-03-01", "2023-03-08")),
    ("What did I buy 3 days ago?", ("2023-03-28", "2023-03-31")),
    ("Who gave me jewelry last Saturday?", ("2023-03-24", "2023-03-27")),
    ("What did I cook last Friday?", ("2023-03-30", "2023-04-02")),
    ("the three trips I took in the past three months", ("2023-01-01", "2023-04-02")),
    ("the events during the past month", ("2023-03-02", "2023-04-02")),
    ("What did I read last week?", ("2023-03-18", "2023-04-02")),
    ("Where did I go yesterday?", ("2023-03-30", "2023-04-02")),
    ("How many appointments did I have in March?", ("2023-03-01", "2023-04-01")),
    ("What happened in May 2022?", ("2022-05-01", "2022-06-01")),
    ("What happened in May?", ("2022-05-01", "2022-06-01")),  # the last May before the clock
    ("What did I note on 2023-02-14?", ("2023-02-13", "2023-02-16")),
])
def test_query_span_reads_calendar_phrases_against_the_clock(query: str, days: tuple[str, str]) -> None:
    assert _days(query) == days


@pytest.mark.parametrize("query", ["May I ask what you recommended?", "How many days did the trip take?",
                                   "What is my favourite colour?", "on 2023-02-30"])
def test_query_span_is_none_without_a_calendar_phrase(query: str) -> None:
    assert query_span(query, NOW) is None


def test_recall_prefers_the_memory_dated_in_the_span_the_query_names(tmp_path: Path) -> None:
    """Two equally matching memories: the one written in the week the query names comes first."""
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    items = [MemoryInput(content="Anna and I ran the charity race by the river", project="me", created_at="2023-03-17 10:00:00",
                         source_id="a", session_id="s1"),
             MemoryInput(content="Tom joined me for a charity race downtown", project="me", created_at="2023-03-30 10:00:00",
                         source_id="b", session_id="s2")]
    with VaultMemory(vault, Settings(), embedder=FakeTokenEmbedder(), now=NOW) as memory:
        write_memories(memory, items)
        recent = recall(memory, "Which charity race did I run?", n=2, reinforce=False)
        named = recall(memory, "Which charity race did I run two weeks ago?", n=2, reinforce=False)
    assert recent[0]["sources"][-1] == "b"  # without a span, the stronger (newer) memory wins
    assert named[0]["sources"][-1] == "a"
    assert isinstance(datetime.fromisoformat(named[0]["created_at"]), datetime)


def _recall(tmp_path: Path, items: list[MemoryInput], query: str) -> list[str]:
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    with VaultMemory(vault, Settings(), embedder=FakeTokenEmbedder(), now=NOW) as memory:
        write_memories(memory, items)
        return [h["sources"][-1] for h in recall(memory, query, n=2, reinforce=False)]


def test_a_long_memory_does_not_win_a_tie_by_its_length(tmp_path: Path) -> None:
    """Both hold every word of the query; the one that says only that comes first (the long
    one has the smaller id, which is how a tie was broken)."""
    filler = " ".join(f"w{k}" for k in range(200))
    items = [MemoryInput(content=f"charity race by the river {filler}", project="me", source_id="a"),
             MemoryInput(content="charity race by the river", project="me", source_id="b")]
    assert _recall(tmp_path, items, "charity race river") == ["b", "a"]


def test_a_strong_match_from_months_ago_beats_a_weak_recent_one(tmp_path: Path) -> None:
    """Decay breaks near-ties, it does not bury an old answer (strength 0.15 after 60 days)."""
    items = [MemoryInput(content="charity race by the river", project="me", source_id="old", importance=1.0,
                         created_at="2023-01-30 10:00:00", session_id="winter"),
             MemoryInput(content="charity auction tonight", project="me", source_id="new", importance=1.0,
                         created_at="2023-03-31 10:00:00", session_id="spring")]  # not each other's context
    assert _recall(tmp_path, items, "charity race river")[0] == "old"


@pytest.mark.parametrize(("query", "asks"), [
    ("When did Jon lose his job?", True), ("when was Jon in Rome", True), ("How long has Caroline painted?", True),
    ("What year did they marry?", True), ("How many days passed between the two trips?", True),
    ("Jon said he would call when he lands", False), ("What did Jon do after he lost his job?", False),
    ("How many children does Melanie have?", False)])
def test_asks_when_reads_a_question_for_a_time(query: str, asks: bool) -> None:
    assert asks_when(query) is asks


@pytest.mark.parametrize(("text", "says"), [
    ("Lost my job as a banker yesterday", True), ("I painted that lake sunrise last year!", True),
    ("Seven years now, and I've found my muses", True), ("I've known these friends for 4 years", True),
    ("we went camping two weekends ago", True), ("I just got accepted for an internship!", True),
    ("The fair is in May", True), ("It started in 2019", True), ("next Friday works", True),
    ("[1:56 pm on 8 May, 2023] Melanie: Thanks, Caroline!", False),  # the log's stamp is not the speaker's date
    ("Since I lost my job, things have been tough", False), ("I may go", False), ("Just do it!", False)])
def test_says_when_finds_a_time_the_text_gives(text: str, says: bool) -> None:
    assert says_when(text) is says


def test_a_question_that_asks_when_prefers_the_memory_that_dates_the_event(tmp_path: Path) -> None:
    """Both mention the lost job; the newer one (stronger) wins a plain question, the one that says
    when wins a question that asks when."""
    items = [MemoryInput(content="Jon lost the bank job yesterday", project="me", source_id="dated",
                         created_at="2023-03-30 10:00:00", session_id="s1"),
             MemoryInput(content="Jon lost the bank job and dances more", project="me", source_id="later",
                         created_at="2023-03-31 10:00:00", session_id="s2")]
    assert _recall(tmp_path / "plain", items, "Jon lost the bank job")[0] == "later"
    assert _recall(tmp_path / "when", items, "When did Jon lose the bank job?")[0] == "dated"
