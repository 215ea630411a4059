"""Progress when stderr is not a terminal: a line every few seconds (stage, done/total, rate), on a fake clock."""

from __future__ import annotations

import io

from compiler.cli.progress import ProgressLines, stderr_progress
from compiler.core.settings import Settings
from compiler.pipeline.spine import compile_vault


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_few_seconds_with_stage_count_and_rate():
    clock, lines = Clock(), []
    progress = ProgressLines("embed", 1000, lines.append, clock=clock, every=5.0)
    for _ in range(10):  # 100 items a second for ten seconds, ticked every second
        clock.now += 1.0
        progress.tick(100)
    assert lines == ["engram: embed 500/1000 (50%) · 100.0/s · 5s", "engram: embed 1000/1000 (100%) · 100.0/s · 10s"]
    progress.finish()
    assert lines[-1] == "engram: embed 1000/1000 (100%) · 100.0/s · done in 10s"


def test_a_short_stage_prints_nothing():
    clock, lines = Clock(), []
    progress = ProgressLines("parse", 50, lines.append, clock=clock)
    clock.now += 1.0
    progress.tick(50)
    progress.finish()
    assert lines == []


def test_quiet_and_small_totals_are_silent_and_a_non_terminal_gets_lines():
    stream, clock = io.StringIO(), Clock()  # StringIO is not a terminal
    with stderr_progress(quiet=True, stream=stream, clock=clock)("embed", 500) as tick:
        clock.now += 10
        tick(500)
    with stderr_progress(stream=stream, clock=clock)("embed", 5) as tick:
        clock.now += 10
        tick(5)
    assert stream.getvalue() == ""
    with stderr_progress(stream=stream, clock=clock)("embed", 500) as tick:
        clock.now += 10
        tick(250)
        clock.now += 10
        tick(250)
    assert stream.getvalue().splitlines() == ["engram: embed 250/500 (50%) · 25.0/s · 10s",
                                              "engram: embed 500/500 (100%) · 25.0/s · 20s",
                                              "engram: embed 500/500 (100%) · 25.0/s · done in 20s"]


def test_compile_tells_each_warning_before_the_embedding_starts(make_vault, fake_embedder):
    vault = make_vault({"Home.md": "# Home\n\nSee [[Nowhere]].\n", "Bad.md": "---\ntags: [unclosed\n---\nBody\n"})
    told: list[str] = []
    seen_at_embed: list[list[str]] = []
    embed = fake_embedder.embed
    fake_embedder.embed = lambda texts: seen_at_embed.append(list(told)) or embed(texts)
    report = compile_vault(vault, Settings(), embedder=fake_embedder, warn=lambda w: told.append(w.file))
    assert sorted(told) == sorted(w.file for w in report.warnings) == ["Bad.md", "Home.md"]
    assert seen_at_embed and sorted(seen_at_embed[0]) == ["Bad.md", "Home.md"]
