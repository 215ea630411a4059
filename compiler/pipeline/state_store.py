"""The build state on disk: one SQLite row per note, file stamp, page and page record.

A compile after one change rewrites the few rows that moved, not the whole state: the JSON file
this replaces (`state.json`, 15–26 MB at 10,000 notes or 50,000 memories) was encoded, compared
with the disk and written whole after any change, and parsed whole by the next compile.

`write_state` diffs the new state against the one the file holds (`base`, as `read_state`
returned it) and writes the difference in one transaction; with no base (a first build, a
rebuild, an older or damaged file) it writes a new file whole and renames it into place. SQLite's
transaction makes a crash leave the old rows or the new ones, never half of each; a file that
cannot be read is a full rebuild (compiler.pipeline.state.load_state), never a traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from compiler.core.errors import BuildWarning
from compiler.notes.records import FileStamp, Note
from compiler.pipeline.section_text import note_hashes

SCHEMA = ("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
          "CREATE TABLE entries (part TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
          "PRIMARY KEY (part, key)) WITHOUT ROWID")
META = ("version", "model", "model_setting", "fingerprint", "parser", "memory_events", "memory_mark", "note_mark")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _record(value: tuple[str, int, int, int]) -> str:
    return " ".join(map(str, value))  # a digest (hex) and three integers: no JSON needed


def _unrecord(_key: str, text: str) -> tuple[str, int, int, int]:
    digest, size, mtime, inode = text.split(" ")
    return digest, int(size), int(mtime), int(inode)


# part → (encode a value, decode (key, text) into the value); the BuildState field of the same name.
PARTS: dict[str, tuple[Callable[[Any], str], Callable[[str, str], Any]]] = {
    "files": (lambda s: _compact([s.size, s.mtime_ns, s.sha256, s.inode]),
              lambda k, t: FileStamp(k, *json.loads(t))),
    "notes": (lambda n: _compact(n.to_dict()), lambda _k, t: t),  # made a StoredNote with its head by read_state
    "heads": (lambda n: _compact(_head(n)), lambda _k, t: json.loads(t)),  # BuildState.notes again, their heads
    "warnings": (lambda ws: _compact([w.to_dict() for w in ws]),
                 lambda _k, t: [BuildWarning(**w) for w in json.loads(t)]),
    "memory_pages": (str, lambda _k, t: t),
    "pages": (str, lambda _k, t: t),
    "memory_renders": (_record, _unrecord),
    "note_renders": (_record, _unrecord),
}


def read_state(path: Path) -> dict[str, Any]:
    """Returns {meta key or part: value} as saved in `path`. Raises sqlite3.Error (or ValueError,
    KeyError, TypeError on a row it cannot decode) when the file is not a readable state.

    The notes' rows are not fetched: each `StoredNote` reads its own when first asked for a field
    its head does not hold (fetching the 213 MB of rows of 100,000 notes cost 1.6 s of a compile
    after one edit, and their memory). A state without heads is read whole, as before."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        found: dict[str, Any] = {part: {} for part in PARTS}
        found.update(db.execute("SELECT key, value FROM meta"))
        for part in PARTS:
            if part != "notes":
                found[part] = _decoded_part(part, db.execute("SELECT key, value FROM entries WHERE part = ?", (part,)))
        keys = [key for (key,) in db.execute("SELECT key FROM entries WHERE part = 'notes'")]
        heads = {p: head for p, head in found.pop("heads").items() if len(head) == len(HEAD)}
        # A state saved before heads were, or with other heads (an older engram): its notes decoded whole,
        # the file written whole next.
        found["heads_missing"] = heads.keys() != set(keys)
        if found["heads_missing"]:
            found["notes"] = {p: Note.from_dict(json.loads(row))
                              for p, row in db.execute("SELECT key, value FROM entries WHERE part = 'notes'")}
    found["memory_mark"] = json.loads(found.get("memory_mark", "{}"))
    if not found["heads_missing"]:
        source = NoteRows(path)
        found["notes"] = {p: StoredNote(p, source, heads[p]) for p in keys}
    return found


