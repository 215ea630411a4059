"""Where the wiki lives in a vault, and the one gate every wiki write goes through.

`WikiLayout` names the folders (`raw`, `wiki` in engram.toml) and the files engram keeps there:
the schema page agents read first, the generated `index.md` and `log.md`, and the history journal
under `.engram/wiki/` (git-tracked: log.md and `engram wiki undo` are made from it, on any clone).
`page_path` turns a page title into the path it is written at and refuses anything that could
land outside the wiki folder: `..`, separators, control characters, a symlink on the way, raw/.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from compiler.core.clock import format_time, parse_time, utc_now
from compiler.core.errors import InputError, UsageError
from compiler.core.files import contained
from compiler.core.settings import Settings

INDEX, LOG, SCHEMA = "index.md", "log.md", "AGENTS.md"
MAX_TITLE_CHARS = 200
# What each kind of page is for; a page's folder inside the wiki follows its kind.
KINDS = {
    "source": "sources",  # the summary of one raw source
    "concept": "concepts",
    "entity": "entities",
    "decision": "decisions",
    "synthesis": "syntheses",  # an answer filed back, a comparison, an overview
    "note": "",  # anything else: the wiki folder itself
}
# Characters Obsidian refuses in a file name or that break a [[link]] to it: replaced by a space.
_UNSAFE_IN_NAME = re.compile(r'[*"<>:|?#^\[\]]+')
_HOSTILE = re.compile(r"[/\\\x00-\x1f\x7f]|^\s*\.")


@dataclass(frozen=True)
class WikiLayout:
    """The wiki's places in one vault (absolute paths) and their vault-relative names."""

    root: Path
    raw_name: str
    wiki_name: str
    cited_kinds: tuple[str, ...] = ()
    missing_min: int = 2
    max_source_bytes: int = 20_000_000
    now: str = ""  # the clock pinned by settings (`now`), else the real one

    @classmethod
    def of(cls, vault: Path, settings: Settings) -> "WikiLayout":
        """Returns the layout of `vault`; raises UsageError when the folders overlap each other or `out`."""
        names = {"raw": settings.raw.strip("/"), "wiki": settings.wiki.strip("/"), "out": settings.out.strip("/")}
        for a, b in (("raw", "wiki"), ("raw", "out"), ("wiki", "out")):
            pa, pb = PurePosixPath(names[a]), PurePosixPath(names[b])
            if pa == pb or pa.is_relative_to(pb) or pb.is_relative_to(pa):
                raise UsageError(f"`{a}` ({names[a]}) and `{b}` ({names[b]}) must be separate folders", path="engram.toml")
        return cls(vault.resolve(), names["raw"], names["wiki"], tuple(settings.wiki_cited_kinds),
                   settings.wiki_missing_min, settings.max_source_bytes, settings.now)

    @property
    def raw(self) -> Path:
        return self.root / self.raw_name

    @property
    def wiki(self) -> Path:
        return self.root / self.wiki_name

    @property
    def history(self) -> Path:
        return self.root / ".engram" / "wiki" / "history.jsonl"

    @property
    def special(self) -> frozenset[str]:
        """The vault-relative paths of the wiki's own files: not pages, never linted as pages."""
        return frozenset(f"{self.wiki_name}/{name}" for name in (INDEX, LOG, SCHEMA))

    def timestamp(self) -> str:
        """Returns now as `YYYY-MM-DD HH:MM:SS` UTC (the pinned `now` when settings set one)."""
        return format_time(parse_time(self.now)) if self.now else format_time(utc_now())

    def relative(self, path: Path) -> str:
        text, root = str(path), str(self.root)
        if text.startswith(root + os.sep):  # string work: Path.relative_to is most of listing a big wiki
            return text[len(root) + 1:].replace(os.sep, "/")
        return path.relative_to(self.root).as_posix()

    def files_under(self, folder: Path, suffix: str) -> list[str]:
        """Returns the vault-relative paths of the files under `folder` whose names end in `suffix`,
        sorted; hidden files and folders, and folders that are symlinks, are left out. os.walk and
        strings, not pathlib's rglob: listing a big wiki that way was most of a page write."""
        found = []
        for top, folders, names in os.walk(folder):
            folders[:] = [f for f in folders if not f.startswith(".")]
            here = self.relative(Path(top))
            found += [f"{here}/{n}" for n in names if n.endswith(suffix) and not n.startswith(".")]
        return sorted(found)

    def is_page(self, relative: str) -> bool:
        """True for a vault-relative .md path inside the wiki folder that is a page (not index/log/schema)."""
        return relative.startswith(self.wiki_name + "/") and relative.endswith(".md") and relative not in self.special

    def page_path(self, title: str, kind: str) -> str:
        """Returns the vault-relative path a new page titled `title` is written at: the kind's folder,
        the title as the file name (so `[[Title]]` resolves in Obsidian). Raises InputError for a
        title that is empty, too long, or names a path (`../../x`, `a/b`, a leading dot)."""
        return f"{self.wiki_name}/{KINDS[check_kind(kind)] + '/' if KINDS[kind] else ''}{file_stem(title)}.md"

    def writable(self, relative: str) -> Path:
        """Returns the absolute path of wiki page `relative` when a wiki write may land there; raises
        InputError naming why not: outside the wiki folder, inside raw/, not .md, a symlink on the way,
        or one of the wiki's generated files."""
        posix = PurePosixPath(relative.replace("\\", "/"))
        if posix.is_absolute() or ".." in posix.parts or any(p.startswith(".") for p in posix.parts):
            raise InputError(f"{relative}: not a page path inside {self.wiki_name}/ (no absolute paths, '..' or hidden folders)")
        shown = posix.as_posix()
        if shown.startswith(self.raw_name + "/"):
            raise InputError(f"{shown}: sources in {self.raw_name}/ are read-only; write a page in {self.wiki_name}/ that cites it")
        if not shown.startswith(self.wiki_name + "/"):
            raise InputError(f"{shown}: wiki writes land only inside {self.wiki_name}/; the other notes are the person's")
        if posix.suffix != ".md":
            raise InputError(f"{shown}: a wiki page is a .md file")
        if shown in self.special:
            raise InputError(f"{shown}: engram generates this file; write a page instead")
        target = self.root / shown
        try:
            real = contained(self.root, target)
        except UsageError as error:
            raise InputError(str(error)) from None
        if not real.is_relative_to(contained(self.root, self.wiki)) or target.is_symlink() or \
                (self.wiki.is_symlink()):
            raise InputError(f"{shown}: a symlink leads out of {self.wiki_name}/; refusing to write there")
        return target


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InputError(f"kind {kind!r} is not one of: {', '.join(KINDS)}")
    return kind


def file_stem(title: str) -> str:
    """Returns the file name (without .md) of a page titled `title`; InputError for a hostile title."""
    folded = unicodedata.normalize("NFC", title).strip()
    if not folded:
        raise InputError("a page needs a title")
    if len(folded) > MAX_TITLE_CHARS:
        raise InputError(f"a title is at most {MAX_TITLE_CHARS} characters (this one has {len(folded)})")
    if _HOSTILE.search(folded) or folded in (".", ".."):
        raise InputError(f"title {title!r} names a path or holds control characters: a title is plain words")
    stem = " ".join(_UNSAFE_IN_NAME.sub(" ", folded).split())
    if not stem:
        raise InputError(f"title {title!r} has no character a file name can hold")
    return stem


def slug(text: str, limit: int = 80) -> str:
    """Returns a lower-case ASCII file stem for a source (`Postgres: Autovacuum!` → `postgres-autovacuum`)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    return "-".join(words)[:limit].strip("-") or "source"
