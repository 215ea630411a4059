"""Plain, frozen records passed between pipeline stages.

Stages never import each other: the spine (`compiler.pipeline.spine`) hands these records from one
stage to the next. Every record converts to and from a JSON-ready dict so the build state
can cache parsed notes between compiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOTE_SUFFIXES = (".md", ".qmd")


@dataclass(frozen=True)
class FileStamp:
    """What scan knows about one note file on disk."""

    path: str  # vault-relative POSIX path, e.g. "projects/alpha.md"
    size: int
    mtime_ns: int
    sha256: str
    inode: int = 0  # a file replaced by another (a checkout, an atomic save) gets a new inode


@dataclass(frozen=True)
class Link:
    """One outgoing link of a note, as written (not yet resolved)."""

    target: str  # the link path as written, without #heading / ^block / |alias, e.g. "folder/Note"
    line: int  # 1-based line in the source file
    kind: str  # "wikilink" | "embed" | "markdown"
    heading: str = ""  # "Heading" for [[Note#Heading]]
    block: str = ""  # "abc123" for [[Note#^abc123]]
    alias: str = ""  # "shown" for [[Note|shown]]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Link":
        return cls(**data)


@dataclass(frozen=True)
class Heading:
    text: str
    level: int
    line: int


@dataclass(frozen=True)
class Section:
    """A piece of a note small enough to embed: split at headings, then at paragraphs."""

    ordinal: int  # 0-based position in the note
    heading: str  # nearest heading above, "" before the first one
    line: int  # 1-based line where the section starts
    text: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Section":
        return cls(**data)


@dataclass(frozen=True)
class Note:
    """A parsed human note. Produced by `parse_note`, never written back to the vault."""

    path: str  # vault-relative POSIX path
    sha256: str
    title: str
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # without "#", lower-cased, nested kept as "a/b"
    links: tuple[Link, ...] = ()
    headings: tuple[Heading, ...] = ()
    sections: tuple[Section, ...] = ()
    summary: str = ""  # one line for the catalog
    frontmatter: dict[str, Any] = field(default_factory=dict)  # JSON-safe values only
    frontmatter_valid: bool = True

    @property
    def section_count(self) -> int:
        """How many sections the note has: what a stage that goes over every note asks (a note read
        back from the build state knows it before its sections are decoded)."""
        return len(self.sections)

    def to_dict(self) -> dict[str, Any]:
        """Returns the note as JSON-ready values. Not `asdict`: its deep copy of every link and
        section made saving the state of 10,000 notes take 8 s; the records inside are flat."""
        data = dict(vars(self))
        for name in ("links", "headings", "sections"):
            data[name] = [dict(vars(item)) for item in data[name]]
        data["aliases"], data["tags"] = list(self.aliases), list(self.tags)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Note":
        return cls(
            path=data["path"],
            sha256=data["sha256"],
            title=data["title"],
            aliases=tuple(data.get("aliases", ())),
            tags=tuple(data.get("tags", ())),
            links=tuple(Link.from_dict(link) for link in data.get("links", ())),
            headings=tuple(Heading(**h) for h in data.get("headings", ())),
            sections=tuple(Section.from_dict(s) for s in data.get("sections", ())),
            summary=data.get("summary", ""),
            frontmatter=dict(data.get("frontmatter", {})),
            frontmatter_valid=data.get("frontmatter_valid", True),
        )


@dataclass(frozen=True)
class ResolvedLink:
    """A link after Obsidian-style resolution."""

    source: str  # path of the linking note
    target: str  # path of the note or attachment it resolves to; "" when broken
    link: Link
    status: str  # "ok" | "broken" | "ambiguous" (resolved, but several candidates tied)
    candidates: tuple[str, ...] = ()  # for ambiguous links: every tied path