def _decoded_part(part: str, rows: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Returns {key: value} of one part's rows. The JSON parts are parsed in one call, as one array:
    100,000 calls of `json.loads` (the file stamps, the notes' heads) cost a second more."""
    if part not in ("files", "heads"):
        return {key: PARTS[part][1](key, text) for key, text in rows}
    keys, texts = [], []
    for key, text in rows:
        keys.append(key)
        texts.append(text)
    values = json.loads(f"[{','.join(texts)}]")
    if len(values) != len(keys) or not all(isinstance(v, list) for v in values):  # a damaged row: unreadable
        raise ValueError(f"the build state's {part} rows do not decode one value each")
    if part == "heads":
        return dict(zip(keys, values))
    return {key: FileStamp(key, *value) for key, value in zip(keys, values)}


class NoteRows:
    """The notes' rows of one state file, read when a note is first decoded. The connection stays
    open, with no statement left running between reads (no lock held): a save that replaces the
    file leaves it on the file it was opened on. `compiler.pipeline.state.save_state` first pins
    the rows of the notes whose row it changes or drops (`StoredNote.pin`)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None

    def fetch(self, keys: Collection[str]) -> dict[str, str]:
        """Returns {key: row} for the notes of `keys` the file holds."""
        if self._db is None:
            self._db = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, check_same_thread=False)
        found: dict[str, str] = {}
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):  # under SQLite's limit of bound values
            batch = ordered[start:start + 500]
            query = f"SELECT key, value FROM entries WHERE part = 'notes' AND key IN ({','.join('?' * len(batch))})"
            found.update(self._db.execute(query, batch).fetchall())  # run to its end: no read lock kept
        return found


# What a compile reads of every note (the indexes, the links, the catalog and health pages), in the head's order.
# The sections' text hashes too: the token-file compaction asks for every note's (compiler.pipeline.index.section_hashes).
HEAD = ("sha256", "title", "aliases", "tags", "summary", "section_count", "section_hashes")


def _head(note: Note) -> list[Any]:
    return [note.sha256, note.title, list(note.aliases), list(note.tags), note.summary, note.section_count,
            note_hashes(note)]


class StoredNote(Note):
    """A note of the last build as the state holds it: what a compile asks of every note (`HEAD`:
    its hash, title, aliases, tags, summary, how many sections) at once, every other field decoded
    from its row, fetched from the state file the first time something asks for one. After one edit
    of 100,000 notes, decoding every row cost 6 s of the compile and fetching them 1.6 s; the pages
    and indexes of the notes it changed read a few of them.

    Equal to the `Note` of the same fields: a stored note stands for the note."""

    def __init__(self, path: str, rows: NoteRows, head: list[Any]) -> None:  # pylint: disable=super-init-not-called
        sha256, title, aliases, tags, summary, count, hashes = head
        # Frozen: the fields go straight into the instance's dict, as the dataclass's own __init__ puts them.
        self.__dict__.update(path=path, sha256=sha256, title=title, aliases=tuple(aliases), tags=tuple(tags),
                             summary=summary, _rows=rows, _count=count, _hashes=tuple(hashes))

    def _fetch(self) -> str:
        row = self.__dict__["_rows"].fetch([self.path]).get(self.path)
        if row is None:
            raise KeyError(f"{self.path}: its row is gone from the build state")
        return row

    def _decode(self) -> None:
        """Decodes the row, once: from then on every field is in the instance's dict."""
        row = self.__dict__.pop("_row", None) or self._fetch()
        del self.__dict__["_count"], self.__dict__["_rows"]
        self.__dict__.update(vars(Note.from_dict(json.loads(row))))

    @property
    def section_count(self) -> int:
        return self.__dict__["_count"] if "_rows" in self.__dict__ else len(self.sections)

    @property
    def stored_hashes(self) -> tuple[str, ...]:
        """The text hashes of what is embedded for each section, as saved with the note."""
        return self.__dict__["_hashes"]

    def to_dict(self) -> dict[str, Any]:
        if "_rows" in self.__dict__:
            return json.loads(self.__dict__.get("_row") or self._fetch())
        return {k: v for k, v in Note.to_dict(self).items() if not k.startswith("_")}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Note):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in Note.__dataclass_fields__)

    __hash__ = Note.__hash__


