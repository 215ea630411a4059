"""The index generation: notice when another process wrote to the embedded Chroma store.

Chroma's embedded store keeps its vector index in memory: a long-lived process (the MCP
server) does not see vectors another process added until it reopens the store. Every Chroma
write commits to `chroma/chroma.sqlite3`, so the stat of that file is the generation: nothing
extra is written (an unchanged compile still writes no byte). `compiler.index.vectors.open_client`
reopens the store when the generation moved since this process opened it; `writer_lock` records
this process's own writes, so it does not reopen for them.
"""

from __future__ import annotations

from pathlib import Path

_SQLITE_FILES = ("chroma.sqlite3", "chroma.sqlite3-wal")

_current: dict[str, str] = {}  # cache folder → the generation this process's Chroma client is current with


def _key(cache_dir: Path) -> str:
    return str(cache_dir.resolve())


def read_generation(cache_dir: Path) -> str:
    """Returns a token that changes whenever the embedded store under `cache_dir/chroma` is written."""
    parts = []
    for name in _SQLITE_FILES:
        try:
            stat = (cache_dir / "chroma" / name).stat()
            parts.append(f"{stat.st_mtime_ns}:{stat.st_size}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


def lock_taken(cache_dir: Path) -> tuple[str, str | None]:
    """Returns what `note_own_writes` needs, read as the writer lock is taken: the generation on
    disk and the one this process's client is current with."""
    return read_generation(cache_dir), _current.get(_key(cache_dir))


def note_own_writes(cache_dir: Path, at_lock: tuple[str, str | None]) -> None:
    """Called as this process releases the writer lock: its own writes do not make its client stale.

    `at_lock` is `lock_taken`'s answer: if this process's client was current then, or was
    (re)opened while the lock was held (opening writes to the store too), nobody else wrote
    since, so it is current now too.
    """
    key = _key(cache_dir)
    seen, client = at_lock
    if key in _current and (_current[key] == seen or _current[key] != client):
        _current[key] = read_generation(cache_dir)


def client_is_stale(cache_dir: Path) -> bool:
    """True when this process holds a client opened before another process's last write."""
    key = _key(cache_dir)
    return key in _current and _current[key] != read_generation(cache_dir)


def mark_current(cache_dir: Path) -> None:
    """Records that this process's client has just been (re)opened and sees every write so far."""
    _current[_key(cache_dir)] = read_generation(cache_dir)
