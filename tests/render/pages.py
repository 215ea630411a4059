"""Reading generated pages back the way Obsidian does: their tags, wikilinks and frontmatter dates."""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml

from compiler.notes.links import resolve_links
from compiler.notes.markdown_rules import markdown_parser
from compiler.notes.parse import parse_note
from compiler.notes.records import ResolvedLink
from compiler.render.memory import CONTENT_END, CONTENT_START

PARSER = markdown_parser()
ISO = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?")
DATE_LIKE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}\S*)?")  # a whole value that is a date or time


def split_page(text: str) -> tuple[str, str]:
    """Returns (frontmatter, body) of a page."""
    assert text.startswith("---\n"), text[:80]
    front, _, body = text[4:].partition("\n---\n")
    return front, body


def written_by_people(body: str) -> str:
    """Returns the part of a memory page a person owns (its content), or ""."""
    start, end = body.find(CONTENT_START), body.find(CONTENT_END)
    return body[start:end] if 0 <= start < end else ""


def tags(pages: Mapping[str, str]) -> dict[str, list[str]]:
    """Returns {page: tags Obsidian reads in it}, leaving out the content block of memory pages."""
    found: dict[str, list[str]] = {}
    for path, text in pages.items():
        if not path.endswith(".md"):
            continue
        front, body = split_page(text)
        assert "tags" not in (yaml.safe_load(front) or {}), path
        own = written_by_people(body)
        body = body.replace(own, "") if own else body
        hits = [c.meta["tag"] for t in PARSER.parse(body) if t.type == "inline" for c in t.children or []
                if c.type == "tag"]
        if hits:
            found[path] = hits
    return found


def page_links(pages: Mapping[str, str], notes: Mapping[str, str], attachments: list[str],
               out: str = "_engram") -> list[ResolvedLink]:
    """Returns every link of the generated pages, resolved against the vault's notes and the pages."""
    parsed = [parse_note(path, text.encode())[0] for path, text in notes.items()]
    parsed += [parse_note(f"{out}/{path}", text.encode())[0] for path, text in pages.items() if path.endswith(".md")]
    resolved, _ = resolve_links([n for n in parsed if n], attachments)
    return [r for r in resolved if r.source.startswith(f"{out}/")]


def bad_dates(pages: Mapping[str, str]) -> list[tuple[str, str]]:
    """Returns (page, frontmatter line) for each date in frontmatter that is not ISO 8601."""
    bad = []
    for path, text in pages.items():
        if not path.endswith(".md"):
            continue
        for line in split_page(text)[0].splitlines():
            value = line.partition(":")[2].strip().strip('"')
            if DATE_LIKE.fullmatch(value) and not ISO.fullmatch(value):
                bad.append((path, line))
    return bad