def pin_rows(notes: Iterable[Note]) -> None:
    """Fetches the rows of the stored notes among `notes` not decoded yet, in one pass per state
    file: the state file is about to change or drop them, and a note decoded later must still
    decode as it was read."""
    waiting: dict[int, tuple[NoteRows, list[StoredNote]]] = {}
    for note in notes:
        if isinstance(note, StoredNote) and "_rows" in note.__dict__ and "_row" not in note.__dict__:
            rows = note.__dict__["_rows"]
            waiting.setdefault(id(rows), (rows, []))[1].append(note)
    for rows, stored in waiting.values():
        found = rows.fetch([n.path for n in stored])
        for note in stored:
            if note.path in found:
                note.__dict__["_row"] = found[note.path]


def _decoded(name: str) -> property:
    """A field of the row: a property, since the dataclass's defaults are class attributes that
    would otherwise answer for a field not decoded yet."""
    def value(note: StoredNote) -> Any:
        if "_rows" in note.__dict__:
            note._decode()
        return note.__dict__[name]
    return property(value)


for _name in Note.__dataclass_fields__.keys() - {"path", *HEAD}:
    setattr(StoredNote, _name, _decoded(_name))


def write_state(path: Path, meta: Mapping[str, Any], parts: Mapping[str, Mapping[str, Any]],
                base: Mapping[str, Any] | None) -> int:
    """Saves the state (`meta` values and `parts`) to `path`; returns how many rows it wrote or
    deleted. With `base` (what the file holds) only the difference is written; else a new file."""
    meta_rows = {k: _compact(v) if k == "memory_mark" else str(v) for k, v in meta.items()}
    if base is None or not path.is_file():
        return _write_whole(path, meta_rows, parts)
    old_meta = {k: _compact(v) if k == "memory_mark" else str(v) for k, v in base.items() if k in META}
    changed_meta = [(k, v) for k, v in meta_rows.items() if old_meta.get(k) != v]
    upserts, deletes = [], []
    for part, values in parts.items():
        encode, before = PARTS[part][0], base.get(part, {})
        upserts += [(part, k, encode(v)) for k, v in values.items()
                    if k not in before or (before[k] is not v and before[k] != v)]
        deletes += [(part, k) for k in before if k not in values]
    if not (changed_meta or upserts or deletes):
        return 0
    with closing(sqlite3.connect(path)) as db, db:
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", changed_meta)
        db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", upserts)
        db.executemany("DELETE FROM entries WHERE part = ? AND key = ?", deletes)
    return len(changed_meta) + len(upserts) + len(deletes)


def _write_whole(path: Path, meta_rows: Mapping[str, str], parts: Mapping[str, Mapping[str, Any]]) -> int:
    """Writes the whole state to a new file beside `path` and renames it over `path`."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    with closing(sqlite3.connect(temp)) as db, db:
        for statement in SCHEMA:
            db.execute(statement)
        db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta_rows.items()))
        db.executemany("INSERT INTO entries VALUES (?, ?, ?)", _rows(parts))
        count = db.execute("SELECT count(*) FROM entries").fetchone()[0]
    with open(temp, "rb+") as handle:  # durable before the rename makes it the state
        os.fsync(handle.fileno())
    os.replace(temp, path)
    return count + len(meta_rows)


def _rows(parts: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[str, str, str]]:
    for part, values in sorted(parts.items()):
        encode = PARTS[part][0]
        for key, value in sorted(values.items()):
            yield part, key, encode(value)
