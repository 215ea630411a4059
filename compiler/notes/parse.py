"""Stage 2, parse: one note file's bytes → a `Note` (title, aliases, tags, links, headings,
sections, summary) plus the warnings worth showing the user.

python-frontmatter reads the YAML, markdown-it-py (with `markdown_rules`) reads the body.
`parse_note` is a pure function of its arguments: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re
from collections.abc import Iterator, Sequence
from datetime import date
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from markdown_it.token import Token

from compiler.core.errors import BuildWarning
from compiler.notes.markdown_rules import (
    escape_table_wikilinks,
    extract_links,
    is_link_list,
    markdown_parser,
    plain_text,
    split_wikilink,
    strip_comments,
)
from compiler.notes.note_bytes import decode, limit_size, text_bytes
from compiler.notes.records import Heading, Link, Note, Section

SUMMARY_CHARS = 160
# Frontmatter is untrusted: YAML anchors can expand a few lines into millions of nodes.
MAX_FRONTMATTER_NODES = 10_000
MAX_FRONTMATTER_DEPTH = 50

# Obsidian only reads frontmatter fenced by "---" lines, the first on line 1.
_FENCE_RE = re.compile(r"---[ \t]*")
_CALLOUT_RE = re.compile(r"^\[![\w-]+\][+-]?\s*")
_FRONTMATTER_LINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")
_PARSER = markdown_parser()
_YAML = YAMLHandler()


class _FrontmatterTooBig(ValueError):
    """Frontmatter that expands beyond MAX_FRONTMATTER_NODES or MAX_FRONTMATTER_DEPTH."""


def parse_note(
    path: str, raw: bytes, *, max_bytes: int = 1_000_000, max_section_chars: int = 1200
) -> tuple[Note | None, list[BuildWarning]]:
    """Returns the parsed note (None for a binary file) and the warnings about it."""
    data, warnings = text_bytes(path, raw)
    if data is None:
        return None, warnings
    text = decode(path, limit_size(path, data, max_bytes, warnings), warnings)
    front, body, offset, valid, yaml_lines = _split_frontmatter(path, text, warnings)
    body = strip_comments(body)
    parsed_body, table_links = escape_table_wikilinks(body)
    tokens = _PARSER.parse(parsed_body)
    warnings += [BuildWarning(path, offset + index + 1, f"{link} in a table row: Obsidian splits the cell at "
                              f"its unescaped \"|\" and shows no link; write {link.replace('|', chr(92) + '|')} "
                              "(engram reads it as that link)", "table-link") for index, link in table_links]
    headings = _headings(tokens, offset)
    note = Note(
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        title=_title(path, front, tokens),
        aliases=_aliases(front),
        tags=_tags(front, tokens),
        links=_frontmatter_links(front, yaml_lines) + extract_links(tokens, offset),
        headings=tuple(headings),
        sections=_sections(body.split("\n"), headings, offset, max_section_chars),
        summary=_summary(front, tokens),
        frontmatter=front,
        frontmatter_valid=valid,
    )
    return note, warnings


# --- frontmatter ---------------------------------------------------------------------------


def _split_frontmatter(
    path: str, text: str, warnings: list[BuildWarning]
) -> tuple[dict[str, Any], str, int, bool, list[str]]:
    """Returns (frontmatter, body, lines before the body, frontmatter valid, YAML lines)."""
    lines = text.split("\n")
    if not _FENCE_RE.fullmatch(lines[0]):
        return {}, text, 0, True, []
    close = next((i for i in range(1, len(lines)) if _FENCE_RE.fullmatch(lines[i])), None)
    if close is None:
        message = "frontmatter opened on line 1 is never closed with ---; indexed as plain text"
        warnings.append(BuildWarning(path, 1, message, "frontmatter"))
        return {}, text, 0, False, []
    yaml_lines = lines[1:close]
    front, valid = _load_yaml(path, "\n".join(yaml_lines), warnings)
    return front, "\n".join(lines[close + 1 :]), close + 1, valid, yaml_lines


def _load_yaml(path: str, source: str, warnings: list[BuildWarning]) -> tuple[dict[str, Any], bool]:
    """Returns the JSON-safe frontmatter mapping and whether it was usable."""
    # The handler is python-frontmatter's own (SafeLoader). `frontmatter.loads` is not used:
    # it strips the text (losing line numbers) and would take a note starting with "{" or
    # "+++" for JSON or TOML frontmatter, which Obsidian never does.
    try:
        data = _YAML.load(source)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        message = f"frontmatter is not valid YAML ({problem}); the note is indexed as text"
        warnings.append(BuildWarning(path, _yaml_error_line(exc), message, "frontmatter"))
        return {}, False
    except RecursionError:
        return {}, _frontmatter_ignored(path, "is nested too deeply", warnings)
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. "2024-13-01", a huge integer
        return {}, _frontmatter_ignored(path, f"holds a value YAML cannot read ({exc})", warnings)
    if data is None:
        return {}, True
    if not isinstance(data, dict):
        problem = f"must be a mapping of keys to values, not a {type(data).__name__}"
        return {}, _frontmatter_ignored(path, problem, warnings)
    try:
        return _json_safe(data, [MAX_FRONTMATTER_NODES], 0), True
    except _FrontmatterTooBig:
        return {}, _frontmatter_ignored(path, "is too large or nested too deeply", warnings)


def _yaml_error_line(exc: yaml.YAMLError) -> int:
    """Returns the 1-based file line of a YAML error (the YAML starts on file line 2)."""
    context_mark = getattr(exc, "context_mark", None)
    # Hitting the end of the YAML ("an unclosed quote") is reported at the end; the line
    # where the unfinished quote or bracket opened is the one to fix.
    problem_mark = getattr(exc, "problem_mark", None)
    at_end = problem_mark is not None and problem_mark.index >= len(problem_mark.buffer or "") - 1
    problem = str(getattr(exc, "problem", "") or "")
    if context_mark is not None and (at_end or "end of stream" in problem or "<stream end>" in problem):
        return context_mark.line + 2
    mark = problem_mark or context_mark
    return mark.line + 2 if mark is not None else 1


def _frontmatter_ignored(path: str, problem: str, warnings: list[BuildWarning]) -> bool:
    """Records why the frontmatter is ignored; returns False, the frontmatter's validity."""
    warnings.append(BuildWarning(path, 1, f"frontmatter {problem}; ignored", "frontmatter"))
    return False


