"""Which observation pages the disk already holds, so a compile renders only the ones that changed.

Each build records, per observation page, the digest of what it was rendered from
(`compiler.render.memory.page_digest`) and the page file's stat once written. The next build
renders a page only when its digest moved or the file did: a stat that still matches means our
bytes are there; one that moved (touched, restored from a backup) is read and hashed against the
sha256 the state keeps (`BuildState.pages`); a page edited or deleted by hand is rendered and
written again. At 50,000 memories a compile after one `memory add` rendered and read back every
page: 64 s of CPU, four fifths of it spent on pages that had not changed. Project pages are
recorded the same way (their digest is the templates' key: whether one moved is told by its
members, `compiler.render.memory.LastRender`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

Stamp = tuple[int, int, int]  # size, mtime_ns, inode
Record = tuple[str, int, int, int]  # the page's input digest, then its Stamp at the last write


def page_stamp(path: Path | str) -> Stamp | None:
    """Returns the stat of the regular file at `path` (not followed if a link), or None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ino) if stat.S_ISREG(info.st_mode) else None


class KeptPages:
    """Answers `render_memory_pages`' question "does the disk hold this page, made from this digest?"
    and remembers the stat it found for each page it said yes to. Each page is stat'ed once per
    build: the edit check (`as_written`) and the render check share it, and no page is written
    between the two."""

    def __init__(self, root: Path, out: str, records: Mapping[str, Record], hashes: Mapping[str, str],
                 seen: Mapping[str, Stamp | None] | None = None) -> None:
        self._folder, self._out = os.path.join(root, out), out  # strings: 50,000 pathlib joins cost seconds
        self._records, self._hashes = records, hashes  # hashes: vault-relative page → sha256 we last wrote
        # `seen`: every file of the output folder as this compile found it before any write (the
        # no-op check's listing, compiler.pipeline.inputs.OutputListing): no page is stat'ed again
        self._seen = seen
        self._found: dict[str, Stamp | None] = {}
        self.stamps: dict[str, Stamp] = {}

    def as_written(self, page: str) -> bool:
        """True when the page has the stat recorded when it was last written: our bytes, unread."""
        record = self._records.get(page)
        return record is not None and self._stamp(page) == tuple(record[1:])

    def __call__(self, page: str, digest: str) -> bool:
        record = self._records.get(page)
        if record is None or record[0] != digest or f"{self._out}/{page}" not in self._hashes:
            return False
        found = self._stamp(page)
        if found is None:  # deleted (or replaced by a link or a folder): rendered and written again
            return False
        if found != tuple(record[1:]) and not self._same_bytes(page):
            return False  # edited by hand outside the content (an edit of the content is an update event)
        self.stamps[page] = found
        return True

    def _stamp(self, page: str) -> Stamp | None:
        if self._seen is not None:
            return self._seen.get(page)
        if page not in self._found:
            self._found[page] = page_stamp(os.path.join(self._folder, page))
        return self._found[page]

    def _same_bytes(self, page: str) -> bool:
        try:
            with open(os.path.join(self._folder, page), "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest() == self._hashes[f"{self._out}/{page}"]
        except OSError:
            return False


def page_records(root: Path, out: str, digests: Mapping[str, str], kept: Mapping[str, Stamp],
                 refused: Iterable[str]) -> dict[str, Record]:
    """Returns the record of every observation page of this build, once the pages are written:
    its digest and stat. Pages not written (`refused`: a person's file is in the way) get none, so
    the next build tries again and warns again."""
    skip = set(refused)
    records: dict[str, Record] = {}
    for page, digest in digests.items():
        if f"{out}/{page}" in skip:
            continue
        found = kept.get(page) or page_stamp(root / out / page)
        if found is not None:
            records[page] = (digest, *found)
    return records
