"""Progress on stderr for long work (compile, memory import, sync import): a bar on a terminal,
and a plain line every few seconds when stderr is not one (an Obsidian shell command, cron, CI),
so nobody watches minutes of silence. `--quiet` turns both off."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

import click

from compiler.core.progress import Progress, Tick, no_progress

LINE_EVERY = 5.0  # seconds between two progress lines when stderr is not a terminal
SMALL = 20  # fewer items than this finish before anyone looks: no bar, no line


class ProgressLines:
    """Writes `engram: LABEL DONE/TOTAL (P%) · RATE/s` at most every `every` seconds of `clock`,
    and a closing line when it wrote any (so the last line of a long stage says it finished)."""

    def __init__(self, label: str, total: int, write: Callable[[str], None], *,
                 clock: Callable[[], float] = time.monotonic, every: float = LINE_EVERY) -> None:
        self.label, self.total, self.write, self.clock, self.every = label, total, write, clock, every
        self.started = self.last = clock()
        self.done = 0
        self.lines = 0

    def tick(self, count: int) -> None:
        self.done += count
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self._line(now)

    def finish(self) -> None:
        if self.lines:
            self._line(self.clock(), finished=True)

    def _line(self, now: float, finished: bool = False) -> None:
        elapsed = max(now - self.started, 1e-9)
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        state = f"done in {elapsed:.0f}s" if finished else f"{elapsed:.0f}s"
        self.write(f"engram: {self.label} {self.done}/{self.total}{share} · {self.done / elapsed:.1f}/s · {state}")
        self.lines += 1


def stderr_progress(quiet: bool = False, stream: TextIO | None = None, *,
                    clock: Callable[[], float] = time.monotonic, every: float = LINE_EVERY) -> Progress:
    """Returns the progress for a command: nothing when `quiet`, a bar on a terminal, else lines."""
    if quiet:
        return no_progress

    @contextmanager
    def progress(label: str, total: int) -> Iterator[Tick]:
        err = stream or sys.stderr
        if total < SMALL:
            yield lambda n: None
        elif err.isatty():
            with click.progressbar(length=total, label=f"{label:<6}", file=err) as bar:
                yield bar.update
        else:
            lines = ProgressLines(label, total, lambda text: print(text, file=err, flush=True), clock=clock, every=every)
            yield lines.tick
            lines.finish()

    return progress
