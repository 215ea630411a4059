"""Obsidian syntax for markdown-it-py: wikilinks, embeds, inline tags and `%%` comments.

markdown-it has no wikilink plugin, so this module adds small inline rules. Being inline
rules, they never see code spans, fenced or indented code, or HTML blocks and comments:
markdown-it consumes those first. `%%` comments are removed before parsing instead, keeping
every newline so line numbers stay right.

Every token these rules make (and every markdown `link_open` / `image`) carries
`meta["line"]`: the 0-based line offset of the match inside its inline block, so the caller
adds the block's `map[0]` to get the line in the parsed text.

The readers at the end turn tokens back into plain data: `extract_links`, `plain_text` and
`is_link_list`; `inert` goes the other way, making plain text safe to write into a page.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline, image, link
from markdown_it.token import Token

from compiler.notes.records import Link

# Bounds the search for "]]" so a line full of "[[" stays linear; real links are far shorter.
MAX_WIKILINK_CHARS = 1024

# Letters and digits of any script, "_", "-", "/" for nesting, and combining accents so
# that a decomposed "diseño" (n + U+0303) stays one tag.
_TAG_RE = re.compile(r"#([\w\-/\u0300-\u036f]+)")
# Obsidian does not start a tag after these: "a#b", "&#123;", "url/#x", "##", "(#x".
_TAG_BLOCKERS = frozenset("&/#(")
# A line of text splits into backtick runs, "%%" markers and plain text.
_COMMENT_PARTS_RE = re.compile(r"(`+|%%)")
_MAYBE_CODE_RE = re.compile(r"```|~~~|^(?: {4}|\t)", re.MULTILINE)  # may hold a code block
_NEWLINES_KEY = "engram_newlines"
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")  # http:, mailto:, obsidian:, C:

# What Obsidian would read as markup in plain text: links and embeds ("[", "]"), code, emphasis,
# table cells, math, highlights ("=="), strikethrough, comments ("%%"), HTML and entities,
# block ids ("^") and tags ("#" before a tag character). "_" only counts at a word's edge.
# Also Templater's "<%" (it runs on a file's raw text, code blocks included, so both characters
# are escaped), "<!" (so no text holds a page's own "<!-- engram:content -->" markers) and the ":" of a "scheme://" other than http(s) ("obsidian://", "file://").
_MARKUP_RE = re.compile(r"[\\`*\[\]|$^]|==|~~|%%|(?<!\w)_|_(?!\w)|<[%!]|<(?=[A-Za-z/?])|&(?=#?\w+;)|#(?=[\w\-/])"
                        r"|(?<=[A-Za-z0-9])(?<!http)(?<!https):(?=//)")
# What starts a block at a line's start: an ATX heading ("# x") or a setext underline ("---", "=").
_BLOCK_START_RE = re.compile(r"^( {0,3})(#+(?=\s|$)|[-=](?=[-=]*\s*$))")
_ESCAPED_RE = re.compile(r"\\([!-/:-@\[-`{-~])")  # a CommonMark backslash escape: "\" + ASCII punctuation

InlineRule = Callable[[StateInline, bool], bool]


def markdown_parser() -> MarkdownIt:
    """Returns a CommonMark parser with tables, strikethrough and the Obsidian rules."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return md.use(wikilinks_plugin).use(tags_plugin).use(source_lines_plugin)


def wikilinks_plugin(md: MarkdownIt) -> None:
    """Adds the `wikilink` token for `[[...]]` and `![[...]]` (meta: target, heading, block,
    alias, embed, line)."""
    # Before "link" so "[[x]]" is never tried as a markdown link; "!" is not claimed by "link",
    # so embeds reach this rule before "image" as well.
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.add_render_rule("wikilink", _render_wikilink)


def tags_plugin(md: MarkdownIt) -> None:
    """Adds the `tag` token for inline `#tag` and `#nested/tag` (meta: tag, line)."""
    md.inline.ruler.before("link", "tag", _tag_rule)
    md.add_render_rule("tag", lambda renderer, tokens, idx, options, env: tokens[idx].content)