def _json_safe(value: Any, budget: list[int], depth: int) -> Any:
    """Returns `value` as JSON-ready data: dates as ISO strings, sets as sorted lists."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_FRONTMATTER_DEPTH:
        raise _FrontmatterTooBig()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no NaN or Infinity
    if isinstance(value, date):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, dict):
        return {_json_key(k): _json_safe(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item, budget, depth + 1) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [_json_safe(item, budget, depth + 1) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _json_key(key: Any) -> str:
    return key.isoformat() if isinstance(key, date) else str(key)


def _frontmatter_links(front: dict[str, Any], yaml_lines: list[str]) -> tuple[Link, ...]:
    """Returns the `"[[Note]]"` links in frontmatter values, which Obsidian counts too."""
    links = []
    for text in _strings(front):
        for match in _FRONTMATTER_LINK_RE.finditer(text):
            parts = split_wikilink(match.group(2))
            if parts["target"]:
                line = _line_containing(yaml_lines, match.group(0))
                kind = "embed" if match.group(1) else "wikilink"
                links.append(Link(line=line, kind=kind, **parts))
    return tuple(links)


def _strings(value: Any) -> Iterator[str]:
    """Yields every string inside a JSON-safe value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _line_containing(yaml_lines: list[str], needle: str) -> int:
    """Returns the 1-based file line of the first YAML line holding `needle` (1 if none)."""
    return next((i + 2 for i, line in enumerate(yaml_lines) if needle in line), 1)


# --- metadata and headings -------------------------------------------------------------


def _title(path: str, front: dict[str, Any], tokens: Sequence[Token]) -> str:
    """Returns the frontmatter title, else the first H1, else the file name (always text)."""
    title = front.get("title")
    if isinstance(title, (str, int, float)) and not isinstance(title, bool) and str(title).strip():
        return " ".join(str(title).split())
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h1":
            text = plain_text(tokens[index + 1].children or [])
            if text:
                return text
    return posixpath.splitext(posixpath.basename(path))[0]


def _aliases(front: dict[str, Any]) -> tuple[str, ...]:
    """Returns the `aliases`/`alias` values: stripped, in order, without repeats."""
    found: list[str] = []
    for key in ("aliases", "alias"):
        value = front.get(key)
        # A single string may list several aliases separated by commas; list items may not.
        items = value.split(",") if isinstance(value, str) else _scalars(value)
        found.extend(item.strip() for item in items)
    return tuple(dict.fromkeys(alias for alias in found if alias))


def _scalars(value: Any) -> list[str]:
    """Returns the string, number items of a frontmatter list as strings."""
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, (str, int, float)) and not isinstance(v, bool)]


