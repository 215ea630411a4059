"""Read-only commands leave the vault as they found it: not a byte, not an mtime (issue 14, item 6)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from tests.conftest import ROOT

NOTES = {
    "Deploys.md": "# Deploys\n\nThe payments service deploys from main. See [[Rollback]].\n\n## Checks\n\nSmoke tests first.\n",
    "Rollback.md": "---\ntags: [ops]\n---\n# Rollback\n\nRoll back with the previous tag.\n",
}


def snapshot(vault: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(vault)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(vault.rglob("*"))
            if p.is_file()}


def run(*args: str) -> None:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output


def run_process(*args: str) -> None:
    """A new process, as a user runs it: in one process Chroma keeps its client open between calls."""
    done = subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def compiled(make_vault) -> Path:
    vault = make_vault(NOTES)
    run("compile", "-q", str(vault))
    run("memory", "add", "--vault", str(vault), "Deploys are rolled back with the previous tag.")
    run("compile", "-q", str(vault))
    return vault


def changed(before: dict[str, tuple[int, bytes]], after: dict[str, tuple[int, bytes]]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


@pytest.mark.integration
@pytest.mark.parametrize("command", [["search", "rollback"], ["check"]])
def test_keyword_search_and_check_write_nothing(compiled: Path, command: list[str]) -> None:
    before = snapshot(compiled)
    run_process(*command, "--vault", str(compiled))
    assert changed(before, snapshot(compiled)) == []


@pytest.mark.integration
@pytest.mark.parametrize("command", [["vsearch", "how to roll back"], ["query", "how to roll back"],
                                     ["recall", "--no-reinforce", "how to roll back"]])
def test_vector_reads_write_nothing(compiled: Path, command: list[str]) -> None:
    run_process(*command, "--vault", str(compiled))  # a first read may catch a derived cache up; the second must not
    before = snapshot(compiled)
    run_process(*command, "--vault", str(compiled))
    assert changed(before, snapshot(compiled)) == []


def run_json(*args: str) -> object:
    done = subprocess.run([sys.executable, "-m", "compiler", *args, "--json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def loaded_modules(vault: Path, command: list[str], names: set[str]) -> tuple[list[str], object]:
    """Runs `engram COMMAND --vault VAULT` in a new interpreter; returns which of `names` it
    imported (sorted) and its exit code."""
    probe = ("import sys; from compiler.cli.main import main\n"
             "try: main([*sys.argv[3:], '--vault', sys.argv[1]])\n"
             "except SystemExit as done: code = done.code\n"
             "print(repr((sorted(set(sys.argv[2].split(',')) & set(sys.modules)), code)))")
    result = subprocess.run([sys.executable, "-c", probe, str(vault), ",".join(sorted(names)), *command],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


@pytest.mark.integration
@pytest.mark.parametrize("command", [["vsearch", "how to roll back"], ["query", "how to roll back"],
                                     ["recall", "--no-reinforce", "how to roll back"],
                                     ["memory", "add", "Rollbacks need a ticket."]])
def test_vector_commands_import_neither_chromadb_nor_networkx(compiled: Path, command: list[str]) -> None:
    assert loaded_modules(compiled, command, {"chromadb", "networkx"}) == ([], 0)


@pytest.mark.integration
@pytest.mark.parametrize("command", [["vsearch", "how to roll back"], ["query", "how to roll back"]])
def test_vector_searches_load_no_lock_library(compiled: Path, command: list[str]) -> None:
    """A search of the notes takes no lock, and the model's files are found, not made: filelock
    (imported only to export the model or save its optimized copy) stays out of a cold query."""
    assert loaded_modules(compiled, command, {"filelock", "torch", "numpy"}) == (["numpy"], 0)


@pytest.mark.integration
def test_a_memory_write_takes_the_writer_lock_without_the_lock_library(compiled: Path) -> None:
    """The writer lock is one `flock` (compiler.core.lock): filelock, whose import cost a cold
    `engram memory add` 0.02-0.03 s, is only for exporting the model or saving its optimized copy."""
    assert loaded_modules(compiled, ["memory", "add", "Rollbacks are announced in #ops."], {"filelock"}) == ([], 0)


@pytest.mark.integration
def test_keyword_search_loads_no_numeric_library(compiled: Path) -> None:
    """`engram search` needs neither numpy nor the vector store: its cold start is the yardstick
    the model commands are measured against (benchmarks/cold.py)."""
    assert loaded_modules(compiled, ["search", "rollback"], {"numpy", "chromadb", "networkx"}) == ([], 0)


@pytest.mark.integration
def test_keyword_search_reads_the_state_head_without_the_build_states_module(compiled: Path) -> None:
    """Which model built the index comes from compiler.pipeline.state_head (json only): the build
    state's module and its note records stay out of a cold `engram search`."""
    assert loaded_modules(compiled, ["search", "rollback"], {"compiler.pipeline.state", "compiler.notes.records"}) \
        == ([], 0)


def chroma_ids(vault: Path, name: str) -> set[str]:
    from compiler.index.vectors import VectorStore, open_client

    return set(VectorStore(open_client(vault / ".engram" / "cache"), name)._collection.get(include=[])["ids"])


@pytest.mark.integration
def test_a_memory_add_reaches_chroma_at_the_next_compile(compiled: Path) -> None:
    from compiler.index.flat import FlatStore

    added = run_json("memory", "add", "--vault", str(compiled), "The staging database is reset every Monday.")
    memory_id = added["id"]  # type: ignore[index]
    flat = FlatStore(compiled / ".engram" / "cache", "memories")
    assert memory_id in flat.ids() and memory_id not in chroma_ids(compiled, "memories")  # no Chroma on a write
    run("compile", "-q", str(compiled))
    assert chroma_ids(compiled, "memories") == set(flat.ids())
    assert chroma_ids(compiled, "sections") == set(FlatStore(compiled / ".engram" / "cache", "sections").ids())


@pytest.mark.integration
def test_a_cache_from_before_the_flat_store_still_answers_and_compile_rebuilds_it(compiled: Path) -> None:
    cache = compiled / ".engram" / "cache"
    query = ["vsearch", "how to roll back", "--vault", str(compiled)]
    from_flat = run_json(*query)
    recalled = run_json("recall", "--no-reinforce", "how to roll back", "--vault", str(compiled))
    shutil.rmtree(cache / "flat")  # what an engram older than the flat store left
    from_chroma = run_json(*query)
    assert [(h["file"], round(h["score"], 3)) for h in from_chroma] == \
        [(h["file"], round(h["score"], 3)) for h in from_flat]  # type: ignore[union-attr, index]
    again = run_json("recall", "--no-reinforce", "how to roll back", "--vault", str(compiled))
    assert [h["id"] for h in again] == [h["id"] for h in recalled]  # type: ignore[union-attr, index]
    run("compile", "-q", str(compiled))
    assert (cache / "flat" / "sections.sqlite").is_file()
    assert run_json(*query) == from_flat