def source_lines_plugin(md: MarkdownIt) -> None:
    """Wraps markdown-it's own link and image rules so their tokens carry `meta["line"]`."""
    md.inline.ruler.at("link", _with_line(link, "link_open"))
    md.inline.ruler.at("image", _with_line(image, "image"))


def split_wikilink(inner: str) -> dict[str, str]:
    """Returns target, heading, block and alias of the text between `[[` and `]]`."""
    # Inside tables Obsidian users escape the alias pipe as "\|".
    path, _, alias = inner.replace("\\|", "|").partition("|")
    target, _, anchor = path.partition("#")
    anchor = anchor.strip()
    block = anchor[1:].strip() if anchor.startswith("^") else ""
    return {
        "target": target.strip(),
        "heading": "" if anchor.startswith("^") else anchor,
        "block": block,
        "alias": alias.strip(),
    }


def inline_line(state: StateInline, pos: int) -> int:
    """Returns how many newlines of the inline source precede `pos`."""
    # Newline offsets are cached per inline source so a long paragraph full of links
    # costs one scan, not one scan per link.
    cached = state.env.get(_NEWLINES_KEY)
    if cached is None or cached[0] is not state.src:
        offsets = [i for i, ch in enumerate(state.src) if ch == "\n"]
        cached = state.env[_NEWLINES_KEY] = (state.src, offsets)
    return bisect.bisect_left(cached[1], pos)


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    """Returns True after consuming a `[[...]]` or `![[...]]` at the current position."""
    src, pos = state.src, state.pos
    embed = src.startswith("![[", pos)
    if not embed and not src.startswith("[[", pos):
        return False
    start = pos + (3 if embed else 2)
    end = src.find("]]", start, min(state.posMax, start + MAX_WIKILINK_CHARS))
    inner = src[start:end] if end >= 0 else ""
    # Obsidian wikilinks never span lines; "[[]]" is plain text.
    if not inner.strip() or "\n" in inner:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        token.content = src[pos : end + 2]
        token.markup = "![[" if embed else "[["
        token.meta = {**split_wikilink(inner), "embed": embed, "line": inline_line(state, pos)}
    state.pos = end + 2
    return True


def _tag_rule(state: StateInline, silent: bool) -> bool:
    """Returns True after consuming an Obsidian `#tag` at the current position."""
    src, pos = state.src, state.pos
    if src[pos] != "#":
        return False
    before = src[pos - 1] if pos > 0 else " "
    if before in _TAG_BLOCKERS or before.isalnum() or before == "_":
        return False
    match = _TAG_RE.match(src, pos, state.posMax)
    # "#1984" is not a tag in Obsidian: a tag needs at least one non-digit character.
    if match is None or match.group(1).isdigit():
        return False
    if not silent:
        token = state.push("tag", "", 0)
        token.content = match.group(0)
        token.markup = "#"
        token.meta = {"tag": match.group(1), "line": inline_line(state, pos)}
    state.pos = match.end()
    return True


def _with_line(rule: InlineRule, token_type: str) -> InlineRule:
    """Returns `rule` wrapped to stamp `meta["line"]` on the first `token_type` it pushes."""

    def rule_with_line(state: StateInline, silent: bool) -> bool:
        start, first = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            for token in state.tokens[first:]:
                if token.type == token_type:
                    token.meta["line"] = inline_line(state, start)
                    break
        return True

    return rule_with_line


def _render_wikilink(
    renderer: object, tokens: Sequence[Token], idx: int, options: object, env: object
) -> str:
    """Returns a wikilink as HTML text: its alias, else its target (we never emit anchors)."""
    meta = tokens[idx].meta
    return _escape(meta["alias"] or meta["target"] or meta["heading"])


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def strip_comments(text: str) -> str:
    """Returns `text` with Obsidian `%% ... %%` comments removed and every newline kept.

    `%%` inside fenced or indented code (an R cell's modulo operator) or inside an inline
    code span on its line is literal, as in Obsidian. An unclosed `%%` hides the rest.
    """
    if "%%" not in text:
        return text
    lines = text.split("\n")
    code = _code_lines(text)
    in_comment = False
    for index, line in enumerate(lines):
        if index not in code and (in_comment or "%%" in line):
            lines[index], in_comment = _strip_line(line, in_comment)
    return "\n".join(lines)


