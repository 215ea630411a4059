"""One rule decides what a valid memory is (issue 11, item 2): every memory a write path accepts
(MCP store_memory and mem_save, CLI memory add and memory import, transcript bridges) exports into
a chunk that a fresh peer imports with nothing quarantined; what the write path cannot make valid it
refuses with a line naming the field.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.errors import InputError
from compiler.core.settings import Settings
from compiler.events.checks import line_problem, save_problem, unpath
from compiler.memory.input import MemoryInput, event_data, validate
from compiler.memory.vault import VaultMemory, read_memories
from compiler.sync.exchange import export_memories, import_chunks
from tests.conftest import FakeEmbedder
from tests.mcp_server.test_mcp import NOW, ToolFailed, with_session

HOSTILE = ["../../x", "../../etc", "/abs", "C:\\x", "..\\..\\win", "ok/../../up", ".hidden", "~/notes", "~",
           "..", "a\x00b\x1b[31mred", "tab\there\nnew line", "x" * 1000, "\u202eevil\u200f mark", "\u200b\u200f",
           "   ", "\ud800 lone surrogate", "CI/CD pipeline", "x/.."]
LINE_FIELDS = ("title", "project", "type", "topic_key", "scope", "session_id")


def content(n: int) -> str:
    return f"zq{n}alpha zq{n}beta zq{n}gamma"  # no word shared: the fake embedder never merges two of them


def hostile_inputs(count: int, seed: int = 11) -> list[dict[str, str]]:
    """Returns each hostile value in each line field alone, then `count` random mixes of them."""
    rng = random.Random(seed)
    alone = [{field: value} for field in LINE_FIELDS for value in HOSTILE]
    mixed = [{field: rng.choice(HOSTILE) for field in rng.sample(LINE_FIELDS, rng.randint(2, 6))} for _ in range(count)]
    return alone + mixed


def test_what_validate_accepts_the_import_check_accepts():
    for fields in hostile_inputs(300):
        try:
            clean = validate(MemoryInput(content="a statement", **fields))
        except InputError as error:
            assert any(name in str(error) for name in LINE_FIELDS), (fields, str(error))
            continue
        assert save_problem(event_data(clean)) == "", fields
        assert all(not line_problem(getattr(clean, f), f) for f in LINE_FIELDS), fields


def test_titles_are_display_text_never_paths():
    assert validate(MemoryInput(content="c", title="../../x")).title == "x"
    assert validate(MemoryInput(content="c", project="../../etc")).project == "etc"
    assert validate(MemoryInput(content="c", title="C:\\x")).title == "x"
    assert validate(MemoryInput(content="c", title="CI/CD pipeline")).title == "CI/CD pipeline"
    assert validate(MemoryInput(content="c", title=".hidden")).title == ".hidden"
    assert validate(MemoryInput(content="../..\nthe real line", title="..")).title == "the real line"
    assert unpath("x/..") == "x/"
    with pytest.raises(InputError, match="project '..' is only path characters"):
        validate(MemoryInput(content="c", project=".."))
    with pytest.raises(InputError, match="topic_key '~' is only path characters"):
        validate(MemoryInput(content="c", topic_key="~"))
    with pytest.raises(InputError, match="title is empty"):
        validate(MemoryInput(content="..", title="\u200f"))


def _refused(message: str) -> bool:
    return any(name in message for name in (*LINE_FIELDS, "content", "title"))


def _store_through_mcp(vault: Path, inputs: list[dict[str, str]]) -> int:
    """Stores each input through store_memory and mem_save; returns how many were refused (each naming a field)."""
    refused = 0

    async def body(call) -> None:
        nonlocal refused
        for n, fields in enumerate(inputs):
            calls = [("store_memory", {"content": content(2 * n), "importance": 0.5, "metadata": fields})]
            save = {k: v for k, v in fields.items() if k in ("title", "type", "project", "scope", "topic_key")}
            calls.append(("mem_save", {"title": "t", "content": content(2 * n + 1), **save}))
            for name, args in calls:
                try:
                    await call(name, args)
                except ToolFailed as failed:
                    assert _refused(str(failed)), (name, args, str(failed))
                    refused += 1

    with_session(vault, body)
    return refused


def _store_through_cli(vault: Path, inputs: list[dict[str, str]], tmp_path: Path) -> None:
    runner = CliRunner()
    for n, fields in enumerate(inputs):
        args = ["memory", "add", content(10_000 + n), "--vault", str(vault), "--now", NOW]
        for field in ("title", "project", "type", "topic_key"):
            if field in fields and "\x00" not in fields[field] and "\ud800" not in fields[field]:
                args += [f"--{field.replace('_', '-')}", fields[field]]
        result = runner.invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0 or _refused(result.output), (args, result.output)
    lines = [json.dumps({"content": content(20_000 + n), **fields}) for n, fields in enumerate(inputs)]
    (tmp_path / "import.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(main, ["memory", "import", str(tmp_path / "import.jsonl"), "--vault", str(vault),
                                  "--now", NOW], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def _transcript(tmp_path: Path, inputs: list[dict[str, str]]) -> Path:
    """Returns an OpenClaw transcript whose assistant calls mem_save once per input."""
    calls = [{"type": "toolCall", "id": f"call_{n}", "name": "engram_mem_save",
              "arguments": {"content": content(30_000 + n), "title": "t", **fields}} for n, fields in enumerate(inputs)]
    lines = [{"type": "session", "version": 3, "id": "s-hostile", "timestamp": "2026-02-06T07:49:00.000Z"},
             {"type": "message", "id": "m1", "timestamp": "2026-02-06T07:49:03.491Z",
              "message": {"role": "assistant", "content": calls}}]
    path = tmp_path / "sessions" / "s-hostile.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path.parent


def test_every_accepted_memory_reaches_a_peer(make_vault, tmp_path, monkeypatch):
    monkeypatch.setattr("compiler.memory.vault.load_embedder", lambda model: FakeEmbedder())
    here = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})
    peer = tmp_path / "peer"
    (peer / ".obsidian").mkdir(parents=True)
    inputs = hostile_inputs(10)
    refused = _store_through_mcp(here, inputs)
    _store_through_cli(here, inputs[::6], tmp_path)  # a vault per CLI call: a sample keeps it quick
    exported = export_memories(here, Settings(now=NOW), embedder=FakeEmbedder(), sessions=[_transcript(tmp_path, inputs)])
    assert exported["chunk"] and refused < len(inputs)  # most are normalised, only pure paths refused

    shutil.copytree(here / ".engram" / "chunks", peer / ".engram" / "chunks")
    imported = import_chunks(peer)
    assert imported["quarantined"] == []
    with VaultMemory(here, Settings(now=NOW), embedder=FakeEmbedder()) as a, \
            VaultMemory(peer, Settings(now=NOW), embedder=FakeEmbedder()) as b:
        mine, theirs = read_memories(a).state, read_memories(b).state
    assert len(mine) > 2 * len(inputs)
    assert _titles(theirs) == _titles(mine)


def _titles(state: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {i: (o.title, o.project) for i, o in state.items()}


def test_progress_of_a_path_like_feature_stays_one_record(make_vault):
    from compiler.memory.engineering import track_progress

    vault = make_vault({".obsidian/app.json": "{}"})
    with VaultMemory(vault, Settings(now=NOW), embedder=FakeEmbedder()) as memory:
        first = track_progress(memory, "../../deploy", "planning")
        second = track_progress(memory, "../../deploy", "done")
        assert second["action"] == "updated" and second["id"] == first["id"]
        topics = {o.topic_key for o in read_memories(memory).state.values()}
    assert topics == {"progress/deploy"}
