"""The index generation: a token that changes each time a writer releases the vault lock.

Chroma's embedded store keeps its vector index in memory: a long-lived process (the MCP
server) does not see vectors another process added until it reopens the store. Every writer
holds `.engram/lock`, and releasing it publishes a new token in `.engram/cache/generation`
(see `compiler.lock.writer_lock`). `compiler.vector_store.open_client` compares the file with
the token its cached client is current with, and reopens the store when they differ.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

GENERATION_FILE = "generation"  # in .engram/cache: derived and disposable like the rest

_current: dict[str, str] = {}  # cache folder → the token this process's Chroma client is current with


def _key(cache_dir: Path) -> str:
    return str(cache_dir.resolve())


def read_generation(cache_dir: Path) -> str:
    """Returns the published token, or "" when none was published yet."""
    try:
        return (cache_dir / GENERATION_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def publish_generation(cache_dir: Path, seen_at_lock: str) -> None:
    """Publishes a new token (the caller holds the writer lock and is about to release it).

    `seen_at_lock` is the token read when the lock was taken: if this process's client was
    current then, it still is (nobody else wrote meanwhile), so it need not reopen for its own writes.
    """
    token = uuid.uuid4().hex
    cache_dir.mkdir(parents=True, exist_ok=True)
    temp = cache_dir / f".generation-{token}.tmp"
    temp.write_text(token, encoding="ascii")
    os.replace(temp, cache_dir / GENERATION_FILE)  # readers see the old token or the new one, never half
    key = _key(cache_dir)
    if _current.get(key) == seen_at_lock:
        _current[key] = token


def client_is_stale(cache_dir: Path) -> bool:
    """True when this process holds a client opened before another process's last write."""
    key = _key(cache_dir)
    return key in _current and _current[key] != read_generation(cache_dir)


def mark_current(cache_dir: Path) -> None:
    """Records that this process's client has just been (re)opened and sees every write so far."""
    _current[_key(cache_dir)] = read_generation(cache_dir)
