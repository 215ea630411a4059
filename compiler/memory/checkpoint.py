"""The fold checkpoint: a fold's state saved with exactly what it reflects, so that a new process
folds only the events written since, instead of reading and folding every event of the vault.

`.engram/cache/fold.pickle` holds a header line (the format, a digest of the code that reads and
folds events, the Python version) and a pickle of the `Checkpoint` and `IncrementalFold.saved()`.
The checkpoint names what it reflects on disk: the chunk files and the manifest (`chunks_stamp`),
and where the journal was read to (`JournalMark`: byte offset, line count, digest of the bytes
before it); with the event count and the ids of the last event and the last chunk event, the
marks a read hands on (`EventSet.key`, `event_mark`) come out the same without the events.

It is trusted only when all of that still holds (`compiler.memory.snapshot.read_events`): a chunk
came in, the manifest changed, the journal was rewritten or cut, the code or the format changed,
the file is unreadable: the events are read and folded from scratch, as without it. An event in
the journal that sorts before what the checkpoint folded (an import of old dates) makes the fold
start over by itself (`IncrementalFold.update`). Pickle is safe here only because the file is
ours: it is signed (HMAC-SHA256) with a secret of this user's, kept outside the vault
(`$XDG_CACHE_HOME/engram/checkpoint.key`, else `~/.cache/...`), and checked before anything is
unpickled, so a vault copied, unzipped or synced from elsewhere with its cache is refolded, never
trusted; and a symlinked file is neither read nor written.

When it is written: by every compile that folded an event past it (`Snapshots.save`: a compile
at 50,000 memories costs far more than the save), and by any memory handle that closes having
folded many events past it (`worth_saving`: at least MIN_NEW and 1/NEW_SHARE of all; every
handle that read from scratch, then). Not by a read: a long-lived handle (the MCP server) would
make one call in n/8 wait for a save that grows with the store. The save costs about a third of
a fold from scratch, so a command pays it at most once in n/8 events folded, while each cold
command folds at most that tail.
"""

from __future__ import annotations

import gc
import hashlib
import hmac
import os
import pickle
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import compiler.events as events_package
from compiler.core.errors import BuildWarning, EngramError
from compiler.core.files import atomic_write, contained
from compiler.events.journal import JournalMark
from compiler.memory import fold as fold_module
from compiler.memory import model
from compiler.memory.fold import IncrementalFold

FILE = "fold.pickle"  # in .engram/cache
FORMAT = 1  # bump when what the file holds changes shape
MIN_NEW = 500  # events folded past the checkpoint before it is written again
NEW_SHARE = 8  # ... and at least 1/NEW_SHARE of all events
SIGNATURE = 32  # bytes of HMAC-SHA256 after the header


@dataclass(frozen=True)
class OnDisk:
    """What a read of the events saw on disk: the chunks (`chunks_stamp`) and how far into the journal."""

    chunks: str  # `chunks_stamp`
    journal: JournalMark
    names: tuple[str, ...] = ()  # the chunk files, in reading order: their events can be read again later


@dataclass(frozen=True)
class Checkpoint:
    """A read's marks, saved with its fold: where it stood on disk, how many events it had (chunks'
    first), the ids of the events at the places marks ask about (the last; the last chunk event),
    and the readers' warnings."""

    disk: OnDisk
    count: int
    chunks: int
    ids: tuple[tuple[int, str], ...]
    warnings: tuple[BuildWarning, ...]


def worth_saving(new: int, count: int) -> bool:
    """True when a handle whose reads folded `new` events past the last checkpoint (of `count`
    events in all) should write a new one."""
    return new >= MIN_NEW and new * NEW_SHARE >= count


def load_checkpoint(engram_dir: Path) -> tuple[Checkpoint, IncrementalFold] | None:
    """Returns the saved checkpoint and its fold, or None when there is none this code can use.
    It is not checked against the disk here: `read_events` does that."""
    path = engram_dir / "cache" / FILE
    try:
        if path.is_symlink() or not path.is_file():
            return None
        data, header, key = path.read_bytes(), _header(), _secret()
        if key is None or not data.startswith(header):
            return None  # an older format or other code: fold from scratch
        body = memoryview(data)[len(header) + SIGNATURE:]
        if not hmac.compare_digest(data[len(header):len(header) + SIGNATURE], hmac.digest(key, body, "sha256")):
            return None  # not written by this user here (or garbled): never unpickled
        with collector_paused():
            point, saved = pickle.loads(body)
        if not isinstance(point, Checkpoint):
            return None
        return point, IncrementalFold.restored(saved)
    except Exception:  # noqa: BLE001 — a cache file cut short or garbled in any way is just absent
        return None


def save_checkpoint(engram_dir: Path, point: Checkpoint, fold: IncrementalFold) -> bool:
    """Writes the checkpoint atomically (no fsync: a lost one means a fold from scratch); returns
    whether it was written (not when the cache cannot be written: it is only a cache)."""
    path = engram_dir / "cache" / FILE
    try:
        contained(engram_dir.parent, path)
        if path.is_symlink():
            return False
        key = _secret()
        if key is None:
            return False
        body = pickle.dumps((point, fold.saved()), protocol=5)
        atomic_write(path, _header() + hmac.digest(key, body, "sha256") + body, durable=False)
        return True
    except (OSError, EngramError):
        return False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector: events, observations and their lookups hold no cycles,
    so its passes over them while they are built find nothing; at 50,000 events they were about
    half of reading and folding them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


_SECRET: list[bytes] = []


def _secret() -> bytes | None:
    """Returns this user's checkpoint secret (made on first use, mode 0600), None when it cannot be kept."""
    if not _SECRET:
        try:
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            path = Path(base).expanduser() / "engram" / "checkpoint.key"
            if not path.is_file() or path.stat().st_size != 32:
                atomic_write(path, secrets.token_bytes(32))  # a temp file made 0600, then renamed
            key = path.read_bytes()  # another process's, if it won a race: theirs is the one kept
        except (OSError, RuntimeError, EngramError):  # RuntimeError: no home folder
            return None
        if len(key) != 32:
            return None
        _SECRET.append(key)
    return _SECRET[0]


def _header() -> bytes:
    return f"engram fold checkpoint {FORMAT} {_code_digest()} py{sys.version_info[0]}.{sys.version_info[1]}\n".encode()


_CODE: list[str] = []


def _code_digest() -> str:
    """Returns a digest of the code that reads events and folds them: with other code, the same
    events may fold to other memories, so no checkpoint of it is used."""
    if not _CODE:
        digest = hashlib.sha256()
        files = sorted(Path(events_package.__file__).parent.glob("*.py"))
        code = [Path(model.__file__), Path(fold_module.__file__), Path(__file__), Path(__file__).with_name("snapshot.py")]
        for path in [*files, *code]:
            digest.update(path.read_bytes())
        _CODE.append(digest.hexdigest()[:16])
    return _CODE[0]