def _tags(front: dict[str, Any], tokens: Sequence[Token]) -> tuple[str, ...]:
    """Returns frontmatter and inline tags: without "#", lower-cased, unique, sorted."""
    found: list[str] = []
    for key in ("tags", "tag"):
        value = front.get(key)
        for item in [value] if isinstance(value, str) else _scalars(value):
            found.extend(re.split(r"[,\s]+", item))
    inline = (child for t in tokens if t.type == "inline" for child in t.children or [])
    found.extend(child.meta["tag"] for child in inline if child.type == "tag")
    cleaned = (tag.strip().lstrip("#").lower() for tag in found)
    # Obsidian ignores all-digit tags such as "2024", in frontmatter as inline.
    return tuple(sorted({tag for tag in cleaned if tag and not tag.isdigit()}))


def _headings(tokens: Sequence[Token], offset: int) -> list[Heading]:
    """Returns every ATX and setext heading with its level and 1-based file line."""
    headings = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            text = " ".join(tokens[index + 1].content.split())
            headings.append(Heading(text, int(token.tag[1]), offset + token.map[0] + 1))
    return headings


# --- sections ------------------------------------------------------------------------------


def _sections(
    lines: list[str], headings: list[Heading], offset: int, max_chars: int
) -> tuple[Section, ...]:
    """Returns the body cut at headings, long parts cut again at paragraphs, with ordinals."""
    starts = {0: ""} | {h.line - offset - 1: h.text for h in headings}
    bounds = sorted(starts) + [len(lines)]
    pieces: list[tuple[str, int, str]] = []
    for start, end in zip(bounds, bounds[1:]):
        for line, text in _split_long(lines[start:end], start, max_chars):
            pieces.append((starts[start], offset + line + 1, text))
    return tuple(Section(i, heading, line, text) for i, (heading, line, text) in enumerate(pieces))


def _split_long(lines: list[str], first: int, max_chars: int) -> Iterator[tuple[int, str]]:
    """Yields (0-based body line, text) pieces of at most `max_chars`, empty ones dropped."""
    paragraphs = list(_paragraphs(lines, first))
    whole = "\n".join(lines).strip()
    if len(whole) <= max_chars:
        if whole:
            yield paragraphs[0][0], whole
        return
    group: list[str] = []
    group_line, size = 0, 0  # size of "\n\n".join(group)
    for line, text in paragraphs:
        if group and size + 2 + len(text) > max_chars:
            yield group_line, "\n\n".join(group)
            group = []
        if len(text) > max_chars:
            yield from _cut_at_whitespace(text, line, max_chars)
            continue
        if not group:
            group_line, size = line, -2
        group.append(text)
        size += 2 + len(text)
    if group:
        yield group_line, "\n\n".join(group)


def _paragraphs(lines: list[str], first: int) -> Iterator[tuple[int, str]]:
    """Yields (0-based body line, stripped text) for each run of non-blank lines."""
    start = None
    for index, line in enumerate(lines + [""]):
        if line.strip() and start is None:
            start = index
        elif not line.strip() and start is not None:
            yield first + start, "\n".join(lines[start:index]).strip()
            start = None


def _cut_at_whitespace(text: str, line: int, max_chars: int) -> Iterator[tuple[int, str]]:
    """Yields pieces of one long paragraph, cut at the last whitespace that fits."""
    pos, counted = 0, 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        line += text.count("\n", counted, pos)
        counted = pos
        end = pos + max_chars
        cut = len(text) if end >= len(text) else _last_space(text, pos, end)
        yield line, text[pos:cut].rstrip()
        pos = cut


def _last_space(text: str, pos: int, end: int) -> int:
    """Returns the index of the last whitespace in text[pos+1 : end+1], else `end`."""
    cut = max(text.rfind(space, pos + 1, end + 1) for space in " \n\t")
    return cut if cut > pos else end  # one unbroken word longer than the limit: hard cut


# --- summary -------------------------------------------------------------------------------


def _summary(front: dict[str, Any], tokens: Sequence[Token]) -> str:
    """Returns the frontmatter description, else the first prose paragraph, shortened."""
    for key in ("description", "summary"):
        value = front.get(key)
        if isinstance(value, str) and value.strip():
            return _shorten(" ".join(value.split()))
    for index, token in enumerate(tokens[1:], start=1):
        if token.type != "inline" or tokens[index - 1].type != "paragraph_open":
            continue
        children = token.children or []
        text = _CALLOUT_RE.sub("", plain_text(children))
        if text and not is_link_list(children):
            return _shorten(text)
    return ""


def _shorten(text: str) -> str:
    """Returns `text` cut on a word boundary to at most SUMMARY_CHARS, ending in "…"."""
    if len(text) <= SUMMARY_CHARS:
        return text
    cut = text.rfind(" ", 0, SUMMARY_CHARS)
    head = text[: cut if cut > SUMMARY_CHARS // 2 else SUMMARY_CHARS - 1]
    return head.rstrip(" ,;:.-") + "…"
