"""A Markdown page's text as frontmatter plus body: split one, and write one back.

For the pages engram owns (the wiki's, compiler.wiki): a person's note is never written back.
Reading goes through `parse_note` (the same YAML rules as every note); this module only cuts the
text at the fences Obsidian reads and writes the YAML in a fixed key order, so the same page
gives the same bytes.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_FENCE = re.compile(r"---[ \t]*")


def split_page(text: str) -> tuple[str, str, int]:
    """Returns (the YAML between the fences, the body, the file line the body starts on, 1-based).
    A text without frontmatter (or with an unclosed fence) is all body."""
    lines = text.split("\n")
    if not _FENCE.fullmatch(lines[0]):
        return "", text, 1
    close = next((i for i in range(1, len(lines)) if _FENCE.fullmatch(lines[i])), None)
    if close is None:
        return "", text, 1
    return "\n".join(lines[1:close]), "\n".join(lines[close + 1:]), close + 2


def join_page(front: dict[str, Any], body: str) -> str:
    """Returns `front` as YAML frontmatter (keys in the order given) followed by `body`, ending in
    one newline. Values are plain JSON types; strings that YAML would read as something else
    (dates, numbers, `[[links]]`) are quoted by the dumper."""
    yaml_text = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=10_000, default_flow_style=False)
    return f"---\n{yaml_text}---\n{body.rstrip()}\n" if body.strip() else f"---\n{yaml_text}---\n"


def with_fields(text: str, fields: dict[str, Any]) -> str:
    """Returns `text` with `fields` set in its frontmatter (added at the end when missing), the
    other keys and the body as they were: how an undo stamps the revision it restores."""
    yaml_text, body, _ = split_page(text)
    try:
        front = yaml.safe_load(yaml_text) if yaml_text else {}
    except yaml.YAMLError:
        front = {}
    front = front if isinstance(front, dict) else {}
    return join_page({**front, **fields}, body)
