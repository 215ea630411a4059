"""A full disk is one line on stderr (what could not be written, how much room is left), exit 1,
and the next run after freeing space works with nothing lost (issue 11, item 6).

The real probe mounts a 4 MB tmpfs (skipped where mounting is not allowed); the unit tests make
SQLite, Chroma and the OS raise their own full-disk errors, with their real messages.
"""

from __future__ import annotations

import errno
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.errors import StorageFullError, describe
from compiler.core.settings import Settings
from compiler.embed import embedder as embedder_module
from compiler.index.cache import EmbeddingCache
from tests.conftest import FakeEmbedder

NOW = ["--now", "2026-11-30 12:00:00"]


@pytest.fixture(autouse=True)
def fake_model(monkeypatch) -> None:
    """Every command loads the small fake embedder instead of the bundled model."""
    monkeypatch.setattr(embedder_module, "_LOADED", {Settings().model: FakeEmbedder()})


def run(*args: str) -> tuple[int, str, str]:
    """Returns (exit code, stdout, stderr) of one engram command."""
    result = CliRunner().invoke(main, catch_exceptions=False, args=list(args))
    return result.exit_code, result.stdout, result.stderr


def assert_one_full_disk_line(code: int, err: str, where: str) -> None:
    lines = err.strip().splitlines()
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("engram: "), err
    assert where in lines[0] and "the disk is full" in lines[0] and "free on that filesystem" in lines[0], err
    assert "Traceback" not in err


def live_count(vault: Path) -> int:
    """Returns how many live memories `engram memory stats` counts."""
    code, out, err = run("memory", "stats", "--vault", str(vault), *NOW, "--json")
    assert code == 0, err
    return json.loads(out)["live"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """Returns a folder on a fresh 4 MB tmpfs; skips where this machine does not allow mounting one."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no `mount` command here to make a small tmpfs")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                             check=False, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()  # its open handles would keep the mount busy
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Writes a file until the filesystem has no room left; returns it (delete it to free the space)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for size in (65536, 4096, 512, 1):  # big blocks, then smaller ones into the last pages
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError as error:
                assert error.errno == errno.ENOSPC
    return filler


def test_a_real_full_disk_is_one_line_and_the_next_run_loses_nothing(small_disk, tmp_path):
    vault = small_disk / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "Home.md").write_text("# Home\n\nDeploys roll back with the blue-green switch.\n")
    code, _, err = run("memory", "add", "Staging runs on Fly.io", "--vault", str(vault), *NOW)
    assert code == 0, err
    assert live_count(vault) == 1
    journal = (vault / ".engram" / "journal.jsonl").read_bytes()
    for index in range(40):
        (vault / f"Note {index}.md").write_text(f"# Note {index}\n\n" + f"topic {index} word " * 40)
    imports = tmp_path / "memories.jsonl"
    imports.write_text("".join(json.dumps({"content": " ".join(f"fact{i}word{j}" for j in range(6)),
                                           "source_id": f"s{i}"}) + "\n" for i in range(50)))
    filler = fill(small_disk)

    for args in (["memory", "add", "The user prefers Go for services"], ["memory", "import", str(imports)],
                 ["compile"]):
        code, _, err = run(*args, "--vault", str(vault), *NOW)
        assert_one_full_disk_line(code, err, str(vault / ".engram"))
        # Nothing acknowledged is lost, and no half-written event is left in the journal.
        assert (vault / ".engram" / "journal.jsonl").read_bytes()[:len(journal)] == journal

    filler.unlink()
    code, _, err = run("memory", "add", "The user prefers Go for services", "--vault", str(vault), *NOW, "--json")
    assert code == 0, err
    code, out, err = run("memory", "import", str(imports), "--vault", str(vault), *NOW, "--json")
    assert code == 0 and json.loads(out)["read"] == 50, err
    code, out, err = run("compile", "--vault", str(vault), *NOW, "--json")
    assert code == 0, err
    assert live_count(vault) == 52


class FullConnection:
    """An SQLite connection whose writes fail the way a full disk makes them fail."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self._real = real

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    def __enter__(self) -> sqlite3.Connection:
        return self._real.__enter__()

    def __exit__(self, *exc: object) -> object:
        return self._real.__exit__(*exc)

    def executemany(self, *args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")


def test_sqlite_full_is_a_storage_full_error_naming_the_cache(tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    cache._db = FullConnection(cache._db)  # type: ignore[assignment]
    import numpy as np

    with pytest.raises(StorageFullError) as raised:
        cache.put_many("m", {"a" * 64: np.zeros(384, dtype=np.float32)})
    line = describe(raised.value)
    assert line.startswith(f"{tmp_path / 'embeddings.sqlite'}: could not write the embedding cache: the disk is full (")
    assert "free on that filesystem, this write needs at least 2 KB" in line
    assert isinstance(raised.value, OSError) and raised.value.errno == errno.ENOSPC


def test_chroma_full_through_the_cli_is_one_line(make_vault, monkeypatch):
    import chromadb
    from chromadb.errors import InternalError

    vault = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})

    def full(*args: object, **kwargs: object) -> None:
        raise InternalError("error returned from database: (code: 13) database or disk is full")

    monkeypatch.setattr(chromadb, "PersistentClient", full)
    code, _, err = run("compile", "--vault", str(vault), *NOW)  # compile writes Chroma (a memory write does not)
    assert_one_full_disk_line(code, err, str(vault / ".engram" / "cache" / "chroma"))
    assert "could not write the vector index" in err


def test_a_journal_write_cut_short_leaves_the_journal_as_it_was(make_vault, monkeypatch):
    from compiler.events import journal

    vault = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})
    assert run("memory", "add", "Staging runs on Fly.io", "--vault", str(vault), *NOW)[0] == 0
    before = (vault / ".engram" / "journal.jsonl").read_bytes()

    def no_room(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal.os, "fsync", no_room)
    code, _, err = run("memory", "add", "Production runs on AWS", "--vault", str(vault), *NOW)
    assert_one_full_disk_line(code, err, str(vault / ".engram" / "journal.jsonl"))
    assert "could not write the journal" in err and "this write needs at least" in err
    assert (vault / ".engram" / "journal.jsonl").read_bytes() == before


def test_an_untranslated_enospc_still_names_the_file_and_the_room(tmp_path):
    line = describe(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.md")))
    assert line.startswith(f"{tmp_path / 'x.md'}: could not write this file: the disk is full (")


def test_flat_store_full_through_the_cli_is_one_line_and_reads_as_before(make_vault, monkeypatch):
    from compiler.index import flat

    vault = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})
    assert run("memory", "add", "Staging runs on Fly.io", "--vault", str(vault), *NOW)[0] == 0
    real_append = flat.write_after

    def no_room(path: Path, committed: int, rows: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(flat, "write_after", no_room)  # the rows cannot be appended
    code, _, err = run("memory", "add", "Production runs on AWS", "--vault", str(vault), *NOW)
    assert_one_full_disk_line(code, err, str(vault / ".engram" / "cache" / "flat" / "memories.sqlite"))
    assert "could not write the vector index" in err
    monkeypatch.setattr(flat, "write_after", real_append)  # the journal has it: the next run indexes it
    code, out, err = run("recall", "Production runs on AWS", "--vault", str(vault), *NOW, "--json")
    assert code == 0, err
    assert {h["content"] for h in json.loads(out)} >= {"Staging runs on Fly.io", "Production runs on AWS"}
