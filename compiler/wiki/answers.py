"""Knowledge that compounds: an answer filed back as a synthesis page, memories promoted into a page.

`file_answer` writes the answer to a question as a `synthesis` page that links the pages it was
drawn from and cites their sources (and any given directly), so lint can tell when it goes stale.
`promote_memories` gathers memories (looked up by the caller: compiler.commands.wiki_memories)
into one page that quotes each and names it by id in `memories`, linking its observation page.
Both are page writes: checked, atomic, journaled, in index.md and log.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from compiler.core.errors import InputError
from compiler.notes.markdown_rules import inert_block
from compiler.wiki.layout import WikiLayout
from compiler.wiki.navigation import plain
from compiler.wiki.page_files import find_page, load_page
from compiler.wiki.pages import resolve_sources, write_page

MAX_TITLE_FROM_QUESTION = 120


def file_answer(layout: WikiLayout, question: str, answer: str, *, pages: Sequence[str] = (),
                sources: Sequence[str] = (), title: str = "", summary: str = "", writer: str = "") -> dict[str, Any]:
    """Saves `answer` as a synthesis page; returns write_page's answer plus "based_on" (the page paths)."""
    if not question.strip() or not answer.strip():
        raise InputError("file_answer needs a question and its answer")
    used = [load_page(layout, find_page(layout, ref)) for ref in dict.fromkeys(pages)]
    cited = list(dict.fromkeys([*(s for page in used for s in page.sources), *resolve_sources(layout, sources)]))
    lines = [f"> [!question] {plain(question)}", "", answer.strip(), ""]
    if used:
        lines += ["## Based on", "", *(f"- [[{p.path[:-3]}|{_link_text(p.title)}]]" for p in used), ""]
    return {**write_page(layout, title or title_of(question), "\n".join(lines), kind="synthesis",
                         summary=summary or _first_sentence(answer), sources=cited, writer=writer),
            "based_on": [p.path for p in used]}


def promote_memories(layout: WikiLayout, memories: Sequence[Mapping[str, Any]], title: str, *, kind: str = "concept",
                     summary: str = "", intro: str = "", writer: str = "") -> dict[str, Any]:
    """Writes one page from `memories` ({"id", "title", "content", "project", "page": vault-relative
    observation page or ""}); returns write_page's answer plus "memories" (their ids)."""
    if not memories:
        raise InputError("promote_memories needs at least one memory id")
    lines = [intro.strip(), ""] if intro.strip() else []
    for memory in memories:
        heading = _link_text(str(memory.get("title") or memory["id"]))
        lines.append(f"## {heading}")
        lines.append("")
        # a memory is data (a peer's, perhaps): quoted as text, nothing in it runs or embeds in the page
        lines += [f"> {line}" if line else ">" for line in inert_block(str(memory["content"]).strip()).split("\n")]
        page = str(memory.get("page") or "")
        origin = f"[[{page[:-3]}|memory {memory['id']}]]" if page else f"memory `{memory['id']}`"
        lines += ["", f"From {origin} (project {plain(str(memory.get('project') or '-'))}).", ""]
    ids = [str(m["id"]) for m in memories]
    return {**write_page(layout, title, "\n".join(lines), kind=kind, summary=summary, memories=ids, writer=writer),
            "memories": ids}


def title_of(question: str) -> str:
    """Returns a page title made from a question: its words, no path characters, at most 120 characters."""
    words = " ".join(re.sub(r"[/\\\x00-\x1f]+", " ", question).split()).strip(" ?.!").lstrip(".")
    return words[:MAX_TITLE_FROM_QUESTION].rstrip() or "Answer"


def _first_sentence(text: str) -> str:
    first = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    return first[:200]


def _link_text(text: str) -> str:
    return plain(re.sub(r"[\[\]|#^]+", " ", text))