def _strip_line(line: str, in_comment: bool) -> tuple[str, bool]:
    """Returns the visible part of one line and whether a comment is still open after it."""
    kept: list[str] = []
    code_run = ""  # the backtick run that opened the current code span, if any
    for part in _COMMENT_PARTS_RE.split(line):
        if part == "%%" and not code_run:
            in_comment = not in_comment
        elif in_comment:
            continue
        else:
            if part.startswith("`"):
                code_run = "" if part == code_run else (code_run or part)
            kept.append(part)
    return "".join(kept), in_comment


def _code_lines(text: str) -> set[int]:
    """Returns the 0-based indices of lines inside fenced or indented code blocks."""
    lines: set[int] = set()
    if not _MAYBE_CODE_RE.search(text):  # no fence or indent anywhere: skip the block pass
        return lines
    for token in _BLOCK_PARSER.parse(text):
        if token.type in ("fence", "code_block") and token.map:
            lines.update(range(token.map[0], token.map[1]))
    return lines


def inert(text: object) -> str:
    """Returns plain text as Markdown that Obsidian shows as that text: no link, tag, code span,
    emphasis or table cell comes alive (each markup character gets a CommonMark backslash escape)."""
    return _MARKUP_RE.sub(_escaped, " ".join(str(text).split()))


def inert_block(text: object) -> str:
    """Returns text of many lines as Markdown that shows those lines and runs nothing: `inert` on
    each line, whitespace kept, and no line opening a heading, a code fence, an HTML block or a
    setext underline. `uninert` gives the exact text back (every backslash is escaped too)."""
    lines = []
    for line in str(text).split("\n"):
        start = _BLOCK_START_RE.match(line)
        head = f"{start.group(1)}\\{start.group(2)[0]}" if start else ""
        lines.append(head + _MARKUP_RE.sub(_escaped, line[len(head) - 1 if start else 0:]))
    return "\n".join(lines)


def uninert(text: str) -> str:
    """Returns the text `inert_block` escaped (a person's edit of it, read back as plain text)."""
    return _ESCAPED_RE.sub(r"\1", text)


def _escaped(match: re.Match[str]) -> str:
    return "".join("\\" + ch for ch in match.group(0))


