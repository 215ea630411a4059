"""The wiki history read again and again while it grows: what each read returns is the whole file's
truth, whether it was appended to, cut mid-line, rewritten in place or replaced by a merge."""

from __future__ import annotations

import json
import os

from compiler.wiki import history


def _entry(n: int) -> history.Entry:
    return history.Entry(at=f"2026-01-01 00:00:{n:02d}", action="write", path=f"wiki/P{n}.md", revision=1)


def _paths(entries: list[history.Entry]) -> list[str]:
    return [e.path for e in entries]


def test_appends_are_read_on_top_of_what_was_read(tmp_path):
    path = tmp_path / "history.jsonl"
    for n in range(3):
        history.append(path, _entry(n))
    assert _paths(history.read_history(path)) == ["wiki/P0.md", "wiki/P1.md", "wiki/P2.md"]
    history.append(path, _entry(3))
    assert _paths(history.read_history(path))[-1] == "wiki/P3.md"
    assert len(history.read_history(path)) == 4  # a read with nothing new adds nothing


def test_a_line_cut_short_is_warned_of_and_read_whole_once_finished(tmp_path):
    path = tmp_path / "history.jsonl"
    history.append(path, _entry(0))
    history.read_history(path)
    line = json.dumps(_entry(1).to_dict())
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line[:10])
    warnings = []
    assert _paths(history.read_history(path, warnings)) == ["wiki/P0.md"]
    assert [(w.file, w.line) for w in warnings] == [(".engram/wiki/history.jsonl", 2)]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line[10:] + "\n")
    warnings = []
    assert _paths(history.read_history(path, warnings)) == ["wiki/P0.md", "wiki/P1.md"] and warnings == []


def test_a_file_rewritten_in_place_or_replaced_is_read_again(tmp_path):
    path = tmp_path / "history.jsonl"
    for n in range(3):
        history.append(path, _entry(n))
    history.read_history(path)
    inode = os.stat(path).st_ino
    with open(path, "r+b") as handle:  # the same inode, other lines, longer than before
        handle.write(b"".join((json.dumps(_entry(n).to_dict()) + "\n").encode() for n in (7, 8, 9, 10)))
    assert os.stat(path).st_ino == inode
    assert _paths(history.read_history(path)) == ["wiki/P7.md", "wiki/P8.md", "wiki/P9.md", "wiki/P10.md"]
    replaced = tmp_path / "merged.jsonl"  # what a git merge does: a new file in its place
    replaced.write_text(json.dumps(_entry(5).to_dict()) + "\n[1, 2]\n", encoding="utf-8")
    os.replace(replaced, path)
    warnings = []
    assert _paths(history.read_history(path, warnings)) == ["wiki/P5.md"]
    assert [w.line for w in warnings] == [2]  # a JSON line that is not a record: skipped, not a crash