def plain_text(children: Sequence[Token]) -> str:
    """Returns the readable text of inline tokens: markup dropped, wikilinks shown as their
    alias (or target), embeds, images and HTML left out, whitespace collapsed."""
    parts: list[str] = []
    for token in children:
        if token.type in ("text", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif token.type == "wikilink" and not token.meta["embed"]:
            meta = token.meta
            parts.append(meta["alias"] or meta["target"] or meta["heading"])
        elif token.type == "tag":
            parts.append(token.content)
    return " ".join("".join(parts).split())


def is_link_list(children: Sequence[Token]) -> bool:
    """Returns True when an inline block holds links, embeds or tags and no prose of its own
    (a map-of-content line such as `[[A]], [[B]]` or a lone `![[image.png]]`)."""
    has_link, depth = False, 0
    for token in children:
        if token.type in ("wikilink", "tag", "image", "link_open"):
            has_link = True
        depth += {"link_open": 1, "link_close": -1}.get(token.type, 0)
        if token.type == "text" and depth == 0 and any(ch.isalnum() for ch in token.content):
            return False
    return has_link


def extract_links(tokens: Sequence[Token], offset: int = 0) -> tuple[Link, ...]:
    """Returns the wikilinks, embeds and relative markdown links of parsed tokens, in order of
    appearance, with 1-based lines (`offset` = lines above the parsed text)."""
    links: list[Link] = []
    block_line = 0
    for token in tokens:
        if token.type != "inline":
            continue
        block_line = token.map[0] if token.map else block_line
        children = token.children or []
        for index, child in enumerate(children):
            if child.type in ("wikilink", "image", "link_open"):
                line = offset + block_line + child.meta.get("line", 0) + 1
                found = _link_from_token(children, index, line)
                links += [found] if found is not None else []
    return tuple(links)


def _link_from_token(children: Sequence[Token], index: int, line: int) -> Link | None:
    """Returns the Link that children[index] stands for, or None (same-note, external)."""
    token = children[index]
    if token.type == "wikilink":
        meta = token.meta
        if not meta["target"]:  # [[#Heading]] points inside the same note
            return None
        kind = "embed" if meta["embed"] else "wikilink"
        return Link(meta["target"], line, kind, meta["heading"], meta["block"], meta["alias"])
    if token.type == "image":
        return _markdown_link(str(token.attrGet("src") or ""), line, "embed", token.content)
    label = plain_text(_link_label(children, index + 1))
    return _markdown_link(str(token.attrGet("href") or ""), line, "markdown", label)


def _link_label(children: Sequence[Token], start: int) -> list[Token]:
    """Returns the tokens from `start` up to the next link_close (a link's visible text)."""
    end = start
    while end < len(children) and children[end].type != "link_close":
        end += 1
    return list(children[start:end])


def _markdown_link(href: str, line: int, kind: str, label: str) -> Link | None:
    """Returns a Link for a relative vault path; None for URLs, schemes and `#anchors`."""
    if not href or href.startswith(("#", "//")) or _SCHEME_RE.match(href):
        return None
    # markdown-it percent-encodes hrefs, so unquoting gives back the path as written.
    location, _, fragment = href.partition("#")
    target = unquote(location.partition("?")[0])
    if not target:
        return None
    fragment = unquote(fragment)
    block = fragment[1:] if fragment.startswith("^") else ""
    heading = "" if fragment.startswith("^") else fragment
    return Link(target, line, kind, heading, block, label)


def escape_table_wikilinks(text: str) -> tuple[str, list[tuple[int, str]]]:
    """Returns `text` with the unescaped alias pipes of wikilinks in table rows escaped, and the
    (0-based line, link as written) of each link changed.

    `| [[Propiedades|propiedades]] |` is two cells to a Markdown table, in Obsidian too: its help
    says to write `[[Propiedades\\|propiedades]]` inside tables, and the rendered table shows no
    link. The writer clearly meant one, so it is kept (as if escaped) and the caller warns.
    """
    if "[[" not in text or not _TABLE_DELIMITER_RE.search(text):  # no table: skip the block pass
        return text, []
    lines, changed = text.split("\n"), []
    for index in _table_lines(text):
        if "[[" not in lines[index]:
            continue
        row, found = _escape_row(lines[index])
        if found:
            lines[index] = row
            changed += [(index, link) for link in found]
    return ("\n".join(lines), changed) if changed else (text, [])


_TABLE_DELIMITER_RE = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$", re.MULTILINE)
_ROW_WIKILINK_RE = re.compile(r"!?\[\[[^\[\]\n]*?\]\]")
_BARE_PIPE_RE = re.compile(r"(?<!\\)\|")


def _escape_row(row: str) -> tuple[str, list[str]]:
    """Returns a table row with pipes escaped inside its wikilinks (not in code spans), and those links."""
    found: list[str] = []

    def escape(match: re.Match[str]) -> str:
        link = match.group(0)
        if row.count("`", 0, match.start()) % 2 or not _BARE_PIPE_RE.search(link):
            return link  # inside a code span, or nothing to escape
        found.append(link)
        return _BARE_PIPE_RE.sub(r"\\|", link)

    return _ROW_WIKILINK_RE.sub(escape, row), found


def _table_lines(text: str) -> list[int]:
    """Returns the 0-based indices of the body rows of Markdown tables (code blocks excluded)."""
    rows: list[int] = []
    for token in _TABLE_PARSER.parse(text):
        if token.type == "tbody_open" and token.map:
            rows += range(token.map[0], token.map[1])
    return rows


# A block-level pass is all `strip_comments` needs to find code; inline parsing is skipped.
_BLOCK_PARSER = MarkdownIt("commonmark").disable("inline")
_TABLE_PARSER = MarkdownIt("commonmark").enable("table").disable("inline")
